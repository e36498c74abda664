"""Unit tests of the discord.py agent's choices (run by tests/real_agents.rs): how a reply is split and signed, and
which calls are answered. `python -m unittest test_agent` in this folder, with the agent's virtual environment."""

import asyncio
import os
import tempfile
import time
import unittest

from agent import MESSAGE_LIMIT, Calls, run_command, server_base, with_signal

SIGNAL = "TURN_COMPLETE"
CHANNEL, MANAGER = 10, 20


class WithSignal(unittest.TestCase):
    def test_the_server_is_given_as_its_address_or_its_api_url(self):
        for given in ["http://127.0.0.1:3710", "http://127.0.0.1:3710/", "http://127.0.0.1:3710/api/v10",
                      "http://127.0.0.1:3710/api/v10/", "http://127.0.0.1:3710/api"]:
            self.assertEqual(server_base(given), "http://127.0.0.1:3710", given)

    def test_a_short_reply_ends_with_the_signal_once(self):
        self.assertEqual(with_signal("Done.\n", SIGNAL), ["Done.\n\nTURN_COMPLETE"])
        self.assertEqual(with_signal("Done. TURN_COMPLETE", SIGNAL), ["Done.\n\nTURN_COMPLETE"])
        self.assertEqual(with_signal("  ", SIGNAL), ["TURN_COMPLETE"])

    def test_a_long_reply_is_split_within_the_limit_and_only_the_last_part_ends_with_the_signal(self):
        parts = with_signal("x" * 4500, SIGNAL)
        self.assertTrue(all(len(p) <= MESSAGE_LIMIT for p in parts), [len(p) for p in parts])
        self.assertEqual("".join(parts).removesuffix("\n\nTURN_COMPLETE"), "x" * 4500)
        self.assertTrue(parts[-1].endswith(SIGNAL))

    def test_the_signal_word_in_the_text_never_ends_a_part_before_the_last(self):
        # The word in the reply's text, right at a cut: that part would end the turn early.
        text = "y" * (MESSAGE_LIMIT - len(SIGNAL)) + SIGNAL + " and more words after it"
        parts = with_signal(text, SIGNAL)
        self.assertTrue(all(not p.rstrip().endswith(SIGNAL) for p in parts[:-1]), parts)
        self.assertEqual("".join(parts).removesuffix("\n\nTURN_COMPLETE"), text)

    def test_a_reply_that_fits_only_without_the_signal_is_followed_by_the_signal_alone(self):
        parts = with_signal("z" * MESSAGE_LIMIT, SIGNAL)
        self.assertEqual(parts, ["z" * MESSAGE_LIMIT, SIGNAL])

    def test_a_long_reply_is_cut_at_a_line_break_so_that_no_signal_line_is_cut_in_two(self):
        # Found by a review: cut at 2,000 characters, a signal in the text (a preset's, the word left empty) was
        # split in two, and neither part carried it.
        text = "y" * 1990 + '\n<signal type="context_sufficient">ok</signal>'
        parts = with_signal(text, "")
        self.assertEqual(parts, ["y" * 1990 + "\n", '<signal type="context_sufficient">ok</signal>'])
        words = ("words " * 500).strip()  # 2,000 is no multiple of 6: a cut at the limit falls inside a word
        parts = with_signal(words, SIGNAL)
        self.assertTrue(all(p.endswith(" ") for p in parts[:-1]), [p[-5:] for p in parts])
        self.assertEqual("".join(parts).removesuffix("\n\nTURN_COMPLETE"), words)
        # A break early in the window is not taken: no short part, no blank one (Discord refuses those).
        for text in ["x" * 1999 + " \n\n" + "y" * 2500, "PASS\n" + "z" * 2500, "Sure!\n" + "w" * 2500]:
            parts = with_signal(text, SIGNAL, "PASS")
            self.assertTrue(all(len(p.strip()) >= MESSAGE_LIMIT // 2 for p in parts[:-1]), [len(p) for p in parts])
            self.assertEqual("".join(parts).removesuffix("\n\nTURN_COMPLETE"), text)

    def test_an_answer_that_only_passes_is_posted_as_it_is_when_a_pass_word_is_set(self):
        # Found by a review: "PASS" went out as "PASS\n\nTURN_COMPLETE", which completes the turn instead.
        self.assertEqual(with_signal(" PASS\n", SIGNAL, "PASS"), ["PASS"])
        self.assertEqual(with_signal("PASS on this one", SIGNAL, "PASS"), ["PASS on this one\n\nTURN_COMPLETE"])
        self.assertEqual(with_signal("PASS", SIGNAL), ["PASS\n\nTURN_COMPLETE"], "without it, the turn completes")

    def test_without_a_signal_word_the_output_is_posted_as_written(self):
        chorus = "Here is my part.\n<chorus>COMPLETE</chorus>"
        self.assertEqual(with_signal(chorus, ""), [chorus])
        self.assertEqual(with_signal("", ""), [], "nothing to post")


class CallsAnswered(unittest.TestCase):
    def test_a_call_is_answered_while_it_is_its_callers_newest(self):
        calls = Calls()
        self.assertTrue(calls.heard(CHANNEL, MANAGER, 100, True, True))
        self.assertTrue(calls.current(CHANNEL, MANAGER, 100))
        # The manager's message without a mention (a timeout notice) moves nothing.
        self.assertFalse(calls.heard(CHANNEL, MANAGER, 101, False, False))
        self.assertTrue(calls.current(CHANNEL, MANAGER, 100))

    def test_the_floor_given_to_another_makes_a_pending_answer_stale(self):
        calls = Calls()
        calls.heard(CHANNEL, MANAGER, 100, True, True)
        self.assertFalse(calls.heard(CHANNEL, MANAGER, 105, True, False), "another persona's call")
        self.assertFalse(calls.current(CHANNEL, MANAGER, 100))

    def test_of_two_calls_only_the_newer_is_answered_and_other_channels_do_not_interfere(self):
        calls = Calls()
        calls.heard(CHANNEL, MANAGER, 100, True, True)
        calls.heard(CHANNEL + 1, MANAGER, 103, True, False)
        self.assertTrue(calls.current(CHANNEL, MANAGER, 100), "another channel's turn start")
        calls.heard(CHANNEL, MANAGER, 104, True, True)
        self.assertFalse(calls.current(CHANNEL, MANAGER, 100))
        self.assertTrue(calls.current(CHANNEL, MANAGER, 104))

    def test_a_message_delivered_twice_is_one_call(self):
        calls = Calls()
        self.assertTrue(calls.heard(CHANNEL, MANAGER, 100, True, True))
        self.assertFalse(calls.heard(CHANNEL, MANAGER, 100, True, True), "delivered again after a reconnect")


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie waiting to be reaped does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Command(unittest.TestCase):
    def test_a_command_past_its_time_is_killed_with_what_it_started(self):
        with tempfile.TemporaryDirectory() as folder:
            pid_file = os.path.join(folder, "child")
            command = ["sh", "-c", f"sleep 30 & echo $! > {pid_file}; wait"]
            self.assertIsNone(asyncio.run(run_command(command, "", 0.5)))
            with open(pid_file) as f:
                child = int(f.read())
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(child), "the command's own child was killed too")

    def test_the_output_of_a_command_that_succeeds_is_returned(self):
        self.assertEqual(asyncio.run(run_command(["sh", "-c", "wc -l"], "a\nb\n", 10)).strip(), "2")


if __name__ == "__main__":
    unittest.main()

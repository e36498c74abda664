#!/usr/bin/env python3
"""A turn-manager agent written with discord.py.

When the manager mentions it, it shows typing, runs the command given on its command line with the conversation so
far on standard input, posts what the command printed, and ends its turn with TURN_COMPLETE. A call overtaken by a
newer message of its caller that mentions anyone (the floor moved on, or the agent was called again) is not answered:
that answer would come after its turn (shown as a late reply that moves nothing at best, removed as out of turn if
the agent spoke since), or answer an old call. Any model CLI plugs in:

    DISCORD_TOKEN=... python agent.py -- my-model-cli --system "You are the PM"

Environment:
    DISCORD_TOKEN      the agent's bot token (required; never logged, not passed to the command)
    DISCORD_API_BASE   a Discord-compatible server, e.g. http://127.0.0.1:3710 (the sandbox); unset: Discord
    AGENT_MANAGER_ID   answer only mentions by this user id (the manager's); unset: any mention
    AGENT_HISTORY      how many recent messages the command reads (default 50)
    AGENT_TIMEOUT      seconds the command may take (default 300); past it, nothing is posted
    AGENT_SIGNAL       what ends the last message (default TURN_COMPLETE); empty: the command writes its own signal
                       (the chorus, xml-signals and review-workflow presets), and its output is posted as it is
    AGENT_PASS         an answer that is only this word is posted as it is, without AGENT_SIGNAL (the round-robin
                       preset's PASS); unset: none
"""

import asyncio
import json
import logging
import os
import signal
import sys
import urllib.request
from collections import OrderedDict

import discord
import yarl

MESSAGE_LIMIT = 2000  # Discord's longest message, in characters
IDS_KEPT = 1000  # message ids remembered, so that a message delivered twice (around a reconnect) is answered once

log = logging.getLogger("agent")


def server_base(base: str) -> str:
    """The server's address, given as it or as its API URL (`sandbox.json`'s `apiUrl`, ending in `/api/v10`), as the
    manager's `--api-base` takes it."""
    base = base.strip().rstrip("/")
    for api in ("/api/v10", "/api"):
        if base.endswith(api):
            return base[: -len(api)]
    return base


def point_at(base: str) -> None:
    """Sends every REST call and the gateway connection to a Discord-compatible server instead of Discord."""
    base = server_base(base)
    with urllib.request.urlopen(f"{base}/api/v10/gateway", timeout=10) as answer:
        gateway = json.load(answer)["url"]
    # The two lines that point discord.py at another server:
    discord.http.Route.BASE = f"{base}/api/v10"
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)


def with_signal(reply: str, signal_word: str, pass_word: str = "") -> list[str]:
    """The messages that carry `reply`, each within Discord's limit, the last one ending with `signal_word` (when
    set; nothing for an empty reply without it). A part ends at a line break (else a space) in the second half of
    the limit where it can, so that no line, a signal written in the text among them, is cut in two, and no part is
    short or blank. No part but the last ends with the word: a cut that would leave the word (in the reply's text)
    at a part's end is made before the word. An answer that is only `pass_word` (when set: the round-robin preset's
    PASS) is posted as it is: with the word after it, it would not pass."""
    body = reply.strip()
    if pass_word and body == pass_word:
        return [body]
    if signal_word and body.endswith(signal_word):
        body = body[: -len(signal_word)].rstrip()
    suffix = (f"\n\n{signal_word}" if body else signal_word) if signal_word else ""
    parts = []
    while body and len(body) + len(suffix) > MESSAGE_LIMIT:
        window = body[:MESSAGE_LIMIT]
        half = MESSAGE_LIMIT // 2
        cut = next((at + 1 for at in (window.rfind("\n", half), window.rfind(" ", half)) if at > 0), len(window))
        head = body[:cut].rstrip()
        if signal_word and head.endswith(signal_word) and len(head) > len(signal_word):
            cut = len(head) - len(signal_word)
        parts.append(body[:cut])
        body = body[cut:]
    last = body + suffix if body else signal_word
    return parts + [last] if last else parts


class Calls:
    """Which calls to answer. A call is a message that mentions this agent; a caller's newest message that mentions
    anyone is its current one, and only a current call is answered (checked before the command runs and before the
    answer is posted). Each message id counts once."""

    def __init__(self) -> None:
        self.newest: dict[tuple[int, int], int] = {}  # (channel, caller) -> newest message id mentioning anyone
        self.seen: OrderedDict[int, None] = OrderedDict()

    def heard(self, channel: int, caller: int, message_id: int, mentions_anyone: bool, calls_me: bool) -> bool:
        """Notes a message; whether it is a new call to answer."""
        if message_id in self.seen:
            return False
        self.seen[message_id] = None
        if len(self.seen) > IDS_KEPT:
            self.seen.popitem(last=False)
        if mentions_anyone:
            key = (channel, caller)
            self.newest[key] = max(self.newest.get(key, 0), message_id)
        return calls_me

    def current(self, channel: int, caller: int, message_id: int) -> bool:
        """Whether this call is still its caller's newest."""
        return self.newest.get((channel, caller)) == message_id


async def run_command(command: list[str], conversation: str, timeout: float) -> str | None:
    """What `command` prints for `conversation` on its standard input; None if it fails or takes too long (then its
    whole process group is killed, so that nothing it started keeps running)."""
    env = {k: v for k, v in os.environ.items() if k != "DISCORD_TOKEN"}
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env, start_new_session=True
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(conversation.encode()), timeout)
    except asyncio.TimeoutError:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await process.wait()
        log.warning("the command took longer than %ss; nothing is posted", timeout)
        return None
    if process.returncode != 0:
        log.warning("the command failed with exit code %s; nothing is posted", process.returncode)
        return None
    return out.decode(errors="replace")


class Agent(discord.Client):
    def __init__(
        self, command: list[str], manager_id: int | None, history: int, timeout: float, signal_word: str, pass_word: str
    ):
        intents = discord.Intents.default()
        intents.message_content = True
        super().__init__(intents=intents, allowed_mentions=discord.AllowedMentions.none())
        self.command, self.manager_id, self.history, self.timeout = command, manager_id, history, timeout
        self.signal_word, self.pass_word = signal_word, pass_word
        self.calls = Calls()
        self.turns = asyncio.Lock()  # one answer at a time, in the order the calls came

    async def on_ready(self) -> None:
        log.info("ready as %s (%s)", self.user, self.user.id)

    async def on_message(self, message: discord.Message) -> None:
        me = self.user
        if message.author.id == me.id:
            return
        if self.manager_id is not None and message.author.id != self.manager_id:
            return
        calls_me = any(user.id == me.id for user in message.mentions)
        key = (message.channel.id, message.author.id, message.id)
        if not self.calls.heard(*key, bool(message.mentions), calls_me):
            return
        async with self.turns:
            if not self.calls.current(*key):
                log.info("call %s overtaken by a newer one of its caller; not answered", message.id)
                return
            async with message.channel.typing():
                recent = [m async for m in message.channel.history(limit=self.history)]
                conversation = "".join(f"{m.author.display_name}: {m.clean_content}\n" for m in reversed(recent))
                reply = await run_command(self.command, conversation, self.timeout)
            if reply is None:
                return
            if not self.calls.current(*key):
                log.info("the floor moved on while call %s was answered; nothing is posted", message.id)
                return
            for part in with_signal(reply, self.signal_word, self.pass_word):
                await message.channel.send(part)


def main() -> int:
    command = sys.argv[1:]
    if command and command[0] == "--":
        command = command[1:]
    token = os.environ.get("DISCORD_TOKEN", "").strip()
    if not command or not token:
        print("usage: DISCORD_TOKEN=... [DISCORD_API_BASE=...] agent.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    base = os.environ.get("DISCORD_API_BASE")
    if base:
        point_at(base)
    manager = os.environ.get("AGENT_MANAGER_ID")
    agent = Agent(
        command,
        int(manager) if manager else None,
        int(os.environ.get("AGENT_HISTORY", "50")),
        float(os.environ.get("AGENT_TIMEOUT", "300")),
        os.environ.get("AGENT_SIGNAL", "TURN_COMPLETE").strip(),
        os.environ.get("AGENT_PASS", "").strip(),
    )
    agent.run(token.removeprefix("Bot "), root_logger=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

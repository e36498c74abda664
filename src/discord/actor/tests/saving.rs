//! Saving: a durable save that fails is retried and its effects carried out once; activity is saved lazily; a save
//! refused because another process took the channel over stops the actor without a word.

use super::*;

// --- saving fails (a full disk, a read-only folder, the writer gone): held back, then carried out ----------------

/// pm signals while the disk is full for the signal's save and the next two tries.
async fn signalled_while_the_disk_is_full() -> Harness {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.saver.fail_next_durable_saves(3);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    h
}

#[tokio::test(start_paused = true)]
async fn a_signal_whose_save_fails_is_announced_once_after_a_retry_saves_it_with_one_notice() {
    let h = signalled_while_the_disk_is_full().await;
    assert_eq!(h.floors(A, "dev"), 0, "not on disk, so not announced");
    // No other input comes: the actor tries again by itself (after 1, 2 and 4 s). Sleeping lets the paused clock
    // wake each timer in turn.
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    let lines = h.journal.of(A);
    assert_eq!(lines.iter().filter(|l| l.starts_with("failed to save")).count(), 3, "{lines:#?}");
    assert_eq!(h.floors(A, "dev"), 1, "{lines:#?}");
    assert_eq!(h.events(A, "turn_complete"), 1, "the signal's event is saved once, with the retry");
    assert!(lines.iter().any(|l| l == &format!("repost {A} PM: Done. -> ok")), "{lines:#?}");
    let notices = lines.iter().filter(|l| l.starts_with("notice") && l.contains("sav")).count();
    assert_eq!(notices, 1, "{lines:#?}");
    assert!(h.session(A).await.outbox.is_empty(), "everything held back was carried out");
}

#[tokio::test(start_paused = true)]
async fn activity_while_a_failed_save_waits_is_not_saved_apart_from_the_turn_change_and_its_events() {
    let h = signalled_while_the_disk_is_full().await;
    // dev speaks while the signal's save waits for its retry: activity, saved lazily as a rule.
    h.deliver(A, &h.written(DEV, "Reading the task.", 1_200));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // A lazy copy holding dev's floor would put the turn change and its outbox in the store without its event: a
    // process taking the channel over would carry out the effects with `turn_complete` never in the history.
    if let Some(lazy) = h.saver.last_lazy.lock().unwrap().clone() {
        assert_eq!(lazy.active_agent.as_ref().map(|p| p.as_str()), Some("pm"), "{lazy:?}");
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    let saved = h.saver.saved.lock().unwrap()[&A].clone();
    assert!(saved.agents[&crate::core::ids::PersonaId::parse("dev").unwrap()].last_activity.is_some(), "{saved:?}");
}

#[tokio::test(start_paused = true)]
async fn a_failing_save_is_not_said_in_a_channel_this_process_may_no_longer_hold_until_it_is_sure_of_it_again() {
    for fails in [1, 2] {
        let h = Harness::new();
        h.start(A).await;
        h.settle(A).await;
        // The database is out of reach, for longer than a lease: another process may run the channel by now.
        h.saver.lease_unsure.store(true, Ordering::Relaxed);
        h.saver.fail_next_durable_saves(fails);
        h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
        h.settle(A).await;
        let notices = || h.journal.of(A).iter().filter(|l| l.starts_with("notice")).count();
        assert_eq!(notices(), 0, "{:#?}", h.journal.of(A));
        // A renewal works again: the channel is this process's after all. A retry that still fails says so now.
        h.saver.lease_unsure.store(false, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(4)).await;
        h.settle(A).await;
        let lines = h.journal.of(A);
        assert_eq!(lines.iter().filter(|l| l.starts_with("failed to save")).count(), fails as usize, "{lines:#?}");
        assert_eq!(notices(), fails as usize - 1, "{fails} failed saves: {lines:#?}");
        assert_eq!(h.floors(A, "dev"), 1, "what was held back goes out: {lines:#?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_running_session_whose_actor_a_command_starts_reads_what_was_missed_before_ending_a_turn() {
    // Another process ran the channel and died (or released it at a rolling deploy); before this process's lease
    // round takes the channel over, someone asks for `status` here.
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    let signal = h.written(PM, "Done while no one ran the channel. TURN_COMPLETE", 30_000);
    h.router.shutdown().await;
    tokio::time::advance(Duration::from_secs(90)).await;
    let here = h.restarted();
    here.rest.history.lock().unwrap().insert(A, vec![signal]);
    assert!(here.session(A).await.is_active(), "status starts an actor that loads the running session");
    for _ in 0..3 {
        here.settle(A).await;
    }
    assert_eq!(here.events(A, "turn_timeout"), 0, "no turn ends blind: {:#?}", here.journal.of(A));
    assert_eq!(here.events(A, "turn_complete"), 1, "pm's signal, written in time, is read");
}

#[tokio::test(start_paused = true)]
async fn a_takeover_that_crossed_a_new_actors_claim_leaves_that_actor_running() {
    // The lease round found the channel left just before a command started an actor that claimed it: the round's
    // answer comes after the claim, so the new actor is told of a takeover while it holds the lease.
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    assert!(!h.router.take_over(A), "an actor runs");
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 2_000));
    h.settle_until_holder(A, "dev").await;
    assert_eq!(h.floors(A, "dev"), 1, "the actor went on: {:#?}", h.journal.of(A));
}

// --- activity is saved lazily: a bounded number of copies, on disk within a second (spec 9) ----------------------

#[tokio::test(start_paused = true)]
async fn a_burst_of_activity_is_saved_lazily_a_bounded_number_of_times_and_soon_enough() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    let before = h.saver.lazy_saves.load(Ordering::Relaxed);
    // pm streams 100 messages without a signal over one second: activity only, nothing durable.
    let mut last = None;
    for i in 0..100 {
        let message = h.written(PM, &format!("part {i}"), 10 * i);
        h.deliver(A, &message);
        last = Some(message.id);
        tokio::time::advance(Duration::from_millis(10)).await;
    }
    h.router.ask(A, Input::Snapshot).await;
    let during = h.saver.lazy_saves.load(Ordering::Relaxed) - before;
    assert!(during <= 5, "{during} copies of the session for one second of activity");
    // The newest is handed to the writer within its share of the second (the writer's delay is the rest).
    tokio::time::sleep(Duration::from_millis(250)).await;
    let saved = h.saver.last_lazy.lock().unwrap().clone().expect("saved lazily");
    assert_eq!(saved.last_message_id, last);
    assert_eq!(h.events(A, "turn_complete") + h.events(A, "turn_timeout"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_session_started_again_after_its_actor_retired_is_announced() {
    let h = Harness::new();
    h.start(A).await;
    h.command(A, Command::Stop).await;
    h.settle(A).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(h.router.channels().is_empty(), "retired");
    // The disk still shows the stop's announcement as undone (its report was saved lazily, not yet written): the
    // next actor carries it out again, then the new session's effects must follow.
    h.start(A).await;
    h.settle(A).await;
    assert_eq!(h.floors(A, "pm"), 2, "{:#?}", h.journal.of(A));
    assert!(h.session(A).await.outbox.is_empty());
}

// --- another process took the channel over (a shared store's fenced lease): nothing more is said here ------------

#[tokio::test(start_paused = true)]
async fn a_save_fenced_by_another_process_stops_the_actor_without_announcing_or_retrying_or_a_notice() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    let before = h.journal.of(A).len();
    h.saver.taken_over.store(true, Ordering::Relaxed);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    tokio::time::sleep(Duration::from_secs(60)).await; // no retry timer, no deadline acts either
    h.settle(A).await;
    let lines = h.journal.of(A);
    assert_eq!(lines.iter().filter(|l| l.starts_with("fenced save")).count(), 1, "tried once: {lines:#?}");
    assert_eq!(h.floors(A, "dev"), 0, "{lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with("notice")), "no notice: {lines:#?}");
    let after: Vec<&String> = lines[before..].iter().filter(|l| !l.starts_with("fenced save")).collect();
    assert!(after.is_empty(), "nothing more done in the channel (no repost, no announcement): {after:#?}");
}

/// A slash command whose save another process refused (it took the channel over) did not happen, and that process
/// never saw it: its author is told so, not "done". A `!turn` message the process now holding the channel reads and
/// runs itself: nothing is said of it here (told to give it again, its author would have it run twice).
#[tokio::test(start_paused = true)]
async fn a_slash_command_whose_save_was_fenced_is_answered_not_done_and_a_typed_one_is_left_to_the_new_holder() {
    for interaction in [true, false] {
        let h = Harness::new();
        h.start(A).await;
        h.settle(A).await;
        h.saver.taken_over.store(true, Ordering::Relaxed);
        pause_answered_only_as_a_slash_command(&h, interaction, "another process of the bot took this channel over")
            .await;
    }
}

/// `pause` given in channel A, as a slash command or typed: only a slash command is answered, with a refusal that
/// says `said` (a typed one is read back by whoever runs the channel next).
async fn pause_answered_only_as_a_slash_command(h: &Harness, interaction: bool, said: &str) {
    let origin = h.id_at(h.clock.now());
    let give = move |reply| Input::command_given(Command::Pause, Some(origin), Some(reply), interaction);
    match h.router.ask(A, give).await.expect("answered") {
        Err(refusal) => {
            assert!(interaction, "a typed command is not answered: {refusal:?}");
            assert!(refusal.0.contains(said), "{refusal:?}");
        }
        Ok(()) => assert!(!interaction, "a slash command is told {said:?}"),
    }
}

/// Found by a review: a slash command taken while saves failed was answered "Done.", yet a stop before a save worked
/// lost it, and unlike a `!turn` message no start reads it back. It is told so; it still takes effect once saved.
#[tokio::test(start_paused = true)]
async fn a_slash_command_whose_save_failed_is_answered_not_saved_yet_and_takes_effect_once_a_save_works() {
    for interaction in [true, false] {
        let h = Harness::new();
        h.start(A).await;
        h.settle(A).await;
        h.saver.fail_next_durable_saves(1);
        pause_answered_only_as_a_slash_command(&h, interaction, "Not saved yet").await;
        assert_eq!(
            h.saver.saved.lock().unwrap()[&A].status,
            crate::core::session::SessionStatus::Running,
            "not on disk yet"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        h.settle(A).await;
        assert_eq!(
            h.saver.saved.lock().unwrap()[&A].status,
            crate::core::session::SessionStatus::Paused,
            "saved by the retry"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_fenced_save_abandons_what_the_sender_still_had_to_do() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    let before = h.journal.of(A).len();
    // pm's signal is saved and handed to the sender, whose repost meets server errors for a while...
    h.rest.fail(A, "repost", vec![status(503); 5]);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    tokio::time::sleep(Duration::from_millis(100)).await;
    // ... meanwhile another process takes the channel over (and carries out the saved outbox itself).
    h.saver.taken_over.store(true, Ordering::Relaxed);
    h.router.deliver(A, Input::command(Command::Pause, Some(h.id_at(h.clock.now())), None));
    tokio::time::sleep(Duration::from_secs(120)).await;
    let lines = h.journal.of(A).split_off(before);
    assert!(lines.iter().any(|l| l.starts_with("fenced save")), "{lines:#?}");
    let done_here = |l: &&String| l.ends_with("-> ok") && (l.starts_with("repost") || l.starts_with("announce"));
    assert_eq!(lines.iter().filter(done_here).count(), 0, "nothing posted after the takeover: {lines:#?}");
}

#[tokio::test(start_paused = true)]
async fn a_channel_taken_over_again_after_its_lease_was_lost_acts_on_the_session_as_saved_not_as_remembered() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // This process lost the lease at a renewal (its actor lives on, stale); another process took the channel,
    // moved the floor to dev and died. Its lease expired, so this process takes the channel over.
    let mut theirs = h.saver.saved.lock().unwrap()[&A].clone();
    theirs.active_agent = Some(crate::core::ids::PersonaId::parse("dev").unwrap());
    h.saver.saved.lock().unwrap().insert(A, theirs);
    let claims = || h.saver.leases.lock().unwrap().iter().filter(|(c, what)| *c == A && *what == "claim").count();
    h.saver.lease_lost.store(true, Ordering::Relaxed);
    assert!(!h.router.take_over(A), "not while the stale actor runs");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(claims(), 1, "no second actor claimed the channel beside the stale one");
    // The next round: the stale actor has stopped.
    assert!(h.router.take_over(A));
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.settle(A).await;
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"), "read afresh from the store");
    assert_eq!(claims(), 2, "claimed again under a new epoch");
    // One actor acts on the channel: dev's signal ends one turn, announced once.
    h.deliver(A, &h.written(DEV, "Done. TURN_COMPLETE", 2_000));
    h.settle_until_holder(A, "critic").await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.floors(A, "critic"), 1, "{:#?}", h.journal.of(A));
}

#[tokio::test(start_paused = true)]
async fn a_channel_another_process_holds_is_not_acted_on_here() {
    let h = Harness::new();
    h.saver.taken_over.store(true, Ordering::Relaxed);
    h.router.deliver_or_start(A, Input::command(Command::Start { roster: vec![] }, None, None));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(h.journal.of(A).is_empty(), "{:#?}", h.journal.of(A));
    assert_eq!(h.floors(A, "pm"), 0);
}

/// A session running with pm on the floor, saved by a process that then stopped: another one takes it over.
async fn left_running_by_another_process() -> Harness {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.router.shutdown().await;
    h.restarted()
}

#[tokio::test(start_paused = true)]
async fn a_channel_taken_over_while_the_store_cannot_be_read_waits_for_its_session_rather_than_starting_blank() {
    let other = left_running_by_another_process().await;
    // Its first reads of the session fail (a pool timeout, the database out for a moment).
    other.saver.failing_loads.store(3, Ordering::Relaxed);
    let loads = || other.journal.lines().iter().filter(|l| **l == format!("load {A}")).count();
    let loads_before = loads();
    assert!(other.router.take_over(A));
    tokio::time::sleep(Duration::from_secs(u64::from(TURN_SECONDS) + 30)).await;
    other.settle(A).await;
    assert_eq!(loads() - loads_before, 4, "read again until it could be: {:#?}", other.journal.of(A));
    assert_eq!(other.events(A, "turn_timeout"), 1, "pm's turn timed out as saved: {:#?}", other.journal.of(A));
    assert_eq!(other.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn a_saved_session_this_build_cannot_read_is_left_as_it_is_and_commands_are_told_why() {
    let other = left_running_by_another_process().await;
    let saved = other.saver.saved.lock().unwrap()[&A].clone();
    other.saver.undecodable.lock().unwrap().push(A);
    let before = other.journal.of(A).len();
    let (reply, answer) = tokio::sync::oneshot::channel();
    other.router.deliver_or_start(A, Input::command(Command::Start { roster: vec![] }, None, Some(reply)));
    let refusal = answer.await.expect("answered").expect_err("refused");
    assert!(refusal.0.contains("cannot be read"), "{}", refusal.0);
    tokio::time::sleep(Duration::from_secs(u64::from(TURN_SECONDS) + 30)).await;
    assert_eq!(other.saver.saved.lock().unwrap()[&A], saved, "the saved session is left as it is");
    let lines = other.journal.of(A).split_off(before);
    assert!(lines.is_empty(), "nothing saved, said or read in the channel: {lines:#?}");
    let leases = other.saver.leases.lock().unwrap().clone();
    assert_eq!(leases.last(), Some(&(A, "let go")), "the lease is let go for a build that can read it: {leases:?}");
}

#[tokio::test(start_paused = true)]
async fn a_session_that_cannot_be_read_for_half_a_minute_is_left_for_now_and_the_command_waiting_told_so() {
    let other = left_running_by_another_process().await;
    other.saver.failing_loads.store(100, Ordering::Relaxed);
    let (reply, answer) = tokio::sync::oneshot::channel();
    other.router.deliver_or_start(A, Input::command(Command::Pause, None, Some(reply)));
    let refusal = tokio::time::timeout(Duration::from_secs(60), answer).await.expect("answered within a minute");
    let refusal = refusal.expect("answered").expect_err("refused");
    assert!(refusal.0.contains("Try again in a moment"), "{}", refusal.0);
    let leases = other.saver.leases.lock().unwrap().clone();
    assert_eq!(leases.last(), Some(&(A, "let go")), "not held while nothing acts on it: {leases:?}");
    // The database is back: the next command starts the channel again, from the session as saved.
    other.saver.failing_loads.store(0, Ordering::Relaxed);
    other.settle(A).await;
    assert_eq!(other.holder(A).await.as_deref(), Some("pm"));
}

//! Catching up: what was missed is read first (held live inputs, failing reads, the reorder window, one page at a time).

use super::*;
use crate::core::ids::GuildId;
use crate::core::session::SessionStatus;
use crate::core::shards::{Shard, ShardRange};
use crate::discord::shards_up::ShardsUp;

/// The history reads the channel made (each page, as the fake network journals it).
fn reads(h: &Harness, channel: ChannelId) -> usize {
    h.journal.of(channel).iter().filter(|line| line.starts_with("read")).count()
}

#[tokio::test(start_paused = true)]
async fn a_signal_overtaken_by_a_newer_message_just_before_a_crash_is_read_by_the_catch_up_after_it() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // pm's signal is overtaken by dev's newer message (each gateway event has its own task), then the bot dies.
    let signal = h.written(PM, "Done. TURN_COMPLETE", 5_000);
    let newer = h.written(DEV, "me next?", 5_050);
    h.deliver(A, &newer);
    h.settle(A).await;
    assert_eq!(h.events(A, "out_of_turn"), 1);
    let saved = h.saver.saved.lock().unwrap()[&A].clone();
    h.router.shutdown().await;
    tokio::time::advance(Duration::from_secs(90)).await;

    let restarted = h.restarted();
    restarted.rest.history.lock().unwrap().insert(A, vec![signal.clone(), newer.clone()]);
    let saved: Session = serde_json::from_str(&serde_json::to_string(&saved).unwrap()).unwrap();
    restarted.router.resume(vec![saved]);
    restarted.router.broadcast(|| Input::CatchUp(None));
    restarted.settle(A).await;
    assert_eq!(restarted.events(A, "turn_complete"), 1, "the overtaken signal ended pm's turn");
    assert_eq!(restarted.events(A, "turn_timeout"), 0);
    assert_eq!(restarted.events(A, "out_of_turn"), 1, "dev's message, handled before the crash, is not judged again");
    assert_eq!(restarted.holder(A).await.as_deref(), Some("dev"));
}

// --- a catch-up meets a failing Discord: the range is read in the end, never skipped ------------------------------

/// Started, pm holding the floor; the bot lost the gateway at t0 and pm signalled at 30 s, before its 60 s deadline,
/// while the bot could not see. Answers the signal, which only the catch-up's page shows.
async fn signal_missed_while_disconnected(h: &Harness) -> IncomingMessage {
    h.start(A).await;
    h.settle(A).await;
    h.router.broadcast(|| Input::Disconnected(None));
    let signal = h.written(PM, "Done while you were away. TURN_COMPLETE", 30_000);
    h.rest.history.lock().unwrap().insert(A, vec![signal.clone()]);
    tokio::time::advance(Duration::from_secs(90)).await;
    signal
}

#[tokio::test(start_paused = true)]
async fn a_catch_up_whose_reads_fail_for_a_while_holds_the_deadline_until_the_page_is_read() {
    let h = Harness::new();
    let signal = signal_missed_while_disconnected(&h).await;
    // Discord answers 503 to the history reads for about 15 s (backing off 0.5, 1, 2, 4, 8 s).
    h.rest.fail(A, "read", vec![status(503); 5]);
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(h.stats.snapshot().timeouts, 0, "the deadline waits while the missed range is unread");
    tokio::time::sleep(Duration::from_secs(30)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
    assert!(h.session(A).await.has_handled(signal.id));
}

#[tokio::test(start_paused = true)]
async fn a_catch_up_failing_longer_than_the_retry_policy_tries_again_later_and_never_skips_the_range() {
    let h = Harness::new();
    signal_missed_while_disconnected(&h).await;
    // Discord is down for the history reads for well over the 10 minutes one call is retried.
    h.rest.fail(A, "read", vec![status(502); 40]);
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::sleep(Duration::from_secs(15 * 60)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(h.stats.snapshot().timeouts, 0, "still waiting for the range");
    tokio::time::sleep(Duration::from_secs(15 * 60)).await;
    h.settle(A).await;
    let reads = reads(&h, A);
    assert!(reads > 40, "read until it worked: {reads} reads");
    // The later turns (nobody speaks) time out; pm's, whose signal was on the page, completed.
    let saves: Vec<String> = h.journal.of(A).into_iter().filter(|l| l.starts_with("save")).collect();
    let first_end = saves.iter().find(|l| l.contains("turn_complete") || l.contains("turn_timeout"));
    assert!(first_end.is_some_and(|l| l.contains("turn_complete")), "{saves:#?}");
    assert_eq!(h.events(A, "turn_complete"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_catch_up_refused_for_good_ends_and_lets_the_deadline_run() {
    let h = Harness::new();
    signal_missed_while_disconnected(&h).await;
    // Read Message History was taken away: waiting would hold the channel forever.
    h.rest.fail(A, "read", vec![status(403); 3]);
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.settle(A).await;
    let reads = reads(&h, A);
    assert_eq!(reads, 1, "a refusal is not retried, nor the edited messages read after it");
    assert_eq!(h.events(A, "turn_timeout"), 1, "the overdue turn ends");
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

// --- live inputs wait for the catch-up: missed messages first, then what came live (spec 8) ---------------------

#[tokio::test(start_paused = true)]
async fn a_live_message_after_the_deadline_waits_for_the_catch_up_whose_page_holds_the_in_time_signal() {
    let h = Harness::new();
    signal_missed_while_disconnected(&h).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    h.router.broadcast(|| Input::CatchUp(None));
    // While the page is being read, someone writes (after pm's deadline), and it is delivered live.
    tokio::time::advance(Duration::from_secs(1)).await;
    h.deliver(A, &h.written(HUMAN, "anyone there?", 91_000));
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

/// Found by a review: a message on a page still being read when someone deleted it had its relay decided by the
/// page, carried out before the held deletion was handled.
#[tokio::test(start_paused = true)]
async fn a_message_deleted_while_its_page_is_read_is_not_reposted() {
    let h = Harness::new();
    let signal = signal_missed_while_disconnected(&h).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::advance(Duration::from_secs(1)).await;
    h.router.deliver(A, Input::Deleted(signal.id));
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    let lines = h.journal.of(A);
    assert_eq!(h.events(A, "turn_complete"), 1, "the turn it ended stays ended: {lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with("repost")), "reposted after its deletion: {lines:#?}");
}

#[tokio::test(start_paused = true)]
async fn a_live_message_delivered_before_the_catch_up_began_waits_for_it_too() {
    let h = Harness::new();
    signal_missed_while_disconnected(&h).await;
    // The connection is back (a RESUME replays what was sent meanwhile) before the catch-up is asked for.
    h.deliver(A, &h.written(HUMAN, "anyone there?", 89_000));
    h.router.ask(A, Input::Snapshot).await;
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn a_command_given_during_the_catch_up_applies_after_the_missed_messages() {
    let h = Harness::new();
    signal_missed_while_disconnected(&h).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::advance(Duration::from_secs(1)).await;
    // The operator skips while the page is read: the skip is answered once the catch-up is done.
    h.command(A, Command::Skip).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "pm's signal came first: {:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout"), 0);
    assert_eq!(h.events(A, "skipped"), 1);
    assert_eq!(h.holder(A).await.as_deref(), Some("critic"), "the skip ended dev's turn");
}

/// A catch-up is under way (its page takes 5 s to read) when a manager pauses at 1 s, then pm signals at 2 s: both
/// come live and are held (unless `how` says the signal did not come live), and the page, read after both, shows the
/// signal too.
async fn pause_then_signal_during_a_catch_up(h: &Harness, how: &str) {
    h.start(A).await;
    h.settle(A).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::advance(Duration::from_secs(1)).await;
    let origin = h.id_at(h.clock.now());
    match how {
        // The gateway said a command is coming; poise hands it over once the signal is there too.
        "awaited command" => h.router.deliver(A, Input::CommandComing(origin)),
        _ => h.router.deliver(A, Input::command(Command::Pause, Some(origin), None)),
    }
    tokio::time::advance(Duration::from_secs(1)).await;
    let signal = h.written(PM, "Done. TURN_COMPLETE", h.now_ms());
    h.rest.history.lock().unwrap().insert(A, vec![signal.clone()]);
    if how != "page only" {
        h.deliver(A, &signal);
    }
    if how == "awaited command" {
        h.router.deliver(A, Input::command(Command::Pause, Some(origin), None));
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
}

#[tokio::test(start_paused = true)]
async fn a_signal_written_after_a_pause_given_during_the_catch_up_is_held_by_the_pause_even_when_a_page_shows_it() {
    // The signal comes live too, or only on the page (the gateway lost it: a new session during the catch-up).
    for how in ["command", "awaited command", "page only"] {
        let h = Harness::new();
        pause_then_signal_during_a_catch_up(&h, how).await;
        let session = h.session(A).await;
        assert_eq!(session.status, SessionStatus::Paused, "{how}: {:#?}", h.journal.of(A));
        assert_eq!(h.holder(A).await.as_deref(), Some("pm"), "{how}: the pause came first: {:#?}", h.journal.of(A));
        assert_eq!(h.events(A, "turn_complete"), 0, "{how}: {:#?}", h.journal.of(A));
        assert_eq!(h.events(A, "signal_held"), 1, "{how}: the paused session holds pm's signal");
        assert_eq!(h.floors(A, "dev"), 0, "{how}: dev is not told it has the floor");
    }
}

#[tokio::test(start_paused = true)]
async fn an_edit_found_by_the_catch_up_is_judged_by_discords_edit_time_not_by_when_it_was_read() {
    let h = Harness::new();
    h.start(A).await;
    let draft = h.written(PM, "Draft", 1_000);
    h.deliver(A, &draft);
    h.settle(A).await;
    h.router.broadcast(|| Input::Disconnected(None));
    // pm finished its message by an edit at 30 s, before its 60 s deadline, while the bot could not see; the bot
    // reads it at 90 s.
    let edited_at = Some(t0() + TimeDelta::seconds(30));
    let finished = IncomingMessage { text: "Draft, done. TURN_COMPLETE".into(), edited_at, ..draft.clone() };
    h.rest.history.lock().unwrap().insert(A, vec![finished]);
    tokio::time::advance(Duration::from_secs(90)).await;
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn channels_whose_history_reads_keep_failing_do_not_starve_another_channels_catch_up() {
    let h = Harness::new();
    // Eight channels (as many as catch up at once) whose reads fail for an hour, and one whose read works.
    let failing: Vec<ChannelId> = (1..=8).map(|n| ChannelId(8000 + n)).collect();
    for &channel in &failing {
        h.start(channel).await;
        h.rest.fail(channel, "read", vec![status(503); 1000]);
    }
    let signal = signal_missed_while_disconnected(&h).await;
    // The failing channels begin reading first.
    for &channel in &failing {
        h.router.deliver(channel, Input::CatchUp(None));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.router.deliver(A, Input::CatchUp(None));
    tokio::time::sleep(Duration::from_secs(5)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "A read its missed page while the others back off");
    assert!(h.session(A).await.has_handled(signal.id));
}

#[tokio::test(start_paused = true)]
async fn a_long_catch_up_hands_its_actor_one_page_at_a_time() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.router.broadcast(|| Input::Disconnected(None));
    // dev talked out of turn 250 times while the bot could not see: each is saved as handled (out_of_turn).
    let missed: Vec<IncomingMessage> = (0..250).map(|n| h.written(DEV, "me next?", 1_000 + n)).collect();
    h.rest.history.lock().unwrap().insert(A, missed);
    h.router.broadcast(|| Input::CatchUp(None));
    h.settle(A).await;
    // Reads and saves in the order they happened: each page is read only once the one before it was handled.
    let order: String = h
        .journal
        .of(A)
        .iter()
        .filter_map(|l| match l.split(' ').next() {
            Some("read") => Some('r'),
            Some("save") if l.contains("out_of_turn") => Some('s'),
            _ => None,
        })
        .collect();
    let expected = format!("r{}r{}r{}", "s".repeat(100), "s".repeat(100), "s".repeat(50));
    assert_eq!(order, expected);
}

#[tokio::test(start_paused = true)]
async fn a_busy_channel_during_a_slow_catch_up_holds_at_most_its_bound_and_reads_the_rest_again() {
    let h = Harness::new();
    let signal = signal_missed_while_disconnected(&h).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::advance(Duration::from_secs(1)).await;
    // 1,500 messages arrive live while the first page is read; the channel's history has them too.
    let live: Vec<IncomingMessage> = (0..1_500).map(|n| h.written(HUMAN, "busy", 91_000 + n)).collect();
    h.rest.history.lock().unwrap().get_mut(&A).unwrap().extend(live.iter().cloned());
    for message in &live {
        h.deliver(A, message);
    }
    tokio::time::sleep(Duration::from_secs(120)).await;
    h.settle(A).await;
    let session = h.session(A).await;
    assert!(live.iter().all(|m| session.has_handled(m.id)), "every live message was handled, held or read again");
    assert!(session.has_handled(signal.id));
    assert_eq!(h.events(A, "turn_complete"), 1);
    // The first catch-up read 16 pages; a second one, asked for when the held queue was full, read them again.
    let reads = reads(&h, A);
    assert!(reads > 16, "a second catch-up read what was not held: {reads} reads");
}

// --- a flood past the inbox's bound: left in the channel's history, and read from there --------------------------

#[tokio::test(start_paused = true)]
async fn a_flood_past_the_inbox_bound_is_left_in_the_history_and_read_from_there_with_its_signal() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // 1,400 messages reach the inbox at once (the actor cannot run between them); pm's signal comes last.
    let mut flood: Vec<IncomingMessage> = (0..1_400).map(|n| h.written(HUMAN, "busy", 1_000 + n)).collect();
    flood.push(h.written(PM, "Done. TURN_COMPLETE", 2_500));
    h.rest.history.lock().unwrap().insert(A, flood.clone());
    for message in &flood {
        h.deliver(A, message);
    }
    tokio::time::sleep(Duration::from_secs(10)).await; // well before pm's 60 s deadline
    h.settle(A).await;
    let session = h.session(A).await;
    assert!(flood.iter().all(|m| session.has_handled(m.id)), "every message was handled, live or read again");
    assert_eq!(h.events(A, "turn_complete"), 1, "pm's signal, left in the history, ended its turn");
    assert_eq!(h.events(A, "turn_timeout"), 0);
    let reads = reads(&h, A);
    assert!(reads >= 4, "the 401 messages past the bound were read from the history: {reads} reads");
}

// --- several shards in one process: each READY, and each lost connection, is its own shard's servers' ------------

#[tokio::test(start_paused = true)]
async fn a_channel_takes_only_its_own_shards_catch_up_and_loss() {
    let (shard_0, shard_1) = (Shard { id: 0, total: 2 }, Shard { id: 1, total: 2 });
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // pm signalled at 30 s while the bot was down; the bot comes back at 90 s, past pm's deadline (60 s).
    let signal = h.written(PM, "Done while you were away. TURN_COMPLETE", 30_000);
    let mut saved = h.saver.saved.lock().unwrap()[&A].clone();
    saved.guild_id = Some(GuildId(3 << 22)); // on shard 1 of 2
    h.router.shutdown().await;
    tokio::time::advance(Duration::from_secs(90)).await;
    let restarted = h.restarted();
    restarted.rest.history.lock().unwrap().insert(A, vec![signal]);
    restarted.router.resume(vec![saved]);
    let reads_before = reads(&restarted, A);

    restarted.router.broadcast(|| Input::CatchUp(Some(shard_0)));
    tokio::time::sleep(Duration::from_secs(5)).await;
    restarted.router.ask(A, Input::Snapshot).await;
    assert_eq!(reads(&restarted, A), reads_before, "shard 0's READY is not this channel's: nothing read");
    assert_eq!(restarted.stats.snapshot().timeouts, 0, "the deadline waits for shard 1, which carries the signal");

    restarted.router.broadcast(|| Input::CatchUp(Some(shard_1)));
    restarted.settle(A).await;
    assert_eq!(reads(&restarted, A), reads_before + 1);
    assert_eq!(restarted.events(A, "turn_complete"), 1, "{:#?}", restarted.journal.of(A));
    assert_eq!(restarted.events(A, "turn_timeout"), 0);
    assert_eq!(restarted.holder(A).await.as_deref(), Some("dev"));

    // Shard 0 lost: dev's deadline runs on. Shard 1 lost: it waits for shard 1's catch-up.
    restarted.router.broadcast(|| Input::Disconnected(Some(shard_0)));
    tokio::time::sleep(Duration::from_secs(TURN_SECONDS.into()) + Duration::from_secs(1)).await;
    restarted.settle(A).await;
    assert_eq!(restarted.events(A, "turn_timeout"), 1, "dev's turn timed out: its shard was never lost");
    restarted.router.broadcast(|| Input::Disconnected(Some(shard_1)));
    tokio::time::sleep(Duration::from_secs(600)).await;
    restarted.router.ask(A, Input::Snapshot).await;
    assert_eq!(restarted.events(A, "turn_timeout"), 1, "critic's deadline waits while shard 1 is lost");
    restarted.router.broadcast(|| Input::CatchUp(Some(shard_1)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    restarted.settle(A).await;
    assert_eq!(restarted.events(A, "turn_timeout"), 2, "and runs once shard 1 has caught up");
}

/// Started, pm holding the floor, in a server on shard 1 of 2; the bot stops and pm signals at 30 s while it is down.
/// Answers the signal and the saved session, for a process that takes the channel over.
async fn on_shard_1_and_signalled_while_down(h: &Harness) -> (IncomingMessage, Session) {
    h.start(A).await;
    h.settle(A).await;
    let signal = h.written(PM, "Done while you were away. TURN_COMPLETE", 30_000);
    h.saver.saved.lock().unwrap().get_mut(&A).unwrap().guild_id = Some(GuildId(3 << 22));
    let saved = h.saver.saved.lock().unwrap()[&A].clone();
    h.router.shutdown().await;
    (signal, saved)
}

/// Another process, running shards 0 and 1 (neither connected yet), that may take channel A over: A's history holds
/// pm's signal, written while the first process was down.
async fn to_take_over_on_two_shards() -> (Harness, Arc<ShardsUp>) {
    let h = Harness::new();
    let (signal, _) = on_shard_1_and_signalled_while_down(&h).await;
    let restarted = h.restarted_on(ShardsUp::starting(ShardRange::parse("0-1", 2).unwrap()));
    restarted.rest.history.lock().unwrap().insert(A, vec![signal]);
    let shards = restarted.router.env().shards.clone();
    (restarted, shards)
}

#[tokio::test(start_paused = true)]
async fn a_channel_taken_over_while_its_shard_is_not_connected_waits_for_that_shards_catch_up() {
    let (restarted, shards) = to_take_over_on_two_shards().await;
    shards.came_up(0, || {});
    let reads_before = reads(&restarted, A);
    // The lease watch takes the channel over (as `tend_leases` does) while shard 1 still connects.
    restarted.router.deliver_or_start(A, Input::CatchUp(None));
    tokio::time::sleep(Duration::from_secs(90)).await;
    restarted.router.ask(A, Input::Snapshot).await;
    assert_eq!(reads(&restarted, A), reads_before, "nothing read while the channel's shard is down");
    assert_eq!(restarted.stats.snapshot().timeouts, 0, "pm's deadline waits: its signal is not seen yet");

    shards.came_up(1, || {});
    restarted.router.broadcast(|| Input::CatchUp(Some(shards.shard(1))));
    restarted.settle(A).await;
    assert_eq!(restarted.events(A, "turn_complete"), 1, "{:#?}", restarted.journal.of(A));
    assert_eq!(restarted.events(A, "turn_timeout"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_channel_that_learns_its_server_while_waiting_for_another_shard_stops_waiting() {
    let h = Harness::new();
    let (_, mut saved) = on_shard_1_and_signalled_while_down(&h).await;
    saved.guild_id = None; // saved before sessions recorded their server
    let restarted = h.restarted_on(ShardsUp::starting(ShardRange::parse("0-1", 2).unwrap()));
    let shards = restarted.router.env().shards.clone();
    shards.came_up(0, || {});
    shards.came_up(1, || {});
    restarted.router.resume(vec![saved]);
    restarted.router.broadcast(|| Input::CatchUp(Some(shards.shard(0))));
    restarted.settle(A).await;
    let reads_before = reads(&restarted, A);
    // Shard 0 is lost: not knowing its server, the channel takes that for its own.
    shards.went_down(0, shards.changes(0), || {});
    restarted.router.broadcast(|| Input::Disconnected(Some(shards.shard(0))));
    tokio::time::sleep(Duration::from_secs(90)).await;
    restarted.router.ask(A, Input::Snapshot).await;
    assert_eq!(restarted.stats.snapshot().timeouts, 0, "pm's deadline waits for shard 0, which may carry it");
    *restarted.rest.guild.lock().unwrap() = Some(GuildId(3 << 22));
    restarted.router.deliver(A, Input::CheckDisplayMode);
    tokio::time::sleep(Duration::from_secs(1)).await;
    restarted.settle(A).await;
    assert_eq!(restarted.session(A).await.guild_id, Some(GuildId(3 << 22)));
    assert_eq!(restarted.events(A, "turn_timeout"), 1, "its own shard, 1, was connected throughout: it runs");
    assert_eq!(reads(&restarted, A), reads_before, "nothing of shard 1 was missed: nothing read");
}

/// A session saved before sessions recorded their server (converted from an older build's folder, say), pm holding
/// the floor on shard 1 of 2 and signalling while the bot was down, for a process running only shard 0 (every process
/// claims such sessions), which has not resumed it yet.
async fn unknown_server_for_shard_0() -> (Harness, Session) {
    let h = Harness::new();
    let (signal, mut saved) = on_shard_1_and_signalled_while_down(&h).await;
    saved.guild_id = None;
    let restarted = h.restarted_on(ShardsUp::starting(ShardRange::parse("0", 2).unwrap()));
    restarted.rest.history.lock().unwrap().insert(A, vec![signal]);
    (restarted, saved)
}

/// [`unknown_server_for_shard_0`], its server on `shard`, resumed once shard 0 is up.
async fn unknown_server_resumed_by_shard_0_on(shard: u64) -> Harness {
    let (restarted, saved) = unknown_server_for_shard_0().await;
    *restarted.rest.guild.lock().unwrap() = Some(GuildId((2 + shard) << 22));
    restarted.router.env().shards.came_up(0, || {});
    restarted.router.resume(vec![saved]);
    restarted.router.broadcast(|| Input::CatchUp(None));
    tokio::time::sleep(Duration::from_secs(1)).await;
    restarted
}

/// Three turn lengths later: the channel was handed to the process of shard 1, its server saved for it, its lease
/// let go, no turn ended here.
async fn assert_handed_to_shard_1(restarted: &Harness) {
    tokio::time::sleep(Duration::from_secs(u64::from(TURN_SECONDS) * 3)).await;
    let saved = restarted.saver.saved.lock().unwrap()[&A].clone();
    assert_eq!(saved.guild_id, Some(GuildId(3 << 22)), "its server saved, for the process that runs shard 1");
    let leases = restarted.saver.leases.lock().unwrap().clone();
    assert_eq!(leases.last(), Some(&(A, "let go")), "let go at once, for that process to take over: {leases:?}");
    assert_eq!(restarted.events(A, "turn_timeout") + restarted.events(A, "turn_complete"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_session_of_unknown_server_on_another_process_s_shard_is_handed_to_it_untouched() {
    let restarted = unknown_server_resumed_by_shard_0_on(1).await;
    assert_handed_to_shard_1(&restarted).await;
    let saved = restarted.saver.saved.lock().unwrap()[&A].clone();
    assert_eq!(saved.active_agent.as_ref().map(|p| p.as_str()), Some("pm"), "nothing else done: {saved:?}");
    assert_eq!(reads(&restarted, A), 0, "its messages come to the other process: none read here");
}

#[tokio::test(start_paused = true)]
async fn a_session_of_unknown_server_is_handed_over_at_the_catch_up_when_its_server_was_not_known_at_the_start() {
    let (restarted, saved) = unknown_server_for_shard_0().await;
    // At the start the REST client is not connected yet: the server cannot be looked up.
    restarted.router.resume(vec![saved]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Connected: shard 0's READY brings the catch-up.
    *restarted.rest.guild.lock().unwrap() = Some(GuildId(3 << 22));
    restarted.router.env().shards.came_up(0, || {});
    restarted.router.broadcast(|| Input::CatchUp(None));
    assert_handed_to_shard_1(&restarted).await;
}

#[tokio::test(start_paused = true)]
async fn a_hand_over_whose_save_fails_is_made_once_a_save_works() {
    let (restarted, saved) = unknown_server_for_shard_0().await;
    *restarted.rest.guild.lock().unwrap() = Some(GuildId(3 << 22));
    restarted.router.env().shards.came_up(0, || {});
    restarted.saver.fail_next_durable_saves(1); // the save recording the server, for the other process
    restarted.router.resume(vec![saved]);
    assert_handed_to_shard_1(&restarted).await;
}

#[tokio::test(start_paused = true)]
async fn a_session_of_unknown_server_on_this_process_s_shard_records_it_and_goes_on() {
    let restarted = unknown_server_resumed_by_shard_0_on(0).await;
    restarted.settle(A).await;
    assert_eq!(restarted.session(A).await.guild_id, Some(GuildId(2 << 22)));
    assert_eq!(restarted.events(A, "turn_complete"), 1, "{:#?}", restarted.journal.of(A));
    assert_eq!(restarted.holder(A).await.as_deref(), Some("dev"));
}

// --- a resumed connection: Discord replays what it carried meanwhile, before RESUMED -----------------------------

#[tokio::test(start_paused = true)]
async fn a_resumed_connection_lets_the_held_deadline_run_after_the_replayed_messages_without_reading() {
    let h = Harness::new();
    let signal = signal_missed_while_disconnected(&h).await;
    // The connection is resumed at 90 s, past pm's 60 s deadline; the replay carries pm's signal, written at 30 s.
    h.deliver(A, &signal);
    tokio::time::sleep(Duration::from_secs(5)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(h.stats.snapshot().timeouts, 0, "held until RESUMED");
    assert_eq!(h.events(A, "turn_complete"), 0, "held until RESUMED");
    h.router.broadcast(|| Input::Resumed(None));
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
    assert_eq!(reads(&h, A), 0, "the replay carried what was missed: nothing read");

    // Lost again while dev holds the floor, resumed past dev's deadline with nothing replayed: the turn ends then.
    h.router.broadcast(|| Input::Disconnected(None));
    tokio::time::sleep(Duration::from_secs(TURN_SECONDS.into()) * 2).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(h.events(A, "turn_timeout"), 0, "dev's deadline waits while the connection is lost");
    h.router.broadcast(|| Input::Resumed(None));
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 1, "and ends dev's turn at RESUMED");
    assert_eq!(reads(&h, A), 0);
}

#[tokio::test(start_paused = true)]
async fn messages_left_to_the_history_while_the_connection_was_lost_are_read_at_the_resume() {
    let h = Harness::new();
    // The replay overflowed the channel's inbox: pm's signal, written at 30 s, was left to the history.
    signal_missed_while_disconnected(&h).await;
    h.router.deliver(A, Input::ReadAgain);
    h.router.broadcast(|| Input::Resumed(None));
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.settle(A).await;
    assert_eq!(reads(&h, A), 1, "read: the replay that reached the channel did not hold everything");
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_channel_taken_over_while_its_shard_was_lost_reads_at_that_shards_resume() {
    let (restarted, shards) = to_take_over_on_two_shards().await;
    // Shard 1 was up, then lost; the lease watch takes the channel over meanwhile.
    shards.came_up(1, || {});
    shards.went_down(1, shards.changes(1), || {});
    restarted.router.deliver_or_start(A, Input::CatchUp(None));
    tokio::time::sleep(Duration::from_secs(90)).await;
    let reads_before = reads(&restarted, A);
    restarted.router.broadcast(|| Input::Resumed(Some(shards.shard(0))));
    tokio::time::sleep(Duration::from_secs(1)).await;
    restarted.router.ask(A, Input::Snapshot).await;
    assert_eq!(restarted.stats.snapshot().timeouts, 0, "shard 0's resume is not this channel's");

    // Shard 1 resumes: its replay covers this process's gap only, not the dead process's, so the channel reads.
    shards.resumed(1, || restarted.router.broadcast(|| Input::Resumed(Some(shards.shard(1)))));
    restarted.settle(A).await;
    assert_eq!(reads(&restarted, A), reads_before + 1);
    assert_eq!(restarted.events(A, "turn_complete"), 1, "{:#?}", restarted.journal.of(A));
    assert_eq!(restarted.events(A, "turn_timeout"), 0);
}

#[tokio::test(start_paused = true)]
async fn serenity_beginning_to_reconnect_on_a_shard_runners_task_holds_that_shards_channels_only() {
    use crate::discord::identity::Identity;
    use crate::discord::in_order::InOrder;
    use crate::discord::reconnecting;
    use tracing_subscriber::prelude::*;
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry().with(reconnecting::layer()));
    let (restarted, shards) = restarted_on_two_shards(Some(GuildId(3 << 22))).await; // on shard 1 of 2
    let signal = restarted.written(PM, "Done while you were away. TURN_COMPLETE", 30_000);
    let in_order = InOrder::new(restarted.router.clone(), Arc::new(Identity::default()));
    // Each shard's runner is a task of its own, on which its collector runs and serenity opens its spans.
    enum Then {
        Runs,
        Resumes,
        Restarts,
    }
    let runner = |shard: u32, then: Then| {
        let in_order = in_order.clone();
        tokio::spawn(async move {
            reconnecting::note_runner(&in_order, shard);
            let _span = match then {
                // Its other spans (one per event) are not a reconnection.
                Then::Runs => tracing::info_span!(target: "serenity::gateway::bridge::shard_runner", "recv_event"),
                Then::Resumes => tracing::info_span!(target: "serenity::gateway::shard", "resume"),
                Then::Restarts => {
                    tracing::info_span!(target: "serenity::gateway::bridge::shard_runner", "request_restart")
                }
            }
            .entered();
        })
    };
    runner(0, Then::Runs).await.unwrap();
    runner(1, Then::Resumes).await.unwrap();
    assert!(shards.carries_up(GuildId(2 << 22)), "shard 0 is not resuming");
    assert!(!shards.carries_up(GuildId(3 << 22)), "shard 1 is");

    // pm's deadline (60 s) passes while shard 1 resumes; the replay carries pm's signal, then RESUMED.
    tokio::time::sleep(Duration::from_secs(90)).await;
    restarted.router.ask(A, Input::Snapshot).await;
    assert_eq!(restarted.stats.snapshot().timeouts, 0, "pm's deadline waits for shard 1's RESUMED");
    restarted.deliver(A, &signal);
    shards.resumed(1, || restarted.router.broadcast(|| Input::Resumed(Some(shards.shard(1)))));
    restarted.settle(A).await;
    assert_eq!(restarted.events(A, "turn_complete"), 1, "{:#?}", restarted.journal.of(A));
    assert_eq!(restarted.events(A, "turn_timeout"), 0);

    // A session invalidated on shard 0's live connection: its runner asks for a restart.
    runner(0, Then::Restarts).await.unwrap();
    assert!(!shards.carries_up(GuildId(2 << 22)), "shard 0 is reconnecting");
}

#[tokio::test(start_paused = true)]
async fn a_read_asked_for_again_after_the_connection_was_lost_still_waits_for_its_return() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    // Messages left to the history (a full inbox): a read begins; more are left during it, so another read follows.
    h.router.deliver(A, Input::ReadAgain);
    tokio::time::advance(Duration::from_secs(1)).await;
    h.router.deliver(A, Input::ReadAgain);
    // Then the shard is lost, before the first read is done.
    h.router.broadcast(|| Input::Disconnected(None));
    tokio::time::sleep(Duration::from_secs(120)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(reads(&h, A), 2, "both reads are done");
    assert_eq!(h.stats.snapshot().timeouts, 0, "pm's deadline (60 s) still waits for the connection");
    h.router.broadcast(|| Input::Resumed(None));
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 1, "and runs at RESUMED");
}

/// pm's turn in a session saved with `guild` as its server (`None`: saved before sessions recorded it), restarted by a
/// process running shards 0 and 1 (both connected), its missed messages read.
async fn restarted_on_two_shards(guild: Option<GuildId>) -> (Harness, Arc<ShardsUp>) {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    let mut saved = h.saver.saved.lock().unwrap()[&A].clone();
    saved.guild_id = guild;
    h.router.shutdown().await;
    let restarted = h.restarted_on(ShardsUp::starting(ShardRange::parse("0-1", 2).unwrap()));
    let shards = restarted.router.env().shards.clone();
    shards.came_up(0, || {});
    shards.came_up(1, || {});
    restarted.router.resume(vec![saved]);
    restarted.router.broadcast(|| Input::CatchUp(None));
    restarted.settle(A).await;
    (restarted, shards)
}

#[tokio::test(start_paused = true)]
async fn a_session_without_its_server_recorded_waits_for_every_lost_shard_to_resume() {
    let (restarted, shards) = restarted_on_two_shards(None).await;
    // Both shards are resuming; pm's deadline passes meanwhile.
    for id in [0, 1] {
        shards.reconnecting(id, || restarted.router.broadcast(|| Input::Disconnected(Some(shards.shard(id)))));
    }
    tokio::time::sleep(Duration::from_secs(90)).await;
    shards.resumed(1, || restarted.router.broadcast(|| Input::Resumed(Some(shards.shard(1)))));
    tokio::time::sleep(Duration::from_secs(1)).await;
    restarted.router.ask(A, Input::Snapshot).await;
    assert_eq!(restarted.stats.snapshot().timeouts, 0, "shard 0, which may carry its server, is still resuming");
    shards.resumed(0, || restarted.router.broadcast(|| Input::Resumed(Some(shards.shard(0)))));
    restarted.settle(A).await;
    assert_eq!(restarted.events(A, "turn_timeout"), 1, "both resumed: pm's overdue turn ends");
    assert_eq!(reads(&restarted, A), 1, "the start's read only");
}

#[tokio::test(start_paused = true)]
async fn a_session_started_while_its_shard_is_resuming_waits_for_resumed() {
    let h = Harness::new();
    h.start(A).await;
    h.command(A, Command::Stop).await;
    h.settle(A).await;
    h.saver.saved.lock().unwrap().get_mut(&A).unwrap().guild_id = Some(GuildId(3 << 22)); // on shard 1 of 2
    h.router.shutdown().await;
    let restarted = h.restarted_on(ShardsUp::starting(ShardRange::parse("0-1", 2).unwrap()));
    let shards = shard_1_resuming(&restarted);
    // A `start` in shard 1's replay: the channel's actor starts now, from its saved (stopped) session.
    restarted.start(A).await;
    waits_for_shard_1s_resumed(&restarted, &shards).await;
}

/// A process running shards 0 and 1, both connected, then shard 1 resuming.
fn shard_1_resuming(h: &Harness) -> Arc<ShardsUp> {
    let shards = h.router.env().shards.clone();
    shards.came_up(0, || {});
    shards.came_up(1, || {});
    shards.reconnecting(1, || h.router.broadcast(|| Input::Disconnected(Some(shards.shard(1)))));
    shards
}

/// pm's deadline passes while shard 1 resumes: it waits for shard 1's RESUMED, then ends pm's turn.
async fn waits_for_shard_1s_resumed(h: &Harness, shards: &ShardsUp) {
    tokio::time::sleep(Duration::from_secs(90)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(h.stats.snapshot().timeouts, 0, "pm's deadline waits for shard 1's RESUMED");
    shards.resumed(1, || h.router.broadcast(|| Input::Resumed(Some(shards.shard(1)))));
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_new_session_whose_server_is_on_a_resuming_shard_waits_for_resumed() {
    let h = Harness::new().restarted_on(ShardsUp::starting(ShardRange::parse("0-1", 2).unwrap()));
    let shards = shard_1_resuming(&h);
    // A `start` in shard 1's replay, in a channel never managed: its server is learned as it starts.
    *h.rest.guild.lock().unwrap() = Some(GuildId(3 << 22));
    h.start(A).await;
    assert_eq!(h.session(A).await.guild_id, Some(GuildId(3 << 22)));
    waits_for_shard_1s_resumed(&h, &shards).await;
}

#[tokio::test(start_paused = true)]
async fn a_session_without_its_server_recorded_reads_only_once_every_shard_is_back() {
    let (restarted, shards) = restarted_on_two_shards(None).await;
    let reads_before = reads(&restarted, A);
    for id in [0, 1] {
        shards.reconnecting(id, || restarted.router.broadcast(|| Input::Disconnected(Some(shards.shard(id)))));
    }
    // Shard 1's resume fails and it identifies again (READY); shard 0 is still resuming; pm's deadline passes.
    shards.came_up(1, || restarted.router.broadcast(|| Input::CatchUp(Some(shards.shard(1)))));
    tokio::time::sleep(Duration::from_secs(90)).await;
    restarted.router.ask(A, Input::Snapshot).await;
    assert_eq!(reads(&restarted, A), reads_before, "not read while shard 0, which may carry it, resumes");
    assert_eq!(restarted.stats.snapshot().timeouts, 0);
    shards.resumed(0, || restarted.router.broadcast(|| Input::Resumed(Some(shards.shard(0)))));
    restarted.settle(A).await;
    assert_eq!(reads(&restarted, A), reads_before + 1, "read once every shard is back (shard 1's READY owed it)");
    assert_eq!(restarted.events(A, "turn_timeout"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_catch_up_asked_for_while_one_runs_follows_it_instead_of_reading_beside_it() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    // The connection watch and a READY both ask (a new session seen by both).
    h.router.broadcast(|| Input::CatchUp(None));
    h.router.broadcast(|| Input::CatchUp(None));
    // Each page takes 5 s to read: the first is done at 5 s, the second, begun then, at 10 s.
    tokio::time::sleep(Duration::from_secs(7)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(reads(&h, A), 1, "one read at a time");
    tokio::time::sleep(Duration::from_secs(20)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(reads(&h, A), 2, "the second after the first, from where it stopped");
}

// --- messages a page shows behind held commands: handled in the order they were written --------------------------

/// A running session whose catch-up reads a page every 5 s, begun 1 s ago, with an `extend` given meanwhile (held
/// until the last page is read).
async fn catching_up_with_an_extend_held() -> Harness {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::advance(Duration::from_secs(1)).await;
    h.router.deliver(A, Input::command(Command::Extend { seconds: 30 }, Some(h.id_at(h.clock.now())), None));
    h
}

#[tokio::test(start_paused = true)]
async fn a_command_typed_while_away_held_behind_a_live_command_runs_in_its_place() {
    let h = catching_up_with_an_extend_held().await;
    tokio::time::advance(Duration::from_millis(500)).await;
    // Typed after the extend, while the gateway could not bring it (a new gateway session): only a page shows it,
    // then pm's signal after it.
    let pause = h.written(HUMAN, "!turn pause", h.now_ms());
    tokio::time::advance(Duration::from_millis(100)).await;
    let signal = h.written(PM, "Done. TURN_COMPLETE", h.now_ms());
    h.rest.history.lock().unwrap().insert(A, vec![pause, signal]);
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "extended"), 1);
    assert_eq!(h.session(A).await.status, SessionStatus::Paused, "{:#?}", h.journal.of(A));
    assert_eq!(h.holder(A).await.as_deref(), Some("pm"), "the pause was typed before the signal");
    assert_eq!(h.events(A, "signal_held"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_command_read_back_before_the_gateway_brings_it_still_runs_in_its_place() {
    let h = catching_up_with_an_extend_held().await;
    tokio::time::advance(Duration::from_millis(500)).await;
    let pause = h.written(HUMAN, "!turn pause", h.now_ms());
    tokio::time::advance(Duration::from_millis(100)).await;
    let signal = h.written(PM, "Done. TURN_COMPLETE", h.now_ms());
    // A full page, so that a second one is read (5 s) after the first is placed.
    let mut history = vec![pause.clone(), signal];
    history.extend((0..98).map(|n| h.written(HUMAN, &format!("chat {n}"), h.now_ms())));
    h.rest.history.lock().unwrap().insert(A, history);
    while reads(&h, A) == 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    h.router.ask(A, Input::Snapshot).await; // the first page is placed, the second being read
    // Only now does the gateway bring the pause: its message, its place, poise's command.
    h.deliver(A, &pause);
    h.router.deliver(A, Input::CommandComing(pause.id));
    h.router.deliver(A, Input::command(Command::Pause, Some(pause.id), None));
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    assert_eq!(h.session(A).await.status, SessionStatus::Paused, "{:#?}", h.journal.of(A));
    assert_eq!(h.holder(A).await.as_deref(), Some("pm"), "the pause was typed before the signal");
    assert_eq!((h.events(A, "paused"), h.events(A, "signal_held")), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_command_typed_live_during_a_catch_up_is_run_once_by_poise_not_read_back() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::advance(Duration::from_secs(1)).await;
    // As the gateway brings a `!turn skip`: the message, the command's place, then poise's command.
    let typed = h.written(HUMAN, "!turn skip", h.now_ms());
    h.deliver(A, &typed);
    h.router.deliver(A, Input::CommandComing(typed.id));
    h.router.deliver(A, Input::command(Command::Skip, Some(typed.id), None));
    h.rest.history.lock().unwrap().insert(A, vec![typed]);
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "skipped"), 1, "{:#?}", h.journal.of(A));
    assert!(!h.journal.of(A).iter().any(|l| l.starts_with("may")), "not taken for one typed while away");
    assert!(!h.journal.of(A).iter().any(|l| l.starts_with("notice")));
}

#[tokio::test(start_paused = true)]
async fn a_signal_written_after_a_second_held_command_waits_for_that_command_too() {
    let h = catching_up_with_an_extend_held().await;
    tokio::time::advance(Duration::from_millis(500)).await;
    let pause = h.id_at(h.clock.now());
    h.router.deliver(A, Input::command(Command::Pause, Some(pause), None));
    tokio::time::advance(Duration::from_millis(500)).await;
    // pm signals after the pause; the gateway lost it (only the page shows it).
    let signal = h.written(PM, "Done. TURN_COMPLETE", h.now_ms());
    h.rest.history.lock().unwrap().insert(A, vec![signal.clone()]);
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    let session = h.session(A).await;
    assert_eq!(session.status, SessionStatus::Paused, "{:#?}", h.journal.of(A));
    assert_eq!(h.holder(A).await.as_deref(), Some("pm"), "the pause was given before the signal");
    assert_eq!(h.events(A, "turn_complete"), 0);
}

#[tokio::test(start_paused = true)]
async fn messages_held_behind_a_command_from_two_pages_keep_their_order() {
    let h = catching_up_with_an_extend_held().await;
    tokio::time::advance(Duration::from_millis(500)).await;
    // After the command: 99 lines of a person, then pm's signal (page 1 ends with it), then dev answers (page 2).
    let base = h.now_ms();
    let mut history: Vec<IncomingMessage> = (0..99).map(|i| h.written(HUMAN, &format!("h{i}"), base + i)).collect();
    let signal = h.written(PM, "Done. TURN_COMPLETE", base + 200);
    let answer = h.written(DEV, "My part. TURN_COMPLETE", base + 20_000);
    history.push(signal.clone());
    history.push(answer.clone());
    h.rest.history.lock().unwrap().insert(A, history);
    tokio::time::sleep(Duration::from_secs(30)).await;
    h.settle(A).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "out_of_turn"), 0, "dev wrote in its own turn: {:#?}", h.journal.of(A));
    assert_eq!(h.holder(A).await.as_deref(), Some("critic"));
}

#[tokio::test(start_paused = true)]
async fn a_signal_on_the_first_page_behind_a_command_is_not_lost_behind_three_newer_pages() {
    let h = catching_up_with_an_extend_held().await;
    tokio::time::advance(Duration::from_millis(500)).await;
    let base = h.now_ms();
    let signal = h.written(PM, "Done. TURN_COMPLETE", base);
    let mut history = vec![signal.clone()];
    history.extend((1..400).map(|i| h.written(HUMAN, &format!("h{i}"), base + i)));
    h.rest.history.lock().unwrap().insert(A, history);
    tokio::time::sleep(Duration::from_secs(60)).await;
    h.settle(A).await;
    h.settle(A).await;
    assert!(h.session(A).await.has_handled(signal.id));
    assert_eq!(h.events(A, "turn_complete"), 1, "pm's signal, written in time, ends its turn");
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn a_signal_a_page_shows_is_held_before_a_command_given_after_it_even_behind_a_late_live_message() {
    let h = catching_up_with_an_extend_held().await;
    tokio::time::advance(Duration::from_millis(100)).await;
    // A person writes, then pm signals; the `pause` comes after both. The gateway brings the person's line only
    // after the pause, and loses pm's signal (the page shows it).
    let line = h.written(HUMAN, "a remark", h.now_ms());
    let signal = h.written(PM, "Done. TURN_COMPLETE", h.now_ms() + 50);
    tokio::time::advance(Duration::from_millis(100)).await;
    h.router.deliver(A, Input::command(Command::Pause, Some(h.id_at(h.clock.now())), None));
    h.deliver(A, &line);
    h.rest.history.lock().unwrap().insert(A, vec![line.clone(), signal.clone()]);
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "pm's signal came before the pause: {:#?}", h.journal.of(A));
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
    assert_eq!(h.session(A).await.status, SessionStatus::Paused, "then the pause");
}

#[tokio::test(start_paused = true)]
async fn a_signal_a_page_shows_behind_a_command_when_the_held_queue_is_full_is_handled_in_its_place() {
    let h = catching_up_with_an_extend_held().await;
    let base = h.now_ms();
    // pm signals just after the command (the gateway loses it); people then write a thousand lines, 20 s later,
    // which fill the held queue while the catch-up reads.
    let signal = h.written(PM, "Done. TURN_COMPLETE", base + 10);
    let lines: Vec<IncomingMessage> =
        (0..1_000).map(|i| h.written(HUMAN, &format!("line {i}"), base + 20_000 + i)).collect();
    for line in &lines {
        h.deliver(A, line);
    }
    let mut history = vec![signal.clone()];
    history.extend(lines.iter().cloned());
    h.rest.history.lock().unwrap().insert(A, history);
    tokio::time::sleep(Duration::from_secs(120)).await;
    h.settle(A).await;
    h.settle(A).await;
    let session = h.session(A).await;
    assert!(session.has_handled(signal.id));
    assert_eq!(h.events(A, "turn_complete"), 1, "pm's signal, written in time, ends its turn");
    assert!(lines.iter().all(|line| session.has_handled(line.id)), "every line, the ones left to the history too");
}

#[tokio::test(start_paused = true)]
async fn a_full_held_queue_never_makes_room_with_a_message_held_before_a_command_given_after_it() {
    let h = catching_up_with_an_extend_held().await;
    let base = h.now_ms();
    // A person's line the gateway loses, then a flood of lines, then pm's signal fill the held queue; a `pause`
    // comes after them all.
    let lost = h.written(HUMAN, "lost line", base + 50);
    let lines: Vec<IncomingMessage> =
        (0..998).map(|i| h.written(HUMAN, &format!("line {i}"), base + 100 + i)).collect();
    let signal = h.written(PM, "Done. TURN_COMPLETE", base + 2_000);
    for message in lines.iter().chain([&signal]) {
        h.deliver(A, message);
    }
    tokio::time::advance(Duration::from_secs(3)).await;
    h.router.deliver(A, Input::command(Command::Pause, Some(h.id_at(h.clock.now())), None));
    // The page shows the lost line only (the flood and the signal reach the history after it was read).
    h.rest.history.lock().unwrap().insert(A, vec![lost.clone()]);
    tokio::time::sleep(Duration::from_secs(6)).await;
    h.rest.history.lock().unwrap().get_mut(&A).unwrap().extend(lines.iter().cloned());
    h.rest.history.lock().unwrap().get_mut(&A).unwrap().push(signal.clone());
    tokio::time::sleep(Duration::from_secs(120)).await;
    h.settle(A).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "pm's signal came before the pause");
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
    let session = h.session(A).await;
    assert_eq!(session.status, SessionStatus::Paused, "then the pause");
    assert!(session.has_handled(lost.id));
}

/// Spec 5.7 on the catch-up: an edit that added the signal before the deadline, found on the pages, is judged by its
/// edit time among the pages' messages, not after all of them (where a message written after the deadline had timed
/// the turn out first).
#[tokio::test(start_paused = true)]
async fn an_edit_adding_the_signal_in_time_is_judged_before_a_message_written_after_the_deadline() {
    let h = Harness::new();
    h.start(A).await;
    let draft = h.written(PM, "Draft", 5_000);
    h.deliver(A, &draft);
    h.settle(A).await;
    h.router.broadcast(|| Input::Disconnected(None));
    // While the bot cannot see: pm finishes its draft by an edit at 50 s (deadline 90 s); someone asks at 95 s.
    let edited_at = Some(t0() + TimeDelta::seconds(50));
    let finished = IncomingMessage { text: "Draft, done. TURN_COMPLETE".into(), edited_at, ..draft.clone() };
    let asked = h.written(HUMAN, "Any news?", 95_000);
    h.rest.history.lock().unwrap().insert(A, vec![finished, asked]);
    tokio::time::advance(Duration::from_secs(100)).await;
    h.router.broadcast(|| Input::CatchUp(None));
    h.settle_until_holder(A, "dev").await;
    assert_eq!(h.events(A, "turn_timeout"), 0, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_complete"), 1, "the signal was added at 50 s, before the deadline");
    assert_eq!(h.events(A, "late_signal"), 0);
}

/// Editable messages written before the missed pages are read on as many pages as they span, not one.
#[tokio::test(start_paused = true)]
async fn an_editable_message_more_than_a_page_before_the_missed_ones_is_read_and_its_edit_found() {
    let h = Harness::new();
    h.start(A).await;
    // pm's turn: a first draft, a busy channel (150 people's messages), a second message; someone speaks at 40 s.
    let first = h.written(PM, "First part", 1_000);
    let mut history = vec![first.clone()];
    for i in 0..150 {
        history.push(h.written(HUMAN, &format!("chatter {i}"), 2_000 + 100 * i));
    }
    let second = h.written(PM, "Second part", 18_000);
    history.push(second.clone());
    history.push(h.written(HUMAN, "Any news?", 40_000));
    tokio::time::advance(Duration::from_secs(41)).await;
    for message in &history {
        h.deliver(A, message);
    }
    h.settle(A).await;
    assert_eq!(h.session(A).await.editable_messages.len(), 2, "both of pm's messages may still be finished");
    // The gateway session is lost; at 45 s pm edits its second message, adding the signal (deadline 90 s).
    let edited_at = Some(t0() + TimeDelta::seconds(45));
    let finished = IncomingMessage { text: "Second part. TURN_COMPLETE".into(), edited_at, ..second.clone() };
    let at = history.len() - 2;
    history[at] = finished;
    h.rest.history.lock().unwrap().insert(A, history);
    tokio::time::advance(Duration::from_secs(9)).await;
    h.router.broadcast(|| Input::CatchUp(None));
    h.settle_until_holder(A, "dev").await;
    assert_eq!(h.events(A, "turn_complete"), 1, "pm's edit, made at 45 s, finished its turn");
    assert_eq!(reads(&h, A), 3, "two pages from the first part, one of the missed messages");
}

/// A message on the pages that was never edited is not taken for an edit made now, which would count as its author
/// speaking now and restart the silence of auto-detection.
#[tokio::test(start_paused = true)]
async fn a_catch_up_does_not_restart_the_holders_silence_with_a_message_never_edited() {
    let h = Harness::with_config(config_of(r#"{"silenceSeconds": 10}"#));
    h.start(A).await;
    tokio::time::advance(Duration::from_secs(3)).await;
    let thoughts = h.written(PM, "Some thoughts, no signal.", 3_000);
    h.deliver(A, &thoughts);
    h.settle(A).await;
    h.rest.history.lock().unwrap().insert(A, vec![thoughts.clone()]);
    tokio::time::advance(Duration::from_secs(5)).await;
    h.router.broadcast(|| Input::CatchUp(None));
    h.settle(A).await;
    // pm has been silent since 3 s: its turn ends at 13 s, not 10 s after the catch-up.
    tokio::time::advance(Duration::from_millis(5_200)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_silent"), 1, "{:#?}", h.journal.of(A));
}

/// A full page of the bot's own messages (read, counted, not given) is not the last page: an edit made after the
/// deadline is not judged before the next page's messages, written before it. `own` is whose messages fill it.
async fn a_page_of_messages_by(own: UserId) -> Harness {
    let h = Harness::new();
    h.start(A).await;
    let draft = h.written(PM, "Draft", 5_000);
    let asked = h.written(HUMAN, "Anyone?", 25_000);
    tokio::time::advance(Duration::from_secs(26)).await;
    h.deliver(A, &draft);
    h.deliver(A, &asked);
    h.settle(A).await;
    h.router.broadcast(|| Input::Disconnected(None));
    // The pages start 10 s before the newest message handled (25 s); the draft (5 s) is older: read first. Then a
    // full page of `own`'s messages, the question again, pm's signal at 40 s (deadline 60 s), and pm's edit of its
    // draft at 70 s, past the deadline.
    let edited_at = Some(t0() + TimeDelta::seconds(70));
    let mut history = vec![IncomingMessage { text: "Draft, more. TURN_COMPLETE".into(), edited_at, ..draft.clone() }];
    history.extend((0..100).map(|i| h.written(own, &format!("own {i}"), 15_100 + 10 * i)));
    history.push(asked.clone());
    history.push(h.written(PM, "Done. TURN_COMPLETE", 40_000));
    h.rest.history.lock().unwrap().insert(A, history);
    tokio::time::advance(Duration::from_secs(55)).await;
    h.router.broadcast(|| Input::CatchUp(None));
    h.settle_until_holder(A, "dev").await;
    h.settle(A).await;
    h
}

#[tokio::test(start_paused = true)]
async fn a_page_of_the_bots_own_messages_does_not_put_every_edit_before_the_next_pages() {
    for own in [OWN, HUMAN] {
        let h = a_page_of_messages_by(own).await;
        assert_eq!(h.events(A, "turn_timeout"), 0, "{:#?}", h.journal.of(A));
        assert_eq!(h.events(A, "turn_complete"), 1, "pm's signal at 40 s ended its turn");
    }
}

/// A second new gateway session comes while a catch-up is still being handled (its save stalled), and a command is
/// held: the read the new session owes comes first, before the command. Before, it was put off until after the
/// command (as a read of messages left to the history is), so a command given after the deadline ended the turn by
/// timeout while the signal written before it, which only that read shows, was still unread (found by a review).
#[tokio::test(start_paused = true)]
async fn a_read_owed_by_a_new_session_during_a_catch_up_comes_before_a_held_command() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The gateway session is lost at 40 s; dev speaks out of turn at 41 s, unseen.
    tokio::time::sleep(Duration::from_secs(40)).await;
    h.router.broadcast(|| Input::Disconnected(None));
    let out_of_turn = h.written(DEV, "me next?", 41_000);
    h.rest.history.lock().unwrap().insert(A, vec![out_of_turn.clone()]);
    tokio::time::sleep(Duration::from_secs(10)).await; // 50 s
    // A new session at 50 s: its catch-up reads dev's line at once, but the disk stalls 20 s saving its judgement.
    *h.saver.save_delay.lock().unwrap() = Duration::from_secs(20);
    h.router.broadcast(|| Input::CatchUp(None));
    tokio::time::sleep(Duration::from_secs(2)).await; // 52 s: the page is read, the actor is in the save
    *h.saver.save_delay.lock().unwrap() = Duration::ZERO;
    // Lost again at 52 s; pm signals at 55 s (deadline 60 s), unseen; a new session at 58 s.
    h.router.broadcast(|| Input::Disconnected(None));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let signal = h.written(PM, "Done. TURN_COMPLETE", 55_000);
    h.rest.history.lock().unwrap().get_mut(&A).unwrap().push(signal.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;
    h.router.broadcast(|| Input::CatchUp(None));
    // At 65 s, while the first catch-up is still being handled, a manager gives `extend 30`.
    tokio::time::sleep(Duration::from_secs(7)).await;
    h.router.deliver(A, Input::command(Command::Extend { seconds: 30 }, Some(h.id_at(h.clock.now())), None));
    tokio::time::sleep(Duration::from_secs(30)).await;
    h.settle(A).await;
    h.settle(A).await;
    let saves: Vec<String> =
        h.journal.of(A).into_iter().filter(|l| l.starts_with("save") || l.starts_with("read")).collect();
    assert_eq!(h.events(A, "turn_timeout"), 0, "pm signalled at 55 s, before its 60 s deadline: {saves:#?}");
    assert_eq!(h.events(A, "turn_complete"), 1, "{saves:#?}");
    assert_eq!(h.events(A, "late_signal"), 0, "{saves:#?}");
}

/// Found by a review: pm's floor announcement was posted, but the process died before its report was saved; pm then
/// signalled 40 s after its 60 s deadline while the bot was down. At the restart, the replayed announcement's look
/// (past Discord's nonce window) took a while, and the catch-up's page was judged meanwhile with no deadline at all
/// (the turn seemed not begun): the late signal completed the turn. The read now waits for the replay's report, and
/// live messages with it.
#[tokio::test(start_paused = true)]
async fn what_was_missed_is_judged_only_once_the_replayed_floor_announcement_says_when_the_turn_began() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    let crashed = h.saver.saved.lock().unwrap()[&A].clone();
    assert!(crashed.awaiting_floor_announcement(), "precondition: pm's floor posted, its report not saved");
    h.router.shutdown().await;
    let late = h.written(PM, "Sorry, late. TURN_COMPLETE", 100_000);
    tokio::time::advance(Duration::from_secs(120)).await;

    let restarted = h.restarted();
    restarted.rest.history.lock().unwrap().insert(A, vec![late.clone()]);
    *restarted.rest.announce_delay.lock().unwrap() = Duration::from_secs(2);
    restarted.router.resume(vec![crashed]);
    restarted.router.broadcast(|| Input::CatchUp(None));
    let live = restarted.written(PM, "And again. TURN_COMPLETE", 120_500);
    restarted.deliver(A, &live);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let session = restarted.session(A).await;
    assert!(!session.has_handled(late.id) && !session.has_handled(live.id), "nothing judged before the report");
    restarted.settle(A).await;
    let lines = restarted.journal.of(A);
    assert_eq!(restarted.events(A, "turn_complete"), 0, "written after pm's deadline: {lines:#?}");
    assert_eq!(restarted.events(A, "turn_timeout"), 1, "{lines:#?}");
    assert_eq!(restarted.events(A, "late_signal"), 1, "the first reply after the timeout: {lines:#?}");
    assert_eq!(restarted.events(A, "out_of_turn"), 1, "the live one after it: {lines:#?}");
    assert_eq!(restarted.holder(A).await.as_deref(), Some("dev"));
}

//! A channel the bot can no longer speak in (deleted, closed to it, its server left), and a shutdown bounded in time.

use super::*;

/// Lets pm's turn time out `turns` times over, settling after each deadline.
async fn let_turns_time_out(h: &Harness, channel: ChannelId, turns: u32) {
    for _ in 0..turns {
        tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS))).await;
        h.settle(channel).await;
        h.settle(channel).await; // the refusals' reports are handled after the flush they raced
    }
}

fn calls(h: &Harness, channel: ChannelId) -> usize {
    h.journal.of(channel).iter().filter(|l| !l.starts_with("save")).count()
}

#[tokio::test(start_paused = true)]
async fn an_announcement_refused_with_404_ends_the_session_once_and_nothing_more_is_sent() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The channel is deleted: Discord answers 404 (Unknown Channel) to whatever is posted there.
    h.rest.fail(A, "announce", vec![status(404); 100]);
    let_turns_time_out(&h, A, 1).await;
    let after_stop = calls(&h, A);
    let_turns_time_out(&h, A, 5).await;
    assert_eq!(h.stats.snapshot().timeouts, 1, "no turn times out after the channel is gone");
    assert_eq!(h.events(A, "session_ended"), 1);
    assert_eq!(calls(&h, A), after_stop, "no more REST calls: {:#?}", h.journal.of(A));
    let session = h.session(A).await;
    assert!(!session.is_active());
    assert!(session.outbox.is_empty(), "nothing left to replay into a deleted channel");
}

#[tokio::test(start_paused = true)]
async fn an_announcement_refused_with_403_pauses_the_session_once_until_a_manager_resumes() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The bot lost Send Messages here: the timeout line and dev's floor are refused.
    h.rest.fail(A, "announce", vec![status(403); 2]);
    let_turns_time_out(&h, A, 1).await;
    let after_pause = calls(&h, A);
    let_turns_time_out(&h, A, 5).await;
    assert_eq!(h.stats.snapshot().timeouts, 1, "paused: no more timeouts");
    assert_eq!(h.events(A, "posting_refused"), 1);
    assert_eq!(calls(&h, A), after_pause, "no notice, no retry: {:#?}", h.journal.of(A));
    let session = h.session(A).await;
    assert_eq!(session.status, crate::core::session::SessionStatus::Paused);
    assert!(session.pause_reason.as_deref().is_some_and(|r| r.contains("403")), "{:?}", session.pause_reason);
    // Permissions fixed: a manager resumes, and dev is told it has the floor.
    h.command(A, Command::Resume).await;
    h.settle(A).await;
    assert_eq!(h.floors(A, "dev"), 1);
    let_turns_time_out(&h, A, 1).await;
    assert_eq!(h.stats.snapshot().timeouts, 2, "running again");
}

#[tokio::test(start_paused = true)]
async fn leaving_the_server_ends_the_session_without_a_word_in_the_channel() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    let before = calls(&h, A);
    h.router.deliver(A, Input::Unreachable(Unreachable::LeftServer));
    let_turns_time_out(&h, A, 3).await;
    assert_eq!(h.events(A, "session_ended"), 1);
    assert_eq!(h.stats.snapshot().timeouts, 0);
    assert_eq!(calls(&h, A), before, "nothing is posted to a server the bot left");
    assert!(!h.session(A).await.is_active());
}

#[tokio::test(start_paused = true)]
async fn leaving_a_server_the_cache_did_not_hold_ends_the_sessions_of_that_server_only() {
    let h = Harness::new();
    *h.rest.guild.lock().unwrap() = Some(GuildId(3 << 22));
    h.start(A).await;
    h.settle(A).await;
    assert_eq!(h.session(A).await.guild_id, Some(GuildId(3 << 22)), "precondition: the server is known");
    h.router.broadcast(|| Input::LeftServer(GuildId(4 << 22)));
    h.settle(A).await;
    assert!(h.session(A).await.is_active(), "another server's removal ends nothing here");
    let before = calls(&h, A);
    h.router.broadcast(|| Input::LeftServer(GuildId(3 << 22)));
    let_turns_time_out(&h, A, 2).await;
    assert_eq!(h.events(A, "session_ended"), 1);
    assert_eq!(calls(&h, A), before, "nothing is posted to a server the bot left");
}

#[tokio::test(start_paused = true)]
async fn a_paused_session_whose_channel_was_deleted_while_the_bot_was_away_ends_at_the_catch_up() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.command(A, Command::Pause).await;
    h.settle(A).await;
    let saved = h.session(A).await;
    // Deleted while the bot was down: reading its history answers 404 (Unknown Channel).
    let restarted = h.restarted();
    restarted.rest.fail(A, "read", vec![status(404)]);
    restarted.router.resume(vec![saved]);
    restarted.router.broadcast(|| Input::CatchUp(None));
    restarted.settle(A).await;
    restarted.settle(A).await;
    assert!(!restarted.session(A).await.is_active(), "ended, not resumed at every start to read a 404 again");
    assert_eq!(restarted.events(A, "session_ended"), 1);
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_a_hanging_rest_call_ends_within_its_bound_and_the_effect_stays_in_the_saved_outbox() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.rest.hanging.lock().unwrap().insert(A);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    h.router.ask(A, Input::Snapshot).await; // decided and saved; its relay hangs
    let started = tokio::time::Instant::now();
    let bound = crate::discord::router::SHUTDOWN_WAIT;
    tokio::time::timeout(bound + Duration::from_secs(1), h.router.shutdown())
        .await
        .expect("shutdown does not wait for a hanging call");
    assert!(started.elapsed() <= bound, "took {:?}", started.elapsed());
    let saved = h.saver.saved.lock().unwrap()[&A].clone();
    assert!(
        saved.outbox.iter().any(|q| matches!(q.effect, crate::core::session::effects::Effect::Relay { .. })),
        "the relay is replayed at the next start: {:?}",
        saved.outbox
    );
}

#[tokio::test(start_paused = true)]
async fn a_floor_announcement_refused_with_403_after_a_while_pauses_with_the_whole_turn_left() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // dev's floor announcement takes 30 s, then is refused: dev was never told, so none of its time is gone.
    *h.rest.announce_delay.lock().unwrap() = Duration::from_secs(30);
    h.rest.fail(A, "announce", vec![status(403)]);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    let session = h.session(A).await;
    assert_eq!(session.status, crate::core::session::SessionStatus::Paused);
    assert_eq!(session.active_agent.as_ref().map(|a| a.as_str()), Some("dev"));
    assert_eq!(session.paused_remaining_ms, Some(i64::from(TURN_SECONDS) * 1000));
}

/// Whether channel A's sender, still retrying `kind` (server errors for minutes) when the shutdown's wait ends,
/// makes a call after the shutdown. The process then lets go of its leases, and another process carries out the saved
/// outbox: a call from this one after that would come twice or out of order.
async fn calls_after_a_shutdown_while_retrying(kind: &'static str) {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.rest.fail(A, kind, vec![status(503); 100]);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    h.router.ask(A, Input::Snapshot).await;
    h.router.shutdown().await;
    let at_shutdown = calls(&h, A);
    let tried = h.journal.of(A).iter().filter(|l| l.starts_with(kind) && l.ends_with("503: ")).count();
    assert!(tried > 1, "the {kind} was retried: {:#?}", h.journal.of(A));
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(calls(&h, A), at_shutdown, "no call after the shutdown: {:#?}", h.journal.of(A));
    let saved = h.saver.saved.lock().unwrap()[&A].clone();
    assert!(!saved.outbox.is_empty(), "what was not done is left in the saved outbox");
}

#[tokio::test(start_paused = true)]
async fn a_sender_still_posting_when_the_shutdown_wait_ends_makes_no_call_after_the_shutdown() {
    calls_after_a_shutdown_while_retrying("announce").await;
}

#[tokio::test(start_paused = true)]
async fn a_deletion_still_retried_beside_the_posts_when_the_shutdown_wait_ends_makes_no_call_after_it() {
    calls_after_a_shutdown_while_retrying("delete").await;
}

#[tokio::test(start_paused = true)]
async fn a_notice_decided_while_shutting_down_is_posted_before_the_shutdown_ends() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The relay's deletion is refused for want of Manage Messages; its report reaches the actor while it shuts down.
    // The switch to observe mode is saved there, and its notice is given only then: no restart would give it.
    h.rest.fail(A, "delete", vec![status(403)]);
    h.deliver(A, &h.written(PM, "First. TURN_COMPLETE", 1_000));
    h.router.shutdown().await;
    let lines = h.journal.of(A);
    assert_eq!(h.events(A, "display_mode_changed"), 1, "{lines:#?}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("notice") && l.contains("observe mode")).count(), 1, "{lines:#?}");
}

#[tokio::test(start_paused = true)]
async fn a_lease_found_lost_while_shutting_down_stops_the_channels_sender_at_once() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.rest.fail(A, "announce", vec![status(503); 100]);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    h.router.ask(A, Input::Snapshot).await;
    let router = h.router.clone();
    let shutdown = tokio::spawn(async move { router.shutdown().await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The renewal finds the channel taken by another process, which carries out the saved outbox from now on.
    h.saver.lease_lost.store(true, Ordering::Relaxed);
    h.router.lost(A);
    let at_loss = calls(&h, A);
    tokio::time::sleep(Duration::from_secs(3)).await; // within the shutdown's wait
    assert_eq!(calls(&h, A), at_loss, "nothing more from this process: {:#?}", h.journal.of(A));
    shutdown.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_channel_without_room_for_a_webhook_stays_in_observe_mode_until_the_next_start() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.rest.fail(A, "repost", vec![RestError::WebhooksFull(WebhookLimit::Channel)]);
    h.deliver(A, &h.written(PM, "First. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    h.settle(A).await; // the switch is decided when the refusal is reported
    assert_eq!(h.session(A).await.display_mode, crate::core::session::DisplayMode::Observe);
    // The server arrives again (a reconnect, a restart): its permissions allow relay, but the room is still gone.
    h.router.deliver(A, Input::CheckDisplayMode);
    h.settle(A).await;
    assert_eq!(h.session(A).await.display_mode, crate::core::session::DisplayMode::Observe);
    let notices = |h: &Harness| h.journal.of(A).iter().filter(|l| l.starts_with("notice")).count();
    assert_eq!(notices(&h), 1, "one notice: {:#?}", h.journal.of(A));
    // A manager deleted a webhook and starts again, as the notice says.
    h.command(A, Command::Stop).await;
    h.command(A, Command::Start { roster: vec![] }).await;
    h.settle(A).await;
    let session = h.session(A).await;
    assert_eq!(session.display_mode, crate::core::session::DisplayMode::Relay, "a new start tries relay again");
    assert!(!session.webhooks_full);
}

/// Found by a review: after a refused relay switched the channel to observe mode, the server's next arrival (a
/// reconnect, a restart) switched it back to relay, whose next refusal gave a second notice.
#[tokio::test(start_paused = true)]
async fn a_channel_whose_relay_was_refused_stays_in_observe_mode_until_the_next_start() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.rest.fail(A, "delete", vec![status(403); 10]);
    h.deliver(A, &h.written(PM, "First. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    h.settle(A).await;
    assert_eq!(h.session(A).await.display_mode, crate::core::session::DisplayMode::Observe);
    h.router.deliver(A, Input::CheckDisplayMode);
    h.settle(A).await;
    assert_eq!(h.session(A).await.display_mode, crate::core::session::DisplayMode::Observe, "kept");
    h.deliver(A, &h.written(DEV, "Second. TURN_COMPLETE", 2_000));
    h.settle(A).await;
    let notices = h.journal.of(A).iter().filter(|l| l.starts_with("notice")).count();
    assert_eq!(notices, 1, "one notice: {:#?}", h.journal.of(A));
    h.command(A, Command::Stop).await;
    h.command(A, Command::Start { roster: vec![] }).await;
    h.settle(A).await;
    let session = h.session(A).await;
    assert_eq!(session.display_mode, crate::core::session::DisplayMode::Relay, "a new start tries relay again");
    assert!(!session.relay_refused);
}

#[tokio::test(start_paused = true)]
async fn a_server_without_room_for_a_webhook_switches_to_observe_once_saying_the_server_is_full() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.rest.fail(A, "repost", vec![RestError::WebhooksFull(WebhookLimit::Server)]);
    h.deliver(A, &h.written(PM, "First. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    h.settle(A).await;
    let session = h.session(A).await;
    assert_eq!(session.display_mode, crate::core::session::DisplayMode::Observe);
    assert!(session.webhooks_full, "kept in observe mode across the server's arrivals");
    let notices: Vec<String> = h.journal.of(A).into_iter().filter(|l| l.starts_with("notice")).collect();
    assert_eq!(notices.len(), 1, "{notices:#?}");
    assert!(notices[0].contains("this server has 1,000 webhooks"), "says which limit: {notices:#?}");
    // Another signal in observe mode: no relay, so no second try to make a webhook and no second notice.
    h.deliver(A, &h.written(DEV, "Second. TURN_COMPLETE", 2_000));
    h.settle(A).await;
    assert_eq!(h.journal.of(A).iter().filter(|l| l.starts_with("notice")).count(), 1);
}

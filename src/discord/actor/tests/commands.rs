//! Commands are all or nothing, and a session begins at its start.

use super::*;

// --- all or nothing: a refused command changes nothing ------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_refused_give_on_an_overdue_turn_changes_nothing_and_the_timeout_still_happens_and_is_announced() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The typo reaches the actor together with pm's deadline, before the deadline is acted on.
    let (reply, answer) = tokio::sync::oneshot::channel();
    let origin = h.id_at(t0() + TimeDelta::seconds(i64::from(TURN_SECONDS) + 1));
    let give = Command::Give { persona: "critc".into() };
    h.router.deliver(A, Input::command(give, Some(origin), Some(reply)));
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS) + 1)).await;
    assert!(answer.await.unwrap().is_err(), "critc is no persona");
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 1, "{:#?}", h.journal.of(A));
    let lines = h.journal.of(A);
    assert!(lines.iter().any(|l| l.starts_with("announce") && l.contains("pm turn timed out")), "{lines:#?}");
    assert_eq!(h.floors(A, "dev"), 1);
    assert_eq!(h.saver.saved.lock().unwrap()[&A].active_agent.as_ref().map(|a| a.as_str()), Some("dev"));
    // dev's own deadline is armed: its turn times out in turn.
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS))).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 2);
}

#[tokio::test(start_paused = true)]
async fn a_start_that_is_refused_neither_switches_the_display_mode_nor_gives_the_fallback_notice() {
    let h = Harness::new();
    h.rest.missing.lock().unwrap().push("Manage Webhooks");
    let origin = h.id_at(t0());
    let start = Command::Start { roster: vec!["pm".into(), "ghost".into()] };
    let outcome = h.router.ask(A, |reply| Input::command(start, Some(origin), Some(reply))).await.unwrap();
    assert!(outcome.is_err(), "ghost is no persona");
    h.settle(A).await;
    let lines = h.journal.of(A);
    assert!(lines.is_empty(), "nothing saved, nothing said: {lines:#?}");
    assert_eq!(h.session(A).await.display_mode, crate::core::session::DisplayMode::Relay);
    // The start that is accepted then falls back, once.
    h.start(A).await;
    h.settle(A).await;
    let notices = h.journal.of(A).iter().filter(|l| l.starts_with("notice") && l.contains("observe mode")).count();
    assert_eq!(notices, 1);
}

// --- a session starts at its start ---------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_catch_up_after_a_restart_reads_from_the_start_not_from_the_old_sessions_last_message() {
    let h = Harness::new();
    h.start(A).await;
    let old = h.written(PM, "Some thoughts.", 1_000);
    h.deliver(A, &old);
    h.command(A, Command::Stop).await;
    h.settle(A).await;
    // While the channel is not managed, pm signals and dev chats.
    let unmanaged = vec![h.written(PM, "Done anyway. TURN_COMPLETE", 5_000), h.written(DEV, "My idea.", 6_000)];
    h.rest.history.lock().unwrap().insert(A, unmanaged);
    tokio::time::advance(Duration::from_secs(10)).await;
    let origin = h.id_at(h.clock.now());
    let start = Command::Start { roster: vec![] };
    h.router.ask(A, |reply| Input::command(start, Some(origin), Some(reply))).await.unwrap().unwrap();
    h.router.broadcast(|| Input::CatchUp);
    h.settle(A).await;
    h.settle(A).await;
    let lines = h.journal.of(A);
    assert!(lines.iter().any(|l| l == &format!("read {A} after {origin} -> ok")), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with(&format!("read {A} after {}", old.id))), "{lines:#?}");
    assert_eq!(h.events(A, "out_of_turn") + h.events(A, "turn_complete"), 0, "{lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with("delete")), "{lines:#?}");
    assert_eq!(h.holder(A).await.as_deref(), Some("pm"));
}

#[tokio::test(start_paused = true)]
async fn a_stopped_sessions_outbox_left_by_a_crash_is_carried_out_at_start_up_and_its_actor_retires() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The process dies just after saving the stop: its "stopped" line was decided and saved, not posted.
    h.rest.hanging.lock().unwrap().insert(A);
    h.command(A, Command::Stop).await;
    let crashed = h.saver.saved.lock().unwrap()[&A].clone();
    assert!(!crashed.is_active());
    assert_eq!(crashed.outbox.len(), 1, "{:?}", crashed.outbox);

    let restarted = h.restarted();
    restarted.router.resume(vec![crashed]);
    restarted.router.broadcast(|| Input::CatchUp);
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    let stopped_lines = |j: &Journal| {
        j.of(A).iter().filter(|l| l.starts_with("announce") && l.contains("Turn management stopped")).count()
    };
    assert_eq!(stopped_lines(&restarted.journal), 2, "tried before the crash, posted at start-up");
    assert!(restarted.router.channels().is_empty(), "then the stopped channel's actor retires");
}

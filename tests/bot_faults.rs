//! End to end, one test per fault local-discord can inject (gateway closes, invalid sessions, duplicated and
//! delayed dispatches, 429s, 5xx, a slow route, a lost permission, a deleted webhook, a webhook's refused token). Each checks what the fault is
//! about, then the soak's invariants: no turn lost or doubled, every announcement exactly once and in roster order,
//! no signal left showing.

mod common;

use chrono::{DateTime, Utc};
use common::{PATIENCE, Scene, connection_watch_looked, count_floor, is_floor, list, render};
use local_discord::faults::{DispatchAction, RouteAction};
use local_discord::permissions::Permissions;
use local_discord::world::{LogKind, OverwriteTarget, now_ms};
use std::time::{Duration, Instant};
use turn_manager::core::config::Config;
use turn_manager::core::ids::ChannelId;
use turn_manager::core::session::DisplayMode;

/// pm, dev and critic each end their turn once, in order: the floor goes round to pm again.
async fn one_round(scene: &Scene) {
    for (persona, next) in [("pm", "dev"), ("dev", "critic"), ("critic", "pm")] {
        let floors = count_floor(&scene.view(), next);
        scene.say(persona, &format!("{persona} is done. TURN_COMPLETE"));
        scene.until(&format!("{next}'s floor"), |v| (count_floor(v, next) == floors + 1).then_some(())).await;
    }
}

/// Gateway frames the server received with this opcode (2 IDENTIFY, 6 RESUME): only the bot is connected.
fn frames_received(scene: &Scene, op: u8) -> usize {
    let log = scene.stage.server.log();
    log.iter().filter(|e| matches!(&e.kind, LogKind::GatewayReceived { op: o, .. } if *o == op)).count()
}

/// Gateway frames the server sent with this opcode (9 INVALID_SESSION), not counting dispatches.
fn frames_sent(scene: &Scene, op: u8) -> usize {
    let log = scene.stage.server.log();
    log.iter().filter(|e| matches!(&e.kind, LogKind::GatewaySent { op: o, event: None, .. } if *o == op)).count()
}

/// REST calls whose path contains `path`, with their status and when they were answered.
fn calls(scene: &Scene, method: &str, path: &str) -> Vec<(u16, Instant)> {
    scene
        .stage
        .server
        .log()
        .into_iter()
        .filter_map(|e| match e.kind {
            LogKind::Rest { method: m, path: p, status } if m == method && p.contains(path) => Some((status, e.at)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumable_close_replays_what_was_missed_and_nothing_is_lost_or_doubled() {
    let scene = Scene::started().await;
    let me = scene.stage.bot_user;
    scene.stage.server.close_gateway(me, true);
    // Written while the bot has no connection: the server keeps it for the RESUME.
    scene.say("pm", "Written while you were reconnecting. TURN_COMPLETE");
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    one_round_from_dev(&scene).await;

    assert_eq!(frames_received(&scene, 6), 1, "the bot resumed");
    assert_eq!(frames_received(&scene, 2), 1, "and did not identify again");
    assert_eq!(scene.events("turn_complete").len(), 3);
    scene.assert_invariants().await;
}

/// dev and critic end their turns: the floor is pm's again.
async fn one_round_from_dev(scene: &Scene) {
    for (persona, next) in [("dev", "critic"), ("critic", "pm")] {
        let floors = count_floor(&scene.view(), next);
        scene.say(persona, &format!("{persona} is done. TURN_COMPLETE"));
        scene.until(&format!("{next}'s floor"), |v| (count_floor(v, next) == floors + 1).then_some(())).await;
    }
}

/// A started session whose holder, pm, has 2 s, its deadline armed; and that deadline.
async fn pm_on_a_two_second_turn() -> (Scene, DateTime<Utc>) {
    let scene = Scene::with(Config::default(), [2, 60, 60]).await;
    scene.start_session().await;
    scene.bot().settle(ChannelId(scene.stage.channel)).await;
    let deadline = scene.session().await.turn_timeout_at.expect("pm's deadline");
    (scene, deadline)
}

async fn just_past(deadline: DateTime<Utc>) {
    while Utc::now() < deadline + chrono::TimeDelta::milliseconds(100) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads of the channel's history among the REST calls after the first `calls_before`.
fn history_reads_since(scene: &Scene, calls_before: usize) -> usize {
    let history = format!("GET /api/v10/channels/{}/messages", scene.stage.channel);
    scene.rest_calls()[calls_before..].iter().filter(|call| call.starts_with(&history)).count()
}

/// pm's signal, written before its deadline though the bot could not see it then, completed the turn: no blind
/// timeout, no late signal; and the soak's invariants hold.
async fn the_signal_completed_the_turn(scene: &Scene) {
    let kinds: Vec<String> = scene.session().await.history.iter().map(|e| format!("{:?}", e.kind)).collect();
    assert_eq!(
        scene.events("turn_complete").len(),
        1,
        "written before the deadline, it completes the turn: {kinds:#?}"
    );
    assert!(scene.events("turn_timeout").is_empty(), "no blind timeout");
    assert!(scene.events("late_signal").is_empty());
    assert!(scene.view().iter().all(|m| !m.content.starts_with("⏱️")));
    scene.assert_invariants().await;
}

/// The gateway connection drops and Discord has forgotten the session: serenity's RESUME is answered INVALID_SESSION
/// and it identifies again (serenity waits ~5 s first). pm's signal, written before its deadline while the bot could
/// not see, is read by the catch-up after the new READY and must complete the turn, not be judged late after a blind
/// timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_written_before_the_deadline_while_the_session_was_invalidated_completes_the_turn() {
    let (scene, deadline) = pm_on_a_two_second_turn().await;
    let me = scene.stage.bot_user;
    let calls_before = scene.rest_calls().len();
    scene.stage.server.close_gateway(me, false);
    let signal = scene.say("pm", "Finished just in time. TURN_COMPLETE");

    just_past(deadline).await;
    assert!(!scene.stage.server.is_connected(me), "precondition: still disconnected after the deadline");
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    scene.handled(signal).await;

    assert_eq!(frames_received(&scene, 6), 1, "the bot tried to resume");
    assert_eq!(frames_sent(&scene, 9), 1, "and was told INVALID_SESSION");
    assert_eq!(frames_received(&scene, 2), 2, "so it identified again: a new session");
    // Had the connection watch asked for another read after the READY's, it would have by now.
    connection_watch_looked(scene.bot(), &[scene.stage.channel]).await;
    assert_eq!(history_reads_since(&scene, calls_before), 1, "read once, at the new session's READY");
    the_signal_completed_the_turn(&scene).await;
}

/// Discord invalidates the session on a live connection (INVALID_SESSION, not resumable): serenity's runner asks for a
/// restart, and its shard manager goes on showing the shard connected for the 5 s it waits before identifying again.
/// pm's deadline falls in that wait. Its signal, written before the deadline while the bot had no session, is read by
/// the catch-up after the new READY and completes the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_invalidated_on_a_live_connection_holds_the_deadline_until_the_new_sessions_catch_up() {
    let (scene, deadline) = pm_on_a_two_second_turn().await;
    let me = scene.stage.bot_user;
    scene.stage.server.invalidate_session(me);
    let signal = scene.say("pm", "Finished just in time. TURN_COMPLETE");
    assert!(Utc::now() < deadline, "precondition: the signal was written before the deadline (the start was slow)");
    just_past(deadline).await;
    assert_eq!(frames_received(&scene, 2), 1, "precondition: not identified again before the deadline");
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    scene.handled(signal).await;

    assert_eq!(frames_sent(&scene, 9), 1, "the bot was told INVALID_SESSION");
    assert_eq!(frames_received(&scene, 2), 2, "and identified again");
    the_signal_completed_the_turn(&scene).await;
}

/// A connection resumed slowly: RESUMED (which Discord sends after the replay) comes 1.5 s after pm's deadline, and
/// pm's signal, written before the deadline, reaches the bot after it, while the bot is still resuming. The deadline
/// waits for RESUMED, the signal completes the turn, and the bot reads no history: Discord's replay carried it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_resume_holds_the_deadline_until_resumed_and_reads_no_history() {
    let (scene, deadline) = pm_on_a_two_second_turn().await;
    let until_deadline = || (deadline - Utc::now()).to_std().unwrap_or_default();
    let me = scene.stage.bot_user;
    let calls_before = scene.rest_calls().len();
    let resumed_late = until_deadline() + Duration::from_millis(1_500);
    scene.stage.server.faults(|f| f.on_dispatch(Some("RESUMED"), DispatchAction::Delay(resumed_late), 1));
    scene.stage.server.close_gateway(me, true);
    let patience = Instant::now() + PATIENCE;
    while !(scene.stage.server.is_connected(me) && frames_received(&scene, 6) == 1) {
        assert!(Instant::now() < patience, "the bot did not resume");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Resuming: the signal is written now, before the deadline, and delivered half a second after it.
    let late = until_deadline() + Duration::from_millis(500);
    scene.stage.server.faults(|f| f.on_dispatch(Some("MESSAGE_CREATE"), DispatchAction::Delay(late), 1));
    let signal = scene.say("pm", "Finished just in time. TURN_COMPLETE");
    assert!(Utc::now() < deadline, "precondition: the signal was written before the deadline (the start was slow)");
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    scene.handled(signal).await;

    assert_eq!(frames_received(&scene, 2), 1, "the bot did not identify again");
    // Had the connection watch asked for a read after RESUMED, it would have by now.
    connection_watch_looked(scene.bot(), &[scene.stage.channel]).await;
    assert_eq!(history_reads_since(&scene, calls_before), 0, "the replay carried what was missed: nothing read");
    the_signal_completed_the_turn(&scene).await;
}

/// A resumed connection keeps its shard runner (and its collector); a session identified again gets a new one. After
/// each, a burst still reaches the channel in the order the gateway sent it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_resume_and_after_identifying_again_a_burst_still_reaches_the_channel_in_order() {
    let scene = Scene::started().await;
    let me = scene.stage.bot_user;
    for (resumable, identified) in [(true, 1), (false, 2)] {
        scene.stage.server.close_gateway(me, resumable);
        let reconnected = || scene.stage.server.is_connected(me) && frames_received(&scene, 2) == identified;
        let deadline = Instant::now() + PATIENCE;
        while !(reconnected() && frames_received(&scene, 6) >= 1) {
            assert!(Instant::now() < deadline, "the bot did not connect again");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (posted, handled) = scene.burst_out_of_turn("dev", 60).await;
        assert_eq!(handled, posted, "handled in the order posted (resumable close: {resumable})");
    }
    scene.assert_invariants().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dispatch_delivered_twice_still_ends_each_turn_once() {
    let scene = Scene::started().await;
    scene.stage.server.faults(|f| f.on_dispatch(Some("MESSAGE_CREATE"), DispatchAction::Duplicate, 100));
    one_round(&scene).await;
    let marker = scene.stage.operator_says("all quiet");
    scene.handled(marker).await;

    assert_eq!(scene.events("turn_complete").len(), 3);
    assert!(scene.events("out_of_turn").is_empty(), "a repeat is not a second message");
    assert_eq!(scene.view().iter().filter(|m| m.from_webhook).count(), 3, "one repost each");
    scene.assert_invariants().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_delivered_400_ms_late_behind_newer_messages_each_end_their_turn() {
    let scene = Scene::started().await;
    let order = ["pm", "dev", "critic"];
    for turn in 0..8 {
        let (persona, next) = (order[turn % 3], order[(turn + 1) % 3]);
        let floors = count_floor(&scene.view(), next);
        let late = DispatchAction::Delay(Duration::from_millis(400));
        scene.stage.server.faults(|f| f.on_dispatch(Some("MESSAGE_CREATE"), late, 1));
        scene.say(persona, &format!("Turn {turn} done. TURN_COMPLETE"));
        let newer = scene.stage.operator_says(&format!("comment {turn}"));
        scene.handled(newer).await;
        scene.until(&format!("{next}'s floor"), |v| (count_floor(v, next) == floors + 1).then_some(())).await;
    }

    assert_eq!(scene.events("turn_complete").len(), 8, "8 of 8 signals ended their turn");
    assert!(scene.events("out_of_turn").is_empty() && scene.events("late_signal").is_empty());
    scene.assert_invariants().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announcement_answered_429_waits_retry_after_and_is_posted_once() {
    let scene = Scene::started().await;
    let channel = scene.stage.channel;
    let retry_after = Duration::from_millis(300);
    let path = format!("/channels/{channel}/messages");
    scene.stage.server.faults(|f| f.on_route(Some("POST"), &path, RouteAction::RateLimit { retry_after }, 1));
    let id = scene.say("pm", "Done. TURN_COMPLETE");
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    scene.handled(id).await;

    let posts = calls(&scene, "POST", &path);
    let limited = posts.iter().position(|(status, _)| *status == 429).expect("the 429 was met");
    let (status, accepted) = posts[limited + 1];
    assert_eq!(status, 200, "the retry went through");
    let waited = accepted - posts[limited].1;
    let honoured = waited >= retry_after && waited < retry_after + Duration::from_millis(500);
    assert!(honoured, "waited {waited:?} for a Retry-After of {retry_after:?}");
    // The announcement came late: dev's turn starts when it was accepted, not when it was decided.
    let floor = scene.view().into_iter().find(|m| is_floor(m, "dev")).unwrap();
    let started = scene.session().await.turn_started_at.unwrap().timestamp_millis() as u64;
    assert!(started + 5 >= floor.created_ms, "dev's turn began at {started}, announced at {}", floor.created_ms);
    scene.assert_invariants().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announcement_meeting_three_server_errors_in_a_row_is_posted_once() {
    let scene = Scene::started().await;
    let path = format!("/channels/{}/messages", scene.stage.channel);
    scene.stage.server.faults(|f| f.on_route(Some("POST"), &path, RouteAction::ServerError(502), 3));
    let id = scene.say("pm", "Done. TURN_COMPLETE");
    scene.handled(id).await;

    let statuses: Vec<u16> = calls(&scene, "POST", &path).into_iter().map(|(s, _)| s).collect();
    assert!(statuses.ends_with(&[502, 502, 502, 200]), "{statuses:?}");
    assert_eq!(count_floor(&scene.view(), "dev"), 1);
    scene.assert_invariants().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_repost_answered_429_is_retried_and_the_signal_does_not_stay() {
    let scene = Scene::started().await;
    let retry_after = Duration::from_millis(200);
    scene.stage.server.faults(|f| f.on_route(Some("POST"), "/webhooks/", RouteAction::RateLimit { retry_after }, 1));
    let id = scene.say("pm", "Relayed after a wait. TURN_COMPLETE");
    scene.handled(id).await;

    let statuses: Vec<u16> = calls(&scene, "POST", "/webhooks/").into_iter().map(|(s, _)| s).collect();
    assert_eq!(statuses.first(), Some(&429), "{statuses:?}");
    assert_eq!(scene.view().iter().filter(|m| m.from_webhook && m.content == "Relayed after a wait.").count(), 1);
    scene.assert_invariants().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_route_in_one_channel_does_not_delay_another_channels_timeout() {
    let scene = Scene::with(Config::default(), [2, 60, 60]).await;
    let (slow, server) = (scene.stage.channel, &scene.stage.server);
    let other = server.create_channel(scene.stage.guild, "other");
    scene.start_session().await;
    // Every call about the first channel answers after 1.5 s: its relay and announcement stall for seconds.
    server
        .faults(|f| f.on_route(None, &format!("/channels/{slow}/"), RouteAction::Slow(Duration::from_millis(1500)), 3));
    scene.say("pm", "Over to dev, slowly. TURN_COMPLETE");
    server.post(other, scene.stage.operator, "!turn start");
    let floor_in = |channel: u64, persona: &'static str| {
        server
            .wait_for("a floor", PATIENCE, move |w| w.view(channel).iter().any(|m| is_floor(m, persona)).then_some(()))
    };
    floor_in(other, "pm").await.unwrap();
    scene.bot().settle(ChannelId(other)).await;
    let deadline = scene.bot().session(ChannelId(other)).await.unwrap().turn_timeout_at.unwrap();

    floor_in(other, "dev").await.unwrap();
    let stalled = !server.view(slow).iter().any(|m| is_floor(m, "dev"));
    assert!(stalled, "precondition: the slow channel was still stalled when the other timed out");
    let history = scene.bot().store().read_log(ChannelId(other)).unwrap();
    let timeout = history.iter().find(|e| e.kind.name() == "turn_timeout").expect("pm timed out in the other channel");
    let lateness = (timeout.at - deadline).num_milliseconds();
    assert!((0..=50).contains(&lateness), "the other channel's timeout came {lateness} ms after its deadline");

    floor_in(slow, "dev").await.unwrap();
    for channel in [slow, other] {
        let found = scene.violations(channel, None).await;
        assert!(found.is_empty(), "channel {channel}:\n{}", list(&found));
    }
}

/// pm ends its turn as relay meets what stops it, whose notice names `notice`; dev then ends its own. Checks the
/// channel is in observe mode with one notice and dev's message kept with its ✅; answers pm's and dev's messages.
async fn switched_to_observe(scene: &Scene, notice: &str) -> (u64, u64) {
    let first = scene.say("pm", "My part. TURN_COMPLETE");
    scene.until("the notice", |v| v.iter().any(|m| m.content.contains(notice)).then_some(())).await;
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    let id = scene.say("dev", "Observed now. TURN_COMPLETE");
    scene.until("critic's floor", |v| v.iter().any(|m| is_floor(m, "critic")).then_some(())).await;
    scene.handled(id).await;

    assert_eq!(scene.session().await.display_mode, DisplayMode::Observe);
    let view = scene.view();
    assert_eq!(view.iter().filter(|m| m.content.contains(notice)).count(), 1, "one notice: {}", render(&view));
    let kept = view.iter().find(|m| m.id == id).expect("observe mode leaves the message");
    assert_eq!(kept.reactions, vec![("✅".to_owned(), 1)]);
    (first, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_manage_messages_mid_session_switches_to_observe_once_and_nothing_is_lost() {
    let scene = Scene::started().await;
    let (channel, role) = (scene.stage.channel, scene.stage.bot_role);
    let lost_at = now_ms();
    scene.stage.server.set_overwrite(
        channel,
        OverwriteTarget::Role(role),
        Permissions::empty(),
        Permissions::MANAGE_MESSAGES,
    );
    let (first, id) = switched_to_observe(&scene, "Manage Messages").await;
    // Usually pm's relay meets the refusal (a 403 on deleting its message) and the bot switches then. Under a heavy
    // load the server's arrival (GUILD_CREATE, whose handler checks the permissions) can be handled only after the
    // permission was taken away: the bot then falls back before pm's signal, which it never tries to delete. Either
    // way: one switch, one notice, a refusal never retried, and nothing deleted in observe mode.
    let refused = calls(&scene, "DELETE", "/messages/").iter().filter(|(s, _)| *s == 403).count();
    assert!(refused <= 1, "a refusal is never retried: {refused} refused deletes");
    // The original stays, so its repost (made before the refusal) is taken back with the webhook's token: pm's
    // words show once.
    let view = scene.view();
    let shown: Vec<_> = view.iter().filter(|m| m.content.starts_with("My part.")).collect();
    assert!(shown.len() == 1 && shown[0].id == first, "pm's words show once, as written: {}", render(&view));
    assert!(calls(&scene, "DELETE", &format!("/messages/{id}")).is_empty(), "observe mode deletes nothing");
    assert_eq!(scene.events("display_mode_changed").len(), 1);
    let found = scene.violations(channel, Some(lost_at)).await;
    assert!(found.is_empty(), "{}", list(&found));
}

/// `n` webhooks of other integrations (made by the operator), spread over `channels` in turn.
fn others_webhooks(stage: &turn_manager::demo::stage::Stage, channels: &[u64], n: usize) {
    stage.server.with(|w| {
        for k in 0..n {
            let id = w.snowflake();
            let webhook = local_discord::world::Webhook {
                id,
                token: format!("tok{id:x}"),
                channel_id: channels[k % channels.len()],
                guild_id: stage.guild,
                name: format!("integration {k}"),
                creator: stage.operator,
            };
            w.webhooks.insert(id, webhook);
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_full_of_other_webhooks_switches_to_observe_once_with_what_to_do() {
    let scene = Scene::started().await;
    let stage = &scene.stage;
    // Fifteen webhooks of other integrations, Discord's most, and none of the bot's: it cannot make its own.
    others_webhooks(stage, &[stage.channel], 15);
    let (first, _) = switched_to_observe(&scene, "15 webhooks").await;
    assert!(scene.view().iter().any(|m| m.id == first), "the relay that failed leaves the original as posted");
    let made = calls(&scene, "POST", "/webhooks");
    assert_eq!(made.len(), 1, "one try to make a webhook, refused, never retried: {made:?}");
    assert_eq!(scene.events("display_mode_changed").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_full_of_webhooks_switches_to_observe_once_with_what_to_do() {
    let scene = Scene::started().await;
    let stage = &scene.stage;
    // A thousand webhooks in the server's other channels, Discord's most per server: none in this one, and the bot
    // cannot make its own.
    let elsewhere: Vec<u64> =
        (0..70).map(|n| stage.server.create_channel(stage.guild, &format!("other-{n}"))).collect();
    others_webhooks(stage, &elsewhere, 1_000);
    let (first, _) = switched_to_observe(&scene, "this server has 1,000 webhooks").await;
    assert!(scene.view().iter().any(|m| m.id == first), "the relay that failed leaves the original as posted");
    let made: Vec<u16> = calls(&scene, "POST", "/webhooks").into_iter().map(|(status, _)| status).collect();
    assert_eq!(made, vec![400], "one try to make a webhook, refused, never retried");
    assert_eq!(scene.events("display_mode_changed").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_deleted_mid_session_answers_404_and_a_new_one_relays_once() {
    let scene = Scene::started().await;
    scene.say("pm", "Through the first webhook. TURN_COMPLETE");
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    let first: Vec<u64> = scene.stage.server.with(|w| w.webhooks.keys().copied().collect());
    scene.stage.server.with(|w| w.webhooks.clear());
    let id = scene.say("dev", "Through a new webhook. TURN_COMPLETE");
    scene.until("critic's floor", |v| v.iter().any(|m| is_floor(m, "critic")).then_some(())).await;
    scene.handled(id).await;

    let gone: Vec<bool> = calls(&scene, "POST", "/webhooks/").into_iter().map(|(s, _)| s == 404).collect();
    assert_eq!(gone, vec![false, true, false], "the old webhook answered 404 once, the new one posted");
    let now: Vec<u64> = scene.stage.server.with(|w| w.webhooks.keys().copied().collect());
    assert!(now.len() == 1 && now != first, "a new webhook: {first:?} -> {now:?}");
    let reposts: Vec<String> = scene.view().into_iter().filter(|m| m.from_webhook).map(|m| m.content).collect();
    assert_eq!(reposts, vec!["Through the first webhook.", "Through a new webhook."]);
    scene.assert_invariants().await;
}

/// A webhook whose token Discord refuses (401, code 50027) is found again by the bot, not made again, and the repost
/// goes through it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_whose_token_is_refused_is_found_again_and_relays_once() {
    let scene = Scene::started().await;
    scene.say("pm", "Through the webhook. TURN_COMPLETE");
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    let before: Vec<u64> = scene.stage.server.with(|w| w.webhooks.keys().copied().collect());
    scene.stage.server.with(|w| w.webhooks.values_mut().for_each(|h| h.token = "reset".into()));
    let id = scene.say("dev", "Through the same webhook, found again. TURN_COMPLETE");
    scene.until("critic's floor", |v| v.iter().any(|m| is_floor(m, "critic")).then_some(())).await;
    scene.handled(id).await;

    let answered: Vec<u16> = calls(&scene, "POST", "/webhooks/").into_iter().map(|(s, _)| s).collect();
    assert_eq!(answered, vec![200, 401, 200], "the stale token refused once, then the webhook's own token");
    let after: Vec<u64> = scene.stage.server.with(|w| w.webhooks.keys().copied().collect());
    assert_eq!(after, before, "the same webhook, found again rather than a new one made");
    let reposts: Vec<String> = scene.view().into_iter().filter(|m| m.from_webhook).map(|m| m.content).collect();
    assert_eq!(reposts, vec!["Through the webhook.", "Through the same webhook, found again."]);
    scene.assert_invariants().await;
}

/// A repost taken back (its original deleted by someone while it was being relayed) with a webhook token Discord
/// refuses is deleted with the bot's own token instead, and the webhook is forgotten: the next repost finds it again
/// before it posts, rather than meeting the refusal once more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_back_refused_for_the_webhooks_token_deletes_with_the_bots_own_and_finds_the_webhook_again() {
    let scene = Scene::started().await;
    let (server, channel) = (&scene.stage.server, scene.stage.channel);
    let pms = scene.say("pm", "Through the webhook. TURN_COMPLETE");
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    // pm's original deleted first, beside dev's announcement: the fault below is for dev's (found by a review).
    scene.until_gone(pms).await;
    // The relay's deletion of dev's message takes 2 s: meanwhile a moderator deletes it, and the webhook's token
    // changes, so the repost is taken back with a token Discord refuses.
    let original_deleted = format!("/channels/{channel}/messages/");
    server.faults(|f| f.on_route(Some("DELETE"), &original_deleted, RouteAction::Slow(Duration::from_secs(2)), 1));
    let removed = scene.say("dev", "Something a moderator removes. TURN_COMPLETE");
    let is_repost = |m: &local_discord::world::Message| {
        m.content.contains("moderator removes") && matches!(m.author, local_discord::world::Author::Webhook { .. })
    };
    let repost = server
        .wait_for("the repost made, the original's deletion under way", PATIENCE, |w| {
            let repost = w.messages.values().find(|m| is_repost(m) && !m.deleted)?;
            (!w.faults.route_faults_armed()).then_some(repost.id)
        })
        .await
        .expect("the repost made");
    server.delete_message(removed);
    server.with(|w| w.webhooks.values_mut().for_each(|h| h.token = "reset".into()));
    scene.until("critic's floor", |v| v.iter().any(|m| is_floor(m, "critic")).then_some(())).await;
    server
        .wait_for("the repost taken back", PATIENCE, |w| {
            w.messages.get(&repost).is_some_and(|m| m.deleted).then_some(())
        })
        .await
        .unwrap_or_else(|_| panic!("the repost of a deleted message shows: {}", render(&scene.view())));
    let id = scene.say("critic", "Through the webhook found again. TURN_COMPLETE");
    scene
        .until("pm's floor", |v| v.iter().any(|m| m.content.contains("Through the webhook found again.")).then_some(()))
        .await;
    scene.handled(id).await;
    let answered: Vec<u16> = calls(&scene, "POST", "/webhooks/").into_iter().map(|(s, _)| s).collect();
    assert_eq!(answered, vec![200, 200, 200], "the refused token was forgotten at the take-back, never sent again");
    // Read once the next relay is done: the server logs a call once it has answered it, after the deletion shows.
    let deleted: Vec<u16> = calls(&scene, "DELETE", &format!("/messages/{repost}")).iter().map(|(s, _)| *s).collect();
    assert_eq!(deleted, vec![401, 204], "the webhook's token refused, then the bot's own deletion");
    scene.assert_invariants().await;
}

/// A burst of REST calls (say a thousand turns timing out at once) is held to the bot's global budget, all routes
/// together, instead of meeting Discord's global 429s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_rest_calls_is_held_to_the_global_budget() {
    use std::sync::Arc;
    use turn_manager::discord::rest::budget::RestBudget;
    use turn_manager::discord::rest::http::DiscordHttp;

    let stage = turn_manager::demo::stage::Stage::new(&common::personas([60, 60, 60])).await.expect("local server");
    let second = stage.server.create_channel(stage.guild, "second");
    let http =
        Arc::new(DiscordHttp::new(&stage.bot_token, Some(&stage.server.base_url()), Arc::new(RestBudget::new(5))));
    let burst: Vec<_> = (0..12)
        .map(|i| {
            let http = http.clone();
            // Two channels: two routes, one budget.
            let channel = if i % 2 == 0 { stage.channel } else { second };
            tokio::spawn(
                async move { http.create_message(channel, &serde_json::json!({"content": format!("n{i}")})).await },
            )
        })
        .collect();
    for call in burst {
        call.await.unwrap().expect("posted");
    }
    let mut made: Vec<Instant> = stage
        .server
        .log()
        .into_iter()
        .filter_map(|e| matches!(&e.kind, LogKind::Rest { method, .. } if method == "POST").then_some(e.at))
        .collect();
    made.sort();
    assert_eq!(made.len(), 12);
    for (i, first) in made.iter().enumerate() {
        // A little slack for the time between the bot's clock and the server's log.
        let window = made[i..].iter().take_while(|t| **t < *first + Duration::from_millis(950)).count();
        assert!(window <= 5, "{window} calls within a second");
    }
}

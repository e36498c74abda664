//! End to end, spec section 5 and 6: the real bot against the local Discord-compatible server, each agent message
//! checked in the channel as a person sees it.

mod common;

use common::{Scene, count_floor, is_floor, render};
use local_discord::faults::{DispatchAction, RouteAction};
use local_discord::permissions::Permissions;
use local_discord::world::{OverwriteTarget, SeenMessage};
use std::time::Duration;
use turn_manager::core::config::{Config, OutOfTurnPolicy};
use turn_manager::core::ids::PersonaId;
use turn_manager::core::session::history::EventKind;

fn holder(session: &turn_manager::core::session::Session) -> Option<&str> {
    session.active_agent.as_ref().map(PersonaId::as_str)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_is_stripped_and_the_next_persona_is_mentioned() {
    let scene = Scene::started().await;
    let original = scene.say("pm", "Here's my response.\n\nTURN_COMPLETE");
    let dev = scene.user("dev");
    scene.until("dev to get the floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    let view = scene.until_gone(original).await; // the agent's own message is gone

    let repost = view.iter().find(|m| m.from_webhook).expect("a repost");
    assert_eq!((repost.author.as_str(), repost.content.as_str()), ("PM", "Here's my response."));
    let announcement = view.iter().find(|m| is_floor(m, "dev")).unwrap();
    assert!(announcement.content.starts_with(&format!("🎙️ <@{dev}> (dev) has the floor: 60s.")));
    assert_eq!(announcement.pinged, vec![dev], "only the persona whose turn starts is pinged");
    assert_eq!(holder(&scene.session().await), Some("dev"));
    assert_eq!(scene.events("turn_complete").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_without_the_signal_stays_and_the_turn_goes_on() {
    let scene = Scene::started().await;
    let id = scene.say("pm", "Still working on it: TURN_COMPLETE comes later.");
    scene.handled(id).await;

    let view = scene.view();
    let kept = view.iter().find(|m| m.id == id).expect("the message stays");
    assert_eq!(kept.content, "Still working on it: TURN_COMPLETE comes later.");
    assert!(!kept.from_webhook && kept.reactions.is_empty());
    assert_eq!(count_floor(&view, "dev"), 0);
    let session = scene.session().await;
    assert_eq!(holder(&session), Some("pm"));
    assert!(session.agents[&PersonaId::parse("pm").unwrap()].last_activity.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_signal_shows_nothing_and_advances() {
    let scene = Scene::started().await;
    let id = scene.say("pm", "TURN_COMPLETE");
    scene.until("dev to get the floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    let view = scene.until_gone(id).await; // the bare signal is removed
    assert!(view.iter().all(|m| !m.from_webhook), "nothing is reposted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_messages_then_the_signal_make_one_turn() {
    let scene = Scene::started().await;
    let first = scene.say("pm", "Part one.");
    let second = scene.say("pm", "Part two.");
    let signal = scene.say("pm", "Part three. TURN_COMPLETE");
    scene.until("dev to get the floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    let view = scene.until_gone(signal).await;

    let shown: Vec<(&str, bool)> =
        view.iter().filter(|m| m.content.starts_with("Part")).map(|m| (m.content.as_str(), m.from_webhook)).collect();
    assert_eq!(shown, vec![("Part one.", false), ("Part two.", false), ("Part three.", true)]);
    assert!(view.iter().any(|m| m.id == first) && view.iter().any(|m| m.id == second));
    assert_eq!(scene.events("turn_complete").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_turn_messages_are_removed_and_kept_in_history_without_a_mention() {
    let scene = Scene::started().await;
    let dev = scene.user("dev");
    let id = scene.say("dev", "Let me jump in here.");
    scene.handled(id).await;

    let view = scene.until("the message to go", |v| v.iter().all(|m| m.id != id).then(|| v.to_vec())).await;
    assert!(view.iter().all(|m| !m.pinged.contains(&dev)), "no notice mentions the persona");
    let events = scene.events("out_of_turn");
    assert_eq!(events.len(), 1);
    let EventKind::OutOfTurn { text, removed, .. } = &events[0].kind else { unreachable!() };
    assert_eq!((text.as_str(), *removed), ("Let me jump in here.", true));
    assert_eq!(holder(&scene.session().await), Some("pm"));
}

/// Found by a review: Discord's system messages (a pin's notice, a thread's creation, a slash command's answer)
/// carry the user who caused them as their author, and a persona's was judged as its message: an agent pinning a
/// message while another held the floor had the pin's notice deleted as out of turn, live or read by a catch-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_personas_pin_notice_is_no_message_of_its_own_live_or_caught_up() {
    let mut scene = Scene::started().await;
    let server = &scene.stage.server;
    let work = scene.say("pm", "Working on it.");
    server.pin(work, scene.user("dev"));
    let later = scene.say("pm", "Still working.");
    scene.handled(later).await;

    scene.stop_bot().await;
    let more = scene.say("pm", "Nearly there.");
    scene.stage.server.pin(more, scene.user("critic"));
    scene.restart_bot().await;
    let last = scene.say("pm", "Here it is.");
    scene.handled(last).await;

    let notices = scene.stage.server.with(|w| {
        let channel = scene.stage.channel;
        w.messages
            .values()
            .filter(|m| m.channel_id == channel && m.kind == Some(6))
            .map(|m| m.deleted)
            .collect::<Vec<_>>()
    });
    assert_eq!(notices, vec![false, false], "both pins' notices stay");
    assert!(scene.events("out_of_turn").is_empty(), "{:?}", scene.events("out_of_turn"));
    assert_eq!(holder(&scene.session().await), Some("pm"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_turn_messages_stay_under_the_allow_policy() {
    let scene = Scene::with(Config { out_of_turn: OutOfTurnPolicy::Allow, ..Config::default() }, [60, 60, 60]).await;
    scene.start_session().await;
    let id = scene.say("dev", "Let me jump in here. TURN_COMPLETE");
    scene.handled(id).await;

    let view = scene.view();
    assert!(view.iter().any(|m| m.id == id && m.content.ends_with("TURN_COMPLETE")), "left alone");
    let events = scene.events("out_of_turn");
    assert_eq!(events.len(), 1);
    assert!(matches!(events[0].kind, EventKind::OutOfTurn { removed: false, .. }));
    assert_eq!(holder(&scene.session().await), Some("pm"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_turn_is_announced_exactly_and_a_late_signal_is_shown_without_advancing() {
    let scene = Scene::with(Config::default(), [1, 60, 60]).await;
    scene.start_session().await;
    let view = scene
        .until("pm's turn to time out", |v| v.iter().any(|m| m.content.starts_with("⏱️")).then(|| v.to_vec()))
        .await;
    let timeout = view.iter().find(|m| m.content.starts_with("⏱️")).unwrap();
    assert_eq!(timeout.content, "⏱️ pm turn timed out after 1s");
    assert!(timeout.pinged.is_empty());
    scene.until("dev to get the floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;

    let late = scene.say("pm", "Sorry, here it is. TURN_COMPLETE");
    let view = scene
        .until("the late reply to be relayed", |v| {
            (v.iter().any(|m| m.from_webhook) && v.iter().all(|m| m.id != late)).then(|| v.to_vec())
        })
        .await;
    let repost = view.iter().find(|m| m.from_webhook).unwrap();
    assert_eq!((repost.author.as_str(), repost.content.as_str()), ("PM", "Sorry, here it is."));
    scene.handled(late).await;
    assert_eq!(holder(&scene.session().await), Some("dev"), "a late signal does not advance");
    assert_eq!(count_floor(&scene.view(), "critic"), 0);
    assert_eq!(scene.events("late_signal").len(), 1);
    assert_eq!(scene.events("turn_timeout").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_ends_the_turn_on_the_edit_that_adds_the_signal() {
    let scene = Scene::started().await;
    let id = scene.say("pm", "Draft");
    scene.handled(id).await;
    scene.stage.server.edit(id, "Draft, more");
    scene.stage.server.edit(id, "Draft, more, done.\nTURN_COMPLETE");
    scene.until("dev to get the floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    let view = scene.until_gone(id).await; // the streamed message is replaced

    let repost = view.iter().find(|m| m.from_webhook).unwrap();
    assert_eq!(repost.content, "Draft, more, done.");
    assert_eq!(scene.events("turn_complete").len(), 1);
}

/// A streaming agent whose edits leave a near miss of the keyword (`**TURN_COMPLETE**`) is told so once the message
/// has been left alone for five seconds, as an agent posting it in one message is told at once; before, nothing was
/// said and the turn timed out. Its edit writing the keyword as the signal then ends the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_near_miss_left_by_a_streamed_answer_is_answered_once_it_is_quiet() {
    let scene = Scene::started().await;
    let id = scene.say("pm", "Draft");
    scene.handled(id).await;
    scene.stage.server.edit(id, "Draft, done.\n\n**TURN_COMPLETE*");
    scene.stage.server.edit(id, "Draft, done.\n\n**TURN_COMPLETE**");
    let last_edit = local_discord::world::now_ms();
    let is_answer = |m: &SeenMessage| m.content.contains("is not a signal here");
    let answer = scene.until("the answer to the near miss", |v| v.iter().find(|m| is_answer(m)).cloned()).await;
    assert!(answer.content.starts_with("⚠️ `**TURN_COMPLETE**` is not a signal here (1 of 3)."), "{}", answer.content);
    assert_eq!(answer.pinged, vec![scene.user("pm")], "it calls on pm");
    // Snowflakes and the log count whole milliseconds.
    assert!(answer.created_ms + 1 >= last_edit + 5_000, "answered once quiet, not at the first near miss");

    scene.stage.server.edit(id, "Draft, done.\n\nTURN_COMPLETE");
    scene.until("dev to get the floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    let view = scene.until_gone(id).await;
    assert_eq!(view.iter().filter(|m| is_answer(m)).count(), 1, "answered once: {}", render(&view));
    assert_eq!(scene.events("unknown_signal").len(), 1);
    assert_eq!(scene.events("turn_complete").len(), 1);
    assert!(scene.events("turn_timeout").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_delivered_twice_advances_once() {
    let scene = Scene::started().await;
    scene.stage.server.faults(|f| f.on_dispatch(Some("MESSAGE_CREATE"), DispatchAction::Duplicate, 1));
    let id = scene.say("pm", "Done. TURN_COMPLETE");
    scene.handled(id).await;
    scene.until("dev to get the floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    let marker = scene.say("dev", "Thinking.");
    scene.handled(marker).await;

    let view = scene.view();
    assert_eq!(count_floor(&view, "dev"), 1);
    assert_eq!(count_floor(&view, "critic"), 0);
    assert_eq!(view.iter().filter(|m| m.from_webhook).count(), 1, "one repost");
    assert_eq!(scene.events("turn_complete").len(), 1);
    assert!(scene.events("out_of_turn").is_empty(), "the repeat is not judged again as pm out of turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_signals_posted_at_once_make_one_advance() {
    let scene = Scene::started().await;
    let first = scene.say("pm", "One. TURN_COMPLETE");
    let second = scene.say("pm", "Two. TURN_COMPLETE");
    scene.handled(second).await;

    let view = scene.view();
    assert_eq!(count_floor(&view, "dev"), 1);
    assert_eq!(count_floor(&view, "critic"), 0);
    assert!(view.iter().all(|m| m.id != first && m.id != second));
    assert_eq!(scene.events("turn_complete").len(), 1);
    assert_eq!(scene.events("out_of_turn").len(), 1, "the second came when pm no longer had the floor");
}

/// Discord sends a channel's events in order on one connection; serenity runs each handler call in a task of its
/// own, which a busy runtime may run out of order. The actor must still get them in the order they were sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_messages_reaches_the_channel_in_the_order_the_gateway_sent_it() {
    let scene = Scene::started().await;
    let (posted, handled) = scene.burst_out_of_turn("dev", 100).await;
    assert_eq!(handled, posted, "handled in the order posted");
}

/// The next message posted reaches the bot 300 ms late: newer ones overtake it.
fn the_next_message_arrives_late(scene: &Scene) {
    let late = DispatchAction::Delay(Duration::from_millis(300));
    scene.stage.server.faults(|f| f.on_dispatch(Some("MESSAGE_CREATE"), late, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_overtaken_by_a_newer_message_is_still_handled_by_the_time_it_was_written() {
    let scene = Scene::started().await;
    // pm's signal reaches the bot 300 ms late, after a newer message of the operator (far beyond any waiting window).
    the_next_message_arrives_late(&scene);
    let signal = scene.say("pm", "Over to you. TURN_COMPLETE");
    let newer = scene.stage.operator_says("go on");
    scene.handled(newer).await;
    scene.handled(signal).await;

    let view = scene.view();
    assert_eq!(count_floor(&view, "dev"), 1, "the overtaken signal completed pm's turn");
    assert!(view.iter().all(|m| m.id != signal), "and was relayed");
    assert_eq!(scene.events("turn_complete").len(), 1);
    assert!(scene.events("out_of_turn").is_empty());
    assert_eq!(holder(&scene.session().await), Some("dev"));
}

/// dev answers the moment it is mentioned, and its answer reaches the bot before pm's signal that gave it the floor:
/// taken for out of turn, it is removed; pm's signal then shows it was said in turn, and it is reposted as dev. The
/// repost stays: the bot's own deletion is not taken for someone else's (which takes a repost back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_removed_as_out_of_turn_then_shown_said_in_turn_is_reposted_and_stays() {
    let scene = Scene::started().await;
    the_next_message_arrives_late(&scene);
    let signal = scene.say("pm", "Over to you. TURN_COMPLETE");
    let early = scene.say("dev", "Starting on it now.");
    scene.handled(signal).await;
    assert_eq!(scene.events("out_of_turn").len(), 1, "dev's answer came first");
    // The next turn's relay waits for the deletions of the one before: once critic has the floor, all are done.
    scene.say("dev", "Built it. TURN_COMPLETE");
    scene.until("critic to get the floor", |v| v.iter().any(|m| is_floor(m, "critic")).then_some(())).await;
    let view = scene.view();
    assert!(view.iter().all(|m| m.id != early), "removed: {view:?}");
    let reposted = view.iter().filter(|m| m.from_webhook && m.content == "Starting on it now.").count();
    assert_eq!(reposted, 1, "reposted as dev, once, and left: {view:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_ignores_its_own_messages_and_its_webhook_reposts() {
    let scene = Scene::started().await;
    let settled = scene.stage.operator_says("settled");
    scene.handled(settled).await;
    let before = scene.bot().stats().messages_handled;
    let signal = scene.say("pm", "Done. TURN_COMPLETE");
    scene.until("dev to get the floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    let view = scene.until_gone(signal).await;
    let marker = scene.stage.operator_says("nice");
    scene.handled(marker).await;
    // The repost and the announcement came back on the gateway too, but only pm's message and the marker reached
    // the engine.
    assert_eq!(scene.bot().stats().messages_handled - before, 2);
    assert_eq!(scene.events("turn_complete").len(), 1);
    assert_eq!(scene.view().len(), view.len() + 1, "no loop: nothing more was posted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everyone_here_and_roles_in_an_agents_text_ping_nobody() {
    let scene = Scene::started().await;
    let role = scene.stage.server.create_role(scene.stage.guild, "reviewers", Permissions::empty());
    scene.stage.server.add_member(scene.stage.guild, scene.stage.operator, &[role]);
    scene.say("pm", &format!("@everyone @here <@&{role}> look at this. TURN_COMPLETE"));
    let view = scene.until("the repost", |v| v.iter().find(|m| m.from_webhook).cloned()).await;
    assert!(view.content.starts_with("@everyone @here"));
    assert!(view.pinged.is_empty(), "pinged {:?}", view.pinged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_manage_messages_the_bot_observes_and_says_so_once() {
    let scene = Scene::new().await;
    let (channel, role) = (scene.stage.channel, scene.stage.bot_role);
    scene.stage.server.set_overwrite(
        channel,
        OverwriteTarget::Role(role),
        Permissions::empty(),
        Permissions::MANAGE_MESSAGES,
    );
    scene.start_session().await;
    let id = scene.say("pm", "Observed answer. TURN_COMPLETE");
    // The reaction is made while dev's announcement is posted (it posts nothing, so it need not come first).
    let reacted = |v: &[SeenMessage]| v.iter().any(|m| m.id == id && !m.reactions.is_empty());
    let view = scene
        .until("dev to get the floor and the ✅", |v| {
            (v.iter().any(|m| is_floor(m, "dev")) && reacted(v)).then(|| v.to_vec())
        })
        .await;
    let kept = view.iter().find(|m| m.id == id).expect("the message stays in observe mode");
    assert_eq!(kept.content, "Observed answer. TURN_COMPLETE");
    assert_eq!(kept.reactions, vec![("✅".to_owned(), 1)]);
    assert!(view.iter().all(|m| !m.from_webhook));

    // Stopping and starting again does not repeat the notice.
    scene.stage.operator_says("!turn stop");
    scene.until("the stop", |v| v.iter().any(|m| m.content.starts_with("⏹️")).then_some(())).await;
    scene.stage.operator_says("!turn start");
    scene
        .until("a second start", |v| (v.iter().filter(|m| m.content.starts_with("▶️")).count() == 2).then_some(()))
        .await;
    let notices: Vec<_> = scene.view().into_iter().filter(|m| m.content.contains("Falling back to observe")).collect();
    assert_eq!(notices.len(), 1);
    assert!(notices[0].content.contains("**Manage Messages**"));
    assert!(!notices[0].content.contains("Manage Webhooks"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_calls_per_completed_turn_are_three_in_relay_and_two_in_observe() {
    let scene = Scene::started().await;
    let first = scene.say("pm", "First. TURN_COMPLETE");
    // Handled means the bot has had the answers to all its calls, so all of them are in the log.
    scene.handled(first).await;
    let before = scene.rest_calls().len();
    let id = scene.say("dev", "Second. TURN_COMPLETE");
    scene.handled(id).await;
    let calls = scene.rest_calls()[before..].to_vec();
    assert_eq!(calls.len(), 3, "relay: repost, delete, announce; got {calls:#?}");

    let observe = Scene::new().await;
    let role = observe.stage.bot_role;
    observe.stage.server.set_overwrite(
        observe.stage.channel,
        OverwriteTarget::Role(role),
        Permissions::empty(),
        Permissions::MANAGE_WEBHOOKS,
    );
    observe.start_session().await;
    let settled = observe.stage.operator_says("settled");
    observe.handled(settled).await;
    let before = observe.rest_calls().len();
    let id = observe.say("pm", "First. TURN_COMPLETE");
    observe.handled(id).await;
    let calls = observe.rest_calls()[before..].to_vec();
    assert_eq!(calls.len(), 2, "observe: react, announce; got {calls:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_webhook_is_made_again() {
    let scene = Scene::started().await;
    scene.say("pm", "First. TURN_COMPLETE");
    scene.until("the first repost", |v| v.iter().any(|m| m.from_webhook).then_some(())).await;
    let hooks: Vec<u64> = scene.stage.server.with(|w| w.webhooks.keys().copied().collect());
    assert_eq!(hooks.len(), 1);
    scene.stage.server.with(|w| w.webhooks.clear());
    scene.until("dev to get the floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    scene.say("dev", "Second. TURN_COMPLETE");
    scene.until("the second repost", |v| (v.iter().filter(|m| m.from_webhook).count() == 2).then_some(())).await;
    let now: Vec<u64> = scene.stage.server.with(|w| w.webhooks.keys().copied().collect());
    assert_eq!(now.len(), 1);
    assert_ne!(now, hooks);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_in_a_thread_reposts_through_the_parents_webhook() {
    let scene = Scene::new().await;
    let thread = scene.stage.server.create_thread(scene.stage.channel, "design");
    scene.stage.server.post(thread, scene.stage.operator, "!turn start");
    let server = &scene.stage.server;
    server
        .wait_for("pm's floor in the thread", common::PATIENCE, |w| {
            w.view(thread).iter().any(|m| is_floor(m, "pm")).then_some(())
        })
        .await
        .unwrap();
    server.post(thread, scene.user("pm"), "In the thread. TURN_COMPLETE");
    let repost = server
        .wait_for("the repost in the thread", common::PATIENCE, |w| w.view(thread).into_iter().find(|m| m.from_webhook))
        .await
        .unwrap();
    assert_eq!(repost.content, "In the thread.");
    let owner = server.with(|w| w.webhooks.values().map(|h| h.channel_id).collect::<Vec<_>>());
    assert_eq!(owner, vec![scene.stage.channel], "the webhook belongs to the parent channel");
    assert!(scene.view().iter().all(|m| !m.from_webhook), "nothing leaked into the parent channel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announcement_that_meets_a_server_error_is_retried_and_posted_once() {
    let scene = Scene::started().await;
    scene.stage.server.faults(|f| f.on_route(Some("POST"), "/messages", RouteAction::ServerError(502), 1));
    let id = scene.say("pm", "Done. TURN_COMPLETE");
    scene.handled(id).await;
    let view = scene.view();
    assert_eq!(count_floor(&view, "dev"), 1, "posted after the retry, once");
    let statuses: Vec<String> =
        scene.rest_calls().into_iter().filter(|c| c.starts_with("POST /api/v10/channels")).collect();
    assert!(statuses.iter().any(|c| c.ends_with("-> 502")), "{statuses:#?}");
}

//! End to end, spec section 7: every command as `!turn ...` and `/turn ...`, the permission rule, and the replies
//! to refusals and bad arguments.

mod common;

use common::{Scene, count_floor, is_floor};
use local_discord::faults::{DispatchAction, RouteAction};
use local_discord::permissions::Permissions;
use local_discord::world::{LogKind, OverwriteTarget, SeenMessage};
use serde_json::json;
use turn_manager::core::config::Config;
use turn_manager::core::ids::PersonaId;
use turn_manager::core::session::SessionStatus;

/// The operator types `!turn <args>` and waits for a message from the bot that satisfies `reply`.
async fn command(scene: &Scene, by: u64, args: &str, reply: impl Fn(&SeenMessage) -> bool) -> SeenMessage {
    let id = scene.stage.server.post(scene.stage.channel, by, &format!("!turn {args}"));
    scene
        .until(&format!("an answer to `!turn {args}`"), |v| {
            v.iter().find(|m| m.id > id && m.author == "turn-manager" && reply(m)).cloned()
        })
        .await
}

fn starts(prefix: &'static str) -> impl Fn(&SeenMessage) -> bool {
    move |m| m.content.starts_with(prefix)
}

fn active(session: &turn_manager::core::session::Session) -> Option<String> {
    session.active_agent.as_ref().map(|p| p.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_prefix_command_works_for_the_operator() {
    let scene = Scene::new().await;
    let op = scene.stage.operator;
    let started = command(&scene, op, "start dev, pm", starts("▶️ Turn management started")).await;
    assert_eq!(started.content, "▶️ Turn management started. Roster: dev, pm.");
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;

    let status = command(&scene, op, "status", starts("dev has the floor")).await;
    assert!(status.content.contains("Round 1. Roster: dev, pm.") && status.content.contains("(running)"));

    command(&scene, op, "pause", starts("⏸️ Paused.")).await;
    assert_eq!(scene.session().await.status, SessionStatus::Paused);
    command(&scene, op, "resume", starts("▶️ Resumed.")).await;
    assert_eq!(scene.session().await.status, SessionStatus::Running);

    let extended = command(&scene, op, "extend 30", starts("⏩")).await;
    assert!(extended.content.starts_with("⏩ dev's turn extended by 30s"), "{}", extended.content);

    command(&scene, op, "skip", starts("⏭️ dev's turn was skipped.")).await;
    scene.until("pm's floor", |v| v.iter().any(|m| is_floor(m, "pm")).then_some(())).await;

    command(&scene, op, "add critic", |m| m.content == "🔀 Roster: dev, pm, critic.").await;
    command(&scene, op, "give critic", starts("👉 The floor goes to critic.")).await;
    scene.until("critic's floor", |v| v.iter().any(|m| is_floor(m, "critic")).then_some(())).await;
    assert_eq!(active(&scene.session().await).as_deref(), Some("critic"));

    command(&scene, op, "order critic pm dev", |m| m.content == "🔀 Roster: critic, pm, dev.").await;
    command(&scene, op, "remove dev", |m| m.content == "🔀 Roster: critic, pm.").await;

    let history = command(&scene, op, "history 3", |m| m.content.contains("roster")).await;
    assert_eq!(history.content.lines().count(), 3, "{}", history.content);
    for line in history.content.lines() {
        // "<t:1795800000:T> roster_changed: ...": the time (shown in each reader's own zone) once, then the event.
        let (time, event) = line.split_once(' ').unwrap_or_else(|| panic!("{line}"));
        let seconds = time.strip_prefix("<t:").and_then(|t| t.strip_suffix(":T>")).unwrap_or_else(|| panic!("{line}"));
        let at = seconds.parse::<i64>().unwrap_or_else(|_| panic!("{line}"));
        assert!((chrono::Utc::now().timestamp() - at).abs() < 600, "the event's time: {line}");
        assert!(!event.contains("<t:"), "{line}");
    }

    command(&scene, op, "stop", starts("⏹️ Turn management stopped")).await;
    assert_eq!(scene.session().await.status, SessionStatus::Stopped);
    let status = command(
        &scene,
        op,
        "status",
        starts("No session is running here. Start one with `/turn start` or `!turn start`."),
    )
    .await;
    assert!(status.pinged.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_without_the_right_may_read_but_not_change() {
    let scene = Scene::started().await;
    let visitor = scene.stage.server.create_user("visitor");
    scene.stage.server.add_member(scene.stage.guild, visitor, &[]);

    let refused = command(&scene, visitor, "skip", starts("You can't change the session here")).await;
    assert!(refused.content.contains("Administrator, Manage Channels"));
    assert!(refused.pinged.is_empty(), "a refusal pings nobody");
    assert_eq!(active(&scene.session().await).as_deref(), Some("pm"));
    command(&scene, visitor, "status", starts("pm has the floor")).await;
    command(&scene, visitor, "history", |m| m.content.contains("session_started")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manage_channels_in_the_channel_or_a_control_role_allows_changes() {
    common::logs();
    let config = Config { control_roles: vec!["moderators".into()], ..Config::default() };
    let scene = Scene::with(config, [60, 60, 60]).await;
    scene.start_session().await;
    let (server, guild) = (&scene.stage.server, scene.stage.guild);

    let moderator = server.create_user("moderator");
    let role = server.create_role(guild, "moderators", Permissions::empty());
    server.add_member(guild, moderator, &[role]);
    command(&scene, moderator, "skip", starts("⏭️ pm's turn was skipped.")).await;

    let lead = server.create_user("channel-lead");
    server.add_member(guild, lead, &[]);
    server.set_overwrite(
        scene.stage.channel,
        OverwriteTarget::Member(lead),
        Permissions::MANAGE_CHANNELS,
        Permissions::empty(),
    );
    command(&scene, lead, "skip", starts("⏭️ dev's turn was skipped.")).await;
    assert_eq!(active(&scene.session().await).as_deref(), Some("critic"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personas_may_run_no_command_and_are_not_mentioned_in_the_refusal() {
    let scene = Scene::started().await;
    let pm = scene.user("pm");
    let refused = command(&scene, pm, "status", starts("Personas can't run turn-manager commands")).await;
    assert!(refused.pinged.is_empty());
    assert!(!refused.content.contains(&pm.to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_bad_arguments_say_what_is_wrong() {
    let scene = Scene::started().await;
    let op = scene.stage.operator;
    let unknown = command(&scene, op, "give bob", |m| m.content.contains("bob")).await;
    assert!(unknown.content.contains("pm, dev, critic"), "names the known personas: {}", unknown.content);
    let bad = command(&scene, op, "extend soon", |m| m.content.starts_with("I couldn't read")).await;
    assert!(
        bad.content.contains("`soon`") && bad.content.contains("Usage: `!turn extend <seconds>`"),
        "{}",
        bad.content
    );
    // In words, not Rust's parser's ("invalid digit found in string": found by a review).
    assert!(bad.content.contains("`soon`: that is not a whole number."), "{}", bad.content);
    let again = command(&scene, op, "start", starts("A session is already running here")).await;
    assert!(again.content.contains("pm has the floor"));
    // A negative count is answered with the range, as 0 is (before: "an argument is extra").
    let negative = command(&scene, op, "history -1", |m| m.content.starts_with("`history` shows")).await;
    assert_eq!(negative.content, "`history` shows 1 to 50 events; `!turn history` shows the last 10.");
    // poise leaves out an optional argument it cannot read, then finds it extra.
    let words = command(&scene, op, "history lots", |m| m.content.starts_with("I couldn't read")).await;
    assert!(
        words.content.contains("not of the kind the command takes")
            && words.content.contains("Usage: `!turn history [n]`")
            && !words.content.contains("Too many"),
        "{}",
        words.content
    );
    let which =
        command(&scene, op, "frobnicate", starts("`frobnicate` is not a `turn` command. Usage: `!turn <")).await;
    assert!(which.content.contains("start|stop|pause|resume|skip|give|extend|order|add|remove|status|history"));
    let missing = command(&scene, op, "give", |m| m.content.starts_with("I couldn't read")).await;
    assert!(
        !missing.content.contains("``") && missing.content.contains("Usage: `!turn give <persona>`"),
        "{}",
        missing.content
    );
    let none = command(&scene, op, "history 0", starts("`history` shows 1 to 50 events")).await;
    assert!(none.content.contains("`!turn history` shows the last 10"), "{}", none.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_delivered_twice_runs_once() {
    let scene = Scene::started().await;
    scene.stage.server.faults(|f| f.on_dispatch(Some("MESSAGE_CREATE"), DispatchAction::Duplicate, 1));
    command(&scene, scene.stage.operator, "skip", starts("⏭️")).await;
    let marker = scene.stage.operator_says("marker");
    scene.handled(marker).await;
    let view = scene.view();
    assert_eq!(view.iter().filter(|m| m.content.starts_with("⏭️")).count(), 1);
    assert_eq!(count_floor(&view, "critic"), 0);
    assert_eq!(active(&scene.session().await).as_deref(), Some("dev"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_share_the_definitions_and_the_permission_rule() {
    let scene = Scene::new().await;
    let (server, channel, app) = (&scene.stage.server, scene.stage.channel, scene.stage.bot_user);
    let registered = server.with(|w| w.commands.iter().find(|c| c.application_id == app).map(|c| c.body.clone()));
    let body = registered.expect("/turn is registered");
    assert_eq!(body["name"], "turn");
    let subcommands: Vec<&str> =
        body["options"].as_array().unwrap().iter().filter_map(|o| o["name"].as_str()).collect();
    assert_eq!(
        subcommands,
        ["start", "stop", "pause", "resume", "skip", "give", "extend", "order", "add", "remove", "status", "history"]
    );

    let start = json!([{"type": 1, "name": "start", "options": [{"type": 3, "name": "roster", "value": "critic pm"}]}]);
    server.invoke_command(channel, scene.stage.operator, app, "turn", start);
    scene.until("critic's floor", |v| v.iter().any(|m| is_floor(m, "critic")).then_some(())).await;
    let give = json!([{"type": 1, "name": "give", "options": [{"type": 3, "name": "persona", "value": "pm"}]}]);
    server.invoke_command(channel, scene.stage.operator, app, "turn", give);
    scene.until("pm's floor", |v| v.iter().any(|m| is_floor(m, "pm")).then_some(())).await;
    assert_eq!(active(&scene.session().await).as_deref(), Some("pm"));
    scene.until("the replies", |v| (v.iter().filter(|m| m.content == "Done.").count() == 2).then_some(())).await;

    let visitor = server.create_user("visitor");
    server.add_member(scene.stage.guild, visitor, &[]);
    server.invoke_command(channel, visitor, app, "turn", json!([{"type": 1, "name": "stop", "options": []}]));
    let refusal =
        scene.until("the refusal", |v| v.iter().find(|m| m.content.starts_with("You can't change")).cloned()).await;
    assert_eq!(scene.session().await.status, SessionStatus::Running);
    // Seen by the visitor alone, as "Done." is (found by a review: a refusal within 1.5 s was public).
    const EPHEMERAL: u64 = local_discord::messages::EPHEMERAL;
    assert_eq!(refusal.flags & EPHEMERAL, EPHEMERAL, "{refusal:?}");
    assert!(scene.view().iter().filter(|m| m.content == "Done.").all(|m| m.flags & EPHEMERAL != 0));
    let pm = PersonaId::parse("pm").unwrap();
    assert_eq!(scene.session().await.roster, vec![PersonaId::parse("critic").unwrap(), pm]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_message_never_runs_as_a_command() {
    let scene = Scene::started().await;
    // pm holds the floor: its signal is relayed, and the repost (by our webhook) reads `!turn status`.
    scene.say("pm", "!turn status TURN_COMPLETE");
    scene.until("the repost", |v| v.iter().any(|m| m.from_webhook && m.content == "!turn status").then_some(())).await;
    scene.until("dev's floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    // Two round trips through the commands after the repost reached the bot: its command would have answered by then.
    command(&scene, scene.stage.operator, "status", starts("dev has the floor")).await;
    command(&scene, scene.stage.operator, "history 1", |m| !m.content.contains("has the floor")).await;
    let view = scene.view();
    let replies = view.iter().filter(|m| m.author == "turn-manager" && m.content.contains(" has the floor, "));
    assert_eq!(replies.count(), 1, "only the operator's status is answered:\n{}", common::render(&view));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_slash_command_is_deferred_within_discords_three_seconds_then_answered() {
    a_slow_slash_command_delivered_after(std::time::Duration::ZERO).await;
}

/// Discord's 3 s run from when the command was given, not from when the bot got it: a gateway that took 1.8 s to
/// deliver it leaves 1.2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_slash_command_delivered_late_is_deferred_within_three_seconds_of_being_given() {
    a_slow_slash_command_delivered_after(std::time::Duration::from_millis(1_800)).await;
}

async fn a_slow_slash_command_delivered_after(delivered_after: std::time::Duration) {
    let scene = Scene::new().await;
    let (server, app) = (&scene.stage.server, scene.stage.bot_user);
    let thread = server.create_thread(scene.stage.channel, "slow");
    // A thread is not in serenity's cache: checking the operator's permissions there reads it from Discord, slowly.
    let slow = RouteAction::Slow(std::time::Duration::from_secs(4));
    server.faults(|f| f.on_route(Some("GET"), &format!("/channels/{thread}"), slow, 1));
    if !delivered_after.is_zero() {
        let late = local_discord::faults::DispatchAction::Delay(delivered_after);
        server.faults(|f| f.on_dispatch(Some("INTERACTION_CREATE"), late, 1));
    }
    let invoked = std::time::Instant::now();
    let interaction = server.invoke_command(
        thread,
        scene.stage.operator,
        app,
        "turn",
        json!([{"type": 1, "name": "start", "options": []}]),
    );
    let path = format!("/interactions/{interaction}/");
    let callback = |w: &local_discord::world::World| {
        w.log.iter().find_map(|e| matches!(&e.kind, LogKind::Rest { path: p, .. } if p.contains(&path)).then_some(e.at))
    };
    let answered_at = server.wait_for("the interaction's answer", common::PATIENCE, callback).await.unwrap();
    let response = server.with(|w| w.interactions[&interaction].response.clone()).expect("answered");
    let took = answered_at.duration_since(invoked);
    assert!(took < std::time::Duration::from_secs(3), "answered after {took:?}: Discord would have dropped it");
    assert_eq!(response["type"], 5, "deferred: {response}");
    let done = |w: &local_discord::world::World| w.view(thread).iter().any(|m| m.content == "Done.").then_some(());
    server.wait_for("the follow-up", common::PATIENCE, done).await.unwrap();
}

/// A command typed just before the holder's signal is run before it, as the gateway carried them: poise takes longer
/// (it parses and authorises) than the signal takes to reach the channel, and must not be overtaken.
async fn a_pause_given_just_before_a_signal_holds_it(pause: impl FnOnce(&Scene)) {
    let scene = Scene::started().await;
    pause(&scene);
    let signal = scene.say("pm", "Done. TURN_COMPLETE");
    scene.until("the pause", |v| v.iter().any(|m| m.content.starts_with("⏸️ Paused.")).then_some(())).await;
    scene.handled(signal).await;
    let session = scene.session().await;
    assert_eq!((session.status, active(&session).as_deref()), (SessionStatus::Paused, Some("pm")));
    assert!(session.signal_held, "a signal written while paused is held, not acted on");
    let view = scene.view();
    assert_eq!(count_floor(&view, "dev"), 0, "the floor did not move:\n{}", common::render(&view));
    assert!(scene.events("turn_complete").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_pause_given_just_before_the_holders_signal_runs_first() {
    a_pause_given_just_before_a_signal_holds_it(|scene| {
        scene.stage.operator_says("!turn pause");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_pause_given_just_before_the_holders_signal_runs_first() {
    a_pause_given_just_before_a_signal_holds_it(|scene| {
        let pause = json!([{"type": 1, "name": "pause", "options": []}]);
        let (stage, app) = (&scene.stage, scene.stage.bot_user);
        stage.server.invoke_command(stage.channel, stage.operator, app, "turn", pause);
    })
    .await;
}

/// A prefix command's reply that meets a 429 (Discord's per-channel limit, 5 messages / 5 s) is sent after Discord's
/// `retry_after`: before, the reply was lost, and the person read "Something went wrong" (found by a review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_meets_a_rate_limit_is_sent_after_it() {
    let scene = Scene::started().await;
    let path = format!("/channels/{}/messages", scene.stage.channel);
    let limited = RouteAction::RateLimit { retry_after: std::time::Duration::from_millis(300) };
    scene.stage.server.faults(|f| f.on_route(Some("POST"), &path, limited, 1));
    let answer = command(&scene, scene.stage.operator, "status", |_| true).await;
    assert!(answer.content.starts_with("pm has the floor"), "the answer: {}", answer.content);
}

/// A slash command carried out is not answered "Something went wrong" when its "Done." could not be sent (a 5xx on
/// the interaction callback): before, it was (found by a review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_command_carried_out_is_not_answered_as_failed_when_its_done_is_refused() {
    let scene = Scene::started().await;
    let (server, app) = (&scene.stage.server, scene.stage.bot_user);
    server.faults(|f| f.on_route(Some("POST"), "/interactions/", RouteAction::ServerError(500), 1));
    let pause = json!([{"type": 1, "name": "pause", "options": []}]);
    server.invoke_command(scene.stage.channel, scene.stage.operator, app, "turn", pause);
    scene.until("the pause", |v| v.iter().any(|m| m.content.starts_with("⏸️ Paused.")).then_some(())).await;
    // Whatever it would have answered has come by the time a later command is answered.
    command(&scene, scene.stage.operator, "status", starts("pm has the floor")).await;
    assert_eq!(scene.session().await.status, SessionStatus::Paused);
    let view = scene.view();
    let failed = view.iter().filter(|m| m.content.starts_with("Something went wrong")).count();
    assert_eq!(failed, 0, "{}", common::render(&view));
}

/// A slow slash command whose deferral Discord refuses still runs, and its "Done." is its first answer: before, the
/// command was dropped mid-way (its permission check) and answered "Something went wrong" (found by a review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_command_whose_deferral_is_refused_still_runs() {
    let scene = Scene::new().await;
    let (server, app) = (&scene.stage.server, scene.stage.bot_user);
    let thread = server.create_thread(scene.stage.channel, "slow");
    // A thread is not in serenity's cache: checking the operator's permissions there reads it from Discord, slowly,
    // so the command is deferred; and the deferral fails.
    let slow = RouteAction::Slow(std::time::Duration::from_secs(2));
    server.faults(|f| f.on_route(Some("GET"), &format!("/channels/{thread}"), slow, 1));
    server.faults(|f| f.on_route(Some("POST"), "/interactions/", RouteAction::ServerError(500), 1));
    let start = json!([{"type": 1, "name": "start", "options": []}]);
    server.invoke_command(thread, scene.stage.operator, app, "turn", start);
    let shows =
        |w: &local_discord::world::World, prefix: &str| w.view(thread).iter().any(|m| m.content.starts_with(prefix));
    let ran =
        |w: &local_discord::world::World| (shows(w, "Done.") && shows(w, "▶️ Turn management started")).then_some(());
    server.wait_for("the start and its Done.", common::PATIENCE, ran).await.unwrap();
    let view = server.with(|w| w.view(thread));
    assert!(!view.iter().any(|m| m.content.starts_with("Something went wrong")), "{}", common::render(&view));
}

/// A refusal repeats what was typed within bounds: a long unknown name does not make a reply over Discord's 2,000
/// characters (refused with a 400, the person reading "Something went wrong" instead, as before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_unknown_persona_name_still_gets_its_refusal() {
    let scene = Scene::started().await;
    let name = "x".repeat(1_980);
    let answer = command(&scene, scene.stage.operator, &format!("give {name}"), |_| true).await;
    assert!(answer.content.contains("known personas: pm, dev, critic"), "{}", &answer.content[..120]);
    assert!(answer.content.chars().count() < 200, "{}", answer.content.chars().count());
}

/// Discord delivers a MESSAGE_CREATE twice around a reconnect: a command refused before it reaches the channel's
/// actor (which runs a command once) is answered once: its reply's nonce is the command's id (found by a review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_command_delivered_twice_is_answered_once() {
    let scene = Scene::started().await;
    let visitor = scene.stage.server.create_user("visitor");
    scene.stage.server.add_member(scene.stage.guild, visitor, &[]);
    scene.stage.server.faults(|f| f.on_dispatch(Some("MESSAGE_CREATE"), DispatchAction::Duplicate, 1));
    command(&scene, visitor, "skip", starts("You can't change the session here")).await;
    command(&scene, scene.stage.operator, "status", starts("pm has the floor")).await;
    let view = scene.view();
    let refusals = view.iter().filter(|m| m.content.starts_with("You can't change the session here")).count();
    assert_eq!(refusals, 1, "{}", common::render(&view));
}

/// In a thread, Manage Channels granted on its parent channel lets a member steer the thread's session; a member
/// without it may not, nor may a persona.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_thread_manage_channels_on_the_parent_channel_counts() {
    let scene = Scene::new().await;
    let (server, guild) = (&scene.stage.server, scene.stage.guild);
    let thread = server.create_thread(scene.stage.channel, "t");
    let lead = server.create_user("channel-lead");
    server.add_member(guild, lead, &[]);
    let granted = OverwriteTarget::Member(lead);
    server.set_overwrite(scene.stage.channel, granted, Permissions::MANAGE_CHANNELS, Permissions::empty());
    let visitor = server.create_user("visitor");
    server.add_member(guild, visitor, &[]);
    let seen = |w: &local_discord::world::World, after: u64, prefix: &str| {
        let answers = w.view(thread).into_iter().filter(|m| m.id > after && m.author == "turn-manager");
        answers.map(|m| m.content).find(|content| content.starts_with(prefix))
    };
    let id = server.post(thread, visitor, "!turn start");
    server.wait_for("the visitor's refusal", common::PATIENCE, |w| seen(w, id, "You can't")).await.unwrap();
    let id = server.post(thread, lead, "!turn start pm dev");
    server.wait_for("the start", common::PATIENCE, |w| seen(w, id, "▶️ Turn management started")).await.unwrap();
    let id = server.post(thread, scene.user("dev"), "!turn skip");
    server.wait_for("the persona's refusal", common::PATIENCE, |w| seen(w, id, "Personas can't")).await.unwrap();
    let id = server.post(thread, lead, "!turn skip");
    server.wait_for("the skip", common::PATIENCE, |w| seen(w, id, "⏭️")).await.unwrap();
}

/// Found by a review: a slash command deferred (at 1.5 s) while it was still being authorised was not handed to
/// its channel while the deferral was awaited. Authorised at 2 s, it reached the channel only once the 2 s deferral
/// returned (3.5 s), after the channel had given up waiting for it (3 s), and the holder's signal sent after it ran
/// first. The thread's session comes from the configuration, in observe mode, so the pause is the first thing in
/// this run to read the thread (its parent is remembered after that).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_pause_authorised_during_a_slow_deferral_still_runs_before_the_signal_after_it() {
    use turn_manager::core::config::{DisplayModeSetting, ManagedChannel};
    use turn_manager::core::ids::ChannelId;
    let thread = std::sync::OnceLock::new();
    let scene = Scene::build([60, 60, 60], |stage| {
        let id = *thread.get_or_init(|| stage.server.create_thread(stage.channel, "configured"));
        // The start-up's look at the thread (its server) fails once: nothing of it is remembered.
        let failing = RouteAction::ServerError(500);
        stage.server.faults(|f| f.on_route(Some("GET"), &format!("/channels/{id}"), failing, 1));
        let channels = vec![ManagedChannel { channel_id: ChannelId(id), roster: Vec::new() }];
        Config { channels, display_mode: DisplayModeSetting::Observe, ..Config::default() }
    })
    .await;
    let (server, app, thread) = (&scene.stage.server, scene.stage.bot_user, *thread.get().unwrap());
    let floor = |w: &local_discord::world::World| w.view(thread).iter().any(|m| is_floor(m, "pm")).then_some(());
    server.wait_for("pm's floor in the thread", common::PATIENCE, floor).await.unwrap();
    // The permission check reads the thread over REST: 2 s, under the 3 s wait. The deferral takes 2 s too.
    let slow = |ms| RouteAction::Slow(std::time::Duration::from_millis(ms));
    server.faults(|f| f.on_route(Some("GET"), &format!("/channels/{thread}"), slow(2_000), 1));
    server.faults(|f| f.on_route(Some("POST"), "/interactions/", slow(2_000), 1));
    server.invoke_command(
        thread,
        scene.stage.operator,
        app,
        "turn",
        json!([{"type": 1, "name": "pause", "options": []}]),
    );
    let signal = server.post(thread, scene.user("pm"), "Done. TURN_COMPLETE");
    let paused = |w: &local_discord::world::World| {
        w.view(thread).iter().any(|m| m.content.starts_with("⏸️ Paused.")).then_some(())
    };
    server.wait_for("the pause", common::PATIENCE, paused).await.unwrap();
    scene.handled_in(thread, signal).await;
    let session = scene.bot().session(ChannelId(thread)).await.unwrap();
    let view = server.with(|w| w.view(thread));
    let shown = common::render(&view);
    assert_eq!((session.status, active(&session).as_deref()), (SessionStatus::Paused, Some("pm")), "{shown}");
    assert_eq!(count_floor(&view, "dev"), 0, "the floor moved:\n{shown}");
}

/// Found by a review: in a channel with no session (so no actor), `!turn start` and `!turn pause` typed one after
/// the other ran in whatever order poise finished checking them. Here the first thread read (a thread's permissions
/// are read over REST) is slow: when it is the start's, the pause came first, was refused for want of a session,
/// and the session then ran unpaused. Which command reads first is a race, so five fresh threads are tried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_and_a_pause_typed_in_a_channel_without_a_session_run_in_the_order_typed() {
    let scene = Scene::new().await;
    let server = &scene.stage.server;
    for n in 0..5 {
        let thread = server.create_thread(scene.stage.channel, &format!("fresh {n}"));
        let slow = RouteAction::Slow(std::time::Duration::from_millis(500));
        server.faults(|f| f.on_route(Some("GET"), &format!("/channels/{thread}"), slow, 1));
        server.post(thread, scene.stage.operator, "!turn start");
        server.post(thread, scene.stage.operator, "!turn pause");
        let answered = |w: &local_discord::world::World| {
            let view = w.view(thread);
            let said = |start: &str| view.iter().any(|m| m.content.starts_with(start));
            (said("⏸️ Paused.") || said("No session is running")).then_some(())
        };
        server.wait_for("the pause's answer", common::PATIENCE, answered).await.unwrap();
        let shown = common::render(&server.with(|w| w.view(thread)));
        assert!(!shown.contains("No session is running"), "thread {n}: the pause ran before the start:\n{shown}");
    }
}

/// Found by a review: serenity's cache finds no thread by id, so every command given in a thread read the thread
/// over REST (under the global budget) while the thread's messages waited for the command. A thread is read once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_is_read_over_rest_once_not_at_every_command() {
    let scene = Scene::new().await;
    let server = &scene.stage.server;
    let thread = server.create_thread(scene.stage.channel, "busy");
    for (command, says) in
        [("!turn start", "▶️"), ("!turn pause", "⏸️"), ("!turn resume", "▶️ Resumed"), ("!turn skip", "⏭️")]
    {
        let id = server.post(thread, scene.stage.operator, command);
        let seen = |w: &local_discord::world::World| {
            let view = w.view(thread);
            let at = view.iter().position(|m| m.id == id)?;
            view[at..].iter().any(|m| m.content.starts_with(says)).then_some(())
        };
        server.wait_for(command, common::PATIENCE, seen).await.unwrap();
    }
    let path = format!("/channels/{thread}");
    let reads = server
        .log()
        .iter()
        .filter(|e| matches!(&e.kind, LogKind::Rest { method, path: p, .. } if method == "GET" && p.ends_with(&path)))
        .count();
    assert_eq!(reads, 1, "the thread read at each command");
}

/// The start's warning about personas whose accounts are no members of the server, if it came.
fn absent_warnings(view: &[SeenMessage]) -> Vec<SeenMessage> {
    let warns = |m: &&SeenMessage| m.author == "turn-manager" && m.content.contains(" of this server, so ");
    view.iter().filter(warns).cloned().collect()
}

/// A scene whose personas named `absent` have accounts that are not members of the server (bots not invited yet).
async fn with_absent_personas(absent: &[&str]) -> Scene {
    Scene::build([60, 60, 60], |stage| {
        for persona in absent {
            stage.server.remove_member(stage.guild, stage.user_of(persona));
        }
        Config::default()
    })
    .await
}

/// A persona whose account is no member of the server (a bot not invited yet, a wrong `discordUserId`) never
/// answers, and each of its turns would time out with nothing saying why: the start names it, its file and what to
/// do, pinging nobody, and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_names_the_personas_whose_accounts_are_not_members_of_the_server() {
    let scene = with_absent_personas(&["critic"]).await;
    scene.start_session().await;
    let warning = scene.until("the warning", |v| absent_warnings(v).pop()).await;
    assert!(
        warning.content.starts_with("⚠️ **Critic** (critic) isn't a member of this server")
            && warning.content.contains("Invite its bot account")
            && warning.content.contains("`discordUserId` in personas/critic.json"),
        "{}",
        warning.content
    );
    assert!(!warning.content.contains("(pm)") && !warning.content.contains("(dev)"), "{}", warning.content);
    assert!(warning.pinged.is_empty(), "{warning:?}");
    assert_eq!(active(&scene.session().await).as_deref(), Some("pm"), "the session goes on");
}

/// A persona whose look fails (a 500) is not named: only Discord's word that the account is no member counts, and
/// the start waits for none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_whose_membership_cannot_be_read_is_not_named() {
    let scene = with_absent_personas(&["dev", "critic"]).await;
    let dev_lookup = format!("/guilds/{}/members/{}", scene.stage.guild, scene.user("dev"));
    scene.stage.server.faults(|f| f.on_route(Some("GET"), &dev_lookup, RouteAction::ServerError(500), 1));
    scene.start_session().await;
    let warning = scene.until("the warning", |v| absent_warnings(v).pop()).await;
    assert!(warning.content.contains("**Critic** (critic) isn't a member"), "{}", warning.content);
    assert!(!warning.content.contains("(dev)"), "{}", warning.content);
}

/// Found by a review: only a start looked, so a persona an `add` (or an `order`) brought into the roster whose
/// account is no member of the server timed out in each of its turns with nothing saying why. The personas already
/// in the roster are not named again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_added_to_the_roster_whose_account_is_not_a_member_is_named() {
    let scene = with_absent_personas(&["critic"]).await;
    let op = scene.stage.operator;
    command(&scene, op, "start pm dev", starts("▶️ Turn management started")).await;
    let added =
        command(&scene, op, "add critic", |m| m.content.contains("critic") && !m.content.starts_with("⚠️")).await;
    let warning = scene.until("the warning", |v| absent_warnings(v).into_iter().find(|m| m.id > added.id)).await;
    assert!(warning.content.starts_with("⚠️ **Critic** (critic) isn't a member of this server"), "{}", warning.content);
    assert!(!warning.content.contains("(pm)") && !warning.content.contains("(dev)"), "{}", warning.content);
    assert_eq!(absent_warnings(&scene.view()).len(), 1, "the start, all members, said nothing");
}

/// Once the missing persona's bot is invited, a new start says nothing more; the first start's warning shows the
/// look was made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_every_persona_is_a_member_a_new_start_warns_no_more() {
    let scene = with_absent_personas(&["critic"]).await;
    let op = scene.stage.operator;
    scene.start_session().await;
    scene.until("the first start's warning", |v| absent_warnings(v).pop()).await;
    scene.stage.server.add_member(scene.stage.guild, scene.user("critic"), &[]);
    command(&scene, op, "stop", starts("⏹️ Turn management stopped")).await;
    let started = command(&scene, op, "start", starts("▶️ Turn management started")).await;
    scene.until("pm's second floor", |v| (count_floor(v, "pm") == 2).then_some(())).await;
    command(&scene, op, "status", starts("pm has the floor")).await;
    scene.bot().settle(turn_manager::core::ids::ChannelId(scene.stage.channel)).await;
    let view = scene.view();
    let after_restart = absent_warnings(&view).into_iter().filter(|m| m.id > started.id).count();
    assert_eq!(after_restart, 0, "{}", common::render(&view));
}

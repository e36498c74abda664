//! End to end, relay mode's reposts against the local server: found again however busy the channel got, and
//! carrying the agent's files and embeds.

mod common;

use common::{Scene, personas};
use local_discord::messages::Draft;
use local_discord::world::{Attachment, Author, Message};
use std::sync::Arc;
use turn_manager::core::ids::{ChannelId, MessageId, UserId};
use turn_manager::demo::stage::Stage;
use turn_manager::discord::access::Access;
use turn_manager::discord::identity::Identity;
use turn_manager::discord::rest::Rest;
use turn_manager::discord::rest::budget::RestBudget;
use turn_manager::discord::rest::discord::DiscordRest;
use turn_manager::discord::rest::http::DiscordHttp;

/// The bot's REST seam on the stage, without a gateway connection (history reads need none).
fn rest_of(stage: &Stage) -> DiscordRest {
    rest_and_identity_of(stage).0
}

/// [`rest_of`], and what it knows of the bot itself (its id, once the gateway's READY tells it).
fn rest_and_identity_of(stage: &Stage) -> (DiscordRest, Arc<Identity>) {
    let identity = Arc::new(Identity::default());
    let budget = Arc::new(RestBudget::new(45));
    let http = DiscordHttp::new(&stage.bot_token, Some(&stage.server.base_url()), budget.clone());
    let access = Arc::new(Access::new(identity.clone(), Vec::new(), budget));
    (DiscordRest::new(Arc::new(http), access, identity.clone()), identity)
}

/// A message posted through a webhook as `name`.
fn webhook_says(stage: &Stage, name: &str, text: &str) -> u64 {
    let author = Author::Webhook { webhook_id: 77, name: name.into(), avatar_url: None };
    stage
        .server
        .with(|w| w.create_message(stage.channel, author, Draft { content: text, ..Draft::default() }).ok())
        .expect("posted")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repost_is_found_after_more_than_a_page_of_messages_in_a_busy_channel() {
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let original = stage.server.post(stage.channel, stage.user_of("pm"), "Part one. Part two. TURN_COMPLETE");
    for i in 0..150 {
        stage.operator_says(&format!("chatter {i}"));
    }
    let one = MessageId(webhook_says(&stage, "PM", "Part one."));
    for i in 0..120 {
        stage.operator_says(&format!("more chatter {i}"));
    }
    let two = MessageId(webhook_says(&stage, "PM", "Part two."));
    let rest = rest_of(&stage);
    let (channel, after) = (ChannelId(stage.channel), MessageId(original));
    let parts = ["Part one.".to_owned(), "Part two.".to_owned(), "Part three.".to_owned()];
    assert_eq!(rest.reposts_made(channel, after, "PM", &parts[..1]).await.unwrap(), [one], "past 150 messages");
    assert_eq!(rest.reposts_made(channel, after, "PM", &parts).await.unwrap(), [one, two], "two of three, to the end");
    assert!(rest.reposts_made(channel, after, "Developer", &parts).await.unwrap().is_empty(), "another persona's name");
}

/// A message read back from the history (a catch-up after a restart) keeps the flags its repost keeps, as one the
/// gateway delivers does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_read_from_the_history_keeps_the_flags_a_repost_keeps() {
    use local_discord::messages::SUPPRESS_NOTIFICATIONS;
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let before = stage.operator_says("before");
    let draft = Draft { content: "Quietly. TURN_COMPLETE", flags: SUPPRESS_NOTIFICATIONS, ..Draft::default() };
    stage.server.post_draft(stage.channel, stage.user_of("pm"), draft);
    stage.server.post(stage.channel, stage.user_of("dev"), "Loudly.");
    let page = rest_of(&stage).messages_after(ChannelId(stage.channel), MessageId(before), 10).await.unwrap();
    let flags: Vec<u64> = page.messages.iter().map(|m| m.flags.bits()).collect();
    assert_eq!(flags, [SUPPRESS_NOTIFICATIONS, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repost_part_is_found_without_the_whitespace_discord_drops_around_it() {
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let original = stage.server.post(stage.channel, stage.user_of("pm"), "Long answer. TURN_COMPLETE");
    // A part cut at a blank line ends with a line break; Discord keeps its text without it.
    let first = MessageId(webhook_says(&stage, "PM", "First paragraph."));
    let rest = rest_of(&stage);
    let parts = ["First paragraph.\n".to_owned(), "Second paragraph.".to_owned()];
    let found = rest.reposts_made(ChannelId(stage.channel), MessageId(original), "PM", &parts).await.unwrap();
    assert_eq!(found, [first], "the first part is made: only the second is posted again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announcement_is_found_among_the_bots_own_messages_past_a_page_and_behind_role_mentions() {
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let text = "🎙️ <@102> (dev) has the floor: 60s. End your message with TURN_COMPLETE.";
    let before = stage.operator_says("before");
    let (rest, identity) = rest_and_identity_of(&stage);
    let channel = ChannelId(stage.channel);
    let unknown = rest.announcement_made(channel, MessageId(before), text).await.expect_err("own id not known yet");
    assert!(unknown.is_transient(), "asked again once connected: {unknown}");
    identity.set_user(UserId(stage.bot_user));
    // The same words from someone else, and through a webhook, are not the bot's announcement.
    stage.server.post(stage.channel, stage.user_of("pm"), text);
    webhook_says(&stage, "DEV", text);
    for i in 0..150 {
        stage.operator_says(&format!("chatter {i}"));
    }
    assert_eq!(rest.announcement_made(channel, MessageId(before), text).await.unwrap(), None, "not posted yet");
    let posted = stage.server.post(stage.channel, stage.bot_user, &format!("<@&{}> {text}", stage.bot_role));
    let found = rest.announcement_made(channel, MessageId(before), text).await.unwrap();
    assert_eq!(found, Some(MessageId(posted)), "past 150 messages, behind an escalation's role mention");
    assert_eq!(rest.announcement_made(channel, MessageId(posted), text).await.unwrap(), None, "only after `after`");
}

/// An agent's message with a file (and an embed of its own), posted as it would be through Discord.
fn post_with_file(scene: &Scene, persona: &str, text: &str, name: &str, bytes: &[u8]) -> u64 {
    let stage = &scene.stage;
    let attachment = stage.server.with(|w| {
        let id = w.snowflake();
        w.files.insert(id, bytes.to_vec());
        Attachment {
            id,
            filename: name.into(),
            content_type: Some("text/plain".into()),
            description: None,
            size: bytes.len(),
        }
    });
    let embed = serde_json::json!({"type": "rich", "title": "Build report", "description": "all green"});
    let draft = Draft { content: text, embeds: vec![embed], attachments: vec![attachment], ..Draft::default() };
    stage.server.post_draft(stage.channel, scene.user(persona), draft)
}

/// The messages of the scene's channel still showing.
fn showing(scene: &Scene) -> Vec<Message> {
    let channel = scene.stage.channel;
    scene
        .stage
        .server
        .with(|w| w.messages.values().filter(|m| m.channel_id == channel && !m.deleted).cloned().collect())
}

fn bytes_of(scene: &Scene, attachment: &Attachment) -> Vec<u8> {
    scene.stage.server.with(|w| w.files[&attachment.id].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_message_with_a_file_and_an_embed_is_reposted_with_the_same_bytes_and_no_signal() {
    let scene = Scene::started().await;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let signal = post_with_file(&scene, "pm", "Here is the log. TURN_COMPLETE", "build.log", &bytes);
    scene.until("dev's floor", |v| v.iter().any(|m| common::is_floor(m, "dev")).then_some(())).await;
    scene.handled(signal).await;

    let showing = showing(&scene);
    assert!(!showing.iter().any(|m| m.id == signal), "the original is deleted");
    let bot = scene.stage.bot_user;
    let agents = showing.iter().filter(|m| !matches!(m.author, Author::User(u) if u == bot));
    assert!(!agents.into_iter().any(|m| m.content.contains("TURN_COMPLETE")), "no signal left showing");
    let repost = showing
        .iter()
        .find(|m| matches!(&m.author, Author::Webhook { name, .. } if name == "PM"))
        .expect("a repost as pm");
    assert_eq!(repost.content, "Here is the log.");
    assert_eq!(repost.attachments.len(), 1, "the file carried over");
    assert_eq!(repost.attachments[0].filename, "build.log");
    assert_eq!(bytes_of(&scene, &repost.attachments[0]), bytes, "byte for byte");
    assert_eq!(repost.embeds.len(), 1, "the embed carried over");
    assert_eq!(repost.embeds[0]["title"], "Build report");
    scene.assert_invariants().await;
}

/// Found by a review: without Read Message History the bot could not read back a message with files to repost it,
/// and blamed Manage Messages or Manage Webhooks as it switched every later turn to observe mode. Now it says what is
/// missing at the start, relays text as before, and leaves the message with files as posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_read_message_history_text_still_relays_and_a_message_with_files_stays_as_posted() {
    use local_discord::permissions::Permissions;
    use local_discord::world::OverwriteTarget;
    let scene = Scene::new().await;
    let (channel, role) = (scene.stage.channel, scene.stage.bot_role);
    let deny = Permissions::READ_MESSAGE_HISTORY;
    scene.stage.server.set_overwrite(channel, OverwriteTarget::Role(role), Permissions::empty(), deny);
    scene.start_session().await;
    let warned =
        |m: &local_discord::world::SeenMessage| m.content.contains("missing the **Read Message History** permission");
    scene.until("the start's warning", |v| v.iter().any(warned).then_some(())).await;

    let text = scene.say("pm", "Plain text. TURN_COMPLETE");
    scene.until("dev's floor", |v| v.iter().any(|m| common::is_floor(m, "dev")).then_some(())).await;
    let view = scene.until_gone(text).await;
    assert!(view.iter().any(|m| m.from_webhook && m.content == "Plain text."), "text relays without the permission");

    let with_file = post_with_file(&scene, "dev", "The log. TURN_COMPLETE", "build.log", b"all green");
    scene.until("critic's floor", |v| v.iter().any(|m| common::is_floor(m, "critic")).then_some(())).await;
    scene.handled(with_file).await;
    let third = scene.say("critic", "Still relayed. TURN_COMPLETE");
    let view = scene.until_gone(third).await;
    assert!(view.iter().any(|m| m.from_webhook && m.content == "Still relayed."), "relay mode kept");
    assert!(showing(&scene).iter().any(|m| m.id == with_file), "the message with a file stays as posted");
    let said = |needle: &str| view.iter().filter(|m| m.content.contains(needle)).count();
    assert_eq!(said("**Read Message History**"), 1, "said once:\n{view:#?}");
    assert_eq!(said("to observe mode"), 0, "no switch to observe mode:\n{view:#?}");
    assert_eq!(scene.session().await.display_mode, turn_manager::core::session::DisplayMode::Relay);
}

/// Found by a review: Discord refuses a reply from a bot without Read Message History (403, code 160002), and the bot
/// took that refusal of its answer to an agent's mistyped signal for "I may not post here" and paused the session
/// without a word. Now the answer is posted as a plain message that mentions the agent, and the turns go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_read_message_history_an_answer_to_an_agent_mentions_it_instead_of_replying() {
    use local_discord::permissions::Permissions;
    use local_discord::world::OverwriteTarget;
    let scene = Scene::new().await;
    let (channel, role) = (scene.stage.channel, scene.stage.bot_role);
    let deny = Permissions::READ_MESSAGE_HISTORY;
    scene.stage.server.set_overwrite(channel, OverwriteTarget::Role(role), Permissions::empty(), deny);
    scene.start_session().await;
    scene.until("pm's floor", |v| v.iter().any(|m| common::is_floor(m, "pm")).then_some(())).await;

    let typo = scene.say("pm", "NOTE: checking the logs first");
    scene.handled(typo).await;
    let is_answer = |m: &local_discord::world::SeenMessage| m.content.contains("is not a signal here");
    let answer = scene.until("the answer to pm", |v| v.iter().find(|m| is_answer(m)).cloned()).await;
    let pm = scene.user("pm");
    assert!(
        answer.content.starts_with(&format!("<@{pm}> ⚠️ `NOTE: checking the logs first` is not a signal here")),
        "{answer:?}"
    );
    assert_eq!(answer.pinged, vec![pm], "it calls on pm alone");
    let session = scene.session().await;
    assert_eq!(session.status, turn_manager::core::session::SessionStatus::Running, "{:?}", session.pause_reason);

    let done = scene.say("pm", "Checked. TURN_COMPLETE");
    scene.until("dev's floor", |v| v.iter().any(|m| common::is_floor(m, "dev")).then_some(())).await;
    scene.until_gone(done).await;
    assert!(scene.events("posting_refused").is_empty());
}

/// The parts the bot's webhooks use, its REST client connected (as after the gateway's READY, bar its own id).
fn connected_parts(stage: &Stage) -> (Arc<DiscordHttp>, Arc<Access>, Arc<Identity>) {
    use serenity::all as discord;
    let base = stage.server.base_url();
    let serenity = discord::HttpBuilder::new(&stage.bot_token).proxy(&base).ratelimiter_disabled(true).build();
    let identity = Arc::new(Identity::default());
    let budget = Arc::new(RestBudget::new(45));
    let access = Arc::new(Access::new(identity.clone(), Vec::new(), budget.clone()));
    access.connect(Arc::new(serenity), Arc::new(discord::Cache::new()));
    (Arc::new(DiscordHttp::new(&stage.bot_token, Some(&base), budget)), access, identity)
}

/// Before READY the bot does not know who it is, so it cannot tell its own webhook from another: it must not make a
/// second one, but wait (a transient error, which the sender's retry policy waits out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_ready_a_repost_waits_for_the_bots_identity_instead_of_making_another_webhook() {
    use turn_manager::discord::rest::webhooks::Webhooks;
    use turn_manager::discord::rest::{Carried, RestError, Voice};

    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let (http, access, identity) = connected_parts(&stage);
    let webhooks = Webhooks::new(http, access, identity.clone());
    let hooks = || stage.server.with(|w| w.webhooks.len());
    let voice = Voice { name: "PM", avatar_url: None, pings: &[] };
    let channel = ChannelId(stage.channel);

    let early = webhooks.repost(channel, voice, "too early", &Carried::default()).await;
    assert!(matches!(early, Err(RestError::Unavailable(_))), "{early:?}");
    assert!(early.unwrap_err().is_transient(), "retried by the sender");
    assert_eq!(hooks(), 0, "no webhook made blind");

    identity.set_user(turn_manager::core::ids::UserId(stage.bot_user));
    webhooks.repost(channel, voice, "after READY", &Carried::default()).await.expect("reposted");
    assert_eq!(hooks(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_of_the_bots_that_someone_renamed_is_used_rather_than_a_new_one_made() {
    use turn_manager::discord::rest::webhooks::Webhooks;
    use turn_manager::discord::rest::{Carried, Voice};

    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let webhooks_here = || stage.server.with(|w| w.webhooks.values().filter(|h| h.channel_id == stage.channel).count());
    // Someone's own webhook, and the bot's, renamed in Server Settings.
    let (theirs, renamed) = stage.server.with(|w| {
        let mut add = |name: &str, creator: u64| {
            let id = w.snowflake();
            let token = format!("tok{id:x}");
            let webhook = local_discord::world::Webhook {
                id,
                token,
                channel_id: stage.channel,
                guild_id: stage.guild,
                name: name.into(),
                creator,
            };
            w.webhooks.insert(id, webhook);
            id
        };
        (add("turn-manager", stage.operator), add("Agents relay", stage.bot_user))
    });
    let (http, access, identity) = connected_parts(&stage);
    identity.set_user(UserId(stage.bot_user));
    let webhooks = Webhooks::new(http, access, identity.clone());
    let voice = Voice { name: "PM", avatar_url: None, pings: &[] };
    webhooks.repost(ChannelId(stage.channel), voice, "Reposted.", &Carried::default()).await.expect("reposted");
    assert_eq!(webhooks_here(), 2, "none made");
    let through = stage.server.with(|w| {
        w.messages.values().find(|m| m.content == "Reposted.").map(|m| m.author.clone()).expect("the repost")
    });
    assert!(
        matches!(through, Author::Webhook { webhook_id, .. } if webhook_id == renamed && webhook_id != theirs),
        "through the bot's renamed webhook, not someone else's of the bot's name: {through:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repost_through_a_webhook_moved_to_another_channel_is_taken_back_and_made_here() {
    let scene = Scene::started().await;
    // pm's first turn makes the bot's webhook; someone then moves it to another channel.
    let first = scene.say("pm", "First. TURN_COMPLETE");
    scene.until("dev's floor", |v| v.iter().any(|m| common::is_floor(m, "dev")).then_some(())).await;
    scene.handled(first).await;
    let elsewhere = scene.stage.server.create_channel(scene.stage.guild, "elsewhere");
    let moved = scene.stage.server.with(|w| {
        let hook = w.webhooks.values_mut().find(|h| h.channel_id == scene.stage.channel).expect("the bot's webhook");
        hook.channel_id = elsewhere;
        hook.id
    });
    let signal = scene.say("dev", "Second. TURN_COMPLETE");
    scene.until("critic's floor", |v| v.iter().any(|m| common::is_floor(m, "critic")).then_some(())).await;
    scene.handled(signal).await;

    let reposts = |channel: u64| -> Vec<Message> {
        scene.stage.server.with(|w| {
            w.messages
                .values()
                .filter(|m| m.channel_id == channel && !m.deleted && matches!(m.author, Author::Webhook { .. }))
                .cloned()
                .collect()
        })
    };
    assert!(reposts(elsewhere).is_empty(), "the misplaced repost is taken back");
    let here: Vec<String> = reposts(scene.stage.channel).into_iter().map(|m| m.content).collect();
    assert_eq!(here, ["First.", "Second."], "each shown once, here");
    assert!(!showing(&scene).iter().any(|m| m.id == signal), "the original is deleted once its repost is here");
    let hooks_here =
        scene.stage.server.with(|w| w.webhooks.values().filter(|h| h.channel_id == scene.stage.channel).count());
    assert_eq!(hooks_here, 1, "a webhook made here");
    assert!(scene.stage.server.with(|w| w.webhooks.contains_key(&moved)), "the moved one is left alone");
}

/// Found by a review: the threads of one parent share its webhook, and its lock was held through the whole repost,
/// so one thread's slow call (an upload, a time-out) held every other thread's relays and announcements.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_repost_in_one_thread_does_not_hold_up_another_threads_relay() {
    use common::{PATIENCE, is_floor};
    use local_discord::faults::RouteAction;
    use std::time::{Duration, Instant};
    let scene = Scene::new().await;
    let server = &scene.stage.server;
    let parent = scene.stage.channel;
    let (one, two) = (server.create_thread(parent, "one"), server.create_thread(parent, "two"));
    let floor_in = |thread: u64, persona: &'static str| {
        server.wait_for("a floor", PATIENCE, move |w| w.view(thread).iter().any(|m| is_floor(m, persona)).then_some(()))
    };
    for thread in [one, two] {
        server.post(thread, scene.stage.operator, "!turn start");
        floor_in(thread, "pm").await.unwrap();
    }
    // A first relay makes the parent's webhook.
    server.post(one, scene.user("pm"), "Warm up. TURN_COMPLETE");
    floor_in(one, "dev").await.unwrap();

    // Thread one's next repost takes 6 s: Discord slow for that call alone.
    server.faults(|f| f.on_route(Some("POST"), "/webhooks/", RouteAction::Slow(Duration::from_secs(6)), 1));
    server.post(one, scene.user("dev"), "Slow one. TURN_COMPLETE");
    server
        .wait_for("thread one's repost in flight", PATIENCE, |w| (!w.faults.route_faults_armed()).then_some(()))
        .await
        .unwrap();
    let started = Instant::now();
    server.post(two, scene.user("pm"), "Quick one. TURN_COMPLETE");
    floor_in(two, "dev").await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "thread two's relay and next floor waited {took:?} for thread one's call");
    floor_in(one, "critic").await.unwrap();
}

/// Found by a review: a message someone deleted (its author, a moderator) while its relay waited behind a slow call
/// was reposted all the same, undoing the deletion. The gateway's MESSAGE_DELETE reaches the channel, and the relay
/// waiting posts nothing; the turn it ended stays ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_deleted_while_its_relay_waits_behind_a_slow_call_is_not_reposted() {
    use common::{PATIENCE, is_floor};
    use local_discord::faults::RouteAction;
    use std::time::Duration;
    let scene = Scene::new().await;
    let server = &scene.stage.server;
    let channel = scene.stage.channel;
    let floor = |persona: &'static str| {
        server.wait_for("a floor", PATIENCE * 3, move |w| {
            w.view(channel).iter().any(|m| is_floor(m, persona)).then_some(())
        })
    };
    server.post(channel, scene.stage.operator, "!turn start");
    floor("pm").await.unwrap();
    // dev's floor announcement takes 4 s: Discord slow for that call alone.
    server.faults(|f| f.on_route(Some("POST"), "/messages", RouteAction::Slow(Duration::from_secs(4)), 1));
    server.post(channel, scene.user("pm"), "Mine. TURN_COMPLETE");
    server
        .wait_for("dev's floor in flight", PATIENCE, |w| (!w.faults.route_faults_armed()).then_some(()))
        .await
        .unwrap();
    // dev saw its mention already (or answers first): its signal's relay waits behind the slow announcement, and a
    // moderator deletes it at once. (The gateway carries the deletion after the message, which the shard's
    // collector hands the channel first.)
    let removed = server.post(channel, scene.user("dev"), "Something a moderator removes. TURN_COMPLETE");
    server.delete_message(removed);
    floor("critic").await.unwrap();
    let view = server.view(channel);
    assert!(
        !view.iter().any(|m| m.from_webhook && m.content.contains("moderator removes")),
        "the deleted message came back as a repost: {view:?}"
    );
    assert!(view.iter().any(|m| m.from_webhook && m.content == "Mine."), "pm's relay went through: {view:?}");
}

/// An agent's `@silent` message (and one whose link previews it suppressed) is reposted the same way: before, the
/// repost notified the person it mentioned, whom the agent had meant not to disturb.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_message_is_reposted_silent() {
    use common::{PATIENCE, is_floor};
    use local_discord::messages::{SUPPRESS_EMBEDS, SUPPRESS_NOTIFICATIONS};
    let scene = Scene::new().await;
    let server = &scene.stage.server;
    let (channel, operator) = (scene.stage.channel, scene.stage.operator);
    let floor = |persona: &'static str| {
        server
            .wait_for("a floor", PATIENCE, move |w| w.view(channel).iter().any(|m| is_floor(m, persona)).then_some(()))
    };
    server.post(channel, operator, "!turn start");
    floor("pm").await.unwrap();
    let text = format!("<@{operator}> see https://example.org quietly. TURN_COMPLETE");
    let flags = SUPPRESS_NOTIFICATIONS | SUPPRESS_EMBEDS;
    server.post_draft(channel, scene.user("pm"), Draft { content: &text, flags, ..Draft::default() });
    floor("dev").await.unwrap();
    let view = server.view(channel);
    let repost = view.iter().find(|m| m.from_webhook && m.content.ends_with("quietly.")).expect("reposted");
    assert_eq!(repost.flags, flags, "{repost:?}");
    assert!(repost.pinged.is_empty(), "the operator was notified: {repost:?}");
    // Without the flag, the same words notify the operator (users are the one mention a repost lets through).
    server.post(channel, scene.user("dev"), &format!("<@{operator}> see this. TURN_COMPLETE"));
    floor("critic").await.unwrap();
    let view = server.view(channel);
    let repost = view.iter().find(|m| m.from_webhook && m.content.ends_with("see this.")).expect("reposted");
    assert_eq!((repost.flags, &repost.pinged[..]), (0, &[operator][..]), "{repost:?}");
}

/// Found by a review: a repost pinged every user its text mentioned, the personas' accounts too, so an agent that
/// answers mentions (OpenClaw's `allowBots: "mentions"`) was called on again by the repost of a message that had
/// called on it already, and answered out of turn. The people it mentions are pinged; the next persona is called
/// on by its announcement alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repost_pings_the_people_its_agent_mentioned_but_no_persona() {
    let scene = Scene::started().await;
    let (operator, dev, critic) = (scene.stage.operator, scene.user("dev"), scene.user("critic"));
    let text = format!("<@{operator}> <@!{dev}> <@{critic}> <@{operator}> over to you. TURN_COMPLETE");
    let id = scene.say("pm", &text);
    scene.handled(id).await;
    let view = scene.view();
    let repost = view.iter().find(|m| m.from_webhook && m.content.ends_with("over to you.")).expect("reposted");
    assert_eq!(repost.pinged, vec![operator], "{repost:?}");
    let floor = view.iter().find(|m| common::is_floor(m, "dev")).expect("dev's floor");
    assert_eq!(floor.pinged, vec![dev], "the announcement calls on dev");
}

/// Found by a review: an agent that posts with its mentions off (discord.py's `AllowedMentions.none()`, as the
/// example agents do) pinged nobody, yet the repost of its last message pinged everyone its text named. A repost pings
/// only whom the original pinged; for the edit that adds the signal, whom the edit's mentions name (here the message's
/// own, the local server keeping them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repost_pings_nobody_its_agent_did_not_ping() {
    use local_discord::messages::Draft;
    let scene = Scene::started().await;
    let (operator, channel) = (scene.stage.operator, scene.stage.channel);
    let silent = serde_json::json!({"parse": []});
    let only_operator = serde_json::json!({"parse": [], "users": [operator.to_string()]});
    let post = |persona: &str, text: &str, allowed: &serde_json::Value| {
        let draft = Draft { allowed_mentions: Some(allowed), ..Draft::text(text) };
        scene.stage.server.post_draft(channel, scene.user(persona), draft)
    };
    let someone = 1_312_000_000_000_000_999u64;
    let text = format!("<@{operator}> <@{someone}> please check this. TURN_COMPLETE");
    let id = post("pm", &text, &silent);
    let view = scene.until_gone(id).await;
    let repost = view.iter().find(|m| m.from_webhook && m.content.ends_with("please check this.")).expect("reposted");
    assert_eq!(repost.pinged, Vec::<u64>::new(), "{repost:?}");

    scene.until("dev's floor", |v| v.iter().any(|m| common::is_floor(m, "dev")).then_some(())).await;
    let id = post("dev", &format!("<@{operator}> over to you."), &only_operator);
    scene.handled(id).await;
    scene.stage.server.edit(id, &format!("<@{operator}> over to you. TURN_COMPLETE"));
    let view = scene.until_gone(id).await;
    let repost = view.iter().find(|m| m.from_webhook && m.content.ends_with("over to you.")).expect("reposted");
    assert_eq!(repost.pinged, vec![operator], "whom the original pinged: {repost:?}");
}

/// A message someone deleted once its relay had begun (the repost on its way to Discord) was reposted all the same,
/// undoing the deletion. The relay's own deletion of it finds it gone (404): the repost is taken back; the turn it
/// ended stays ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_deleted_while_its_repost_is_under_way_has_the_repost_taken_back() {
    use common::{PATIENCE, is_floor};
    use local_discord::faults::RouteAction;
    use std::time::Duration;
    let scene = Scene::new().await;
    let server = &scene.stage.server;
    let channel = scene.stage.channel;
    server.post(channel, scene.stage.operator, "!turn start");
    server
        .wait_for("pm's floor", PATIENCE, |w| w.view(channel).iter().any(|m| is_floor(m, "pm")).then_some(()))
        .await
        .unwrap();
    // The repost takes 2 s to be made: Discord slow for that call alone. A moderator deletes the original meanwhile.
    server.faults(|f| f.on_route(Some("POST"), "/webhooks/", RouteAction::Slow(Duration::from_secs(2)), 1));
    let removed = server.post(channel, scene.user("pm"), "Something a moderator removes. TURN_COMPLETE");
    server
        .wait_for("the repost under way", PATIENCE, |w| (!w.faults.route_faults_armed()).then_some(()))
        .await
        .unwrap();
    server.delete_message(removed);
    server
        .wait_for("dev's floor", PATIENCE, |w| w.view(channel).iter().any(|m| is_floor(m, "dev")).then_some(()))
        .await
        .unwrap();
    let reposted = server.with(|w| {
        w.messages.values().any(|m| {
            m.channel_id == channel
                && m.content.contains("moderator removes")
                && matches!(m.author, Author::Webhook { .. })
        })
    });
    assert!(reposted, "the repost was made (the deletion came after it began)");
    server
        .wait_for("the repost taken back", PATIENCE, |w| {
            (!w.view(channel).iter().any(|m| m.content.contains("moderator removes"))).then_some(())
        })
        .await
        .unwrap_or_else(|_| panic!("the deleted message shows as a repost: {:?}", server.view(channel)));
}

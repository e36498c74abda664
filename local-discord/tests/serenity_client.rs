//! The real serenity client against the local server: a small test bot (not turn-manager) connects over real
//! sockets and every behaviour is checked from the client side and in the channel as a person sees it.

use local_discord::LocalDiscord;
use local_discord::faults::{DispatchAction, RouteAction};
use local_discord::permissions::Permissions;
use local_discord::world::{LogKind, OverwriteTarget};
use serenity::all::{
    ChannelId, Command, CommandInteraction, Context, CreateAllowedMentions, CreateCommand, CreateInteractionResponse,
    CreateInteractionResponseFollowup, CreateInteractionResponseMessage, CreateMessage, CreateWebhook,
    EditInteractionResponse, EditMessage, EventHandler, ExecuteWebhook, GatewayIntents, Guild, Http, HttpBuilder,
    Interaction, Message, MessageId, MessageUpdateEvent, Nonce, ReactionType, Ready, ResumedEvent,
};
use serenity::async_trait;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

const WAIT: Duration = Duration::from_secs(10);

/// What the test bot saw, in the order serenity handed it over.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Ready,
    GuildCreate(u64),
    Message { id: u64, content: String, webhook: bool },
    Update { id: u64, content: String },
    Delete(u64),
    Resumed,
    Interaction(String),
}

struct Recorder(UnboundedSender<Seen>);

#[async_trait]
impl EventHandler for Recorder {
    async fn ready(&self, _: Context, _: Ready) {
        let _ = self.0.send(Seen::Ready);
    }
    async fn guild_create(&self, _: Context, guild: Guild, _: Option<bool>) {
        let _ = self.0.send(Seen::GuildCreate(guild.id.get()));
    }
    async fn message(&self, _: Context, m: Message) {
        let _ = self.0.send(Seen::Message { id: m.id.get(), content: m.content, webhook: m.webhook_id.is_some() });
    }
    async fn message_update(&self, _: Context, _: Option<Message>, _: Option<Message>, e: MessageUpdateEvent) {
        let _ = self.0.send(Seen::Update { id: e.id.get(), content: e.content.unwrap_or_default() });
    }
    async fn message_delete(&self, _: Context, _: ChannelId, id: MessageId, _: Option<serenity::all::GuildId>) {
        let _ = self.0.send(Seen::Delete(id.get()));
    }
    async fn resume(&self, _: Context, _: ResumedEvent) {
        let _ = self.0.send(Seen::Resumed);
    }
    async fn interaction_create(&self, ctx: Context, interaction: Interaction) {
        if let Interaction::Command(command) = interaction {
            answer(&ctx, &command).await;
            let _ = self.0.send(Seen::Interaction(command.data.name.clone()));
        }
    }
}

async fn answer(ctx: &Context, command: &CommandInteraction) {
    if command.data.name == "slow" {
        // Deferred: "thinking" first, then the original response is edited, then a follow-up.
        command.defer(&ctx.http).await.expect("deferred");
        command.edit_response(&ctx.http, EditInteractionResponse::new().content("done slowly")).await.expect("edited");
        let followup = CreateInteractionResponseFollowup::new().content("and one more thing");
        command.create_followup(&ctx.http, followup).await.expect("follow-up sent");
        return;
    }
    let text = format!("pong from {}", command.data.name);
    let reply = CreateInteractionResponse::Message(CreateInteractionResponseMessage::new().content(text));
    command.create_response(&ctx.http, reply).await.expect("interaction answered");
}

/// A server with a guild, a channel, a person, and a connected test bot.
struct Fixture {
    server: LocalDiscord,
    guild: u64,
    channel: u64,
    person: u64,
    bot: u64,
    http: Arc<Http>,
    seen: UnboundedReceiver<Seen>,
}

impl Fixture {
    /// `bot_permissions`: what the bot's role grants.
    async fn start(bot_permissions: Permissions) -> Self {
        let server = LocalDiscord::start().await.unwrap();
        let person = server.create_user("alice");
        let (bot, token) = server.create_bot("testbot");
        let guild = server.create_guild("Lab", person);
        let role = server.create_role(guild, "bot", bot_permissions);
        server.add_member(guild, bot, &[role]);
        let channel = server.create_channel(guild, "general");
        let http = HttpBuilder::new(&token).proxy(server.base_url()).ratelimiter_disabled(true).build();
        let (tx, seen) = unbounded_channel();
        let intents = GatewayIntents::GUILDS | GatewayIntents::GUILD_MESSAGES | GatewayIntents::MESSAGE_CONTENT;
        let mut client =
            serenity::all::ClientBuilder::new_with_http(http, intents).event_handler(Recorder(tx)).await.unwrap();
        let http = client.http.clone();
        tokio::spawn(async move { client.start().await });
        let mut f = Self { server, guild, channel, person, bot, http, seen };
        f.expect(|s| *s == Seen::Ready).await;
        f
    }

    async fn full() -> Self {
        Self::start(Permissions::ALL.without(Permissions::ADMINISTRATOR)).await
    }

    /// The next event matching `want`, skipping others.
    async fn expect(&mut self, mut want: impl FnMut(&Seen) -> bool) -> Seen {
        tokio::time::timeout(WAIT, async {
            loop {
                let seen = self.seen.recv().await.expect("client alive");
                if want(&seen) {
                    return seen;
                }
            }
        })
        .await
        .expect("event arrives in time")
    }

    /// Every event that arrives within `window` (used only to show that something did NOT arrive).
    async fn drain(&mut self, window: Duration) -> Vec<Seen> {
        let mut all = Vec::new();
        while let Ok(Some(seen)) = tokio::time::timeout(window, self.seen.recv()).await {
            all.push(seen);
        }
        all
    }

    fn channel_id(&self) -> ChannelId {
        ChannelId::new(self.channel)
    }

    fn status_of(err: serenity::Error) -> u16 {
        match err {
            serenity::Error::Http(e) => e.status_code().map_or(0, |s| s.as_u16()),
            other => panic!("not an HTTP error: {other:?}"),
        }
    }
}

fn is_message(content: &str) -> impl FnMut(&Seen) -> bool + '_ {
    move |s| matches!(s, Seen::Message { content: c, .. } if c == content)
}

#[tokio::test]
async fn the_bot_gets_ready_and_its_guild() {
    let mut f = Fixture::full().await;
    let guild = f.guild;
    assert_eq!(f.expect(|s| matches!(s, Seen::GuildCreate(_))).await, Seen::GuildCreate(guild));
    let identified = f.server.log().iter().filter(|e| matches!(e.kind, LogKind::GatewayReceived { op: 2, .. })).count();
    assert_eq!(identified, 1);
    let hello = f.server.log().iter().any(|e| matches!(e.kind, LogKind::GatewaySent { user: None, op: 10, .. }));
    assert!(hello, "HELLO is in the log of frames sent");
}

#[tokio::test]
async fn messages_posted_by_people_reach_the_bot() {
    let mut f = Fixture::full().await;
    let id = f.server.post(f.channel, f.person, "hello bot");
    assert_eq!(
        f.expect(is_message("hello bot")).await,
        Seen::Message { id, content: "hello bot".into(), webhook: false }
    );
}

#[tokio::test]
async fn posts_edits_deletes_and_reactions_show_in_the_channel() {
    let mut f = Fixture::full().await;
    let sent = f.channel_id().say(&f.http, "first draft").await.unwrap();
    f.expect(is_message("first draft")).await;
    let mut sent = sent;
    sent.edit(&f.http, EditMessage::new().content("final text")).await.unwrap();
    assert_eq!(
        f.expect(|s| matches!(s, Seen::Update { .. })).await,
        Seen::Update { id: sent.id.get(), content: "final text".into() }
    );
    sent.react(&f.http, ReactionType::Unicode("✅".into())).await.unwrap();
    let view = f.server.view(f.channel);
    assert_eq!(view.len(), 1);
    assert_eq!((view[0].author.as_str(), view[0].content.as_str(), view[0].edited), ("testbot", "final text", true));
    assert_eq!(view[0].reactions, [("✅".to_owned(), 1)]);

    let theirs = f.server.post(f.channel, f.person, "delete me");
    f.http.delete_message(f.channel_id(), MessageId::new(theirs), None).await.unwrap();
    assert_eq!(f.expect(|s| matches!(s, Seen::Delete(_))).await, Seen::Delete(theirs));
    assert!(f.server.view(f.channel).iter().all(|m| m.id != theirs), "deleted messages are gone for people");
    let fetched = f.channel_id().message(&f.http, sent.id).await.unwrap();
    assert_eq!(fetched.content, "final text");
}

#[tokio::test]
async fn webhooks_post_under_their_display_name_also_in_threads() {
    let mut f = Fixture::full().await;
    let hook = f.channel_id().create_webhook(&f.http, CreateWebhook::new("relay")).await.unwrap();
    let listed = f.channel_id().webhooks(&f.http).await.unwrap();
    assert_eq!(listed.len(), 1);
    let execute = ExecuteWebhook::new().content("as the PM").username("PM").avatar_url("https://example.org/pm.png");
    let posted = hook.execute(&f.http, true, execute).await.unwrap().expect("wait=true returns the message");
    assert_eq!(
        f.expect(is_message("as the PM")).await,
        Seen::Message { id: posted.id.get(), content: "as the PM".into(), webhook: true }
    );
    let view = f.server.view(f.channel);
    assert_eq!((view[0].author.as_str(), view[0].from_webhook), ("PM", true));

    let thread = f.server.create_thread(f.channel, "side topic");
    let in_thread = ExecuteWebhook::new().content("in the thread").username("Dev").in_thread(ChannelId::new(thread));
    let threaded = hook.execute(&f.http, true, in_thread).await.unwrap().expect("wait=true returns the message");
    assert_eq!(f.server.view(thread)[0].author, "Dev");

    // A webhook deletes its own messages with its token; one in a thread only given that thread.
    let other = f.server.post(f.channel, f.person, "not the webhook's");
    let not_its = hook.delete_message(&f.http, None, serenity::all::MessageId::new(other)).await.unwrap_err();
    assert_eq!(Fixture::status_of(not_its), 404);
    let unthreaded = hook.delete_message(&f.http, None, threaded.id).await.unwrap_err();
    assert_eq!(Fixture::status_of(unthreaded), 404);
    hook.delete_message(&f.http, Some(ChannelId::new(thread)), threaded.id).await.unwrap();
    hook.delete_message(&f.http, None, posted.id).await.unwrap();
    assert!(f.server.view(thread).is_empty() && f.server.view(f.channel).iter().all(|m| !m.from_webhook));
    // A known webhook called with another token is refused as Discord does (401, code 50027); an unknown one is not
    // found (404, code 10015).
    let code = |err: serenity::Error| match err {
        serenity::Error::Http(serenity::http::HttpError::UnsuccessfulRequest(e)) => {
            (e.status_code.as_u16(), e.error.code)
        }
        other => panic!("not Discord's error: {other:?}"),
    };
    let wrong = ExecuteWebhook::new().content("with a wrong token");
    let refused = f.http.execute_webhook(hook.id, None, "not-its-token", true, vec![], &wrong).await.unwrap_err();
    assert_eq!(code(refused), (401, 50027));
    let refused = f.http.get_webhook_with_token(hook.id, "not-its-token").await.unwrap_err();
    assert_eq!(code(refused), (401, 50027));
    let unknown = serenity::all::WebhookId::new(hook.id.get() + 1);
    let gone = f.http.execute_webhook(unknown, None, "not-its-token", true, vec![], &wrong).await.unwrap_err();
    assert_eq!(code(gone), (404, 10015));
    assert!(f.server.view(f.channel).iter().all(|m| !m.from_webhook), "nothing posted");
    hook.delete(&f.http).await.unwrap();
    assert!(f.channel_id().webhooks(&f.http).await.unwrap().is_empty());
}

#[tokio::test]
async fn missing_permissions_are_refused_with_403() {
    let f = Fixture::start(Permissions::EVERYONE_DEFAULT).await;
    let theirs = f.server.post(f.channel, f.person, "not yours");
    let err = f.http.delete_message(f.channel_id(), MessageId::new(theirs), None).await.unwrap_err();
    assert_eq!(Fixture::status_of(err), 403);
    let err = f.channel_id().create_webhook(&f.http, CreateWebhook::new("relay")).await.unwrap_err();
    assert_eq!(Fixture::status_of(err), 403);
    // A channel overwrite can take Send Messages away.
    f.server.set_overwrite(f.channel, OverwriteTarget::Member(f.bot), Permissions::empty(), Permissions::SEND_MESSAGES);
    let err = f.channel_id().say(&f.http, "hi").await.unwrap_err();
    assert_eq!(Fixture::status_of(err), 403);
    assert_eq!(f.server.view(f.channel).len(), 1);
}

#[tokio::test]
async fn discord_rules_length_limit_nonce_and_allowed_mentions() {
    let mut f = Fixture::full().await;
    // serenity refuses long messages itself, so the raw route is called to see Discord's own answer.
    let too_long = serde_json::json!({"content": "x".repeat(2001)});
    let err = f.http.send_message(f.channel_id(), vec![], &too_long).await.unwrap_err();
    assert_eq!(Fixture::status_of(err), 400);

    let with_nonce = || CreateMessage::new().content("once").nonce(Nonce::String("n-1".into())).enforce_nonce(true);
    let first = f.channel_id().send_message(&f.http, with_nonce()).await.unwrap();
    let again = f.channel_id().send_message(&f.http, with_nonce()).await.unwrap();
    assert_eq!(first.id, again.id, "a repeated nonce returns the first message");
    assert_eq!(f.server.view(f.channel).len(), 1);

    let text = format!("@everyone look, <@{}>", f.person);
    let only_users = CreateMessage::new().content(&text).allowed_mentions(CreateAllowedMentions::new());
    f.channel_id().send_message(&f.http, only_users).await.unwrap();
    let pinged = CreateMessage::new()
        .content("you, <@".to_owned() + &f.person.to_string() + ">")
        .allowed_mentions(CreateAllowedMentions::new().users([serenity::all::UserId::new(f.person)]));
    f.channel_id().send_message(&f.http, pinged).await.unwrap();
    f.expect(|s| matches!(s, Seen::Message { content, .. } if content.starts_with("you"))).await;
    let view = f.server.view(f.channel);
    assert!(view[1].pinged.is_empty(), "nothing allowed: nobody pinged");
    assert_eq!(view[2].pinged, [f.person]);
}

#[tokio::test]
async fn history_is_listed_with_before_after_and_limit() {
    let f = Fixture::full().await;
    let ids: Vec<u64> = (0..5).map(|i| f.server.post(f.channel, f.person, &format!("m{i}"))).collect();
    let after = f
        .http
        .get_messages(f.channel_id(), Some(serenity::all::MessagePagination::After(MessageId::new(ids[1]))), Some(2))
        .await
        .unwrap();
    assert_eq!(after.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["m3", "m2"]);
    let before = f
        .http
        .get_messages(f.channel_id(), Some(serenity::all::MessagePagination::Before(MessageId::new(ids[4]))), Some(2))
        .await
        .unwrap();
    assert_eq!(before.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["m3", "m2"]);
}

#[tokio::test]
async fn a_resumable_close_resumes_and_replays_what_was_missed() {
    let mut f = Fixture::full().await;
    f.server.close_gateway(f.bot, true);
    // Posted while the bot is away (or reconnecting): it must still arrive, by replay.
    let missed = f.server.post(f.channel, f.person, "while you were away");
    // serenity runs handlers concurrently, so the replayed message and RESUMED may be seen in either order.
    let (mut resumed, mut replayed) = (false, None);
    while !(resumed && replayed.is_some()) {
        match f.expect(|s| *s == Seen::Resumed || matches!(s, Seen::Message { .. })).await {
            Seen::Resumed => resumed = true,
            message => replayed = Some(message),
        }
    }
    assert_eq!(replayed.unwrap(), Seen::Message { id: missed, content: "while you were away".into(), webhook: false });
    let log = f.server.log();
    // The missed dispatch went out once, by the replay after the client's RESUME.
    let resume_at = log.iter().position(|e| matches!(e.kind, LogKind::GatewayReceived { op: 6, .. })).unwrap();
    let sent_at: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(&e.kind, LogKind::GatewaySent { event: Some(n), .. } if n == "MESSAGE_CREATE"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(sent_at.len(), 1);
    assert!(sent_at[0] > resume_at, "replayed after RESUME");
    assert!(f.server.is_connected(f.bot));
    let ops: Vec<u8> = log
        .iter()
        .filter_map(|e| match e.kind {
            LogKind::GatewayReceived { op, .. } => Some(op),
            _ => None,
        })
        .collect();
    assert_eq!(ops.iter().filter(|op| **op == 2).count(), 1, "no second IDENTIFY");
    assert!(ops.contains(&6), "the client sent RESUME");
}

#[tokio::test]
async fn invalid_session_makes_the_client_identify_again() {
    let mut f = Fixture::full().await;
    f.server.invalidate_session(f.bot);
    f.expect(|s| *s == Seen::Ready).await;
    let identifies = f.server.log().iter().filter(|e| matches!(e.kind, LogKind::GatewayReceived { op: 2, .. })).count();
    assert_eq!(identifies, 2);
    f.server.post(f.channel, f.person, "after re-identify");
    f.expect(is_message("after re-identify")).await;
}

#[tokio::test]
async fn a_close_that_cannot_be_resumed_ends_in_a_new_identify() {
    let mut f = Fixture::full().await;
    f.server.close_gateway(f.bot, false);
    f.expect(|s| *s == Seen::Ready).await;
    let log = f.server.log();
    assert!(
        log.iter()
            .any(|e| matches!(&e.kind, LogKind::Refused { what } if what.starts_with("RESUME of unknown session")))
    );
}

#[tokio::test]
async fn a_slash_command_is_registered_and_answered() {
    let mut f = Fixture::full().await;
    Command::create_global_command(&f.http, CreateCommand::new("ping").description("Check the bot")).await.unwrap();
    let registered = Command::get_global_commands(&f.http).await.unwrap();
    assert_eq!(registered[0].name, "ping");
    let interaction = f.server.invoke_command(f.channel, f.person, f.bot, "ping", serde_json::json!([]));
    assert_eq!(f.expect(|s| matches!(s, Seen::Interaction(_))).await, Seen::Interaction("ping".into()));
    let answered =
        f.server.wait_for("the answer", WAIT, |w| w.interactions[&interaction].response_message).await.unwrap();
    let view = f.server.view(f.channel);
    assert_eq!(view.iter().find(|m| m.id == answered).unwrap().content, "pong from ping");
}

#[tokio::test]
async fn a_deferred_answer_is_filled_in_by_editing_it_and_followed_up() {
    let mut f = Fixture::full().await;
    Command::create_global_command(&f.http, CreateCommand::new("slow").description("Takes a while")).await.unwrap();
    let interaction = f.server.invoke_command(f.channel, f.person, f.bot, "slow", serde_json::json!([]));
    f.expect(|s| matches!(s, Seen::Interaction(_))).await;
    let original = f.server.with(|w| w.interactions[&interaction].response_message).expect("deferring made a message");
    let contents: Vec<(u64, String)> = f.server.view(f.channel).into_iter().map(|m| (m.id, m.content)).collect();
    assert_eq!(contents, [(original, "done slowly".to_owned()), (contents[1].0, "and one more thing".to_owned())]);
    assert!(f.server.view(f.channel)[0].edited);
}

#[tokio::test]
async fn dispatch_faults_drop_duplicate_and_delay_are_seen_by_the_client() {
    let mut f = Fixture::full().await;
    f.server.faults(|x| x.on_dispatch(Some("MESSAGE_CREATE"), DispatchAction::Drop, 1));
    f.server.post(f.channel, f.person, "dropped");
    f.server.post(f.channel, f.person, "kept");
    f.expect(is_message("kept")).await;

    f.server.faults(|x| x.on_dispatch(Some("MESSAGE_CREATE"), DispatchAction::Duplicate, 1));
    f.server.post(f.channel, f.person, "twice");
    f.server.post(f.channel, f.person, "marker");
    let mut copies = 0;
    loop {
        match f.expect(|s| matches!(s, Seen::Message { .. })).await {
            Seen::Message { content, .. } if content == "twice" => copies += 1,
            Seen::Message { content, .. } if content == "marker" => break,
            _ => {}
        }
    }
    // serenity handles events concurrently; the second copy may trail the marker a little.
    if copies < 2 {
        copies += f
            .drain(Duration::from_millis(300))
            .await
            .iter()
            .filter(|s| matches!(s, Seen::Message { content, .. } if content == "twice"))
            .count();
    }
    assert_eq!(copies, 2, "the client receives a duplicated dispatch twice");

    f.server.faults(|x| x.on_dispatch(Some("MESSAGE_CREATE"), DispatchAction::Delay(Duration::from_millis(300)), 1));
    f.server.post(f.channel, f.person, "slow");
    f.server.post(f.channel, f.person, "fast");
    let rest = f.drain(Duration::from_millis(800)).await;
    let order: Vec<String> = rest
        .into_iter()
        .filter_map(|s| match s {
            Seen::Message { content, .. } => Some(content),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["fast", "slow"], "the delayed dispatch is overtaken");
    // What came before, counted on the server's log of what the client was sent.
    let creates = f
        .server
        .log()
        .iter()
        .filter(|e| matches!(&e.kind, LogKind::GatewaySent { event: Some(n), .. } if n == "MESSAGE_CREATE"))
        .count();
    assert_eq!(creates, 5, "dropped is never sent; the duplicate is one dispatch sent twice");
}

#[tokio::test]
async fn route_faults_429_5xx_and_slow_are_seen_by_the_client() {
    let f = Fixture::full().await;
    f.server.faults(|x| {
        x.on_route(Some("POST"), "/messages", RouteAction::RateLimit { retry_after: Duration::from_secs(2) }, 1)
    });
    assert_eq!(Fixture::status_of(f.channel_id().say(&f.http, "a").await.unwrap_err()), 429);
    f.server.faults(|x| x.on_route(Some("POST"), "/messages", RouteAction::ServerError(502), 1));
    assert_eq!(Fixture::status_of(f.channel_id().say(&f.http, "b").await.unwrap_err()), 502);
    f.server.faults(|x| x.on_route(None, "/messages", RouteAction::Slow(Duration::from_millis(400)), 1));
    let started = Instant::now();
    f.channel_id().say(&f.http, "c").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(400));
    let view = f.server.view(f.channel);
    assert_eq!(view.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["c"]);
    let statuses: Vec<u16> = f
        .server
        .log()
        .iter()
        .filter_map(|e| match &e.kind {
            LogKind::Rest { path, status, .. } if path.ends_with("/messages") => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, [429, 502, 200]);
}

#[tokio::test]
async fn unknown_routes_answer_404_with_discords_body_and_are_logged() {
    let f = Fixture::full().await;
    let err = f.http.get_guild_stickers(serenity::all::GuildId::new(f.guild)).await.unwrap_err();
    assert_eq!(Fixture::status_of(err), 404);
    assert!(
        f.server
            .log()
            .iter()
            .any(|e| matches!(&e.kind, LogKind::Refused { what } if what.contains("unknown route GET")))
    );
}

/// Records which shard each guild's events came on.
struct ShardRecorder(UnboundedSender<(u32, Seen)>);

#[async_trait]
impl EventHandler for ShardRecorder {
    async fn guild_create(&self, ctx: Context, guild: Guild, _: Option<bool>) {
        let _ = self.0.send((ctx.shard_id.0, Seen::GuildCreate(guild.id.get())));
    }
    async fn message(&self, ctx: Context, m: Message) {
        let seen = Seen::Message { id: m.id.get(), content: m.content, webhook: m.webhook_id.is_some() };
        let _ = self.0.send((ctx.shard_id.0, seen));
    }
}

#[tokio::test]
async fn a_sharded_client_gets_each_guild_on_its_own_shard_only() {
    let server = LocalDiscord::start().await.unwrap();
    let person = server.create_user("alice");
    let (bot, token) = server.create_bot("testbot");
    // Guilds until both of two shards have one: Discord's rule is (guild_id >> 22) % 2.
    let mut by_shard: [Option<u64>; 2] = [None, None];
    let mut created = Vec::new();
    while by_shard.iter().any(Option::is_none) {
        let guild = server.create_guild("Lab", person);
        server.add_member(guild, bot, &[]);
        created.push(guild);
        by_shard[((guild >> 22) % 2) as usize].get_or_insert(guild);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let [Some(guild0), Some(guild1)] = by_shard else { unreachable!() };
    let channel0 = server.create_channel(guild0, "zero");
    let channel1 = server.create_channel(guild1, "one");
    let http = HttpBuilder::new(&token).proxy(server.base_url()).ratelimiter_disabled(true).build();
    let (tx, mut seen) = unbounded_channel();
    let intents = GatewayIntents::GUILDS | GatewayIntents::GUILD_MESSAGES | GatewayIntents::MESSAGE_CONTENT;
    let mut client =
        serenity::all::ClientBuilder::new_with_http(http, intents).event_handler(ShardRecorder(tx)).await.unwrap();
    tokio::spawn(async move { client.start_shards(2).await });
    let mut got = Vec::new();
    let wanted = |got: &[(u32, Seen)]| {
        got.iter().any(|(_, s)| *s == Seen::GuildCreate(guild0))
            && got.iter().any(|(_, s)| *s == Seen::GuildCreate(guild1))
    };
    while !wanted(&got) {
        got.push(tokio::time::timeout(WAIT, seen.recv()).await.expect("guilds in time").expect("client alive"));
    }
    server.post(channel0, person, "in zero");
    server.post(channel1, person, "in one");
    let deadline = Instant::now() + Duration::from_millis(500);
    while let Ok(Some(event)) =
        tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), seen.recv()).await
    {
        got.push(event);
    }
    let guilds: Vec<(u32, u64)> = got
        .iter()
        .filter_map(|(shard, s)| if let Seen::GuildCreate(g) = s { Some((*shard, *g)) } else { None })
        .collect();
    assert_eq!(guilds.len(), created.len(), "each guild once, not on both shards: {guilds:?}");
    assert!(guilds.iter().all(|(shard, g)| u64::from(*shard) == (g >> 22) % 2), "each on its own shard: {guilds:?}");
    let messages: Vec<(u32, String)> = got
        .iter()
        .filter_map(
            |(shard, s)| if let Seen::Message { content, .. } = s { Some((*shard, content.clone())) } else { None },
        )
        .collect();
    assert_eq!(messages.len(), 2, "each message once: {messages:?}");
    assert!(messages.contains(&(0, "in zero".into())) && messages.contains(&(1, "in one".into())), "{messages:?}");
    let identified = server.log().iter().filter(|e| matches!(e.kind, LogKind::GatewayReceived { op: 2, .. })).count();
    assert_eq!(identified, 2, "one IDENTIFY per shard");
}

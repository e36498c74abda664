//! What discord.py and discord.js agents call beyond what turn-manager needs, checked with the real serenity
//! client (and raw requests where no client sends the form Discord accepts): threads' fields, typing, reaction
//! events, member chunks, embeds, files, DM channels, threads from messages, numbers as snowflakes, encoded paths.

use local_discord::LocalDiscord;
use local_discord::permissions::Permissions;
use local_discord::world::OverwriteTarget;
use serde_json::json;
use serenity::all::{
    ChannelId, ChannelType, ChunkGuildFilter, Context, CreateAttachment, CreateEmbed, CreateMessage, CreateThread,
    EventHandler, GatewayIntents, GuildChannel, GuildId, GuildMembersChunkEvent, Http, HttpBuilder, Message, MessageId,
    Reaction, ReactionType, Ready, TypingStartEvent, UserId,
};
use serenity::async_trait;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

const WAIT: Duration = Duration::from_secs(10);

/// What the test bot saw.
#[derive(Debug)]
enum Seen {
    Ready(Box<Context>),
    Message(Box<Message>),
    Typing(TypingStartEvent),
    ReactionAdd(Reaction),
    ReactionRemove(Reaction),
    Chunk(GuildMembersChunkEvent),
    ThreadCreate(Box<GuildChannel>),
    GuildThreads(Vec<GuildChannel>),
    BulkDelete(Vec<MessageId>),
    ReactionsCleared(MessageId),
    ChannelUpdate(Box<GuildChannel>),
}

struct Recorder(UnboundedSender<Seen>);

#[async_trait]
impl EventHandler for Recorder {
    async fn ready(&self, ctx: Context, _: Ready) {
        let _ = self.0.send(Seen::Ready(Box::new(ctx)));
    }
    async fn guild_create(&self, _: Context, guild: serenity::all::Guild, _: Option<bool>) {
        let _ = self.0.send(Seen::GuildThreads(guild.threads));
    }
    async fn message(&self, _: Context, m: Message) {
        let _ = self.0.send(Seen::Message(Box::new(m)));
    }
    async fn typing_start(&self, _: Context, e: TypingStartEvent) {
        let _ = self.0.send(Seen::Typing(e));
    }
    async fn reaction_add(&self, _: Context, r: Reaction) {
        let _ = self.0.send(Seen::ReactionAdd(r));
    }
    async fn reaction_remove(&self, _: Context, r: Reaction) {
        let _ = self.0.send(Seen::ReactionRemove(r));
    }
    async fn guild_members_chunk(&self, _: Context, chunk: GuildMembersChunkEvent) {
        let _ = self.0.send(Seen::Chunk(chunk));
    }
    async fn thread_create(&self, _: Context, thread: GuildChannel) {
        let _ = self.0.send(Seen::ThreadCreate(Box::new(thread)));
    }
    async fn message_delete_bulk(&self, _: Context, _: ChannelId, ids: Vec<MessageId>, _: Option<GuildId>) {
        let _ = self.0.send(Seen::BulkDelete(ids));
    }
    async fn reaction_remove_all(&self, _: Context, _: ChannelId, message: MessageId) {
        let _ = self.0.send(Seen::ReactionsCleared(message));
    }
    async fn channel_update(&self, _: Context, _: Option<GuildChannel>, new: GuildChannel) {
        let _ = self.0.send(Seen::ChannelUpdate(Box::new(new)));
    }
}

/// A server with a guild, a channel (and, when asked, a thread made before the bot connects), a person, and a
/// connected test bot whose role has `permissions`.
struct Fixture {
    server: LocalDiscord,
    guild: u64,
    channel: u64,
    person: u64,
    bot: u64,
    token: String,
    http: Arc<Http>,
    ctx: Context,
    seen: UnboundedReceiver<Seen>,
    threads_at_start: Vec<GuildChannel>,
}

impl Fixture {
    async fn start(permissions: Permissions, with_thread: bool) -> Self {
        let server = LocalDiscord::start().await.unwrap();
        let person = server.create_user("alice");
        let (bot, token) = server.create_bot("testbot");
        let guild = server.create_guild("Lab", person);
        let role = server.create_role(guild, "bot", permissions);
        server.add_member(guild, bot, &[role]);
        let channel = server.create_channel(guild, "general");
        if with_thread {
            let thread = server.create_thread(channel, "old topic");
            server.post(thread, person, "in the thread");
        }
        let http = HttpBuilder::new(&token).proxy(server.base_url()).ratelimiter_disabled(true).build();
        let (tx, mut seen) = unbounded_channel();
        let mut client = serenity::all::ClientBuilder::new_with_http(http, GatewayIntents::all())
            .event_handler(Recorder(tx))
            .await
            .unwrap();
        let http = client.http.clone();
        tokio::spawn(async move { client.start().await });
        let (mut ctx, mut threads_at_start) = (None, None);
        while ctx.is_none() || threads_at_start.is_none() {
            match tokio::time::timeout(WAIT, seen.recv()).await.expect("READY and GUILD_CREATE").unwrap() {
                Seen::Ready(c) => ctx = Some(*c),
                Seen::GuildThreads(t) => threads_at_start = Some(t),
                _ => {}
            }
        }
        let (ctx, threads_at_start) = (ctx.unwrap(), threads_at_start.unwrap());
        Self { server, guild, channel, person, bot, token, http, ctx, seen, threads_at_start }
    }

    async fn full() -> Self {
        Self::start(Permissions::ALL.without(Permissions::ADMINISTRATOR), false).await
    }

    /// The next event for which `want` gives something, skipping others.
    async fn expect<T>(&mut self, mut want: impl FnMut(Seen) -> Option<T>) -> T {
        tokio::time::timeout(WAIT, async {
            loop {
                if let Some(found) = want(self.seen.recv().await.expect("client alive")) {
                    return found;
                }
            }
        })
        .await
        .expect("event arrives in time")
    }

    fn channel_id(&self) -> ChannelId {
        ChannelId::new(self.channel)
    }

    /// A raw call, for request forms serenity never sends.
    fn raw(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let url = format!("{}{path}", self.server.base_url());
        reqwest::Client::new().request(method, url).header("authorization", format!("Bot {}", self.token))
    }
}

fn status_of(err: serenity::Error) -> u16 {
    match err {
        serenity::Error::Http(e) => e.status_code().map_or(0, |s| s.as_u16()),
        other => panic!("not an HTTP error: {other:?}"),
    }
}

#[tokio::test]
async fn a_thread_in_guild_create_has_owner_and_counts() {
    let f = Fixture::start(Permissions::ALL.without(Permissions::ADMINISTRATOR), true).await;
    let thread = f.threads_at_start.first().expect("the thread is in GUILD_CREATE");
    assert_eq!(thread.kind, ChannelType::PublicThread);
    assert_eq!(thread.owner_id, Some(UserId::new(f.person)), "discord.py reads owner_id unconditionally");
    assert_eq!(thread.message_count, Some(1));
    assert_eq!(thread.member_count, Some(1));
    assert_eq!(thread.parent_id, Some(f.channel_id()));
    assert!(thread.thread_metadata.is_some());
}

#[tokio::test]
async fn typing_is_accepted_and_dispatched() {
    let mut f = Fixture::full().await;
    f.channel_id().broadcast_typing(&f.http).await.expect("POST /channels/{id}/typing answers 204");
    let typing = f.expect(|s| if let Seen::Typing(t) = s { Some(t) } else { None }).await;
    assert_eq!((typing.channel_id, typing.user_id), (f.channel_id(), UserId::new(f.bot)));
    assert_eq!(typing.guild_id, Some(GuildId::new(f.guild)));
    f.server.start_typing(f.channel, f.person);
    let typing = f.expect(|s| if let Seen::Typing(t) = s { Some(t) } else { None }).await;
    assert_eq!(typing.user_id, UserId::new(f.person));
    assert_eq!(f.server.with(|w| w.typing.clone()), [(f.channel, f.bot), (f.channel, f.person)]);
}

#[tokio::test]
async fn reactions_are_dispatched_when_added_and_removed() {
    let mut f = Fixture::full().await;
    let theirs = f.server.post(f.channel, f.person, "react to me");
    let emoji = ReactionType::Unicode("👍".into());
    f.http.create_reaction(f.channel_id(), MessageId::new(theirs), &emoji).await.unwrap();
    let added = f.expect(|s| if let Seen::ReactionAdd(r) = s { Some(r) } else { None }).await;
    assert_eq!((added.message_id.get(), added.user_id), (theirs, Some(UserId::new(f.bot))));
    assert_eq!(added.emoji, emoji);
    assert_eq!(added.message_author_id, Some(UserId::new(f.person)));
    // The same reaction again changes nothing and dispatches nothing; the person's own does.
    f.http.create_reaction(f.channel_id(), MessageId::new(theirs), &emoji).await.unwrap();
    f.server.react(theirs, f.person, "👍", true);
    let next = f.expect(|s| if let Seen::ReactionAdd(r) = s { Some(r) } else { None }).await;
    assert_eq!(next.user_id, Some(UserId::new(f.person)), "a repeated reaction is not dispatched again");
    f.http.delete_reaction_me(f.channel_id(), MessageId::new(theirs), &emoji).await.unwrap();
    let removed = f.expect(|s| if let Seen::ReactionRemove(r) = s { Some(r) } else { None }).await;
    assert_eq!((removed.message_id.get(), removed.user_id), (theirs, Some(UserId::new(f.bot))));
    assert_eq!(f.server.view(f.channel)[0].reactions, [("👍".to_owned(), 1)]);
}

#[tokio::test]
async fn request_guild_members_is_answered_with_a_chunk() {
    let mut f = Fixture::full().await;
    let nonce = "chunk-1".to_owned();
    f.ctx.shard.chunk_guild(GuildId::new(f.guild), None, false, ChunkGuildFilter::None, Some(nonce.clone()));
    let chunk = f.expect(|s| if let Seen::Chunk(c) = s { Some(c) } else { None }).await;
    assert_eq!((chunk.guild_id.get(), chunk.chunk_index, chunk.chunk_count), (f.guild, 0, 1));
    assert_eq!(chunk.nonce.as_deref(), Some("chunk-1"));
    let mut members: Vec<u64> = chunk.members.keys().map(|u| u.get()).collect();
    members.sort_unstable();
    assert_eq!(members, [f.person, f.bot]);

    f.ctx.shard.chunk_guild(GuildId::new(f.guild), Some(10), false, ChunkGuildFilter::Query("ali".into()), None);
    let chunk = f.expect(|s| if let Seen::Chunk(c) = s { Some(c) } else { None }).await;
    assert_eq!(chunk.members.keys().map(|u| u.get()).collect::<Vec<_>>(), [f.person], "names starting with the query");
}

#[tokio::test]
async fn op_8_with_numbers_for_ids_is_answered_too() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as Frame;
    let f = Fixture::full().await;
    let (mut socket, _) = tokio_tungstenite::connect_async(f.server.gateway_url()).await.unwrap();
    let identify = json!({"op": 2, "d": {"token": f.token, "intents": 0, "properties": {}}});
    socket.send(Frame::text(identify.to_string())).await.unwrap();
    // discord.py sends the guild id (and user ids) as JSON numbers.
    let request = json!({"op": 8, "d": {"guild_id": f.guild, "user_ids": [f.person, 42], "limit": 0}});
    socket.send(Frame::text(request.to_string())).await.unwrap();
    let chunk = tokio::time::timeout(WAIT, async {
        while let Some(Ok(frame)) = socket.next().await {
            let value: serde_json::Value = serde_json::from_str(frame.to_text().unwrap_or("{}")).unwrap_or_default();
            if value["t"] == "GUILD_MEMBERS_CHUNK" {
                return value["d"].clone();
            }
        }
        panic!("the socket closed");
    })
    .await
    .expect("a chunk");
    assert_eq!(chunk["members"][0]["user"]["id"], f.person.to_string());
    assert_eq!(chunk["members"].as_array().unwrap().len(), 1);
    assert_eq!(chunk["not_found"], json!(["42"]));
}

/// Found by a review: a client's close was answered with a close frame that was never flushed (serenity warned
/// "error awaiting close frame" at every clean stop), and nobody waiting on the world learned of the disconnection
/// until something else changed (the sandbox said a manager's stop late, or never).
#[tokio::test]
async fn a_clients_close_is_answered_with_a_close_frame_and_its_disconnection_is_seen_at_once() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as Frame;
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    let f = Fixture::full().await;
    let (bot, token) = f.server.create_bot("raw client");
    let (mut socket, _) = tokio_tungstenite::connect_async(f.server.gateway_url()).await.unwrap();
    let identify = json!({"op": 2, "d": {"token": token, "intents": 0, "properties": {}}});
    socket.send(Frame::text(identify.to_string())).await.unwrap();
    f.server.wait_for("the raw client's session", WAIT, |w| w.is_connected(bot).then_some(())).await.unwrap();
    let server = f.server.clone();
    let watch = tokio::spawn(async move {
        server.wait_for("the disconnection", Duration::from_secs(3600), |w| (!w.is_connected(bot)).then_some(())).await
    });
    socket.send(Frame::Close(Some(CloseFrame { code: CloseCode::Normal, reason: "".into() }))).await.unwrap();
    let answer = tokio::time::timeout(WAIT, async {
        loop {
            match socket.next().await {
                Some(Ok(Frame::Close(frame))) => return Ok(frame.map(|f| u16::from(f.code))),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e.to_string()),
                None => return Err("ended without a close frame".to_owned()),
            }
        }
    })
    .await
    .expect("an answer to the close");
    assert_eq!(answer, Ok(Some(1000)), "the close answered with its code");
    tokio::time::timeout(WAIT, watch).await.expect("seen at once").unwrap().unwrap();
}

#[tokio::test]
async fn embeds_are_stored_and_an_embed_only_message_is_accepted() {
    let mut f = Fixture::full().await;
    let embed = CreateEmbed::new().title("Status").description("all green");
    let sent = f.channel_id().send_message(&f.http, CreateMessage::new().embed(embed)).await.unwrap();
    assert_eq!(sent.embeds[0].title.as_deref(), Some("Status"));
    let got = f.expect(|s| if let Seen::Message(m) = s { Some(m) } else { None }).await;
    assert_eq!(got.embeds[0].description.as_deref(), Some("all green"));
    let fetched = f.channel_id().message(&f.http, sent.id).await.unwrap();
    assert_eq!(fetched.embeds.len(), 1);

    // Discord's limits stay: a 257-character title, 11 embeds, and a message with nothing in it are refused.
    let long_title = json!({"embeds": [{"title": "t".repeat(257)}]});
    assert_eq!(status_of(f.http.send_message(f.channel_id(), vec![], &long_title).await.unwrap_err()), 400);
    let eleven = json!({"embeds": vec![json!({"title": "x"}); 11]});
    assert_eq!(status_of(f.http.send_message(f.channel_id(), vec![], &eleven).await.unwrap_err()), 400);
    let empty = json!({"content": "", "embeds": []});
    assert_eq!(status_of(f.http.send_message(f.channel_id(), vec![], &empty).await.unwrap_err()), 400);
    assert_eq!(f.server.view(f.channel).len(), 1);
}

#[tokio::test]
async fn files_are_uploaded_as_multipart_and_served_back() {
    let f = Fixture::full().await;
    let file = CreateAttachment::bytes(b"hello, file".to_vec(), "notes.txt");
    let sent = f
        .channel_id()
        .send_message(&f.http, CreateMessage::new().content("see attached").add_file(file))
        .await
        .unwrap();
    assert_eq!(sent.content, "see attached");
    let attachment = &sent.attachments[0];
    assert_eq!((attachment.filename.as_str(), attachment.size), ("notes.txt", 11));
    assert_eq!(attachment.download().await.unwrap(), b"hello, file");
    // A file alone is a message too.
    let only_file = CreateAttachment::bytes(vec![0u8; 3], "zeros.bin");
    let sent = f.channel_id().send_message(&f.http, CreateMessage::new().add_file(only_file)).await.unwrap();
    assert_eq!(sent.attachments[0].size, 3);
    let stored = f.server.with(|w| w.messages[&sent.id.get()].attachments.clone());
    assert_eq!(stored[0].filename, "zeros.bin");
}

#[tokio::test]
async fn uploading_without_attach_files_is_refused() {
    let f = Fixture::full().await;
    f.server.set_overwrite(f.channel, OverwriteTarget::Member(f.bot), Permissions::empty(), Permissions::ATTACH_FILES);
    let file = CreateAttachment::bytes(b"x".to_vec(), "x.txt");
    let err = f.channel_id().send_message(&f.http, CreateMessage::new().content("x").add_file(file)).await;
    assert_eq!(status_of(err.unwrap_err()), 403);
    assert!(f.server.view(f.channel).is_empty());
}

#[tokio::test]
async fn dm_channels_are_opened_once_and_carry_messages_both_ways() {
    let mut f = Fixture::full().await;
    let dm = UserId::new(f.person).create_dm_channel(&f.http).await.unwrap();
    assert_eq!(dm.recipient.id.get(), f.person);
    let again = UserId::new(f.person).create_dm_channel(&f.http).await.unwrap();
    assert_eq!(dm.id, again.id, "one DM channel per pair");
    dm.say(&f.http, "hello in private").await.unwrap();
    let view = f.server.view(dm.id.get());
    assert_eq!((view[0].author.as_str(), view[0].content.as_str()), ("testbot", "hello in private"));
    f.server.post(dm.id.get(), f.person, "hi back");
    let got = f.expect(|s| match s {
        Seen::Message(m) if m.content == "hi back" => Some(m),
        _ => None,
    });
    let got = got.await;
    assert_eq!((got.channel_id, got.guild_id), (dm.id, None));
    // Nobody else sees into it, and a number is a recipient id as well as a string.
    assert!(f.server.view(f.channel).is_empty());
    let numeric = f.http.create_private_channel(&json!({"recipient_id": f.person})).await.unwrap();
    assert_eq!(numeric.id, dm.id);
}

#[tokio::test]
async fn threads_start_from_a_message_or_on_their_own() {
    let mut f = Fixture::full().await;
    let topic = f.channel_id().say(&f.http, "let's discuss").await.unwrap();
    let thread =
        f.channel_id().create_thread_from_message(&f.http, topic.id, CreateThread::new("discussion")).await.unwrap();
    assert_eq!(thread.id.get(), topic.id.get(), "a thread from a message takes the message's id");
    assert_eq!((thread.kind, thread.owner_id), (ChannelType::PublicThread, Some(UserId::new(f.bot))));
    let created = f.expect(|s| if let Seen::ThreadCreate(t) = s { Some(t) } else { None }).await;
    assert_eq!(created.id, thread.id);
    thread.id.say(&f.http, "inside").await.unwrap();
    assert_eq!(f.server.view(thread.id.get())[0].content, "inside");
    let fetched = f.channel_id().message(&f.http, topic.id).await.unwrap();
    assert_eq!(fetched.thread.map(|t| t.id), Some(thread.id));
    let twice = f.channel_id().create_thread_from_message(&f.http, topic.id, CreateThread::new("again")).await;
    assert_eq!(status_of(twice.unwrap_err()), 400);

    let private = CreateThread::new("side").kind(ChannelType::PrivateThread);
    let side = f.channel_id().create_thread(&f.http, private).await.unwrap();
    assert_eq!((side.kind, side.parent_id), (ChannelType::PrivateThread, Some(f.channel_id())));
}

#[tokio::test]
async fn starting_a_thread_needs_the_permission() {
    let f = Fixture::start(Permissions::EVERYONE_DEFAULT, false).await;
    let deny = Permissions::CREATE_PUBLIC_THREADS;
    f.server.set_overwrite(f.channel, OverwriteTarget::Role(f.guild), Permissions::empty(), deny);
    let topic = f.channel_id().say(&f.http, "topic").await.unwrap();
    let refused = f.channel_id().create_thread_from_message(&f.http, topic.id, CreateThread::new("t")).await;
    assert_eq!(status_of(refused.unwrap_err()), 403);
}

#[tokio::test]
async fn numbers_are_snowflakes_in_request_bodies() {
    let f = Fixture::full().await;
    let original = f.server.post(f.channel, f.person, "question?");
    // discord.py's `message.reply()` and allowed mentions send ids as JSON numbers.
    let reply = json!({
        "content": format!("answer, <@{}>", f.person),
        "message_reference": {"message_id": original, "channel_id": f.channel, "fail_if_not_exists": true},
        "allowed_mentions": {"parse": [], "users": [f.person]},
    });
    let sent = f.http.send_message(f.channel_id(), vec![], &reply).await.unwrap();
    let reference = sent.message_reference.expect("stored as a reply");
    assert_eq!(reference.message_id, Some(MessageId::new(original)));
    assert_eq!(sent.referenced_message.map(|m| m.content), Some("question?".to_owned()));
    assert_eq!(f.server.view(f.channel)[1].pinged, [f.person], "a numeric id in allowed_mentions.users pings");
}

#[tokio::test]
async fn a_reply_pings_the_replied_author_unless_allowed_mentions_leaves_it_out() {
    let f = Fixture::full().await;
    let original = f.server.post(f.channel, f.person, "question?");
    let reference = json!({"message_id": original.to_string(), "fail_if_not_exists": false});
    let cases = [
        (json!({"content": "by default", "message_reference": reference}), vec![f.person]),
        (
            json!({"content": "asked for", "message_reference": reference,
                   "allowed_mentions": {"parse": [], "replied_user": true}}),
            vec![f.person],
        ),
        (json!({"content": "left out", "message_reference": reference, "allowed_mentions": {"parse": []}}), vec![]),
    ];
    for (body, pinged) in cases {
        let sent = f.http.send_message(f.channel_id(), vec![], &body).await.unwrap();
        let mentioned: Vec<u64> = sent.mentions.iter().map(|u| u.id.get()).collect();
        assert_eq!(mentioned, pinged, "{body}");
        let seen = f.server.view(f.channel).into_iter().find(|m| m.id == sent.id.get()).unwrap();
        assert_eq!(seen.pinged, pinged, "{body}");
        assert_eq!(f.server.with(|w| w.messages[&seen.id].reply_to), Some(original));
    }
    // The author of a reply to its own message is not pinged by it.
    let own = f.server.post(f.channel, f.bot, "a note");
    let body = json!({"content": "more", "message_reference": {"message_id": own.to_string()}});
    let sent = f.http.send_message(f.channel_id(), vec![], &body).await.unwrap();
    assert!(sent.mentions.is_empty());
}

/// `@silent` (SUPPRESS_NOTIFICATIONS): the mention is listed, nobody is notified; the flags a client may set
/// (that and SUPPRESS_EMBEDS) are kept and shown, others left out.
#[tokio::test]
async fn a_silent_message_lists_its_mentions_and_pings_nobody() {
    let f = Fixture::full().await;
    let silent = json!({"content": format!("<@{}> quietly", f.person), "flags": 4096 | 4 | 64});
    let sent = f.http.send_message(f.channel_id(), vec![], &silent).await.unwrap();
    assert_eq!(sent.mentions.iter().map(|u| u.id.get()).collect::<Vec<_>>(), [f.person]);
    assert_eq!(sent.flags.map(|flags| flags.bits()), Some(4096 | 4), "EPHEMERAL (64) cannot be set");
    let seen = f.server.view(f.channel).into_iter().find(|m| m.id == sent.id.get()).unwrap();
    assert!(seen.pinged.is_empty(), "{seen:?}");
    let loud = json!({"content": format!("<@{}> loudly", f.person)});
    let sent = f.http.send_message(f.channel_id(), vec![], &loud).await.unwrap();
    let seen = f.server.view(f.channel).into_iter().find(|m| m.id == sent.id.get()).unwrap();
    assert_eq!(seen.pinged, [f.person]);
}

/// A role nobody may mention is pinged only by an author with Mention @everyone, @here, and All Roles in the
/// channel, its overwrites applied (as turn-manager checks it before calling the control roles).
#[tokio::test]
async fn a_role_that_is_not_mentionable_is_pinged_only_by_an_author_allowed_to_mention_every_role_there() {
    let f = Fixture::full().await;
    let role = f.server.create_role(f.guild, "moderators", Permissions::empty());
    let moderator = f.server.create_user("moderator");
    f.server.add_member(f.guild, moderator, &[role]);
    let member = f.server.create_user("member");
    f.server.add_member(f.guild, member, &[]);
    let pinged = |author: u64| {
        let id = f.server.post(f.channel, author, &format!("<@&{role}> look"));
        f.server.view(f.channel).into_iter().find(|m| m.id == id).unwrap().pinged
    };
    assert!(pinged(member).is_empty(), "named, not pinged");
    f.server.set_overwrite(
        f.channel,
        OverwriteTarget::Member(member),
        Permissions::MENTION_EVERYONE,
        Permissions::empty(),
    );
    assert_eq!(pinged(member), [moderator], "allowed in this channel");
    f.server.set_overwrite(
        f.channel,
        OverwriteTarget::Member(f.bot),
        Permissions::empty(),
        Permissions::MENTION_EVERYONE,
    );
    assert!(pinged(f.bot).is_empty(), "the server's grant denied in this channel");
    f.server.set_role_mentionable(f.guild, role, true);
    assert_eq!(pinged(f.bot), [moderator], "anyone may mention it now");
}

#[tokio::test]
async fn percent_encoded_path_segments_are_decoded() {
    let f = Fixture::full().await;
    let me = f.raw(reqwest::Method::GET, "/api/v10/users/%40me").send().await.unwrap();
    assert_eq!(me.status(), 200, "OpenClaw's Discord plugin asks for /users/%40me");
    let me: serde_json::Value = me.json().await.unwrap();
    assert_eq!(me["id"], f.bot.to_string());
    let not_json = f.raw(reqwest::Method::POST, &format!("/api/v10/channels/{}/messages", f.channel));
    let refused = not_json.header("content-type", "application/json").body("{not json").send().await.unwrap();
    assert_eq!(refused.status(), 400, "a body that is not JSON is refused, not read as empty");
}

#[tokio::test]
async fn applications_have_the_privileged_intents_enabled() {
    use serenity::all::ApplicationFlags;
    let f = Fixture::full().await;
    // OpenClaw reads these flags and warns (and may ignore channel messages) without Message Content.
    let flags = f.http.get_current_application_info().await.unwrap().flags.expect("flags");
    assert!(flags.contains(ApplicationFlags::GATEWAY_MESSAGE_CONTENT), "{flags:?}");
    assert!(flags.contains(ApplicationFlags::GATEWAY_GUILD_MEMBERS | ApplicationFlags::GATEWAY_PRESENCE));
}

#[tokio::test]
async fn pins_bulk_deletes_cleared_reactions_and_channel_edits() {
    let mut f = Fixture::full().await;
    let ids: Vec<u64> = (0..3).map(|i| f.server.post(f.channel, f.person, &format!("m{i}"))).collect();
    f.channel_id().pin(&f.http, MessageId::new(ids[1])).await.unwrap();
    let pins = f.channel_id().pins(&f.http).await.unwrap();
    assert_eq!(pins.iter().map(|m| m.id.get()).collect::<Vec<_>>(), [ids[1]]);
    assert!(pins[0].pinned);
    // Discord's notice of the pin: a system message (type 6) by whoever pinned, referring to the message.
    let notice = f.server.with(|w| {
        let notice = w.messages.values().find(|m| m.kind == Some(6)).expect("a notice of the pin");
        let json = w.message_json(notice);
        assert_eq!((json["type"].as_u64(), json["content"].as_str()), (Some(6), Some("")));
        assert_eq!(json["message_reference"]["message_id"], ids[1].to_string());
        notice.id
    });
    // The newer route that discord.py and discord.js call: a page of {pinned_at, message}.
    let page = f.raw(reqwest::Method::GET, &format!("/api/v10/channels/{}/messages/pins", f.channel));
    let page: serde_json::Value = page.send().await.unwrap().json().await.unwrap();
    assert_eq!(page["items"][0]["message"]["id"], ids[1].to_string());
    f.channel_id().unpin(&f.http, MessageId::new(ids[1])).await.unwrap();
    assert!(f.channel_id().pins(&f.http).await.unwrap().is_empty());

    f.server.react(ids[0], f.person, "👍", true);
    f.channel_id().delete_reactions(&f.http, MessageId::new(ids[0])).await.unwrap();
    let cleared = f.expect(|s| if let Seen::ReactionsCleared(m) = s { Some(m) } else { None }).await;
    assert_eq!(cleared.get(), ids[0]);
    assert!(f.server.view(f.channel)[0].reactions.is_empty());

    f.channel_id().delete_messages(&f.http, [MessageId::new(ids[0]), MessageId::new(ids[2])]).await.unwrap();
    let mut deleted = f.expect(|s| if let Seen::BulkDelete(d) = s { Some(d) } else { None }).await;
    deleted.sort();
    assert_eq!(deleted, [MessageId::new(ids[0]), MessageId::new(ids[2])]);
    assert_eq!(f.server.view(f.channel).iter().map(|m| m.id).collect::<Vec<_>>(), [ids[1], notice]);
    let one = json!({"messages": [ids[1].to_string()]});
    let refused = f.raw(reqwest::Method::POST, &format!("/api/v10/channels/{}/messages/bulk-delete", f.channel));
    assert_eq!(refused.json(&one).send().await.unwrap().status(), 400, "Discord asks for 2 to 100 messages");

    let edit = serenity::all::EditChannel::new().name("renamed").topic("what we discuss");
    f.channel_id().edit(&f.http, edit).await.unwrap();
    let updated = f.expect(|s| if let Seen::ChannelUpdate(c) = s { Some(c) } else { None }).await;
    assert_eq!((updated.name.as_str(), updated.topic.as_deref()), ("renamed", Some("what we discuss")));
    assert!(GuildId::new(f.guild).emojis(&f.http).await.unwrap().is_empty());
}

#[tokio::test]
async fn pinning_bulk_deleting_and_editing_channels_need_their_permissions() {
    let f = Fixture::start(Permissions::EVERYONE_DEFAULT, false).await;
    let ids: Vec<u64> = (0..2).map(|i| f.server.post(f.channel, f.person, &format!("m{i}"))).collect();
    let pin = f.channel_id().pin(&f.http, MessageId::new(ids[0])).await;
    assert_eq!(status_of(pin.unwrap_err()), 403);
    let bulk = f.channel_id().delete_messages(&f.http, ids.iter().map(|i| MessageId::new(*i))).await;
    assert_eq!(status_of(bulk.unwrap_err()), 403);
    let edit = f.channel_id().edit(&f.http, serenity::all::EditChannel::new().topic("x")).await;
    assert_eq!(status_of(edit.unwrap_err()), 403);
    assert_eq!(f.server.view(f.channel).len(), 2);
}

/// A member is found; an account outside the guild is Unknown Member (10007), an id that is no account Unknown User
/// (10013), as Discord answers: a bot tells a persona not invited yet from a wrong id by them.
#[tokio::test]
async fn a_member_lookup_tells_an_account_outside_the_guild_from_no_account() {
    let f = Fixture::full().await;
    let guild = GuildId::new(f.guild);
    let member = guild.member(&f.http, UserId::new(f.person)).await.unwrap();
    assert_eq!(member.user.id.get(), f.person);
    let outsider = f.server.create_user("outsider");
    let code = |e: serenity::Error| match e {
        serenity::Error::Http(serenity::all::HttpError::UnsuccessfulRequest(r)) => {
            (r.status_code.as_u16(), r.error.code)
        }
        other => panic!("not a refusal: {other:?}"),
    };
    let outside = guild.member(&f.http, UserId::new(outsider)).await.unwrap_err();
    assert_eq!(code(outside), (404, 10007));
    let nobody = guild.member(&f.http, UserId::new(outsider + 1_000)).await.unwrap_err();
    assert_eq!(code(nobody), (404, 10013));
}

//! The commands people steer with (spec 7), as `!turn ...` and `/turn ...` from the same poise definitions: parsed
//! and authorised here, then handed to the channel's actor like any other input. The permission rule: personas may
//! run none; anyone else may read `status` and `history`; only administrators, people with Manage Channels in the
//! channel, or members of a control role may change the session.

use super::access::Access;
use super::actor::Input;
use super::rest::http::REST_TIMEOUT;
use super::rest::in_a_few_tries;
use super::rest::serenity::call;
use super::router::Router;
use super::sender::answer_nonce;
use crate::core::ids::{ChannelId, MessageId, UserId};
use crate::core::persona::TYPED_ECHO_MAX;
use crate::core::session::Command;
use crate::core::session::effects::{clip, fit_message};
use crate::sessions::SessionStore;
use poise::serenity_prelude as discord;
use std::sync::Arc;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Ctx<'a> = poise::Context<'a, Arc<Commands>, Error>;

/// What the commands need: the way to the actors, the permission checks, and the history logs.
pub struct Commands {
    pub router: Arc<Router>,
    pub access: Arc<Access>,
    pub store: Arc<dyn SessionStore>,
    /// Registers the slash commands on connecting: one process does it for all (the one running shard 0).
    pub registers: bool,
}

/// The prefix of text commands: `!turn ...`.
pub const PREFIX: &str = "!";
/// The one top-level command; the rest are its subcommands.
pub const COMMAND_NAME: &str = "turn";
/// The answer when the channel's actor gave none: the process is shutting down, or the channel's lease is held by
/// another process (a takeover between processes sharing a store) and the command is a slash command, which only
/// this process saw (a `!turn` message is left to the holder, see `answered_elsewhere`).
const UNREACHABLE_NOW: &str =
    "I can't reach this channel's session right now (I may be restarting); try again in a moment.";
/// Events `history` shows when no number is given, and at most.
const HISTORY_DEFAULT: usize = 10;
const HISTORY_MAX: usize = 50;
/// How long a slash command may take before it is deferred: Discord drops an interaction not answered within 3 s,
/// and a busy channel's actor, a slow permission lookup or a slow disk can take longer.
const DEFER_AFTER: std::time::Duration = std::time::Duration::from_millis(1500);

/// poise, handed by the gateway handler only the events that can carry a command: READY (poise's setup registers
/// the slash commands), interactions, and messages that open with the prefix. It is not serenity's framework: serenity
/// would copy every event of every channel into a task of its own for it (without that task the bot's CPU per
/// message fell 16-22% in `bench`, README). The handler's own task runs it, so a command waits for nothing but
/// itself. It reaches its channel's actor once poise has parsed and authorised it (a permission may need a REST call),
/// later than the messages the gateway sent after it, which the shard's collector delivers at once (`in_order.rs`):
/// the collector also tells the actor the command is coming, and those wait for it (`actor/awaited.rs`).
pub struct CommandGate(poise::Framework<Arc<Commands>, Error>);

impl CommandGate {
    /// What serenity does for its framework before connecting: poise names its commands and learns the shards.
    pub async fn init(&mut self, client: &discord::Client) {
        discord::Framework::init(&mut self.0, client).await;
    }

    pub async fn ready(&self, ctx: discord::Context, ready: discord::Ready) {
        self.dispatch(ctx, discord::FullEvent::Ready { data_about_bot: ready }).await;
    }

    pub async fn interaction(&self, ctx: discord::Context, interaction: discord::Interaction) {
        self.dispatch(ctx, discord::FullEvent::InteractionCreate { interaction }).await;
    }

    /// Whether poise wants this message: it opens with the prefix.
    pub fn wants(message: &discord::Message) -> bool {
        message.content.starts_with(PREFIX)
    }

    /// A message that [`CommandGate::wants`].
    pub async fn message(&self, ctx: discord::Context, message: discord::Message) {
        self.dispatch(ctx, discord::FullEvent::Message { new_message: message }).await;
    }

    async fn dispatch(&self, ctx: discord::Context, event: discord::FullEvent) {
        discord::Framework::dispatch(&self.0, ctx, event).await;
    }
}

/// The poise framework: commands, prefix, replies that ping nobody, slash commands registered on connect.
pub fn framework(data: Arc<Commands>) -> CommandGate {
    let options = poise::FrameworkOptions {
        commands: vec![turn()],
        on_error: |error| Box::pin(on_error(error)),
        // A reply must never ping: a mention would call an agent back in.
        allowed_mentions: Some(discord::CreateAllowedMentions::new()),
        prefix_options: poise::PrefixFrameworkOptions {
            // No fixed prefix: `command_prefix` decides, so that webhook messages never count.
            prefix: None,
            stripped_dynamic_prefix: Some(|ctx, msg, _| {
                Box::pin(async move { Ok(command_prefix(msg, ctx.cache.current_user().id)) })
            }),
            // Agents are bots; they get a refusal rather than silence.
            ignore_bots: false,
            execute_self_messages: false,
            mention_as_prefix: false,
            ..Default::default()
        },
        initialize_owners: false,
        ..Default::default()
    };
    let framework = poise::Framework::builder()
        .options(options)
        .setup(move |ctx, _ready, framework| {
            Box::pin(async move {
                if data.registers {
                    // Beside the commands, not before them: poise holds every command until its setup is done, and
                    // a slash command must be answered within 3 s of being given.
                    let commands = poise::builtins::create_application_commands(&framework.options().commands);
                    let (http, access) = (ctx.http.clone(), data.access.clone());
                    tokio::spawn(async move {
                        let register = discord::Command::set_global_commands(&http, commands);
                        if let Err(e) = call(access.budget(), "PUT /applications/{id}/commands", register).await {
                            tracing::warn!("could not register the /turn slash commands ({e}); `!turn` still works");
                        }
                    });
                }
                Ok(data)
            })
        })
        // The builder's own setting wins over the options': left on, poise asks Discord for the application's
        // owners at every start (GET /oauth2/applications/@me), a call no command uses.
        .initialize_owners(false)
        .build();
    CommandGate(framework)
}

/// Whether poise may take `message` for a command: it opens with the prefix, and may run one ([`command_prefix`]).
pub fn may_run_command(message: &discord::Message, bot: discord::UserId) -> bool {
    command_prefix(message, bot).is_some()
}

/// The `!` that opens a command in `msg`, or `None` when `msg` may not run one: a webhook's message (our reposts
/// carry an agent's words, and a persona's `!turn status TURN_COMPLETE` is reposted as `!turn status`; anyone's
/// webhook speaks for nobody we can check) or the bot's own.
fn command_prefix(msg: &discord::Message, bot: discord::UserId) -> Option<&str> {
    if msg.webhook_id.is_some() || msg.author.id == bot {
        return None;
    }
    msg.content.get(..PREFIX.len()).filter(|start| *start == PREFIX)
}

/// Turn management: start, stop, pause, resume, skip, give, extend, order, add, remove, status...
#[poise::command(
    prefix_command,
    slash_command,
    guild_only,
    subcommands(
        "start", "stop", "pause", "resume", "skip", "give", "extend", "order", "add", "remove", "status", "history"
    ),
    subcommand_required
)]
async fn turn(_ctx: Ctx<'_>) -> Result<(), Error> {
    Ok(())
}

/// Start a session here with the named personas, or all of them in default order.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn start(
    ctx: Ctx<'_>,
    #[rest]
    #[description = "persona ids in speaking order (all when empty)"]
    roster: Option<String>,
) -> Result<(), Error> {
    change(ctx, Command::Start { roster: names(roster.as_deref()) }).await
}

/// End the session; its history is kept.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn stop(ctx: Ctx<'_>) -> Result<(), Error> {
    change(ctx, Command::Stop).await
}

/// Freeze the clock; the time left is kept.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn pause(ctx: Ctx<'_>) -> Result<(), Error> {
    change(ctx, Command::Pause).await
}

/// Go on after a pause, with the time that was left.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn resume(ctx: Ctx<'_>) -> Result<(), Error> {
    change(ctx, Command::Resume).await
}

/// End the current turn now and pass the floor on.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn skip(ctx: Ctx<'_>) -> Result<(), Error> {
    change(ctx, Command::Skip).await
}

/// Hand the floor to a persona now.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn give(
    ctx: Ctx<'_>,
    #[rest]
    #[description = "persona id or display name"]
    persona: String,
) -> Result<(), Error> {
    change(ctx, Command::Give { persona }).await
}

/// Add time to the current turn.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn extend(ctx: Ctx<'_>, #[description = "seconds to add"] seconds: i64) -> Result<(), Error> {
    change(ctx, Command::Extend { seconds }).await
}

/// Set the roster's order (and members).
#[poise::command(prefix_command, slash_command, guild_only)]
async fn order(
    ctx: Ctx<'_>,
    #[rest]
    #[description = "persona ids in speaking order"]
    roster: String,
) -> Result<(), Error> {
    change(ctx, Command::Order { roster: names(Some(&roster)) }).await
}

/// Add a persona to the end of the roster.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn add(
    ctx: Ctx<'_>,
    #[rest]
    #[description = "persona id or display name"]
    persona: String,
) -> Result<(), Error> {
    change(ctx, Command::Add { persona }).await
}

/// Take a persona out of the roster.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn remove(
    ctx: Ctx<'_>,
    #[rest]
    #[description = "persona id or display name"]
    persona: String,
) -> Result<(), Error> {
    change(ctx, Command::Remove { persona }).await
}

/// Who has the floor, the time left, the roster, the round, paused or not.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn status(ctx: Ctx<'_>) -> Result<(), Error> {
    let_go(ctx); // It changes nothing: what the channel got after it need not wait.
    let text = in_time(ctx, false, async {
        if let Err(reason) = authorize(ctx, false).await {
            return reason;
        }
        let router = &ctx.data().router;
        match router.ask(ChannelId(ctx.channel_id().get()), Input::Snapshot).await {
            Some(session) if session.is_active() => session.status_report(router.env().clock.now()).to_string(),
            Some(_) => format!("No session is running here. Start one with `/turn start` or `{PREFIX}turn start`."),
            None if answered_elsewhere(ctx) => String::new(),
            None => UNREACHABLE_NOW.to_owned(),
        }
    })
    .await?;
    if !text.is_empty() {
        reply(ctx, &text, false).await;
    }
    Ok(())
}

/// The answer to `history`: one line per event, oldest first, each time shown in the reader's own zone (Discord's
/// `<t:…:T>`). Past one message, the oldest lines go first, whole, and the answer says how many (found by a review:
/// the cut kept the oldest and dropped the newest, which are the ones asked about).
fn history_text(events: &[crate::core::session::history::HistoryEvent]) -> String {
    if events.is_empty() {
        return "Nothing has happened here yet.".to_owned();
    }
    let lines: Vec<String> =
        events.iter().map(|event| format!("<t:{}:T> {}", event.at.timestamp(), event.summary())).collect();
    let room = crate::core::session::effects::MESSAGE_CONTENT_LENGTH_MAX;
    let whole = lines.join("\n");
    if whole.chars().count() <= room {
        return whole;
    }
    let mut kept = lines.len();
    let mut used = 0;
    for line in lines.iter().rev() {
        let more = line.chars().count() + 1;
        // Room kept for the line that says how many were left out.
        if used + more + 48 > room && kept < lines.len() {
            break;
        }
        used += more;
        kept -= 1;
    }
    let shown = lines[kept..].join("\n");
    let text = if kept == 0 { shown } else { format!("({kept} older events left out.)\n{shown}") };
    fit_message(text)
}

/// The last n events of this channel's session.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn history(ctx: Ctx<'_>, #[description = "how many events (default 10)"] n: Option<i64>) -> Result<(), Error> {
    let_go(ctx); // It changes nothing: what the channel got after it need not wait.
    let text = in_time(ctx, false, async {
        if let Err(reason) = authorize(ctx, false).await {
            return Ok(reason);
        }
        // Read as any whole number, so that a negative one is answered with the range too (before, poise could not
        // read `-1` as the optional count and answered that an argument was extra).
        let n = n.unwrap_or(HISTORY_DEFAULT as i64);
        if !(1..=HISTORY_MAX as i64).contains(&n) {
            // Found by a review: 0 showed one event, without a word.
            return Ok(format!(
                "`history` shows 1 to {HISTORY_MAX} events; `{PREFIX}turn history` shows the last {HISTORY_DEFAULT}."
            ));
        }
        // The full history, not only the short tail the session keeps.
        let events = ctx.data().store.history_tail(ChannelId(ctx.channel_id().get()), n as usize).await?;
        Ok::<_, Error>(history_text(&events))
    })
    .await??;
    reply(ctx, &text, false).await;
    Ok(())
}

/// Runs a command that changes the session, after the permission check; refusals are answered.
async fn change(ctx: Ctx<'_>, command: Command) -> Result<(), Error> {
    tracing::debug!(channel = %ctx.channel_id(), user = %ctx.author().id, "command {command:?}");
    match in_time(ctx, true, run(ctx, command)).await? {
        // The announcement in the channel is the answer; a slash command still needs a reply of its own. One that
        // could not be sent is only logged: the command ran, and an error reply would say otherwise.
        Ok(()) if matches!(ctx, poise::Context::Application(_)) => {
            if let Err(e) = answered(ctx.send(poise::CreateReply::default().content("Done.").ephemeral(true))).await {
                tracing::warn!(channel = %ctx.channel_id(), "a slash command ran, but its \"Done.\" could not be sent: {e}");
            }
            Ok(())
        }
        Ok(()) => Ok(()),
        Err(refusal) => {
            reply(ctx, &refusal, true).await;
            Ok(())
        }
    }
}

/// Checks the permission, then has the channel's actor run the command; a refusal says why.
async fn run(ctx: Ctx<'_>, command: Command) -> Result<(), String> {
    if let Err(reason) = authorize(ctx, true).await {
        tracing::debug!(channel = %ctx.channel_id(), "refused: {reason}");
        let_go(ctx);
        return Err(reason);
    }
    let channel = ChannelId(ctx.channel_id().get());
    let origin = Some(origin(ctx));
    let interaction = matches!(ctx, poise::Context::Application(_));
    let outcome =
        ctx.data().router.ask(channel, |reply| Input::command_given(command, origin, Some(reply), interaction)).await;
    match outcome {
        Some(Ok(())) => Ok(()),
        Some(Err(refusal)) => Err(refusal.0),
        // Said nothing, as a command that ran and is answered in the channel: the holder says whether it did.
        None if answered_elsewhere(ctx) => Ok(()),
        None => Err(UNREACHABLE_NOW.into()),
    }
}

/// Whether a command this process could not run is another process's to run and answer: a `!turn` message in a
/// channel whose lease another live process holds (it reads the same message). A slash command is not: only this
/// process saw its interaction.
fn answered_elsewhere(ctx: Ctx<'_>) -> bool {
    let channel = ChannelId(ctx.channel_id().get());
    let elsewhere = matches!(ctx, poise::Context::Prefix(_)) && ctx.data().router.env().elsewhere.acts_for(channel);
    if elsewhere {
        tracing::debug!(%channel, "`{}` is another process's to run and answer", ctx.invocation_string());
    }
    elsewhere
}

/// The command's own snowflake (its message's or interaction's): it marks when the command was given, lets one
/// delivered twice run once, and names it to the channel's actor, which may be awaiting it.
fn origin(ctx: Ctx<'_>) -> MessageId {
    match ctx {
        poise::Context::Prefix(prefix) => MessageId(prefix.msg.id.get()),
        poise::Context::Application(application) => MessageId(application.interaction.id.get()),
    }
}

/// Tells the channel's actor that this command will not be handed over, so that what the gateway sent after it goes
/// on now rather than after the reply (see `actor/awaited.rs`). Harmless if nothing awaits it.
fn let_go(ctx: Ctx<'_>) {
    ctx.data().router.deliver(ChannelId(ctx.channel_id().get()), Input::CommandGone(origin(ctx)));
}

/// Waits for `answer`. A slash command not answered within [`DEFER_AFTER`] of being given is deferred first (Discord
/// shows "thinking" and waits up to 15 minutes), so its reply then comes as the follow-up; `ephemeral` as the reply
/// will be.
async fn in_time<T>(ctx: Ctx<'_>, ephemeral: bool, answer: impl std::future::Future<Output = T>) -> Result<T, Error> {
    let poise::Context::Application(application) = ctx else {
        return Ok(answer.await);
    };
    tokio::pin!(answer);
    let given = MessageId(application.interaction.id.get()).created_at();
    let age_ms = u64::try_from((ctx.data().router.env().clock.now() - given).num_milliseconds()).unwrap_or(0);
    if let Ok(found) = tokio::time::timeout(defer_after(age_ms), &mut answer).await {
        return Ok(found);
    }
    // Interaction callbacks are not bound to the bot's global rate limit, so the deferral takes no REST budget. One
    // that fails is only logged: the command may be with the channel's actor already, so its outcome is still waited
    // for (and its reply then tried, Discord permitting). The command goes on meanwhile: awaited alone, a slow
    // deferral held it back from the actor, which gave up waiting for it and let the message after it overtake it
    // (found by a review).
    let defer = async { if ephemeral { answered(ctx.defer_ephemeral()).await } else { answered(ctx.defer()).await } };
    let (deferred, found) = tokio::join!(defer, answer);
    if let Err(e) = deferred {
        tracing::warn!(channel = %ctx.channel_id(), "could not defer a slash command's answer: {e}");
    }
    Ok(found)
}

/// How long a slash command given `age_ms` ago may still take before it is deferred: Discord's 3 s run from when it
/// was given, and the gateway, the handler and poise's setup may have taken some of them. Never later than
/// [`DEFER_AFTER`] from now, should this clock run behind Discord's.
fn defer_after(age_ms: u64) -> std::time::Duration {
    DEFER_AFTER.saturating_sub(std::time::Duration::from_millis(age_ms))
}

/// Who may run what: personas nothing; people `status` and `history`; managers everything.
async fn authorize(ctx: Ctx<'_>, changing: bool) -> Result<(), String> {
    let data = ctx.data();
    if data.router.env().personas.by_user(UserId(ctx.author().id.get())).is_some() {
        return Err("Personas can't run turn-manager commands: only people steer the session.".into());
    }
    if !changing {
        return Ok(());
    }
    let member = match member_carried(ctx) {
        Some(member) => member,
        None => {
            data.access.budget().take().await; // the member may have to be read over REST
            let member = ctx.author_member().await.ok_or("I could not look up your membership in this server.")?;
            member.into_owned()
        }
    };
    data.access.may_manage(ChannelId(ctx.channel_id().get()), member).await
}

/// The author's membership as the command carries it (a message's or an interaction's, as it was when given): no
/// REST read, so no wait behind the REST budget while the channel's messages wait for the command
/// (`actor/awaited.rs`).
fn member_carried(ctx: Ctx<'_>) -> Option<discord::Member> {
    match ctx {
        poise::Context::Application(application) => application.interaction.member.as_deref().cloned(),
        poise::Context::Prefix(prefix) => {
            let (partial, guild) = (prefix.msg.member.as_deref()?, prefix.msg.guild_id?);
            let mut member = discord::Member::from(partial.clone());
            member.user = prefix.msg.author.clone();
            member.guild_id = guild;
            Some(member)
        }
    }
}

/// Answers a command, cut to Discord's 2,000 characters. A slash command's answer is an interaction callback, which
/// Discord does not count against the global REST budget, and which must come within 3 s: it is sent at once, seen
/// by its invoker alone when `private` (a refusal, an unreadable command: found by a review, one sent within 1.5 s was
/// public and one sent after the deferral private). A prefix command's is a line in the channel like any other,
/// pinging nobody, within the budget, tried a few times (a 429 waits Discord's `retry_after`), with a nonce made from
/// the command's own id: neither a retry nor the same command delivered twice by the gateway posts it twice. A reply
/// that could not be sent is logged, not answered with an error reply: that would meet the same refusal, or, after a
/// time-out whose reply did reach Discord, show beside it.
async fn reply(ctx: Ctx<'_>, text: &str, private: bool) {
    let text = fit_message(text.to_owned());
    let sent = match ctx {
        poise::Context::Application(_) => {
            answered(ctx.send(poise::CreateReply::default().content(text).ephemeral(private))).await.map(drop)
        }
        poise::Context::Prefix(_) => {
            let (rest, channel, nonce) =
                (&ctx.data().router.env().rest, ChannelId(ctx.channel_id().get()), answer_nonce(origin(ctx)));
            in_a_few_tries(|| rest.notice(channel, &text, &nonce)).await.map(drop).map_err(Into::into)
        }
    };
    if let Err(e) = sent {
        tracing::warn!(channel = %ctx.channel_id(), "could not answer `{}`: {e}", ctx.invocation_string());
    }
}

/// A call answering an interaction, within [`REST_TIMEOUT`]: serenity's client has none, and a callback Discord
/// never answers would hold the command's task for good.
async fn answered<T>(call: impl std::future::Future<Output = Result<T, discord::Error>>) -> Result<T, Error> {
    match tokio::time::timeout(REST_TIMEOUT, call).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(format!("Discord did not answer within {REST_TIMEOUT:?}").into()),
    }
}

/// A `!turn ...` command found in a message the gateway never delivered: read back from the channel's history after
/// the bot was away (a restart, a new gateway session), where poise never saw it. Parsed as poise parses the live ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Typed {
    /// A command that changes the session, to run in its place among the messages read back.
    Change(Command),
    /// `status` or `history`: what it would answer is the session as it is now, not when it was asked; not answered.
    ReadOnly,
    /// Not a command poise would run (an unknown subcommand, a missing or extra argument): how to write it.
    Unreadable(String),
}

/// What `text` is as a command typed in the channel, or `None` when it is not one (`!turnip`, a message about turns).
/// As poise reads a live one: names in any case, an argument in double quotes (with `\` escapes) as one word, no
/// argument too many.
pub fn typed(text: &str) -> Option<Typed> {
    let (name, rest) = first_word(text.strip_prefix(PREFIX)?.trim_start());
    if !name.eq_ignore_ascii_case(COMMAND_NAME) {
        return None;
    }
    let definitions = turn().subcommands;
    let every = || {
        let subcommands: Vec<String> = definitions.iter().map(|c| c.name.to_string()).collect();
        Typed::Unreadable(which_command(text, &subcommands))
    };
    let (name, args) = first_word(rest);
    let Some(definition) = definitions.iter().find(|c| c.name.eq_ignore_ascii_case(name)) else {
        return Some(every());
    };
    let unreadable = || Some(Typed::Unreadable(format!("Usage: `{}`", usage(definition))));
    // One argument, the whole of what follows it.
    let one = || match pop_argument(args) {
        Some((argument, after)) if after.trim().is_empty() => Some(argument),
        _ => None,
    };
    let listed = || names(Some(args));
    let command = match definition.name.as_ref() {
        "start" => Command::Start { roster: listed() },
        "order" if !args.trim().is_empty() => Command::Order { roster: listed() },
        "stop" | "pause" | "resume" | "skip" if !args.trim().is_empty() => return unreadable(),
        "stop" => Command::Stop,
        "pause" => Command::Pause,
        "resume" => Command::Resume,
        "skip" => Command::Skip,
        "give" | "add" | "remove" => {
            // The whole rest, as poise's `#[rest]` gives it: a display name may have spaces.
            let persona = args.trim().to_owned();
            if persona.is_empty() {
                return unreadable();
            }
            match definition.name.as_ref() {
                "give" => Command::Give { persona },
                "add" => Command::Add { persona },
                _ => Command::Remove { persona },
            }
        }
        "extend" => match one().and_then(|seconds| seconds.parse().ok()) {
            Some(seconds) => Command::Extend { seconds },
            None => return unreadable(),
        },
        "status" | "history" => return Some(Typed::ReadOnly),
        _ => return unreadable(),
    };
    Some(Typed::Change(command))
}

/// The first word of `text` and what follows it (trimmed at its start), split at whitespace as poise splits names.
fn first_word(text: &str) -> (&str, &str) {
    let mut parts = text.splitn(2, char::is_whitespace);
    (parts.next().unwrap_or_default(), parts.next().unwrap_or_default().trim_start())
}

/// One argument as poise pops a `String`: up to whitespace outside double quotes, the quotes dropped, `\` escaping
/// the next character; `None` when nothing is left.
fn pop_argument(args: &str) -> Option<(String, &str)> {
    let args = args.trim_start();
    if args.is_empty() {
        return None;
    }
    let (mut word, mut quoted, mut escaping) = (String::new(), false, false);
    let mut end = args.len();
    for (at, c) in args.char_indices() {
        if escaping {
            word.push(c);
            escaping = false;
        } else if !quoted && c.is_whitespace() {
            end = at;
            break;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == '\\' {
            escaping = true;
        } else {
            word.push(c);
        }
    }
    Some((word, &args[end..]))
}

/// Persona names as typed: separated by spaces or commas, a name in double quotes kept whole, quotes and all (a
/// display name with spaces; typed without quotes, its words are put back together when the roster is read, which
/// the quotes say not to do).
fn names(typed: Option<&str>) -> Vec<String> {
    let (mut names, mut name, mut quoted) = (Vec::new(), String::new(), false);
    for c in typed.unwrap_or_default().chars() {
        match c {
            '"' => {
                quoted = !quoted;
                name.push(c);
            }
            c if !quoted && (c.is_whitespace() || c == ',') => {
                names.extend((!name.is_empty()).then(|| std::mem::take(&mut name)));
            }
            c => name.push(c),
        }
    }
    names.extend((!name.is_empty()).then_some(name));
    names
}

/// `!turn give <persona>`: how to write a command, for replies to bad arguments.
fn usage(command: &poise::Command<Arc<Commands>, Error>) -> String {
    let mut text = format!("{PREFIX}turn {}", command.name);
    for parameter in &command.parameters {
        let (open, close) = if parameter.required { ('<', '>') } else { ('[', ']') };
        text.push_str(&format!(" {open}{}{close}", parameter.name));
    }
    text
}

/// The reply to arguments poise could not read: what was wrong, as a sentence, and how to write the command.
fn unreadable(error: &(dyn std::error::Error + Send + Sync + 'static), input: Option<&str>, usage: &str) -> String {
    // poise takes an argument of the wrong kind for an optional one left out, and then finds it extra
    // (`history -1`): "too many arguments" alone would puzzle.
    let why = if error.is::<poise::TooManyArguments>() {
        "an argument is extra, or not of the kind the command takes".to_owned()
    } else if let Some(number) = error.downcast_ref::<std::num::ParseIntError>() {
        // Rust's own words ("invalid digit found in string") say nothing to a person (found by a review).
        match number.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "that number is too large",
            _ => "that is not a whole number",
        }
        .to_owned()
    } else {
        let text = error.to_string();
        let mut chars = text.trim_end_matches('.').chars();
        chars.next().map(|first| first.to_lowercase().chain(chars).collect()).unwrap_or_default()
    };
    // A missing argument has no input to show (found by a review: "I couldn't read that: ``: too few arguments").
    let shown = input.filter(|i| !i.trim().is_empty());
    let what = shown.map(|i| format!("`{}`: ", clip(i, TYPED_ECHO_MAX))).unwrap_or_default();
    format!("I couldn't read that: {what}{why}. Usage: `{usage}`")
}

/// The reply to `!turn` with no command, or one that is none (`!turn frobnicate`: found by a review, it was answered
/// with the usage alone, as if nothing had been typed).
fn which_command(invocation: &str, names: &[String]) -> String {
    let usage = format!("Usage: `{PREFIX}turn <{}>`", names.join("|"));
    let after_prefix = invocation.trim_start().strip_prefix(PREFIX).unwrap_or(invocation).trim_start();
    let (_turn, rest) = first_word(after_prefix);
    match first_word(rest).0 {
        "" => usage,
        typed => format!("`{}` is not a `turn` command. {usage}", clip(typed, TYPED_ECHO_MAX)),
    }
}

async fn on_error(error: poise::FrameworkError<'_, Arc<Commands>, Error>) {
    if let Some(ctx) = error.ctx() {
        let_go(ctx); // Before the reply: nothing of this command reaches the channel's actor any more.
    }
    match error {
        poise::FrameworkError::ArgumentParse { error, input, ctx, .. } => {
            reply(ctx, &unreadable(error.as_ref(), input.as_deref(), &usage(ctx.command())), true).await
        }
        poise::FrameworkError::SubcommandRequired { ctx } => {
            let names: Vec<String> = ctx.command().subcommands.iter().map(|c| c.name.to_string()).collect();
            reply(ctx, &which_command(&ctx.invocation_string(), &names), true).await
        }
        poise::FrameworkError::Command { error, ctx, .. } => {
            tracing::warn!("command `{}` failed: {error}", ctx.invocation_string());
            reply(ctx, "Something went wrong running that command; the logs say more.", true).await
        }
        other => {
            if let Err(e) = poise::builtins::on_error(other).await {
                tracing::warn!("could not answer a failed command: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by a review: `history 50` in a busy channel kept the oldest events that fit in a message and cut the
    /// newest, which are the ones asked about. The oldest go first, whole, and the answer says how many.
    #[test]
    fn a_long_history_keeps_the_newest_events_whole() {
        use crate::core::session::history::{EventKind, HistoryEvent};
        let at: chrono::DateTime<chrono::Utc> = "2026-02-04T21:20:00Z".parse().unwrap();
        let events: Vec<HistoryEvent> = (0..50)
            .map(|i| HistoryEvent {
                at: at + chrono::TimeDelta::seconds(i),
                round: 1,
                agent_id: Some(crate::core::ids::PersonaId::parse("dev").unwrap()),
                kind: EventKind::OutOfTurn {
                    message_id: MessageId(i as u64 + 1),
                    text: format!("message number {i} that is long enough to be cut short by the summary..."),
                    removed: true,
                },
            })
            .collect();
        let text = history_text(&events);
        assert!(text.chars().count() <= 2_000, "{}", text.chars().count());
        assert!(text.lines().last().unwrap().contains("message number 49"), "the newest event is last:\n{text}");
        let left_out: usize =
            text.lines().next().unwrap().trim_start_matches('(').split(' ').next().unwrap().parse().unwrap();
        assert_eq!(left_out + text.lines().count() - 1, 50, "every event shown or counted:\n{text}");
        assert!(text.lines().skip(1).all(|l| l.starts_with("<t:") && l.contains("message number")), "{text}");
        let few = history_text(&events[..3]);
        assert_eq!(few.lines().count(), 3, "all of a short history, nothing said left out: {few}");
    }

    fn message(author: u64, webhook: Option<u64>, content: &str) -> discord::Message {
        let mut msg = discord::Message::default();
        msg.author.id = discord::UserId::new(author);
        msg.webhook_id = webhook.map(discord::WebhookId::new);
        msg.content = content.into();
        msg
    }

    #[test]
    fn a_slash_command_is_deferred_within_its_time_counted_from_when_it_was_given() {
        assert_eq!(defer_after(0), DEFER_AFTER);
        assert_eq!(defer_after(1_200), DEFER_AFTER - std::time::Duration::from_millis(1_200), "1.2 s spent on the way");
        assert_eq!(defer_after(5_000), std::time::Duration::ZERO, "late already: deferred at once");
    }

    #[test]
    fn commands_read_back_from_the_history_are_parsed_as_poise_parses_the_live_ones() {
        let change = |text: &str| match typed(text) {
            Some(Typed::Change(command)) => command,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(change("!turn pause"), Command::Pause);
        assert_eq!(
            change("!turn  start pm, dev critic"),
            Command::Start { roster: vec!["pm".into(), "dev".into(), "critic".into()] }
        );
        assert_eq!(change("!turn start"), Command::Start { roster: vec![] });
        assert_eq!(change("!turn give dev"), Command::Give { persona: "dev".into() });
        assert_eq!(change("!turn extend -30"), Command::Extend { seconds: -30 });
        assert_eq!(change("!turn order critic pm"), Command::Order { roster: vec!["critic".into(), "pm".into()] });
        assert_eq!(typed("!turn status"), Some(Typed::ReadOnly));
        assert_eq!(typed("!turn history 5"), Some(Typed::ReadOnly));
        assert_eq!(typed("!turn give"), Some(Typed::Unreadable("Usage: `!turn give <persona>`".into())));
        assert_eq!(typed("!turn extend soon"), Some(Typed::Unreadable("Usage: `!turn extend <seconds>`".into())));
        assert_eq!(typed("!turn pause now"), Some(Typed::Unreadable("Usage: `!turn pause`".into())));
        for dance in ["!turn dance", "! turn dance now"] {
            let unknown = "`dance` is not a `turn` command. Usage: `!turn <start|stop|";
            assert!(matches!(typed(dance), Some(Typed::Unreadable(u)) if u.starts_with(unknown)), "{dance}");
        }
        assert!(matches!(typed("!turn"), Some(Typed::Unreadable(u)) if u.starts_with("Usage: `!turn <start|")));
        assert_eq!(change("!Turn PAUSE"), Command::Pause, "names in any case, as poise's default");
        assert_eq!(change("! turn pause"), Command::Pause, "poise trims after the prefix");
        // One persona: the whole rest (a display name may have spaces), as poise's `#[rest]` gives it; the quotes
        // are dropped when the name is resolved.
        assert_eq!(change("!turn give \"dev\""), Command::Give { persona: "\"dev\"".into() });
        assert_eq!(change("!turn give Product  Manager "), Command::Give { persona: "Product  Manager".into() });
        assert_eq!(
            change("!turn start \"Product Manager\", dev"),
            Command::Start { roster: vec!["\"Product Manager\"".into(), "dev".into()] },
            "a name in quotes kept whole"
        );
        assert_eq!(typed("!turnip pause"), None);
        assert_eq!(typed("turn pause"), None);
        assert_eq!(typed("Whose turn is it?"), None);
    }

    #[test]
    fn only_people_and_agents_messages_may_open_a_command() {
        let bot = discord::UserId::new(1);
        assert_eq!(command_prefix(&message(7, None, "!turn status"), bot), Some("!"));
        assert_eq!(command_prefix(&message(7, None, "turn status"), bot), None);
        assert_eq!(command_prefix(&message(7, Some(9), "!turn status"), bot), None, "a webhook's message");
        assert_eq!(command_prefix(&message(1, None, "!turn status"), bot), None, "the bot's own message");
    }
}

//! The commands people steer with (spec 7), as `!turn ...` and `/turn ...` from the same poise definitions: parsed
//! and authorised here, then handed to the channel's actor like any other input. The permission rule: personas may
//! run none; anyone else may read `status` and `history`; only administrators, people with Manage Channels in the
//! channel, or members of a control role may change the session.

use super::access::Access;
use super::actor::Input;
use super::router::Router;
use crate::core::ids::{ChannelId, MessageId, UserId};
use crate::core::session::Command;
use crate::core::session::effects::fit_message;
use crate::store::Store;
use poise::serenity_prelude as discord;
use std::sync::Arc;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Ctx<'a> = poise::Context<'a, Arc<Commands>, Error>;

/// What the commands need: the way to the actors, the permission checks, and the history logs.
pub struct Commands {
    pub router: Arc<Router>,
    pub access: Arc<Access>,
    pub store: Store,
}

/// The prefix of text commands: `!turn ...`.
pub const PREFIX: &str = "!";
/// Events `history` shows when no number is given, and at most.
const HISTORY_DEFAULT: usize = 10;
const HISTORY_MAX: usize = 50;

/// The poise framework: commands, prefix, replies that ping nobody, slash commands registered on connect.
pub fn framework(data: Arc<Commands>) -> poise::Framework<Arc<Commands>, Error> {
    let options = poise::FrameworkOptions {
        commands: vec![turn()],
        on_error: |error| Box::pin(on_error(error)),
        // A reply must never ping: a mention would call an agent back in.
        allowed_mentions: Some(discord::CreateAllowedMentions::new()),
        prefix_options: poise::PrefixFrameworkOptions {
            prefix: Some(PREFIX.into()),
            // Agents are bots; they get a refusal rather than silence.
            ignore_bots: false,
            mention_as_prefix: false,
            ..Default::default()
        },
        initialize_owners: false,
        ..Default::default()
    };
    poise::Framework::builder()
        .options(options)
        .setup(move |ctx, _ready, framework| {
            Box::pin(async move {
                data.access.budget().take().await;
                if let Err(e) = poise::builtins::register_globally(ctx, &framework.options().commands).await {
                    tracing::warn!("could not register the /turn slash commands ({e}); `!turn` still works");
                }
                Ok(data)
            })
        })
        .build()
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
async fn give(ctx: Ctx<'_>, #[description = "persona id"] persona: String) -> Result<(), Error> {
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
async fn add(ctx: Ctx<'_>, #[description = "persona id"] persona: String) -> Result<(), Error> {
    change(ctx, Command::Add { persona }).await
}

/// Take a persona out of the roster.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn remove(ctx: Ctx<'_>, #[description = "persona id"] persona: String) -> Result<(), Error> {
    change(ctx, Command::Remove { persona }).await
}

/// Who has the floor, the time left, the roster, the round, paused or not.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn status(ctx: Ctx<'_>) -> Result<(), Error> {
    if let Err(reason) = authorize(ctx, false).await {
        return reply(ctx, &reason).await;
    }
    let router = &ctx.data().router;
    let session = router.ask(ChannelId(ctx.channel_id().get()), Input::Snapshot).await;
    let text = match session {
        Some(session) if session.is_active() => session.status_report(router.env().clock.now()).to_string(),
        _ => format!("No session is running here. Start one with `{PREFIX}turn start`."),
    };
    reply(ctx, &text).await
}

/// The last n events of this channel's session.
#[poise::command(prefix_command, slash_command, guild_only)]
async fn history(ctx: Ctx<'_>, #[description = "how many events (default 10)"] n: Option<u32>) -> Result<(), Error> {
    if let Err(reason) = authorize(ctx, false).await {
        return reply(ctx, &reason).await;
    }
    let n = n.map_or(HISTORY_DEFAULT, |n| n as usize).clamp(1, HISTORY_MAX);
    // The full log, not only the short tail the session file keeps; read off the async threads.
    let (store, channel) = (ctx.data().store.clone(), ChannelId(ctx.channel_id().get()));
    let events = tokio::task::spawn_blocking(move || store.read_log_tail(channel, n)).await?;
    let lines: Vec<String> =
        events?.iter().map(|event| format!("`{}` {}", event.at.format("%H:%M:%S"), event.summary())).collect();
    let text = if lines.is_empty() { "Nothing has happened here yet.".to_owned() } else { lines.join("\n") };
    reply(ctx, &fit_message(text)).await
}

/// Runs a command that changes the session, after the permission check; refusals are answered.
async fn change(ctx: Ctx<'_>, command: Command) -> Result<(), Error> {
    tracing::debug!(channel = %ctx.channel_id(), user = %ctx.author().id, "command {command:?}");
    if let Err(reason) = authorize(ctx, true).await {
        tracing::debug!(channel = %ctx.channel_id(), "refused: {reason}");
        return reply(ctx, &reason).await;
    }
    // The command's own snowflake: it marks when the command was given, and lets one delivered twice run once.
    let origin = match ctx {
        poise::Context::Prefix(prefix) => MessageId(prefix.msg.id.get()),
        poise::Context::Application(application) => MessageId(application.interaction.id.get()),
    };
    let channel = ChannelId(ctx.channel_id().get());
    let outcome = ctx
        .data()
        .router
        .ask(channel, |reply| Input::command(command, Some(origin), Some(reply)))
        .await
        .unwrap_or_else(|| Err(crate::core::session::Refusal("I am shutting down; try again in a moment.".into())));
    match outcome {
        // The announcement in the channel is the answer; a slash command still needs a reply of its own.
        Ok(()) if matches!(ctx, poise::Context::Application(_)) => {
            ctx.data().access.budget().take().await;
            ctx.send(poise::CreateReply::default().content("Done.").ephemeral(true)).await?;
            Ok(())
        }
        Ok(()) => Ok(()),
        Err(refusal) => reply(ctx, &refusal.0).await,
    }
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
    data.access.budget().take().await; // the member may have to be read over REST
    let member = ctx.author_member().await.ok_or("I could not look up your membership in this server.")?;
    data.access.may_manage(ChannelId(ctx.channel_id().get()), member.into_owned()).await
}

async fn reply(ctx: Ctx<'_>, text: &str) -> Result<(), Error> {
    ctx.data().access.budget().take().await;
    ctx.say(text).await?;
    Ok(())
}

/// Persona ids as typed: separated by spaces or commas.
fn names(typed: Option<&str>) -> Vec<String> {
    typed
        .unwrap_or_default()
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
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

async fn on_error(error: poise::FrameworkError<'_, Arc<Commands>, Error>) {
    let outcome = match error {
        poise::FrameworkError::ArgumentParse { error, input, ctx, .. } => {
            let what = input.map(|i| format!("`{i}`: ")).unwrap_or_default();
            let text = format!("I couldn't read {what}{error}. Usage: `{}`", usage(ctx.command()));
            reply(ctx, &text).await
        }
        poise::FrameworkError::SubcommandRequired { ctx } => {
            let names: Vec<String> = ctx.command().subcommands.iter().map(|c| c.name.to_string()).collect();
            reply(ctx, &format!("Usage: `{PREFIX}turn <{}>`", names.join("|"))).await
        }
        poise::FrameworkError::Command { error, ctx, .. } => {
            tracing::warn!("command `{}` failed: {error}", ctx.invocation_string());
            reply(ctx, "Something went wrong running that command; the logs say more.").await
        }
        other => {
            if let Err(e) = poise::builtins::on_error(other).await {
                tracing::warn!("could not answer a failed command: {e}");
            }
            Ok(())
        }
    };
    if let Err(e) = outcome {
        tracing::warn!("could not answer a failed command: {e}");
    }
}

//! Carries out the engine's effects in order: reposts through the channel's webhook, deletions, reactions and
//! announcements. Each REST call has a time limit (serenity's client has none); announcements are retried with
//! the same nonce, which Discord uses to never post one twice.

use super::bot::Bot;
use super::{to_channel, to_message, to_user};
use crate::core::ids::ChannelId;
use crate::core::session::effects::{Announcement, Effect};
use serenity::all as discord;
use std::future::Future;
use std::time::Duration;

/// The longest a single REST call may take before it is given up.
const REST_TIMEOUT: Duration = Duration::from_secs(15);
/// Attempts at posting an announcement; the nonce makes a retry safe.
const ANNOUNCE_ATTEMPTS: u32 = 3;

pub(super) async fn carry_out(bot: &Bot, channel: ChannelId, effects: &[Effect]) {
    for effect in effects {
        if let Err(e) = carry_out_one(bot, channel, effect).await {
            tracing::warn!(channel = %channel, "could not {}: {e}", describe(effect));
        }
    }
}

/// A plain line from the bot that pings nobody (the display-mode fallback notice).
pub(super) async fn notice(bot: &Bot, channel: ChannelId, text: &str) {
    let message = discord::CreateMessage::new().content(text).allowed_mentions(discord::CreateAllowedMentions::new());
    if let Err(e) = limited(to_channel(channel).send_message(bot.http(), message)).await {
        tracing::warn!(channel = %channel, "could not post a notice: {e}");
    }
}

async fn carry_out_one(bot: &Bot, channel: ChannelId, effect: &Effect) -> Result<(), String> {
    let http = bot.http();
    match effect {
        Effect::Relay { message_id, persona, text } => {
            // Repost first: if the repost fails, the original stays and nothing is lost.
            if let Some(text) = text {
                bot.webhooks.repost(bot, channel, persona, text).await?;
            }
            limited(http.delete_message(to_channel(channel), to_message(*message_id), None)).await
        }
        Effect::Delete { message_id } => {
            limited(http.delete_message(to_channel(channel), to_message(*message_id), None)).await
        }
        Effect::React { message_id, emoji } => {
            let reaction = discord::ReactionType::Unicode((*emoji).to_owned());
            limited(http.create_reaction(to_channel(channel), to_message(*message_id), &reaction)).await
        }
        Effect::Announce(announcement) => announce(bot, channel, announcement).await,
    }
}

async fn announce(bot: &Bot, channel: ChannelId, announcement: &Announcement) -> Result<(), String> {
    // Ping the persona whose turn starts and nobody else: never @everyone, @here or roles.
    let mentions = discord::CreateAllowedMentions::new().users(announcement.mention.map(to_user));
    let mut attempt = 1;
    loop {
        let message = discord::CreateMessage::new()
            .content(&announcement.text)
            .nonce(discord::Nonce::String(announcement.nonce.clone()))
            .enforce_nonce(true)
            .allowed_mentions(mentions.clone());
        match limited(to_channel(channel).send_message(bot.http(), message)).await {
            Ok(()) => return Ok(()),
            Err(e) if attempt < ANNOUNCE_ATTEMPTS && is_transient(&e) => {
                tracing::info!(channel = %channel, attempt, "retrying an announcement: {e}");
                tokio::time::sleep(Duration::from_millis(250 * u64::from(attempt))).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// A server error or a time-out may pass; a refusal (4xx) will not.
fn is_transient(error: &str) -> bool {
    error.starts_with("timed out") || error.starts_with("status: 5")
}

/// Runs a REST call with [`REST_TIMEOUT`], turning both failures into one message.
pub(super) async fn rest<T>(call: impl Future<Output = serenity::Result<T>>) -> Result<T, String> {
    match tokio::time::timeout(REST_TIMEOUT, call).await {
        Ok(result) => result.map_err(|e| explain(&e)),
        Err(_) => Err(format!("timed out after {}s", REST_TIMEOUT.as_secs())),
    }
}

/// [`rest`] for calls whose answer is not needed.
async fn limited<T>(call: impl Future<Output = serenity::Result<T>>) -> Result<(), String> {
    rest(call).await.map(drop)
}

/// A REST error in words, with what to do about a missing permission.
fn explain(error: &serenity::Error) -> String {
    if let serenity::Error::Http(discord::HttpError::UnsuccessfulRequest(response)) = error {
        let status = response.status_code.as_u16();
        let hint = match status {
            403 => " (the bot lacks a permission in this channel; see `turn-manager invite`)",
            _ => "",
        };
        return format!("status: {status}, {}{hint}", response.error.message);
    }
    error.to_string()
}

fn describe(effect: &Effect) -> &'static str {
    match effect {
        Effect::Relay { .. } => "relay a message",
        Effect::Delete { .. } => "remove an out-of-turn message",
        Effect::React { .. } => "react to a completed turn",
        Effect::Announce(_) => "post an announcement",
    }
}

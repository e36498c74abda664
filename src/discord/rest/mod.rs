//! The network seam: everything the channel actors and their senders ask of Discord, as one small trait with a typed
//! error. [`discord`] implements it in production (with [`http`] for the effects and serenity for lookups); the unit
//! tests use a recording fake on tokio's paused clock.

pub mod budget;
pub mod carried;
pub mod discord;
mod form;
pub mod http;
pub mod serenity;
pub mod webhooks;

use crate::core::ids::{ChannelId, GuildId, MessageId, UserId};
use crate::core::session::IncomingMessage;
use crate::core::session::effects::Announcement;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

tokio::task_local! {
    /// Whether a call this task makes may still go out, asked as it goes out, after its waits for a rate limit, a
    /// slot and the global budget: a channel's sender answers with its lease, so that no call of its leaves once
    /// another process may act for the channel, however long the call queued. A call refused so answers
    /// [`RestError::Unavailable`] (nothing sent). Calls made outside such a task always go out.
    pub static MAY_SEND: Arc<dyn Fn() -> bool + Send + Sync>;
}

/// How many pages of 100 messages [`Rest::reposts_made`] reads after the original message before it decides the
/// reposts were not made (and [`Rest::announcement_made`] after its start): 5,000 messages, far more than a channel
/// sees between a relay and its retry.
pub const REPOST_SEARCH_PAGES: usize = 50;

/// Whether an embed of this `type` is the message's own ("rich", or untyped), which a repost must carry over, rather
/// than a link preview Discord made from its text (the repost's text makes that again). One rule for the gateway's
/// messages, the history pages and the relay.
pub fn is_own_embed(kind: Option<&str>) -> bool {
    kind.is_none_or(|kind| kind == "rich")
}

/// How a persona's repost looks.
#[derive(Clone, Copy, Debug)]
pub struct Voice<'a> {
    pub name: &'a str,
    pub avatar_url: Option<&'a str>,
    /// The users a repost may ping: those its text mentions, not the personas' own accounts ([`users_to_ping`]).
    pub pings: &'a [u64],
}

/// The users a repost of `text` pings: those it mentions (`<@id>`, `<@!id>`), at most Discord's 100, but none that
/// `left_out` names: no persona's account (its original pinged them already, and a second mention from the repost
/// called on an agent that answers mentions a second time, out of turn (found by a review); the floor's announcement
/// is what calls on the next persona), nor anyone the original did not ping. People keep their ping: the original's
/// goes with its deletion.
pub fn users_to_ping(text: &str, left_out: impl Fn(u64) -> bool) -> Vec<u64> {
    let mut users: Vec<u64> = Vec::new();
    for (at, _) in text.match_indices("<@") {
        let rest = &text[at + 2..];
        let rest = rest.strip_prefix('!').unwrap_or(rest);
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let Ok(user) = rest[..digits].parse::<u64>() else { continue };
        if rest[digits..].starts_with('>') && !left_out(user) && !users.contains(&user) && users.len() < 100 {
            users.push(user);
        }
    }
    users
}

#[async_trait]
pub trait Rest: Send + Sync + 'static {
    /// Posts an announcement with its nonce (`enforce_nonce`, so a retry never posts it twice), pinging at most
    /// its `mention`; answers the posted message's id.
    async fn announce(&self, channel: ChannelId, announcement: &Announcement) -> Result<MessageId, RestError>;
    /// The first message the bot itself posted after message `after` that shows announcement (or notice) `text` (see
    /// [`shows_announcement`]): Discord remembers a nonce for a few minutes only, so an announcement or a notice
    /// that may have been posted longer ago is looked for before it is posted again. Reads every page after `after`,
    /// up to [`REPOST_SEARCH_PAGES`] pages.
    ///
    /// [`shows_announcement`]: crate::core::session::effects::shows_announcement
    async fn announcement_made(
        &self,
        channel: ChannelId,
        after: MessageId,
        text: &str,
    ) -> Result<Option<MessageId>, RestError>;
    /// Posts a plain line from the bot that pings nobody, with its `nonce` (`enforce_nonce`: a retry after an answer
    /// that was lost does not post it twice); answers the posted message's id.
    async fn notice(&self, channel: ChannelId, text: &str, nonce: &str) -> Result<MessageId, RestError>;
    /// Posts `text` as the persona through the channel's webhook, with what it `carries` (files, embeds); pings
    /// the voice's `pings` at most. Answers the message made.
    async fn repost(
        &self,
        channel: ChannelId,
        voice: Voice<'_>,
        text: &str,
        carries: &Carried,
    ) -> Result<MessageId, RestError>;
    /// The files (downloaded) and embeds of a message, for its repost. A 404 means the message is gone; a file
    /// that cannot be carried over (too large, or its download refused) is [`RestError::Impossible`].
    async fn carried(&self, channel: ChannelId, message: MessageId) -> Result<Carried, RestError>;
    /// The messages of the first of `parts`, in order, that the channel already shows as reposts as `name` made after
    /// message `after` (as many as are found):
    /// a repost whose outcome was unknown (a time-out, a 5xx), or one replayed from the outbox after a crash, may
    /// have been made already, and a webhook execute has no nonce. Reads every page after `after`, up to
    /// [`REPOST_SEARCH_PAGES`] pages.
    async fn reposts_made(
        &self,
        channel: ChannelId,
        after: MessageId,
        name: &str,
        parts: &[String],
    ) -> Result<Vec<MessageId>, RestError>;
    async fn delete(&self, channel: ChannelId, message: MessageId) -> Result<(), RestError>;
    /// Deletes a repost the bot made: through the channel's webhook with its token where Discord knows the message
    /// as that webhook's (no permission needed, so it works after the bot lost Manage Messages), else with the
    /// bot's own token, as [`Rest::delete`] does.
    async fn take_back(&self, channel: ChannelId, message: MessageId) -> Result<(), RestError> {
        self.delete(channel, message).await
    }
    async fn react(&self, channel: ChannelId, message: MessageId, emoji: &str) -> Result<(), RestError>;
    /// Up to `limit` messages created after `after`, oldest first, without the bot's own, its reposts and Discord's
    /// system messages. A page that read ([`Page::read`]) fewer than `limit` means there are no more.
    async fn messages_after(&self, channel: ChannelId, after: MessageId, limit: u8) -> Result<Page, RestError>;
    /// The permissions relay mode needs (by name) that the bot lacks in `channel` (see
    /// `Access::relay_permissions_missing`).
    async fn relay_permissions_missing(&self, channel: ChannelId) -> Result<Vec<&'static str>, RestError>;
    /// The control roles that calling the managers in `channel` would name without notifying anyone (see
    /// `Access::control_roles_unpingable`).
    async fn control_roles_unpingable(&self, _channel: ChannelId) -> Result<Vec<String>, RestError> {
        Ok(Vec::new())
    }
    /// Of `users`, those Discord says are no members of `channel`'s server, `guild` when the session knows it (see
    /// `Access::not_members`).
    async fn not_members(
        &self,
        _channel: ChannelId,
        _guild: Option<GuildId>,
        _users: &[UserId],
    ) -> Result<Vec<UserId>, RestError> {
        Ok(Vec::new())
    }
    /// The server `channel` is in (from the gateway's cache, else REST); `None` where it cannot be known.
    async fn guild_of(&self, _channel: ChannelId) -> Result<Option<GuildId>, RestError> {
        Ok(None)
    }
    /// Whether `user` may change the session in `channel` (see `commands.rs`), for a command read back from the
    /// history, which carries no membership: the refusal says why, or that it could not be checked; `Err(None)` for
    /// an author who is no member of the server (a webhook, someone who left), to whom nothing is said.
    async fn may_manage(&self, _channel: ChannelId, _user: UserId) -> Result<(), Option<String>> {
        Err(Some("I could not check your permissions.".into()))
    }
}

/// What a repost carries over from the agent's message besides its text.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Carried {
    pub files: Vec<File>,
    /// The message's own embeds ("rich"), as Discord gave them.
    pub embeds: Vec<serde_json::Value>,
    /// Its flags a repost keeps (`@silent`, previews suppressed), set on every part.
    pub flags: crate::core::session::effects::KeptFlags,
}

impl Carried {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.embeds.is_empty()
    }
}

/// A file of a message, downloaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    pub name: String,
    pub content_type: Option<String>,
    pub description: Option<String>,
    pub bytes: Vec<u8>,
}

/// One page of a channel's history: the messages for the engine, and the newest id read (own and system messages
/// included), from which the next page starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub messages: Vec<IncomingMessage>,
    pub newest: Option<MessageId>,
    /// Messages read, own ones included: a full page means there may be more.
    pub read: usize,
}

/// Why a REST call failed. Decisions (retry, give up) are taken on the variants, never on message text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestError {
    /// Discord answered with an error status. `retry_after` is Discord's own wait for a 429, when it is known.
    #[error("status {status}: {message}")]
    Status { status: u16, message: String, retry_after: Option<Duration> },
    /// No answer within the time limit of one call.
    #[error("no answer within {}s", .0.as_secs())]
    Timeout(Duration),
    /// The request did not reach Discord or its answer could not be read.
    #[error("{0}")]
    Transport(String),
    /// The call could not be made yet: not connected, a server not in the cache yet, or this process no longer acts
    /// for the channel.
    #[error("{0}")]
    Unavailable(String),
    /// A 403 from Discord's network (code 40333, or a page that is not Discord's JSON, Cloudflare's) rather than
    /// from its permissions: taken for a missing permission, it paused sessions and turned channels to observe mode
    /// (found by a review). The call was refused, not made (no copy of it is looked for), and may be tried later.
    #[error("refused by Discord's network, not for a permission (403: {0})")]
    NetworkRefused(String),
    /// A webhook's own token refused (401, code 50027), not the bot's: the webhook is taken for gone, found or made
    /// again (found by a review: counted as the bot's token, the repost waited ten minutes).
    #[error("the webhook's token was refused (401: {0})")]
    WebhookTokenRefused(String),
    /// The call can never be made, e.g. in a channel that is not a server channel.
    #[error("{0}")]
    Impossible(String),
    /// A repost found none of the bot's webhooks in the channel and Discord refused to make one: the channel, or the
    /// whole server, has Discord's most webhooks. Relay is not possible there until someone deletes one.
    #[error("{}", .0.describe())]
    WebhooksFull(WebhookLimit),
}

/// The JSON error code of a 403 from Discord's network layer ("internal network error"), not from its permissions.
pub const NETWORK_REFUSAL: i64 = 40333;
/// How long every call of the bot's own client waits after a 403 from Discord's network (it gives no wait of its
/// own): each trying meanwhile would count towards Discord's ban of clients that make too many invalid requests.
pub const NETWORK_REFUSAL_PAUSE: Duration = Duration::from_secs(5);
/// The JSON error code of a 401 for a webhook's token (the webhook's, not the bot's): the webhook is taken for gone.
pub const INVALID_WEBHOOK_TOKEN: i64 = 50027;

/// Which of Discord's webhook limits refused a new webhook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookLimit {
    /// 15 in one channel (code 30007).
    Channel,
    /// 1,000 in one server (code 30058).
    Server,
}

impl WebhookLimit {
    /// The limit Discord names by this JSON error code, if it is one of them.
    pub fn from_code(code: isize) -> Option<WebhookLimit> {
        match code {
            30007 => Some(WebhookLimit::Channel),
            30058 => Some(WebhookLimit::Server),
            _ => None,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            WebhookLimit::Channel => "the channel has Discord's most webhooks (15) and none is mine",
            WebhookLimit::Server => "the server has Discord's most webhooks (1,000) and none in this channel is mine",
        }
    }
}

/// Deletes a message the bot made (404: gone already, done), [`in_a_few_tries`]: for taking back what should not
/// show, where the sender's ten minutes of retries would hold up the channel's next effects.
pub async fn delete_in_a_few_tries<F, Fut>(mut delete: F) -> Result<(), RestError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), RestError>>,
{
    in_a_few_tries(|| {
        let deleting = delete();
        async move {
            match deleting.await {
                Err(e) if e.status() == Some(404) => Ok(()),
                other => other,
            }
        }
    })
    .await
}

/// A call tried a few times over some seconds while it fails in a way that may pass ([`RestError::is_transient`]),
/// a 429 waiting Discord's `retry_after`. Answers the last failure.
pub async fn in_a_few_tries<T, F, Fut>(mut call: F) -> Result<T, RestError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, RestError>>,
{
    let (mut wait, mut tries) = (Duration::from_millis(500), 1);
    loop {
        match call().await {
            Ok(done) => return Ok(done),
            Err(e) if e.is_transient() && tries < 4 => {
                let asked = match &e {
                    RestError::Status { retry_after, .. } => *retry_after,
                    _ => None,
                };
                tokio::time::sleep(asked.unwrap_or(wait)).await;
                (wait, tries) = (wait * 2, tries + 1);
            }
            Err(e) => return Err(e),
        }
    }
}

impl RestError {
    /// A failure that may pass: a 429, a server error, a time-out, a broken connection, not connected yet, a refusal
    /// by Discord's network; and a 401, which refuses the bot's token, not the call: tried again as a server error
    /// is, the effect waits in the outbox, and the process stops once the gateway refuses the token too (found by a
    /// review: an announcement made while a start with a wrong token failed was given up for good). A refusal
    /// (other 4xx, a webhook's token) will not.
    pub fn is_transient(&self) -> bool {
        match self {
            RestError::Status { status, .. } => matches!(*status, 401 | 429) || *status >= 500,
            RestError::Timeout(_)
            | RestError::Transport(_)
            | RestError::Unavailable(_)
            | RestError::NetworkRefused(_) => true,
            RestError::Impossible(_) | RestError::WebhooksFull(_) | RestError::WebhookTokenRefused(_) => false,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            RestError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_take_back_waits_out_a_rate_limit_counts_gone_as_done_and_stops_at_a_refusal() {
        let answers = std::sync::Mutex::new(vec![
            Err(RestError::Status { status: 429, message: String::new(), retry_after: Some(Duration::from_secs(3)) }),
            Ok(()),
        ]);
        let started = tokio::time::Instant::now();
        assert_eq!(delete_in_a_few_tries(|| async { answers.lock().unwrap().remove(0) }).await, Ok(()));
        assert_eq!(started.elapsed(), Duration::from_secs(3), "Discord's retry_after, not the back-off");
        let status = |status| RestError::Status { status, message: String::new(), retry_after: None };
        assert_eq!(delete_in_a_few_tries(|| async { Err(status(404)) }).await, Ok(()), "gone already");
        let tries = std::sync::atomic::AtomicU32::new(0);
        let refused = delete_in_a_few_tries(|| async {
            tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Err(status(403))
        });
        assert_eq!(refused.await, Err(status(403)));
        assert_eq!(tries.into_inner(), 1, "a refusal is never tried again");
        let tries = std::sync::atomic::AtomicU32::new(0);
        let failing = delete_in_a_few_tries(|| async {
            tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Err(status(503))
        });
        assert_eq!(failing.await, Err(status(503)));
        assert_eq!(tries.into_inner(), 4, "a few tries, not the sender's ten minutes");
    }

    #[test]
    fn a_repost_pings_each_user_it_mentions_once_at_most_a_hundred_and_no_persona() {
        let persona = |user| user == 7;
        let text = "<@1> <@!2> <@7> <@1> <@&3> <@abc> <@4 <@5>> <@!> <@@6>";
        assert_eq!(users_to_ping(text, persona), vec![1, 2, 5]);
        let many: String = (1..=150).map(|user| format!("<@{user}> ")).collect();
        assert_eq!(users_to_ping(&many, persona).len(), 100, "Discord's most");
        assert!(users_to_ping("no mention. <@", persona).is_empty());
    }

    #[test]
    fn rate_limits_server_errors_and_timeouts_are_transient_refusals_are_not() {
        let status = |status| RestError::Status { status, message: String::new(), retry_after: None };
        assert!(status(429).is_transient() && status(502).is_transient() && status(401).is_transient());
        assert!(RestError::Timeout(Duration::from_secs(1)).is_transient());
        assert!(!status(403).is_transient() && !status(404).is_transient());
        assert!(RestError::Unavailable("not connected".into()).is_transient());
        assert!(!RestError::Impossible("not a server channel".into()).is_transient());
        assert_eq!(status(403).status(), Some(403));
    }
}

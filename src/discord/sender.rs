//! A channel's sender: carries out the effects its actor decided (and saved), in order, so that a slow REST call
//! delays only this channel's later effects: never its actor's decisions, never another channel.

use super::rest::{Rest, RestError, Voice};
use crate::core::ids::ChannelId;
use crate::core::persona::PersonaCatalog;
use crate::core::session::effects::{Announcement, Effect};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Attempts at posting an announcement; its nonce makes a retry safe.
const ANNOUNCE_ATTEMPTS: u32 = 3;
/// The wait before retrying a 429 when Discord's own `retry_after` is not known.
const RATE_LIMIT_WAIT: Duration = Duration::from_secs(1);

/// Work for a sender, in the order it must be done.
#[derive(Debug)]
pub enum Job {
    Effect(Effect),
    /// A plain line from the bot that pings nobody (the display-mode fallback notice).
    Notice(String),
    /// Answered once everything queued before it is done.
    Flush(oneshot::Sender<()>),
}

/// The way in to a channel's sender; the task ends when the handle is dropped and its queue is done.
#[derive(Clone)]
pub struct Sender {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Sender {
    pub fn spawn(channel: ChannelId, rest: Arc<dyn Rest>, personas: Arc<PersonaCatalog>) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        tokio::spawn(run(channel, rest, personas, queue));
        Self { jobs }
    }

    pub fn effects(&self, effects: Vec<Effect>) {
        for effect in effects {
            let _ = self.jobs.send(Job::Effect(effect));
        }
    }

    pub fn notice(&self, text: String) {
        let _ = self.jobs.send(Job::Notice(text));
    }

    /// Waits until everything queued so far is carried out (or given up).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.jobs.send(Job::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

async fn run(
    channel: ChannelId,
    rest: Arc<dyn Rest>,
    personas: Arc<PersonaCatalog>,
    mut queue: mpsc::UnboundedReceiver<Job>,
) {
    while let Some(job) = queue.recv().await {
        match job {
            Job::Effect(effect) => {
                if let Err(e) = carry_out(channel, rest.as_ref(), &personas, &effect).await {
                    let hint = if e.status() == Some(403) {
                        " (the bot lacks a permission in this channel; see `turn-manager invite`)"
                    } else {
                        ""
                    };
                    tracing::warn!(channel = %channel, "could not {}: {e}{hint}", describe(&effect));
                }
            }
            Job::Notice(text) => {
                if let Err(e) = rest.notice(channel, &text).await {
                    tracing::warn!(channel = %channel, "could not post a notice: {e}");
                }
            }
            Job::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

async fn carry_out(
    channel: ChannelId,
    rest: &dyn Rest,
    personas: &PersonaCatalog,
    effect: &Effect,
) -> Result<(), RestError> {
    match effect {
        Effect::Relay { message_id, persona, text } => {
            // Repost first: if the repost fails, the original stays and nothing is lost.
            if let Some(text) = text {
                let found = personas.get(persona);
                let voice = Voice {
                    name: found.map_or(persona.as_str(), |p| p.display_name.as_str()),
                    avatar_url: found.and_then(|p| p.avatar_url.as_deref()),
                };
                rest.repost(channel, voice, text).await?;
            }
            rest.delete(channel, *message_id).await
        }
        Effect::Delete { message_id } => rest.delete(channel, *message_id).await,
        Effect::React { message_id, emoji } => rest.react(channel, *message_id, emoji).await,
        Effect::Announce(announcement) => announce(channel, rest, announcement).await,
    }
}

/// Posts an announcement, retrying what may pass with the same nonce, which Discord uses to never post it twice.
async fn announce(channel: ChannelId, rest: &dyn Rest, announcement: &Announcement) -> Result<(), RestError> {
    let mut attempt = 1;
    loop {
        match rest.announce(channel, announcement).await {
            Ok(_) => return Ok(()),
            Err(e) if attempt < ANNOUNCE_ATTEMPTS && e.is_transient() => {
                let wait = match &e {
                    RestError::Status { status: 429, retry_after, .. } => retry_after.unwrap_or(RATE_LIMIT_WAIT),
                    _ => Duration::from_millis(250 * u64::from(attempt)),
                };
                tracing::info!(channel = %channel, attempt, "retrying an announcement in {wait:?}: {e}");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

fn describe(effect: &Effect) -> &'static str {
    match effect {
        Effect::Relay { .. } => "relay a message",
        Effect::Delete { .. } => "remove an out-of-turn message",
        Effect::React { .. } => "react to a completed turn",
        Effect::Announce(_) => "post an announcement",
    }
}

//! Reading what a channel missed (spec 5.6, 8): after a new gateway session (process start, re-IDENTIFY), a task pages
//! through every message after the last one handled and posts each page to the channel's actor, which judges each by
//! when it was written, before its deadline may end the turn.

use super::{Env, Input};
use crate::core::ids::{ChannelId, MessageId};
use crate::core::session::Session;
use crate::core::session::history::EventKind;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Discord's largest page.
const PAGE: u8 = 100;
/// Attempts at reading one page when the failure may pass.
const ATTEMPTS: u32 = 3;

/// Where reading starts: after the newest message handled, or (none handled yet) from the session's start.
pub(super) fn read_from(session: &Session) -> Option<MessageId> {
    let started = session
        .history
        .iter()
        .rev()
        .find(|e| matches!(e.kind, EventKind::SessionStarted { .. }))
        .map(|e| e.at)
        .or(session.turn_started_at);
    session.last_message_id.or(started.map(MessageId::first_at))
}

pub(super) async fn read_missed(
    env: Arc<Env>,
    channel: ChannelId,
    mut after: MessageId,
    inbox: mpsc::UnboundedSender<Input>,
) {
    let _permit = env.catch_up_permits.clone().acquire_owned().await;
    let mut total = 0;
    loop {
        let mut attempt = 1;
        let page = loop {
            match env.rest.messages_after(channel, after, PAGE).await {
                Ok(page) => break Some(page),
                Err(e) if attempt < ATTEMPTS && e.is_transient() => {
                    tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
                    attempt += 1;
                }
                Err(e) => {
                    tracing::warn!(channel = %channel, "could not read the messages missed while away: {e}");
                    break None;
                }
            }
        };
        let Some(page) = page else {
            let _ = inbox.send(Input::Missed { messages: Box::default(), done: true });
            return;
        };
        let done = page.read < usize::from(PAGE) || page.newest.is_none();
        total += page.messages.len();
        if let Some(newest) = page.newest {
            after = newest;
        }
        if inbox.send(Input::Missed { messages: page.messages.into_boxed_slice(), done }).is_err() || done {
            if total > 0 {
                tracing::info!(channel = %channel, count = total, "read the messages missed while away");
            }
            return;
        }
    }
}

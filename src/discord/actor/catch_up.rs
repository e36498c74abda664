//! Reading what a channel missed (spec 5.6, 8): after a new gateway session (process start, re-IDENTIFY), a task pages
//! through every message after the last one handled and posts each page to the channel's actor, which judges each by
//! when it was written, before its deadline may end the turn. Edits are not in those pages: the messages an edit may
//! still finish (seen without a signal) are read again, once, so that a signal added while the bot could not see is
//! not lost.

use super::{Env, Input};
use crate::core::ids::{ChannelId, MessageId};
use crate::core::session::history::EventKind;
use crate::core::session::{IncomingMessage, Session};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Discord's largest page.
const PAGE: u8 = 100;
/// Attempts at reading one page when the failure may pass.
const ATTEMPTS: u32 = 3;

/// Where reading starts: after the messages taken as handled (the reorder window behind the newest one handled, so
/// that one overtaken just before a crash or a disconnection is read too), or (none handled yet) from the session's
/// start.
pub(super) fn read_from(session: &Session) -> Option<MessageId> {
    let started = session
        .history
        .iter()
        .rev()
        .find(|e| matches!(e.kind, EventKind::SessionStarted { .. }))
        .map(|e| e.at)
        .or(session.turn_started_at);
    session.settled_through().or(started.map(MessageId::first_at))
}

/// The messages handled without a signal that an edit may have finished since, oldest first. The pages do not show
/// them as edits: those at or before `after` are not on them, and those after it (in the reorder window) are
/// repeats there.
pub(super) fn may_have_been_edited(session: &Session) -> Vec<MessageId> {
    let mut ids: Vec<MessageId> = session.editable_messages.iter().copied().collect();
    ids.sort();
    ids
}

pub(super) async fn read_missed(
    env: Arc<Env>,
    channel: ChannelId,
    mut after: MessageId,
    editable: Vec<MessageId>,
    inbox: mpsc::UnboundedSender<Input>,
) {
    let _permit = env.catch_up_permits.clone().acquire_owned().await;
    let mut total = 0;
    loop {
        let Some(page) = read_page(&env, channel, after).await else { break };
        let done = page.read < usize::from(PAGE) || page.newest.is_none();
        total += page.messages.len();
        if let Some(newest) = page.newest {
            after = newest;
        }
        if inbox.send(Input::Missed { messages: page.messages.into_boxed_slice(), done: false }).is_err() {
            return;
        }
        if done {
            break;
        }
    }
    if total > 0 {
        tracing::info!(channel = %channel, count = total, "read the messages missed while away");
    }
    let edited = read_edited(&env, channel, &editable).await;
    let _ = inbox.send(Input::Missed { messages: edited.into_boxed_slice(), done: true });
}

/// The `editable` messages as they read now, each as an edit judged now (a page does not tell when a message was
/// edited); the actor keeps only those that gained a signal. One page from the oldest covers them: they are recent.
async fn read_edited(env: &Env, channel: ChannelId, editable: &[MessageId]) -> Vec<IncomingMessage> {
    let Some(oldest) = editable.first() else { return Vec::new() };
    let Some(page) = read_page(env, channel, MessageId(oldest.0.saturating_sub(1))).await else { return Vec::new() };
    let now = env.clock.now();
    page.messages
        .into_iter()
        .filter(|m| editable.contains(&m.id))
        .map(|m| IncomingMessage { edited: true, written_at: now, ..m })
        .collect()
}

/// One page of the messages after `after`, retried while the failure may pass; `None` if it cannot be read.
async fn read_page(env: &Env, channel: ChannelId, after: MessageId) -> Option<crate::discord::rest::Page> {
    let mut attempt = 1;
    loop {
        match env.rest.messages_after(channel, after, PAGE).await {
            Ok(page) => return Some(page),
            Err(e) if attempt < ATTEMPTS && e.is_transient() => {
                tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
                attempt += 1;
            }
            Err(e) => {
                tracing::warn!(channel = %channel, "could not read the messages missed while away: {e}");
                return None;
            }
        }
    }
}

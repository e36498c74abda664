//! Reading what a channel missed (spec 5.6, 8): after a new gateway session (process start, re-IDENTIFY), a task pages
//! through every message after the last one handled and posts each page to the channel's actor, which judges each by
//! when it was written, before its deadline may end the turn. Edits are not in those pages as edits: the messages an
//! edit may still finish (seen without a signal) are looked at again, as the pages show them or, older than the
//! pages, read first, so that a signal added while the bot could not see is not lost; each is judged by the time
//! Discord gives for its last edit, and put among the pages' messages by that time.
//!
//! A failure that may pass is retried by the senders' policy, and after it gives up, again later: the channel waits
//! (its deadline held) until the range is read, since skipping it would end turns whose signals are on it. Only a
//! refusal for good (Read Message History missing, the channel gone) ends the catch-up early, with one warning, so
//! that the channel does not wait forever; a channel gone (404) ends its session.

use super::inbox::InboxSender;
use super::{Env, Input, MissedPage};
use crate::core::ids::{ChannelId, MessageId};
use crate::core::session::history::EventKind;
use crate::core::session::lost::Unreachable;
use crate::core::session::{IncomingMessage, Session};
use crate::discord::rest::{Page, RestError};
use crate::discord::sender::retrying;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// What a channel's deadlines wait for before they may end turns again (spec 8), if anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Awaiting {
    #[default]
    Nothing,
    /// Its shard's lost connection. A RESUME replays what the gateway carried meanwhile, before RESUMED, so the
    /// deadlines go on at RESUMED without a read (on Discord, a read per channel after every RESUME would cost
    /// 10,000 channels some 200 s of the bot's REST budget); a new gateway session (READY) reads.
    Connection,
    /// A read of the channel's history, once its shard is connected: what it owes is in no replay (the bot started,
    /// the channel was taken over from another process, live messages were left to the history).
    Read,
}

/// Discord's largest page.
const PAGE: u8 = 100;
/// How long to wait before reading a page again once the retry policy gave up on it (Discord down for minutes).
const READ_AGAIN_AFTER: Duration = Duration::from_secs(60);

/// Where reading starts: after the messages taken as handled (the reorder window behind the newest one handled, so
/// that one overtaken just before a crash or a disconnection is read too), or (none handled yet) from the session's
/// start.
pub(super) fn read_from(session: &Session) -> Option<MessageId> {
    let last_start = session.history.iter().rev().find(|e| matches!(e.kind, EventKind::SessionStarted { .. }));
    let started = last_start.map(|e| e.at).or(session.turn_started_at);
    session.settled_through().or(started.map(MessageId::first_at))
}

/// The messages handled without a signal that an edit may have finished since, oldest first. The pages do not show
/// them as edits: those at or before `after` are not on them, and those after it (in the reorder window) are
/// repeats there.
pub(super) fn may_have_been_edited(session: &Session) -> Vec<MessageId> {
    let mut ids: Vec<MessageId> = session.editable_messages.to_vec();
    ids.sort();
    ids
}

pub(super) async fn read_missed(
    env: Arc<Env>,
    channel: ChannelId,
    mut after: MessageId,
    editable: Vec<MessageId>,
    inbox: InboxSender,
) {
    let mut total = 0;
    // Every message after `after` is on the pages: the editable ones among them are read there, not again; the older
    // ones are read first.
    let older: Vec<MessageId> = editable.iter().copied().filter(|id| *id <= after).collect();
    let (mut edits, mut refused) = match read_older(&env, channel, &older, &inbox).await {
        Ok(read) => (as_edits(read), None),
        Err(e) => (Vec::new(), Some(e)),
    };
    while refused.is_none() {
        let page = match read_page(&env, channel, after, &inbox).await {
            Ok(page) => page,
            Err(e) => {
                refused = Some(e);
                break;
            }
        };
        let done = page.read < usize::from(PAGE) || page.newest.is_none();
        total += page.messages.len();
        if let Some(newest) = page.newest {
            after = newest;
        }
        edits.extend(as_edits(page.messages.iter().filter(|m| editable.contains(&m.id)).cloned()));
        // An edit goes among the messages by when it was made: one that added a signal before the deadline is judged
        // before a message written after the deadline times the turn out (spec 5.7). Those made after the newest
        // message this page read (its own messages included, which the page does not give) wait for the page they
        // fall in, or the last one.
        let until = if done { None } else { page.newest.map(MessageId::created_at) };
        let messages = in_time_order(page.messages, &mut edits, until);
        let (handled, page_handled) = oneshot::channel();
        let page = MissedPage { messages, done: false, handled: Some(handled) };
        if inbox.send(Input::Missed(Box::new(page))).is_err() || page_handled.await.is_err() {
            return;
        }
        if done {
            break;
        }
    }
    if total > 0 {
        // The count includes the reorder window read again, whose messages were mostly handled already.
        tracing::info!(channel = %channel, count = total, "read back the channel's recent history after being away");
    }
    if let Some(e) = refused {
        if e.status() == Some(404) {
            // The channel was deleted while the bot could not see: the session ends rather than read again at every
            // start (a paused one would never post the announcement whose 404 would tell).
            tracing::warn!(channel = %channel, "the channel is gone (Discord answered 404 to reading it)");
            let _ = inbox.send(Input::Unreachable(Unreachable::ChannelDeleted));
        } else {
            tracing::warn!(channel = %channel, "could not read the messages missed while away, so overdue turns end now: {e}");
        }
    }
    // The edits not placed yet (all of them after a refusal: what was read is still true).
    let messages = in_time_order(Vec::new(), &mut edits, None);
    let _ = inbox.send(Input::Missed(Box::new(MissedPage { messages, done: true, handled: None })));
}

/// How many pages the editable messages older than the missed ones are read on, at most (they are recent: those of
/// the last turns; one written long ago in a quiet channel is not worth reading the channel's history up to it).
const OLDER_PAGES_MAX: usize = 10;

/// The editable messages written before the missed pages (`older`, oldest first), as they read now: paged from the
/// oldest until the newest of them is passed (one not found was deleted).
async fn read_older(
    env: &Env,
    channel: ChannelId,
    older: &[MessageId],
    inbox: &InboxSender,
) -> Result<Vec<IncomingMessage>, RestError> {
    let mut found = Vec::new();
    let (Some(oldest), Some(newest)) = (older.first(), older.last()) else { return Ok(found) };
    let mut after = MessageId(oldest.0.saturating_sub(1));
    for _ in 0..OLDER_PAGES_MAX {
        let page = read_page(env, channel, after, inbox).await?;
        found.extend(page.messages.into_iter().filter(|m| older.contains(&m.id)));
        match page.newest {
            Some(read_to) if read_to < *newest && page.read == usize::from(PAGE) => after = read_to,
            _ => return Ok(found),
        }
    }
    tracing::info!(%channel, "editable messages more than {OLDER_PAGES_MAX} pages back were not read again");
    Ok(found)
}

/// The editable messages as read, each as an edit judged by Discord's time of its last edit. One never edited (no
/// edit time) has nothing new to say and is left out: taken as an edit made now, it would count as its author
/// speaking now (auto-detection by silence).
fn as_edits(read: impl IntoIterator<Item = IncomingMessage>) -> Vec<IncomingMessage> {
    read.into_iter().filter_map(|m| Some(IncomingMessage { edited: true, written_at: m.edited_at?, ..m })).collect()
}

/// A page's messages with the edits made up to `until` (every one, for `None`) in among them, by when each was
/// written or made; the other edits stay in `edits`.
fn in_time_order(
    messages: Vec<IncomingMessage>,
    edits: &mut Vec<IncomingMessage>,
    until: Option<DateTime<Utc>>,
) -> Vec<IncomingMessage> {
    let (due, later): (Vec<_>, Vec<_>) =
        std::mem::take(edits).into_iter().partition(|e| until.is_none_or(|until| e.written_at <= until));
    *edits = later;
    let mut merged = messages;
    merged.extend(due);
    // Stable: at the same instant, the page's message first (it is older than any edit of it).
    merged.sort_by_key(|m| m.written_at);
    merged
}

/// One page of the messages after `after`, read however long a failure that may pass lasts; an error only for a
/// refusal for good (or once the actor is gone).
async fn read_page(env: &Env, channel: ChannelId, after: MessageId, inbox: &InboxSender) -> Result<Page, RestError> {
    loop {
        // A permit per request, not per catch-up: a channel whose reads keep failing waits out its back-off without
        // one, and the other channels' catch-ups go on.
        let answer = retrying(|| async {
            let _permit = env.catch_up_permits.acquire().await;
            env.stats.work();
            env.rest.messages_after(channel, after, PAGE).await
        })
        .await;
        match answer {
            Err(e) if e.is_transient() && !inbox.is_closed() => {
                tracing::warn!(
                    channel = %channel,
                    "still cannot read the messages missed while away; deadlines wait, trying again in {}s: {e}",
                    READ_AGAIN_AFTER.as_secs()
                );
                tokio::time::sleep(READ_AGAIN_AFTER).await;
            }
            answer => return answer,
        }
    }
}

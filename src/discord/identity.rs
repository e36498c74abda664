//! Who the bot is on Discord: its user id (known at READY) and the webhooks it owns, so that its own messages and
//! reposts are never taken for someone else's (spec 5, step 1: never react to yourself).

use crate::core::ids::{MessageId, UserId};
use crate::core::session::IncomingMessage;
use crate::core::session::effects::KeptFlags;
use chrono::{DateTime, Utc};
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

#[derive(Default)]
pub struct Identity {
    user: OnceLock<UserId>,
    webhooks: Mutex<HashSet<u64>>,
}

impl Identity {
    pub fn set_user(&self, user: UserId) {
        let _ = self.user.set(user);
    }

    pub fn user(&self) -> Option<UserId> {
        self.user.get().copied()
    }

    pub fn add_webhook(&self, id: u64) {
        self.webhooks.lock().expect("webhook ids lock").insert(id);
    }

    pub fn is_own_webhook(&self, id: u64) -> bool {
        self.webhooks.lock().expect("webhook ids lock").contains(&id)
    }

    /// Whether a message of this Discord type is one its author wrote (0, or 19 for a reply), which the engine
    /// judges; not Discord's system messages (a pin's notice, a thread's creation, which carry the user who caused
    /// them as their author: found by a review, an agent pinning a message while another held the floor had the
    /// pin's notice deleted as out of turn), nor an answer to a slash command (20, 23), which a person asked of the
    /// bot that answers, a persona's agent too: not its turn's words, and not to be removed as out of turn.
    pub fn is_written(kind: u8) -> bool {
        matches!(kind, 0 | 19)
    }

    /// A message as the engine takes it, or `None` for the bot's own messages and its own webhooks' reposts. Its
    /// time is when its author wrote it, never when it reached us: its snowflake's, or for an edit (`edited_at`)
    /// Discord's edit time. `has_files`: it carries files or embeds a repost must carry over. Without flags (see
    /// [`IncomingMessage::with_flags`]).
    pub fn incoming(
        &self,
        author: UserId,
        webhook: Option<u64>,
        id: MessageId,
        text: String,
        edited_at: Option<DateTime<Utc>>,
        has_files: bool,
    ) -> Option<IncomingMessage> {
        if self.user() == Some(author) || webhook.is_some_and(|hook| self.is_own_webhook(hook)) {
            return None;
        }
        let written_at = edited_at.unwrap_or_else(|| id.created_at());
        let (edited, flags) = (edited_at.is_some(), KeptFlags::default());
        Some(IncomingMessage {
            id,
            author,
            text,
            edited,
            written_at,
            edited_at: None,
            has_files,
            flags,
            mentions: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_messages_and_own_webhooks_are_dropped_and_the_time_is_the_snowflakes() {
        let identity = Identity::default();
        identity.set_user(UserId(7));
        identity.add_webhook(99);
        let id = MessageId(1_000_000 << 22);
        assert!(identity.incoming(UserId(7), None, id, "mine".into(), None, false).is_none());
        assert!(identity.incoming(UserId(8), Some(99), id, "repost".into(), None, false).is_none());
        let other =
            identity.incoming(UserId(8), Some(98), id, "hi".into(), None, true).expect("someone else's webhook counts");
        assert_eq!(other.written_at, id.created_at());
        assert!(other.has_files, "files are marked for the repost");
        let edited_at = id.created_at() + chrono::TimeDelta::seconds(3);
        let edit = identity.incoming(UserId(8), None, id, "hi, more".into(), Some(edited_at), false).unwrap();
        assert!(edit.edited && edit.written_at == edited_at, "an edit is timed by Discord's edit time");
    }
}

//! What the engine decides should happen in the channel; the Discord layer carries these out in order.

use crate::core::ids::{MessageId, PersonaId, UserId};

/// Discord's limit on a message's length, in characters.
pub const MESSAGE_CONTENT_LENGTH_MAX: usize = 2000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Relay mode: delete the agent's message and, when `text` is set, repost it as the persona.
    Relay { message_id: MessageId, persona: PersonaId, text: Option<String> },
    /// Delete a message (out of turn under the `remove` policy, relay mode).
    Delete { message_id: MessageId },
    /// Observe mode: react to the message that completed a turn.
    React { message_id: MessageId, emoji: &'static str },
    /// Post a message as the manager.
    Announce(Announcement),
}

/// A message the manager posts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Announcement {
    pub text: String,
    /// The only user this announcement may ping (the persona whose turn starts); nobody when `None`.
    pub mention: Option<UserId>,
    /// Stable across retries and restarts, so a re-sent announcement is not posted twice (`enforce_nonce`).
    pub nonce: String,
}

/// The reaction that marks a completed turn in observe mode.
pub const COMPLETED_REACTION: &str = "✅";

/// Cuts `text` to Discord's message limit, marking the cut.
pub fn fit_message(text: String) -> String {
    if text.chars().count() <= MESSAGE_CONTENT_LENGTH_MAX {
        return text;
    }
    let mut cut: String = text.chars().take(MESSAGE_CONTENT_LENGTH_MAX - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_to_the_discord_limit() {
        let cut = fit_message("y".repeat(2500));
        assert_eq!(cut.chars().count(), MESSAGE_CONTENT_LENGTH_MAX);
        assert!(cut.ends_with('…'));
        assert_eq!(fit_message("short".into()), "short");
    }
}

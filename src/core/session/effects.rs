//! What the engine decides should happen in the channel; the Discord layer carries these out in order. Effects are
//! data that outlive the process: they are saved with the session (its outbox) until they are done (spec 9).

use crate::core::ids::{ChannelId, MessageId, PersonaId, UserId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Discord's limit on a message's length, in characters.
pub const MESSAGE_CONTENT_LENGTH_MAX: usize = 2000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Effect {
    /// Relay mode: delete the agent's message and, when `text` is set, repost it as the persona (in several
    /// messages, in order, when it is longer than Discord allows: see [`split_message`]).
    /// `has_files`: the message carries files or embeds, which the repost carries over (the sender fetches them only
    /// then). `already_deleted`: the bot asked for the message's deletion before (taken for out of turn, then shown
    /// to be said in turn): its absence says nothing of anyone else's deletion (a 404 on deleting it, a replay's look),
    /// and it is reposted all the same. Its deletion is asked for again, in case the first was refused.
    Relay {
        message_id: MessageId,
        persona: PersonaId,
        text: Option<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        has_files: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        already_deleted: bool,
        #[serde(default, skip_serializing_if = "KeptFlags::is_none")]
        flags: KeptFlags,
        /// The users the original pinged, the only ones the repost may ping; `None`: not known, those its text
        /// mentions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mentions: Option<Vec<UserId>>,
    },
    /// Delete a message (out of turn under the `remove` policy, relay mode).
    Delete { message_id: MessageId },
    /// Observe mode: react to the message that completed a turn.
    React { message_id: MessageId, emoji: String },
    /// Post a message as the manager.
    Announce(Announcement),
}

impl Effect {
    /// The effect's name in history events and logs.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Effect::Relay { .. } => "relay",
            Effect::Delete { .. } => "delete",
            Effect::React { .. } => "react",
            Effect::Announce(_) => "announce",
        }
    }

    /// Whether it only keeps the channel readable (a repost without the signal, a reaction, a deletion), so that it
    /// may be left undone while Discord accepts nothing: announcements give the floor and are never left.
    pub fn tidies(&self) -> bool {
        !matches!(self, Effect::Announce(_))
    }
}

/// The flags of an agent's message that its repost keeps, as Discord numbers them: sent without notifications
/// (`@silent`: its mentions notify nobody), link previews suppressed. A webhook may set both; others are left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "u64", into = "u64")]
pub struct KeptFlags(u64);

impl KeptFlags {
    pub const SUPPRESS_EMBEDS: u64 = 1 << 2;
    pub const SUPPRESS_NOTIFICATIONS: u64 = 1 << 12;

    /// The flags kept of a message's `flags`.
    pub fn of(flags: u64) -> Self {
        Self(flags & (Self::SUPPRESS_EMBEDS | Self::SUPPRESS_NOTIFICATIONS))
    }

    pub fn bits(self) -> u64 {
        self.0
    }

    pub fn is_none(&self) -> bool {
        self.0 == 0
    }
}

impl From<u64> for KeptFlags {
    fn from(flags: u64) -> Self {
        Self::of(flags)
    }
}

impl From<KeptFlags> for u64 {
    fn from(flags: KeptFlags) -> Self {
        flags.0
    }
}

/// A message the manager posts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Announcement {
    pub text: String,
    /// The only user this announcement may ping (the persona whose turn starts); nobody when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mention: Option<UserId>,
    /// Never reused, and the same on every retry and after a restart, so Discord (`enforce_nonce`) never posts one
    /// announcement twice and never swallows a new one as a repeat.
    pub nonce: String,
    /// Posted as a reply to this message (an agent's unknown signal or refused handoff), pinging its author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<MessageId>,
    /// Mentions the control roles (an escalation, a loop): the managers must come.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ping_managers: bool,
}

/// An effect waiting in the session's outbox: saved with the state that decided it, removed once carried out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Queued {
    pub id: u64,
    pub effect: Effect,
}

/// The reaction that marks a completed turn in observe mode.
pub const COMPLETED_REACTION: &str = "✅";

/// Cuts `text` to Discord's message limit, marking the cut (for the manager's own announcements).
pub fn fit_message(text: String) -> String {
    if text.chars().count() <= MESSAGE_CONTENT_LENGTH_MAX {
        return text;
    }
    clip(&text, MESSAGE_CONTENT_LENGTH_MAX)
}

/// `text` cut to `max` characters at most, the cut marked with `…`: for what someone typed, repeated in a reply.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Splits an agent's text into messages Discord accepts, in order, losing nothing: at the last line break (or else
/// the last space) before the limit, a hard cut only where a part has neither.
pub fn split_message(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.chars().count() > MESSAGE_CONTENT_LENGTH_MAX {
        let limit = rest.char_indices().nth(MESSAGE_CONTENT_LENGTH_MAX).map_or(rest.len(), |(i, _)| i);
        let window = &rest[..limit];
        // A break at the very start cuts nothing off: the one before it is looked for, then a space (found by a
        // review: a part beginning with the second line break of a blank line was cut in a word).
        let at = |c: char| window.rfind(c).filter(|&i| i > 0);
        let cut = at('\n').or_else(|| at(' ')).unwrap_or(limit);
        parts.push(rest[..cut].to_owned());
        rest = rest[cut..].strip_prefix(['\n', ' ']).unwrap_or(&rest[cut..]);
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest.to_owned());
    }
    parts
}

/// A nonce of at most 25 characters: the channel, the instant the announcement was decided and its number. The
/// instant makes it unique even if the sequence goes back (a session file restored from its last good copy, or a
/// state folder wiped), so Discord never takes a new announcement for a repeat of an old one.
pub fn nonce_for(channel: ChannelId, now: DateTime<Utc>, seq: u64) -> String {
    // splitmix64 over the channel id.
    let mut z = channel.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // 1 + 8 + 8 (milliseconds in base 36, fixed width until the year 2059) + at most 8 (36^8 announcements).
    let millis = base36(now.timestamp_millis().max(0) as u64);
    format!("t{:08x}{millis:0>8}{}", z as u32, base36(seq % 36u64.pow(8)))
}

/// When the announcement with this nonce was decided, on the deciding process's clock, read back from it (the inverse
/// of [`nonce_for`]): its message is no older, but for how far that clock ran ahead of Discord's. `None` for a nonce
/// of another form.
pub fn decided_at(nonce: &str) -> Option<DateTime<Utc>> {
    let millis = nonce.strip_prefix('t')?.get(8..16)?;
    DateTime::from_timestamp_millis(i64::try_from(u64::from_str_radix(millis, 36).ok()?).ok()?)
}

/// Whether a message's `content` is announcement `text` as the bot posts it: behind the control roles' mentions an
/// escalation puts first, or the agent's mention an answer to it puts first where it cannot be a Discord reply (no
/// Read Message History), cut to Discord's limit, without the whitespace around it that Discord drops.
pub fn shows_announcement(content: &str, text: &str) -> bool {
    let text = text.trim();
    // Only a message of exactly the limit can be one cut by [`fit_message`].
    let cut = content.chars().count() == MESSAGE_CONTENT_LENGTH_MAX;
    let matches = |shown: &str| {
        shown == text || (cut && shown.strip_suffix('…').is_some_and(|kept| !kept.is_empty() && text.starts_with(kept)))
    };
    let mut shown = content.trim();
    // The text itself may begin with a role's mention (a template's): compared before each one is taken off.
    while !matches(shown) {
        let mention = shown.strip_prefix("<@&").or_else(|| shown.strip_prefix("<@"));
        let Some((id, rest)) = mention.and_then(|r| r.split_once('>')) else { return false };
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        shown = rest.trim_start();
    }
    true
}

fn base36(mut n: u64) -> String {
    let mut digits = Vec::new();
    loop {
        digits.push(char::from_digit((n % 36) as u32, 36).expect("a base-36 digit"));
        n /= 36;
        if n == 0 {
            return digits.iter().rev().collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by a review: with a blank line straddling the limit, the next part began with a line break, found at
    /// its start and passed over, and the space before the limit was never looked for: a word was cut in two.
    #[test]
    fn a_part_after_a_blank_line_is_cut_at_a_space_not_in_a_word() {
        let text = format!("{}\n\n{}", "a".repeat(1999), "words ".repeat(500).trim_end());
        let parts = split_message(&text);
        assert!(parts.len() >= 3, "precondition: {} parts", parts.len());
        for part in &parts[1..] {
            assert!(part.chars().count() <= MESSAGE_CONTENT_LENGTH_MAX);
            assert!(part.trim().split(' ').all(|word| word == "words"), "a word cut in two: {part:?}");
        }
        assert_eq!(parts.concat().matches("words").count(), 500, "nothing lost");
    }

    #[test]
    fn long_announcements_are_cut_to_the_discord_limit() {
        assert_eq!(clip("persona", 7), "persona");
        assert_eq!(clip("personas", 7), "person…");
        let cut = fit_message("y".repeat(2500));
        assert_eq!(cut.chars().count(), MESSAGE_CONTENT_LENGTH_MAX);
        assert!(cut.ends_with('…'));
        assert_eq!(fit_message("short".into()), "short");
    }

    #[test]
    fn a_long_text_is_split_in_order_at_line_breaks_and_nothing_is_lost() {
        let paragraph = format!("{}\n", "word ".repeat(150).trim_end()); // 750 characters a line
        let text = paragraph.repeat(6);
        let parts = split_message(text.trim_end());
        assert!(parts.len() >= 3, "{} parts", parts.len());
        assert!(parts.iter().all(|p| p.chars().count() <= MESSAGE_CONTENT_LENGTH_MAX && !p.is_empty()));
        assert_eq!(parts.join("\n"), text.trim_end(), "joined at the line breaks it was cut at");
    }

    #[test]
    fn a_text_without_breaks_is_cut_hard_and_multibyte_characters_stay_whole() {
        let text = "é".repeat(4500);
        let parts = split_message(&text);
        assert_eq!(parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(), vec![2000, 2000, 500]);
        assert_eq!(parts.concat(), text);
        assert_eq!(split_message("short"), vec!["short"]);
    }

    #[test]
    fn nonces_fit_discord_and_never_repeat_for_another_channel_instant_or_number() {
        let t: DateTime<Utc> = "2026-03-01T10:00:00Z".parse().unwrap();
        let late: DateTime<Utc> = "2059-01-01T00:00:00Z".parse().unwrap();
        let a = nonce_for(ChannelId(u64::MAX), late, u64::MAX);
        assert!(a.len() <= 25, "{a} is {} characters", a.len());
        assert_ne!(nonce_for(ChannelId(1), t, 1), nonce_for(ChannelId(2), t, 1));
        assert_ne!(nonce_for(ChannelId(1), t, 1), nonce_for(ChannelId(1), t, 2));
        let later = t + chrono::TimeDelta::milliseconds(1);
        assert_ne!(nonce_for(ChannelId(1), t, 2), nonce_for(ChannelId(1), later, 2), "a sequence gone back");
        assert_eq!(nonce_for(ChannelId(7), t, 3), nonce_for(ChannelId(7), t, 3));
    }

    #[test]
    fn the_instant_an_announcement_was_decided_is_read_back_from_its_nonce() {
        let t: DateTime<Utc> = "2026-03-01T10:00:00.123Z".parse().unwrap();
        assert_eq!(decided_at(&nonce_for(ChannelId(7), t, 3)), Some(t));
        assert_eq!(decided_at(&nonce_for(ChannelId(u64::MAX), t, u64::MAX)), Some(t));
        assert_eq!(decided_at("n1"), None, "a notice's nonce, or an older form");
        assert_eq!(decided_at("t1234"), None);
    }

    #[test]
    fn an_announcement_is_recognised_as_posted_behind_mentions_cut_or_trimmed_and_nothing_else() {
        let text = "🎙️ <@102> (dev) has the floor: 60s.";
        assert!(shows_announcement(text, text));
        assert!(shows_announcement(&format!("<@&55> <@&66> {text}"), text), "an escalation's roles first");
        assert!(shows_announcement(&format!("{text}\n"), &format!(" {text}")), "whitespace Discord drops");
        let long = format!("{text} {}", "and more ".repeat(300));
        let cut = fit_message(format!("<@&55> {long}"));
        assert!(shows_announcement(&cut, &long), "cut to the limit, behind the roles");
        assert!(!shows_announcement("🎙️ <@102> (dev) has…", text), "a short message ending in … is not a cut one");
        let templated = "<@&77> the managers are called: dev is stuck.";
        assert!(shows_announcement(templated, templated), "a text that begins with a role's mention itself");
        assert!(shows_announcement(&format!("<@&55> {templated}"), templated), "behind the control roles");
        assert!(!shows_announcement("🎙️ <@101> (pm) has the floor: 60s.", text));
        assert!(!shows_announcement(&format!("{text} Also this."), text));
        assert!(!shows_announcement("…", text));
        assert!(!shows_announcement(&format!("<@&x> {text}"), text), "not a role mention");
        let answer = "⚠️ `NOTE: x` is not a signal here (1 of 3).";
        assert!(shows_announcement(&format!("<@101> {answer}"), answer), "an answer that could not be a reply");
        assert!(!shows_announcement(&format!("<@x> {answer}"), answer), "not a user mention");
    }

    #[test]
    fn an_effect_round_trips_through_json_as_the_outbox_saves_it() {
        let queued = Queued {
            id: 4,
            effect: Effect::Announce(Announcement {
                text: "hi".into(),
                mention: Some(UserId(5)),
                nonce: "n".into(),
                reply_to: None,
                ping_managers: false,
            }),
        };
        let json = serde_json::to_string(&queued).unwrap();
        assert_eq!(serde_json::from_str::<Queued>(&json).unwrap(), queued);
        let react = Effect::React { message_id: MessageId(9), emoji: COMPLETED_REACTION.into() };
        assert_eq!(serde_json::from_value::<Effect>(serde_json::to_value(&react).unwrap()).unwrap(), react);
    }
}

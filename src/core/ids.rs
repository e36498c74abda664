//! Plain identifier newtypes: Discord snowflakes as the core sees them, and persona ids.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

macro_rules! snowflake {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }

        // Written as strings, as Discord does: snowflakes exceed JavaScript's safe integers. Formatted on the stack
        // and written in one piece: a busy session saves some 280 of them per save.
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(itoa::Buffer::new().format(self.0))
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_str(SnowflakeVisitor).map($name)
            }
        }
    };
}

snowflake!(
    /// A Discord channel (or thread) id.
    ChannelId
);
snowflake!(
    /// A Discord server (guild) id: it decides the gateway shard of the server's events.
    GuildId
);
snowflake!(
    /// A Discord user id: a person or a bot account.
    UserId
);
snowflake!(
    /// A Discord message id. Ids grow with creation time, so they order messages.
    MessageId
);

/// Reads a snowflake's string without copying it first.
struct SnowflakeVisitor;

impl serde::de::Visitor<'_> for SnowflakeVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Discord id, as a string of digits")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<u64, E> {
        parse_snowflake(text).map_err(E::custom)
    }
}

/// Discord's epoch (2015-01-01T00:00:00Z) in Unix milliseconds: a snowflake's top bits count from it.
const DISCORD_EPOCH_MS: i64 = 1_420_070_400_000;

impl MessageId {
    /// The smallest id a message created at `at` or later can have: "after this" means "created from then on".
    pub fn first_at(at: chrono::DateTime<chrono::Utc>) -> Self {
        let since_epoch = (at.timestamp_millis() - DISCORD_EPOCH_MS).max(0) as u64;
        MessageId(since_epoch << 22)
    }

    /// When the message was created, to the millisecond: a snowflake's top 42 bits (the inverse of [`first_at`]).
    /// This is Discord's clock, so messages are judged by when their authors wrote them, not when they arrived.
    ///
    /// [`first_at`]: MessageId::first_at
    pub fn created_at(self) -> chrono::DateTime<chrono::Utc> {
        let ms = (self.0 >> 22) as i64 + DISCORD_EPOCH_MS;
        chrono::DateTime::from_timestamp_millis(ms).expect("42 bits of milliseconds after 2015 fit chrono's range")
    }
}

/// Parses a snowflake written as a decimal string; explains what is wrong otherwise.
pub fn parse_snowflake(text: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Err("is empty; expected a Discord id such as \"1234567890123456789\"".into());
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{} is not a Discord id: only the digits 0-9 are allowed", quoted(text)));
    }
    match text.parse::<u64>() {
        Ok(0) => Err("0 is not a valid Discord id".into()),
        Ok(value) => Ok(value),
        Err(_) => Err(format!("{} is too large for a Discord id (at most 20 digits, below 2^64)", quoted(text))),
    }
}

/// A persona's id: lowercase letters, digits, `-` and `_`, 1 to 32 characters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PersonaId(String);

impl PersonaId {
    pub const MAX_LEN: usize = 32;

    /// Checks the id's form; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("is empty; use 1-32 lowercase letters, digits, '-' or '_'".into());
        }
        if text.chars().count() > Self::MAX_LEN {
            return Err(format!(
                "\"{text}\" is {} characters long; at most {} are allowed",
                text.chars().count(),
                Self::MAX_LEN
            ));
        }
        if let Some(bad) =
            text.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
        {
            return Err(format!(
                "\"{text}\" contains '{bad}'; only lowercase letters, digits, '-' and '_' are allowed"
            ));
        }
        Ok(Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PersonaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snowflakes_round_trip_as_strings() {
        let id = UserId(1234567890123456789);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"1234567890123456789\"");
        assert_eq!(serde_json::from_str::<UserId>(&json).unwrap(), id);
    }

    #[test]
    fn an_id_written_as_a_number_or_with_letters_is_refused_saying_what_an_id_looks_like() {
        let number = serde_json::from_str::<ChannelId>("1234").unwrap_err().to_string();
        assert!(number.contains("invalid type: integer `1234`, expected a Discord id"), "{number}");
        let letters = serde_json::from_str::<MessageId>("\"12a\"").unwrap_err().to_string();
        assert!(letters.contains("only the digits 0-9"), "{letters}");
        // An escaped string is read too (serde_json hands the visitor an unescaped copy).
        assert_eq!(serde_json::from_str::<UserId>("\"\\u0031\"").unwrap(), UserId(1));
    }

    #[test]
    fn snowflake_rejects_letters_zero_empty_and_overflow() {
        assert!(parse_snowflake("12a").unwrap_err().contains("only the digits"));
        assert!(parse_snowflake("0").is_err());
        assert!(parse_snowflake("").is_err());
        assert!(parse_snowflake("99999999999999999999").unwrap_err().contains("too large"));
        assert_eq!(parse_snowflake("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn persona_id_accepts_the_allowed_alphabet() {
        assert!(PersonaId::parse("dev-2_b").is_ok());
        assert!(PersonaId::parse(&"a".repeat(32)).is_ok());
    }

    #[test]
    fn persona_id_rejects_uppercase_spaces_empty_and_long() {
        assert!(PersonaId::parse("PM").unwrap_err().contains("'P'"));
        assert!(PersonaId::parse("a b").is_err());
        assert!(PersonaId::parse("").is_err());
        assert!(PersonaId::parse(&"a".repeat(33)).unwrap_err().contains("33 characters"));
    }
}

#[cfg(test)]
mod snowflake_time_tests {
    use super::*;

    #[test]
    fn an_id_made_from_a_time_orders_with_real_ids_of_that_time() {
        // 175928847299117063 is Discord's documented example: 2016-04-30T11:18:25.796Z.
        let at = chrono::DateTime::parse_from_rfc3339("2016-04-30T11:18:25.796Z").unwrap().to_utc();
        let first = MessageId::first_at(at);
        assert!(first <= MessageId(175928847299117063));
        assert!(MessageId::first_at(at + chrono::TimeDelta::milliseconds(1)) > MessageId(175928847299117063));
    }

    #[test]
    fn created_at_reads_the_time_back_from_any_id_of_that_millisecond() {
        let at = chrono::DateTime::parse_from_rfc3339("2016-04-30T11:18:25.796Z").unwrap().to_utc();
        assert_eq!(MessageId(175928847299117063).created_at(), at);
        assert_eq!(MessageId::first_at(at).created_at(), at);
        assert_eq!(MessageId(u64::MAX).created_at().timestamp_millis(), (u64::MAX >> 22) as i64 + DISCORD_EPOCH_MS);
    }
}

/// A value a person wrote, quoted for an error message: one that looks like a bot token (pasted into the wrong
/// field) is not repeated, since errors reach logs; a very long one is cut.
pub fn quoted(value: &str) -> String {
    let parts: Vec<&str> = value.split('.').collect();
    let token_like = parts.len() == 3
        && value.len() >= 50
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    if token_like {
        return "a value that looks like a bot token (not repeated here)".to_owned();
    }
    match value.char_indices().nth(60) {
        Some((cut, _)) => format!("\"{}…\"", &value[..cut]),
        None => format!("\"{value}\""),
    }
}

#[cfg(test)]
mod quoting {
    use super::{parse_snowflake, quoted};

    #[test]
    fn a_token_pasted_as_an_id_is_not_repeated_in_the_error() {
        let token = "MTMxMjAwMDAwMDAwMDAwMDAwOQ.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789AB";
        let error = parse_snowflake(token).unwrap_err();
        assert!(!error.contains("GaBcDe") && error.contains("looks like a bot token"), "{error}");
        assert_eq!(
            parse_snowflake("12ab").unwrap_err(),
            "\"12ab\" is not a Discord id: only the digits 0-9 are allowed"
        );
        assert_eq!(quoted(&"x".repeat(100)), format!("\"{}…\"", "x".repeat(60)));
        assert_eq!(quoted("relay"), "\"relay\"");
    }
}

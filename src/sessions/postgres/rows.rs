//! A session or a history event as a row of the Postgres store, and back: the same JSON as the state files (the
//! engine's serde), ids as `BIGINT`.
//!
//! The JSON goes both ways as text, never as a `serde_json::Value` tree: a session is serialized into one string
//! and read back with serde straight from the column's text. A tree costs small allocations for every field; ten
//! thousand of them alive at once at start-up left the heap mostly free holes between the sessions decoded out of
//! them, which `malloc_trim` cannot give back (measured: 547 MB kept by malloc for 98 MB in use).

use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use crate::sessions::SessionStoreError;
use crate::store::validate::check_session;
use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::types::Json;

/// For an `INSERT INTO sessions`: the row is replaced unless it holds a later write: one of the same lease (a lazy
/// save arriving after a durable one, or the other way round), or one of a later lease. The second matters under READ
/// COMMITTED: a lazy batch checks the lease in its statement's snapshot, then updates the row's newest version, which
/// a process that took the channel over meanwhile may have written. Every session write says it this way.
macro_rules! replace_unless_later {
    () => {
        "ON CONFLICT (channel_id) DO UPDATE SET
            guild_id = EXCLUDED.guild_id, session = EXCLUDED.session, resumable = EXCLUDED.resumable,
            lease_epoch = EXCLUDED.lease_epoch, write_seq = EXCLUDED.write_seq, updated_at = EXCLUDED.updated_at
        WHERE (sessions.lease_epoch, sessions.write_seq) <= (EXCLUDED.lease_epoch, EXCLUDED.write_seq)"
    };
}
pub(super) use replace_unless_later;

/// Writes a session unless the row holds a later write of the same lease (a lazy save arriving late).
pub(super) const UPSERT_SESSION: &str = concat!(
    "INSERT INTO sessions (channel_id, guild_id, session, resumable, lease_epoch, write_seq, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, now()) ",
    replace_unless_later!()
);

/// Appends events after the channel's last one, numbered on from it; answers the history's length before them. Only
/// the lease holder appends, inside its fenced transaction, so two appends of one channel never run at once.
pub(super) const APPEND_EVENTS: &str = "
    WITH appended AS (
        INSERT INTO history (channel_id, n, at, event)
        SELECT $1, COALESCE((SELECT max(n) FROM history WHERE channel_id = $1), 0) + e.ord, e.at, e.event
        FROM unnest($2::timestamptz[], $3::jsonb[]) WITH ORDINALITY AS e(at, event, ord)
        RETURNING n)
    SELECT COALESCE(min(n) - 1, 0) FROM appended";

/// A Discord id as a `BIGINT`. Snowflakes stay below 2^63 until the 2080s; a larger one is refused rather than
/// stored as a negative number that the shard arithmetic would get wrong.
pub(super) fn db_id(id: u64) -> Result<i64, SessionStoreError> {
    i64::try_from(id).map_err(|_| SessionStoreError::Unreadable {
        channel: ChannelId(id),
        reason: format!("the id {id} does not fit the database's BIGINT"),
    })
}

/// JSON serialized once, bound as `jsonb`.
pub(super) type JsonText = Json<Box<RawValue>>;

/// A session as the `sessions` table holds it.
pub(super) struct SessionRow {
    pub channel_id: i64,
    pub guild_id: Option<i64>,
    /// The session's JSON, serialized once: bound as `jsonb`.
    pub json: JsonText,
    /// Running, paused, or with effects left to carry out: another process resumes it if this one dies.
    pub resumable: bool,
    pub epoch: i64,
    pub write: i64,
}

pub(super) fn session_row(session: &Session, epoch: i64, write: i64) -> Result<SessionRow, SessionStoreError> {
    let channel = session.channel_id;
    let json =
        serde_json::value::to_raw_value(session).map_err(|source| SessionStoreError::Encode { channel, source })?;
    Ok(SessionRow {
        channel_id: db_id(channel.0)?,
        guild_id: session.guild_id.map(|g| db_id(g.0)).transpose()?,
        json: Json(without_nul(json)),
        resumable: session.needs_resuming(),
        epoch,
        write,
    })
}

impl SessionRow {
    pub fn upsert(&self) -> Query<'_, Postgres, PgArguments> {
        sqlx::query(UPSERT_SESSION)
            .bind(self.channel_id)
            .bind(self.guild_id)
            .bind(&self.json)
            .bind(self.resumable)
            .bind(self.epoch)
            .bind(self.write)
    }
}

/// Events as the two arrays [`APPEND_EVENTS`] takes: when each happened, and the event.
pub(super) fn event_rows(
    channel: ChannelId,
    events: &[HistoryEvent],
) -> Result<(Vec<DateTime<Utc>>, Vec<JsonText>), SessionStoreError> {
    let json = events
        .iter()
        .map(|event| serde_json::value::to_raw_value(event).map(|json| Json(without_nul(json))))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| SessionStoreError::Encode { channel, source })?;
    Ok((events.iter().map(|e| e.at).collect(), json))
}

/// The JSON with each U+0000 in its strings (an agent's text may hold one) written as U+FFFD: `jsonb` refuses
/// `\u0000`, and a session holding it could never be saved (every retry refused, the channel standing still).
fn without_nul(json: Box<RawValue>) -> Box<RawValue> {
    let text = json.get();
    if !text.contains("\\u0000") {
        return json;
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // serde_json escapes every backslash of a string, so escapes are read pair by pair: `\\u0000` is text.
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let escape = &rest[at..];
        let (replaced, len) = if escape.starts_with("\\u0000") { ("\\ufffd", 6) } else { (&escape[..2], 2) };
        out.push_str(replaced);
        rest = &escape[len..];
    }
    out.push_str(rest);
    RawValue::from_string(out).unwrap_or(json)
}

/// Reads a saved session from its JSON text (`session::text`), refusing one this build cannot use, as a session
/// file is refused ([`check_session`]: another channel's, a newer format, one the engine could not have written).
pub(super) fn decode_session(channel: ChannelId, json: &str) -> Result<Session, SessionStoreError> {
    let unreadable = |reason: String| SessionStoreError::Unreadable { channel, reason };
    let session: Session = serde_json::from_str(json).map_err(|e| unreadable(format!("invalid session JSON: {e}")))?;
    check_session(&session, channel).map_err(unreadable)?;
    Ok(session)
}

/// An event of the history from its JSON text (`event::text`), `None` when this build cannot read it (it is
/// skipped, as a bad log line is).
pub(super) fn decode_event(json: &str) -> Option<HistoryEvent> {
    serde_json::from_str(json).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::session::SessionStatus;

    #[test]
    fn a_nul_in_a_sessions_text_is_written_as_a_replacement_character_and_typed_escapes_stay_as_typed() {
        let mut session = Session::new(ChannelId(7));
        session.pause_reason = Some("a\0b, and \\u0000 as typed, and \\\0".into());
        let row = session_row(&session, 1, 1).unwrap();
        let text = row.json.0.get();
        assert!(!text.contains("\\u0000\"") && text.matches("\\ufffd").count() == 2, "{text}");
        let back: Session = serde_json::from_str(text).unwrap();
        assert_eq!(back.pause_reason.as_deref(), Some("a\u{fffd}b, and \\u0000 as typed, and \\\u{fffd}"));
        let plain = Session::new(ChannelId(7));
        assert_eq!(session_row(&plain, 1, 1).unwrap().json.0.get(), serde_json::to_string(&plain).unwrap());
    }

    #[test]
    fn a_row_is_refused_as_a_session_file_would_be() {
        let channel = ChannelId(7);
        let stopped = Session::new(channel);
        let json = |session: &Session| serde_json::to_string(session).unwrap();
        assert!(decode_session(channel, &json(&stopped)).is_ok());
        let refused = |session: &Session| match decode_session(channel, &json(session)) {
            Err(SessionStoreError::Unreadable { reason, .. }) => reason,
            other => panic!("refused, not {other:?}"),
        };
        assert_eq!(refused(&Session::new(ChannelId(8))), "it holds channel 8 instead");
        let running_without_deadline = Session { status: SessionStatus::Running, ..Session::new(channel) };
        assert_eq!(refused(&running_without_deadline), "it is running but has no turnTimeoutAt");
    }
}

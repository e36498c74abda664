//! What the journal and the checkpoints hold: a journal record (one channel's save: its number, the session, the
//! events it adds to the log and where they go in it) and a session file stamped with the number of the save it
//! holds (`savedSeq`), so recovery can tell which of the two is newer.
//!
//! A record is built by hand from the session's and the events' JSON, each encoded once: the same bytes go into
//! the journal, the session file and the log.

use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use serde::Deserialize;

/// One channel's save, as recovery reads it back from the journal.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Record {
    /// Numbers every save of the state folder; grows across restarts.
    pub seq: u64,
    pub channel: ChannelId,
    /// Where `events` go in the channel's history log: its length, in bytes, before them.
    pub log_at: u64,
    /// The events this save appends to the log (with any a failed append held back), oldest first.
    pub events: Vec<HistoryEvent>,
    pub session: Session,
}

/// The JSON of a record. `log_lines` are the events as the log holds them, one JSON object a line; `session` is the
/// session's compact JSON.
pub(super) fn encode_record(seq: u64, channel: ChannelId, log_at: u64, log_lines: &[u8], session: &[u8]) -> Vec<u8> {
    let mut json = Vec::with_capacity(session.len() + log_lines.len() + RECORD_OVERHEAD);
    write_record(&mut json, seq, channel, log_at, log_lines, session);
    json
}

/// About what a record adds to its session's and events' JSON (its other fields), with its journal line's checksum.
pub(super) const RECORD_OVERHEAD: usize = 96;

/// Appends the JSON of a record (see [`encode_record`]) to `json`.
pub(super) fn write_record(
    json: &mut Vec<u8>,
    seq: u64,
    channel: ChannelId,
    log_at: u64,
    log_lines: &[u8],
    session: &[u8],
) {
    json.extend_from_slice(b"{\"seq\":");
    json.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
    json.extend_from_slice(b",\"channel\":\"");
    json.extend_from_slice(itoa::Buffer::new().format(channel.0).as_bytes());
    json.extend_from_slice(b"\",\"logAt\":");
    json.extend_from_slice(itoa::Buffer::new().format(log_at).as_bytes());
    json.extend_from_slice(b",\"events\":[");
    // A JSON line never holds a raw newline (strings escape it), so the lines are the array's items.
    let mut items = log_lines.split(|&b| b == b'\n').filter(|line| !line.is_empty()).peekable();
    while let Some(item) = items.next() {
        json.extend_from_slice(item);
        if items.peek().is_some() {
            json.push(b',');
        }
    }
    json.extend_from_slice(b"],\"session\":");
    json.extend_from_slice(session);
    json.push(b'}');
}

pub(super) fn decode_record(json: &[u8]) -> Result<Record, String> {
    serde_json::from_slice(json).map_err(|e| format!("not a journal record: {e}"))
}

/// The bytes of a session file: the session's JSON with the number of its save first, and a final newline.
pub(super) fn checkpoint_bytes(seq: u64, session: &[u8]) -> Vec<u8> {
    let fields = session.strip_prefix(b"{").unwrap_or(session);
    let mut bytes = Vec::with_capacity(session.len() + 32);
    bytes.extend_from_slice(format!("{{\"savedSeq\":{seq}").as_bytes());
    if fields != b"}" {
        bytes.push(b',');
    }
    bytes.extend_from_slice(fields);
    bytes.push(b'\n');
    bytes
}

/// The number of the save a session file holds; 0 for a file written before the journal (or by hand without it).
pub(super) fn saved_seq(bytes: &[u8]) -> Result<u64, serde_json::Error> {
    #[derive(Deserialize)]
    struct Stamp {
        #[serde(rename = "savedSeq", default)]
        saved_seq: u64,
    }
    serde_json::from_slice::<Stamp>(bytes).map(|stamp| stamp.saved_seq)
}

/// How many of a session file's first bytes hold its save number, pretty-printed or not.
pub(super) const SEQ_HEAD_BYTES: usize = 64;

/// The number of the save a session file holds, from its first [`SEQ_HEAD_BYTES`] bytes (where [`checkpoint_bytes`]
/// puts it; the rest, if given, is not looked at); 0 when they do not start with it.
pub(super) fn saved_seq_in_head(head: &[u8]) -> u64 {
    let compact: Vec<u8> = head.iter().take(SEQ_HEAD_BYTES).copied().filter(|b| !b.is_ascii_whitespace()).collect();
    let Some(rest) = compact.strip_prefix(b"{\"savedSeq\":") else { return 0 };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok().and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// The events as log lines, one JSON object each.
pub(super) fn encode_events(channel: ChannelId, events: &[HistoryEvent]) -> Result<Vec<u8>, super::StoreError> {
    let mut lines = Vec::new();
    for event in events {
        serde_json::to_writer(&mut lines, event).map_err(|source| super::StoreError::Encode { channel, source })?;
        lines.push(b'\n');
    }
    Ok(lines)
}

/// A session's compact JSON (no newline).
pub(super) fn encode_session(session: &Session) -> Result<Vec<u8>, super::StoreError> {
    serde_json::to_vec(session).map_err(|source| super::StoreError::Encode { channel: session.channel_id, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: i64) -> HistoryEvent {
        HistoryEvent {
            at: chrono::DateTime::from_timestamp(1_700_000_000 + n, 0).unwrap(),
            round: 1,
            agent_id: None,
            kind: crate::core::session::history::EventKind::SessionStopped {},
        }
    }

    #[test]
    fn a_record_reads_back_as_it_was_written_with_any_number_of_events() {
        let session = Session::new(ChannelId(7));
        let json = encode_session(&session).unwrap();
        for n in [0, 1, 3] {
            let events: Vec<HistoryEvent> = (0..n).map(event).collect();
            let lines = encode_events(ChannelId(7), &events).unwrap();
            let record = decode_record(&encode_record(12, ChannelId(7), 345, &lines, &json)).unwrap();
            assert_eq!((record.seq, record.channel, record.log_at), (12, ChannelId(7), 345));
            assert_eq!(record.events, events, "{n} events");
            assert_eq!(record.session, session);
        }
    }

    #[test]
    fn a_session_file_carries_its_save_number_and_reads_as_the_session() {
        let session = Session::new(ChannelId(7));
        let bytes = checkpoint_bytes(99, &encode_session(&session).unwrap());
        assert!(bytes.starts_with(b"{\"savedSeq\":99,\"version\":"), "{}", String::from_utf8_lossy(&bytes));
        assert!(bytes.ends_with(b"}\n"));
        assert_eq!(serde_json::from_slice::<Session>(&bytes).unwrap(), session);
        assert_eq!(saved_seq(&bytes).unwrap(), 99);
        assert_eq!(saved_seq(&encode_session(&session).unwrap()).unwrap(), 0, "a file from before the journal");
        assert_eq!(checkpoint_bytes(3, b"{}"), b"{\"savedSeq\":3}\n");
        assert_eq!(saved_seq_in_head(&bytes[..20]), 99, "read from the file's first bytes");
        assert_eq!(saved_seq_in_head(b"{\n  \"savedSeq\": 12,\n  \"vers"), 12, "pretty-printed by a person");
        assert_eq!(saved_seq_in_head(b"{\"version\":1,\"savedSeq\":5"), 0, "not first: not found");
    }
}

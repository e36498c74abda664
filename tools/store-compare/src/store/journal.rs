//! The design chosen in issue 16: one write-ahead journal for the process, each save one line
//! `<crc32 as 8 hex digits> <json>\n` with the json `{"channel":"<id>","session":{..},"events":[..]}`, a batch in one
//! `write` and one `fdatasync`. The per-channel files (`channels/<id>.json`, `<id>.history.jsonl`) are checkpoints
//! written off the hot path (see `checkpoint`). Start-up reads the checkpoint files, then replays the journal over
//! them, a torn or corrupt line ending the replay of its file.

use super::{Result, Store, parse_session};
use crate::checkpoint;
use crate::disk::{self, AppendFile};
use crate::workload::Save;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

const PREFIX: &str = "journal";

pub struct Journal {
    file: AppendFile,
}

impl Journal {
    pub fn open(dir: &Path, rotate_bytes: u64) -> Result<Journal> {
        Ok(Journal { file: AppendFile::open(dir, PREFIX, rotate_bytes)? })
    }
}

impl Store for Journal {
    fn commit(&mut self, batch: &[Save]) -> Result<()> {
        let mut bytes = Vec::with_capacity(batch.iter().map(|s| s.bytes() + 64).sum());
        let mut json = Vec::new();
        for save in batch {
            json.clear();
            encode(save, &mut json);
            let crc = crc32fast::hash(&json);
            bytes.extend_from_slice(format!("{crc:08x} ").as_bytes());
            bytes.extend_from_slice(&json);
            bytes.push(b'\n');
        }
        Ok(self.file.append_durably(&bytes)?)
    }
}

/// The record's JSON, the session and events copied in as they are (already compact JSON).
fn encode(save: &Save, out: &mut Vec<u8>) {
    out.extend_from_slice(format!("{{\"channel\":\"{}\",\"session\":", save.channel).as_bytes());
    out.extend_from_slice(save.session.as_bytes());
    out.extend_from_slice(b",\"events\":[");
    for (i, (_, event)) in save.events.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(event.as_bytes());
    }
    out.extend_from_slice(b"]}");
}

/// What a start-up found and how long each part took.
#[derive(Clone, Copy, Debug)]
pub struct Replay {
    pub sessions: usize,
    /// Reading and parsing every checkpoint file.
    pub checkpoint: Duration,
    pub journal_bytes: u64,
    /// Reading, checking and parsing the journal.
    pub journal: Duration,
}

/// Reads every checkpoint file, then replays the journal's generations in order.
pub fn recover(dir: &Path) -> Result<Replay> {
    let start = Instant::now();
    let mut sessions: HashMap<String, serde_json::Value> = HashMap::new();
    for (channel, json) in checkpoint::read_sessions(dir)? {
        sessions.insert(channel, parse_session(&json)?);
    }
    let checkpoint = start.elapsed();
    let mut journal_bytes = 0;
    for (_, path) in disk::generations(dir, PREFIX)? {
        let text = std::fs::read(&path)?;
        journal_bytes += text.len() as u64;
        for line in text.split_inclusive(|&b| b == b'\n') {
            let Some((channel, session)) = decode(line) else { break };
            sessions.insert(channel, session);
        }
    }
    Ok(Replay { sessions: sessions.len(), checkpoint, journal_bytes, journal: start.elapsed() - checkpoint })
}

/// One journal line's channel and session; `None` for a torn line (no newline) or a checksum that does not match.
fn decode(line: &[u8]) -> Option<(String, serde_json::Value)> {
    let line = line.strip_suffix(b"\n")?;
    let (crc, json) = (line.get(..8)?, line.get(9..)?);
    let crc = u32::from_str_radix(std::str::from_utf8(crc).ok()?, 16).ok()?;
    if crc32fast::hash(json) != crc {
        return None;
    }
    let mut record: serde_json::Value = serde_json::from_slice(json).ok()?;
    let channel = record.get("channel")?.as_str()?.to_owned();
    Some((channel, record.get_mut("session")?.take()))
}

#[cfg(test)]
mod tests {
    use super::{Journal, decode, recover};
    use crate::store::Store;
    use crate::workload::Workload;

    #[test]
    fn lines_replay_and_a_torn_or_corrupt_line_is_refused() {
        let dir = std::env::temp_dir().join(format!("store-compare-journal-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut work = Workload::new(5);
        let mut journal = Journal::open(&dir, 1 << 20).unwrap();
        journal.commit(&work.batch(3)).unwrap();
        journal.commit(&work.batch(3)).unwrap();
        assert_eq!(recover(&dir).unwrap().sessions, 5);

        let text = std::fs::read(crate::disk::generations(&dir, "journal").unwrap()[0].1.clone()).unwrap();
        let first = text.split_inclusive(|&b| b == b'\n').next().unwrap().to_vec();
        assert!(decode(&first).is_some());
        assert!(decode(&first[..first.len() - 1]).is_none(), "torn");
        let mut corrupt = first.clone();
        corrupt[20] ^= 1;
        assert!(decode(&corrupt).is_none(), "corrupt");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! The write-ahead journal's file, `journal-<first seq>.jsonl` in the state folder: one record a line, each line
//! `<crc32 of the JSON, 8 hex digits> <JSON>\n`, appended a batch at a time and made durable with ONE fdatasync; and
//! reading it back, a line counting only if it is whole, newline-terminated and its checksum matches.
//!
//! Damaged lines at the end of a file are its torn tail (a crash mid-append: never acknowledged, dropped); a damaged
//! line with good ones after it cannot come from a crash, so it is reported with its line number and the records
//! after it are still used.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const PREFIX: &str = "journal-";
const SUFFIX: &str = ".jsonl";
/// `<8 hex digits><space>`.
const CHECKSUM_BYTES: usize = 9;

/// The journal file whose first record is save `first_seq`.
pub(super) fn journal_path(state_dir: &Path, first_seq: u64) -> PathBuf {
    state_dir.join(format!("{PREFIX}{first_seq}{SUFFIX}"))
}

/// The journal files in the state folder, oldest first, each with the number it starts at.
pub(super) fn list_journals(state_dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut journals = Vec::new();
    for entry in std::fs::read_dir(state_dir)?.filter_map(Result::ok) {
        let name = entry.file_name();
        let first = name.to_str().and_then(|n| n.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?.parse::<u64>().ok());
        if let Some(first) = first {
            journals.push((first, entry.path()));
        }
    }
    journals.sort_unstable();
    Ok(journals)
}

/// What the store's tests watch of its writes: fdatasyncs, checkpoints written, and failures to inject.
#[derive(Debug, Default)]
pub(super) struct Probe {
    pub syncs: AtomicU64,
    /// Checkpoints written (a session file swapped in, its events appended).
    pub checkpoints: AtomicU64,
    /// History logs read before this process first appends to them (ahead, or at a channel's first save).
    pub log_looks: AtomicU64,
    /// The next this many appends fail (tests only).
    #[cfg(test)]
    pub failing_appends: std::sync::atomic::AtomicU32,
    /// The next append panics, as a bug in the writer would (tests only).
    #[cfg(test)]
    pub panicking_append: std::sync::atomic::AtomicBool,
    /// The next this many opens of a history log for its first look fail, as a log left unreadable would (tests
    /// only).
    #[cfg(test)]
    pub failing_log_opens: std::sync::atomic::AtomicU32,
    /// The files recovery synced before deleting the journals it replayed (tests only).
    #[cfg(test)]
    pub recovery_synced: std::sync::Mutex<Vec<std::path::PathBuf>>,
    /// The folders whose entries `Store::open` made durable, having created them (tests only).
    #[cfg(test)]
    pub folders_synced_at_open: std::sync::Mutex<Vec<std::path::PathBuf>>,
}

/// The journal being appended to.
#[derive(Debug)]
pub(super) struct JournalFile {
    file: File,
    path: PathBuf,
    len: u64,
    began: Instant,
    /// An append failed and cutting it back failed too: the file may end with part of a batch, to cut before the
    /// next append.
    unsure_tail: bool,
}

impl JournalFile {
    /// Creates an empty journal (replacing an empty or replayed one of the same name) and makes it and its folder
    /// entry durable, so that what is appended to it and synced survives a crash.
    pub(super) fn create(state_dir: &Path, first_seq: u64) -> io::Result<Self> {
        let path = journal_path(state_dir, first_seq);
        let file = OpenOptions::new().create(true).write(true).truncate(true).open(&path)?;
        file.sync_all()?;
        super::atomic::sync_folder(state_dir)?;
        Ok(JournalFile { file, path, len: 0, began: Instant::now(), unsure_tail: false })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    pub(super) fn began(&self) -> Instant {
        self.began
    }

    /// Appends a batch of lines in one write and makes them durable with one fdatasync. On failure the file is cut
    /// back to where the batch began, so that nothing of a batch that failed is replayed after a crash.
    pub(super) fn append(&mut self, lines: &[u8], probe: &Probe) -> io::Result<()> {
        if self.unsure_tail {
            self.cut_back()?;
        }
        let written = self.write_and_sync(lines, probe);
        match written {
            Ok(()) => {
                self.len += lines.len() as u64;
                Ok(())
            }
            Err(e) => {
                if self.cut_back().is_err() {
                    self.unsure_tail = true;
                }
                Err(e)
            }
        }
    }

    fn write_and_sync(&mut self, lines: &[u8], probe: &Probe) -> io::Result<()> {
        #[cfg(test)]
        if probe.panicking_append.swap(false, Ordering::SeqCst) {
            panic!("a panic in the store's writer, injected by a test");
        }
        #[cfg(test)]
        if probe.failing_appends.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            // Half the batch reaches the file before the failure, as a full disk would do it.
            self.file.write_all(&lines[..lines.len() / 2])?;
            return Err(io::Error::other("an append failure injected by a test"));
        }
        self.file.write_all(lines)?;
        self.file.sync_data()?;
        // Counted once done: a sync that failed made nothing durable.
        probe.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn cut_back(&mut self) -> io::Result<()> {
        self.file.set_len(self.len)?;
        // The next batch goes where this one began, not where its failed write stopped (which would leave a hole).
        self.file.seek(SeekFrom::Start(self.len))?;
        self.file.sync_data()?;
        self.unsure_tail = false;
        Ok(())
    }
}

/// Appends the journal line of `json` to `out`: its checksum, a space, the JSON and a newline.
pub(super) fn push_line(out: &mut Vec<u8>, json: &[u8]) {
    out.reserve(json.len() + CHECKSUM_BYTES + 1);
    push_line_with(out, |out| out.extend_from_slice(json));
}

/// Appends a journal line whose JSON `write_json` appends to `out`, with no copy of its own: the checksum goes in
/// front once the JSON is written.
pub(super) fn push_line_with(out: &mut Vec<u8>, write_json: impl FnOnce(&mut Vec<u8>)) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let start = out.len();
    out.extend_from_slice(&[b' '; CHECKSUM_BYTES]);
    write_json(out);
    let checksum = crc32fast::hash(&out[start + CHECKSUM_BYTES..]);
    for (i, digit) in out[start..start + 8].iter_mut().enumerate() {
        *digit = HEX[(checksum >> (28 - 4 * i) & 0xf) as usize];
    }
    out.push(b'\n');
}

/// The journal line of `json`, on its own.
#[cfg(test)]
pub(super) fn line(json: &[u8]) -> Vec<u8> {
    let mut line = Vec::new();
    push_line(&mut line, json);
    line
}

/// The JSON of a whole line, if its checksum matches.
fn checked(line: &[u8]) -> Result<&[u8], String> {
    let (checksum, json) = match line.split_at_checked(CHECKSUM_BYTES) {
        Some((head, json)) if head[8] == b' ' => (&head[..8], json),
        _ => return Err("no checksum in front of it".into()),
    };
    let expected = std::str::from_utf8(checksum).ok().and_then(|hex| u32::from_str_radix(hex, 16).ok());
    match expected {
        Some(expected) if expected == crc32fast::hash(json) => Ok(json),
        Some(_) => Err("its checksum does not match (a garbled line)".into()),
        None => Err("no checksum in front of it".into()),
    }
}

/// A journal file read back.
#[derive(Debug)]
pub(super) struct Replay<T> {
    /// The records, in order, each with its line number (from 1).
    pub records: Vec<(usize, T)>,
    /// Damaged lines followed by good ones, and whole lines (their checksum matching) that do not decode, wherever
    /// they are: line number and why.
    pub damaged: Vec<(usize, String)>,
    /// The torn tail: the first line of it and its size in bytes (a line with no newline, or garbled lines with no
    /// good one after them). A whole line that does not decode is no tear, even last: a crash cannot write one (a
    /// record of a newer build can), so it is damage, reported, never dropped as never acknowledged.
    pub torn: Option<(usize, usize)>,
}

/// Reads a journal file's bytes: every line checked and then decoded by `decode`.
pub(super) fn read<T>(bytes: &[u8], decode: impl Fn(&[u8]) -> Result<T, String>) -> Replay<T> {
    let mut records = Vec::new();
    let mut bad: Vec<(usize, usize, String, bool)> = Vec::new(); // line number, offset, why, whole
    let mut offset = 0;
    let mut number = 0;
    while offset < bytes.len() {
        number += 1;
        let Some(end) = bytes[offset..].iter().position(|&b| b == b'\n') else {
            bad.push((number, offset, "it has no newline".into(), false));
            break;
        };
        match checked(&bytes[offset..offset + end]).map(&decode) {
            Ok(Ok(record)) => records.push((number, record)),
            Ok(Err(why)) => bad.push((number, offset, why, true)),
            Err(why) => bad.push((number, offset, why, false)),
        }
        offset += end + 1;
    }
    // Damaged lines after the last good one are the torn tail; those before it are damage in the middle.
    let last_good = records.last().map_or(0, |(n, _)| *n);
    let (damaged, tail): (Vec<_>, Vec<_>) = bad.into_iter().partition(|(n, _, _, whole)| *whole || *n < last_good);
    Replay {
        records,
        damaged: damaged.into_iter().map(|(n, _, why, _)| (n, why)).collect(),
        torn: tail.first().map(|(n, from, _, _)| (*n, bytes.len() - from)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(json: &[u8]) -> Result<String, String> {
        String::from_utf8(json.to_vec()).map_err(|e| e.to_string())
    }

    #[test]
    fn whole_lines_with_matching_checksums_are_read_and_a_torn_last_line_is_the_tail() {
        let mut bytes = [line(b"{\"a\":1}"), line(b"{\"b\":2}")].concat();
        let whole = bytes.len();
        bytes.extend_from_slice(&line(b"{\"c\":3}")[..7]);
        let replay = read(&bytes, text);
        assert_eq!(replay.records, [(1, "{\"a\":1}".to_owned()), (2, "{\"b\":2}".to_owned())]);
        assert!(replay.damaged.is_empty());
        assert_eq!(replay.torn, Some((3, bytes.len() - whole)));
    }

    #[test]
    fn a_garbled_line_in_the_middle_is_reported_by_number_and_the_lines_after_it_are_kept() {
        let mut garbled = line(b"{\"b\":2}");
        garbled[12] = b'9';
        let bytes = [line(b"{\"a\":1}"), garbled, line(b"{\"c\":3}"), b"nonsense\n".to_vec()].concat();
        let replay = read(&bytes, text);
        assert_eq!(replay.records.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(replay.damaged.len(), 1);
        assert_eq!(replay.damaged[0].0, 2);
        assert!(replay.damaged[0].1.contains("checksum does not match"), "{:?}", replay.damaged);
        assert_eq!(replay.torn, Some((4, "nonsense\n".len())), "damaged lines at the end are the tail");
    }

    #[test]
    fn a_line_that_is_not_a_record_counts_as_damaged() {
        let bytes = [line(b"{\"a\":1}"), line(b"[]"), line(b"{\"c\":3}")].concat();
        let replay = read(&bytes, |json| if json == b"[]" { Err("not a record".to_owned()) } else { text(json) });
        assert_eq!(replay.damaged, [(2, "not a record".to_owned())]);
        assert_eq!(replay.torn, None);
    }

    #[test]
    fn a_whole_last_line_that_does_not_decode_is_damage_not_a_torn_tail() {
        // What a newer build wrote (a field this one does not know), last in the journal: a crash cannot make a
        // line whose checksum matches, so it was acknowledged and must not be dropped unsaid.
        let bytes = [line(b"{\"a\":1}"), line(b"{\"new\":2}")].concat();
        let replay =
            read(&bytes, |json| if json.starts_with(b"{\"new") { Err("unknown field".to_owned()) } else { text(json) });
        assert_eq!(replay.damaged, [(2, "unknown field".to_owned())]);
        assert_eq!(replay.torn, None);
    }

    #[test]
    fn a_line_is_the_checksum_in_eight_hex_digits_a_space_the_json_and_a_newline() {
        for json in [&b"{}"[..], b"{\"a\":[1,2,3],\"b\":\"x\"}", b""] {
            let expected = [format!("{:08x} ", crc32fast::hash(json)).as_bytes(), json, b"\n"].concat();
            assert_eq!(line(json), expected);
        }
    }

    #[test]
    fn journals_are_listed_by_their_first_number_not_by_name() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["journal-10.jsonl", "journal-9.jsonl", "journal-x.jsonl", "journal-3.jsonl.corrupt-1"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let listed: Vec<u64> = list_journals(dir.path()).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(listed, [9, 10]);
    }

    #[test]
    fn a_failed_append_leaves_nothing_of_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let probe = Probe::default();
        let mut journal = JournalFile::create(dir.path(), 1).unwrap();
        journal.append(&line(b"{\"a\":1}"), &probe).unwrap();
        probe.failing_appends.store(1, Ordering::SeqCst);
        assert!(journal.append(&line(b"{\"b\":2}"), &probe).is_err());
        journal.append(&line(b"{\"c\":3}"), &probe).unwrap();
        let bytes = std::fs::read(journal.path()).unwrap();
        assert_eq!(bytes, [line(b"{\"a\":1}"), line(b"{\"c\":3}")].concat());
        assert_eq!(probe.syncs.load(Ordering::Relaxed), 2, "one fdatasync per append that worked");
    }
}

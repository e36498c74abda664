//! Recovery at start: the journals replayed over the checkpoints, the result made durable, a fresh journal started.
//! Runs once per [`Store`], before its first load or save.
//!
//! For each channel with records:
//! - its session file is replaced by its newest record when that record is newer (the record's `seq` against the
//!   file's `savedSeq`), or when the file is missing or cannot be read (moved aside first, as at load); an older
//!   record is ignored; a newest record that cannot be used (it fails the load's checks: a newer build's, say) is
//!   reported and the newest usable one before it taken, the events of those left out not appended (those a
//!   checkpoint of them appended already stay: the log is never cut for them), and the journals kept aside;
//! - its log must hold each record's events at the record's `logAt`: compared byte for byte, what it holds already
//!   is kept, what it lacks (a crash before the checkpoint, a torn last line) is appended, so no event is lost or
//!   logged twice.
//!
//! A journal's torn tail (a crash mid-append: never acknowledged) is dropped. A damaged line with good ones after it
//! is reported with its file and line number and skipped; the records after it are used, every channel's files are
//! synced (the damaged line's channel is unknown), and the journal is kept aside for a person to look at.

use super::atomic::{replace_unsynced, sync_file, sync_folder};
use super::commit::Commits;
use super::journal::{self, JournalFile, list_journals};
use super::load::move_aside;
use super::log::cut_torn_tail;
use super::parallel::in_parallel;
use super::record::{
    Record, SEQ_HEAD_BYTES, checkpoint_bytes, decode_record, encode_events, encode_session, saved_seq,
    saved_seq_in_head,
};
use super::validate::check_session;
use super::{Store, StoreError, io};
use crate::core::ids::ChannelId;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// What recovery did and found: for its log line and the load's report.
#[derive(Debug, Default)]
struct Replayed {
    records: usize,
    sessions: usize,
    events: usize,
    /// What a person should know.
    problems: Vec<String>,
    /// A record was read but not used (it fails the checks: from a newer build, say): the journals are kept aside.
    unused_records: bool,
}

impl Store {
    pub(super) fn recover(&self) -> Result<Commits, StoreError> {
        let journals = list_journals(&self.state_dir).map_err(io("read the state folder", &self.state_dir))?;
        let mut replayed = Replayed::default();
        let mut read = read_journals(&journals, &mut replayed)?;
        let mut next_seq = journals.last().map_or(1, |(first, _)| *first).max(read.next_seq);
        for (&channel, records) in &read.by_channel {
            let (on_disk, used) = self.replay_session(channel, records, &mut replayed)?;
            next_seq = next_seq.max(on_disk + 1);
            // The events of saves not used are not logged: the log would tell of turns the session never took.
            self.replay_log(channel, &records[..used], &mut replayed)?;
        }
        // Not only what recovery wrote: a checkpoint found as new as the journal may be one the process that died
        // wrote without syncing (checkpoints are synced when their journal is replaced). Its journal is deleted
        // below, so every file the journals cover is made durable first, with the folder's renames.
        // A damaged line's channel is unknown, and its checkpoint may be the only copy of that save outside the
        // journal set aside: with any damage, every channel's files are synced.
        let covered: Vec<PathBuf> = if read.damaged.is_empty() {
            read.by_channel.keys().flat_map(|&channel| [self.session_path(channel), self.log_path(channel)]).collect()
        } else {
            let channels = self.list_channels()?.into_iter().map(|(channel, _)| channel);
            channels.flat_map(|channel| [self.session_path(channel), self.log_path(channel)]).collect()
        };
        for synced in in_parallel(&covered, |path| sync_file(path).map_err(io("sync the recovered file", path))) {
            synced?;
        }
        if !covered.is_empty() {
            sync_folder(&self.channels_dir).map_err(io("sync the state folder", &self.channels_dir))?;
        }
        if replayed.unused_records {
            // Which journal held them is not kept: each is set aside, the records not used among them.
            let kept = journals.iter().map(|(_, path)| path).filter(|path| !read.damaged.contains(path)).cloned();
            read.damaged.extend(kept.collect::<Vec<_>>());
        }
        #[cfg(test)]
        self.probe.recovery_synced.lock().unwrap().extend(covered);
        if journals.is_empty() {
            // No journal (a first start, or one after a build without it): the numbers go on from the files'.
            next_seq = next_seq.max(self.newest_saved_seq() + 1);
        }
        // Never over the newest journal when it is kept for inspection: with none of its records readable, the
        // numbers would start at its own and the fresh journal would be it, emptied.
        if let Some((first, _)) = journals.last().filter(|(_, path)| read.damaged.contains(path)) {
            next_seq = next_seq.max(first + 1);
        }
        let journal = self.start_afresh(next_seq, &journals, &read.damaged, &mut replayed)?;
        for problem in &replayed.problems {
            tracing::error!("{problem}");
        }
        if replayed.records > 0 {
            tracing::info!(
                records = replayed.records,
                channels = read.by_channel.len(),
                sessions_restored = replayed.sessions,
                events_appended = replayed.events,
                "replayed the journal over the checkpoints"
            );
        }
        Ok(Commits::new(journal, next_seq, replayed.problems))
    }

    /// Starts a fresh journal (everything replayed is durable by now), then deletes the replayed ones, or keeps one
    /// with a damaged line or a record not used aside for a person to look at.
    fn start_afresh(
        &self,
        first_seq: u64,
        replayed_journals: &[(u64, PathBuf)],
        damaged: &[PathBuf],
        replayed: &mut Replayed,
    ) -> Result<JournalFile, StoreError> {
        let journal =
            JournalFile::create(&self.state_dir, first_seq).map_err(io("start the journal", &self.state_dir))?;
        for (_, path) in replayed_journals.iter().filter(|(_, path)| path != journal.path()) {
            if damaged.contains(path) {
                let aside = move_aside(path)?;
                replayed.problems.push(format!("kept the journal as {} for inspection", aside.display()));
            } else if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(file = %path.display(), "could not delete the replayed journal (it is harmless): {e}");
            }
        }
        Ok(journal)
    }

    /// Puts a channel's newest usable record in its session file if the file is older, missing or unreadable. Gives
    /// the number of the save the file holds afterwards, and how many of the records (oldest first) that save takes
    /// in: newer ones that cannot be used (a newer build's, say) are reported and left out, with their events.
    fn replay_session(
        &self,
        channel: ChannelId,
        records: &[Record],
        replayed: &mut Replayed,
    ) -> Result<(u64, usize), StoreError> {
        if records.is_empty() {
            return Ok((0, 0));
        }
        let path = self.session_path(channel);
        let on_disk = match std::fs::read(&path) {
            Ok(bytes) => usable_seq(crate::files::without_byte_order_mark(&bytes), channel).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            // Not known to be older than the journal's copy (its permissions, an I/O error): a person must look.
            Err(e) => return Err(io("read the session file", &path)(e)),
        };
        let on_disk = match on_disk {
            Ok(seq) => seq,
            // A file that cannot be used is moved aside before the journal's copy takes its place.
            Err(why) => {
                let aside = move_aside(&path)?;
                replayed.problems.push(format!(
                    "{} cannot be read ({why}); moved it to {} and used the journal's copy",
                    path.display(),
                    aside.display()
                ));
                None
            }
        };
        // The newest record the file is not as new as and that can be used: an older one, when the newest cannot,
        // is still a save this build made and acknowledged after the file's.
        let mut used = records.len();
        let newest = loop {
            let Some(newest) = used.checked_sub(1).map(|n| &records[n]) else { return Ok((on_disk.unwrap_or(0), 0)) };
            if let Some(seq) = on_disk.filter(|&seq| seq >= newest.seq) {
                tracing::debug!(%channel, file = seq, journal = newest.seq, "the session file is as new as the journal");
                return Ok((seq, used));
            }
            match check_session(&newest.session, channel) {
                Ok(()) => break newest,
                Err(why) => {
                    replayed.problems.push(format!(
                        "channel {channel}: the journal's save {} is not usable ({why}); not used, nor its events",
                        newest.seq
                    ));
                    replayed.unused_records = true;
                    used -= 1;
                }
            }
        };
        if on_disk.is_some() {
            tracing::warn!(
                %channel,
                file = on_disk,
                journal = newest.seq,
                "the session file is behind the journal (a crash before its checkpoint); writing the journal's copy"
            );
        }
        let bytes = checkpoint_bytes(newest.seq, &encode_session(&newest.session)?);
        replace_unsynced(&path, &self.previous_path(channel), &bytes)
            .map_err(io("write the recovered session", &path))?;
        replayed.sessions += 1;
        Ok((newest.seq, used))
    }

    /// Makes a channel's log hold every record's events at the record's place, appending only what it lacks.
    fn replay_log(&self, channel: ChannelId, records: &[Record], replayed: &mut Replayed) -> Result<(), StoreError> {
        let segments = wanted_in_log(channel, records)?;
        if segments.is_empty() {
            return Ok(());
        }
        let path = self.log_path(channel);
        let fix = |e| io("recover the history log", &path)(e);
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(&path).map_err(fix)?;
        for (base, wanted) in &segments {
            let (base, wanted) = (*base, wanted.as_slice());
            let len = file.metadata().map_err(fix)?.len();
            let keep = if len < base {
                tracing::warn!(
                    %channel,
                    expected = base,
                    found = len,
                    "the history log is shorter than the journal expects (changed by hand, or events the journal \
                     lost too); appending at its end"
                );
                cut_torn_tail(&mut file, &path).map_err(fix)?;
                0
            } else {
                let mut held = vec![0; usize::try_from((len - base).min(wanted.len() as u64)).unwrap_or(0)];
                file.seek(SeekFrom::Start(base)).and_then(|_| file.read_exact(&mut held)).map_err(fix)?;
                let same = held.iter().zip(wanted).take_while(|(a, b)| a == b).count();
                if same == wanted.len() {
                    // All there. What follows, if anything, is newer (a journal kept by a crash while it was
                    // replaced holds older records), the next part, or a torn line, cut before the next append.
                    continue;
                }
                // From the first difference on, the journal's bytes: whole lines only, a line held in part is
                // written again.
                let keep = wanted[..same].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                let whole_lines_differ = held[keep..].contains(&b'\n') || len > base + held.len() as u64;
                // Zeros where the journal's bytes should be are what a power cut leaves of appends the disk had not
                // written yet (later pages may have reached it): the process's own unsynced appends, which the
                // journal holds, never a person's edit. Cut there; the journal's events are written again in order.
                let zeroed = held.get(same) == Some(&0);
                if zeroed {
                    replayed.problems.push(format!(
                        "{}: zero bytes after byte {} (a power cut before its appends reached the disk); cut there \
                         and the journal's events written again",
                        path.display(),
                        base + same as u64
                    ));
                    file.set_len(base + keep as u64).map_err(fix)?;
                } else if whole_lines_differ {
                    // Not what a crash leaves (a torn last line): never destroy history, say so.
                    replayed.problems.push(format!(
                        "{}: differs from the journal after byte {}; kept as it is, the journal's events from there \
                         appended at its end",
                        path.display(),
                        base + keep as u64
                    ));
                    cut_torn_tail(&mut file, &path).map_err(fix)?;
                } else {
                    file.set_len(base + keep as u64).map_err(fix)?;
                }
                keep
            };
            let missing = &wanted[keep..];
            let events = missing.iter().filter(|&&b| b == b'\n').count();
            if events > 0 {
                tracing::warn!(
                    %channel,
                    events,
                    "the history log lacks events the journal holds (a crash before the checkpoint); appending them"
                );
            }
            file.write_all(missing).map_err(fix)?;
            replayed.events += events;
        }
        Ok(())
    }

    /// The highest save number among the session files, for numbering on from them when there is no journal. Reads
    /// only the start of each file, where the store writes the number.
    fn newest_saved_seq(&self) -> u64 {
        let Ok(entries) = std::fs::read_dir(&self.channels_dir) else { return 0 };
        let head = |path: &Path| -> std::io::Result<Vec<u8>> {
            let mut head = Vec::with_capacity(SEQ_HEAD_BYTES);
            std::fs::File::open(path)?.take(SEQ_HEAD_BYTES as u64).read_to_end(&mut head)?;
            Ok(head)
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_str().is_some_and(|name| name.ends_with(".json")))
            .filter_map(|e| head(&e.path()).ok())
            .map(|head| saved_seq_in_head(crate::files::without_byte_order_mark(&head)))
            .max()
            .unwrap_or(0)
    }
}

/// The journals' records, by channel in order, and what reading them found.
struct Journals {
    by_channel: BTreeMap<ChannelId, Vec<Record>>,
    /// Journals with a damaged line in the middle.
    damaged: Vec<PathBuf>,
    /// After the highest save number recorded.
    next_seq: u64,
}

/// Reads every journal, oldest first: its good records; its damaged lines reported by file and line; its torn tail
/// dropped.
fn read_journals(journals: &[(u64, PathBuf)], replayed: &mut Replayed) -> Result<Journals, StoreError> {
    let mut read = Journals { by_channel: BTreeMap::new(), damaged: Vec::new(), next_seq: 1 };
    for (_, path) in journals {
        let bytes = std::fs::read(path).map_err(io("read the journal", path))?;
        let lines = journal::read(&bytes, decode_record);
        for (line, why) in &lines.damaged {
            let problem = format!(
                "{}:{line}: {why}; skipped this record (a whole one this build cannot read may come from a newer build)",
                path.display()
            );
            replayed.problems.push(problem);
        }
        if !lines.damaged.is_empty() {
            read.damaged.push(path.clone());
        }
        if let Some((line, bytes)) = lines.torn {
            tracing::warn!(
                file = %path.display(),
                line,
                bytes,
                "the journal ends with a torn record (a crash while appending it, so it was never acknowledged); \
                 dropping it"
            );
        }
        for (_, record) in lines.records {
            read.next_seq = read.next_seq.max(record.seq + 1);
            replayed.records += 1;
            read.by_channel.entry(record.channel).or_default().push(record);
        }
    }
    // In order of their numbers, not of their files: a new journal whose carried records could not be deleted after
    // a failed replacement sorts after the journal that went on, yet holds older saves.
    for records in read.by_channel.values_mut() {
        records.sort_by_key(|record| record.seq);
    }
    Ok(read)
}

/// The save number of a session file that can be used (it parses and passes validation), or why it cannot.
/// What a channel's log must hold, from the records' events: runs of bytes, each with its place in the log. A run
/// ends where records are missing (a damaged line): the log may hold their events, which the journal no longer
/// says, so each run is compared at its own place. A record at an earlier place than the end (events a failed
/// append held back, written again) replaces what follows that place.
fn wanted_in_log(channel: ChannelId, records: &[Record]) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
    let mut runs: Vec<(u64, Vec<u8>)> = Vec::new();
    for record in records.iter().filter(|r| !r.events.is_empty()) {
        let at = record.log_at;
        while runs.last().is_some_and(|(start, _)| *start > at) {
            runs.pop();
        }
        match runs.last_mut() {
            Some((start, bytes)) if at <= *start + bytes.len() as u64 => {
                bytes.truncate(usize::try_from(at - *start).unwrap_or(usize::MAX));
                bytes.extend(encode_events(channel, &record.events)?);
            }
            last => {
                if last.is_some() {
                    tracing::warn!(%channel, seq = record.seq, "the journal lacks the events before this record");
                }
                runs.push((at, encode_events(channel, &record.events)?));
            }
        }
    }
    Ok(runs)
}

fn usable_seq(bytes: &[u8], channel: ChannelId) -> Result<u64, String> {
    super::load::parse_session(bytes, channel)?;
    saved_seq(bytes).map_err(|e| e.to_string())
}

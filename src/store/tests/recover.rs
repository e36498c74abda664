//! Recovery from the journal at start: a journal cut or garbled anywhere in its last record, checkpoints a batch
//! behind, a session file missing or corrupt, records older than the session file, a damaged line in the middle.
//!
//! Each case builds the state a crash leaves: the checkpoints as they were before the last saves (a snapshot of the
//! channels folder) and the journal as it was on disk.

use super::*;
use crate::store::journal::line;
use std::collections::BTreeMap;
use std::path::Path;

/// The state folder's files (the journal and the channels folder), by path within it.
type Snapshot = BTreeMap<String, Vec<u8>>;

fn snapshot(state: &Path) -> Snapshot {
    let mut files = Snapshot::new();
    for folder in ["", "channels"] {
        for entry in std::fs::read_dir(state.join(folder)).unwrap().filter_map(Result::ok) {
            if entry.file_type().unwrap().is_file() {
                let name = Path::new(folder).join(entry.file_name()).to_string_lossy().into_owned();
                files.insert(name, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    files
}

/// Puts the snapshot's files back in place of everything in the state folder.
fn restore(snapshot: &Snapshot, state: &Path) {
    for entry in std::fs::read_dir(state).unwrap().filter_map(Result::ok) {
        if entry.file_type().unwrap().is_dir() {
            std::fs::remove_dir_all(entry.path()).unwrap();
        } else {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    std::fs::create_dir_all(state.join("channels")).unwrap();
    for (name, bytes) in snapshot {
        std::fs::write(state.join(name), bytes).unwrap();
    }
}

/// What a restart sees: every session, and the log of each of them.
#[derive(Debug, PartialEq)]
struct Seen {
    sessions: Vec<Session>,
    logs: Vec<Vec<HistoryEvent>>,
}

fn seen(store: &Store, sessions: Vec<Session>) -> Seen {
    let logs = sessions.iter().map(|s| store.read_log(s.channel_id).unwrap()).collect();
    Seen { sessions, logs }
}

/// A new process on `state`: loads everything; what it sees, and what loading reported.
fn restart(state: &Path) -> (Store, Seen, Vec<String>) {
    let store = open_at(state);
    let report = store.load_all().unwrap();
    let seen = seen(&store, report.sessions);
    (store, seen, report.problems)
}

/// The only journal's bytes.
fn the_journal(state: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let mut journals = journal_files(state);
    assert_eq!(journals.len(), 1, "{journals:?}");
    let path = journals.remove(0);
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

/// A crash after the saves made since `behind` were journaled, before their checkpoints: the checkpoints as `behind`
/// holds them, the journal as it is.
fn crash_before_checkpoints(store: Store, state: &Path, behind: &Snapshot) {
    let (path, journal) = the_journal(state);
    drop(store);
    restore(behind, state);
    std::fs::write(&path, journal).unwrap();
}

/// Whether a journal was kept aside (`journal-<n>.jsonl.corrupt-<time>`) for a person to look at.
fn journal_kept_aside(state: &Path) -> bool {
    std::fs::read_dir(state).unwrap().filter_map(Result::ok).any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        name.starts_with("journal-") && name.contains(".corrupt-")
    })
}

/// A state folder on tmpfs where there is one: these tests make thousands of them and test the logic, not the disk.
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { tempfile::tempdir_in(shm).unwrap() } else { tempfile::tempdir().unwrap() }
}

/// A state folder on tmpfs with channel 1's session started and saved: the folder, its store, the session and the
/// events of its start.
fn saved_start() -> (tempfile::TempDir, Store, Session, Vec<HistoryEvent>) {
    let dir = scratch();
    let store = open_at(dir.path());
    let (session, events) = started_in(ChannelId(1));
    store.save(&session, &events).unwrap();
    (dir, store, session, events)
}

fn skip_at(session: &mut Session, second: i64) -> Vec<HistoryEvent> {
    let (config, personas) = (Config::default(), catalog());
    let ctx = Context { personas: &personas, config: &config };
    session.handle_command(&Command::Skip, None, t0() + TimeDelta::seconds(second), ctx).unwrap().events
}

/// The last batch holds two records (two channels saved in one group commit), cut or garbled anywhere: every record
/// whole before the damage is replayed over checkpoints left far behind (found by a review: the checkpoints were
/// taken after the saves before the last, so a recovery that dropped a torn journal's every record passed), and a
/// record that is not whole is left out.
#[test]
fn a_journal_cut_or_garbled_anywhere_in_its_last_batch_recovers_every_record_whole_before_the_damage() {
    let dir = scratch();
    let store = open_at(dir.path());
    let (mut a, a_events) = started_in(ChannelId(1));
    let (mut b, b_events) = started_in(ChannelId(2));
    store.save(&a, &a_events).unwrap();
    store.save(&b, &b_events).unwrap();
    // The checkpoints stop here: every later save is in the journal only.
    let checkpoints = snapshot(dir.path());
    for second in 1..=3 {
        let events = skip_at(&mut a, second);
        store.save(&a, &events).unwrap();
    }
    let before = seen(&store, vec![a.clone(), b.clone()]);
    let (a_last, b_last) = (skip_at(&mut a, 4), skip_at(&mut b, 4));
    store.save_many(&[(a.clone(), a_last), (b.clone(), b_last)]).unwrap();
    let after = seen(&store, vec![a.clone(), b.clone()]);
    let alone = scratch();
    restore(&checkpoints, alone.path());
    let (_, from_checkpoints, _) = restart(alone.path());
    assert_ne!(from_checkpoints.sessions[0], before.sessions[0], "precondition: a's skips are in the journal only");
    // Only a's record of the last batch whole: a as after it, b as before it.
    let a_only = Seen {
        sessions: vec![after.sessions[0].clone(), before.sessions[1].clone()],
        logs: vec![after.logs[0].clone(), before.logs[1].clone()],
    };
    let (path, journal) = the_journal(dir.path());
    let name = path.file_name().unwrap().to_owned();
    let line_starts = |end: usize| journal[..end - 1].iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let b_starts = line_starts(journal.len());
    let a_starts = line_starts(b_starts);
    assert!(b_starts - a_starts > 500 && journal.len() - b_starts > 500, "the last batch is two whole sessions");

    // The checkpoints of the saves after the starts were never written (the crash came first).
    let recovers = |bytes: &[u8], expected: &Seen, case: &str| {
        let dir = scratch();
        restore(&checkpoints, dir.path());
        std::fs::write(dir.path().join(&name), bytes).unwrap();
        let (store, found, problems) = restart(dir.path());
        assert!(problems.is_empty(), "{case}: {problems:?}");
        assert_eq!(&found, expected, "{case}");
        // Appending after recovery works, the torn record gone: one more save, and a restart sees it all.
        let mut a = expected.sessions[0].clone();
        let more = skip_at(&mut a, 9);
        store.save(&a, &more).unwrap();
        let (_, again, problems) = restart(dir.path());
        assert!(problems.is_empty(), "{case}, after appending: {problems:?}");
        assert_eq!(again.sessions, [a, expected.sessions[1].clone()], "{case}, after appending");
        assert_eq!(again.logs, [[expected.logs[0].clone(), more].concat(), expected.logs[1].clone()], "{case}");
    };
    for cut in a_starts..journal.len() {
        let expected = if cut < b_starts { &before } else { &a_only };
        recovers(&journal[..cut], expected, &format!("cut at byte {cut} of {}", journal.len()));
    }
    recovers(&journal, &after, "whole");
    // A garbled byte in the very last record (one in a record followed by whole ones is damage no crash makes: see
    // `a_damaged_line_in_the_middle_...`).
    for at in b_starts..journal.len() {
        let mut garbled = journal.clone();
        garbled[at] = if garbled[at] == b'x' { b'y' } else { b'x' };
        recovers(&garbled, &a_only, &format!("byte {at} garbled"));
    }
}

#[test]
fn recovery_replays_the_journal_over_checkpoints_left_behind_and_a_log_torn_mid_line() {
    let (dir, store, mut a, a_events) = saved_start();
    let first_skip = skip_at(&mut a, 1);
    store.save(&a, &first_skip).unwrap();
    let behind = snapshot(dir.path());
    let mut events = [a_events, first_skip].concat();
    for second in 2..=4 {
        let skipped = skip_at(&mut a, second);
        store.save(&a, &skipped).unwrap();
        events.extend(skipped);
    }
    let full_log = std::fs::read(store.log_path(ChannelId(1))).unwrap();
    let (journal_path, journal) = the_journal(dir.path());
    drop(store);
    let crashed = |behind: &Snapshot| {
        restore(behind, dir.path());
        std::fs::write(&journal_path, &journal).unwrap();
    };

    // The session file three saves behind, the log without its last events.
    crashed(&behind);
    let (_, found, problems) = restart(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(found, Seen { sessions: vec![a.clone()], logs: vec![events.clone()] });

    // Again, the log cut in the middle of a line the checkpoint was appending when the process died.
    crashed(&behind);
    let log = dir.path().join("channels/1.history.jsonl");
    let torn_at = std::fs::read(&log).unwrap().len() + 30;
    std::fs::write(&log, &full_log[..torn_at]).unwrap();
    let (_, found, _) = restart(dir.path());
    assert_eq!(found, Seen { sessions: vec![a], logs: vec![events] }, "every event once, none glued");
    assert_eq!(std::fs::read(&log).unwrap(), full_log);
}

#[test]
fn recovery_syncs_checkpoints_the_dead_process_left_unsynced_before_it_deletes_their_journal() {
    // The process wrote channel 1's checkpoint (session file and log, as new as the journal) but died before the
    // journal was replaced, the one moment they are synced: the kernel may still hold them, unwritten.
    let (dir, store, _, _) = saved_start();
    drop(store);
    let journals = journal_files(dir.path());
    let store = open_at(dir.path());
    store.load_all().unwrap();
    assert!(journals.iter().all(|j| !j.exists()), "the journal replayed is gone, so its files must be durable");
    let synced = store.probe.recovery_synced.lock().unwrap().clone();
    for file in [store.session_path(ChannelId(1)), store.log_path(ChannelId(1))] {
        assert!(
            file.exists() && synced.contains(&file),
            "{} synced before its journal went: {synced:?}",
            file.display()
        );
    }
}

#[test]
fn with_a_damaged_journal_line_every_channels_checkpoint_is_synced_before_the_journal_is_set_aside() {
    // Channel 2's only record is the damaged line: which channel it was is unknown, and its checkpoint, written
    // unsynced, is the one copy of that save left outside the journal kept aside.
    let (dir, store, _, _) = saved_start();
    let (other, other_events) = started_in(ChannelId(2));
    store.save(&other, &other_events).unwrap();
    let (path, journal) = the_journal(dir.path());
    drop(store);
    let mut lines: Vec<Vec<u8>> = journal.split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    assert_eq!(lines.len(), 2);
    lines[1][20] ^= 1;
    lines.push(lines[0].clone()); // a good record after it: damage, not a torn tail
    std::fs::write(&path, lines.concat()).unwrap();

    let store = open_at(dir.path());
    let report = store.load_all().unwrap();
    assert!(report.problems.iter().any(|p| p.contains("checksum")), "{:?}", report.problems);
    assert!(journal_kept_aside(dir.path()));
    let synced = store.probe.recovery_synced.lock().unwrap().clone();
    for file in [store.session_path(ChannelId(2)), store.log_path(ChannelId(2))] {
        assert!(synced.contains(&file), "{} synced before its journal was set aside: {synced:?}", file.display());
    }
    assert_eq!(report.sessions.len(), 2, "channel 2's checkpoint is used");
}

#[test]
fn a_missing_or_corrupt_session_file_is_recovered_from_the_journal() {
    let (dir, store, mut a, a_events) = saved_start();
    let skipped = skip_at(&mut a, 1);
    store.save(&a, &skipped).unwrap();
    let saved = snapshot(dir.path());
    drop(store);

    std::fs::remove_file(dir.path().join("channels/1.json")).unwrap();
    std::fs::remove_file(dir.path().join("channels/1.prev.json")).unwrap();
    let (_, found, problems) = restart(dir.path());
    assert_eq!(found.sessions, [a.clone()], "a session file that is gone is written again");
    assert!(problems.is_empty(), "{problems:?}");

    restore(&saved, dir.path());
    std::fs::write(dir.path().join("channels/1.json"), "{\"savedSeq\":2,\"vers").unwrap();
    let store = open_at(dir.path());
    let report = store.load_all().unwrap();
    assert_eq!(report.sessions, [a.clone()], "the journal's copy, not the last good copy from before the skip");
    assert!(report.lost.is_empty());
    let problem = report.problems.iter().find(|p| p.contains("1.json cannot be read")).expect("reported");
    assert!(problem.contains("the journal's copy"), "{problem}");
    let aside: Vec<_> = snapshot(dir.path()).into_keys().filter(|name| name.contains(".corrupt-")).collect();
    assert_eq!(aside.len(), 1, "the corrupt file is kept for a person to look at");
    assert_eq!(store.read_log(ChannelId(1)).unwrap(), [a_events, skipped].concat());
}

#[test]
fn journal_records_older_than_the_session_file_are_ignored() {
    let (dir, store, mut a, a_events) = saved_start();
    let first = skip_at(&mut a, 1);
    store.save(&a, &first).unwrap();
    let (path, older_records) = the_journal(dir.path());
    let second = skip_at(&mut a, 2);
    store.save(&a, &second).unwrap();
    drop(store);

    // A journal that holds only saves older than the session file (one kept by a crash while it was replaced).
    std::fs::write(&path, &older_records).unwrap();
    let (_, found, problems) = restart(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(found.sessions, [a], "the newer session file stays");
    assert_eq!(found.logs, [[a_events, first, second].concat()], "no event twice, none lost");
}

#[test]
fn a_damaged_line_in_the_middle_of_the_journal_is_reported_with_its_line_and_the_records_after_it_are_used() {
    let (dir, store, mut a, a_events) = saved_start();
    let behind = snapshot(dir.path());
    let lost = skip_at(&mut a, 1);
    store.save(&a, &lost).unwrap();
    let mut kept = Vec::new();
    for second in 2..=3 {
        let skipped = skip_at(&mut a, second);
        store.save(&a, &skipped).unwrap();
        kept.extend(skipped);
    }
    let (path, journal) = the_journal(dir.path());
    drop(store);
    let mut lines: Vec<Vec<u8>> = journal.split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    assert_eq!(lines.len(), 4);
    lines[1][20] ^= 1;
    restore(&behind, dir.path());
    std::fs::write(&path, lines.concat()).unwrap();

    let (_, found, problems) = restart(dir.path());
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        problems.iter().any(|p| p.contains(&format!("{name}:2:")) && p.contains("checksum")),
        "the file and line are named: {problems:?}"
    );
    assert_eq!(found.sessions, [a], "the records after the damaged one are used");
    assert_eq!(found.logs, [[a_events, kept].concat()], "only the damaged record's events are missing");
    assert!(journal_files(dir.path()).iter().all(|p| *p != path), "replaced by a fresh journal");
    let aside = journal_kept_aside(dir.path());
    assert!(aside, "the damaged journal is kept aside for a person to look at");
}

#[test]
fn a_damaged_line_in_the_middle_of_the_journal_leaves_a_log_that_holds_every_event_as_it_is() {
    // The checkpoints were all written before the crash (the log holds the damaged record's events too): the runs
    // of records on either side of the damaged one are each compared at their own place, nothing appended again.
    let (dir, store, mut a, a_events) = saved_start();
    let mut events = a_events;
    for second in 1..=3 {
        let skipped = skip_at(&mut a, second);
        store.save(&a, &skipped).unwrap();
        events.extend(skipped);
    }
    let (path, journal) = the_journal(dir.path());
    let log_before = std::fs::read(store.log_path(ChannelId(1))).unwrap();
    drop(store);
    let mut lines: Vec<Vec<u8>> = journal.split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    lines[1][20] ^= 1;
    std::fs::write(&path, lines.concat()).unwrap();

    let (store, found, problems) = restart(dir.path());
    assert!(problems.iter().any(|p| p.contains("checksum")), "{problems:?}");
    assert!(!problems.iter().any(|p| p.contains("differs from the journal")), "{problems:?}");
    assert_eq!(found.sessions, [a]);
    assert_eq!(found.logs, [events], "every event once");
    assert_eq!(std::fs::read(store.log_path(ChannelId(1))).unwrap(), log_before, "the log untouched");
}

#[test]
fn a_journal_line_that_is_not_a_record_is_damage_too() {
    let (dir, store, a, _) = saved_start();
    let (path, journal) = the_journal(dir.path());
    drop(store);
    std::fs::write(&path, [line(b"{\"seq\":\"one\"}"), journal].concat()).unwrap();
    let (_, found, problems) = restart(dir.path());
    assert!(problems.iter().any(|p| p.contains(":1: not a journal record")), "{problems:?}");
    assert_eq!(found.sessions, [a]);
}

#[test]
fn a_whole_last_record_this_build_cannot_read_is_reported_and_its_journal_kept_not_dropped_as_torn() {
    let (dir, store, mut a, _) = saved_start();
    let behind = snapshot(dir.path());
    let acknowledged = skip_at(&mut a, 1);
    store.save(&a, &acknowledged).unwrap();
    let (path, journal) = the_journal(dir.path());
    drop(store);
    // The last record as a newer build wrote it (a field this one does not know), its checksum matching; the crash
    // came before its checkpoint.
    let lines: Vec<&[u8]> = journal.split_inclusive(|&b| b == b'\n').collect();
    let json = &lines[1][9..lines[1].len() - 2];
    let newer = line(&[json, b",\"fromANewerBuild\":1}"].concat());
    restore(&behind, dir.path());
    std::fs::write(&path, [lines[0], &newer].concat()).unwrap();

    let (_, _, problems) = restart(dir.path());
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(problems.iter().any(|p| p.contains(&format!("{name}:2:"))), "the file and line are named: {problems:?}");
    let aside = journal_kept_aside(dir.path());
    assert!(aside, "the journal holding the acknowledged save is kept aside, not deleted");
}

#[test]
fn a_journal_none_of_whose_records_this_build_can_read_is_kept_whole() {
    let (dir, store, mut a, _) = saved_start();
    let skipped = skip_at(&mut a, 1);
    store.save(&a, &skipped).unwrap();
    let (path, journal) = the_journal(dir.path());
    drop(store);
    // Every record as a newer build wrote it.
    let newer: Vec<u8> = journal
        .split_inclusive(|&b| b == b'\n')
        .flat_map(|l| line(&[&l[9..l.len() - 2], b",\"fromANewerBuild\":1}"].concat()))
        .collect();
    std::fs::write(&path, &newer).unwrap();

    let (_, _, problems) = restart(dir.path());
    assert_eq!(problems.iter().filter(|p| p.contains("skipped this record")).count(), 2, "{problems:?}");
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
        .map(|e| std::fs::read(e.path()).unwrap())
        .collect();
    assert_eq!(kept, [newer], "kept aside whole, not emptied as the fresh journal");
}

#[test]
fn without_a_journal_the_save_numbers_go_on_from_the_session_files() {
    let (dir, store, mut a, _) = saved_start();
    for second in 1..=3 {
        let skipped = skip_at(&mut a, second);
        store.save(&a, &skipped).unwrap();
    }
    store.checkpoint().unwrap();
    drop(store);
    // The journal deleted (by hand, or a first start after a build without one).
    for journal in journal_files(dir.path()) {
        std::fs::remove_file(journal).unwrap();
    }
    let store = open_at(dir.path());
    store.load_all().unwrap();
    let before = snapshot(dir.path());
    let next = skip_at(&mut a, 4);
    store.save(&a, &next).unwrap();
    // A crash before that save's checkpoint: the journal's record must count as newer than the session file.
    crash_before_checkpoints(store, dir.path(), &before);
    let (_, found, _) = restart(dir.path());
    assert_eq!(found.sessions, [a]);
}

#[test]
fn a_log_that_differs_from_the_journal_by_whole_lines_is_kept_and_reported_not_cut() {
    let (dir, store, mut a, _) = saved_start();
    let behind = snapshot(dir.path());
    let skipped = skip_at(&mut a, 1);
    store.save(&a, &skipped).unwrap();
    crash_before_checkpoints(store, dir.path(), &behind);

    // The log as a person edited it: a line of their own where the journal's next events should go.
    let log = dir.path().join("channels/1.history.jsonl");
    let mut edited = std::fs::read(&log).unwrap();
    let theirs = serde_json::to_vec(&skip_at(&mut started_in(ChannelId(1)).0, 7)[0]).unwrap();
    edited.extend([theirs, b"\n".to_vec()].concat());
    std::fs::write(&log, &edited).unwrap();

    let (_, found, problems) = restart(dir.path());
    assert!(problems.iter().any(|p| p.contains("differs from the journal")), "{problems:?}");
    assert_eq!(std::fs::read(&log).unwrap()[..edited.len()], edited[..], "nothing of it is cut");
    assert_eq!(found.logs[0][found.logs[0].len() - skipped.len()..], skipped[..], "the journal's events after it");
}

#[test]
fn a_session_file_holding_a_later_save_number_than_the_journal_does_not_win_over_a_newer_save() {
    let (dir, store, mut a, _) = saved_start();
    let skipped = skip_at(&mut a, 1);
    store.save(&a, &skipped).unwrap();
    store.checkpoint().unwrap();
    drop(store);
    // The file put back from another state folder or a backup, numbered far ahead of this folder's journal.
    let file = dir.path().join("channels/1.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let (_, rest) = text.split_once(',').unwrap();
    std::fs::write(&file, format!("{{\"savedSeq\":1000,{rest}")).unwrap();
    let store = open_at(dir.path());
    assert_eq!(store.load_all().unwrap().sessions, [a.clone()]);
    let behind = snapshot(dir.path());
    // A save acknowledged, then a crash before its checkpoint.
    let skipped = skip_at(&mut a, 2);
    store.save(&a, &skipped).unwrap();
    crash_before_checkpoints(store, dir.path(), &behind);
    let (_, found, problems) = restart(dir.path());
    assert_eq!(found.sessions, [a], "the acknowledged save, not the file numbered ahead: {problems:?}");
}

#[test]
fn zeros_a_power_cut_left_in_the_log_are_cut_and_the_journals_events_written_again_once_each_in_order() {
    let (dir, store, mut a, a_events) = saved_start();
    let log_before = std::fs::read(store.log_path(ChannelId(1))).unwrap().len();
    let mut events = a_events;
    for second in 1..=3 {
        let skipped = skip_at(&mut a, second);
        store.save(&a, &skipped).unwrap();
        events.extend(skipped);
    }
    let (path, journal) = the_journal(dir.path());
    let log = store.log_path(ChannelId(1));
    drop(store);
    // The first page of the unsynced appends never reached the disk (it reads as zeros); later ones did.
    let mut cut = std::fs::read(&log).unwrap();
    cut[log_before..log_before + 40].fill(0);
    std::fs::write(&log, &cut).unwrap();
    std::fs::write(&path, journal).unwrap();

    let (store, found, problems) = restart(dir.path());
    assert!(problems.iter().any(|p| p.contains("zero bytes")), "said: {problems:?}");
    assert_eq!(found.logs, [events], "every event once, in order, none glued to the zeros");
    assert!(!std::fs::read(store.log_path(ChannelId(1))).unwrap().contains(&0));
}

#[test]
fn a_newest_record_that_cannot_be_used_leaves_the_acknowledged_save_before_it_and_its_journal_is_kept() {
    let (dir, store, mut a, started) = saved_start();
    let behind = snapshot(dir.path());
    let first_skip = skip_at(&mut a, 1);
    store.save(&a, &first_skip).unwrap();
    let acknowledged = a.clone();
    let second_skip = skip_at(&mut a, 2);
    store.save(&a, &second_skip).unwrap();
    let (path, journal) = the_journal(dir.path());
    drop(store);
    // The last record decodes, but a newer build wrote it (its format version): the crash came before the checkpoints
    // of the last two saves.
    let mut lines: Vec<&[u8]> = journal.split_inclusive(|&b| b == b'\n').collect();
    let last = lines.pop().unwrap();
    let json = String::from_utf8(last[9..last.len() - 1].to_vec()).unwrap();
    assert!(json.contains("\"version\":1"), "{json}");
    let newer = line(json.replacen("\"version\":1", "\"version\":2", 1).as_bytes());
    restore(&behind, dir.path());
    std::fs::write(&path, [lines.concat(), newer].concat()).unwrap();

    let (_, seen, problems) = restart(dir.path());
    assert_eq!(seen.sessions, [acknowledged], "the newest save that can be used: {problems:?}");
    let logged: Vec<HistoryEvent> = [started, first_skip].concat();
    assert_eq!(seen.logs, [logged], "the log holds the events of the saves used, not of the one left out");
    assert!(problems.iter().any(|p| p.contains("not usable") && p.contains("format version 2")), "{problems:?}");
    assert!(journal_kept_aside(dir.path()), "the journal holding the save not used is kept aside, not deleted");
}

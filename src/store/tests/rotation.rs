//! Replacing the journal: once it is large (or old) a new one is started and the old one deleted after the
//! checkpoints it covers are synced, so it stays small; a restart recovers everything, a crash in the middle of a
//! replacement included.

use super::*;
use crate::store::rotation::Rotation;
use std::time::Duration;

const NEVER: Duration = Duration::from_secs(3600);

fn store_rotating_at(bytes: u64, age: Duration) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap().rotating(Rotation { bytes, age });
    (dir, store)
}

fn journal_sizes(state: &std::path::Path) -> Vec<u64> {
    journal_files(state).iter().map(|p| std::fs::metadata(p).unwrap().len()).collect()
}

/// Three channels, each started and then skipped `rounds` times, saved one at a time: the sessions and every event.
fn busy_channels(store: &Store, rounds: i64) -> (Vec<Session>, Vec<Vec<HistoryEvent>>) {
    let config = Config::default();
    let mut sessions = Vec::new();
    let mut logs = Vec::new();
    for id in 1..=3 {
        let (mut session, events) = started_in(ChannelId(id));
        store.save(&session, &events).unwrap();
        let mut log = events;
        for events in skips(&mut session, &config, rounds) {
            store.save(&session, &events).unwrap();
            log.extend(events);
        }
        sessions.push(session);
        logs.push(log);
    }
    (sessions, logs)
}

#[test]
fn a_journal_past_its_size_is_replaced_so_it_stays_small_and_a_restart_recovers_everything() {
    let (dir, store) = store_rotating_at(8 * 1024, NEVER);
    let (sessions, logs) = busy_channels(&store, 20);
    let sizes = journal_sizes(dir.path());
    assert_eq!(sizes.len(), 1, "the old journals are gone");
    assert!(sizes[0] < 8 * 1024, "{} bytes: replaced once past its bound", sizes[0]);
    let first_seq = journal::list_journals(dir.path()).unwrap()[0].0;
    assert!(first_seq > 20, "it was replaced many times (this one begins at save {first_seq})");

    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.load_all().unwrap().sessions, sessions);
    for (id, log) in (1..=3).zip(&logs) {
        assert_eq!(&store.read_log(ChannelId(id)).unwrap(), log, "channel {id}: every event once");
    }
}

#[test]
fn a_journal_older_than_its_age_is_replaced_and_a_young_small_one_is_not() {
    let (dir, store) = store_rotating_at(u64::MAX, Duration::ZERO);
    busy_channels(&store, 2);
    assert_eq!(journal_sizes(dir.path()), [0], "replaced after every save, however small");

    let (dir, store) = store_rotating_at(u64::MAX, NEVER);
    busy_channels(&store, 2);
    assert_eq!(journal_files(dir.path()).len(), 1);
    assert_eq!(journal::list_journals(dir.path()).unwrap()[0].0, 1, "never replaced");
    assert_eq!(std::fs::read_to_string(&journal_files(dir.path())[0]).unwrap().lines().count(), 9);
}

#[test]
fn a_crash_before_the_old_journal_is_deleted_loses_nothing_and_doubles_nothing() {
    let (dir, store) = store_rotating_at(u64::MAX, NEVER);
    let (mut sessions, mut logs) = busy_channels(&store, 3);
    let old = journal_files(dir.path()).remove(0);
    let old_bytes = std::fs::read(&old).unwrap();
    store.checkpoint().unwrap();
    assert!(!old.exists());
    let config = Config::default();
    for (session, log) in sessions.iter_mut().zip(&mut logs) {
        for events in skips(session, &config, 2) {
            store.save(session, &events).unwrap();
            log.extend(events);
        }
    }
    drop(store);
    // The crash came after the new journal began and before the old one was deleted.
    std::fs::write(&old, old_bytes).unwrap();

    let store = Store::open(dir.path()).unwrap();
    let report = store.load_all().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.sessions, sessions);
    for (id, log) in (1..=3).zip(&logs) {
        assert_eq!(&store.read_log(ChannelId(id)).unwrap(), log, "channel {id}");
    }
    assert_eq!(journal_sizes(dir.path()), [0], "both replayed, a fresh one started");
}

#[test]
fn checkpoints_still_waiting_are_carried_into_the_new_journal_before_the_old_one_goes() {
    let (dir, store) = store_rotating_at(u64::MAX, Duration::ZERO);
    let (session, events) = started();
    let item = crate::store::commit::SaveItem { session: &session, events: &events };
    store.commit(&[item], |results| assert!(results.iter().all(Result::is_ok)));
    // Journaled, its checkpoint not written yet: the journal is replaced and the old one deleted meanwhile.
    let old = journal_files(dir.path()).remove(0);
    store.rotate_if_due().expect("due").finish().unwrap();
    assert!(!old.exists());
    assert!(!dir.path().join("channels/42.json").exists(), "still not written");
    drop(store);

    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.load_all().unwrap().sessions, [session], "the new journal carried it");
    assert_eq!(store.read_log(CHANNEL).unwrap(), events);
}

#[tokio::test]
async fn the_writer_replaces_a_full_journal_between_batches_and_flush_leaves_it_empty() {
    let (dir, store) = store_rotating_at(4 * 1024, NEVER);
    let writer = Writer::spawn(store.clone());
    let config = Config::default();
    let mut expected = Vec::new();
    for id in 1..=3 {
        let (mut session, started_events) = started_in(ChannelId(id));
        writer.save_durable(session.clone(), started_events.clone()).await.unwrap();
        let mut log = started_events;
        for events in skips(&mut session, &config, 15) {
            writer.save_durable(session.clone(), events.clone()).await.unwrap();
            log.extend(events);
        }
        expected.push((session, log));
    }
    assert!(journal::list_journals(dir.path()).unwrap().last().unwrap().0 > 1, "replaced while saving");
    writer.flush().await;
    assert_eq!(journal_sizes(dir.path()), [0], "flush makes the checkpoints durable and empties the journal");

    let store = Store::open(dir.path()).unwrap();
    let sessions: Vec<Session> = expected.iter().map(|(s, _)| s.clone()).collect();
    assert_eq!(store.load_all().unwrap().sessions, sessions);
    for (session, log) in &expected {
        assert_eq!(&store.read_log(session.channel_id).unwrap(), log);
    }
}

#[test]
fn a_failed_carry_whose_new_journal_survives_never_has_its_copies_replayed_over_later_saves() {
    let (dir, store) = store_rotating_at(u64::MAX, Duration::ZERO);
    let (mut session, events) = started();
    let commit = |session: &Session, events: &[HistoryEvent]| {
        let item = crate::store::commit::SaveItem { session, events };
        store.commit(&[item], |results| assert!(results.iter().all(Result::is_ok)));
    };
    commit(&session, &events);
    let carried = (session.clone(), events.clone());
    store.probe.failing_appends.store(1, std::sync::atomic::Ordering::SeqCst);
    assert!(store.rotate_if_due().is_none(), "the carry failed, so the journal goes on");
    let config = Config::default();
    let later = skips(&mut session, &config, 1).remove(0);
    commit(&session, &later);
    // A second failure kept the new journal from being deleted, then the process died: the file holds the copy of
    // the first save it was given the number 2 for.
    let (carried_session, carried_events) = carried;
    let record = crate::store::record::encode_record(
        2,
        CHANNEL,
        0,
        &crate::store::record::encode_events(CHANNEL, &carried_events).unwrap(),
        &crate::store::record::encode_session(&carried_session).unwrap(),
    );
    std::fs::write(journal::journal_path(dir.path(), 2), journal::line(&record)).unwrap();
    drop(store);

    let store = Store::open(dir.path()).unwrap();
    let report = store.load_all().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.sessions, [session], "the later save, not the stale copy");
    assert_eq!(store.read_log(CHANNEL).unwrap(), [events, later].concat(), "every event once");
}

#[test]
fn a_failed_start_of_a_new_journal_is_not_tried_again_at_every_batch() {
    let (dir, store) = store_rotating_at(u64::MAX, Duration::ZERO);
    let (session, events) = started();
    store.commit(&[crate::store::commit::SaveItem { session: &session, events: &events }], |_| {});
    store.probe.failing_appends.store(1, std::sync::atomic::Ordering::SeqCst);
    assert!(store.rotate_if_due().is_none(), "the carry failed, so the journal goes on");
    let syncs = store.probe.syncs.load(std::sync::atomic::Ordering::SeqCst);
    assert!(store.rotate_if_due().is_none(), "not tried again at once");
    assert_eq!(store.probe.syncs.load(std::sync::atomic::Ordering::SeqCst), syncs, "nothing written nor synced");
    assert_eq!(journal_files(dir.path()).len(), 1);

    // Once the wait is over, the next batch tries again.
    store.recovered().unwrap().rotation_failed_at = Some(std::time::Instant::now() - Duration::from_secs(6));
    store.rotate_if_due().expect("tried again, and it works").finish().unwrap();
    let journals = journal::list_journals(dir.path()).unwrap();
    assert_eq!(journals.len(), 1, "the old journal gone");
    assert!(journals[0].0 > 1, "a new one, begun at save {}", journals[0].0);
}

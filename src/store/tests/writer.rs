//! The writer thread: durable saves on disk when they resolve, many channels in one group commit (one fdatasync),
//! lazy saves delayed and superseded, a failed journal answered with its error, a checkpoint that cannot be written
//! failing nothing, everything queued written at the end.

use super::*;
use crate::store::writer::{CHECKPOINT_DELAY, Queue, Request};
use std::time::Duration;
use tokio::sync::oneshot;

/// Long enough that a lazy save is never written by its delay during a test.
const NEVER: Duration = Duration::from_secs(3600);

/// The channel's session file, once the batch being written (if any) has its checkpoints: a durable save is answered
/// as soon as it is in the journal, a moment before its session file is replaced.
fn session_file(store: &Store, channel: ChannelId) -> Option<Session> {
    let _settled = store.settled_for(channel);
    let bytes = std::fs::read(store.session_path(channel)).ok()?;
    Some(serde_json::from_slice(&bytes).unwrap())
}

fn durable(session: &Session, events: &[HistoryEvent]) -> (Request, oneshot::Receiver<Result<(), StoreError>>) {
    let (done, answer) = oneshot::channel();
    (Request::Save { session: Box::new(session.clone()), events: events.to_vec(), done: Some(done) }, answer)
}

fn lazy(session: &Session) -> Request {
    Request::Save { session: Box::new(session.clone()), events: Vec::new(), done: None }
}

/// A durable save of `session` with `events`, journaled in a batch of its own (its answer unread).
fn journaled(queue: &mut Queue, store: &Store, session: &Session, events: &[HistoryEvent]) {
    let (request, _answer) = durable(session, events);
    queue.accept(request);
    queue.commit(store, false);
}

/// How many checkpoints the store has written so far.
fn checkpoints_written(store: &Store) -> u64 {
    store.probe.checkpoints.load(std::sync::atomic::Ordering::Relaxed)
}

/// Found by a review: a panic in the writer thread left the bot running with every save failing for ever (each
/// channel's announcements held back, nothing telling the process to restart and recover).
#[tokio::test]
async fn a_writer_thread_that_panics_fails_the_saves_waiting_and_says_it_stopped() {
    let (_dir, store) = open_store();
    let writer = Writer::spawn(store.clone());
    let (session, events) = started();
    writer.save_durable(session.clone(), events.clone()).await.unwrap();
    let running = tokio::time::timeout(Duration::from_millis(50), writer.stopped()).await;
    assert!(running.is_err(), "a writer at work has not stopped");
    store.probe.panicking_append.store(true, std::sync::atomic::Ordering::SeqCst);
    let failed = writer.save_durable(session.clone(), Vec::new()).await;
    assert!(matches!(failed, Err(StoreError::WriterStopped)), "{failed:?}");
    tokio::time::timeout(Duration::from_secs(10), writer.stopped()).await.expect("said to have stopped");
    tokio::time::timeout(Duration::from_secs(10), writer.clone().stopped()).await.expect("to every handle");
}

#[tokio::test]
async fn a_durable_save_is_on_disk_with_its_events_when_it_resolves() {
    let (_dir, store) = open_store();
    let writer = Writer::spawn(store.clone());
    let (session, events) = started();
    writer.save_durable(session.clone(), events.clone()).await.unwrap();
    assert_eq!(session_file(&store, CHANNEL), Some(session));
    assert_eq!(store.read_log(CHANNEL).unwrap(), events);
}

#[tokio::test]
async fn many_channels_saved_at_once_are_all_written_and_each_waiter_is_answered() {
    let (_dir, store) = open_store();
    let writer = Writer::spawn(store.clone());
    let mut saves = tokio::task::JoinSet::new();
    for id in 1..=100 {
        let writer = writer.clone();
        let (session, events) = started_in(ChannelId(id));
        saves.spawn(async move { writer.save_durable(session, events).await.map(|()| id) });
    }
    let mut answered: Vec<u64> = saves.join_all().await.into_iter().map(Result::unwrap).collect();
    answered.sort_unstable();
    assert_eq!(answered, (1..=100).collect::<Vec<_>>());
    for id in 1..=100 {
        let (session, events) = started_in(ChannelId(id));
        assert_eq!(session_file(&store, ChannelId(id)), Some(session), "channel {id}");
        assert_eq!(store.read_log(ChannelId(id)).unwrap(), events, "channel {id}");
    }
}

#[test]
fn one_batch_writes_every_queued_channel_once_with_its_events_in_order_and_answers_every_waiter() {
    let (_dir, store) = open_store();
    let config = Config::default();
    let mut queue = Queue::new(NEVER);
    let mut answers = Vec::new();
    let mut expected = Vec::new();
    for id in 1..=20 {
        let (mut session, started_events) = started_in(ChannelId(id));
        let (request, answer) = durable(&session, &started_events);
        queue.accept(request);
        answers.push(answer);
        // A second durable save of the same channel before the batch: one write, both waiters answered.
        let skipped = skips(&mut session, &config, 1).remove(0);
        let (request, answer) = durable(&session, &skipped);
        queue.accept(request);
        answers.push(answer);
        expected.push((session, [started_events, skipped].concat()));
    }
    queue.commit(&store, false);
    for mut answer in answers {
        assert!(matches!(answer.try_recv(), Ok(Ok(()))), "every waiter is answered by the batch");
    }
    for (session, events) in expected {
        let channel = session.channel_id;
        assert_eq!(session_file(&store, channel), Some(session), "the latest session of channel {channel}");
        assert_eq!(store.read_log(channel).unwrap(), events, "events of channel {channel}, in order");
    }
}

#[test]
fn saves_queued_together_cost_one_fdatasync_whatever_their_number() {
    let (_dir, store) = open_store();
    let mut queue = Queue::new(NEVER);
    for n in [1, 10, 100] {
        let mut answers = Vec::new();
        for id in 1..=n {
            let (session, events) = started_in(ChannelId(1000 * n + id));
            let (request, answer) = durable(&session, &events);
            queue.accept(request);
            answers.push(answer);
        }
        let before = store.journal_syncs();
        queue.commit(&store, false);
        assert_eq!(store.journal_syncs() - before, 1, "{n} saves in one batch");
        for mut answer in answers {
            assert!(matches!(answer.try_recv(), Ok(Ok(()))));
        }
        for id in 1..=n {
            let (session, events) = started_in(ChannelId(1000 * n + id));
            assert_eq!(session_file(&store, session.channel_id), Some(session));
            assert_eq!(store.read_log(ChannelId(1000 * n + id)).unwrap(), events);
        }
    }
    // Lazy saves alone, when they are due, cost one too.
    for id in 1..=20 {
        queue.accept(lazy(&started_in(ChannelId(id)).0));
    }
    let before = store.journal_syncs();
    queue.commit(&store, true);
    assert_eq!(store.journal_syncs() - before, 1);
}

#[tokio::test]
async fn durable_saves_sent_at_once_through_the_writer_share_fdatasyncs() {
    let (_dir, store) = open_store();
    let writer = Writer::spawn(store.clone());
    let mut saves = tokio::task::JoinSet::new();
    for id in 1..=200 {
        let writer = writer.clone();
        let (session, events) = started_in(ChannelId(id));
        saves.spawn(async move { writer.save_durable(session, events).await });
    }
    for saved in saves.join_all().await {
        saved.unwrap();
    }
    // The thread takes what is queued when it is free: at worst a first save alone, then the rest together.
    let syncs = store.journal_syncs();
    assert!((1..=100).contains(&syncs), "200 saves cost {syncs} fdatasyncs");
}

#[test]
fn a_journal_that_cannot_be_written_fails_every_save_of_its_batch_and_none_of_them_counts() {
    let (dir, store) = open_store();
    let config = Config::default();
    let (mut session, started_events) = started();
    store.save(&session, &started_events).unwrap();
    let journaled = std::fs::read(journal_files(dir.path()).remove(0)).unwrap();
    let (other, other_events) = started_in(ChannelId(8));

    let mut queue = Queue::new(NEVER);
    let failed = skips(&mut session, &config, 1).remove(0);
    let (request, mut first) = durable(&session, &failed);
    queue.accept(request);
    let (request, mut second) = durable(&other, &other_events);
    queue.accept(request);
    store.probe.failing_appends.store(1, std::sync::atomic::Ordering::SeqCst);
    queue.commit(&store, false);
    for answer in [&mut first, &mut second] {
        let error = answer.try_recv().unwrap().unwrap_err();
        assert!(error.to_string().contains("append to the journal"), "the error names the journal: {error}");
    }
    assert_eq!(std::fs::read(journal_files(dir.path()).remove(0)).unwrap(), journaled, "nothing of the batch");
    assert_eq!(session_file(&store, ChannelId(8)), None, "no checkpoint for a save that failed");
    assert_eq!(store.read_log(CHANNEL).unwrap(), started_events);

    // Tried again (as the actor does: the same events and what came since), it is logged once; a restart agrees.
    let next = skips(&mut session, &config, 1).remove(0);
    store.save(&session, &[failed.clone(), next.clone()].concat()).unwrap();
    let store = open_at(dir.path());
    assert_eq!(store.load_all().unwrap().sessions, [session]);
    assert_eq!(store.read_log(CHANNEL).unwrap(), [started_events, failed, next].concat());
}

#[test]
fn a_checkpoint_that_cannot_be_written_fails_no_save_and_spares_the_others() {
    let (dir, store) = open_store();
    // A folder where channel 7's spare copy should be: its new version cannot be written.
    let obstacle = dir.path().join("channels/7.json.spare");
    std::fs::create_dir_all(obstacle.join("in-the-way")).unwrap();
    let mut queue = Queue::new(NEVER);
    let (broken, broken_events) = started_in(ChannelId(7));
    let (fine, fine_events) = started_in(ChannelId(8));
    let (request, mut broken_answer) = durable(&broken, &broken_events);
    queue.accept(request);
    let (request, mut fine_answer) = durable(&fine, &fine_events);
    queue.accept(request);
    queue.commit(&store, false);

    assert!(matches!(broken_answer.try_recv(), Ok(Ok(()))), "the journal holds the save: it is durable");
    assert!(matches!(fine_answer.try_recv(), Ok(Ok(()))));
    assert_eq!(session_file(&store, ChannelId(8)), Some(fine));
    assert_eq!(store.read_log(ChannelId(8)).unwrap(), fine_events);
    assert_eq!(store.read_log(ChannelId(7)).unwrap(), broken_events, "its log is written all the same");

    assert_eq!(session_file(&store, ChannelId(7)), None);
    assert_eq!(store.load_one(ChannelId(7)).unwrap(), Some(broken.clone()), "a load gets the journal's session");

    // While it stands, a start cannot write the session the journal holds, and says which file.
    let error = open_at(dir.path()).load_all().unwrap_err().to_string();
    assert!(error.contains("7.json.spare"), "{error}");
    // Once it is gone, the next start writes it from the journal.
    std::fs::remove_dir_all(&obstacle).unwrap();
    let store = open_at(dir.path());
    let report = store.load_all().unwrap();
    assert_eq!(report.sessions.iter().find(|s| s.channel_id == ChannelId(7)), Some(&broken));
    assert_eq!(store.read_log(ChannelId(7)).unwrap(), broken_events, "no event twice");
}

#[test]
fn a_checkpoint_that_cannot_be_written_is_carried_into_the_next_journal_and_written_once_it_can() {
    let (dir, store) = open_store();
    let obstacle = dir.path().join("channels/7.json.spare");
    std::fs::create_dir_all(obstacle.join("in-the-way")).unwrap();
    let (broken, broken_events) = started_in(ChannelId(7));
    store.save(&broken, &broken_events).unwrap();
    store.checkpoint().unwrap();
    let journals = journal_files(dir.path());
    assert_eq!(journals.len(), 1, "the old journal went once the checkpoints were synced");
    let carried = std::fs::read_to_string(&journals[0]).unwrap();
    assert_eq!(carried.lines().count(), 1, "the unwritten checkpoint's save goes on in the new journal: {carried}");

    std::fs::remove_dir_all(&obstacle).unwrap();
    store.checkpoint().unwrap();
    assert_eq!(session_file(&store, ChannelId(7)), Some(broken));
    assert_eq!(std::fs::read(&journal_files(dir.path())[0]).unwrap(), b"", "nothing is left to carry");
    assert_eq!(store.read_log(ChannelId(7)).unwrap(), broken_events);
}

#[test]
fn a_channel_saved_in_several_batches_before_its_checkpoint_costs_one_checkpoint_write() {
    let (_dir, store) = open_store();
    let config = Config::default();
    let mut queue = Queue::new(NEVER);
    let (mut session, started_events) = started();
    let mut logged = started_events.clone();
    journaled(&mut queue, &store, &session, &started_events);
    for events in skips(&mut session, &config, 3) {
        journaled(&mut queue, &store, &session, &events);
        logged.extend(events);
    }
    let before = checkpoints_written(&store);
    assert_eq!(store.write_checkpoints(Duration::MAX, Duration::ZERO), None, "nothing left waiting");
    assert_eq!(checkpoints_written(&store) - before, 1);
    assert_eq!(session_file(&store, CHANNEL), Some(session));
    assert_eq!(store.read_log(CHANNEL).unwrap(), logged, "every batch's events, in order, once");
}

#[test]
fn a_checkpoint_waits_for_its_delay_from_its_first_save_and_saves_meanwhile_join_it() {
    let (_dir, store) = open_store();
    let config = Config::default();
    let mut queue = Queue::new(NEVER);
    let (mut session, started_events) = started();
    let before_first_save = std::time::Instant::now();
    journaled(&mut queue, &store, &session, &started_events);
    let written = checkpoints_written(&store);
    let due = store.write_checkpoints(Duration::MAX, NEVER).expect("the save waits");
    assert!(due >= before_first_save + NEVER, "due a delay after its save");
    assert_eq!(checkpoints_written(&store), written, "not due: nothing written");
    assert!(!store.session_path(CHANNEL).exists());
    let skipped = skips(&mut session, &config, 1).remove(0);
    journaled(&mut queue, &store, &session, &skipped);
    assert_eq!(store.write_checkpoints(Duration::MAX, NEVER), Some(due), "still due a delay after its first save");
    assert_eq!(store.write_checkpoints(Duration::MAX, Duration::ZERO), None, "due: written, nothing left");
    assert_eq!(checkpoints_written(&store) - written, 1, "two saves, one write");
    let on_disk = std::fs::read(store.session_path(CHANNEL)).unwrap();
    assert_eq!(serde_json::from_slice::<Session>(&on_disk).unwrap(), session);
    assert_eq!(store.read_log(CHANNEL).unwrap(), [started_events, skipped].concat());
}

#[test]
fn a_round_of_checkpoints_stops_once_its_time_is_spent_having_written_at_least_one() {
    let (_dir, store) = open_store();
    let mut queue = Queue::new(NEVER);
    for channel in (1..=3).map(ChannelId) {
        let (session, events) = started_in(channel);
        journaled(&mut queue, &store, &session, &events);
    }
    let before = checkpoints_written(&store);
    let due = store.write_checkpoints(Duration::ZERO, Duration::ZERO).expect("two still wait");
    assert!(due <= std::time::Instant::now(), "already due: the writer comes back for them at once");
    assert_eq!(checkpoints_written(&store) - before, 1, "a round with no time left writes one, the oldest");
    assert!(store.session_path(ChannelId(1)).exists() && !store.session_path(ChannelId(2)).exists());
    assert_eq!(store.write_checkpoints(Duration::MAX, Duration::ZERO), None, "nothing left waiting");
    assert_eq!(checkpoints_written(&store) - before, 3);
}

#[test]
fn past_the_bound_of_waiting_checkpoints_the_oldest_are_written_before_their_delay() {
    use crate::store::checkpoint::WAITING_MAX;
    let (_dir, store) = open_store();
    let mut queue = Queue::new(NEVER);
    let channels = (1..=WAITING_MAX as u64 + 2).map(ChannelId);
    for channel in channels.clone() {
        let (session, events) = started_in(channel);
        journaled(&mut queue, &store, &session, &events);
    }
    // A round writes one, however little time it has, and the writer comes back at once for the next.
    let due = store.write_checkpoints(Duration::ZERO, NEVER).expect("the rest wait");
    assert!(due <= std::time::Instant::now(), "still past the bound: due at once");
    let due = store.write_checkpoints(Duration::ZERO, NEVER).expect("the rest wait");
    assert!(due > std::time::Instant::now(), "within the bound, the rest wait for their delay");
    let on_disk: Vec<ChannelId> = channels.filter(|c| store.session_path(*c).exists()).collect();
    assert_eq!(on_disk, [ChannelId(1), ChannelId(2)], "the two oldest, written to come back to the bound");
}

#[tokio::test]
async fn the_writer_writes_a_checkpoint_once_its_delay_is_over_and_not_before() {
    let (_dir, store) = open_store();
    let on_disk = |channel| store.session_path(channel).exists();
    // Held back: after a later batch the first channel's files are still not written; a flush writes them.
    let (writer, _thread) = Writer::spawn_joinable(store.clone(), NEVER, NEVER);
    let (first, events) = started_in(ChannelId(1));
    writer.save_durable(first, events).await.unwrap();
    let (second, events) = started_in(ChannelId(2));
    writer.save_durable(second, events).await.unwrap();
    assert!(!on_disk(ChannelId(1)) && !on_disk(ChannelId(2)), "in the journal only, until the delay is over");
    writer.flush().await;
    assert!(on_disk(ChannelId(1)) && on_disk(ChannelId(2)), "a flush writes every checkpoint");
    // A short delay: written with no other request to wake the thread.
    let (writer, _thread) = Writer::spawn_joinable(store.clone(), NEVER, Duration::from_millis(20));
    let (third, events) = started_in(ChannelId(3));
    writer.save_durable(third, events).await.unwrap();
    let written = async {
        while !on_disk(ChannelId(3)) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), written).await.expect("the writer wakes for a checkpoint due");
}

#[test]
fn the_latest_session_wins_whichever_path_carries_it() {
    let (_dir, store) = open_store();
    let (mut session, events) = started();
    // A lazy save queued after a durable one of the same channel: the durable batch writes the lazy session.
    let mut queue = Queue::new(NEVER);
    let (request, mut answer) = durable(&session, &events);
    queue.accept(request);
    session.round = 5;
    queue.accept(lazy(&session));
    queue.commit(&store, false);
    assert!(matches!(answer.try_recv(), Ok(Ok(()))));
    assert_eq!(session_file(&store, CHANNEL), Some(session.clone()));
    assert_eq!(store.read_log(CHANNEL).unwrap(), events, "the durable save's events are logged");
    assert!(queue.is_empty(), "nothing of the channel is left to write later");
}

#[tokio::test]
async fn a_durable_save_supersedes_a_queued_lazy_one_of_its_channel() {
    let (_dir, store) = open_store();
    let writer = Writer::spawn_with_delay(store.clone(), NEVER);
    let (mut session, events) = started();
    session.round = 1;
    writer.save_lazy(session.clone());
    session.round = 2;
    writer.save_durable(session.clone(), events).await.unwrap();
    assert_eq!(session_file(&store, CHANNEL), Some(session.clone()));
    writer.flush().await;
    assert_eq!(session_file(&store, CHANNEL), Some(session), "the older lazy session is not written afterwards");
}

#[tokio::test]
async fn lazy_saves_wait_for_their_delay_and_other_channels_durable_saves_do_not_write_them() {
    let (_dir, store) = open_store();
    let writer = Writer::spawn_with_delay(store.clone(), NEVER);
    let (idle, _) = started_in(ChannelId(1));
    writer.save_lazy(idle.clone());
    let (busy, events) = started_in(ChannelId(2));
    writer.save_durable(busy.clone(), events).await.unwrap();
    assert_eq!(session_file(&store, ChannelId(2)), Some(busy));
    assert_eq!(session_file(&store, ChannelId(1)), None, "a lazy save is not written at once");
    writer.flush().await;
    assert_eq!(session_file(&store, ChannelId(1)), Some(idle), "flush writes what is queued");
}

#[tokio::test]
async fn a_lazy_save_is_written_within_its_delay() {
    let (_dir, store) = open_store();
    let writer = Writer::spawn_with_delay(store.clone(), Duration::from_millis(20));
    let (session, _) = started();
    writer.save_lazy(session.clone());
    let written = async {
        while session_file(&store, CHANNEL).is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    // Generous against a loaded machine; without the delay's timer it would never come.
    tokio::time::timeout(Duration::from_secs(5), written).await.expect("the lazy save was written");
    assert_eq!(session_file(&store, CHANNEL), Some(session));
    drop(writer);
}

#[test]
fn dropping_every_handle_writes_what_is_queued_before_the_thread_ends() {
    // Dropped at once (the thread sees the request and the end together) and after the thread took the request
    // and went back to waiting for the lazy delay.
    for pause in [Duration::ZERO, Duration::from_millis(100)] {
        let (_dir, store) = open_store();
        let (writer, thread) = Writer::spawn_joinable(store.clone(), NEVER, CHECKPOINT_DELAY);
        let (session, _) = started();
        writer.clone().save_lazy(session.clone());
        std::thread::sleep(pause);
        drop(writer);
        thread.join().unwrap();
        assert_eq!(session_file(&store, CHANNEL), Some(session), "dropped after {pause:?}");
    }
}

#[tokio::test]
async fn after_a_burst_of_saves_the_idle_writer_gives_back_the_room_of_its_tables() {
    let (_dir, store) = open_store();
    let writer = Writer::spawn_with_delay(store.clone(), NEVER);
    let mut saves = tokio::task::JoinSet::new();
    for id in 1..=2_000 {
        let writer = writer.clone();
        let (session, events) = started_in(ChannelId(id));
        saves.spawn(async move { writer.save_durable(session, events).await });
    }
    saves.join_all().await.into_iter().for_each(Result::unwrap);
    writer.flush().await;
    // Once the first flush is answered the thread finds nothing queued and nothing due, shrinks its tables, then
    // takes the second one: after it, the burst's room is gone.
    writer.flush().await;
    {
        let commits = store.settled();
        let commits = commits.as_ref().unwrap();
        assert!(commits.unwritten.is_empty() && commits.queue.is_empty());
        assert_eq!(commits.unwritten.capacity(), 0, "the checkpoints' table");
        assert_eq!(commits.queue.capacity(), 0, "the checkpoints' order");
        assert_eq!(commits.log_ends.len(), 2_000, "where each log ends is kept");
    }
    for id in [1, 1_000, 2_000] {
        assert_eq!(session_file(&store, ChannelId(id)), Some(started_in(ChannelId(id)).0), "channel {id}");
    }
}

#[test]
fn an_emptied_queue_gives_back_the_room_a_burst_grew() {
    let (_dir, store) = open_store();
    let mut queue = Queue::new(NEVER);
    for id in 1..=1_000 {
        queue.accept(lazy(&started_in(ChannelId(id)).0));
    }
    queue.commit(&store, true);
    assert!(queue.is_empty());
    assert!(queue.capacity() >= 1_000, "a commit keeps the room, for the next batch under load");
    queue.shrink_to_fit();
    assert_eq!(queue.capacity(), 0);
}

#[test]
fn the_writer_reads_ahead_the_logs_of_the_running_sessions_loaded_when_asked() {
    let (dir, store) = open_store();
    for id in 1..=12 {
        let (session, events) = started_in(ChannelId(id));
        store.save(&session, &events).unwrap();
    }
    let store = open_at(dir.path());
    let (writer, thread) = Writer::spawn_joinable(store.clone(), NEVER, CHECKPOINT_DELAY);
    assert_eq!(store.load_all().unwrap().sessions.len(), 12);
    writer.look_ahead();
    // However soon the thread sees the end, the round after the request reads up to 16 logs.
    drop(writer);
    thread.join().unwrap();
    assert_eq!(store.probe.log_looks.load(std::sync::atomic::Ordering::Relaxed), 12);
}

#[tokio::test]
async fn a_lazy_save_that_could_not_be_written_is_kept_and_written_at_the_next_round() {
    let (_dir, store) = open_store();
    let (session, _) = started();
    let mut queue = Queue::new(NEVER);
    queue.accept(lazy(&session));
    store.probe.failing_appends.store(1, std::sync::atomic::Ordering::SeqCst);
    queue.commit(&store, true);
    assert_eq!(session_file(&store, CHANNEL), None, "precondition: the first try failed");
    assert!(!queue.is_empty(), "kept for another try: its actor has no reason to save an idle channel again");
    queue.commit(&store, true);
    assert_eq!(session_file(&store, CHANNEL), Some(session), "written at the next round");
    assert!(queue.is_empty());
}

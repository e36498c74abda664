//! The writer thread: durable saves on disk when they resolve, many channels in one group commit, lazy saves
//! delayed and superseded, a failed channel answered with its error, everything queued written at the end.

use super::*;
use crate::store::writer::{Queue, Request};
use std::time::Duration;
use tokio::sync::oneshot;

/// Long enough that a lazy save is never written by its delay during a test.
const NEVER: Duration = Duration::from_secs(3600);

fn session_file(dir: &tempfile::TempDir, channel: ChannelId) -> Option<Session> {
    let bytes = std::fs::read(dir.path().join(format!("channels/{channel}.json"))).ok()?;
    Some(serde_json::from_slice(&bytes).unwrap())
}

fn durable(session: &Session, events: &[HistoryEvent]) -> (Request, oneshot::Receiver<Result<(), StoreError>>) {
    let (done, answer) = oneshot::channel();
    (Request::Save { session: Box::new(session.clone()), events: events.to_vec(), done: Some(done) }, answer)
}

fn lazy(session: &Session) -> Request {
    Request::Save { session: Box::new(session.clone()), events: Vec::new(), done: None }
}

#[tokio::test]
async fn a_durable_save_is_on_disk_with_its_events_when_it_resolves() {
    let (dir, store) = open_store();
    let writer = Writer::spawn(store.clone());
    let (session, events) = started();
    writer.save_durable(session.clone(), events.clone()).await.unwrap();
    assert_eq!(session_file(&dir, CHANNEL), Some(session));
    assert_eq!(store.read_log(CHANNEL).unwrap(), events);
}

#[tokio::test]
async fn many_channels_saved_at_once_are_all_written_and_each_waiter_is_answered() {
    let (dir, store) = open_store();
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
        assert_eq!(session_file(&dir, ChannelId(id)), Some(session), "channel {id}");
        assert_eq!(store.read_log(ChannelId(id)).unwrap(), events, "channel {id}");
    }
}

#[test]
fn one_batch_writes_every_queued_channel_once_with_its_events_in_order_and_answers_every_waiter() {
    let (dir, store) = open_store();
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
        assert_eq!(session_file(&dir, channel), Some(session), "the latest session of channel {channel}");
        assert_eq!(store.read_log(channel).unwrap(), events, "events of channel {channel}, in order");
    }
}

#[test]
fn a_failed_write_answers_its_channel_with_the_error_and_spares_the_others() {
    let (dir, store) = open_store();
    std::fs::create_dir_all(dir.path().join("channels/7.json/in-the-way")).unwrap();
    let mut queue = Queue::new(NEVER);
    let (broken, broken_events) = started_in(ChannelId(7));
    let (fine, fine_events) = started_in(ChannelId(8));
    let (request, mut broken_first) = durable(&broken, &broken_events);
    queue.accept(request);
    let (request, mut broken_second) = durable(&broken, &[]);
    queue.accept(request);
    let (request, mut fine_answer) = durable(&fine, &fine_events);
    queue.accept(request);
    queue.commit(&store, false);

    for answer in [&mut broken_first, &mut broken_second] {
        let error = answer.try_recv().unwrap().unwrap_err();
        assert!(error.to_string().contains("7.json"), "the error names the file: {error}");
    }
    assert!(!dir.path().join("channels/7.history.jsonl").exists(), "nothing logged for the failed channel");
    assert!(matches!(fine_answer.try_recv(), Ok(Ok(()))));
    assert_eq!(session_file(&dir, ChannelId(8)), Some(fine));
    assert_eq!(store.read_log(ChannelId(8)).unwrap(), fine_events);
}

#[test]
fn the_latest_session_wins_whichever_path_carries_it() {
    let (dir, store) = open_store();
    let (mut session, events) = started();
    // A lazy save queued after a durable one of the same channel: the durable batch writes the lazy session.
    let mut queue = Queue::new(NEVER);
    let (request, mut answer) = durable(&session, &events);
    queue.accept(request);
    session.round = 5;
    queue.accept(lazy(&session));
    queue.commit(&store, false);
    assert!(matches!(answer.try_recv(), Ok(Ok(()))));
    assert_eq!(session_file(&dir, CHANNEL), Some(session.clone()));
    assert_eq!(store.read_log(CHANNEL).unwrap(), events, "the durable save's events are logged");
    assert!(queue.is_empty(), "nothing of the channel is left to write later");
}

#[tokio::test]
async fn a_durable_save_supersedes_a_queued_lazy_one_of_its_channel() {
    let (dir, store) = open_store();
    let writer = Writer::spawn_with_delay(store, NEVER);
    let (mut session, events) = started();
    session.round = 1;
    writer.save_lazy(session.clone());
    session.round = 2;
    writer.save_durable(session.clone(), events).await.unwrap();
    assert_eq!(session_file(&dir, CHANNEL), Some(session.clone()));
    writer.flush().await;
    assert_eq!(session_file(&dir, CHANNEL), Some(session), "the older lazy session is not written afterwards");
}

#[tokio::test]
async fn lazy_saves_wait_for_their_delay_and_other_channels_durable_saves_do_not_write_them() {
    let (dir, store) = open_store();
    let writer = Writer::spawn_with_delay(store, NEVER);
    let (idle, _) = started_in(ChannelId(1));
    writer.save_lazy(idle.clone());
    let (busy, events) = started_in(ChannelId(2));
    writer.save_durable(busy.clone(), events).await.unwrap();
    assert_eq!(session_file(&dir, ChannelId(2)), Some(busy));
    assert_eq!(session_file(&dir, ChannelId(1)), None, "a lazy save is not written at once");
    writer.flush().await;
    assert_eq!(session_file(&dir, ChannelId(1)), Some(idle), "flush writes what is queued");
}

#[tokio::test]
async fn a_lazy_save_is_written_within_its_delay() {
    let (dir, store) = open_store();
    let writer = Writer::spawn_with_delay(store, Duration::from_millis(20));
    let (session, _) = started();
    writer.save_lazy(session.clone());
    let written = async {
        while session_file(&dir, CHANNEL).is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    // Generous against a loaded machine; without the delay's timer it would never come.
    tokio::time::timeout(Duration::from_secs(5), written).await.expect("the lazy save was written");
    assert_eq!(session_file(&dir, CHANNEL), Some(session));
    drop(writer);
}

#[test]
fn dropping_every_handle_writes_what_is_queued_before_the_thread_ends() {
    // Dropped at once (the thread sees the request and the end together) and after the thread took the request
    // and went back to waiting for the lazy delay.
    for pause in [Duration::ZERO, Duration::from_millis(100)] {
        let (dir, store) = open_store();
        let (writer, thread) = Writer::spawn_joinable(store, NEVER);
        let (session, _) = started();
        writer.clone().save_lazy(session.clone());
        std::thread::sleep(pause);
        drop(writer);
        thread.join().unwrap();
        assert_eq!(session_file(&dir, CHANNEL), Some(session), "dropped after {pause:?}");
    }
}

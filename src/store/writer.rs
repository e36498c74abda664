//! The writer thread: every disk write of the running bot, on one dedicated std thread, with group commit.
//!
//! Channel actors hand sessions to a cheap cloneable [`Writer`] handle and never block a tokio worker on the disk.
//! The thread takes everything queued, keeps the latest session of each channel (events concatenated in order),
//! appends them all to the journal with ONE fdatasync (`Store::commit`) and answers the waiters. Between batches it
//! writes the checkpoints that have waited [`CHECKPOINT_DELAY`], for about [`CHECKPOINT_ROUND`] at a time, so a new
//! batch never waits for a whole batch of them and a busy channel's files are written once per delay, not at every
//! save. A journal grown past its bound is replaced between batches; the checkpoints it covers are synced on a thread
//! of their own, so the batches go on meanwhile.
//! Lazy saves (activity only: last activity, last handled message) wait up to [`LAZY_SAVE_DELAY`] so that a busy
//! channel costs at most one write per delay, not one fsync per message; a durable save of the same channel carries
//! them sooner. They go through the journal like the others (a batch of lazy saves alone costs one fdatasync too,
//! at most once per delay), so a session file is never ahead of the journal.

use super::commit::SaveItem;
use super::{Store, StoreError};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A lazy save is on disk at most this long after it was queued (or sooner, with a durable save of its channel). The
/// channel actors hold activity for the rest of a second first, so that a burst of it is one copy of the session.
pub const LAZY_SAVE_DELAY: Duration = Duration::from_millis(750);
/// How soon a lazy save that could not be written (a full disk, an I/O error) is tried again: its actor has no more
/// reason to save the channel, which may stay idle, so the writer keeps it (unless a newer save of the channel comes).
const LAZY_RETRY: Duration = Duration::from_secs(5);
/// At most this many queued requests join one batch, so a flood of lazy saves cannot hold back the answers.
const BATCH_REQUESTS_MAX: usize = 10_000;
/// The writer's time spent on checkpoints between two batches (at least one checkpoint): about what a save arriving
/// meanwhile waits for. A checkpoint takes 30 µs to over 1 ms (replacing the session file, appending to the log);
/// rounds of 32 took 6 to 38 ms when 100 busy channels came due together, once a second, and held up every handoff
/// in flight (`bench --only handoff`, the paced row).
const CHECKPOINT_ROUND: Duration = Duration::from_millis(1);
/// History logs read ahead between two batches, after a start (some 25 µs each): what a save then waits for.
const LOOKS_PER_ROUND: usize = 16;
/// How long a channel's journaled save waits before its session file and log are written (saves meanwhile join
/// it): under load, a channel's files are written once per delay instead of once per save, and synced once per
/// journal. With every channel busy, writing and syncing them at each save took about a fifth of the bot's CPU.
pub const CHECKPOINT_DELAY: Duration = Duration::from_secs(1);

pub(super) type Answer = oneshot::Sender<Result<(), StoreError>>;

pub(super) enum Request {
    /// `done` is `None` for a lazy save.
    Save {
        session: Box<Session>,
        events: Vec<HistoryEvent>,
        done: Option<Answer>,
    },
    Flush(oneshot::Sender<()>),
    /// Sessions were loaded: read their channels' logs ahead, between batches (`Store::look_ahead`).
    LookAhead,
}

/// A handle to the writer thread. Cloning is cheap; the thread writes what is queued and ends when every handle is
/// dropped. Call [`Writer::flush`] before the process exits, since exiting does not wait for the thread.
#[derive(Clone, Debug)]
pub struct Writer {
    requests: mpsc::Sender<Request>,
    /// Set when the thread ends: with a handle still held, only by a panic (see [`Writer::stopped`]).
    ended: tokio::sync::watch::Receiver<bool>,
}

/// Tells the handles that the thread ended, however it ends (a panic unwinds through it).
struct EndedGuard(tokio::sync::watch::Sender<bool>);

impl Drop for EndedGuard {
    fn drop(&mut self) {
        self.0.send_replace(true);
        WRITERS_RUNNING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Writer threads of this process that have not ended.
static WRITERS_RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Waits, up to `patience`, until every writer thread of the process has ended: once their handles are dropped
/// they still write what was queued. The demo removes its state folder after this (found by a flaky test: a
/// checkpoint written after the removal made the folder again). True if they all ended.
pub fn writers_ended_within(patience: Duration) -> bool {
    let until = std::time::Instant::now() + patience;
    while WRITERS_RUNNING.load(std::sync::atomic::Ordering::SeqCst) > 0 {
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Save { session, events, done } => f
                .debug_struct("Save")
                .field("channel", &session.channel_id)
                .field("events", &events.len())
                .field("durable", &done.is_some())
                .finish(),
            Request::Flush(_) => f.write_str("Flush"),
            Request::LookAhead => f.write_str("LookAhead"),
        }
    }
}

impl Writer {
    /// Starts the writer thread for `store`, lazy saves written within [`LAZY_SAVE_DELAY`].
    pub fn spawn(store: Store) -> Writer {
        Self::spawn_with_delay(store, LAZY_SAVE_DELAY)
    }

    /// Starts the writer thread with another delay for lazy saves (tests use a short one).
    pub fn spawn_with_delay(store: Store, lazy_delay: Duration) -> Writer {
        Self::spawn_joinable(store, lazy_delay, CHECKPOINT_DELAY).0
    }

    pub(super) fn spawn_joinable(
        store: Store,
        lazy_delay: Duration,
        checkpoint_delay: Duration,
    ) -> (Writer, JoinHandle<()>) {
        let (requests, inbox) = mpsc::channel();
        let (ended_tx, ended) = tokio::sync::watch::channel(false);
        WRITERS_RUNNING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ended_guard = EndedGuard(ended_tx);
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || {
                let _ended = ended_guard;
                run(&store, &inbox, lazy_delay, checkpoint_delay)
            })
            .expect("the operating system refused to start the store writer thread");
        (Writer { requests, ended }, thread)
    }

    /// Resolves if the thread stops while this handle is held: a panic in it (a bug), after which no save can ever
    /// succeed. The bot then exits, so that a restart recovers from the journal, rather than running on with every
    /// channel's announcements held back for ever (found by a review).
    pub async fn stopped(&self) {
        let mut ended = self.ended.clone();
        let _ = ended.wait_for(|ended| *ended).await;
    }

    /// Saves a session whose turn or settings changed, with its new events. Resolves once both are in the journal
    /// and synced (the session file and the log follow, unsynced: a crash replays the journal over them); only then
    /// may the transition's effects be carried out. If this future is dropped early the save still happens.
    pub async fn save_durable(&self, session: Session, events: Vec<HistoryEvent>) -> Result<(), StoreError> {
        let (done, answer) = oneshot::channel();
        self.requests
            .send(Request::Save { session: Box::new(session), events, done: Some(done) })
            .map_err(|_| StoreError::WriterStopped)?;
        answer.await.unwrap_or(Err(StoreError::WriterStopped))
    }

    /// Saves an activity-only change without waiting: on disk within the lazy delay, or with the channel's next
    /// durable save, whichever comes first. A later save of the channel supersedes it. A failure is logged and the
    /// save kept and tried again every few seconds until it is written or superseded (the channel may stay idle).
    pub fn save_lazy(&self, session: Session) {
        let channel = session.channel_id;
        if self.requests.send(Request::Save { session: Box::new(session), events: Vec::new(), done: None }).is_err() {
            tracing::error!(%channel, "the store's writer thread has stopped; this channel's activity is not saved");
        }
    }

    /// Has the thread read ahead, between batches, the history logs of the running sessions just loaded, so that
    /// their first saves (deadlines falling together after a restart) do not wait for those reads.
    pub fn look_ahead(&self) {
        let _ = self.requests.send(Request::LookAhead);
    }

    /// Resolves once everything queued before it (lazy saves included) is on disk, or has failed and been answered
    /// or logged, and the checkpoints are synced and the journal empty (a start after it replays nothing). For
    /// shutdown and tests.
    pub async fn flush(&self) {
        let (done, answer) = oneshot::channel();
        if self.requests.send(Request::Flush(done)).is_err() || answer.await.is_err() {
            tracing::error!("the store's writer thread has stopped; nothing more can be flushed");
        }
    }
}

/// One channel's saves waiting for the next batch: its latest session, every event not yet logged, every waiter.
struct Pending {
    session: Box<Session>,
    events: Vec<HistoryEvent>,
    waiters: Vec<Answer>,
}

/// What the thread holds between batches.
pub(super) struct Queue {
    pending: HashMap<ChannelId, Pending>,
    flushes: Vec<oneshot::Sender<()>>,
    /// When the oldest lazy save still queued must be written.
    lazy_due: Option<Instant>,
    lazy_delay: Duration,
    /// The thread syncing the checkpoints of the journal replaced last, before deleting it.
    retiring: Option<JoinHandle<()>>,
    /// Logs are to be read ahead ([`Request::LookAhead`]).
    look_ahead: bool,
}

/// Rounds of work done by every writer thread of the process (a batch, a round of checkpoints): the allocator's
/// trimmer waits until this stops moving too, since the writer frees a burst's buffers after the channels go quiet.
static ROUNDS: AtomicU64 = AtomicU64::new(0);

/// A number that changes whenever a writer thread did some work: whether the store was busy meanwhile.
pub fn activity() -> u64 {
    ROUNDS.load(Ordering::Relaxed)
}

fn run(store: &Store, inbox: &Receiver<Request>, lazy_delay: Duration, checkpoint_delay: Duration) {
    let mut queue = Queue::new(lazy_delay);
    let mut open = true;
    // When the oldest checkpoint still waiting is due.
    let mut checkpoint_due: Option<Instant> = None;
    // Logs of the channels loaded at start are left to read ahead: the writer does not sleep meanwhile.
    let mut looking = false;
    while open {
        if !queue.anyone_waiting() && checkpoint_due.is_none_or(|due| due > Instant::now()) {
            let look_due = looking.then(Instant::now);
            let next = match [queue.lazy_due, checkpoint_due, look_due].into_iter().flatten().min() {
                None => {
                    // Nothing queued and nothing due: a burst is over, its tables need not keep their room.
                    queue.shrink_to_fit();
                    store.shrink_to_fit();
                    inbox.recv().map_err(|_| RecvTimeoutError::Disconnected)
                }
                Some(due) => inbox.recv_timeout(due.saturating_duration_since(Instant::now())),
            };
            match next {
                Ok(request) => queue.accept(request),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => open = false,
            }
        }
        // Everything already queued joins this batch.
        for _ in 0..BATCH_REQUESTS_MAX {
            match inbox.try_recv() {
                Ok(request) => queue.accept(request),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        // Lazy saves of other channels go with this batch only when they are due (or on flush and at the end):
        // otherwise they would make the durable waiters wait for their fsyncs.
        let everything = !open || !queue.flushes.is_empty() || queue.lazy_due.is_some_and(|due| due <= Instant::now());
        // Counted before anyone is answered, so that whoever sees this round's answer sees it counted.
        ROUNDS.fetch_add(1, Ordering::Relaxed);
        queue.commit(store, everything);
        // Between batches, a few channels' checkpoints and logs read ahead: a save that comes meanwhile waits for
        // these only.
        checkpoint_due = store.write_checkpoints(CHECKPOINT_ROUND, checkpoint_delay);
        looking = (looking || std::mem::take(&mut queue.look_ahead)) && store.look_ahead(LOOKS_PER_ROUND);
    }
    store.write_checkpoints(Duration::MAX, Duration::ZERO);
    queue.wait_for_retiring();
}

impl Queue {
    pub(super) fn new(lazy_delay: Duration) -> Self {
        Queue {
            pending: HashMap::new(),
            flushes: Vec::new(),
            lazy_due: None,
            lazy_delay,
            retiring: None,
            look_ahead: false,
        }
    }

    pub(super) fn accept(&mut self, request: Request) {
        match request {
            Request::Save { session, events, done } => {
                if done.is_none() {
                    let delay = self.lazy_delay;
                    self.lazy_due.get_or_insert_with(|| Instant::now() + delay);
                }
                match self.pending.entry(session.channel_id) {
                    Entry::Occupied(entry) => {
                        // Requests of one channel arrive in the order its actor sent them: the latest session wins.
                        let pending = entry.into_mut();
                        pending.session = session;
                        pending.events.extend(events);
                        pending.waiters.extend(done);
                    }
                    Entry::Vacant(entry) => {
                        entry.insert(Pending { session, events, waiters: done.into_iter().collect() });
                    }
                }
            }
            Request::Flush(done) => self.flushes.push(done),
            Request::LookAhead => self.look_ahead = true,
        }
    }

    /// Gives back the room of the pending table once it is empty (a burst of 10,000 saves grows it to 1 MB).
    pub(super) fn shrink_to_fit(&mut self) {
        self.pending.shrink_to_fit();
        self.flushes.shrink_to_fit();
    }

    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.pending.capacity()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.flushes.is_empty()
    }

    /// A durable save or a flush is queued: write now rather than wait for more.
    fn anyone_waiting(&self) -> bool {
        !self.flushes.is_empty() || self.pending.values().any(|p| !p.waiters.is_empty())
    }

    /// Writes the channels with durable waiters (all channels when `everything`) in one group commit, answering
    /// each waiter once its save is in the journal; then replaces the journal if it is due.
    pub(super) fn commit(&mut self, store: &Store, everything: bool) {
        let channels: Vec<ChannelId> = self
            .pending
            .iter()
            .filter(|(_, pending)| everything || !pending.waiters.is_empty())
            .map(|(&channel, _)| channel)
            .collect();
        let mut batch: Vec<Pending> = channels.iter().filter_map(|channel| self.pending.remove(channel)).collect();
        let mut retry_lazy = false;
        if !batch.is_empty() {
            let waiters: Vec<(ChannelId, Vec<Answer>)> =
                batch.iter_mut().map(|p| (p.session.channel_id, std::mem::take(&mut p.waiters))).collect();
            let items: Vec<SaveItem<'_>> =
                batch.iter().map(|p| SaveItem { session: &p.session, events: &p.events }).collect();
            let mut lazy_failed = Vec::new();
            store.commit(&items, |results| {
                for ((channel, waiters), result) in waiters.into_iter().zip(results) {
                    if waiters.is_empty() && result.is_err() {
                        lazy_failed.push(channel);
                    }
                    answer(channel, waiters, result);
                }
            });
            drop(items);
            // No newer save of these channels can have come meanwhile (requests are accepted between batches only).
            for pending in batch.into_iter().filter(|p| lazy_failed.contains(&p.session.channel_id)) {
                self.pending.insert(pending.session.channel_id, pending);
            }
            retry_lazy = !lazy_failed.is_empty();
        }
        if everything || self.pending.is_empty() {
            self.lazy_due = None;
        }
        if retry_lazy {
            self.lazy_due = Some(Instant::now() + LAZY_RETRY);
        }
        if everything && !self.flushes.is_empty() {
            self.wait_for_retiring();
            if let Err(e) = store.checkpoint() {
                tracing::error!("could not make the checkpoints durable; the journal is kept: {e}");
            }
            for flush in self.flushes.drain(..) {
                let _ = flush.send(());
            }
        } else {
            self.retire_if_due(store);
        }
    }

    /// Replaces the journal if it is due, its checkpoints synced on a thread of their own (one at a time).
    fn retire_if_due(&mut self, store: &Store) {
        if self.retiring.as_ref().is_some_and(|thread| !thread.is_finished()) {
            return;
        }
        self.wait_for_retiring();
        let Some(retired) = store.rotate_if_due() else { return };
        let thread = std::thread::Builder::new().name("store-checkpoint".into()).spawn(move || {
            if let Err(e) = retired.finish() {
                tracing::error!("could not make the checkpoints durable; their journal is kept: {e}");
            }
        });
        match thread {
            Ok(thread) => self.retiring = Some(thread),
            Err(e) => tracing::error!("could not start the checkpoint thread; the old journal is kept: {e}"),
        }
    }

    fn wait_for_retiring(&mut self) {
        if let Some(thread) = self.retiring.take() {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

/// Tells every waiter of one channel how its save went (a waiter that gave up is simply not told).
fn answer(channel: ChannelId, waiters: Vec<Answer>, result: Result<(), StoreError>) {
    match result {
        Ok(()) => {
            for waiter in waiters {
                let _ = waiter.send(Ok(()));
            }
        }
        Err(e) => {
            if waiters.is_empty() {
                tracing::error!(%channel, "could not save the session's activity (tried again in {LAZY_RETRY:?}, unless a newer save comes first): {e}");
            }
            for waiter in waiters {
                let _ = waiter.send(Err(e.duplicate()));
            }
        }
    }
}

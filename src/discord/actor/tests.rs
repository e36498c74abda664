//! The channel actor on tokio's paused clock, with a recording fake behind the network seam and an in-memory saver:
//! judging by creation time, exactly-once handling, deadlines owned by each actor, and effects kept off the actor's
//! path.

use super::super::clock::Clock;
use super::super::persist::Saver;
use super::super::rest::{Carried, Page, Rest, RestError, Voice};
use super::super::router::Router;
use super::super::stats::Stats;
use super::{Env, Input};
use crate::core::config::Config;
use crate::core::ids::{ChannelId, MessageId, PersonaId, UserId};
use crate::core::persona::{Persona, PersonaCatalog};
use crate::core::session::effects::Announcement;
use crate::core::session::history::HistoryEvent;
use crate::core::session::lost::Unreachable;
use crate::core::session::{Command, IncomingMessage, Session};
use crate::store::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

const PM: UserId = UserId(101);
const DEV: UserId = UserId(102);
const HUMAN: UserId = UserId(900);
const TURN_SECONDS: u32 = 60;

fn t0() -> DateTime<Utc> {
    "2026-05-01T12:00:00Z".parse().unwrap()
}

/// What happened, in order, across the saver and the network: "save <channel> <events>", "announce <channel> <text>".
#[derive(Default)]
struct Journal(Mutex<Vec<String>>);

impl Journal {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    fn of(&self, channel: ChannelId) -> Vec<String> {
        let tag = format!(" {channel} ");
        self.lines().into_iter().filter(|l| l.contains(&tag)).collect()
    }
}

/// The network: records every call; calls for a "hanging" channel never answer; injected failures answer first.
struct FakeRest {
    journal: Arc<Journal>,
    hanging: Mutex<HashSet<ChannelId>>,
    next_id: AtomicU64,
    /// What `messages_after` finds, per channel.
    history: Mutex<HashMap<ChannelId, Vec<IncomingMessage>>>,
    /// Errors to answer, in order, per channel and call ("announce", "delete", ...), before succeeding.
    failures: Mutex<HashMap<(ChannelId, &'static str), Vec<RestError>>>,
    /// How long an announcement takes to be accepted.
    announce_delay: Mutex<Duration>,
    /// How long a page of history takes to read.
    read_delay: Mutex<Duration>,
    /// Announcements posted, by nonce: a repeated nonce answers the first message, as Discord does.
    posted: Arc<Mutex<HashMap<String, MessageId>>>,
    /// The relay permissions the bot lacks in every channel.
    missing: Mutex<Vec<&'static str>>,
    clock: Clock,
}

impl FakeRest {
    async fn call(&self, channel: ChannelId, kind: &'static str, line: String) -> Result<(), RestError> {
        let failure =
            self.failures.lock().unwrap().get_mut(&(channel, kind)).filter(|f| !f.is_empty()).map(|f| f.remove(0));
        let status = failure.as_ref().map_or("ok".to_owned(), |e| e.to_string());
        self.journal.push(format!("{line} -> {status}"));
        if self.hanging.lock().unwrap().contains(&channel) {
            std::future::pending::<()>().await;
        }
        failure.map_or(Ok(()), Err)
    }

    fn fail(&self, channel: ChannelId, kind: &'static str, errors: Vec<RestError>) {
        self.failures.lock().unwrap().insert((channel, kind), errors);
    }
}

fn status(status: u16) -> RestError {
    RestError::Status { status, message: String::new(), retry_after: None }
}

#[async_trait]
impl Rest for FakeRest {
    async fn announce(&self, channel: ChannelId, announcement: &Announcement) -> Result<MessageId, RestError> {
        let delay = *self.announce_delay.lock().unwrap();
        tokio::time::sleep(delay).await;
        if let Some(first) = self.posted.lock().unwrap().get(&announcement.nonce) {
            self.journal.push(format!("announce {channel} {} -> deduplicated", announcement.text));
            return Ok(*first);
        }
        self.call(channel, "announce", format!("announce {channel} {}", announcement.text)).await?;
        let id = MessageId(MessageId::first_at(self.clock.now()).0 + self.next_id.fetch_add(1, Ordering::Relaxed));
        self.posted.lock().unwrap().insert(announcement.nonce.clone(), id);
        Ok(id)
    }

    async fn notice(&self, channel: ChannelId, text: &str) -> Result<(), RestError> {
        self.call(channel, "notice", format!("notice {channel} {text}")).await
    }

    async fn repost(&self, channel: ChannelId, voice: Voice<'_>, text: &str, _: &Carried) -> Result<(), RestError> {
        self.call(channel, "repost", format!("repost {channel} {}: {text}", voice.name)).await
    }

    async fn carried(&self, _: ChannelId, _: MessageId) -> Result<Carried, RestError> {
        Ok(Carried::default())
    }

    async fn reposts_made(
        &self,
        channel: ChannelId,
        _after: MessageId,
        name: &str,
        parts: &[String],
    ) -> Result<usize, RestError> {
        let made = self.journal.lines();
        Ok(parts.iter().take_while(|p| made.contains(&format!("repost {channel} {name}: {p} -> ok"))).count())
    }

    async fn delete(&self, channel: ChannelId, message: MessageId) -> Result<(), RestError> {
        self.call(channel, "delete", format!("delete {channel} {message}")).await
    }

    async fn react(&self, channel: ChannelId, message: MessageId, emoji: &str) -> Result<(), RestError> {
        self.call(channel, "react", format!("react {channel} {message} {emoji}")).await
    }

    async fn messages_after(&self, channel: ChannelId, after: MessageId, limit: u8) -> Result<Page, RestError> {
        let delay = *self.read_delay.lock().unwrap();
        tokio::time::sleep(delay).await;
        self.call(channel, "read", format!("read {channel} after {after}")).await?;
        let found = self.history.lock().unwrap().get(&channel).cloned().unwrap_or_default();
        let messages: Vec<IncomingMessage> =
            found.into_iter().filter(|m| m.id > after).take(usize::from(limit)).collect();
        Ok(Page { newest: messages.last().map(|m| m.id), read: messages.len(), messages })
    }

    async fn relay_permissions_missing(&self, _channel: ChannelId) -> Result<Vec<&'static str>, RestError> {
        Ok(self.missing.lock().unwrap().clone())
    }
}

/// The disk: keeps the last durable copy of each session and journals each durable save with its events. It can be
/// made to fail the next durable saves, as a full disk would.
struct MemorySaver {
    journal: Arc<Journal>,
    saved: Mutex<HashMap<ChannelId, Session>>,
    failing_saves: AtomicU32,
    /// Lazy saves handed over (each a copy of the session), and the last of them.
    lazy_saves: AtomicU32,
    last_lazy: Mutex<Option<Session>>,
}

impl MemorySaver {
    fn fail_next_durable_saves(&self, n: u32) {
        self.failing_saves.store(n, Ordering::Relaxed);
    }
}

#[async_trait]
impl Saver for MemorySaver {
    async fn save_durable(&self, session: Session, events: Vec<HistoryEvent>) -> Result<(), StoreError> {
        let names: Vec<&str> = events.iter().map(|e| e.kind.name()).collect();
        if self.failing_saves.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok() {
            self.journal.push(format!("failed to save {} {}", session.channel_id, names.join(",")));
            let source = std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device");
            return Err(StoreError::Io { action: "write", path: "state/channels".into(), source });
        }
        self.journal.push(format!("save {} {}", session.channel_id, names.join(",")));
        self.saved.lock().unwrap().insert(session.channel_id, session);
        Ok(())
    }

    fn save_lazy(&self, session: Session) {
        self.lazy_saves.fetch_add(1, Ordering::Relaxed);
        *self.last_lazy.lock().unwrap() = Some(session);
    }

    async fn load(&self, channel: ChannelId) -> Result<Option<Session>, StoreError> {
        Ok(self.saved.lock().unwrap().get(&channel).cloned())
    }

    async fn flush(&self) {}
}

struct Harness {
    router: Arc<Router>,
    rest: Arc<FakeRest>,
    saver: Arc<MemorySaver>,
    journal: Arc<Journal>,
    stats: Arc<Stats>,
    clock: Clock,
    next_id: AtomicU64,
}

fn personas() -> PersonaCatalog {
    let persona = |id: &str, user: UserId, order: i64| Persona {
        id: PersonaId::parse(id).unwrap(),
        display_name: id.to_uppercase(),
        discord_user_id: user,
        avatar_url: None,
        timeout_seconds: Some(TURN_SECONDS),
        order: Some(order),
        source: format!("{id}.json"),
    };
    PersonaCatalog::new(vec![persona("pm", PM, 1), persona("dev", DEV, 2), persona("critic", UserId(103), 3)])
}

impl Harness {
    fn new() -> Self {
        Self::with_config(Config::default())
    }

    fn with_config(config: Config) -> Self {
        let journal = Arc::new(Journal::default());
        let saver = Arc::new(MemorySaver {
            journal: journal.clone(),
            saved: Mutex::default(),
            failing_saves: AtomicU32::new(0),
            lazy_saves: AtomicU32::new(0),
            last_lazy: Mutex::default(),
        });
        let clock = Clock::starting_at(t0());
        Self::on(journal, saver, Arc::new(Stats::default()), clock, 0, Arc::default(), Arc::new(config))
    }

    /// The bot started again after a crash: a new router and network, the same disk, journal and figures.
    fn restarted(&self) -> Self {
        let next_id = self.next_id.load(Ordering::Relaxed) + 1000;
        let posted = self.rest.posted.clone();
        let config = self.router.env().config.clone();
        Self::on(self.journal.clone(), self.saver.clone(), self.stats.clone(), self.clock, next_id, posted, config)
    }

    fn on(
        journal: Arc<Journal>,
        saver: Arc<MemorySaver>,
        stats: Arc<Stats>,
        clock: Clock,
        next_id: u64,
        posted: Arc<Mutex<HashMap<String, MessageId>>>,
        config: Arc<Config>,
    ) -> Self {
        let rest = Arc::new(FakeRest {
            journal: journal.clone(),
            hanging: Mutex::default(),
            next_id: AtomicU64::new(1),
            history: Mutex::default(),
            failures: Mutex::default(),
            announce_delay: Mutex::new(Duration::ZERO),
            read_delay: Mutex::new(Duration::ZERO),
            posted,
            missing: Mutex::default(),
            clock,
        });
        let env = Arc::new(Env {
            personas: Arc::new(personas()),
            config,
            rest: rest.clone(),
            saver: saver.clone(),
            clock,
            stats: stats.clone(),
            catch_up_permits: Arc::new(Semaphore::new(8)),
        });
        Self { router: Router::new(env), rest, saver, journal, stats, clock, next_id: AtomicU64::new(next_id) }
    }

    async fn command(&self, channel: ChannelId, command: Command) {
        let origin = self.id_at(self.clock.now());
        let outcome = self
            .router
            .ask(channel, |reply| Input::command(command, Some(origin), Some(reply)))
            .await
            .expect("the actor answers");
        outcome.expect("the command is accepted");
    }

    async fn start(&self, channel: ChannelId) {
        self.command(channel, Command::Start { roster: vec![] }).await;
    }

    /// A message id minted at `at` on Discord's clock (unique, growing).
    fn id_at(&self, at: DateTime<Utc>) -> MessageId {
        MessageId(MessageId::first_at(at).0 + self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// A message `author` wrote `offset_ms` after the session started.
    fn written(&self, author: UserId, text: &str, offset_ms: i64) -> IncomingMessage {
        let written_at = t0() + TimeDelta::milliseconds(offset_ms);
        let id = self.id_at(written_at);
        IncomingMessage {
            id,
            author,
            text: text.into(),
            edited: false,
            written_at: id.created_at(),
            edited_at: None,
            has_files: false,
        }
    }

    fn deliver(&self, channel: ChannelId, message: &IncomingMessage) {
        self.router.deliver(channel, Input::Message(Box::new(message.clone())));
    }

    async fn settle(&self, channel: ChannelId) {
        self.router.ask(channel, Input::Flush).await;
    }

    async fn session(&self, channel: ChannelId) -> Session {
        self.router.ask(channel, Input::Snapshot).await.expect("the actor answers")
    }

    async fn holder(&self, channel: ChannelId) -> Option<String> {
        self.session(channel).await.active_agent.map(|a| a.to_string())
    }

    fn events(&self, channel: ChannelId, name: &str) -> usize {
        self.journal.of(channel).iter().filter(|l| l.starts_with("save") && l.contains(name)).count()
    }

    fn floors(&self, channel: ChannelId, persona: &str) -> usize {
        let needle = format!("({persona}) has the floor");
        self.journal
            .of(channel)
            .iter()
            .filter(|l| l.starts_with("announce") && l.contains(&needle) && l.ends_with("-> ok"))
            .count()
    }
}

const A: ChannelId = ChannelId(7001);
const B: ChannelId = ChannelId(7002);

#[test]
fn inputs_stay_small_since_every_channel_keeps_a_block_of_them() {
    // tokio's unbounded channel allocates its first block of 32 slots up front, idle or not.
    assert!(std::mem::size_of::<Input>() <= 24, "Input is {} bytes", std::mem::size_of::<Input>());
}

#[tokio::test(start_paused = true)]
async fn a_signal_is_saved_before_it_is_relayed_and_the_next_persona_announced() {
    let h = Harness::new();
    h.start(A).await;
    h.deliver(A, &h.written(PM, "Here it is. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    let lines = h.journal.of(A);
    let saved = lines.iter().position(|l| l.starts_with("save") && l.contains("turn_complete")).expect("saved");
    let relayed =
        lines.iter().position(|l| l.starts_with("repost") && l.ends_with("PM: Here it is. -> ok")).expect("relayed");
    let announced = lines.iter().position(|l| l.contains("(dev) has the floor")).expect("announced");
    assert!(saved < relayed && relayed < announced, "{lines:#?}");
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn a_signal_handled_before_an_older_message_of_its_author_leaves_the_older_one_in_turn() {
    let h = Harness::new();
    h.start(A).await;
    let older = h.written(PM, "First part.", 1_000);
    let signal = h.written(PM, "Second part. TURN_COMPLETE", 2_000);
    h.deliver(A, &signal);
    h.deliver(A, &older);
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1);
    assert_eq!(h.events(A, "out_of_turn"), 0, "{:#?}", h.journal.of(A));
    assert!(!h.journal.of(A).iter().any(|l| l.starts_with(&format!("delete {A} {}", older.id))), "the older one stays");
    let session = h.session(A).await;
    assert!(session.has_handled(older.id) && session.has_handled(signal.id));
    assert_eq!(session.active_agent.map(|a| a.to_string()).as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn a_signal_written_before_the_deadline_but_delivered_after_it_completes_the_turn() {
    let h = Harness::new();
    h.start(A).await;
    let signal = h.written(PM, "Just in time. TURN_COMPLETE", i64::from(TURN_SECONDS) * 1000 - 500);
    // It reaches the bot a second after the deadline, before the deadline was acted on.
    h.deliver(A, &signal);
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS) + 1)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1);
    assert_eq!(h.events(A, "turn_timeout"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_and_a_signal_at_the_same_instant_make_one_turn_end() {
    let h = Harness::new();
    h.start(A).await;
    let deadline_ms = i64::from(TURN_SECONDS) * 1000;
    tokio::time::advance(Duration::from_millis(deadline_ms as u64)).await;
    h.deliver(A, &h.written(PM, "Right at the deadline. TURN_COMPLETE", deadline_ms));
    h.settle(A).await;
    let ends = h.events(A, "turn_complete") + h.events(A, "turn_timeout");
    assert_eq!(ends, 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.floors(A, "dev"), 1);
    assert_eq!(h.floors(A, "critic"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_command_racing_a_signal_judges_the_signal_by_its_own_time() {
    let h = Harness::new();
    h.start(A).await;
    let signal = h.written(PM, "Done. TURN_COMPLETE", 4_000);
    tokio::time::advance(Duration::from_secs(5)).await;
    // The operator's `skip` (given after the signal was written) reaches the actor first.
    h.command(A, Command::Skip).await;
    h.deliver(A, &signal);
    h.settle(A).await;
    assert_eq!(h.events(A, "skipped"), 1);
    assert_eq!(h.events(A, "out_of_turn"), 0, "pm wrote it while holding the floor");
    assert!(
        h.journal.of(A).iter().any(|l| l == &format!("repost {A} PM: Done. -> ok")),
        "shown stripped, as in its turn"
    );
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"), "one turn end, not two");
    assert_eq!(h.floors(A, "critic"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_message_delivered_twice_is_handled_once() {
    let h = Harness::new();
    h.start(A).await;
    let signal = h.written(PM, "Done. TURN_COMPLETE", 1_000);
    h.deliver(A, &signal);
    h.deliver(A, &signal);
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1);
    assert_eq!(h.floors(A, "dev"), 1);
    assert_eq!(h.stats.snapshot().messages_handled, 2, "both deliveries reached the actor");
}

#[tokio::test(start_paused = true)]
async fn a_thousand_channels_whose_deadlines_fall_together_each_end_once_on_time() {
    let h = Harness::new();
    let channels: Vec<ChannelId> = (0..1000).map(|i| ChannelId(10_000 + i)).collect();
    for &channel in &channels {
        h.start(channel).await;
    }
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS))).await;
    for &channel in &channels {
        h.settle(channel).await;
    }
    let stats = h.stats.snapshot();
    assert_eq!(stats.timeouts, 1000);
    assert_eq!(stats.max_lateness_ms(), 0, "every turn ended at its deadline on the paused clock");
    for &channel in &channels {
        assert_eq!(h.events(channel, "turn_timeout"), 1, "channel {channel}");
        assert_eq!(h.floors(channel, "dev"), 1, "channel {channel}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_hanging_rest_call_in_one_channel_delays_neither_its_decisions_nor_another_channels_timeout() {
    let h = Harness::new();
    h.start(A).await;
    h.start(B).await;
    h.settle(A).await;
    h.settle(B).await;
    // From now on every REST call of channel A hangs.
    h.rest.hanging.lock().unwrap().insert(A);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS))).await;
    h.settle(B).await;
    assert_eq!(h.floors(B, "dev"), 1, "B's turn timed out and its next turn was announced");
    assert_eq!(h.stats.snapshot().lateness_ms, vec![0], "on time");
    assert_eq!(h.events(A, "turn_complete"), 1, "A's actor decided and saved, though its sender is stuck");
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn a_turn_does_not_time_out_before_its_holder_was_told_it_has_the_floor() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // Discord is down for pm's successor's announcement for longer than a whole turn.
    h.rest.fail(A, "announce", vec![status(503); 9]);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS) + 30)).await;
    h.settle(A).await;
    assert_eq!(h.stats.snapshot().timeouts, 0, "dev's 60 s begin when it is told");
    assert_eq!(h.floors(A, "dev"), 1);
    let session = h.session(A).await;
    assert!(session.turn_timeout_at.unwrap() > h.clock.now() + TimeDelta::seconds(30), "{:?}", session.turn_timeout_at);
}

#[tokio::test(start_paused = true)]
async fn after_a_restart_deadlines_wait_for_the_missed_messages_which_are_judged_by_their_time() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    let saved = h.saver.saved.lock().unwrap()[&A].clone();
    // The bot was down from 10 s to 90 s; pm signalled at 30 s, before its 60 s deadline.
    let signal = h.written(PM, "Finished while you were away. TURN_COMPLETE", 30_000);
    h.rest.history.lock().unwrap().insert(A, vec![h.written(HUMAN, "hello?", 20_000), signal.clone()]);
    h.router.shutdown().await;
    tokio::time::advance(Duration::from_secs(90)).await;

    let restarted = h.restarted();
    restarted.rest.history.lock().unwrap().insert(A, h.rest.history.lock().unwrap()[&A].clone());
    restarted.router.resume(vec![saved]);
    assert!(restarted.session(A).await.is_active());
    assert_eq!(restarted.stats.snapshot().timeouts, 0, "no turn ends blind before the catch-up");
    restarted.router.broadcast(|| Input::CatchUp);
    restarted.settle(A).await;
    assert_eq!(restarted.events(A, "turn_complete"), 1);
    assert_eq!(restarted.events(A, "turn_timeout"), 0);
    assert_eq!(restarted.holder(A).await.as_deref(), Some("dev"));
    assert!(restarted.session(A).await.has_handled(signal.id));
}

#[tokio::test(start_paused = true)]
async fn a_stopped_channels_actor_retires_and_a_later_command_finds_its_saved_session() {
    let h = Harness::new();
    h.start(A).await;
    h.command(A, Command::Stop).await;
    h.settle(A).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(h.router.channels().is_empty(), "no task is left for a stopped session");
    let seq_before = h.saver.saved.lock().unwrap()[&A].announcement_seq;
    h.start(A).await;
    let session = h.session(A).await;
    assert!(session.is_active());
    assert!(session.announcement_seq > seq_before, "nonces go on from the saved session, never reused");
}

#[tokio::test(start_paused = true)]
async fn an_announcement_met_by_429_and_server_errors_is_retried_until_posted_once() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.rest.fail(
        A,
        "announce",
        vec![status(429), status(502), status(502), RestError::Timeout(Duration::from_secs(10))],
    );
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    let attempts: Vec<String> = h.journal.of(A).into_iter().filter(|l| l.contains("(dev) has the floor")).collect();
    assert_eq!(attempts.len(), 5, "{attempts:#?}");
    assert_eq!(h.floors(A, "dev"), 1);
    assert!(h.session(A).await.outbox.is_empty(), "done, so out of the outbox");
}

#[tokio::test(start_paused = true)]
async fn a_refused_effect_is_recorded_and_the_next_effects_go_on() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.rest.fail(A, "repost", vec![status(400)]);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    assert_eq!(h.events(A, "effect_failed"), 1);
    assert_eq!(h.floors(A, "dev"), 1, "the announcement after it is still made");
    assert!(h.session(A).await.outbox.is_empty());
}

#[tokio::test(start_paused = true)]
async fn losing_manage_messages_mid_session_switches_to_observe_mode_with_one_notice() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.rest.fail(A, "delete", vec![status(403)]);
    h.deliver(A, &h.written(PM, "First. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    h.settle(A).await; // the switch is decided when the refusal is reported
    let session = h.session(A).await;
    assert_eq!(session.display_mode, crate::core::session::DisplayMode::Observe);
    h.deliver(A, &h.written(DEV, "Second. TURN_COMPLETE", 2_000));
    h.settle(A).await;
    let lines = h.journal.of(A);
    assert_eq!(lines.iter().filter(|l| l.starts_with("notice") && l.contains("observe mode")).count(), 1, "{lines:#?}");
    assert!(lines.iter().any(|l| l.starts_with("react")), "the next completed turn gets a reaction");
    assert_eq!(lines.iter().filter(|l| l.starts_with("repost")).count(), 1, "no more reposts");
    assert_eq!(h.events(A, "display_mode_changed"), 1);
}

#[tokio::test(start_paused = true)]
async fn effects_left_undone_by_a_crash_are_carried_out_at_restart_without_a_second_repost() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The process dies right after saving pm's signal: its repost was made, the deletion and the next
    // announcement were not.
    h.rest.hanging.lock().unwrap().insert(A);
    let signal = h.written(PM, "Done. TURN_COMPLETE", 1_000);
    h.deliver(A, &signal);
    h.router.ask(A, Input::Snapshot).await;
    let crashed = h.saver.saved.lock().unwrap()[&A].clone();
    assert_eq!(crashed.outbox.len(), 2, "relay and announcement saved, undone: {:?}", crashed.outbox);

    let restarted = h.restarted();
    restarted.router.resume(vec![crashed]);
    restarted.router.broadcast(|| Input::CatchUp);
    restarted.settle(A).await;
    let lines = restarted.journal.of(A);
    assert_eq!(lines.iter().filter(|l| l.starts_with("repost") && l.ends_with("-> ok")).count(), 1, "{lines:#?}");
    assert!(lines.iter().any(|l| l == &format!("delete {A} {} -> ok", signal.id)));
    assert_eq!(restarted.floors(A, "dev"), 1);
    assert!(restarted.session(A).await.outbox.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_floor_announcement_accepted_late_gives_the_persona_its_time_back() {
    let h = Harness::new();
    *h.rest.announce_delay.lock().unwrap() = Duration::from_secs(3);
    h.start(A).await;
    h.settle(A).await; // two announcements, 3 s each: pm's floor was accepted 6 s after its turn began
    let session = h.session(A).await;
    let started = t0() + TimeDelta::seconds(6);
    assert_eq!(session.turn_started_at, Some(started));
    assert_eq!(session.turn_timeout_at, Some(started + TimeDelta::seconds(i64::from(TURN_SECONDS))));
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS) - 1)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(h.stats.snapshot().timeouts, 0, "the 60 s count from when pm was told");
}

#[tokio::test(start_paused = true)]
async fn a_stripped_text_longer_than_discord_allows_is_reposted_in_order_as_several_messages() {
    let h = Harness::new();
    h.start(A).await;
    // A Nitro account may post 4,000 characters; a repost may carry 2,000.
    let lines: Vec<String> = (0..80).map(|i| format!("line {i:02}: {}", "x".repeat(40))).collect();
    let text = lines.join("\n");
    h.deliver(A, &h.written(PM, &format!("{text}\nTURN_COMPLETE"), 1_000));
    h.settle(A).await;
    let reposts: Vec<String> = h
        .journal
        .of(A)
        .iter()
        .filter_map(|l| {
            l.strip_prefix(&format!("repost {A} PM: ")).and_then(|r| r.strip_suffix(" -> ok")).map(str::to_owned)
        })
        .collect();
    assert_eq!(reposts.len(), 2);
    assert!(reposts.iter().all(|r| r.chars().count() <= 2000));
    assert_eq!(reposts.join("\n"), text, "every line, in order");
}

#[tokio::test(start_paused = true)]
async fn a_signal_added_by_an_edit_the_bot_could_not_see_is_found_by_the_next_catch_up() {
    let h = Harness::new();
    h.start(A).await;
    let draft = h.written(PM, "Draft", 1_000);
    h.deliver(A, &draft);
    h.settle(A).await;
    // The gateway session was lost: pm's edit adding the signal was never delivered, and a page of messages after
    // the newest one handled does not show it.
    let finished = IncomingMessage { text: "Draft, done. TURN_COMPLETE".into(), ..draft.clone() };
    h.rest.history.lock().unwrap().insert(A, vec![finished]);
    tokio::time::advance(Duration::from_secs(5)).await;
    h.router.broadcast(|| Input::CatchUp);
    for _ in 0..10 {
        h.settle(A).await;
        if h.holder(A).await.as_deref() == Some("dev") {
            break;
        }
    }
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"), "the edit ended pm's turn");
    assert_eq!(h.events(A, "turn_complete"), 1);
    let lines = h.journal.of(A);
    assert!(lines.iter().any(|l| l == &format!("repost {A} PM: Draft, done. -> ok")), "{lines:#?}");
    assert!(lines.iter().any(|l| l == &format!("delete {A} {} -> ok", draft.id)), "{lines:#?}");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_falling_due_while_disconnected_waits_for_the_catch_up_and_a_signal_written_before_it_counts() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.router.broadcast(|| Input::Disconnected);
    // pm signals at 30 s, before its 60 s deadline, while the bot cannot see; it reconnects at 90 s.
    let signal = h.written(PM, "Done while you were reconnecting. TURN_COMPLETE", 30_000);
    h.rest.history.lock().unwrap().insert(A, vec![signal.clone()]);
    tokio::time::advance(Duration::from_secs(90)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(h.stats.snapshot().timeouts, 0, "no turn ends blind while disconnected");

    h.router.broadcast(|| Input::CatchUp);
    for _ in 0..10 {
        h.settle(A).await;
        if h.holder(A).await.as_deref() == Some("dev") {
            break;
        }
    }
    assert_eq!(h.events(A, "turn_complete"), 1, "written before the deadline: it completes the turn");
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn an_announcement_replayed_after_a_crash_does_not_move_the_deadline_by_the_downtime() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // Both announcements were posted at t0, but the process died before their reports were saved.
    let crashed = h.saver.saved.lock().unwrap()[&A].clone();
    assert_eq!(crashed.outbox.len(), 2);
    let deadline = crashed.turn_timeout_at;
    h.router.shutdown().await;
    tokio::time::advance(Duration::from_secs(20)).await;

    let restarted = h.restarted();
    restarted.router.resume(vec![crashed]);
    restarted.router.broadcast(|| Input::CatchUp);
    restarted.settle(A).await;
    let lines = restarted.journal.of(A);
    assert_eq!(lines.iter().filter(|l| l.ends_with("-> deduplicated")).count(), 2, "{lines:#?}");
    let session = restarted.session(A).await;
    assert!(session.outbox.is_empty());
    assert_eq!(session.turn_timeout_at, deadline, "pm was told at t0, not at the restart");
}

// --- the signal grammar's timers (spec 4.2): the actor wakes when the core says, not at the bare deadline ---------

fn config_of(signals: &str) -> Config {
    Config::parse("c.json", &format!(r#"{{"signals": {signals}}}"#)).unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_actor_waits_out_the_grace_period_and_a_signal_written_in_it_completes_the_turn() {
    let h = Harness::with_config(config_of(r#"{"graceSeconds": 5}"#));
    h.start(A).await;
    let deadline_ms = i64::from(TURN_SECONDS) * 1000;
    tokio::time::advance(Duration::from_millis(deadline_ms as u64 + 2_000)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 0, "the deadline passed, the grace has not");
    h.deliver(A, &h.written(PM, "Late but within grace. TURN_COMPLETE", deadline_ms + 2_000));
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
    // dev's turn times out only once its own grace is over.
    tokio::time::advance(Duration::from_millis(deadline_ms as u64 + 4_000)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 0);
    tokio::time::advance(Duration::from_millis(1_500)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 1);
}

#[tokio::test(start_paused = true)]
async fn the_actor_ends_a_turn_after_the_holders_silence_when_auto_detection_is_on() {
    let h = Harness::with_config(config_of(r#"{"silenceSeconds": 10}"#));
    h.start(A).await;
    tokio::time::advance(Duration::from_secs(3)).await;
    h.deliver(A, &h.written(PM, "Some thoughts, no signal.", 3_000));
    h.settle(A).await;
    tokio::time::advance(Duration::from_millis(9_900)).await;
    h.settle(A).await;
    assert_eq!(h.holder(A).await.as_deref(), Some("pm"), "not silent for 10 s yet");
    tokio::time::advance(Duration::from_millis(200)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_silent"), 1);
    assert_eq!(h.events(A, "turn_timeout"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn an_escalation_holds_every_timer_until_a_manager_resumes() {
    let rules = r#"{"rules": [{"name": "BLOCKED", "pattern": "BLOCKED:\\s*(?P<payload>.+)", "at": "line",
                               "action": "escalate"}]}"#;
    let h = Harness::with_config(config_of(rules));
    h.start(A).await;
    h.deliver(A, &h.written(PM, "BLOCKED: the build server is down", 0));
    h.settle(A).await;
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS) * 5)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 0, "paused: nothing times out");
    assert!(h.journal.of(A).iter().any(|l| l.starts_with("announce") && l.contains("🚨 pm needs a person")));
    h.command(A, Command::Resume).await;
    h.settle(A).await;
    assert_eq!(h.floors(A, "pm"), 2, "pm is called again, with a fresh turn");
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS))).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 1);
}

/// Lets pm's turn time out `turns` times over, settling after each deadline.
async fn let_turns_time_out(h: &Harness, channel: ChannelId, turns: u32) {
    for _ in 0..turns {
        tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS))).await;
        h.settle(channel).await;
        h.settle(channel).await; // the refusals' reports are handled after the flush they raced
    }
}

fn calls(h: &Harness, channel: ChannelId) -> usize {
    h.journal.of(channel).iter().filter(|l| !l.starts_with("save")).count()
}

#[tokio::test(start_paused = true)]
async fn an_announcement_refused_with_404_ends_the_session_once_and_nothing_more_is_sent() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The channel is deleted: Discord answers 404 (Unknown Channel) to whatever is posted there.
    h.rest.fail(A, "announce", vec![status(404); 100]);
    let_turns_time_out(&h, A, 1).await;
    let after_stop = calls(&h, A);
    let_turns_time_out(&h, A, 5).await;
    assert_eq!(h.stats.snapshot().timeouts, 1, "no turn times out after the channel is gone");
    assert_eq!(h.events(A, "session_ended"), 1);
    assert_eq!(calls(&h, A), after_stop, "no more REST calls: {:#?}", h.journal.of(A));
    let session = h.session(A).await;
    assert!(!session.is_active());
    assert!(session.outbox.is_empty(), "nothing left to replay into a deleted channel");
}

#[tokio::test(start_paused = true)]
async fn an_announcement_refused_with_403_pauses_the_session_once_until_a_manager_resumes() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The bot lost Send Messages here: the timeout line and dev's floor are refused.
    h.rest.fail(A, "announce", vec![status(403); 2]);
    let_turns_time_out(&h, A, 1).await;
    let after_pause = calls(&h, A);
    let_turns_time_out(&h, A, 5).await;
    assert_eq!(h.stats.snapshot().timeouts, 1, "paused: no more timeouts");
    assert_eq!(h.events(A, "posting_refused"), 1);
    assert_eq!(calls(&h, A), after_pause, "no notice, no retry: {:#?}", h.journal.of(A));
    let session = h.session(A).await;
    assert_eq!(session.status, crate::core::session::SessionStatus::Paused);
    assert!(session.pause_reason.as_deref().is_some_and(|r| r.contains("403")), "{:?}", session.pause_reason);
    // Permissions fixed: a manager resumes, and dev is told it has the floor.
    h.command(A, Command::Resume).await;
    h.settle(A).await;
    assert_eq!(h.floors(A, "dev"), 1);
    let_turns_time_out(&h, A, 1).await;
    assert_eq!(h.stats.snapshot().timeouts, 2, "running again");
}

#[tokio::test(start_paused = true)]
async fn leaving_the_server_ends_the_session_without_a_word_in_the_channel() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    let before = calls(&h, A);
    h.router.deliver(A, Input::Unreachable(Unreachable::LeftServer));
    let_turns_time_out(&h, A, 3).await;
    assert_eq!(h.events(A, "session_ended"), 1);
    assert_eq!(h.stats.snapshot().timeouts, 0);
    assert_eq!(calls(&h, A), before, "nothing is posted to a server the bot left");
    assert!(!h.session(A).await.is_active());
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_a_hanging_rest_call_ends_within_its_bound_and_the_effect_stays_in_the_saved_outbox() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.rest.hanging.lock().unwrap().insert(A);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    h.router.ask(A, Input::Snapshot).await; // decided and saved; its relay hangs
    let started = tokio::time::Instant::now();
    let bound = super::super::router::SHUTDOWN_WAIT;
    tokio::time::timeout(bound + Duration::from_secs(1), h.router.shutdown())
        .await
        .expect("shutdown does not wait for a hanging call");
    assert!(started.elapsed() <= bound, "took {:?}", started.elapsed());
    let saved = h.saver.saved.lock().unwrap()[&A].clone();
    assert!(
        saved.outbox.iter().any(|q| matches!(q.effect, crate::core::session::effects::Effect::Relay { .. })),
        "the relay is replayed at the next start: {:?}",
        saved.outbox
    );
}

// --- all or nothing: a refused command changes nothing ------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_refused_give_on_an_overdue_turn_changes_nothing_and_the_timeout_still_happens_and_is_announced() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The typo reaches the actor together with pm's deadline, before the deadline is acted on.
    let (reply, answer) = tokio::sync::oneshot::channel();
    let origin = h.id_at(t0() + TimeDelta::seconds(i64::from(TURN_SECONDS) + 1));
    let give = Command::Give { persona: "critc".into() };
    h.router.deliver(A, Input::command(give, Some(origin), Some(reply)));
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS) + 1)).await;
    assert!(answer.await.unwrap().is_err(), "critc is no persona");
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 1, "{:#?}", h.journal.of(A));
    let lines = h.journal.of(A);
    assert!(lines.iter().any(|l| l.starts_with("announce") && l.contains("pm turn timed out")), "{lines:#?}");
    assert_eq!(h.floors(A, "dev"), 1);
    assert_eq!(h.saver.saved.lock().unwrap()[&A].active_agent.as_ref().map(|a| a.as_str()), Some("dev"));
    // dev's own deadline is armed: its turn times out in turn.
    tokio::time::advance(Duration::from_secs(u64::from(TURN_SECONDS))).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_timeout"), 2);
}

#[tokio::test(start_paused = true)]
async fn a_start_that_is_refused_neither_switches_the_display_mode_nor_gives_the_fallback_notice() {
    let h = Harness::new();
    h.rest.missing.lock().unwrap().push("Manage Webhooks");
    let origin = h.id_at(t0());
    let start = Command::Start { roster: vec!["pm".into(), "ghost".into()] };
    let outcome = h.router.ask(A, |reply| Input::command(start, Some(origin), Some(reply))).await.unwrap();
    assert!(outcome.is_err(), "ghost is no persona");
    h.settle(A).await;
    let lines = h.journal.of(A);
    assert!(lines.is_empty(), "nothing saved, nothing said: {lines:#?}");
    assert_eq!(h.session(A).await.display_mode, crate::core::session::DisplayMode::Relay);
    // The start that is accepted then falls back, once.
    h.start(A).await;
    h.settle(A).await;
    let notices = h.journal.of(A).iter().filter(|l| l.starts_with("notice") && l.contains("observe mode")).count();
    assert_eq!(notices, 1);
}

// --- a session starts at its start ---------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_catch_up_after_a_restart_reads_from_the_start_not_from_the_old_sessions_last_message() {
    let h = Harness::new();
    h.start(A).await;
    let old = h.written(PM, "Some thoughts.", 1_000);
    h.deliver(A, &old);
    h.command(A, Command::Stop).await;
    h.settle(A).await;
    // While the channel is not managed, pm signals and dev chats.
    let unmanaged = vec![h.written(PM, "Done anyway. TURN_COMPLETE", 5_000), h.written(DEV, "My idea.", 6_000)];
    h.rest.history.lock().unwrap().insert(A, unmanaged);
    tokio::time::advance(Duration::from_secs(10)).await;
    let origin = h.id_at(h.clock.now());
    let start = Command::Start { roster: vec![] };
    h.router.ask(A, |reply| Input::command(start, Some(origin), Some(reply))).await.unwrap().unwrap();
    h.router.broadcast(|| Input::CatchUp);
    h.settle(A).await;
    h.settle(A).await;
    let lines = h.journal.of(A);
    assert!(lines.iter().any(|l| l == &format!("read {A} after {origin} -> ok")), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with(&format!("read {A} after {}", old.id))), "{lines:#?}");
    assert_eq!(h.events(A, "out_of_turn") + h.events(A, "turn_complete"), 0, "{lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with("delete")), "{lines:#?}");
    assert_eq!(h.holder(A).await.as_deref(), Some("pm"));
}

#[tokio::test(start_paused = true)]
async fn a_stopped_sessions_outbox_left_by_a_crash_is_carried_out_at_start_up_and_its_actor_retires() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The process dies just after saving the stop: its "stopped" line was decided and saved, not posted.
    h.rest.hanging.lock().unwrap().insert(A);
    h.command(A, Command::Stop).await;
    let crashed = h.saver.saved.lock().unwrap()[&A].clone();
    assert!(!crashed.is_active());
    assert_eq!(crashed.outbox.len(), 1, "{:?}", crashed.outbox);

    let restarted = h.restarted();
    restarted.router.resume(vec![crashed]);
    restarted.router.broadcast(|| Input::CatchUp);
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    let stopped_lines = |j: &Journal| {
        j.of(A).iter().filter(|l| l.starts_with("announce") && l.contains("Turn management stopped")).count()
    };
    assert_eq!(stopped_lines(&restarted.journal), 2, "tried before the crash, posted at start-up");
    assert!(restarted.router.channels().is_empty(), "then the stopped channel's actor retires");
}

#[tokio::test(start_paused = true)]
async fn a_signal_overtaken_by_a_newer_message_just_before_a_crash_is_read_by_the_catch_up_after_it() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // pm's signal is overtaken by dev's newer message (each gateway event has its own task), then the bot dies.
    let signal = h.written(PM, "Done. TURN_COMPLETE", 5_000);
    let newer = h.written(DEV, "me next?", 5_050);
    h.deliver(A, &newer);
    h.settle(A).await;
    assert_eq!(h.events(A, "out_of_turn"), 1);
    let saved = h.saver.saved.lock().unwrap()[&A].clone();
    h.router.shutdown().await;
    tokio::time::advance(Duration::from_secs(90)).await;

    let restarted = h.restarted();
    restarted.rest.history.lock().unwrap().insert(A, vec![signal.clone(), newer.clone()]);
    let saved: Session = serde_json::from_str(&serde_json::to_string(&saved).unwrap()).unwrap();
    restarted.router.resume(vec![saved]);
    restarted.router.broadcast(|| Input::CatchUp);
    restarted.settle(A).await;
    assert_eq!(restarted.events(A, "turn_complete"), 1, "the overtaken signal ended pm's turn");
    assert_eq!(restarted.events(A, "turn_timeout"), 0);
    assert_eq!(restarted.events(A, "out_of_turn"), 1, "dev's message, handled before the crash, is not judged again");
    assert_eq!(restarted.holder(A).await.as_deref(), Some("dev"));
}

// --- saving fails (a full disk, a read-only folder, the writer gone): held back, then carried out ----------------

#[tokio::test(start_paused = true)]
async fn a_signal_whose_save_fails_is_announced_once_after_a_retry_saves_it_with_one_notice() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // The disk is full for the signal's save and the next two tries.
    h.saver.fail_next_durable_saves(3);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    assert_eq!(h.floors(A, "dev"), 0, "not on disk, so not announced");
    // No other input comes: the actor tries again by itself (after 1, 2 and 4 s). Sleeping lets the paused clock
    // wake each timer in turn.
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    let lines = h.journal.of(A);
    assert_eq!(lines.iter().filter(|l| l.starts_with("failed to save")).count(), 3, "{lines:#?}");
    assert_eq!(h.floors(A, "dev"), 1, "{lines:#?}");
    assert_eq!(h.events(A, "turn_complete"), 1, "the signal's event is saved once, with the retry");
    assert!(lines.iter().any(|l| l == &format!("repost {A} PM: Done. -> ok")), "{lines:#?}");
    let notices = lines.iter().filter(|l| l.starts_with("notice") && l.contains("sav")).count();
    assert_eq!(notices, 1, "{lines:#?}");
    assert!(h.session(A).await.outbox.is_empty(), "everything held back was carried out");
}

// --- a catch-up meets a failing Discord: the range is read in the end, never skipped ------------------------------

/// Started, pm holding the floor; the bot lost the gateway at t0 and pm signalled at 30 s, before its 60 s deadline,
/// while the bot could not see. Answers the signal, which only the catch-up's page shows.
async fn signal_missed_while_disconnected(h: &Harness) -> IncomingMessage {
    h.start(A).await;
    h.settle(A).await;
    h.router.broadcast(|| Input::Disconnected);
    let signal = h.written(PM, "Done while you were away. TURN_COMPLETE", 30_000);
    h.rest.history.lock().unwrap().insert(A, vec![signal.clone()]);
    tokio::time::advance(Duration::from_secs(90)).await;
    signal
}

#[tokio::test(start_paused = true)]
async fn a_catch_up_whose_reads_fail_for_a_while_holds_the_deadline_until_the_page_is_read() {
    let h = Harness::new();
    let signal = signal_missed_while_disconnected(&h).await;
    // Discord answers 503 to the history reads for about 15 s (backing off 0.5, 1, 2, 4, 8 s).
    h.rest.fail(A, "read", vec![status(503); 5]);
    h.router.broadcast(|| Input::CatchUp);
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(h.stats.snapshot().timeouts, 0, "the deadline waits while the missed range is unread");
    tokio::time::sleep(Duration::from_secs(30)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
    assert!(h.session(A).await.has_handled(signal.id));
}

#[tokio::test(start_paused = true)]
async fn a_catch_up_failing_longer_than_the_retry_policy_tries_again_later_and_never_skips_the_range() {
    let h = Harness::new();
    signal_missed_while_disconnected(&h).await;
    // Discord is down for the history reads for well over the 10 minutes one call is retried.
    h.rest.fail(A, "read", vec![status(502); 40]);
    h.router.broadcast(|| Input::CatchUp);
    tokio::time::sleep(Duration::from_secs(15 * 60)).await;
    h.router.ask(A, Input::Snapshot).await;
    assert_eq!(h.stats.snapshot().timeouts, 0, "still waiting for the range");
    tokio::time::sleep(Duration::from_secs(15 * 60)).await;
    h.settle(A).await;
    let reads = h.journal.of(A).iter().filter(|l| l.starts_with("read")).count();
    assert!(reads > 40, "read until it worked: {reads} reads");
    // The later turns (nobody speaks) time out; pm's, whose signal was on the page, completed.
    let saves: Vec<String> = h.journal.of(A).into_iter().filter(|l| l.starts_with("save")).collect();
    let first_end = saves.iter().find(|l| l.contains("turn_complete") || l.contains("turn_timeout"));
    assert!(first_end.is_some_and(|l| l.contains("turn_complete")), "{saves:#?}");
    assert_eq!(h.events(A, "turn_complete"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_catch_up_refused_for_good_ends_and_lets_the_deadline_run() {
    let h = Harness::new();
    signal_missed_while_disconnected(&h).await;
    // Read Message History was taken away: waiting would hold the channel forever.
    h.rest.fail(A, "read", vec![status(403); 3]);
    h.router.broadcast(|| Input::CatchUp);
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.settle(A).await;
    let reads = h.journal.of(A).iter().filter(|l| l.starts_with("read")).count();
    assert_eq!(reads, 1, "a refusal is not retried, nor the edited messages read after it");
    assert_eq!(h.events(A, "turn_timeout"), 1, "the overdue turn ends");
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

// --- live inputs wait for the catch-up: missed messages first, then what came live (spec 8) ---------------------

#[tokio::test(start_paused = true)]
async fn a_live_message_after_the_deadline_waits_for_the_catch_up_whose_page_holds_the_in_time_signal() {
    let h = Harness::new();
    signal_missed_while_disconnected(&h).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    h.router.broadcast(|| Input::CatchUp);
    // While the page is being read, someone writes (after pm's deadline), and it is delivered live.
    tokio::time::advance(Duration::from_secs(1)).await;
    h.deliver(A, &h.written(HUMAN, "anyone there?", 91_000));
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn a_live_message_delivered_before_the_catch_up_began_waits_for_it_too() {
    let h = Harness::new();
    signal_missed_while_disconnected(&h).await;
    // The connection is back (a RESUME replays what was sent meanwhile) before the catch-up is asked for.
    h.deliver(A, &h.written(HUMAN, "anyone there?", 89_000));
    h.router.ask(A, Input::Snapshot).await;
    h.router.broadcast(|| Input::CatchUp);
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

#[tokio::test(start_paused = true)]
async fn a_command_given_during_the_catch_up_applies_after_the_missed_messages() {
    let h = Harness::new();
    signal_missed_while_disconnected(&h).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    h.router.broadcast(|| Input::CatchUp);
    tokio::time::advance(Duration::from_secs(1)).await;
    // The operator skips while the page is read: the skip is answered once the catch-up is done.
    h.command(A, Command::Skip).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "pm's signal came first: {:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout"), 0);
    assert_eq!(h.events(A, "skipped"), 1);
    assert_eq!(h.holder(A).await.as_deref(), Some("critic"), "the skip ended dev's turn");
}

#[tokio::test(start_paused = true)]
async fn an_edit_found_by_the_catch_up_is_judged_by_discords_edit_time_not_by_when_it_was_read() {
    let h = Harness::new();
    h.start(A).await;
    let draft = h.written(PM, "Draft", 1_000);
    h.deliver(A, &draft);
    h.settle(A).await;
    h.router.broadcast(|| Input::Disconnected);
    // pm finished its message by an edit at 30 s, before its 60 s deadline, while the bot could not see; the bot
    // reads it at 90 s.
    let edited_at = Some(t0() + TimeDelta::seconds(30));
    let finished = IncomingMessage { text: "Draft, done. TURN_COMPLETE".into(), edited_at, ..draft.clone() };
    h.rest.history.lock().unwrap().insert(A, vec![finished]);
    tokio::time::advance(Duration::from_secs(90)).await;
    h.router.broadcast(|| Input::CatchUp);
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "{:#?}", h.journal.of(A));
    assert_eq!(h.events(A, "turn_timeout") + h.events(A, "late_signal"), 0);
    assert_eq!(h.holder(A).await.as_deref(), Some("dev"));
}

// --- activity is saved lazily: a bounded number of copies, on disk within a second (spec 9) ----------------------

#[tokio::test(start_paused = true)]
async fn a_burst_of_activity_is_saved_lazily_a_bounded_number_of_times_and_soon_enough() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    let before = h.saver.lazy_saves.load(Ordering::Relaxed);
    // pm streams 100 messages without a signal over one second: activity only, nothing durable.
    let mut last = None;
    for i in 0..100 {
        let message = h.written(PM, &format!("part {i}"), 10 * i);
        h.deliver(A, &message);
        last = Some(message.id);
        tokio::time::advance(Duration::from_millis(10)).await;
    }
    h.router.ask(A, Input::Snapshot).await;
    let during = h.saver.lazy_saves.load(Ordering::Relaxed) - before;
    assert!(during <= 5, "{during} copies of the session for one second of activity");
    // The newest is handed to the writer within its share of the second (the writer's delay is the rest).
    tokio::time::sleep(Duration::from_millis(250)).await;
    let saved = h.saver.last_lazy.lock().unwrap().clone().expect("saved lazily");
    assert_eq!(saved.last_message_id, last);
    assert_eq!(h.events(A, "turn_complete") + h.events(A, "turn_timeout"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_session_started_again_after_its_actor_retired_is_announced() {
    let h = Harness::new();
    h.start(A).await;
    h.command(A, Command::Stop).await;
    h.settle(A).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(h.router.channels().is_empty(), "retired");
    // The disk still shows the stop's announcement as undone (its report was saved lazily, not yet written): the
    // next actor carries it out again, then the new session's effects must follow.
    h.start(A).await;
    h.settle(A).await;
    assert_eq!(h.floors(A, "pm"), 2, "{:#?}", h.journal.of(A));
    assert!(h.session(A).await.outbox.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_floor_announcement_refused_with_403_after_a_while_pauses_with_the_whole_turn_left() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    // dev's floor announcement takes 30 s, then is refused: dev was never told, so none of its time is gone.
    *h.rest.announce_delay.lock().unwrap() = Duration::from_secs(30);
    h.rest.fail(A, "announce", vec![status(403)]);
    h.deliver(A, &h.written(PM, "Done. TURN_COMPLETE", 1_000));
    h.settle(A).await;
    let session = h.session(A).await;
    assert_eq!(session.status, crate::core::session::SessionStatus::Paused);
    assert_eq!(session.active_agent.as_ref().map(|a| a.as_str()), Some("dev"));
    assert_eq!(session.paused_remaining_ms, Some(i64::from(TURN_SECONDS) * 1000));
}

#[tokio::test(start_paused = true)]
async fn channels_whose_history_reads_keep_failing_do_not_starve_another_channels_catch_up() {
    let h = Harness::new();
    // Eight channels (as many as catch up at once) whose reads fail for an hour, and one whose read works.
    let failing: Vec<ChannelId> = (1..=8).map(|n| ChannelId(8000 + n)).collect();
    for &channel in &failing {
        h.start(channel).await;
        h.rest.fail(channel, "read", vec![status(503); 1000]);
    }
    let signal = signal_missed_while_disconnected(&h).await;
    // The failing channels begin reading first.
    for &channel in &failing {
        h.router.deliver(channel, Input::CatchUp);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.router.deliver(A, Input::CatchUp);
    tokio::time::sleep(Duration::from_secs(5)).await;
    h.settle(A).await;
    assert_eq!(h.events(A, "turn_complete"), 1, "A read its missed page while the others back off");
    assert!(h.session(A).await.has_handled(signal.id));
}

#[tokio::test(start_paused = true)]
async fn a_long_catch_up_hands_its_actor_one_page_at_a_time() {
    let h = Harness::new();
    h.start(A).await;
    h.settle(A).await;
    h.router.broadcast(|| Input::Disconnected);
    // dev talked out of turn 250 times while the bot could not see: each is saved as handled (out_of_turn).
    let missed: Vec<IncomingMessage> = (0..250).map(|n| h.written(DEV, "me next?", 1_000 + n)).collect();
    h.rest.history.lock().unwrap().insert(A, missed);
    h.router.broadcast(|| Input::CatchUp);
    h.settle(A).await;
    // Reads and saves in the order they happened: each page is read only once the one before it was handled.
    let order: String = h
        .journal
        .of(A)
        .iter()
        .filter_map(|l| match l.split(' ').next() {
            Some("read") => Some('r'),
            Some("save") if l.contains("out_of_turn") => Some('s'),
            _ => None,
        })
        .collect();
    let expected = format!("r{}r{}r{}", "s".repeat(100), "s".repeat(100), "s".repeat(50));
    assert_eq!(order, expected);
}

#[tokio::test(start_paused = true)]
async fn a_busy_channel_during_a_slow_catch_up_holds_at_most_its_bound_and_reads_the_rest_again() {
    let h = Harness::new();
    let signal = signal_missed_while_disconnected(&h).await;
    *h.rest.read_delay.lock().unwrap() = Duration::from_secs(5);
    h.router.broadcast(|| Input::CatchUp);
    tokio::time::advance(Duration::from_secs(1)).await;
    // 1,500 messages arrive live while the first page is read; the channel's history has them too.
    let live: Vec<IncomingMessage> = (0..1_500).map(|n| h.written(HUMAN, "busy", 91_000 + n)).collect();
    h.rest.history.lock().unwrap().get_mut(&A).unwrap().extend(live.iter().cloned());
    for message in &live {
        h.deliver(A, message);
    }
    tokio::time::sleep(Duration::from_secs(120)).await;
    h.settle(A).await;
    let session = h.session(A).await;
    assert!(live.iter().all(|m| session.has_handled(m.id)), "every live message was handled, held or read again");
    assert!(session.has_handled(signal.id));
    assert_eq!(h.events(A, "turn_complete"), 1);
    // The first catch-up read 16 pages; a second one, asked for when the held queue was full, read them again.
    let reads = h.journal.of(A).iter().filter(|l| l.starts_with("read")).count();
    assert!(reads > 16, "a second catch-up read what was not held: {reads} reads");
}

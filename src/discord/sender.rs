//! A channel's sender: carries out the effects its actor decided and saved (the session's outbox), in order, and
//! reports each outcome back to the actor, which takes it out of the outbox. A slow or failing REST call delays only
//! this channel's later effects: never its actor's decisions, never another channel. Only what posts a message keeps
//! a strict order: a deletion or a reaction (the end of a relay, an out-of-turn message removed) runs while the
//! announcement after it is posted, so the next persona is told one round trip sooner and the channel shows the
//! same order.
//!
//! One retry policy for every effect (spec 9): a 429 waits Discord's `retry_after`; server errors, time-outs and
//! broken connections back off exponentially, for minutes; other refusals are final. Every effect is safe to carry
//! out again after a crash: announcements carry their nonce (and are looked for in the channel once Discord may have
//! forgotten it, as notices retried that long are), a deletion whose message is gone is done, and a repost (which
//! has no nonce) replayed from the outbox, or retried after an answer that leaves its outcome unknown (a time-out, a
//! 5xx), first looks for what it may already have made and posts only the missing parts, in order. With a shared
//! store, nothing is tried while the process may have lost the channel's lease (see [`Acting`]).

use super::clock::Clock;
use super::rest::{Carried, MAY_SEND, Rest, RestError, Voice, WebhookLimit, delete_in_a_few_tries, users_to_ping};
use crate::core::ids::{ChannelId, MessageId, UserId};
use crate::core::persona::PersonaCatalog;
use crate::core::session::effects::{Announcement, Effect, Queued, decided_at, split_message};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

/// How long after a try an announcement's nonce surely still guards it: Discord answers a repeated nonce with the
/// first message for "a few minutes", so after this the channel is looked at instead. Also how far ahead of
/// Discord's the clock of the process that decided an announcement may run for it to be found there: it is looked
/// for from this long before it was decided (but only after the announcement before it).
const NONCE_REMEMBERED_FOR: chrono::TimeDelta = chrono::TimeDelta::seconds(60);
/// How far ahead of Discord's the deciding clock may run for an announcement to be found when no announcement before
/// it is known.
const CLOCK_AHEAD_UNANCHORED: chrono::TimeDelta = chrono::TimeDelta::seconds(5);
/// How long an effect is retried before it is given up.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(600);
/// How long an announcement that may be showing already is looked for, while the look fails in a way that may pass,
/// before it is posted all the same: a second copy then is better than a channel held for ever (its turn's deadline
/// waits for the announcement, and every later effect behind it).
const LOOK_FOR_AT_MOST: chrono::TimeDelta = chrono::TimeDelta::hours(1);
/// The first wait after a server error or a time-out; it doubles each time, up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The least a repost whose outcome is unknown is given to show before it is looked for, however fast its call failed
/// (a reset after the request went out, a proxy's quick 502).
const REPOST_SHOWS_WITHIN: Duration = Duration::from_secs(2);
/// The wait after a 429 when Discord's own `retry_after` is not known.
const RATE_LIMIT_WAIT: Duration = Duration::from_secs(1);
/// A 429's wait said in the log (at warn) when longer than this: a global limit, or a ban for too many bad requests.
const LONG_RATE_LIMIT: Duration = Duration::from_secs(60);
/// How often a sender waiting for its process to be sure of the channel's lease looks again.
const LEASE_LOOK_EVERY: Duration = Duration::from_secs(1);

/// How an effect ended, for the actor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Carried out; `at` is when Discord accepted it, on the manager's clock, and `posted` the message an
    /// announcement made.
    Done { at: DateTime<Utc>, posted: Option<MessageId> },
    /// Refused for good with this status (a 4xx other than 401 and 429; a 404 is the channel or the message gone).
    Refused { status: u16 },
    /// Still failing after [`GIVE_UP_AFTER`], or not possible at all.
    GaveUp,
    /// A relay had no webhook to post through: the channel or the server has Discord's most, none of them the bot's.
    NoWebhook(WebhookLimit),
}

impl Outcome {
    /// When Discord accepted the effect, if it did.
    pub fn accepted_at(&self) -> Option<DateTime<Utc>> {
        match self {
            Outcome::Done { at, .. } => Some(*at),
            Outcome::Refused { .. } | Outcome::GaveUp | Outcome::NoWebhook(_) => None,
        }
    }
}

/// The outcome of one effect of the outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub id: u64,
    pub outcome: Outcome,
}

/// Work for a sender, in the order it must be done.
#[derive(Debug)]
enum Job {
    /// An effect of the outbox; `replay` when it may have been carried out before a crash.
    Effect { queued: Queued, replay: bool },
    /// A plain line from the bot that pings nobody (a display-mode notice), and its nonce.
    Notice { text: String, nonce: String },
    /// Answered once everything queued before it is done.
    Flush(oneshot::Sender<()>),
}

/// The way in to a channel's sender. Its task stops at once, leaving what is queued undone, when the handle is
/// [`Sender::abandon`]ed or dropped: its actor flushes it first whenever the work must be finished (a retiring
/// channel, a shutdown), and an actor that is gone (stopped by a takeover, or cut off when a shutdown's wait ends)
/// must leave the channel's saved outbox to whoever runs the channel next.
pub struct Sender {
    jobs: mpsc::UnboundedSender<Job>,
    task: tokio::task::AbortHandle,
    /// Shared with the task: see [`Tools::gone`].
    gone: Gone,
}

/// Messages deleted by someone while their relay waited in the queue: the relay, when its turn comes, posts nothing.
pub type Gone = Arc<std::sync::Mutex<Deletions>>;

/// See [`Gone`].
#[derive(Debug, Default)]
pub struct Deletions {
    /// Marks of messages deleted by someone else; cleared whenever the queue runs empty (a mark for a relay already
    /// under way, or done, is of no use).
    marks: Vec<MessageId>,
    /// The messages this sender deleted lately (out-of-turn removals), whose MESSAGE_DELETE comes back: such a
    /// message may still be relayed, as said in turn after all (an overtaken message), and its own deletion must not
    /// cancel that (found by a review).
    own: std::collections::VecDeque<MessageId>,
}

/// How many of its own deletions a sender remembers: more than can be on their way back from the gateway at once.
const OWN_DELETIONS_KEPT: usize = 64;

/// What a sender works with.
pub struct Tools {
    pub channel: ChannelId,
    pub rest: Arc<dyn Rest>,
    pub personas: Arc<PersonaCatalog>,
    pub clock: Clock,
    /// Where outcomes are reported: the actor wraps them into its own inbox, so the sender does not know it.
    pub reports: Reports,
    /// Every sender's tasks, so that a shutdown can wait until the ones it stopped are gone.
    pub tasks: TaskTracker,
    /// The newest message of the channel's announcements known to be posted (saved in the session): every
    /// announcement this sender is given comes after it.
    pub announced: Option<MessageId>,
    /// Whether this process still acts for the channel (see [`Acting`]).
    pub acting: Acting,
    /// See [`Gone`].
    pub gone: Gone,
    /// When this process started: a relay replayed from the outbox looks for its reposts no sooner than
    /// [`REPOST_SHOWS_WITHIN`] after it, giving a repost the process before had just asked for the time to show.
    pub process_started: Instant,
}

/// Whether this process still acts for the channel (always [`Lease::Sure`] with the state folder), and how long the
/// sender has waited for its lease so far: no call's ten minutes count that, however its retries nest.
pub struct Acting {
    lease: Box<dyn Fn() -> Lease + Send + Sync>,
    waited_ms: std::sync::atomic::AtomicU64,
}

impl Acting {
    pub fn new(lease: impl Fn() -> Lease + Send + Sync + 'static) -> Self {
        Self { lease: Box::new(lease), waited_ms: Default::default() }
    }

    fn lease(&self) -> Lease {
        (self.lease)()
    }

    fn waited(&self) -> Duration {
        Duration::from_millis(self.waited_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn add_wait(&self, wait: Duration) {
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        self.waited_ms.fetch_add(ms, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The channel's lease as this process knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    Sure,
    /// It may have run out (renewals failing for most of a lease time: the database out of reach, the process paused):
    /// another process may be carrying out the same saved outbox.
    Unsure,
    /// Another process holds it, or this one let it go: nothing more is done here.
    Lost,
}

/// Takes each effect's outcome to whoever decided the effect.
pub type Reports = Box<dyn Fn(Report) + Send + Sync>;

impl Sender {
    pub fn spawn(tools: Tools) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        let tools = Arc::new(tools);
        let gone = tools.gone.clone();
        let task = tools.tasks.spawn(acting_for(tools.clone(), run(tools.clone(), queue))).abort_handle();
        Self { jobs, task, gone }
    }

    /// Someone deleted `message`: its relay, if still waiting in the queue, posts nothing. Not if the deletion was
    /// this sender's own.
    pub fn forget_relay_of(&self, message: MessageId) {
        let mut gone = self.gone.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !gone.own.contains(&message) {
            gone.marks.push(message);
        }
    }

    /// Whether this sender deleted `message` lately (its MESSAGE_DELETE is its own deletion coming back).
    pub fn deleted_itself(&self, message: MessageId) -> bool {
        deleted_lately(&self.gone, message)
    }

    /// Stops at once, leaving what is queued undone: another process acts for the channel now, and carries out
    /// what this one left from the saved outbox (an effect cut short in its REST call is looked for first there, as
    /// after a crash). Its own effects, posted after that process's, would come twice or out of order.
    pub fn abandon(&self) {
        self.task.abort();
    }

    pub fn effects(&self, effects: impl IntoIterator<Item = Queued>, replay: bool) {
        for queued in effects {
            let _ = self.jobs.send(Job::Effect { queued, replay });
        }
    }

    pub fn notice(&self, text: String) {
        let _ = self.jobs.send(Job::Notice { text, nonce: notice_nonce() });
    }

    /// A notice answering the command given in message `command`: with the nonce its live reply has, so that a
    /// command read back from the history whose gateway copy poise answered too is answered once.
    pub fn answer(&self, command: MessageId, text: String) {
        let _ = self.jobs.send(Job::Notice { text, nonce: answer_nonce(command) });
    }

    /// Waits until everything queued so far is carried out (or given up).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.jobs.send(Job::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.abandon();
    }
}

/// The deletion or reaction under way beside the posts, stopped with the sender that started it.
struct Tidying(JoinHandle<()>);

impl Drop for Tidying {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `work` with every REST call of it sent only while this process surely acts for the channel (see
/// [`MAY_SEND`]): a call that waited for a rate limit or a slot past the moment the lease may have run out is not sent.
fn acting_for<F: std::future::Future>(tools: Arc<Tools>, work: F) -> impl std::future::Future<Output = F::Output> {
    MAY_SEND.scope(Arc::new(move || tools.acting.lease() == Lease::Sure), work)
}

async fn run(tools: Arc<Tools>, mut queue: mpsc::UnboundedReceiver<Job>) {
    // The deletion or reaction of the effect before, still under way: it posts nothing, so an announcement or a
    // notice after it keeps its place in the channel without waiting for it. Anything else waits for it.
    let mut tidying: Option<Tidying> = None;
    // The newest announcement posted (or found posted): one after it in the outbox can only show after it.
    let mut announced = tools.announced;
    // The newest notice posted (or found posted): one after it can only show after it.
    let mut noticed: Option<MessageId> = None;
    while let Some(job) = queue.recv().await {
        let posts_only = match &job {
            Job::Notice { .. } => true,
            Job::Effect { queued, .. } => !queued.effect.tidies(),
            Job::Flush(_) => false,
        };
        if !posts_only {
            finish(&mut tidying).await;
        }
        if !matches!(job, Job::Flush(_)) && while_unsure(&tools).await == Lease::Lost {
            // Left to the process that holds the channel, from the saved outbox (a flush waiting is let go).
            return;
        }
        match job {
            Job::Effect { queued, replay } => match posting(&tools, &queued.effect, replay, announced).await {
                // Given up for the lease lost: the holder's replay finds what was done; nothing is reported here.
                _ if lease_lost(&tools) => return,
                // Nothing is under way here: an effect that tidies is not `posts_only`, so it waited above.
                Ok(reposts) if queued.effect.tidies() => {
                    let task = tools.clone();
                    tidying = Some(Tidying(tools.tasks.spawn(acting_for(tools.clone(), async move {
                        let tidied = tidy(&task, &queued.effect, replay).await;
                        if lease_lost(&task) {
                            return;
                        }
                        let take_back = match &tidied {
                            // The original refused for good (Manage Messages lost) stays: the reposts above it would
                            // show its text twice, and the signal the relay hid shows in it. Not after a give-up,
                            // whose last try may have deleted it after all: taken back, the words would show nowhere.
                            Err(e) => !e.is_transient(),
                            // Someone deleted it while it was reposted: the reposts would undo that deletion.
                            Ok(Tidied::DeletedBySomeone) => true,
                            Ok(Tidied::Done) => false,
                        };
                        if take_back {
                            take_back_parts(&task, &reposts).await;
                            if lease_lost(&task) {
                                return;
                            }
                        }
                        report(&task, &queued, tidied.map(|_| None));
                    }))));
                }
                done => {
                    let done = done.map(|made| made.last().copied());
                    if let Ok(Some(posted)) = done.as_ref().map(|posted| posted.filter(|id| id.0 != 0)) {
                        announced = announced.max(Some(posted));
                    }
                    report(&tools, &queued, done)
                }
            },
            Job::Notice { text, nonce } => match notice_once(&tools, &text, &nonce, announced.max(noticed)).await {
                Ok(posted) => noticed = noticed.max(Some(posted)).filter(|id| id.0 != 0),
                Err(e) => tracing::warn!(channel = %tools.channel, "could not post a notice: {e}"),
            },
            Job::Flush(done) => {
                let _ = done.send(());
            }
        }
        if queue.is_empty() {
            tools.gone.lock().unwrap_or_else(std::sync::PoisonError::into_inner).marks.clear();
        }
    }
    finish(&mut tidying).await;
}

/// Waits for the tidying under way, if any (its outcome is reported by itself).
async fn finish(tidying: &mut Option<Tidying>) {
    if let Some(Tidying(task)) = tidying.as_mut() {
        let finished = task.await;
        tidying.take();
        if let Err(e) = finished {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

/// The nonce of the answer to the command given in message `command` (at most 25 characters): the same wherever it
/// is answered from, so Discord posts it once; its `r` keeps it apart from every announcement's (`t`) and notice's
/// (`n`).
pub fn answer_nonce(command: MessageId) -> String {
    format!("r{}", command.0)
}

/// A notice's nonce, the same on each of its retries. A notice is not in the outbox (it is never carried out again
/// after a restart), so a random one will do; its `n` keeps it apart from every announcement's (`t`).
pub fn notice_nonce() -> String {
    format!("n{:016x}", fastrand::u64(..))
}

/// Tells the actor how effect `queued` ended; `done` answers the id of the message an announcement made.
fn report(tools: &Tools, queued: &Queued, done: Result<Option<MessageId>, RestError>) {
    let outcome = match done {
        // When Discord made the message, the persona was told: its id's time (a replayed announcement that Discord
        // recognised by its nonce answers the message made before the crash), never later than now. On Discord's
        // clock, as the commands and messages a turn's start is compared with are: timed by our clock when the answer
        // came back, a turn's start fell after a `pause` typed just after the announcement, and the pause was taken
        // to begin after the holder's signal written then (tried and undone; `bot_commands`).
        Ok(Some(posted)) if posted.0 != 0 => {
            Outcome::Done { at: tools.clock.now().min(posted.created_at()), posted: Some(posted) }
        }
        Ok(_) => Outcome::Done { at: tools.clock.now(), posted: None },
        Err(e) => {
            let hint = if e.status() == Some(403) {
                " (the bot lacks a permission in this channel)"
            } else if matches!(queued.effect, Effect::Relay { .. }) {
                " (the original message stays as posted)"
            } else {
                ""
            };
            tracing::warn!(channel = %tools.channel, "could not {}: {e}{hint}", describe(&queued.effect));
            match e {
                RestError::Status { status, .. } if !e.is_transient() => Outcome::Refused { status },
                RestError::WebhooksFull(limit) => Outcome::NoWebhook(limit),
                _ => Outcome::GaveUp,
            }
        }
    };
    (tools.reports)(Report { id: queued.id, outcome });
}

/// The part of an effect that posts messages, which must keep its place in the channel: a relay's reposts, an
/// announcement (`announced`, the one before it). Answers the messages Discord holds for it: the reposts' (made or
/// found made), the announcement's.
async fn posting(
    tools: &Tools,
    effect: &Effect,
    replay: bool,
    announced: Option<MessageId>,
) -> Result<Vec<MessageId>, RestError> {
    let (rest, channel) = (tools.rest.as_ref(), tools.channel);
    match effect {
        Effect::Relay { message_id, persona, text, has_files, already_deleted, flags, mentions } => {
            if forgotten(tools, *message_id) {
                tracing::info!(%channel, message = %message_id, "deleted by someone before its relay: not reposted");
                return Ok(Vec::new());
            }
            // Its files and embeds, fetched only when the gateway saw some. What cannot be carried over fails the
            // relay here, before anything is posted or deleted: the original stays, files and all.
            let carries = if *has_files {
                match tools.retrying(|| rest.carried(channel, *message_id)).await {
                    Ok(carries) => Carried { flags: *flags, ..carries },
                    // Deleted by someone (its author, a moderator) before it was relayed: reposted, it would undo
                    // that deletion (found by a review). Nothing is posted. (The bot deletes the original only once
                    // every part shows, so a replay finding it gone has nothing left to post either.)
                    Err(e) if e.status() == Some(404) => return Ok(Vec::new()),
                    Err(e) => return Err(e),
                }
            } else {
                Carried { flags: *flags, ..Carried::default() }
            };
            // Repost first: if the repost fails, the original stays and nothing is lost.
            let mut made = Vec::new();
            if text.is_some() || !carries.is_empty() {
                let found = tools.personas.get(persona);
                // Those the original pinged, but no persona: an agent that posted with its mentions off pinged
                // nobody, and its repost must not either (found by a review).
                let not_pinged = |user| {
                    tools.personas.by_user(UserId(user)).is_some()
                        || mentions.as_ref().is_some_and(|pinged| !pinged.contains(&UserId(user)))
                };
                let pings = users_to_ping(text.as_deref().unwrap_or_default(), not_pinged);
                let voice = Voice {
                    name: found.map_or(persona.as_str(), |p| p.display_name.as_str()),
                    avatar_url: found.and_then(|p| p.avatar_url.as_deref()),
                    pings: &pings,
                };
                let parts = split_message(text.as_deref().unwrap_or_default());
                // After a crash some parts may be showing already: post only the missing ones, in order. Webhooks
                // take no nonce, so a repost the stopped process asked for just before it stopped is known only once
                // Discord shows it (found by a review: a restart within a second reposted it a second time).
                if replay {
                    let shows_by = tools.process_started + REPOST_SHOWS_WITHIN;
                    if sleep_unless_lost(Some(tools), shows_by.saturating_duration_since(Instant::now())).await {
                        // Left to the process that holds the channel, whose replay looks.
                        return Err(RestError::Unavailable("another process acts for the channel".into()));
                    }
                    made = tools.retrying(|| rest.reposts_made(channel, *message_id, voice.name, &parts)).await?;
                    // Someone may have deleted the original while the bot was down, a deletion no gateway event
                    // tells of now (found by a review: the replay reposted it). A message with files was looked at
                    // above; a plain one is looked at here, once, only when there is something to post. One the bot
                    // deleted itself (out of turn, then judged in turn) is gone for that reason, and reposted.
                    if !*has_files
                        && !*already_deleted
                        && made.len() < parts.len()
                        && original_gone(tools, *message_id).await?
                    {
                        tracing::info!(%channel, message = %message_id, "deleted while the bot was away: not reposted");
                        return Ok(Vec::new());
                    }
                }
                let nothing = Carried { flags: *flags, ..Carried::default() };
                for posted in made.len()..parts.len() {
                    // The files and embeds go with the last part, below the whole text; the flags with every part.
                    let carried = if posted + 1 == parts.len() { &carries } else { &nothing };
                    match repost_once(tools, *message_id, voice, &parts[..=posted], carried).await {
                        Ok(part) => made.push(part),
                        Err(e) => {
                            // The original stays, so the parts showing above it would show its text twice; unless
                            // the lease is lost: the holder's replay posts the parts missing after those.
                            take_back_parts(tools, &made).await;
                            return Err(e);
                        }
                    }
                }
            }
            Ok(made)
        }
        Effect::Delete { .. } | Effect::React { .. } => Ok(Vec::new()),
        Effect::Announce(announcement) => announce_once(tools, announcement, replay, announced).await.map(|m| vec![m]),
    }
}

/// Whether `message` is gone from the channel (404). A look that is refused (the bot cannot read the history) says
/// nothing: the relay goes on as before.
async fn original_gone(tools: &Tools, message: MessageId) -> Result<bool, RestError> {
    match tools.retrying(|| tools.rest.carried(tools.channel, message)).await {
        Err(e) if e.status() == Some(404) => Ok(true),
        Err(e) if e.is_transient() => Err(e),
        _ => Ok(false),
    }
}

fn note_own_deletion(tools: &Tools, message: MessageId) {
    let mut gone = tools.gone.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if gone.own.len() >= OWN_DELETIONS_KEPT {
        gone.own.pop_front();
    }
    gone.own.push_back(message);
}

/// Whether the sender of `gone` deleted `message` lately (see [`Deletions::own`]).
fn deleted_lately(gone: &Gone, message: MessageId) -> bool {
    gone.lock().unwrap_or_else(std::sync::PoisonError::into_inner).own.contains(&message)
}

/// Whether someone deleted `message` while its relay waited (see [`Gone`]); the mark is used up.
fn forgotten(tools: &Tools, message: MessageId) -> bool {
    let mut gone = tools.gone.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let at = gone.marks.iter().position(|id| *id == message);
    at.map(|at| gone.marks.swap_remove(at)).is_some()
}

/// Posts an announcement, retried as [`retrying`] does. Its nonce answers a repeat with the first message for a few
/// minutes only: one that may have been posted longer ago (replayed after a long stop, or still retried long after
/// a try whose answer was lost) is looked for in the channel first, after the announcement before it (`announced`)
/// and from shortly before the instant it was decided. The look is retried by the same policy, and again after it
/// while it still fails in a way that may pass; refused (the bot cannot read the history), the announcement is
/// posted.
async fn announce_once(
    tools: &Tools,
    announcement: &Announcement,
    replay: bool,
    announced: Option<MessageId>,
) -> Result<MessageId, RestError> {
    let (rest, channel) = (tools.rest.as_ref(), tools.channel);
    let decided = decided_at(&announcement.nonce);
    // Since when it may be showing unknown to this process: since it was decided, if a run before a crash may have
    // posted it; in this run, since the first try whose outcome is unknown.
    let mut unsure_since = if replay { decided } else { None };
    // Where to look for it, if it may be showing since `since`: without an announcement known before it (a session
    // saved by an older build), only a small allowance, as the same words a minute earlier may be another session's.
    let look_after = |since: DateTime<Utc>| {
        let allowance = if announced.is_some() { NONCE_REMEMBERED_FOR } else { CLOCK_AHEAD_UNANCHORED };
        let from = MessageId::first_at(decided.unwrap_or(since) - allowance);
        announced.map_or(from, |before| before.max(from))
    };
    let mut policy = Policy::new(Some(tools));
    let mut looking_since = None;
    loop {
        if let Some(since) = unsure_since.filter(|since| tools.clock.now() - *since > NONCE_REMEMBERED_FOR) {
            let after = look_after(since);
            let looking_from = *looking_since.get_or_insert(tools.clock.now());
            match tools.retrying(|| rest.announcement_made(channel, after, &announcement.text)).await {
                Ok(Some(found)) => return Ok(found),
                Ok(None) => {}
                // Refused, or failing for too long: posting it is better than leaving the persona untold (or pausing
                // the channel on a 403 that concerns only reading its history).
                Err(e) if !e.is_transient() || tools.clock.now() - looking_from >= LOOK_FOR_AT_MOST => {
                    tracing::warn!(%channel, "could not look for an announcement made already; posting it: {e}")
                }
                // Still failing in a way that may pass (no READY yet, Discord's 5xx): posted now, it could show
                // twice, its nonce long forgotten (found by a review). It is looked for again: the announcement
                // holds its turn's deadline until it is known made.
                Err(e) => {
                    if lease_lost(tools) {
                        return Err(e);
                    }
                    tracing::warn!(%channel, "still cannot look for an announcement made already; looking again: {e}");
                    continue;
                }
            }
            unsure_since = None; // Not showing (or not known): only tries from now on count.
        }
        let tried = tools.clock.now();
        let error = match rest.announce(channel, announcement).await {
            Ok(posted) => return Ok(posted),
            Err(e) if e.is_transient() => e,
            Err(e) => return Err(e),
        };
        if outcome_unknown(&error) {
            unsure_since.get_or_insert(tried);
        }
        if let Err(given_up) = policy.wait(error).await {
            // A try whose outcome is unknown may have posted it: one look, so that history does not say it failed
            // (and the turn's clock does not restart) while the channel shows it.
            let found = match unsure_since {
                Some(since) => rest.announcement_made(channel, look_after(since), &announcement.text).await,
                None => Ok(None),
            };
            return match found {
                Ok(Some(posted)) => Ok(posted),
                _ => Err(given_up),
            };
        }
    }
}

/// Posts a notice, retried as [`retrying`] does. Its nonce answers a repeat for a few minutes only: once a try whose
/// outcome was unknown is older than that, the channel is looked at before the next try, after `newest` (the newest
/// message this sender knows it posted) and from shortly before that try. A look that fails posts it: a notice holds
/// no turn. Answers the message made (or found).
async fn notice_once(
    tools: &Tools,
    text: &str,
    nonce: &str,
    newest: Option<MessageId>,
) -> Result<MessageId, RestError> {
    let (rest, channel) = (tools.rest.as_ref(), tools.channel);
    let mut policy = Policy::new(Some(tools));
    let mut unsure_since: Option<DateTime<Utc>> = None;
    loop {
        if let Some(since) = unsure_since.filter(|since| tools.clock.now() - *since > NONCE_REMEMBERED_FOR) {
            let from = MessageId::first_at(since - CLOCK_AHEAD_UNANCHORED);
            let after = newest.map_or(from, |newest| newest.max(from));
            match tools.retrying(|| rest.announcement_made(channel, after, text)).await {
                Ok(Some(found)) => return Ok(found),
                Ok(None) => {}
                Err(e) if lease_lost(tools) => return Err(e),
                Err(e) => {
                    tracing::warn!(%channel, "could not look for a notice that may show already; posting it: {e}")
                }
            }
            unsure_since = None; // Not showing (or not known): only tries from now on count.
        }
        let tried = tools.clock.now();
        let error = match rest.notice(channel, text, nonce).await {
            Ok(posted) => return Ok(posted),
            Err(e) if e.is_transient() => e,
            Err(e) => return Err(e),
        };
        if outcome_unknown(&error) {
            unsure_since.get_or_insert(tried);
        }
        policy.wait(error).await?;
    }
}

/// How the part of an effect that posts nothing ended.
enum Tidied {
    Done,
    /// The relayed message was gone when the relay came to delete it, and no try of this process can have deleted
    /// it: someone else did (its author, a moderator), after the relay had begun.
    DeletedBySomeone,
}

/// The part of an effect that posts nothing: deleting the relayed or out-of-turn message, reacting. `replay`: the
/// effect is carried out again after a restart, whose process before may have deleted the message already.
async fn tidy(tools: &Tools, effect: &Effect, replay: bool) -> Result<Tidied, RestError> {
    let (rest, channel) = (tools.rest.as_ref(), tools.channel);
    match effect {
        Effect::Relay { message_id, already_deleted, .. } => {
            // A 404 may answer the bot's own deletion: one asked for before (out of turn; the deletion may have been
            // refused, so it is asked for again), one this sender made lately (an edit of a message removed as out
            // of turn, judged in turn), one the process before made (a replay), or a try whose answer was lost (a
            // time-out, a 5xx).
            let ours_before = replay || *already_deleted || deleted_lately(&tools.gone, *message_id);
            let perhaps_ours = std::sync::atomic::AtomicBool::new(ours_before);
            let flag = &perhaps_ours;
            let deleted = tools
                .retrying(|| async move {
                    let tried = rest.delete(channel, *message_id).await;
                    if tried.as_ref().is_err_and(outcome_unknown) {
                        flag.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    tried
                })
                .await;
            match deleted {
                Err(e) if e.status() == Some(404) && !perhaps_ours.into_inner() => {
                    tracing::info!(%channel, message = %message_id, "deleted by someone while it was relayed: the repost is taken back");
                    Ok(Tidied::DeletedBySomeone)
                }
                deleted => gone_is_done(deleted).map(|()| Tidied::Done),
            }
        }
        Effect::Delete { message_id } => {
            // Noted before it is asked for, so before its MESSAGE_DELETE can come back.
            note_own_deletion(tools, *message_id);
            gone_is_done(tools.retrying(|| rest.delete(channel, *message_id)).await).map(|()| Tidied::Done)
        }
        Effect::React { message_id, emoji } => {
            gone_is_done(tools.retrying(|| rest.react(channel, *message_id, emoji)).await).map(|()| Tidied::Done)
        }
        Effect::Announce(_) => Ok(Tidied::Done),
    }
}

/// A message that is already gone (404) needs nothing more: deleting it twice, or reacting to one its author
/// removed, is done.
fn gone_is_done(result: Result<(), RestError>) -> Result<(), RestError> {
    match result {
        Err(e) if e.status() == Some(404) => Ok(()),
        other => other,
    }
}

/// Posts the last of `parts` (those before it are showing), retried as [`retrying`] does; but a repost whose
/// outcome is unknown (a time-out, a broken connection, a server error) may have been made, and a webhook execute
/// has no nonce: the channel is looked at before each such retry. Answers the message made.
async fn repost_once(
    tools: &Tools,
    original: MessageId,
    voice: Voice<'_>,
    parts: &[String],
    carries: &Carried,
) -> Result<MessageId, RestError> {
    let (rest, channel) = (tools.rest.as_ref(), tools.channel);
    let part = parts.last().expect("at least the part to post");
    let mut policy = Policy::new(Some(tools));
    loop {
        let tried_at = Instant::now();
        let error = match rest.repost(channel, voice, part, carries).await {
            Ok(made) => return Ok(made),
            Err(e) if e.is_transient() => e,
            Err(e) => return Err(e),
        };
        let unknown = outcome_unknown(&error);
        let failed_at = Instant::now();
        // Looked for before it would show, a repost Discord is still making would be made again (found by a review:
        // looked for half a second after a time-out, one made seconds later showed twice). A call whose answer was
        // slow to fail (a time-out, a proxy's 504, an upload) may still be under way for as long again: as long as
        // it took, but never longer than a call is given (a call that first waited for a rate limit or a free slot
        // took longer than its exchange), nor less than a quick failure is given.
        let limit =
            crate::discord::rest::http::time_limit_with(carries.files.iter().map(|f| f.bytes.len() as u64).sum());
        let took = (failed_at - tried_at).clamp(REPOST_SHOWS_WITHIN, limit);
        let least = if unknown { took } else { Duration::ZERO };
        if let Err(given_up) = policy.wait_at_least(error, least).await {
            if lease_lost(tools) {
                return Err(given_up); // Left to the process that holds the channel, which looks for it.
            }
            // The last try may have been made all the same: one look, once it would show, so that a repost
            // showing is not left above the original the failure keeps.
            if unknown
                && sleep_unless_lost(Some(tools), (failed_at + least).saturating_duration_since(Instant::now())).await
            {
                return Err(given_up);
            }
            let found = if unknown { repost_found(rest, channel, original, voice, parts).await } else { Ok(None) };
            return match found {
                Ok(Some(made)) => Ok(made),
                _ => Err(given_up),
            };
        }
        if unknown {
            if let Some(made) = tools.retrying(|| repost_found(rest, channel, original, voice, parts)).await? {
                return Ok(made);
            }
        }
    }
}

/// The message of the last of `parts`, if every one of them shows after `original`.
async fn repost_found(
    rest: &dyn Rest,
    channel: ChannelId,
    original: MessageId,
    voice: Voice<'_>,
    parts: &[String],
) -> Result<Option<MessageId>, RestError> {
    let found = rest.reposts_made(channel, original, voice.name, parts).await?;
    Ok(if found.len() == parts.len() { found.last().copied() } else { None })
}

/// Deletes the parts of a repost posted (or found posted) when the relay failed for good after them (a later part
/// refused, the original not deleted), each in a few tries. Newest first: cut short (a crash, the lease lost), what
/// is left is the first parts, in order, which a replay finds and completes. Each waits while the lease is unsure,
/// and none is tried once it is lost: the holder's replay counts the parts it sees.
async fn take_back_parts(tools: &Tools, parts: &[MessageId]) {
    for part in parts.iter().rev() {
        if while_unsure(tools).await == Lease::Lost {
            return;
        }
        if let Err(e) = delete_in_a_few_tries(|| tools.rest.take_back(tools.channel, *part)).await {
            tracing::warn!(channel = %tools.channel, "could not take back a repost of a failed relay: {e}");
        }
    }
}

/// Whether a failed call may have been carried out all the same: Discord may have acted before the answer was lost
/// or went wrong. A 429 and a refusal were not carried out.
fn outcome_unknown(error: &RestError) -> bool {
    match error {
        RestError::Timeout(_) | RestError::Transport(_) => true,
        RestError::Status { status, .. } => *status >= 500,
        RestError::Unavailable(_)
        | RestError::Impossible(_)
        | RestError::WebhooksFull(_)
        | RestError::NetworkRefused(_)
        | RestError::WebhookTokenRefused(_) => false,
    }
}

/// Runs a REST call until it succeeds, fails for good, or [`GIVE_UP_AFTER`] has passed.
pub async fn retrying<T, F, Fut>(call: F) -> Result<T, RestError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, RestError>>,
{
    retrying_while(None, call).await
}

/// [`retrying`], each retry waiting first until this process is sure it acts for the sender's channel.
async fn retrying_while<T, F, Fut>(sender: Option<&Tools>, mut call: F) -> Result<T, RestError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, RestError>>,
{
    let mut policy = Policy::new(sender);
    loop {
        match call().await {
            Ok(answer) => return Ok(answer),
            Err(e) if e.is_transient() => policy.wait(e).await?,
            Err(e) => return Err(e),
        }
    }
}

impl Tools {
    /// A sender's calls are [`retrying`], but never tried again while another process may act for the channel.
    async fn retrying<T, F, Fut>(&self, call: F) -> Result<T, RestError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, RestError>>,
    {
        retrying_while(Some(self), call).await
    }
}

/// Waits while this process may no longer act for the channel, looking again every [`LEASE_LOOK_EVERY`], until its
/// lease is renewed ([`Lease::Sure`]) or found lost; the wait is added to the sender's. A process that carried on
/// meanwhile would meet the new owner carrying out the same saved outbox (a repost made twice, an announcement
/// after the new owner's).
async fn while_unsure(tools: &Tools) -> Lease {
    let mut lease = tools.acting.lease();
    if lease == Lease::Unsure {
        let started = Instant::now();
        tracing::warn!(
            channel = %tools.channel,
            "this process may have lost the channel's lease (its renewals fail): its effects wait until it is sure"
        );
        while lease == Lease::Unsure {
            tokio::time::sleep(LEASE_LOOK_EVERY).await;
            lease = tools.acting.lease();
        }
        tools.acting.add_wait(started.elapsed());
    }
    lease
}

/// Whether another process holds the channel now (or this one let it go): what is under way stops as it is.
fn lease_lost(tools: &Tools) -> bool {
    tools.acting.lease() == Lease::Lost
}

/// Sleeps `wait`, but for a sender's call stops as soon as another process holds the channel (looked at every
/// [`LEASE_LOOK_EVERY`]), so that a long back-off does not keep a sender that must stop. Whether it was lost.
async fn sleep_unless_lost(sender: Option<&Tools>, wait: Duration) -> bool {
    let Some(tools) = sender else {
        tokio::time::sleep(wait).await;
        return false;
    };
    let until = Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        tokio::time::sleep(left.min(LEASE_LOOK_EVERY)).await;
        if lease_lost(tools) {
            return true;
        }
    }
}

/// The retry policy's state for one call: since when it is tried, the next back-off, and the sender whose lease
/// it waits for (the sender's waits since the call began are not counted against [`GIVE_UP_AFTER`]).
struct Policy<'a> {
    started: Instant,
    backoff: Duration,
    sender: Option<&'a Tools>,
    waited_before: Duration,
    /// How long this call has waited out 429s: not counted against [`GIVE_UP_AFTER`] either.
    rate_limited: Duration,
}

impl<'a> Policy<'a> {
    fn new(sender: Option<&'a Tools>) -> Self {
        let waited_before = sender.map_or(Duration::ZERO, |tools| tools.acting.waited());
        Self { started: Instant::now(), backoff: BACKOFF_FIRST, sender, waited_before, rate_limited: Duration::ZERO }
    }

    /// Waits before the next try after a transient `error`, or answers it when the call is to be given up.
    async fn wait(&mut self, error: RestError) -> Result<(), RestError> {
        self.wait_at_least(error, Duration::ZERO).await
    }

    /// [`Policy::wait`], for `least` at the least unless Discord says when to try again (a 429).
    async fn wait_at_least(&mut self, error: RestError, least: Duration) -> Result<(), RestError> {
        let (wait, limited) = match &error {
            RestError::Status { status: 429, retry_after, .. } => (retry_after.unwrap_or(RATE_LIMIT_WAIT), true),
            _ => {
                let wait = self.backoff.max(least);
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                (wait, false)
            }
        };
        let waited = self.sender.map_or(Duration::ZERO, |tools| tools.acting.waited() - self.waited_before);
        // A 429 says when to try again (spec 9): waited out, however long, and never counted against the minutes
        // that server errors and time-outs are given (before, one longer than what was left of them lost the effect).
        if !limited && self.started.elapsed().saturating_sub(waited + self.rate_limited) + wait > GIVE_UP_AFTER {
            return Err(error);
        }
        if limited {
            self.rate_limited += wait;
            if wait > LONG_RATE_LIMIT {
                tracing::warn!("Discord asks to wait {wait:?} before trying again (a rate limit): waiting");
            }
        }
        tracing::debug!("retrying in {wait:?}: {error}");
        if sleep_unless_lost(self.sender, wait).await {
            return Err(error); // Left to the process that holds the channel.
        }
        if let Some(tools) = self.sender {
            if while_unsure(tools).await == Lease::Lost {
                return Err(error); // Left to the process that holds the channel.
            }
        }
        Ok(())
    }
}

fn describe(effect: &Effect) -> &'static str {
    match effect {
        Effect::Relay { .. } => "relay a message",
        Effect::Delete { .. } => "remove an out-of-turn message",
        Effect::React { .. } => "react to a completed turn",
        Effect::Announce(_) => "post an announcement",
    }
}

#[cfg(test)]
mod tests;

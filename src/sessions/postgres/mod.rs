//! The Postgres store (`run --store postgres://...`): sessions, their whole history and the leases in three tables
//! (`migrations/`), shared by every process of the bot.
//!
//! A process acts for a channel only while it holds the channel's lease: it claims it before the channel's actor
//! does anything, renews all its leases in one statement every third of their lifetime, and every save is fenced:
//! the session and its new events are written in one transaction that first checks, under a lock on the lease row,
//! that the lease still has this process's owner and epoch. A process that died leaves leases that expire; another
//! process then claims them (bumping the epoch), and a save of the old owner is refused from that instant.
//!
//! Parts:
//! - `lease`: claiming, renewing, letting go, releasing, and finding the channels nobody holds.
//! - `lazy`: activity-only saves, batched into one statement per [`LAZY_SAVE_DELAY`].
//! - `rows`: a session or an event as a row, and back.
//! - `unreadable`: rows this build could not decode, passed over by the orphan watch until they change.
//! - `processes`: the shard layout each process runs (in its connections' names), so that a total differing
//!   between processes is warned about.
//! - [`copy`]: every session and history at once, for `convert`.
//!
//! [`LAZY_SAVE_DELAY`]: crate::store::writer::LAZY_SAVE_DELAY

pub mod copy;
mod lazy;
mod lease;
mod processes;
mod rows;
mod unreadable;

pub use lease::CLAIM_PAGE;
pub use processes::OtherLayout;

use super::location::PostgresUrl;
use super::{Claim, LeaseOptions, Saver, SessionStore, SessionStoreError};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use crate::core::shards::ShardRange;
use crate::store::LoadReport;
use async_trait::async_trait;
use lazy::LazySaves;
use rows::{db_id, decode_event, decode_session, event_rows, session_row};
use sqlx::Connection as _;
use sqlx::Postgres;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::error::Elapsed;
use unreadable::UnreadableRows;

/// The schema, embedded: every process migrates the database when it opens it (concurrent processes take turns:
/// sqlx holds an advisory lock while migrating).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!();

/// Connections the bot keeps to the database: saves of different channels run side by side, and Postgres commits
/// concurrent transactions together.
const POOL_SIZE: u32 = 8;
/// How long opening the store waits for the database before saying it cannot be reached.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the server keeps a connection of this store that sits idle inside a transaction before it ends it (and
/// its locks with it), at most: see `connect`.
pub const IDLE_IN_TRANSACTION_MAX: Duration = Duration::from_secs(5);

/// The idle-in-transaction bound of a process whose leases last `ttl`: a third of it, [`IDLE_IN_TRANSACTION_MAX`]
/// at most. A renewal locks every lease row of the process, so it waits for a save stuck holding one (its client gone
/// without a word) until the server ends that save's connection: leases renewed a period (a third of `ttl`) earlier
/// must still be live when the renewal goes through.
pub fn idle_in_transaction_bound(ttl: Duration) -> Duration {
    (ttl / 3).min(IDLE_IN_TRANSACTION_MAX)
}

/// The idle-in-transaction bound of `convert`, which copies everything in one transaction and holds no lease: a
/// chunk of 1,000 events (several MB with their texts) sent over a slow link must not end the copy, and a copy whose
/// client is gone must not keep its rows locked (a bot's save of the same channel would wait on them) for hours.
pub const IDLE_IN_TRANSACTION_FOR_COPIES: Duration = Duration::from_secs(120);

/// The database as a [`SessionStore`], for one process: its owner name and the leases it holds.
pub struct PgSessions {
    pool: PgPool,
    url: PostgresUrl,
    /// This process, as lease rows name it: the node and a random id drawn at each start, so that a restarted
    /// process never mistakes its predecessor's leases for its own.
    owner: String,
    ttl: Duration,
    /// The channels this process holds, with each lease's epoch: saves carry it, to be fenced against it.
    held: Mutex<HashMap<ChannelId, i64>>,
    /// Numbers every save of this process, so that a lazy save that reaches the database after a later durable one
    /// of the same lease is dropped.
    writes: AtomicI64,
    lazy: Arc<LazySaves>,
    /// Channels whose last durable save sent its COMMIT and never heard back: it may be in the database or not. Each
    /// with the lease's epoch and where its first event went in the history (`n` before it), so that the next save,
    /// which carries the same events first, appends only those the database lacks.
    unsure: Mutex<HashMap<ChannelId, Unsure>>,
    /// When the last renewal that worked was sent (or the store opened, before any claim): every lease held then
    /// lasts at least a lease time from it, and those claimed since, longer.
    renewed: Mutex<std::time::Instant>,
    /// Channels claimed (one by one, or by the pages of `load_all` at start) that no renewal has extended yet, with
    /// when each claim was sent: a renewal sent after the claim but before its answer (a claim waiting for a locked
    /// row) did not extend it, so its lease is sure from the claim's time, not the renewal's.
    unrenewed: Mutex<HashMap<ChannelId, std::time::Instant>>,
    /// Channels renewals found taken, for [`SessionStore::lost_channels`].
    lost: Mutex<Vec<ChannelId>>,
    /// Rows this build could not decode, by version: not taken up again as orphans until they change.
    unreadable: UnreadableRows,
    /// Live processes running with another total of shards, as the last renewal found them, and those warned of.
    other_layouts: Mutex<Vec<OtherLayout>>,
    layouts_warned: Mutex<std::collections::HashSet<String>>,
    /// Saying the layout failed once already (warned of once).
    layout_failed: std::sync::atomic::AtomicBool,
}

/// The events of `rows` this build reads; the others (written by a newer build) are left out with a warning saying
/// how many, as the file log's are (before, unsaid).
fn readable_events(channel: ChannelId, rows: impl ExactSizeIterator<Item = (String,)>) -> Vec<HistoryEvent> {
    let read = rows.len();
    let events: Vec<HistoryEvent> = rows.filter_map(|(json,)| decode_event(&json)).collect();
    if events.len() < read {
        tracing::warn!(
            %channel,
            "{} history event(s) are none this build reads (written by a newer build): left out of what was read",
            read - events.len()
        );
    }
    events
}

/// A durable save whose outcome is unknown (see [`PgSessions::unsure`]).
#[derive(Clone, Copy, Debug)]
struct Unsure {
    epoch: i64,
    /// The channel's history length before the save's first event.
    base: i64,
}

impl PgSessions {
    /// Connects, migrates the schema and starts the lazy-save writer. The errors say what to check; the password is
    /// never shown.
    pub async fn open(url: &PostgresUrl, leases: LeaseOptions) -> anyhow::Result<Arc<Self>> {
        let pool = connect(url, idle_in_transaction_bound(leases.ttl)).await?;
        let owner = format!("{}/{}-{:016x}", leases.node, std::process::id(), fastrand::u64(..));
        tracing::info!(owner = %owner, "sessions are kept in the database {url}");
        let lazy = LazySaves::start(pool.clone(), owner.clone(), url.to_string(), patience_for(leases.ttl));
        Ok(Arc::new(Self {
            pool,
            url: url.clone(),
            owner,
            ttl: leases.ttl,
            held: Mutex::default(),
            writes: AtomicI64::new(1),
            lazy,
            unsure: Mutex::default(),
            renewed: Mutex::new(std::time::Instant::now()),
            unrenewed: Mutex::default(),
            lost: Mutex::default(),
            unreadable: UnreadableRows::default(),
            other_layouts: Mutex::default(),
            layouts_warned: Mutex::default(),
            layout_failed: Default::default(),
        }))
    }

    /// This process's name in the lease rows.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The connection pool (the tests look at the tables through it).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn failed(&self, action: &'static str) -> impl FnOnce(sqlx::Error) -> SessionStoreError + '_ {
        move |source| SessionStoreError::Database { database: self.url.to_string(), action, source }
    }

    /// How long a save, or a round of renewals, waits for the database: a third of the lease time. A server gone
    /// without a word (its host lost, a failover) leaves a connection waiting for ever otherwise (sqlx sets no TCP
    /// keepalive): a renewal round stuck so would never be tried again, every lease of the process running out, and
    /// a save stuck so would stall its channel for good.
    fn patience(&self) -> Duration {
        patience_for(self.ttl)
    }

    /// A connection of the pool, waited for [`PgSessions::patience`] at most, for work that is given that long too
    /// (see [`PgSessions::closed_if_late`]).
    async fn connection(&self, action: &'static str) -> Result<PoolConnection<Postgres>, SessionStoreError> {
        connection_within(&self.pool, self.patience()).await.map_err(self.failed(action))
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<ChannelId, i64>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn epoch_of(&self, channel: ChannelId) -> Option<i64> {
        self.held().get(&channel).copied()
    }

    fn unrenewed(&self) -> std::sync::MutexGuard<'_, HashMap<ChannelId, std::time::Instant>> {
        self.unrenewed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The channel was taken over: its saves are refused from now on, without asking the database.
    fn lose(&self, channel: ChannelId) {
        self.held().remove(&channel);
        self.unrenewed().remove(&channel);
        self.lazy.forget(channel);
        self.forget_unsure(channel);
    }

    fn forget_unsure(&self, channel: ChannelId) {
        self.unsure.lock().unwrap_or_else(PoisonError::into_inner).remove(&channel);
    }

    /// How many of a save's events, which come first in this one, reached the history, if that save's outcome was
    /// unknown; under the lock of the lease row (only its holder appends, so the history's length is settled).
    async fn already_appended(
        &self,
        tx: &mut sqlx::PgConnection,
        channel: i64,
        epoch: i64,
        events: usize,
    ) -> Result<(Option<i64>, usize), SessionStoreError> {
        let unsure =
            self.unsure.lock().unwrap_or_else(PoisonError::into_inner).get(&ChannelId(channel as u64)).copied();
        let Some(unsure) = unsure.filter(|u| u.epoch == epoch) else { return Ok((None, 0)) };
        let logged: i64 = sqlx::query_scalar("SELECT COALESCE(max(n), 0) FROM history WHERE channel_id = $1")
            .bind(channel)
            .fetch_one(tx)
            .await
            .map_err(self.failed("read how long a channel's history is"))?;
        let landed = usize::try_from(logged - unsure.base).unwrap_or(0).min(events);
        if landed > 0 {
            tracing::info!(
                channel,
                events = landed,
                "the save whose commit was not confirmed did reach the database: its events are not appended again"
            );
        }
        Ok((Some(unsure.base), landed))
    }

    fn renewed_at(&self) -> std::time::Instant {
        *self.renewed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A renewal sent at `sent` worked.
    fn renewed(&self, sent: std::time::Instant) {
        let mut renewed = self.renewed.lock().unwrap_or_else(PoisonError::into_inner);
        *renewed = (*renewed).max(sent);
    }

    fn next_write(&self) -> i64 {
        self.writes.fetch_add(1, Ordering::Relaxed)
    }

    /// Reads the JSON of the sessions of channels just claimed (channel id, epoch; by channel id), as text, with
    /// each one's epoch. They are read after the claim, in a statement of their own, so that a save the previous
    /// holder committed while the claim waited for its lease row is part of what is read.
    async fn read_claimed(&self, claimed: &[(i64, i64)]) -> Result<Vec<ClaimedRow>, SessionStoreError> {
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = claimed.iter().map(|(channel, _)| *channel).collect();
        let rows: Vec<(i64, String, String)> = within(&self.pool, self.patience(), async |connection| {
            let rows = sqlx::query_as(
                "SELECT channel_id, session::text, xmin::text FROM sessions WHERE channel_id = ANY($1) \
                 ORDER BY channel_id",
            )
            .bind(&ids)
            .fetch_all(&mut *connection)
            .await;
            // The connection's read buffer grows to the largest row read and keeps that size (sqlx never shrinks it).
            connection.shrink_buffers();
            rows
        })
        .await
        .map_err(self.failed("read the saved sessions"))?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, json, version)| {
                let at = claimed.binary_search_by_key(&id, |(channel, _)| *channel).ok()?;
                Some(ClaimedRow { channel: ChannelId(id as u64), epoch: claimed[at].1, json, version })
            })
            .collect())
    }

    /// Holds the channels of a decoded page under their epochs, and reports those that cannot be used: left in
    /// the database as they are, the channels not resumed, their leases let go at once (a process of a build that
    /// can read them, in a mixed-version rollout, takes them without waiting for the lease to expire) and their
    /// rows passed over by the orphan watch until they change. Each lease is sure from when its page's claim was
    /// `sent`, as a claim of one channel is ([`Saver::claim`]): not from when the store was opened, which the
    /// token's check at start may precede by many seconds (found by a review: every resumed channel's sender then
    /// took its lease for lost until the first renewal).
    fn keep(&self, page: DecodedPage, sent: std::time::Instant, report: &mut LoadReport) {
        for Decoded { channel, epoch, version, session } in page {
            self.unreadable.read(channel, &version, session.is_ok());
            // Noted first, as in `claim`: a renewal that sees the channel held then extends it from its own time.
            self.unrenewed().insert(channel, sent);
            self.held().insert(channel, epoch);
            match session {
                Ok(session) => report.sessions.push(session),
                Err(e) => {
                    tracing::error!("{e}; it is left in the database as it is, and the channel is not resumed");
                    report.problems.push(e.to_string());
                    self.let_go_of(channel);
                }
            }
        }
    }
}

/// How long a call to the database waits for its answer, with leases lasting `ttl`: a third of it (see
/// [`PgSessions::patience`]).
fn patience_for(ttl: Duration) -> Duration {
    ttl / 3
}

/// The error of a call to the database that got no answer within `patience`.
pub(super) fn timed_out(patience: Duration) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer within {patience:?}")))
}

/// A connection of `pool`, waited for `patience` at most.
pub(super) async fn connection_within(
    pool: &PgPool,
    patience: Duration,
) -> Result<PoolConnection<Postgres>, sqlx::Error> {
    tokio::time::timeout(patience, pool.acquire()).await.unwrap_or_else(|_| Err(timed_out(patience)))
}

/// What work on `connection` answered within its time (`None` after that: the work was dropped, a transaction not
/// committed rolled back). A connection whose work ran late is closed, not given back: its server may be gone without
/// a word, and sqlx's look at a connection given back has no time limit, so each such connection would hold one of
/// the pool's places for good and soon every save and renewal would wait.
pub(super) fn closed_if_late<T>(connection: &mut PoolConnection<Postgres>, answered: Result<T, Elapsed>) -> Option<T> {
    if answered.is_err() {
        connection.close_on_drop();
    }
    answered.ok()
}

/// One statement's `work` on a connection of `pool`, within `patience` (see [`closed_if_late`]).
pub(super) async fn within<T>(
    pool: &PgPool,
    patience: Duration,
    work: impl AsyncFnOnce(&mut sqlx::PgConnection) -> Result<T, sqlx::Error>,
) -> Result<T, sqlx::Error> {
    let mut connection = connection_within(pool, patience).await?;
    let answered = tokio::time::timeout(patience, work(&mut connection)).await;
    closed_if_late(&mut connection, answered).unwrap_or_else(|| Err(timed_out(patience)))
}

/// A session row read just after its channel was claimed.
struct ClaimedRow {
    channel: ChannelId,
    /// The epoch of the lease claimed.
    epoch: i64,
    json: String,
    /// The row's `xmin`: which version of it was read.
    version: String,
}

/// A claimed row decoded, or why it cannot be used.
struct Decoded {
    channel: ChannelId,
    epoch: i64,
    version: String,
    session: Result<Session, SessionStoreError>,
}

/// A page of claimed rows, decoded.
type DecodedPage = Vec<Decoded>;

/// The outcome of [`decode_page`] on its thread (a panic there goes on here).
async fn decoded(page: tokio::task::JoinHandle<DecodedPage>) -> DecodedPage {
    page.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// Decodes a page of sessions read as text (on a blocking thread: about 20 µs each), freeing each text once read.
fn decode_page(rows: Vec<ClaimedRow>) -> DecodedPage {
    rows.into_iter()
        .map(|ClaimedRow { channel, epoch, json, version }| Decoded {
            channel,
            epoch,
            version,
            session: decode_session(channel, &json),
        })
        .collect()
}

/// Connects to the database and brings its tables up to date, every connection's transactions ended by the server
/// once idle for `idle_in_transaction`. The errors say what to check; the password is never shown.
pub async fn connect(url: &PostgresUrl, idle_in_transaction: Duration) -> anyhow::Result<PgPool> {
    let idle_ms = format!("{}ms", idle_in_transaction.as_millis().max(1));
    let options = PgConnectOptions::from_str(url.expose())
        .map_err(|e| {
            anyhow::anyhow!(
                "the store URL {url} is not a valid Postgres URL ({e}); write it as \
                 postgres://user:password@host:5432/database"
            )
        })?
        .application_name("turn-manager")
        // A process lost mid-transaction (its machine or network gone, no FIN) would hold its row locks until the
        // server's TCP gives up on it, some two hours: a takeover of its channels (whose claim waits on the lease
        // row it locked) would wait as long, and so would this process's renewals. Every transaction here is a few
        // statements sent back to back.
        // READ COMMITTED whatever the database's or the role's default: the fencing and the history appends are
        // reasoned about under it (each statement sees what committed before it, after the lease row's lock), and a
        // default of REPEATABLE READ would make them fail with serialization errors (found by a review).
        .options([
            ("idle_in_transaction_session_timeout", idle_ms.as_str()),
            // A space separates options unless escaped (sqlx writes the value as given).
            ("default_transaction_isolation", r"read\ committed"),
        ]);
    let could_not = |e: sqlx::Error| {
        anyhow::anyhow!(
            "could not connect to the session database {url}: {e}; check that Postgres runs and is reachable there, \
             that the database exists, and the user name and password (in the URL or PGPASSWORD)"
        )
    };
    first_connection(&options).await.map_err(could_not)?;
    let pool = PgPoolOptions::new()
        .max_connections(POOL_SIZE)
        .acquire_timeout(CONNECT_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(could_not)?;
    if !all_migrations_applied(&pool).await {
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| anyhow::anyhow!("could not set up the tables of the session database {url}: {e}"))?;
    }
    Ok(pool)
}

/// One connection made and closed, tried again for [`CONNECT_TIMEOUT`] while the failure may pass (see [`may_pass`]),
/// so that a failure says why: the pool's own says only that it timed out (found by a newcomer: "pool timed out
/// while waiting for an open connection" for a server that refused). Any other failure is final at once.
async fn first_connection(options: &PgConnectOptions) -> Result<(), sqlx::Error> {
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    loop {
        let tried = tokio::time::timeout_at(deadline, sqlx::PgConnection::connect_with(options)).await;
        match tried {
            Ok(Ok(connection)) => {
                let _ = sqlx::Connection::close(connection).await;
                return Ok(());
            }
            Ok(Err(e)) if !may_pass(&e) || tokio::time::Instant::now() + FIRST_CONNECTION_RETRY >= deadline => {
                return Err(e);
            }
            Ok(Err(_)) => tokio::time::sleep(FIRST_CONNECTION_RETRY).await,
            Err(_) => return Err(timed_out(CONNECT_TIMEOUT)),
        }
    }
}

/// Whether a first connection's failure may pass by itself: the server not reachable yet (a Postgres still starting
/// beside the bot, in a compose file), or answering that it is starting up or full, as sqlx's pool tries again too
/// (found by a review: 57P03 was taken for final). A refusal (a password, no such database), TLS or a setting is not.
fn may_pass(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) => true,
        // cannot_connect_now (starting up), too_many_connections.
        sqlx::Error::Database(answer) => matches!(answer.code().as_deref(), Some("57P03" | "53300")),
        _ => false,
    }
}

/// How soon a first connection the server did not take is tried again.
const FIRST_CONNECTION_RETRY: Duration = Duration::from_millis(250);

/// Whether every migration of this build is applied already, as it was written: then nothing is run, so a role
/// without CREATE on the schema (Postgres 15 gives ordinary roles none on `public`) may start once the tables are
/// made; sqlx's migrator asks for CREATE at every start, its bookkeeping table's `IF NOT EXISTS` notwithstanding
/// (found by a review). Anything else goes to the migrator, which applies what is pending or says what is wrong: the
/// table missing, a migration pending, changed or left half done, or one this build does not know (a newer build's,
/// which an older build must not run beside).
async fn all_migrations_applied(pool: &sqlx::PgPool) -> bool {
    let query = "SELECT version, checksum, success FROM _sqlx_migrations";
    let Ok(applied) = sqlx::query_as::<_, (i64, Vec<u8>, bool)>(query).fetch_all(pool).await else { return false };
    let ours: Vec<&sqlx::migrate::Migration> =
        MIGRATOR.iter().filter(|m| !m.migration_type.is_down_migration()).collect();
    let all_ours_done = ours.iter().all(|m| {
        applied.iter().any(|(version, checksum, done)| *done && *version == m.version && checksum[..] == m.checksum[..])
    });
    let nothing_else = applied.iter().all(|(version, _, done)| *done && ours.iter().any(|m| m.version == *version));
    all_ours_done && nothing_else
}

impl Drop for PgSessions {
    fn drop(&mut self) {
        self.lazy.stop();
    }
}

#[async_trait]
impl Saver for PgSessions {
    async fn claim(&self, channel: ChannelId) -> Result<Claim, SessionStoreError> {
        if self.epoch_of(channel).is_some() {
            // A new actor for a channel held (the last one stopped): it reads the saved session afresh and carries
            // no event of a save whose outcome was unknown.
            self.forget_unsure(channel);
            return Ok(Claim::Held);
        }
        let sent = std::time::Instant::now();
        match self.claim_one(channel).await? {
            Ok(epoch) => {
                // Noted first: a renewal that sees the channel held then extends it from its own time.
                self.unrenewed().insert(channel, sent);
                self.held().insert(channel, epoch);
                Ok(Claim::Held)
            }
            Err(busy) => Ok(busy),
        }
    }

    /// One transaction: the lease row is locked and checked (this owner, this epoch), then the session is written
    /// and its events appended. A claim by another process waits for it, or makes it fail.
    async fn save_durable(&self, session: Session, events: Vec<HistoryEvent>) -> Result<(), SessionStoreError> {
        let channel = session.channel_id;
        let Some(epoch) = self.epoch_of(channel) else { return Err(SessionStoreError::Fenced { channel }) };
        // This session is newer than any lazy one queued, and carries its activity.
        self.lazy.forget(channel);
        let row = session_row(&session, epoch, self.next_write())?;
        let (mut ats, mut events) = event_rows(channel, &events)?;
        let mut connection = self.connection("start a save").await?;
        // Set once the COMMIT is sent: the base of the events it appends, if any.
        let mut committing: Option<Option<i64>> = None;
        let saving = async {
            let mut tx = connection.begin().await.map_err(self.failed("start a save"))?;
            let lease = sqlx::query(lease::CHECK_FOR_SAVE)
                .bind(row.channel_id)
                .bind(&self.owner)
                .bind(epoch)
                .fetch_optional(&mut *tx)
                .await
                .map_err(self.failed("check the channel's lease"))?;
            if lease.is_none() {
                drop(tx); // rolled back
                self.lose(channel);
                return Err(SessionStoreError::Fenced { channel });
            }
            let (mut base, landed) = self.already_appended(&mut tx, row.channel_id, epoch, events.len()).await?;
            ats.drain(..landed);
            events.drain(..landed);
            row.upsert().execute(&mut *tx).await.map_err(self.failed("save a session"))?;
            if !events.is_empty() {
                let length_before: i64 = sqlx::query_scalar(rows::APPEND_EVENTS)
                    .bind(row.channel_id)
                    .bind(ats)
                    .bind(events)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(self.failed("append to a channel's history"))?;
                base = Some(length_before - landed as i64);
            }
            committing = Some(base);
            tx.commit().await.map_err(self.failed("commit a save"))
        };
        let patience = self.patience();
        let answered = tokio::time::timeout(patience, saving).await;
        let saved = closed_if_late(&mut connection, answered).unwrap_or_else(|| {
            let action = if committing.is_some() { "commit a save" } else { "save a session" };
            Err(self.failed(action)(timed_out(patience)))
        });
        match (saved, committing) {
            (Ok(()), _) => {
                self.forget_unsure(channel);
                Ok(())
            }
            (Err(e), Some(base)) => {
                // The COMMIT may have reached the server and been carried out, its answer lost with the connection.
                if let Some(base) = base {
                    self.unsure.lock().unwrap_or_else(PoisonError::into_inner).insert(channel, Unsure { epoch, base });
                }
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }

    fn save_lazy(&self, session: Session) {
        let channel = session.channel_id;
        match self.epoch_of(channel) {
            Some(epoch) => self.lazy.queue(session, epoch, self.next_write()),
            None => tracing::debug!(%channel, "activity not saved: this process no longer holds the channel"),
        }
    }

    async fn load(&self, channel: ChannelId) -> Result<Option<Session>, SessionStoreError> {
        let id = db_id(channel.0)?;
        let row: Option<(String, String)> = within(&self.pool, self.patience(), async |connection| {
            sqlx::query_as("SELECT session::text, xmin::text FROM sessions WHERE channel_id = $1")
                .bind(id)
                .fetch_optional(connection)
                .await
        })
        .await
        .map_err(self.failed("read a session"))?;
        let Some((json, version)) = row else { return Ok(None) };
        let session = decode_session(channel, &json);
        self.unreadable.read(channel, &version, session.is_ok());
        session.map(Some)
    }

    async fn flush(&self) {
        self.lazy.write_now().await;
    }

    fn let_go(&self, channel: ChannelId) {
        self.let_go_of(channel);
    }

    fn holds(&self, channel: ChannelId) -> bool {
        self.epoch_of(channel).is_some()
    }

    /// Sure for two thirds of a lease time from the last renewal that worked, though the lease lasts a whole one in
    /// the database from when that renewal ran: a call sent just before then has its whole time limit (10 s at the
    /// default 30 s lease; a repost carrying large files may take longer) before another process can claim the
    /// channel and look at what was done. One renewal missed (they come every third) is still sure.
    fn surely_held(&self, channel: ChannelId) -> bool {
        // The renewal's time first: a renewal drops the channels it found taken before it notes its time, so a
        // channel just taken is never seen held with the time of the renewal that found it taken.
        let renewed = self.renewed_at();
        let sure_since = self.unrenewed().get(&channel).copied().unwrap_or(renewed);
        self.epoch_of(channel).is_some() && sure_since.elapsed() < self.ttl - self.ttl / 3
    }
}

#[async_trait]
impl SessionStore for PgSessions {
    /// Page by page ([`lease::CLAIM_PAGE`] sessions by channel id): claims them, then reads the claimed ones' JSON as
    /// text, decoded straight into sessions on a blocking thread while the next page is claimed and read, so that
    /// at most two pages of JSON are held at once and the database's work overlaps the decoding.
    async fn load_all(&self, shards: Option<ShardRange>) -> Result<LoadReport, SessionStoreError> {
        let mut report = LoadReport::default();
        let mut held_elsewhere = 0;
        let mut after = -1;
        let mut decoding = None;
        loop {
            let sent = std::time::Instant::now();
            let page = self.claim_page(shards, after).await?;
            held_elsewhere += page.held_elsewhere;
            let rows = self.read_claimed(&page.claimed).await?;
            let decoding_page = tokio::task::spawn_blocking(move || decode_page(rows));
            if let Some((previous, sent)) = decoding.replace((decoding_page, sent)) {
                self.keep(decoded(previous).await, sent, &mut report);
            }
            match page.next {
                Some(next) => after = next,
                None => break,
            }
        }
        if let Some((last, sent)) = decoding {
            self.keep(decoded(last).await, sent, &mut report);
        }
        // Only a warning: a connection the pool cannot give now does not stop the start (found by a review).
        if let Ok(mut connection) = self.connection(processes::LOOK).await {
            let others = self.say_layout(&mut connection, shards).await;
            let mine = shards.unwrap_or(ShardRange::whole(1));
            report.problems.extend(others.iter().map(|other| processes::mismatch(mine, other)));
        }
        if held_elsewhere > 0 {
            tracing::info!(
                "{held_elsewhere} saved session(s) of these shards are held by another live process: left to it, and \
                 taken over here if its leases expire"
            );
        }
        Ok(report)
    }

    async fn history_tail(&self, channel: ChannelId, n: usize) -> Result<Vec<HistoryEvent>, SessionStoreError> {
        let id = db_id(channel.0)?;
        let rows: Vec<(String,)> = within(&self.pool, self.patience(), async |connection| {
            sqlx::query_as("SELECT event::text FROM history WHERE channel_id = $1 ORDER BY n DESC LIMIT $2")
                .bind(id)
                .bind(i64::try_from(n).unwrap_or(i64::MAX))
                .fetch_all(connection)
                .await
        })
        .await
        .map_err(self.failed("read a channel's history"))?;
        // Newest first from the index.
        Ok(readable_events(channel, rows.into_iter().rev()))
    }

    async fn history(&self, channel: ChannelId) -> Result<Vec<HistoryEvent>, SessionStoreError> {
        let rows: Vec<(String,)> = sqlx::query_as("SELECT event::text FROM history WHERE channel_id = $1 ORDER BY n")
            .bind(db_id(channel.0)?)
            .fetch_all(&self.pool)
            .await
            .map_err(self.failed("read a channel's history"))?;
        Ok(readable_events(channel, rows.into_iter()))
    }

    fn lost_channels(&self) -> Vec<ChannelId> {
        std::mem::take(&mut *self.lost.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn lease_period(&self) -> Option<Duration> {
        Some(self.ttl / 3)
    }

    async fn tend_leases(&self, shards: Option<ShardRange>) -> Result<Vec<ChannelId>, SessionStoreError> {
        let mut connection = self.connection("renew this process's leases").await?;
        let round = async {
            self.renew(&mut connection).await?;
            self.orphans(&mut connection, shards).await
        };
        let patience = self.patience();
        let answered = tokio::time::timeout(patience, round).await;
        let orphans = closed_if_late(&mut connection, answered)
            .unwrap_or_else(|| Err(self.failed("renew this process's leases")(timed_out(patience))))?;
        // After the round and outside its time limit: the look only warns, so a slow one must not make a renewal
        // that worked count as failed (found by a review).
        self.say_layout(&mut connection, shards).await;
        let held = self.held();
        Ok(orphans.into_iter().filter(|channel| !held.contains_key(channel)).collect())
    }

    async fn close(&self) {
        self.lazy.write_now().await;
        if let Err(e) = self.release_all().await {
            tracing::warn!("could not release this process's leases (they expire by themselves): {e}");
        }
        self.lazy.stop();
    }

    fn describe(&self) -> String {
        format!("the database {}", self.url)
    }

    fn into_saver(self: Arc<Self>) -> Arc<dyn Saver> {
        self
    }
}

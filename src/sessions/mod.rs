//! Where sessions are kept: the seam between the bot and its store, and the two stores behind it, the state
//! folder's files (the default) and Postgres (`run --store postgres://...`), which every process of the bot can
//! share, each channel acted on by one process at a time thanks to fenced leases.
//!
//! - [`Saver`]: what a channel's actor needs: claim its channel, save durably or lazily, load. The actors never
//!   know which store is behind it.
//! - [`SessionStore`]: what the rest of the bot needs besides: the sessions to resume at start-up, the history for
//!   the `history` command, the upkeep of the leases, closing.
//! - [`location`]: reading `--store` (a folder or a `postgres://` URL, whose password is never shown).
//! - [`files`]: the state folder (the `store` module's files and writer thread) behind an exclusive lock, so a
//!   second process cannot run on the same folder.
//! - [`postgres`]: the tables, the leases and fencing, batched lazy saves.
//! - [`convert`]: copying every session and its whole history from one store to the other.

pub mod convert;
pub mod files;
pub mod location;
pub mod postgres;

use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use crate::core::shards::ShardRange;
use crate::store::{LoadReport, Store, StoreError};
use async_trait::async_trait;
use location::StoreLocation;
use std::sync::Arc;
use std::time::Duration;

/// Whether this process may act for a channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// It may: its saves will be accepted until another process takes the channel over.
    Held,
    /// Another live process acts for it; its lease runs for `expires_in` more unless that process renews it.
    Busy { owner: String, expires_in: Duration },
}

/// Why a store could not do what was asked. Every message names what failed; none holds a password.
#[derive(Debug, thiserror::Error)]
pub enum SessionStoreError {
    #[error(transparent)]
    Files(#[from] StoreError),
    #[error("the session database ({database}) failed to {action}: {source}")]
    Database { database: String, action: &'static str, source: sqlx::Error },
    #[error("the saved session of channel {channel} cannot be used ({reason})")]
    Unreadable { channel: ChannelId, reason: String },
    #[error("failed to encode the session of channel {channel}: {source}")]
    Encode { channel: ChannelId, source: serde_json::Error },
    /// Another process has claimed the channel since this one did: the save was refused, and this process must no
    /// longer act on the channel.
    #[error("channel {channel} has been taken over by another process; this one no longer acts on it")]
    Fenced { channel: ChannelId },
}

impl SessionStoreError {
    /// Whether the channel now belongs to another process (nothing is wrong with the store).
    pub fn is_fenced(&self) -> bool {
        matches!(self, SessionStoreError::Fenced { .. })
    }
}

/// The persistence seam of the channel actors. The file store and the Postgres store implement it; the actor's unit
/// tests use an in-memory recorder on tokio's paused clock.
#[async_trait]
pub trait Saver: Send + Sync + 'static {
    /// Makes this process the one that acts for `channel`, before its actor does anything. The file store has one
    /// process, so it always holds its channels.
    async fn claim(&self, _channel: ChannelId) -> Result<Claim, SessionStoreError> {
        Ok(Claim::Held)
    }
    /// Resolves once the session and its new events are durably saved, together. [`SessionStoreError::Fenced`]
    /// when another process has taken the channel over. After a failure, the channel's next save carries the failed
    /// one's events first (the actor keeps them until a save works): a store that cannot know whether a failed save
    /// was carried out (a COMMIT whose answer was lost) appends only those it lacks.
    async fn save_durable(&self, session: Session, events: Vec<HistoryEvent>) -> Result<(), SessionStoreError>;
    /// An activity-only change: written with the channel's next durable save or within [`LAZY_SAVE_DELAY`] (the
    /// actor holds activity for the rest of the second spec 9 allows, to save a burst of it once).
    ///
    /// [`LAZY_SAVE_DELAY`]: crate::store::writer::LAZY_SAVE_DELAY
    fn save_lazy(&self, session: Session);
    /// The channel's saved session, if it has one.
    async fn load(&self, channel: ChannelId) -> Result<Option<Session>, SessionStoreError>;
    /// Resolves once everything saved so far is durable.
    async fn flush(&self);
    /// This process no longer acts for `channel`: its session stopped and its actor retired. A store with leases
    /// renews the channel's no more and lets it go at once (a later claim takes it again, under a new epoch); a
    /// lazy save queued before still lands. Returns at once: what the database is told is done in the background.
    fn let_go(&self, _channel: ChannelId) {}
    /// Whether this process holds `channel`'s lease as far as it knows (it claimed it and no renewal found it
    /// taken). Always true with no leases.
    fn holds(&self, _channel: ChannelId) -> bool {
        true
    }
    /// Whether this process surely still acts for `channel`: false once its lease may have run out (its renewals
    /// failing for most of a lease time), when another process may act for the channel. Always true with no leases.
    fn surely_held(&self, _channel: ChannelId) -> bool {
        true
    }
}

/// Everything the bot asks of the place its sessions are kept.
#[async_trait]
pub trait SessionStore: Saver {
    /// The saved sessions this process should resume at start-up. The Postgres store gives only those of servers on
    /// `shards` (and those whose server is not known yet), each claimed for this process: the others are left to
    /// the processes that hold them. The file store gives every session of its folder.
    async fn load_all(&self, shards: Option<ShardRange>) -> Result<LoadReport, SessionStoreError>;
    /// The last `n` events of a channel's history, oldest first.
    async fn history_tail(&self, channel: ChannelId, n: usize) -> Result<Vec<HistoryEvent>, SessionStoreError>;
    /// Every event of a channel's history, oldest first.
    async fn history(&self, channel: ChannelId) -> Result<Vec<HistoryEvent>, SessionStoreError>;
    /// How often [`SessionStore::tend_leases`] must run; `None` for a store with no leases (one process).
    fn lease_period(&self) -> Option<Duration> {
        None
    }
    /// Renews this process's leases (forgetting those another process took), and answers the channels of `shards`
    /// whose session needs an actor while no live process holds it: a process that stopped or died left them.
    async fn tend_leases(&self, _shards: Option<ShardRange>) -> Result<Vec<ChannelId>, SessionStoreError> {
        Ok(Vec::new())
    }
    /// The channels the renewals found taken by another process since the last call, each once: their actors here
    /// are stale, and must stop (and their senders with them) even if nothing makes them save.
    fn lost_channels(&self) -> Vec<ChannelId> {
        Vec::new()
    }
    /// Writes what is queued, then lets go: the folder's lock, or this process's leases (so that another process
    /// takes its channels over at once instead of waiting for them to expire).
    async fn close(&self);
    /// Resolves, saying why, if the store breaks so that no save can succeed again in this process (the file
    /// store's writer thread failed): the bot exits with an error rather than hold every channel back for ever.
    async fn broken(&self) -> String {
        std::future::pending().await
    }
    /// Where the sessions are, for log lines: the folder, or the database's URL without its password.
    fn describe(&self) -> String;
    /// The state folder's store, when the sessions are files (tests and the demo read the files through it).
    fn files(&self) -> Option<&Store> {
        None
    }
    /// The same store as the actors see it (written out by each store: `Arc<dyn SessionStore>` to
    /// `Arc<dyn Saver>` needs Rust 1.86's trait upcasting, newer than the crate's `rust-version`).
    fn into_saver(self: Arc<Self>) -> Arc<dyn Saver>;
}

/// How the Postgres store's leases are set up for this process.
#[derive(Clone, Debug)]
pub struct LeaseOptions {
    /// How long a claim lasts without renewal: after a crash, the channels wait this long for another process.
    pub ttl: Duration,
    /// The machine, for the lease's owner name (`TM_NODE`, else the host name).
    pub node: String,
}

/// A lease lasts this long by default; it is renewed every third of it.
pub const LEASE_TTL_DEFAULT: Duration = Duration::from_secs(30);

impl Default for LeaseOptions {
    fn default() -> Self {
        Self { ttl: LEASE_TTL_DEFAULT, node: node_name() }
    }
}

/// `TM_NODE`, else the machine's host name.
pub fn node_name() -> String {
    std::env::var("TM_NODE")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-node".to_owned())
}

/// Opens the store at `location`: the folder (locked for this process) or the database (migrated).
pub async fn open(location: &StoreLocation, leases: LeaseOptions) -> anyhow::Result<Arc<dyn SessionStore>> {
    Ok(match location {
        StoreLocation::Folder(dir) => Arc::new(files::FileSessions::open(dir)?),
        StoreLocation::Postgres(url) => postgres::PgSessions::open(url, leases).await?,
    })
}

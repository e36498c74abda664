//! Activity-only saves for the Postgres store (spec 9: on disk within a second, never one commit per message): the
//! latest session of each channel waits up to [`LAZY_SAVE_DELAY`], then every waiting one is written in ONE
//! statement, each row only where the lease still has the epoch it was queued under.
//!
//! [`LAZY_SAVE_DELAY`]: crate::store::writer::LAZY_SAVE_DELAY

use super::rows::{SessionRow, session_row};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::store::writer::LAZY_SAVE_DELAY;
use sqlx::types::Json;
use sqlx::{Connection as _, PgPool};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How soon a batch the database did not take is tried again.
const LAZY_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// Writes a batch of sessions ($1.. arrays, $7 owner) where their lease is still held under their epoch. A row
/// holding a later write (a durable save of the same lease that overtook this batch, or any save of a later lease)
/// is left as it is. The lease is not locked here (a durable save does that): a batch that races a takeover checks
/// the lease in its snapshot, before the new holder's claim, but finds the new holder's save on the row, if any,
/// and leaves it; a row the new holder has not written yet it replaces with what the new holder loaded plus this
/// activity.
const UPSERT_BATCH: &str = concat!(
    "INSERT INTO sessions (channel_id, guild_id, session, resumable, lease_epoch, write_seq, updated_at)
    SELECT b.channel_id, b.guild_id, b.session, b.resumable, b.epoch, b.write, now()
    FROM unnest($1::bigint[], $2::bigint[], $3::jsonb[], $4::bool[], $5::bigint[], $6::bigint[])
         AS b(channel_id, guild_id, session, resumable, epoch, write)
    JOIN leases l ON l.channel_id = b.channel_id AND l.owner = $7 AND l.epoch = b.epoch ",
    super::rows::replace_unless_later!()
);

/// The lazy saves waiting, and the task that writes them.
pub(super) struct LazySaves {
    pending: Mutex<HashMap<ChannelId, (Session, i64, i64)>>,
    wake: Notify,
    /// Held while a batch is written, so that a flush waits for a batch under way.
    writing: tokio::sync::Mutex<()>,
    pool: PgPool,
    owner: String,
    database: String,
    /// How long a batch waits for the database (as saves do).
    patience: std::time::Duration,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl LazySaves {
    pub fn start(pool: PgPool, owner: String, database: String, patience: std::time::Duration) -> Arc<Self> {
        let lazy = Arc::new(Self {
            pending: Mutex::default(),
            wake: Notify::new(),
            writing: tokio::sync::Mutex::new(()),
            pool,
            owner,
            database,
            patience,
            task: Mutex::default(),
        });
        let task = tokio::spawn(write_when_due(Arc::downgrade(&lazy)));
        *lazy.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(task);
        lazy
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<ChannelId, (Session, i64, i64)>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues the channel's latest session (replacing one queued before), under its lease's epoch and write number.
    pub fn queue(&self, session: Session, epoch: i64, write: i64) {
        self.pending().insert(session.channel_id, (session, epoch, write));
        self.wake.notify_one();
    }

    /// Drops the channel's queued session: a durable save carries a newer one, or the channel was taken over.
    pub fn forget(&self, channel: ChannelId) {
        self.pending().remove(&channel);
    }

    /// Writes everything queued now, after any batch under way. A batch the database did not take is queued again
    /// (behind anything newer of its channels) and `false` answered: its channels may stay idle, with no later save
    /// to carry their activity.
    pub async fn write_now(&self) -> bool {
        let _writing = self.writing.lock().await;
        let batch: Vec<(Session, i64, i64)> = self.pending().drain().map(|(_, queued)| queued).collect();
        if batch.is_empty() {
            return true;
        }
        let rows: Vec<SessionRow> = batch
            .iter()
            .filter_map(|(session, epoch, write)| match session_row(session, *epoch, *write) {
                Ok(row) => Some(row),
                Err(e) => {
                    tracing::error!("could not save a session's activity: {e}");
                    None
                }
            })
            .collect();
        let upsert = async |connection: &mut sqlx::PgConnection| {
            let written = sqlx::query(UPSERT_BATCH)
                .bind(rows.iter().map(|r| r.channel_id).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.guild_id).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| Json(&*r.json.0)).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.resumable).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.epoch).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.write).collect::<Vec<_>>())
                .bind(&self.owner)
                .execute(&mut *connection)
                .await;
            // The statement went through the connection's write buffer, which keeps its largest size for good (sqlx
            // never shrinks it): a batch of every channel's session (about 5 KB each) would stay resident per
            // connection.
            connection.shrink_buffers();
            written
        };
        match super::within(&self.pool, self.patience, upsert).await {
            // Channels taken over meanwhile are left out: their next durable save learns it and stops.
            Ok(done) if done.rows_affected() < rows.len() as u64 => tracing::debug!(
                "{} of {} lazy saves were not written (a channel taken over, or a newer save already there)",
                rows.len() as u64 - done.rows_affected(),
                rows.len()
            ),
            Ok(_) => {}
            Err(e) => {
                tracing::error!(
                    "the session database ({}) failed to save activity (tried again in {LAZY_RETRY:?}): {e}",
                    self.database
                );
                self.queue_again(batch);
                return false;
            }
        }
        true
    }

    /// Puts back a batch that was not written, but not over a newer session of its channel queued meanwhile (a
    /// channel forgotten meanwhile, taken over or saved durably, is fenced or outranked by its write number in the
    /// database).
    fn queue_again(&self, batch: Vec<(Session, i64, i64)>) {
        let mut pending = self.pending();
        for queued in batch {
            pending.entry(queued.0.channel_id).or_insert(queued);
        }
        // The writer task tries it again, also when the failed batch was a flush's or a retiring channel's.
        self.wake.notify_one();
    }

    pub fn stop(&self) {
        if let Some(task) = self.task.lock().unwrap_or_else(PoisonError::into_inner).take() {
            task.abort();
        }
    }
}

/// The writer task: once something is queued, waits the lazy delay (gathering what comes meanwhile), then writes.
async fn write_when_due(lazy: std::sync::Weak<LazySaves>) {
    loop {
        let Some(notified) = lazy.upgrade() else { return };
        notified.wake.notified().await;
        drop(notified);
        tokio::time::sleep(LAZY_SAVE_DELAY).await;
        let Some(lazy) = lazy.upgrade() else { return };
        if !lazy.write_now().await {
            drop(lazy);
            tokio::time::sleep(LAZY_RETRY).await;
        }
    }
}

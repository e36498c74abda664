//! Leases: which process acts for which channel. Every time is the database's (`now()`), never a process's clock.
//! A claim takes a lease that is free, expired or already this owner's, and bumps its epoch; saves are fenced on
//! (owner, epoch); renewals extend every lease of this process in one statement; a release expires them at once, and
//! a channel let go (its session stopped) is expired alone and renewed no more.

use super::rows::db_id;
use super::{PgSessions, within};
use crate::core::ids::ChannelId;
use crate::core::shards::ShardRange;
use crate::sessions::{Claim, SessionStoreError};
use std::time::Duration;

/// Locks the lease row for the save's transaction, if it still is this owner's and epoch's: a claim by another
/// process (an UPDATE of the row) then waits until the save is committed, and any save after that claim finds no
/// row and is refused. The lock is exclusive, so that a save also waits for an earlier save of the channel whose
/// connection broke while its COMMIT was still on its way: the history it then reads holds that save's events, or
/// never will.
pub(super) const CHECK_FOR_SAVE: &str =
    "SELECT 1 FROM leases WHERE channel_id = $1 AND owner = $2 AND epoch = $3 FOR NO KEY UPDATE";

/// The rule fencing rests on, for an `INSERT INTO leases` of a claim: a lease is taken over only when it has expired
/// or is already this owner's, and every claim bumps its epoch. Every claim says it this way.
macro_rules! take_lease {
    () => {
        "ON CONFLICT (channel_id) DO UPDATE SET
            owner = EXCLUDED.owner, epoch = leases.epoch + 1, expires_at = EXCLUDED.expires_at
        WHERE leases.expires_at <= now() OR leases.owner = EXCLUDED.owner"
    };
}

/// Takes one channel's lease ($1 channel, $2 owner, $3 seconds) if nobody else holds it; answers its new epoch.
const CLAIM: &str = concat!(
    "INSERT INTO leases (channel_id, owner, epoch, expires_at) VALUES ($1, $2, 1, now() + $3 * interval '1 second') ",
    take_lease!(),
    " RETURNING epoch"
);

/// Who holds a lease, and for how many more seconds.
const HOLDER: &str = "
    SELECT owner, GREATEST(EXTRACT(EPOCH FROM expires_at - now()), 0)::float8 FROM leases WHERE channel_id = $1";

/// Extends this owner's leases ($1 owner, $2 seconds, $3 channels, $4 their epochs); answers those still held.
/// Statements that lock many lease rows lock them in channel order, as a start-up's claim does: a claim passing a
/// live process's rows locks them too (`ON CONFLICT` locks the row it then leaves), and a renewal locking them in
/// another order would deadlock with it.
const RENEW: &str = "
    WITH mine AS (
        SELECT l.channel_id FROM leases l
        JOIN unnest($3::bigint[], $4::bigint[]) AS h(channel_id, epoch)
            ON l.channel_id = h.channel_id AND l.epoch = h.epoch
        WHERE l.owner = $1
        ORDER BY l.channel_id
        FOR UPDATE OF l)
    UPDATE leases l SET expires_at = now() + $2 * interval '1 second'
    FROM mine WHERE l.channel_id = mine.channel_id
    RETURNING l.channel_id";

/// Expires every lease of this owner ($1) now, locking them in channel order (see [`RENEW`]), and bumps their
/// epochs as [`LET_GO`] does: a renewal already on its way cannot bring them back for another lease time.
const RELEASE_ALL: &str = "
    WITH mine AS (
        SELECT channel_id FROM leases WHERE owner = $1 AND expires_at > now() ORDER BY channel_id FOR UPDATE)
    UPDATE leases l SET expires_at = now(), epoch = l.epoch + 1 FROM mine WHERE l.channel_id = mine.channel_id";

/// Expires one lease ($1 channel) now, if it still is this owner's ($2) under this epoch ($3): a later claim of the
/// channel (by this process too) has a new epoch and is left alone. It bumps the epoch too, so that a renewal
/// already on its way with the old one (its list of leases taken before the let go) cannot bring the lease back
/// for another lease time.
const LET_GO: &str =
    "UPDATE leases SET expires_at = now(), epoch = epoch + 1 WHERE channel_id = $1 AND owner = $2 AND epoch = $3";

/// At most this many orphaned channels are taken over per renewal, so that taking over a large process's channels
/// is spread over a few periods instead of starting every actor at once.
const ORPHANS_PER_ROUND: i64 = 1_000;

/// Sessions claimed and read per statement at start-up: their JSON (about 5 KB each) is held as text only a page
/// at a time, and each page's claim is short.
pub const CLAIM_PAGE: i64 = 500;

/// One page of the start-up claim ([`PgSessions::claim_page`]).
pub(super) struct ClaimedPage {
    /// The channels claimed, with their new epochs, by channel id.
    pub claimed: Vec<(i64, i64)>,
    /// Sessions of the page that another live process holds: left to it.
    pub held_elsewhere: usize,
    /// The channel id after which the next page starts; `None` once this was the last.
    pub next: Option<i64>,
}

/// The condition "the session `s` is on one of these shards, or its server is not known yet", with the total, the
/// first and the last shard as parameters `$n`, `$n+1`, `$n+2` (a NULL total: every shard).
fn on_shards(n: usize) -> String {
    format!(
        "(${n}::bigint IS NULL OR s.guild_id IS NULL OR ((s.guild_id >> 22) % ${n}) BETWEEN ${} AND ${})",
        n + 1,
        n + 2
    )
}

/// The total, first and last shard as [`on_shards`] binds them.
fn shard_params(shards: Option<ShardRange>) -> (Option<i64>, i64, i64) {
    match shards {
        Some(range) => (Some(i64::from(range.total)), i64::from(range.first), i64::from(range.last)),
        None => (None, 0, 0),
    }
}

impl PgSessions {
    fn ttl_seconds(&self) -> f64 {
        self.ttl.as_secs_f64()
    }

    /// Claims one channel: its new epoch, or who holds it instead.
    pub(super) async fn claim_one(&self, channel: ChannelId) -> Result<Result<i64, Claim>, SessionStoreError> {
        let id = db_id(channel.0)?;
        let epoch: Option<(i64,)> = within(&self.pool, self.patience(), async |connection| {
            sqlx::query_as(CLAIM).bind(id).bind(&self.owner).bind(self.ttl_seconds()).fetch_optional(connection).await
        })
        .await
        .map_err(self.failed("claim a channel's lease"))?;
        if let Some((epoch,)) = epoch {
            return Ok(Ok(epoch));
        }
        let holder: Option<(String, f64)> = within(&self.pool, self.patience(), async |connection| {
            sqlx::query_as(HOLDER).bind(id).fetch_optional(connection).await
        })
        .await
        .map_err(self.failed("read a channel's lease"))?;
        let (owner, seconds) = holder.unwrap_or_default();
        Ok(Err(Claim::Busy { owner, expires_in: Duration::from_secs_f64(seconds.max(0.0)) }))
    }

    /// At start-up, one page: claims the resumable sessions of `shards` that no live process holds among the next
    /// [`CLAIM_PAGE`] by channel id after `after`, each in the same statement that bumps its epoch. Answers the
    /// claimed channels with their epochs (by channel id), how many of the page a live process holds, and where the
    /// next page starts (`None` after the last).
    pub(super) async fn claim_page(
        &self,
        shards: Option<ShardRange>,
        after: i64,
    ) -> Result<ClaimedPage, SessionStoreError> {
        let (total, first, last) = shard_params(shards);
        // The page is chosen from the sessions, then claimed: a row the claim leaves out (its lease is live and
        // another's) still moves the page on, and is counted as held elsewhere.
        let claim = format!(
            "WITH page AS (
                SELECT s.channel_id FROM sessions s
                WHERE s.resumable AND s.channel_id > $3 AND {}
                ORDER BY s.channel_id LIMIT $4
            ), mine AS (
                INSERT INTO leases (channel_id, owner, epoch, expires_at)
                SELECT channel_id, $1, 1, now() + $2 * interval '1 second' FROM page ORDER BY channel_id
                {}
                RETURNING channel_id, epoch
            )
            SELECT p.channel_id, m.epoch FROM page p LEFT JOIN mine m USING (channel_id) ORDER BY p.channel_id",
            on_shards(5),
            take_lease!()
        );
        let rows: Vec<(i64, Option<i64>)> = within(&self.pool, self.patience(), async |connection| {
            sqlx::query_as(&claim)
                .bind(&self.owner)
                .bind(self.ttl_seconds())
                .bind(after)
                .bind(CLAIM_PAGE)
                .bind(total)
                .bind(first)
                .bind(last)
                .fetch_all(connection)
                .await
        })
        .await
        .map_err(self.failed("claim the saved sessions"))?;
        let next = match rows.last() {
            Some((channel, _)) if rows.len() as i64 == CLAIM_PAGE => Some(*channel),
            _ => None,
        };
        let held_elsewhere = rows.iter().filter(|(_, epoch)| epoch.is_none()).count();
        let claimed = rows.into_iter().filter_map(|(channel, epoch)| Some((channel, epoch?))).collect();
        Ok(ClaimedPage { claimed, held_elsewhere, next })
    }

    /// Extends every lease this process holds; forgets (and logs) those another process has taken since.
    pub(super) async fn renew(&self, connection: &mut sqlx::PgConnection) -> Result<(), SessionStoreError> {
        let sent = std::time::Instant::now();
        let (channels, epochs): (Vec<i64>, Vec<i64>) =
            self.held().iter().map(|(channel, epoch)| (channel.0 as i64, *epoch)).unzip();
        if channels.is_empty() {
            self.renewed(sent);
            return Ok(());
        }
        let kept: Vec<(i64,)> = sqlx::query_as(RENEW)
            .bind(&self.owner)
            .bind(self.ttl_seconds())
            .bind(&channels)
            .bind(&epochs)
            .fetch_all(connection)
            .await
            .map_err(self.failed("renew this process's leases"))?;
        let kept: std::collections::HashSet<i64> = kept.into_iter().map(|(channel,)| channel).collect();
        {
            // Extended from `sent` on, unless claimed again since (a newer epoch, sure from its own claim).
            let held = self.held();
            let mut unrenewed = self.unrenewed();
            for (channel, epoch) in channels.iter().zip(&epochs).filter(|(channel, _)| kept.contains(channel)) {
                let channel = ChannelId(*channel as u64);
                if held.get(&channel) == Some(epoch) {
                    unrenewed.remove(&channel);
                }
            }
        }
        for (channel, epoch) in channels.into_iter().zip(epochs).filter(|(channel, _)| !kept.contains(channel)) {
            let channel = ChannelId(channel as u64);
            // Unless the channel was claimed again meanwhile (a newer epoch): that lease is not the one lost.
            if self.epoch_of(channel) == Some(epoch) {
                tracing::warn!(%channel, "another process has taken this channel over; this one no longer acts on it");
                self.lose(channel);
                self.lost.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(channel);
            }
        }
        // Only now: until the channels taken are dropped, this renewal must not make this process sure of them.
        self.renewed(sent);
        Ok(())
    }

    /// Resumable sessions of `shards` whose lease is free or expired: their process stopped or died. Rows this
    /// process could not decode are passed over while they stay as they were read (else a few of them, first by
    /// channel id, would be taken up every round and could fill the round's [`ORPHANS_PER_ROUND`]).
    pub(super) async fn orphans(
        &self,
        connection: &mut sqlx::PgConnection,
        shards: Option<ShardRange>,
    ) -> Result<Vec<ChannelId>, SessionStoreError> {
        let (total, first, last) = shard_params(shards);
        let query = format!(
            "SELECT s.channel_id FROM sessions s LEFT JOIN leases l USING (channel_id)
             WHERE s.resumable AND (l.channel_id IS NULL OR l.expires_at <= now()) AND {}
               AND (s.channel_id, s.xmin::text) NOT IN (SELECT * FROM unnest($5::bigint[], $6::text[]))
             ORDER BY s.channel_id LIMIT $4",
            on_shards(1)
        );
        let (unreadable, versions) = self.unreadable.as_arrays();
        let rows: Vec<(i64,)> = sqlx::query_as(&query)
            .bind(total)
            .bind(first)
            .bind(last)
            .bind(ORPHANS_PER_ROUND)
            .bind(unreadable)
            .bind(versions)
            .fetch_all(connection)
            .await
            .map_err(self.failed("look for sessions no process holds"))?;
        Ok(rows.into_iter().map(|(channel,)| ChannelId(channel as u64)).collect())
    }

    /// Stops renewing `channel`'s lease and expires it in the background. Taken out of the leases held first, so a
    /// claim that follows (the channel started again) asks the database and gets a new epoch. The activity queued
    /// for the channel (the retiring actor's last, such as the final effects done) is written first: another process
    /// that claims the channel then reads the session as it ended, not as its last durable save left it. (This
    /// process, starting the channel again at once, may claim before that write, which its new epoch then refuses:
    /// its new actor carries out the last effects again, which Discord takes as done.)
    pub(super) fn let_go_of(&self, channel: ChannelId) {
        let Some(epoch) = self.held().remove(&channel) else { return };
        self.unrenewed().remove(&channel);
        self.forget_unsure(channel);
        let Ok(id) = db_id(channel.0) else { return }; // never claimed, then
        let (pool, owner, lazy, patience) = (self.pool.clone(), self.owner.clone(), self.lazy.clone(), self.patience());
        tokio::spawn(async move {
            lazy.write_now().await;
            let let_go = async |c: &mut sqlx::PgConnection| {
                sqlx::query(LET_GO).bind(id).bind(&owner).bind(epoch).execute(c).await
            };
            if let Err(e) = within(&pool, patience, let_go).await {
                tracing::debug!(%channel, "could not let the channel's lease go (it expires by itself): {e}");
            }
        });
    }

    /// Expires every lease of this process now (at shutdown), so another process can take its channels at once.
    pub(super) async fn release_all(&self) -> Result<(), SessionStoreError> {
        self.held().clear();
        self.unrenewed().clear();
        let release = async |c: &mut sqlx::PgConnection| sqlx::query(RELEASE_ALL).bind(&self.owner).execute(c).await;
        within(&self.pool, self.patience(), release).await.map_err(self.failed("release this process's leases"))?;
        Ok(())
    }
}

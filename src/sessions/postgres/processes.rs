//! The processes sharing the database and the shard layout each runs: every process must use the same total, or
//! Discord sends some servers' events to no process (their channels wait for a shard nobody runs) and others' to two.
//! Each process says its layout, renewed with its leases, and warns of each live process whose total differs.

use super::{PgSessions, within};
use crate::core::shards::ShardRange;
use crate::sessions::SessionStoreError;

/// Says this process's layout ($1 owner, $2 total, $3 first, $4 last shard, $5 seconds to live), and clears the
/// rows of processes that died.
const SAY_LAYOUT: &str = "
    WITH gone AS (DELETE FROM processes WHERE expires_at <= now() AND owner <> $1)
    INSERT INTO processes (owner, total_shards, first_shard, last_shard, expires_at)
    VALUES ($1, $2, $3, $4, now() + $5 * interval '1 second')
    ON CONFLICT (owner) DO UPDATE SET total_shards = EXCLUDED.total_shards, first_shard = EXCLUDED.first_shard,
        last_shard = EXCLUDED.last_shard, expires_at = EXCLUDED.expires_at";

/// The live processes other than $1 whose total is not $2.
const OTHER_TOTALS: &str = "
    SELECT owner, total_shards, first_shard, last_shard FROM processes
    WHERE owner <> $1 AND expires_at > now() AND total_shards <> $2 ORDER BY owner";

/// A live process running with another total than this one's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtherLayout {
    /// Its name in the lease rows (host, process id and a random part).
    pub owner: String,
    pub shards: ShardRange,
}

impl PgSessions {
    /// Says which shards this process runs (`None`: shard 0 of 1, as the gateway then connects), and answers the live
    /// processes that run with another total; each is warned about once. Only a warning: a failure here (a role
    /// without rights on the table, granted table by table before it existed) must not stop the bot nor its
    /// renewals, so it is logged (once) and answers nothing.
    pub(super) async fn say_layout(
        &self,
        connection: &mut sqlx::PgConnection,
        shards: Option<ShardRange>,
    ) -> Vec<OtherLayout> {
        match self.try_say_layout(connection, shards).await {
            Ok(others) => others,
            Err(e) => {
                if !self.layout_failed.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!("could not compare shard layouts with the other processes (table `processes`): {e}");
                }
                Vec::new()
            }
        }
    }

    async fn try_say_layout(
        &self,
        connection: &mut sqlx::PgConnection,
        shards: Option<ShardRange>,
    ) -> Result<Vec<OtherLayout>, SessionStoreError> {
        let mine = shards.unwrap_or(ShardRange::whole(1));
        let failed = || self.failed("say which shards this process runs");
        let as_int = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        sqlx::query(SAY_LAYOUT)
            .bind(&self.owner)
            .bind(as_int(mine.total))
            .bind(as_int(mine.first))
            .bind(as_int(mine.last))
            .bind(self.ttl.as_secs_f64())
            .execute(&mut *connection)
            .await
            .map_err(failed())?;
        let rows: Vec<(String, i32, i32, i32)> = sqlx::query_as(OTHER_TOTALS)
            .bind(&self.owner)
            .bind(as_int(mine.total))
            .fetch_all(&mut *connection)
            .await
            .map_err(failed())?;
        let as_u32 = |n: i32| u32::try_from(n).unwrap_or(0);
        let others: Vec<OtherLayout> = rows
            .into_iter()
            .map(|(owner, total, first, last)| OtherLayout {
                owner,
                shards: ShardRange { first: as_u32(first), last: as_u32(last), total: as_u32(total) },
            })
            .collect();
        let mut warned = self.layouts_warned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for other in others.iter().filter(|other| warned.insert(other.owner.clone())) {
            tracing::warn!("{}", mismatch(mine, other));
        }
        *self.other_layouts.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = others.clone();
        Ok(others)
    }

    /// The live processes that ran with another total than this one's, as the last renewal found them.
    pub fn other_layouts(&self) -> Vec<OtherLayout> {
        self.other_layouts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Takes this process's layout away at its stop.
    pub(super) async fn unsay_layout(&self) -> Result<(), SessionStoreError> {
        let unsay = async |c: &mut sqlx::PgConnection| {
            sqlx::query("DELETE FROM processes WHERE owner = $1").bind(&self.owner).execute(c).await
        };
        within(&self.pool, self.patience(), unsay)
            .await
            .map_err(self.failed("take this process's shards off the list"))?;
        Ok(())
    }
}

/// What to say of a process running with another total than this one's.
pub fn mismatch(mine: ShardRange, other: &OtherLayout) -> String {
    format!(
        "another process ({}) runs {}, this one {mine}: every process must use the same --total-shards \
         (TM_TOTAL_SHARDS), or Discord sends some servers' events to no process (their turns wait) and others' to two",
        other.owner, other.shards
    )
}

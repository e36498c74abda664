//! The processes sharing the database and the shard layout each runs: every process must use the same total, or
//! Discord sends some servers' events to no process (their channels wait for a shard nobody runs) and others' to two.
//! Each process names its layout in its connections' `application_name`, which `pg_stat_activity` shows to every
//! role: no table, nothing to grant or migrate, and a process that ends takes its name away with its connections.

use super::{PgSessions, closed_if_late, timed_out};
use crate::core::shards::ShardRange;
use crate::sessions::SessionStoreError;
use sqlx::Postgres;
use sqlx::pool::PoolConnection;

/// What the look at the other processes is, in what a failure says.
pub(super) const LOOK: &str = "compare shard layouts with the other processes";

/// What every name given here starts with (the pool's own connections are named `turn-manager` alone).
const PREFIX: &str = "turn-manager shards ";

/// Postgres keeps 63 bytes of an application name.
const NAME_MAX: usize = 63;

/// The live processes' names on this database, other than the pool's plain one.
const NAMES: &str = "SELECT DISTINCT application_name FROM pg_stat_activity
    WHERE datname = current_database() AND application_name LIKE 'turn-manager shards %'";

/// A live process running with another total than this one's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtherLayout {
    /// Who it is: the random part of its lease owner's name, then its host and process id (cut to fit).
    pub owner: String,
    pub shards: ShardRange,
}

/// `owner`'s layout as an application name, `turn-manager shards 0-1 of 4 <random> <node>/<pid>`: the random part
/// first, so that a long host name is what is cut.
fn name_of(owner: &str, shards: ShardRange) -> String {
    let (node_and_pid, random) = owner.rsplit_once('-').unwrap_or((owner, ""));
    let mut name = format!("{PREFIX}{}-{} of {} {random} {node_and_pid}", shards.first, shards.last, shards.total);
    if name.len() > NAME_MAX {
        let mut cut = NAME_MAX;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    name
}

/// The layout and the owner a name says, if it is one of [`name_of`]'s.
fn read_name(name: &str) -> Option<OtherLayout> {
    let rest = name.strip_prefix(PREFIX)?;
    let (range, rest) = rest.split_once(" of ")?;
    let (total, owner) = rest.split_once(' ')?;
    let (first, last) = range.split_once('-')?;
    let shards = ShardRange { first: first.parse().ok()?, last: last.parse().ok()?, total: total.parse().ok()? };
    Some(OtherLayout { owner: owner.to_owned(), shards })
}

impl PgSessions {
    /// Names this process's layout on `connection` (`None`: shard 0 of 1, as the gateway then connects), and answers
    /// the live processes that run with another total; each is warned about once. Only a warning: a failure here,
    /// or no answer within the store's patience (the connection is then closed), never stops the bot nor fails its
    /// renewals; it is logged once and answers nothing.
    pub(super) async fn say_layout(
        &self,
        connection: &mut PoolConnection<Postgres>,
        shards: Option<ShardRange>,
    ) -> Vec<OtherLayout> {
        let mine = shards.unwrap_or(ShardRange::whole(1));
        let patience = self.patience();
        let answered = tokio::time::timeout(patience, self.layouts_on(connection, mine)).await;
        let looked =
            closed_if_late(connection, answered).unwrap_or_else(|| Err(self.failed(LOOK)(timed_out(patience))));
        let others = match looked {
            Ok(others) => {
                self.layout_failed.store(false, std::sync::atomic::Ordering::Relaxed); // a later failure is said too
                others
            }
            Err(e) => {
                if !self.layout_failed.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!("could not compare shard layouts with the other processes: {e}");
                }
                return Vec::new();
            }
        };
        let mut warned = self.layouts_warned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for other in others.iter().filter(|other| warned.insert(other.owner.clone())) {
            tracing::warn!("{}", mismatch(mine, other));
        }
        *self.other_layouts.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = others.clone();
        others
    }

    async fn layouts_on(
        &self,
        connection: &mut sqlx::PgConnection,
        mine: ShardRange,
    ) -> Result<Vec<OtherLayout>, SessionStoreError> {
        let failed = || self.failed(LOOK);
        let name = name_of(&self.owner, mine);
        // Kept by the connection for its life, whichever round uses it next.
        sqlx::query("SELECT set_config('application_name', $1, false)")
            .bind(&name)
            .execute(&mut *connection)
            .await
            .map_err(failed())?;
        let names: Vec<(String,)> = sqlx::query_as(NAMES).fetch_all(&mut *connection).await.map_err(failed())?;
        let me = read_name(&name).map(|me| me.owner);
        Ok(names
            .into_iter()
            .filter_map(|(name,)| read_name(&name))
            .filter(|other| Some(&other.owner) != me.as_ref() && other.shards.total != mine.total)
            .collect())
    }

    /// The live processes that ran with another total than this one's, as the last look found them.
    pub fn other_layouts(&self) -> Vec<OtherLayout> {
        self.other_layouts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_is_named_within_postgres_limit_and_read_back() {
        let shards = ShardRange { first: 2, last: 3, total: 4 };
        let name = name_of("node-a/4242-00000000deadbeef", shards);
        assert_eq!(name, "turn-manager shards 2-3 of 4 00000000deadbeef node-a/4242");
        assert_eq!(read_name(&name), Some(OtherLayout { owner: "00000000deadbeef node-a/4242".into(), shards }));
        let long = name_of(&format!("{}/1-00000000deadbeef", "h".repeat(80)), shards);
        assert!(long.len() <= NAME_MAX && long.contains("00000000deadbeef"), "{long}");
        assert_eq!(read_name("turn-manager"), None, "the pool's plain name");
        assert_eq!(read_name("turn-manager shards x-1 of 2 a"), None);
    }
}

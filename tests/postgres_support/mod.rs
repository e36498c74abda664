//! A database of its own for each Postgres test, in the cluster the environment names (`PGHOST`, `PGPORT`, `PGUSER`,
//! `PGPASSWORD`: Debian's `pg_virtualenv -t` sets them for the command it runs). Without one, a test is skipped with
//! the reason printed, unless `TM_REQUIRE_POSTGRES` is set (CI), where a missing database fails it.
#![allow(dead_code)] // Each test file uses its own part.

pub mod cut;

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;
use turn_manager::sessions::LeaseOptions;
use turn_manager::sessions::location::{PostgresUrl, StoreLocation};
use turn_manager::sessions::postgres::PgSessions;

/// A fresh, empty database; dropped with the cluster (`pg_virtualenv -t` throws the whole cluster away).
pub struct TestDatabase {
    /// `postgres://user@host:port/name`: the password stays in `PGPASSWORD`.
    pub url: String,
    user: String,
    name: String,
    /// `host:port` of the cluster.
    server: String,
}

impl TestDatabase {
    /// A new database in the environment's cluster, or `None` (the reason printed) when there is none.
    pub async fn create(test: &str) -> Option<Self> {
        if std::env::var_os("PGHOST").is_none() {
            let reason = "no Postgres to test against (PGHOST is not set); run them with \
                          `pg_virtualenv -t -- cargo test --test postgres_store --test postgres_bots` \
                          (Debian's postgresql-common, which starts a throwaway cluster)";
            if std::env::var_os("TM_REQUIRE_POSTGRES").is_some() {
                panic!("TM_REQUIRE_POSTGRES is set but there is {reason}");
            }
            // Straight to the standard error, past the test harness's capture: a skipped test must say so.
            let _ = writeln!(std::io::stderr(), "{test}: SKIPPED: {reason}");
            return None;
        }
        let name = format!("tm_test_{:016x}", fastrand::u64(..));
        let admin = sqlx::PgPool::connect("postgres://").await.expect("the environment's Postgres (PGHOST...)");
        sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.expect("a test database");
        admin.close().await;
        let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        let (user, server) =
            (var("PGUSER", "postgres"), format!("{}:{}", var("PGHOST", "localhost"), var("PGPORT", "5432")));
        let url = format!("postgres://{user}@{server}/{name}");
        Some(Self { url, user, name, server })
    }

    pub fn location(&self) -> StoreLocation {
        StoreLocation::Postgres(PostgresUrl::new(&self.url))
    }

    /// The store as one process of the bot opens it, its leases lasting `ttl`.
    pub async fn open(&self, ttl: Duration, node: &str) -> Arc<PgSessions> {
        let leases = LeaseOptions { ttl, node: node.to_owned() };
        PgSessions::open(&PostgresUrl::new(&self.url), leases).await.expect("the test database opens")
    }

    /// A relay to this database that can break a connection at a `COMMIT` ([`cut::CommitCutter`]).
    pub async fn commit_cutter(&self) -> cut::CommitCutter {
        cut::CommitCutter::start(self.server.clone()).await
    }

    /// The store as [`Self::open`] gives it, connected through `relay` (without TLS, which the relay cannot read).
    pub async fn open_through(&self, relay: &cut::CommitCutter, ttl: Duration, node: &str) -> Arc<PgSessions> {
        let url = format!("postgres://{}@{}/{}?sslmode=disable", self.user, relay.addr, self.name);
        let leases = LeaseOptions { ttl, node: node.to_owned() };
        PgSessions::open(&PostgresUrl::new(&url), leases).await.expect("the test database opens through the relay")
    }
}

//! The bench's databases on a Postgres server (`bench --store postgres://...`): a new one for each phase and each
//! bot start, created with the bot's tables (or as a copy of one holding saved sessions) and dropped when it is no
//! longer used, even when the phase fails. And reading the bot's saved sessions from outside, row by row, without
//! touching the leases.

use crate::sessions::location::PostgresUrl;
use crate::sessions::postgres;
use anyhow::Context as _;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Numbers the databases of this bench process: `tm_bench_<pid>_<n>`.
static CREATED: AtomicU32 = AtomicU32::new(0);
/// How often a copy waits for the connections to its template to go (Postgres copies only an unused database).
const TEMPLATE_TRIES: u32 = 50;
const TEMPLATE_WAIT: Duration = Duration::from_millis(100);

/// A database of the bench's own on the server; dropped with this value.
pub struct PhaseDatabase {
    /// The server it is on, as the bench was given it.
    pub server: PostgresUrl,
    pub name: String,
    /// The database itself, for the bot's `--store` and the bench's reads.
    pub url: PostgresUrl,
}

impl PhaseDatabase {
    /// A new database with the bot's tables, empty, or a copy of `template` (a database the bench filled).
    pub async fn create(server: &PostgresUrl, template: Option<&PhaseDatabase>) -> anyhow::Result<Self> {
        let name = format!("tm_bench_{}_{}", std::process::id(), CREATED.fetch_add(1, Ordering::Relaxed));
        let admin = connect(server, 1).await?;
        let outcome = match template {
            None => sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.map(|_| ()),
            Some(template) => copy_of(&admin, &name, &template.name).await,
        };
        admin.close().await;
        outcome.with_context(|| format!("creating the database {name} on {server} (the user needs CREATEDB)"))?;
        let database =
            Self { url: PostgresUrl::new(&database_url(server.expose(), &name)), server: server.clone(), name };
        if template.is_none() {
            // The tables, as the bot makes them at its first start: no start is timed with a migration.
            postgres::connect(&database.url, postgres::IDLE_IN_TRANSACTION_MAX).await?.close().await;
        }
        Ok(database)
    }

    /// Each channel's saved session as JSON text, straight from the rows (no lease is claimed or looked at).
    pub async fn session_texts(&self, channels: &[u64]) -> anyhow::Result<HashMap<u64, String>> {
        let pool = connect(&self.url, 1).await?;
        let ids: Vec<i64> = channels.iter().map(|c| *c as i64).collect();
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT channel_id, session::text FROM sessions WHERE channel_id = ANY($1)")
                .bind(ids)
                .fetch_all(&pool)
                .await
                .with_context(|| format!("reading the sessions of {}", self.url))?;
        pool.close().await;
        Ok(rows.into_iter().map(|(channel, text)| (channel as u64, text)).collect())
    }

    async fn drop_now(server: &PostgresUrl, name: &str) -> anyhow::Result<()> {
        let admin = connect(server, 1).await?;
        let dropped = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&admin).await;
        admin.close().await;
        dropped.with_context(|| format!("dropping the database {name}"))?;
        Ok(())
    }
}

impl Drop for PhaseDatabase {
    /// Drops the database on a thread of its own (this may run inside a phase's runtime, which must not block on
    /// itself); a failure is said, not fatal.
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        let outcome = std::thread::spawn(move || -> anyhow::Result<()> {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(Self::drop_now(&server, &name))
        })
        .join();
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("bench: WARNING: {e:#}"),
            Err(_) => eprintln!("bench: WARNING: dropping the database {} panicked", self.name),
        }
    }
}

/// `CREATE DATABASE name TEMPLATE template`, once the connections that filled the template are gone.
async fn copy_of(admin: &PgPool, name: &str, template: &str) -> Result<(), sqlx::Error> {
    let mut tries = 0;
    loop {
        sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
            .bind(template)
            .execute(admin)
            .await?;
        match sqlx::query(&format!("CREATE DATABASE {name} TEMPLATE {template}")).execute(admin).await {
            Err(e) if tries < TEMPLATE_TRIES && e.to_string().contains("being accessed by other users") => {
                tries += 1;
                tokio::time::sleep(TEMPLATE_WAIT).await;
            }
            outcome => return outcome.map(|_| ()),
        }
    }
}

/// Checks, before any phase, that the server can be reached and lets this user create databases.
pub async fn check_server(server: &PostgresUrl) -> anyhow::Result<()> {
    let admin = connect(server, 1).await?;
    let (may,): (bool,) = sqlx::query_as("SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user")
        .fetch_one(&admin)
        .await
        .with_context(|| format!("asking {server} what this user may do"))?;
    admin.close().await;
    anyhow::ensure!(may, "the user of {server} may not create databases (CREATEDB), which the bench needs");
    Ok(())
}

async fn connect(url: &PostgresUrl, connections: u32) -> anyhow::Result<PgPool> {
    let options = PgConnectOptions::from_str(url.expose())
        .map_err(|e| anyhow::anyhow!("{url} is not a valid Postgres URL: {e}"))?
        .application_name("turn-manager-bench");
    PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .with_context(|| format!("connecting to {url} (PGHOST, PGUSER, PGPASSWORD... fill in what it leaves out)"))
}

/// The URL of database `name` on the server of `server`: its path replaced, its other parts (user, host, options)
/// kept, a `dbname=` option left out (it would win over the path). `postgres://` (everything from the environment,
/// `PGHOST`...) gives `postgres:///name`.
pub fn database_url(server: &str, name: &str) -> String {
    let (scheme, rest) = server.split_once("://").unwrap_or(("postgres", server));
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let tail = tail.split('#').next().unwrap_or_default();
    let query = tail.split_once('?').map(|(_, query)| query).unwrap_or_default();
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter(|pair| !pair.split('=').next().unwrap_or_default().eq_ignore_ascii_case("dbname"))
        .collect();
    let query = if kept.is_empty() { String::new() } else { format!("?{}", kept.join("&")) };
    format!("{scheme}://{authority}/{name}{query}")
}

#[cfg(test)]
mod tests {
    use super::database_url;

    #[test]
    fn a_database_url_keeps_the_server_its_user_and_options_and_names_the_new_database() {
        assert_eq!(database_url("postgres://", "tm_bench_1_0"), "postgres:///tm_bench_1_0");
        assert_eq!(database_url("postgres://tm:pw@db:5433/postgres", "b"), "postgres://tm:pw@db:5433/b");
        assert_eq!(database_url("postgresql://db?sslmode=require", "b"), "postgresql://db/b?sslmode=require");
        assert_eq!(
            database_url("postgres://u@db/x?dbname=x&sslmode=disable&DBNAME=y", "b"),
            "postgres://u@db/b?sslmode=disable"
        );
        assert_eq!(database_url("postgres://u@db/x?dbname=x", "b"), "postgres://u@db/b");
    }
}

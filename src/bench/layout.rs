//! How the bot under test is deployed in every phase: where it keeps its sessions (`--store`: each phase's own state
//! folder, or a database of its own on a Postgres server) and in how many processes (`--processes`: one shard each,
//! the channels spread over one server per shard). Pure: reading the options, the shard of each process, which
//! server each channel is in.

use crate::core::shards::ShardRange;
use crate::sessions::location::{PostgresUrl, StoreLocation};

/// The most processes the bench runs a bot in.
pub const PROCESSES_MAX: u32 = 4;

/// Where the bot keeps its sessions during the bench.
#[derive(Clone, Debug)]
pub enum StoreChoice {
    /// The state folder of each phase (the default).
    Files,
    /// A Postgres server: each phase, and each bot started in it, gets a new database there, dropped after.
    Postgres(PostgresUrl),
}

/// The store and the process count, the same for every phase and every bot binary of a run.
#[derive(Clone, Debug)]
pub struct Layout {
    pub store: StoreChoice,
    pub processes: u32,
}

impl Default for Layout {
    fn default() -> Self {
        Self { store: StoreChoice::Files, processes: 1 }
    }
}

impl Layout {
    /// Reads `--store` (a `postgres://` URL; none for the state folder) and `--processes`. Several processes need
    /// the database: the file store locks its folder, so a second process cannot share the sessions.
    pub fn parse(store: Option<&str>, processes: u32) -> Result<Self, String> {
        let store = match store.map(StoreLocation::parse).transpose()? {
            None => StoreChoice::Files,
            Some(StoreLocation::Postgres(url)) => StoreChoice::Postgres(url),
            Some(StoreLocation::Folder(dir)) => {
                return Err(format!(
                    "--store {}: the bench gives each phase a state folder of its own in its work folder; --store \
                     takes a postgres:// URL of a server where it may create databases (leave it out for the \
                     state folder)",
                    dir.display()
                ));
            }
        };
        if processes == 0 || processes > PROCESSES_MAX {
            return Err(format!("--processes must be between 1 and {PROCESSES_MAX}, not {processes}"));
        }
        if processes > 1 && matches!(store, StoreChoice::Files) {
            return Err(format!(
                "--processes {processes} needs --store postgres://...: the file store locks its state folder, so a \
                 second process cannot share the sessions"
            ));
        }
        Ok(Self { store, processes })
    }

    /// The shards process `process` runs: `None` (the whole bot on one connection) with one process, else shard
    /// `process` of `processes`.
    pub fn shards_of(&self, process: u32) -> Option<ShardRange> {
        (self.processes > 1).then_some(ShardRange { first: process, last: process, total: self.processes })
    }

    /// Servers the scene spreads its channels over: one per shard.
    pub fn guilds(&self) -> usize {
        self.processes as usize
    }

    /// `files, 1 process`, `Postgres, 2 processes`: what a column of the report ran with.
    pub fn short(&self) -> String {
        let store = match self.store {
            StoreChoice::Files => "files",
            StoreChoice::Postgres(_) => "Postgres",
        };
        let s = if self.processes == 1 { "" } else { "es" };
        format!("{store}, {} process{s}", self.processes)
    }

    /// One sentence for the report: where the sessions were and how the processes split the servers.
    pub fn describe(&self) -> String {
        let store = match &self.store {
            StoreChoice::Files => "sessions in each phase's own state folder (the file store)".to_owned(),
            StoreChoice::Postgres(url) => {
                format!("sessions in Postgres, a new database for each phase and each bot start, on {url}")
            }
        };
        if self.processes == 1 {
            format!("{store}; one bot process")
        } else {
            format!(
                "{store}; {n} bot processes, shard i of {n} each, the channels spread evenly over {n} servers (one \
                 on each shard); CPU and memory are those of all {n} together, start-up lasts until the last one \
                 sends IDENTIFY",
                n = self.processes
            )
        }
    }
}

/// Which of the scene's servers the `index`-th channel is in: round the servers in turn, so each has an equal share
/// (the first servers one more when they do not divide evenly). The first channel is in the first server.
pub fn guild_index(index: usize, guilds: usize) -> usize {
    index % guilds.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_is_the_state_folder_unless_a_postgres_url_is_given() {
        let files = Layout::parse(None, 1).unwrap();
        assert!(matches!(files.store, StoreChoice::Files));
        assert_eq!(files.short(), "files, 1 process");
        let pg = Layout::parse(Some("postgres://tm:secret@db/postgres"), 2).unwrap();
        let StoreChoice::Postgres(url) = &pg.store else { panic!("a database") };
        assert_eq!(url.expose(), "postgres://tm:secret@db/postgres");
        assert_eq!(pg.short(), "Postgres, 2 processes");
        assert!(pg.describe().contains("postgres://tm:***@db/postgres"), "never the password: {}", pg.describe());
    }

    #[test]
    fn a_folder_another_scheme_or_a_process_count_out_of_range_is_refused() {
        assert!(Layout::parse(Some("state"), 1).unwrap_err().contains("takes a postgres:// URL"));
        assert!(Layout::parse(Some("mysql://h/d"), 1).unwrap_err().contains("`mysql://` is not a store"));
        assert!(Layout::parse(Some("postgres://"), 0).unwrap_err().contains("between 1 and 4"));
        assert!(Layout::parse(Some("postgres://"), 5).unwrap_err().contains("between 1 and 4"));
    }

    #[test]
    fn two_processes_on_the_file_store_are_refused_with_the_reason() {
        let error = Layout::parse(None, 2).unwrap_err();
        assert!(error.contains("needs --store postgres://"), "{error}");
        assert!(error.contains("locks its state folder"), "{error}");
    }

    #[test]
    fn each_process_runs_one_shard_and_one_process_runs_them_all() {
        let one = Layout::parse(Some("postgres://"), 1).unwrap();
        assert_eq!(one.shards_of(0), None);
        let two = Layout::parse(Some("postgres://"), 2).unwrap();
        assert_eq!(two.shards_of(0), Some(ShardRange::parse("0-0", 2).unwrap()));
        assert_eq!(two.shards_of(1), Some(ShardRange::parse("1-1", 2).unwrap()));
        let registering: Vec<u32> =
            (0..2).filter(|p| crate::core::shards::registers_commands(two.shards_of(*p))).collect();
        assert_eq!(registering, [0], "only the process of shard 0 registers the slash commands");
    }

    #[test]
    fn the_channels_are_split_evenly_over_the_servers_the_first_in_the_first() {
        let per_guild = |channels: usize, guilds: usize| {
            let mut counts = vec![0; guilds];
            (0..channels).for_each(|i| counts[guild_index(i, guilds)] += 1);
            counts
        };
        assert_eq!(per_guild(1000, 2), [500, 500]);
        assert_eq!(per_guild(3, 2), [2, 1]);
        assert_eq!(per_guild(7, 1), [7]);
        assert_eq!(guild_index(0, 2), 0);
    }
}

//! Several processes of the bot on one Postgres database (see `postgres_support`), against the local server: two
//! processes split two servers by shard, each claiming only its own channels; and a process killed with SIGKILL (the
//! real binary, `run --store postgres://...`) is taken over by the next one once its leases expire: the session goes
//! on from where it was, the message posted meanwhile is handled, and every turn is announced once.

mod common;
mod postgres_support;

use common::{
    PATIENCE, count_floor, is_floor, personas, server_on_the_other_shard, shard_of_two as shard_of, write_personas,
};
use postgres_support::TestDatabase;
use std::process::{Command, Stdio};
use std::time::Duration;
use turn_manager::core::config::Config;
use turn_manager::core::ids::ChannelId;
use turn_manager::core::shards::ShardRange;
use turn_manager::demo::stage::Stage;
use turn_manager::sessions::{Saver, SessionStore};

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");
const LONG: Duration = Duration::from_secs(60);

async fn lease_owner(store: &turn_manager::sessions::postgres::PgSessions, channel: u64) -> String {
    sqlx::query_scalar("SELECT owner FROM leases WHERE channel_id = $1 AND expires_at > now()")
        .bind(channel as i64)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

async fn wait_for_floor(stage: &Stage, channel: u64, persona: &str) {
    stage
        .server
        .wait_for(&format!("{persona}'s floor in channel {channel}"), PATIENCE, |w| {
            w.view(channel).iter().any(|m| is_floor(m, persona)).then_some(())
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_database_split_two_servers_by_shard_and_each_holds_only_its_own_channels() {
    let Some(db) = TestDatabase::create("postgres_bots::two_processes").await else { return };
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let (other_guild, other_channel) = server_on_the_other_shard(&stage);
    let stores = [db.open(LONG, "node-0").await, db.open(LONG, "node-1").await];
    let mut bots = Vec::new();
    for shard in 0..2u32 {
        let range = ShardRange::parse(&shard.to_string(), 2).unwrap();
        let store = stores[shard as usize].clone();
        bots.push(stage.start_bot_with(Config::default(), store, Some(range)).await.unwrap());
    }
    let channels = [(stage.guild, stage.channel), (other_guild, other_channel)];
    for (_, channel) in channels {
        stage.server.post(channel, stage.operator, "!turn start");
    }
    for (_, channel) in channels {
        wait_for_floor(&stage, channel, "pm").await;
        stage.server.post(channel, stage.user_of("pm"), "Done here. TURN_COMPLETE");
    }
    for (guild, channel) in channels {
        wait_for_floor(&stage, channel, "dev").await;
        let owner = shard_of(guild) as usize;
        let store = &stores[owner];
        assert_eq!(lease_owner(store, channel).await, store.owner(), "the process of the server's shard holds it");
        let session = store.load(ChannelId(channel)).await.unwrap().expect("saved in the database");
        assert_eq!(session.guild_id.map(|g| g.0), Some(guild), "the session records its server");
        assert_eq!(session.active_agent.as_ref().map(|a| a.as_str()), Some("dev"));
        let history = store.history(ChannelId(channel)).await.unwrap();
        let kinds: Vec<&str> = history.iter().map(|e| e.kind.name()).collect();
        assert!(kinds.starts_with(&["session_started"]) && kinds.contains(&"turn_complete"), "{kinds:?}");
        let view = stage.server.view(channel);
        assert_eq!((count_floor(&view, "pm"), count_floor(&view, "dev")), (1, 1), "each floor announced once");
    }
    for bot in bots {
        bot.shutdown().await;
    }
    let released: i64 = sqlx::query_scalar("SELECT count(*) FROM leases WHERE expires_at > now()")
        .fetch_one(stores[0].pool())
        .await
        .unwrap();
    assert_eq!(released, 0, "a process that stops releases its leases");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_with_sigkill_is_taken_over_once_its_leases_expire_and_nothing_is_lost_or_said_twice() {
    let Some(db) = TestDatabase::create("postgres_bots::sigkill").await else { return };
    common::logs();
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let (personas_dir, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_personas(&stage, personas_dir.path());
    let shard = shard_of(stage.guild);
    let log_path = state.path().join("run.log");
    let mut child = Command::new(BINARY)
        .args(["run", "--api-base", &stage.server.base_url(), "--store", &db.url])
        .args(["--shards", &shard.to_string(), "--total-shards", "2", "--lease-seconds", "3"])
        .arg("--personas")
        .arg(personas_dir.path())
        .arg("--state")
        .arg(state.path())
        .env("DISCORD_TOKEN", &stage.bot_token)
        .env("RUST_LOG", "info,turn_manager=debug")
        .env_remove("TM_STORE")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let (me, channel) = (stage.bot_user, stage.channel);
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let connected = stage
        .server
        .wait_for("run to connect", PATIENCE, |w| w.is_connected_on(me, [u64::from(shard), 2]).then_some(()))
        .await;
    if let Err(e) = connected {
        let _ = child.kill();
        panic!("{e}; the bot said:\n{}", log());
    }
    stage.operator_says("!turn start");
    wait_for_floor(&stage, channel, "pm").await;

    child.kill().unwrap(); // SIGKILL: no shutdown, no release of its leases
    child.wait().unwrap();
    assert!(!log().contains(&stage.bot_token), "the token never reaches the log");
    let signal = stage.server.post(channel, stage.user_of("pm"), "Finished while nobody ran. TURN_COMPLETE");

    // The next process, given both shards, finds the channel held by the dead one, waits out its lease, takes it.
    let store = db.open(Duration::from_secs(3), "node-b").await;
    let bot = stage.start_bot_with(Config::default(), store.clone(), Some(ShardRange::whole(2))).await.unwrap();
    wait_for_floor(&stage, channel, "dev").await;
    bot.settle(ChannelId(channel)).await;
    stage
        .server
        .wait_for("pm's signal relayed and removed", PATIENCE, |w| {
            w.view(channel).iter().all(|m| m.id != signal).then_some(())
        })
        .await
        .unwrap();

    let view = stage.server.view(channel);
    assert_eq!((count_floor(&view, "pm"), count_floor(&view, "dev")), (1, 1), "each turn announced once");
    assert!(view.iter().any(|m| m.from_webhook && m.content == "Finished while nobody ran."), "the signal relayed");
    assert_eq!(lease_owner(&store, channel).await, store.owner(), "the new process holds the channel");
    let session = bot.session(ChannelId(channel)).await.expect("its session");
    assert_eq!(session.active_agent.as_ref().map(|a| a.as_str()), Some("dev"), "it went on from where it was");
    let history = store.history(ChannelId(channel)).await.unwrap();
    let count = |kind: &str| history.iter().filter(|e| e.kind.name() == kind).count();
    assert_eq!((count("session_started"), count("turn_complete")), (1, 1), "the history goes on: {history:?}");
    bot.shutdown().await;
}

//! Several processes of the bot on one Postgres database (see `postgres_support`), against the local server: two
//! processes split two servers by shard, each claiming only its own channels; and a process killed with SIGKILL (the
//! real binary, `run --store postgres://...`) is taken over by the next one once its leases expire: the session goes
//! on from where it was, the message posted meanwhile is handled, and every turn is announced once. A process frozen
//! (SIGSTOP) long enough to lose its channel wakes to find its saves fenced: it says and repeats nothing, and the
//! metrics of both processes count the takeover and the rejected save.

mod common;
mod postgres_support;

use common::scrape::Scrape;
use common::{
    PATIENCE, count_floor, is_floor, personas, render, server_on_the_other_shard, shard_of_two as shard_of,
    write_personas,
};
use postgres_support::TestDatabase;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use turn_manager::core::config::Config;
use turn_manager::core::ids::ChannelId;
use turn_manager::core::shards::ShardRange;
use turn_manager::demo::stage::Stage;
use turn_manager::sessions::{Saver, SessionStore};

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");
const LONG: Duration = Duration::from_secs(60);

/// Who holds a live lease of `channel`, if anyone.
async fn lease_owner(store: &turn_manager::sessions::postgres::PgSessions, channel: u64) -> Option<String> {
    sqlx::query_scalar("SELECT owner FROM leases WHERE channel_id = $1 AND expires_at > now()")
        .bind(channel as i64)
        .fetch_optional(store.pool())
        .await
        .unwrap()
}

/// `turn-manager run` on the database as a separate process of machine `node`, its leases lasting three seconds,
/// with `args` besides (shards, metrics); what it logs goes to `log`, its state folder is the log's.
fn spawn_run(stage: &Stage, db: &TestDatabase, personas: &Path, node: &str, args: &[&str], log: &Path) -> Child {
    Command::new(BINARY)
        .args(["run", "--api-base", &stage.server.base_url(), "--store", &db.url, "--lease-seconds", "3"])
        .args(args)
        .arg("--personas")
        .arg(personas)
        .arg("--state")
        .arg(log.parent().expect("the log's folder"))
        .env("DISCORD_TOKEN", &stage.bot_token)
        .env("RUST_LOG", "info,turn_manager=debug")
        .env("TM_NODE", node)
        .env_remove("TM_STORE")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// Sends `signal` (`-STOP`, `-CONT`, ...) to a child process.
fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
    assert!(status.success(), "kill {signal} {}", child.id());
}

/// Waits until a process's scrape shows `series` at `value`; answers that scrape.
async fn until_metric(addr: SocketAddr, series: &str, value: f64, log: &Path) -> Scrape {
    let until = std::time::Instant::now() + LONG;
    loop {
        if let Ok(Ok(scrape)) = tokio::time::timeout(Duration::from_secs(2), try_scrape(addr)).await {
            if scrape.get(series) == value {
                return scrape;
            }
            if std::time::Instant::now() > until {
                panic!("{series} never reached {value}: {}\nthe process said:\n{}", scrape.text, read(log));
            }
        }
        assert!(std::time::Instant::now() < until, "no scrape of {addr}; the process said:\n{}", read(log));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A scrape, or the error of a process not serving yet.
async fn try_scrape(addr: SocketAddr) -> Result<Scrape, reqwest::Error> {
    reqwest::get(format!("http://{addr}/metrics")).await?.error_for_status()?;
    Ok(Scrape::take(addr).await)
}

fn read(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
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
        assert_eq!(
            lease_owner(store, channel).await.as_deref(),
            Some(store.owner()),
            "the process of the server's shard holds it"
        );
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
    let shards = ["--shards", &shard.to_string(), "--total-shards", "2"];
    let mut child = spawn_run(&stage, &db, personas_dir.path(), "node-a", &shards, &log_path);
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
    assert_eq!(lease_owner(&store, channel).await.as_deref(), Some(store.owner()), "the new process holds the channel");
    let session = bot.session(ChannelId(channel)).await.expect("its session");
    assert_eq!(session.active_agent.as_ref().map(|a| a.as_str()), Some("dev"), "it went on from where it was");
    let history = store.history(ChannelId(channel)).await.unwrap();
    let count = |kind: &str| history.iter().filter(|e| e.kind.name() == kind).count();
    assert_eq!((count("session_started"), count("turn_complete")), (1, 1), "the history goes on: {history:?}");
    bot.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_process_whose_channel_was_taken_over_wakes_to_find_it_taken_and_says_nothing() {
    let Some(db) = TestDatabase::create("postgres_bots::frozen").await else { return };
    common::logs();
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let (personas_dir, a_dir, b_dir) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_personas(&stage, personas_dir.path());
    // Both ports are held until both are known, so that they differ.
    let (a_port, b_port) = (TcpListener::bind("127.0.0.1:0").unwrap(), TcpListener::bind("127.0.0.1:0").unwrap());
    let (a_metrics, b_metrics) = (a_port.local_addr().unwrap(), b_port.local_addr().unwrap());
    drop((a_port, b_port));
    let (a_log, b_log) = (a_dir.path().join("run.log"), b_dir.path().join("run.log"));
    let (me, channel) = (stage.bot_user, stage.channel);

    let mut a = spawn_run(&stage, &db, personas_dir.path(), "node-a", &["--metrics", &a_metrics.to_string()], &a_log);
    let connected = stage.server.wait_for("a to connect", PATIENCE, |w| w.is_connected(me).then_some(())).await;
    assert!(connected.is_ok(), "a did not connect; it said:\n{}", read(&a_log));
    stage.operator_says("!turn start");
    wait_for_floor(&stage, channel, "pm").await;

    // Frozen (a stalled VM, a long pause): a holds the channel's lease until it expires, and renews nothing.
    signal(&a, "-STOP");
    let mut b = spawn_run(&stage, &db, personas_dir.path(), "node-b", &["--metrics", &b_metrics.to_string()], &b_log);
    let took = until_metric(b_metrics, "turn_manager_lease_takeovers_total", 1.0, &b_log).await;
    let store = db.open(Duration::from_secs(3), "observer").await;
    // Counted when b starts the channel's new actor, whose claim follows.
    let claimed = async {
        loop {
            if let Some(owner) = lease_owner(&store, channel).await {
                return owner;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let owner = tokio::time::timeout(PATIENCE, claimed).await.expect("b claims the channel");
    assert!(owner.starts_with("node-b/"), "b holds the channel: {}", took.text);
    let signal_id = stage.server.post(channel, stage.user_of("pm"), "Done while a slept. TURN_COMPLETE");
    wait_for_floor(&stage, channel, "dev").await;

    // a wakes: its socket still holds pm's message and what b did. Its renewal finds the channel taken, or its save
    // of that is fenced, whichever comes first: its actor stops and acts no further.
    signal(&a, "-CONT");
    let stopped = until_metric(a_metrics, "turn_manager_active_actors", 0.0, &a_log).await;
    assert_eq!(stopped.get("turn_manager_lease_takeovers_total"), 0.0, "a took nothing over: {}", stopped.text);
    assert!(read(&a_log).contains("this channel's actor stops here"), "a says why it stopped:\n{}", read(&a_log));
    let b_after = Scrape::take(b_metrics).await;
    assert_eq!(b_after.get("turn_manager_fenced_saves_rejected_total"), 0.0, "b's saves all went in: {}", b_after.text);
    assert_eq!(b_after.get("turn_manager_lease_takeovers_total"), 1.0, "{}", b_after.text);

    // a is given time to say anything it still would: b's next handoff comes after a's rejected save, and nothing
    // of a's may show before or after it.
    stage.server.post(channel, stage.user_of("dev"), "My part. TURN_COMPLETE");
    wait_for_floor(&stage, channel, "critic").await;
    stage
        .server
        .wait_for("pm's signal relayed and removed", PATIENCE, |w| {
            w.view(channel).iter().all(|m| m.id != signal_id).then_some(())
        })
        .await
        .unwrap();
    let view = stage.server.view(channel);
    let floors = ["pm", "dev", "critic"].map(|p| count_floor(&view, p));
    assert_eq!(floors, [1, 1, 1], "each turn announced once:\n{}", common::render(&view));
    let relayed = view.iter().filter(|m| m.from_webhook && m.content == "Done while a slept.").count();
    assert_eq!(relayed, 1, "pm's message relayed once:\n{}", common::render(&view));
    let history = store.history(ChannelId(channel)).await.unwrap();
    let ended = history.iter().filter(|e| e.kind.name() == "turn_complete").count();
    assert_eq!(ended, 2, "pm's and dev's turns, each ended once: {history:?}");

    for (child, log) in [(&mut a, &a_log), (&mut b, &b_log)] {
        signal(child, "-TERM");
        let status = child.wait().unwrap();
        assert!(status.success(), "{status}; it said:\n{}", read(log));
        assert!(!read(log).contains(&stage.bot_token), "the token never reaches the log");
    }
}

/// A rolling deploy: b starts on the same shard while a holds the channel, so both read every `!turn` message. a runs
/// and answers each; b, finding the channel's lease a's, stays silent: before, it answered "I can't reach this
/// channel's session right now; try again" to a command that had run (and a `status` answer could lose to it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_on_the_same_shard_leaves_the_holders_commands_to_it_and_says_nothing() {
    let Some(db) = TestDatabase::create("postgres_bots::rolling").await else { return };
    common::logs();
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let (personas_dir, a_dir, b_dir) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_personas(&stage, personas_dir.path());
    let (a_log, b_log) = (a_dir.path().join("run.log"), b_dir.path().join("run.log"));
    let (me, channel) = (stage.bot_user, stage.channel);
    let connections = |n: usize| move |w: &local_discord::world::World| (w.connections_of(me) >= n).then_some(());

    let mut a = spawn_run(&stage, &db, personas_dir.path(), "node-a", &[], &a_log);
    let connected = stage.server.wait_for("a to connect", PATIENCE, connections(1)).await;
    assert!(connected.is_ok(), "a did not connect; it said:\n{}", read(&a_log));
    stage.operator_says("!turn start");
    wait_for_floor(&stage, channel, "pm").await;
    let mut b = spawn_run(&stage, &db, personas_dir.path(), "node-b", &[], &b_log);
    let connected = stage.server.wait_for("b to connect too", PATIENCE, connections(2)).await;
    assert!(connected.is_ok(), "b did not connect; it said:\n{}", read(&b_log));

    stage.operator_says("!turn pause");
    stage.server.wait_for("a's pause", PATIENCE, |w| said(w, channel, "⏸️ Paused.")).await.unwrap();
    stage.operator_says("!turn status");
    stage.server.wait_for("a's status", PATIENCE, |w| said(w, channel, "pm has the floor")).await.unwrap();
    // b logs where it decides to say nothing: once for each command, it has decided both.
    let left_to_a = async {
        while read(&b_log).matches("is another process's to run and answer").count() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(PATIENCE, left_to_a).await.is_err() {
        panic!(
            "b did not leave both commands to a:\n{}\nb said:\n{}",
            render(&stage.server.view(channel)),
            read(&b_log)
        );
    }
    let view = stage.server.view(channel);
    assert!(!view.iter().any(|m| m.content.contains("can't reach")), "nothing of b's:\n{}", render(&view));
    for (child, log) in [(&mut a, &a_log), (&mut b, &b_log)] {
        signal(child, "-TERM");
        let status = child.wait().unwrap();
        assert!(status.success(), "{status}; it said:\n{}", read(log));
    }
}

fn said(w: &local_discord::world::World, channel: u64, start: &str) -> Option<()> {
    w.view(channel).iter().any(|m| m.content.starts_with(start)).then_some(())
}

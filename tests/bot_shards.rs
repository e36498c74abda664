//! Two processes of the bot on Discord's sharding (spec 12), against the local server: each runs one of two shards
//! over its own state folder, gets only the events of the servers on its shard, manages only their channels, and
//! only the one running shard 0 registers the slash commands. And one process running both shards, which connects
//! them 5 s apart: each channel waits for its own shard.

mod common;

use common::{
    PATIENCE, connection_watch_looked, count_floor, is_floor, personas, render, server_on_the_other_shard, shard_of_two,
};
use local_discord::world::{LogEntry, LogKind};
use std::sync::Arc;
use std::time::Duration;
use turn_manager::core::config::{Config, ManagedChannel};
use turn_manager::core::ids::{ChannelId, MessageId};
use turn_manager::core::shards::ShardRange;
use turn_manager::demo::stage::Stage;
use turn_manager::discord::BotOptions;
use turn_manager::sessions::files::FileSessions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_split_two_servers_by_shard_and_each_manages_only_its_own() {
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let (other_guild, other_channel) = server_on_the_other_shard(&stage);
    let states = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut bots = Vec::new();
    for shard in 0..2u32 {
        let range = ShardRange::parse(&shard.to_string(), 2).unwrap();
        bots.push(stage.start_bot_on(Config::default(), states[shard as usize].path(), Some(range)).await.unwrap());
    }
    let channels = [(stage.guild, stage.channel), (other_guild, other_channel)];
    let floor_in = async |channel: u64, persona: &str| {
        let what = format!("{persona}'s floor in channel {channel}");
        stage
            .server
            .wait_for(&what, PATIENCE, |w| w.view(channel).iter().any(|m| is_floor(m, persona)).then_some(()))
            .await
    };
    for (_, channel) in channels {
        stage.server.post(channel, stage.operator, "!turn start");
    }
    for (_, channel) in channels {
        floor_in(channel, "pm").await.unwrap();
        stage.server.post(channel, stage.user_of("pm"), "Done here. TURN_COMPLETE");
    }
    for (_, channel) in channels {
        floor_in(channel, "dev").await.unwrap();
    }
    for (guild, channel) in channels {
        let owner = shard_of_two(guild) as usize;
        for (process, bot) in bots.iter().enumerate() {
            let saved = bot.store().load_one(ChannelId(channel)).unwrap();
            if process == owner {
                let session = saved.expect("the process of the server's shard saved its session");
                assert_eq!(session.guild_id.map(|g| g.0), Some(guild), "the session records its server");
                assert_eq!(session.active_agent.as_ref().map(|a| a.as_str()), Some("dev"));
            } else {
                assert!(saved.is_none(), "process {process} never saw channel {channel}: it is not on its shard");
            }
        }
        let view = stage.server.view(channel);
        assert_eq!((count_floor(&view, "pm"), count_floor(&view, "dev")), (1, 1), "each floor announced once");
    }
    let registrations = stage
        .server
        .log()
        .iter()
        .filter(
            |e| matches!(&e.kind, LogKind::Rest { method, path, .. } if method == "PUT" && path.ends_with("/commands")),
        )
        .count();
    assert_eq!(registrations, 1, "only the process running shard 0 registers the slash commands");
    for bot in bots {
        bot.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_channel_is_started_only_by_the_process_whose_shard_carries_its_server() {
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let (other_guild, other_channel) = server_on_the_other_shard(&stage);
    let channels = [(stage.guild, stage.channel), (other_guild, other_channel)];
    // Both processes read the same configuration, managing both channels from start-up.
    let config = Config {
        channels: channels
            .iter()
            .map(|(_, channel)| ManagedChannel { channel_id: ChannelId(*channel), roster: Vec::new() })
            .collect(),
        ..Config::default()
    };
    let states = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut bots = Vec::new();
    for shard in 0..2u32 {
        let range = ShardRange::parse(&shard.to_string(), 2).unwrap();
        bots.push(stage.start_bot_on(config.clone(), states[shard as usize].path(), Some(range)).await.unwrap());
    }
    for (_, channel) in channels {
        let what = format!("pm's floor in channel {channel}");
        stage
            .server
            .wait_for(&what, PATIENCE, |w| w.view(channel).iter().any(|m| is_floor(m, "pm")).then_some(()))
            .await
            .unwrap();
    }
    for (process, bot) in bots.iter().enumerate() {
        for (guild, channel) in channels {
            bot.settle(ChannelId(channel)).await;
            let saved = bot.store().load_one(ChannelId(channel)).unwrap();
            let owner = shard_of_two(guild) as usize == process;
            assert_eq!(saved.is_some(), owner, "process {process}, channel {channel}: only its shard's process");
        }
    }
    for (_, channel) in channels {
        let view = stage.server.view(channel);
        let starts = view.iter().filter(|m| m.content.starts_with("▶️")).count();
        assert_eq!((starts, count_floor(&view, "pm")), (1, 1), "started and announced once in channel {channel}");
    }
    for bot in bots {
        bot.shutdown().await;
    }
}

/// One process running both shards: serenity connects the second some 5 s after the first (Discord asks that long
/// between IDENTIFYs). A channel on the second shard sees none of its messages before then, so its deadline waits for
/// that shard's catch-up instead of running from the first shard's READY; and every channel reads its history once,
/// at its own shard's READY, not at each shard's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_on_a_shard_not_connected_yet_ends_no_turn_blind_and_each_channel_reads_its_history_once() {
    let stage = Stage::new(&personas([4, 60, 60])).await.expect("local server");
    let (_, other_channel) = server_on_the_other_shard(&stage);
    let (early, late) =
        if shard_of_two(stage.guild) == 0 { (stage.channel, other_channel) } else { (other_channel, stage.channel) };
    let state = tempfile::tempdir().unwrap();
    let both = Some(ShardRange::parse("0-1", 2).unwrap());
    let bot = stage.start_bot_on(Config::default(), state.path(), both).await.unwrap();
    for channel in [early, late] {
        stage.server.post(channel, stage.operator, "!turn start");
        floor_in(&stage, channel, "pm").await;
    }
    bot.shutdown().await;

    // pm's 4 s began when its announcement was accepted: they run out while the restarted process has shard 0 only.
    let log_from = stage.server.log().len();
    let options = BotOptions {
        token: stage.bot_token.clone(),
        api_base: Some(stage.server.base_url()),
        config: Config::default(),
        personas: stage.catalog(),
        store: Arc::new(FileSessions::open(state.path()).unwrap()),
        shards: both,
        metrics: None,
    };
    let bot = turn_manager::discord::start(options).await.unwrap();
    let reads_of = |channel: u64| {
        let history = format!("/api/v10/channels/{channel}/messages");
        let log = stage.server.log();
        let is_read = |e: &LogEntry| matches!(&e.kind, LogKind::Rest { method, path, .. } if method == "GET" && path.starts_with(&history));
        log[log_from..].iter().filter(|e| is_read(e)).count()
    };
    // The signal comes once shard 0's catch-ups have read the history (a read after it would see it): shard 0's
    // channel's read shows they began, and 300 ms is ample for the other channel's, if it were to read then too.
    let shard_0_caught_up = async || {
        while reads_of(early) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(PATIENCE, shard_0_caught_up()).await.expect("shard 0's channel catches up");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let me = stage.bot_user;
    assert!(!stage.server.with(|w| w.is_connected_on(me, [1, 2])), "the test needs shard 1 still to come");
    let signal = MessageId(stage.server.post(late, stage.user_of("pm"), "Done here. TURN_COMPLETE"));
    let deadline = bot.session(ChannelId(late)).await.and_then(|s| s.next_deadline()).expect("pm's deadline");
    assert!(
        signal.created_at() < deadline,
        "the test needs pm's signal before its deadline: the restart took too long"
    );
    stage.server.wait_for("shard 1", PATIENCE, |w| w.is_connected_on(me, [1, 2]).then_some(())).await.unwrap();
    floor_in(&stage, late, "dev").await;
    let view = stage.server.view(late);
    let timeouts = view.iter().filter(|m| m.content.starts_with("⏱️")).count();
    assert_eq!(timeouts, 0, "pm signalled in time, though on a shard not connected yet:\n{}", render(&view));
    // Had the connection watch asked for more catch-ups, it would have by now.
    connection_watch_looked(&bot, &[early, late]).await;
    assert_eq!((reads_of(early), reads_of(late)), (1, 1), "each channel reads its history once, at its shard's READY");
    bot.shutdown().await;
}

async fn floor_in(stage: &Stage, channel: u64, persona: &str) {
    let what = format!("{persona}'s floor in channel {channel}");
    stage
        .server
        .wait_for(&what, PATIENCE, |w| w.view(channel).iter().any(|m| is_floor(m, persona)).then_some(()))
        .await
        .unwrap();
}

//! End to end, issue 17: `run --metrics ADDR` serves Prometheus metrics. The real bot against the local server,
//! scraped over a real socket.
//!
//! The `metrics` facade has one global recorder per process, installed by the first bot started with an address and
//! kept for the life of the process: every test of this binary asks for the same address ([`metrics_addr`]), so
//! they share that one exporter, and the scene's test compares counters before and after what it does.

mod common;

use common::scrape::{Scrape, free_addr};
use common::{PATIENCE, Scene, is_floor};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;
use turn_manager::core::config::Config;
use turn_manager::core::ids::ChannelId;
use turn_manager::demo::stage::Stage;
use turn_manager::metrics::TurnEnd;

/// One free local port for the whole binary.
fn metrics_addr() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(free_addr)
}

/// A scrape of this binary's one exporter.
async fn scrape() -> Scrape {
    Scrape::take(metrics_addr()).await
}

const ANNOUNCE_2XX: &str = r#"turn_manager_rest_responses_total{route="POST /channels/{id}/messages",status="2xx"}"#;
const LATENESS_COUNT: &str = "turn_manager_timeout_lateness_seconds_count";
const HANDOFF_COUNT: &str = "turn_manager_handoff_latency_seconds_count";

/// Messages the local server accepted on the announce route (the bot's posts: agents post through the server's
/// handle, not its REST API).
fn posts_accepted(scene: &Scene) -> usize {
    let path = format!("POST /api/v10/channels/{}/messages -> 2", scene.stage.channel);
    scene.rest_calls().iter().filter(|call| call.starts_with(&path)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_counts_the_turns_the_timeout_the_handoff_and_the_rest_calls_of_a_real_run() {
    common::logs();
    let stage = Stage::new(&common::personas([60, 1, 60])).await.expect("local server");
    let state = tempfile::tempdir().expect("state folder");
    let config = Config::default();
    let bot = stage.start_bot_with_metrics(config.clone(), state.path(), Some(metrics_addr())).await.expect("bot");
    let scene = Scene { stage, bot: Some(bot), state, config };
    let posts_before = posts_accepted(&scene);
    let before = scrape().await;

    scene.start_session().await;
    scene.say("pm", "Here is my part. TURN_COMPLETE");
    scene.until("dev to get the floor", |v| v.iter().any(|m| is_floor(m, "dev")).then_some(())).await;
    // dev's turn is one second long and dev says nothing: it times out, and critic has the floor.
    scene.until("critic to get the floor", |v| v.iter().any(|m| is_floor(m, "critic")).then_some(())).await;
    scene.bot().settle(ChannelId(scene.stage.channel)).await;

    // The floor's acceptance reaches the actor (and the handoff's histogram) just after the channel shows it, and a
    // REST call is counted once its answer is read: wait for the figures to catch up with what the channel shows.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let (after, posts) = loop {
        let posts = posts_accepted(&scene) - posts_before;
        let after = scrape().await;
        let caught_up = after.since(&before, HANDOFF_COUNT) >= 1.0
            && after.since(&before, LATENESS_COUNT) >= 1.0
            && after.since(&before, ANNOUNCE_2XX) >= posts as f64;
        if caught_up || tokio::time::Instant::now() > deadline {
            break (after, posts);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let text = &after.text;

    let ended = scene.history().iter().filter(|e| TurnEnd::of(&e.kind).is_some()).count();
    assert_eq!(ended, 2, "precondition: pm's signal and dev's timeout");
    assert_eq!(after.total_since(&before, "turn_manager_turns_ended_total"), ended as f64, "{text}");
    assert_eq!(after.since(&before, r#"turn_manager_turns_ended_total{reason="signal"}"#), 1.0, "{text}");
    assert_eq!(after.since(&before, r#"turn_manager_turns_ended_total{reason="timeout"}"#), 1.0, "{text}");
    assert_eq!(after.since(&before, "turn_manager_timeouts_total"), 1.0, "{text}");
    assert_eq!(after.since(&before, LATENESS_COUNT), 1.0, "one deadline handled: {text}");
    assert_eq!(after.since(&before, HANDOFF_COUNT), 1.0, "pm's signal to dev's floor; a timeout is no handoff: {text}");
    let handoff = after.since(&before, "turn_manager_handoff_latency_seconds_sum");
    assert!(handoff > 0.0 && handoff < PATIENCE.as_secs_f64(), "{handoff} s: {text}");

    assert_eq!(posts, 5, "precondition: the start line, pm's, dev's and critic's floors, the timeout line");
    assert_eq!(after.since(&before, ANNOUNCE_2XX), posts as f64, "every post the server accepted: {text}");
    let timed = r#"turn_manager_rest_request_duration_seconds_count{route="POST /channels/{id}/messages"}"#;
    assert_eq!(after.since(&before, timed), posts as f64, "{text}");
    let reposts = r#"turn_manager_rest_responses_total{route="POST /webhooks/{id}/{token}",status="2xx"}"#;
    assert_eq!(after.since(&before, reposts), 1.0, "pm's repost: {text}");
    assert!(!text.contains(&scene.stage.channel.to_string()), "no raw id in a label: {text}");

    assert!(after.get("turn_manager_active_actors") >= 1.0, "{text}");
    assert_eq!(after.get(r#"turn_manager_gateway_shard_connected{shard="0"}"#), 1.0, "{text}");
    assert_eq!(after.samples.get("turn_manager_lease_takeovers_total"), Some(&0.0), "declared: {text}");
    assert_eq!(after.samples.get("turn_manager_fenced_saves_rejected_total"), Some(&0.0), "declared: {text}");
    assert!(text.contains("# HELP turn_manager_handoff_latency_seconds Seconds from handling"), "{text}");
    assert!(text.contains("# TYPE turn_manager_timeout_lateness_seconds histogram"), "{text}");
}

#[tokio::test]
async fn a_process_serves_its_metrics_on_one_address() {
    turn_manager::metrics::serve(metrics_addr()).expect("the same address again is served already");
    let other = SocketAddr::from(([127, 0, 0, 1], metrics_addr().port().wrapping_add(1)));
    let refused = turn_manager::metrics::serve(other).expect_err("one recorder per process");
    assert!(refused.to_string().contains(&format!("serves its metrics on {} already", metrics_addr())), "{refused}");
    assert!(scrape().await.text.contains("# HELP turn_manager_lease_takeovers_total"), "served");
}

/// `turn-manager health` (a container's HEALTHCHECK) says healthy, exit 0, once the bot serving the metrics has its
/// shard connected; with nothing serving at the address it says why not, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_command_reads_the_shards_from_the_metrics() {
    let health = |addr: SocketAddr| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_turn-manager"))
            .args(["health", "--metrics", &addr.to_string()])
            .env_remove("TM_METRICS")
            .output()
            .expect("the binary runs");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let (code, said) = health(free_addr());
    assert_eq!(code, Some(1), "{said}");
    assert!(said.starts_with("unhealthy: no answer from http://127.0.0.1:") && said.contains("--metrics"), "{said}");

    let stage = Stage::new(&common::personas([60, 60, 60])).await.expect("local server");
    let state = tempfile::tempdir().expect("state folder");
    let bot = stage.start_bot_with_metrics(Config::default(), state.path(), Some(metrics_addr())).await.expect("bot");
    // Another test's bot of this binary may have left the shared gauge at 0 as it stopped: this bot's connection
    // watch sets it again within 100 ms.
    let deadline = std::time::Instant::now() + PATIENCE;
    let (code, said) = loop {
        let (code, said) = tokio::task::spawn_blocking(move || health(metrics_addr())).await.unwrap();
        if code == Some(0) || std::time::Instant::now() > deadline {
            break (code, said);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!((code, said.as_str()), (Some(0), "healthy: gateway shard 0 connected"));
    bot.shutdown().await;
}

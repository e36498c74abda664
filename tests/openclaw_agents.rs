//! End to end with OpenClaw: two OpenClaw agents (one Gateway, two Discord accounts, a stub model) under
//! `turn-manager run --api-base`, in `turn-manager sandbox`, for two full rounds; the turn order is read from the
//! channel through the API. It installs OpenClaw (about 700 MB from npm, Node 24 included when the machine's is
//! older) through examples/openclaw/setup.sh and takes one to two minutes, so it is run on demand and by .ci/run:
//!
//!     cargo test --test openclaw_agents -- --ignored

#[path = "real_agents/procs.rs"]
mod procs;

use procs::Procs;
use serenity::all::{ChannelId, HttpBuilder};
use std::io::Write;
use std::process::Command;
use std::time::Duration;

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");
const OPENCLAW: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/openclaw");
/// OpenClaw's Gateway takes about a minute to start its Discord accounts (the second one waits 10 s on purpose).
const STARTUP: Duration = Duration::from_secs(240);
const ROUNDS: Duration = Duration::from_secs(120);

/// A port of 127.0.0.1 free just now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "installs OpenClaw from npm and takes a minute or two: cargo test --test openclaw_agents -- --ignored"]
async fn two_openclaw_agents_take_two_full_rounds_under_the_manager() {
    let setup = Command::new("bash").arg(format!("{OPENCLAW}/setup.sh")).output().expect("bash runs");
    assert!(setup.status.success(), "OpenClaw cannot be installed:\n{}", String::from_utf8_lossy(&setup.stderr));
    let dir = tempfile::tempdir().unwrap();
    let mut procs = Procs::new();

    let mut sandbox = Command::new(BINARY);
    sandbox.args(["sandbox", "--port", "0", "--personas", &format!("{OPENCLAW}/personas"), "--dir"]);
    sandbox.arg(dir.path()).stdin(std::process::Stdio::piped());
    let mut operator = procs.spawn("sandbox", &mut sandbox).expect("stdin");
    procs.line("sandbox", STARTUP, |l| l.starts_with("sandbox ready:")).await;
    let file = std::fs::read_to_string(dir.path().join("sandbox.json")).unwrap();
    let sandbox: serde_json::Value = serde_json::from_str(&file).unwrap();
    let base = sandbox["baseUrl"].as_str().unwrap();
    let id = |v: &serde_json::Value| v.as_str().unwrap().parse::<u64>().unwrap();
    let (channel, manager) = (id(&sandbox["channelId"]), id(&sandbox["manager"]["userId"]));

    let mut agents = Command::new("bash");
    agents.arg(format!("{OPENCLAW}/start-agents.sh")).arg(dir.path().join("sandbox.json"));
    agents.arg(dir.path().join("openclaw"));
    agents.env("OPENCLAW_STUB_PORT", free_port().to_string()).env("OPENCLAW_GATEWAY_PORT", free_port().to_string());
    procs.spawn("openclaw", &mut agents);
    procs.spawn("manager", &mut procs::manager(BINARY, base, dir.path(), &sandbox));
    for name in ["turn-manager", "PM", "Developer"] {
        let registered = format!("● {name} registered its slash commands");
        procs.line("sandbox", STARTUP, |l| l == registered).await;
    }

    let started = tokio::time::Instant::now();
    operator.write_all(b"!turn start\n").unwrap();
    let http =
        HttpBuilder::new(sandbox["manager"]["token"].as_str().unwrap()).proxy(base).ratelimiter_disabled(true).build();
    // Two full rounds and the floor back to pm: five announcements, read through the API as they come.
    let story = loop {
        let mut messages = http.get_messages(ChannelId::new(channel), None, Some(100)).await.unwrap();
        messages.reverse();
        let story: Vec<String> = messages
            .iter()
            .filter_map(|m| {
                let who = m.author.id.get();
                if who == manager && m.content.contains("has the floor") {
                    let persona = m.content.split(" (").nth(1)?.split(')').next()?;
                    Some(format!("floor {persona}"))
                } else if who == manager || who == id(&sandbox["operatorId"]) {
                    None
                } else {
                    let via = if m.webhook_id.is_some() { "relayed" } else { "not relayed" };
                    Some(format!("{} ({via}): {}", m.author.name, m.content))
                }
            })
            .collect();
        if story.iter().filter(|s| s.starts_with("floor")).count() >= 5 {
            break story;
        }
        if started.elapsed() > ROUNDS {
            panic!("two rounds did not end in time; the channel:\n{story:#?}\neverything printed:\n{}", procs.report());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let fifth = story.iter().enumerate().filter(|(_, s)| s.starts_with("floor")).nth(4).unwrap().0;
    let story = &story[..=fifth];
    let shape: Vec<String> = story
        .iter()
        .map(|s| match s.split_once(": ") {
            Some((who, text)) if text.starts_with("pm speaks") || text.starts_with("dev speaks") => {
                let stripped = !text.contains("TURN_COMPLETE");
                format!(
                    "{who}: {} speaks{}",
                    text.split(' ').next().unwrap(),
                    if stripped { "" } else { " (signal left)" }
                )
            }
            _ => s.clone(),
        })
        .collect();
    let expected = [
        "floor pm",
        "PM (relayed): pm speaks",
        "floor dev",
        "Developer (relayed): dev speaks",
        "floor pm",
        "PM (relayed): pm speaks",
        "floor dev",
        "Developer (relayed): dev speaks",
        "floor pm",
    ];
    assert_eq!(shape, expected, "the channel: {story:#?}\neverything printed:\n{}", procs.report());
    println!("two OpenClaw rounds in {:.1}s after !turn start", started.elapsed().as_secs_f64());
}

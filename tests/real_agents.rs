//! End to end with real Discord libraries: `turn-manager sandbox`, `turn-manager run --api-base` with the
//! manager's token, and three agents as three personas: the discord.py and discord.js reference agents
//! (examples/agents/, each running a shell command as its "model") and a serenity bot in this test. Two full rounds
//! go through all three, the serenity agent stays silent on its second turn so that it times out, and the turn
//! order is read from the channel as Discord's API gives it. Needs python3 and node: the agents' dependencies are
//! installed by examples/agents/setup.sh (run here when missing; .ci/run runs it first).

#[path = "real_agents/procs.rs"]
mod procs;

use procs::Procs;
use serenity::all::{
    ChannelId, Context, EventHandler, GatewayIntents, HttpBuilder, Message, Ready, TypingStartEvent, UserId,
};
use serenity::async_trait;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");
const AGENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/agents");
/// Bounds a failing test only: every wait ends as soon as its condition holds.
const STARTUP: Duration = Duration::from_secs(60);
const ROUNDS: Duration = Duration::from_secs(90);
/// The serenity agent's turn length: its silent second turn ends by this timeout.
const RS_TIMEOUT_SECONDS: u32 = 4;

/// What the serenity agent sees on the gateway.
enum Seen {
    Ready,
    Message { author: u64, content: String },
    Typing(u64),
}

/// A serenity agent: answers its first call (typing first), stays silent on the second.
struct RsAgent {
    me: u64,
    manager: u64,
    calls: AtomicU32,
    seen: UnboundedSender<Seen>,
}

#[async_trait]
impl EventHandler for RsAgent {
    async fn ready(&self, _: Context, _: Ready) {
        let _ = self.seen.send(Seen::Ready);
    }
    async fn message(&self, ctx: Context, m: Message) {
        let _ = self.seen.send(Seen::Message { author: m.author.id.get(), content: m.content.clone() });
        if m.author.id.get() != self.manager || !m.mentions_user_id(UserId::new(self.me)) {
            return;
        }
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            m.channel_id.broadcast_typing(&ctx.http).await.expect("typing");
            m.channel_id.say(&ctx.http, "rs answers call 1\n\nTURN_COMPLETE").await.expect("answer posted");
        }
    }
    async fn typing_start(&self, _: Context, e: TypingStartEvent) {
        let _ = self.seen.send(Seen::Typing(e.user_id.get()));
    }
}

fn write_personas(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (order, (id, name, timeout)) in
        [("py", "PyAgent", 30), ("js", "JsAgent", 30), ("rs", "RsAgent", RS_TIMEOUT_SECONDS)].iter().enumerate()
    {
        let persona = serde_json::json!({"id": id, "displayName": name, "order": order + 1,
            "discordUserId": format!("10000000000000000{order}"), "turnBehavior": {"timeoutSeconds": timeout}});
        std::fs::write(dir.join(format!("{id}.json")), persona.to_string()).unwrap();
    }
}

/// Installs the agents' dependencies when they are not there yet; fails (saying why) without python3 or node.
fn ensure_agents_installed() {
    let agents = Path::new(AGENTS);
    if agents.join("python/.venv/bin/python").exists() && agents.join("node/node_modules/discord.js").exists() {
        return;
    }
    let out = Command::new("bash").arg(agents.join("setup.sh")).output().expect("bash runs");
    assert!(
        out.status.success(),
        "the reference agents cannot be installed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A reply command for the shell: the agent's name and how many times the conversation it was given shows it
/// called on, so a reply proves the agent read the conversation on its standard input.
fn reply_command(persona: &str) -> [String; 3] {
    ["sh".into(), "-c".into(), format!("echo \"{persona} answers call $(grep -c '({persona}) has the floor')\"")]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_py_discord_js_and_serenity_agents_take_turns_under_the_manager() {
    ensure_agents_installed();
    let dir = tempfile::tempdir().unwrap();
    write_personas(&dir.path().join("personas-in"));
    let mut procs = Procs::new();

    let mut sandbox = Command::new(BINARY);
    sandbox.args(["sandbox", "--port", "0", "--personas"]).arg(dir.path().join("personas-in"));
    sandbox.arg("--dir").arg(dir.path()).stdin(std::process::Stdio::piped());
    let mut operator = procs.spawn("sandbox", &mut sandbox).expect("stdin");
    procs.line("sandbox", STARTUP, |l| l.starts_with("sandbox ready:")).await;
    let file = std::fs::read_to_string(dir.path().join("sandbox.json")).unwrap();
    let sandbox: serde_json::Value = serde_json::from_str(&file).unwrap();
    let id = |v: &serde_json::Value| v.as_str().unwrap().parse::<u64>().unwrap();
    let (base, channel, manager) =
        (sandbox["baseUrl"].as_str().unwrap(), id(&sandbox["channelId"]), id(&sandbox["manager"]["userId"]));
    let agent = |name: &str| {
        (id(&sandbox["agents"][name]["userId"]), sandbox["agents"][name]["token"].as_str().unwrap().to_owned())
    };
    let (py, js, rs) = (agent("py"), agent("js"), agent("rs"));

    procs.spawn("manager", &mut procs::manager(BINARY, base, dir.path(), &sandbox));
    let agent_env = |command: &mut Command, token: &str| {
        command.env("DISCORD_API_BASE", base).env("DISCORD_TOKEN", token).env("AGENT_MANAGER_ID", manager.to_string());
    };
    let mut python = Command::new(format!("{AGENTS}/python/.venv/bin/python"));
    python.arg(format!("{AGENTS}/python/agent.py")).arg("--").args(reply_command("py"));
    agent_env(&mut python, &py.1);
    procs.spawn("discord.py", &mut python);
    let mut node = Command::new("node");
    node.arg(format!("{AGENTS}/node/agent.js")).arg("--").args(reply_command("js"));
    agent_env(&mut node, &js.1);
    procs.spawn("discord.js", &mut node);

    let (tx, mut seen) = unbounded_channel();
    let http = HttpBuilder::new(&rs.1).proxy(base).ratelimiter_disabled(true).build();
    let handler = RsAgent { me: rs.0, manager, calls: AtomicU32::new(0), seen: tx };
    let mut client =
        serenity::all::ClientBuilder::new_with_http(http, GatewayIntents::all()).event_handler(handler).await.unwrap();
    let http = client.http.clone();
    tokio::spawn(async move { client.start().await });

    procs.line("sandbox", STARTUP, |l| l.contains("turn-manager registered its slash commands")).await;
    procs.line("discord.py", STARTUP, |l| l.contains("ready as PyAgent")).await;
    procs.line("discord.js", STARTUP, |l| l.contains("ready as JsAgent")).await;
    tokio::time::timeout(STARTUP, async { while !matches!(seen.recv().await, Some(Seen::Ready)) {} })
        .await
        .expect("the serenity agent connects");

    let started = tokio::time::Instant::now();
    operator.write_all(b"!turn start\n").unwrap();
    // Two full rounds and the floor back to py: seven announcements, seen on the serenity agent's gateway.
    let mut typing = Vec::new();
    let mut floors = 0;
    let waited = tokio::time::timeout(ROUNDS, async {
        while floors < 7 {
            match seen.recv().await.expect("the serenity agent runs") {
                Seen::Message { author, content } if author == manager && content.contains("has the floor") => {
                    floors += 1
                }
                Seen::Typing(user) => typing.push(user),
                _ => {}
            }
        }
    })
    .await;
    if waited.is_err() {
        panic!("only {floors} announcement(s) came; everything printed:\n{}", procs.report());
    }
    let took = started.elapsed();

    let mut messages = http.get_messages(ChannelId::new(channel), None, Some(100)).await.unwrap();
    messages.reverse();
    let mut story: Vec<String> = messages
        .iter()
        .filter_map(|m| match (m.author.id.get(), m.webhook_id.is_some()) {
            (a, false) if a == manager && m.content.contains("has the floor") => {
                let persona = m.content.split(" (").nth(1)?.split(')').next()?;
                Some(format!("floor {persona}"))
            }
            (a, false) if a == manager && m.content.starts_with("⏱️") => {
                Some(m.content.split(" after").next()?.to_owned())
            }
            (a, false) if a == manager || a == id(&sandbox["operatorId"]) => None,
            (_, true) => Some(format!("{} (relayed): {}", m.author.name, m.content)),
            (_, false) => Some(format!("{} (not relayed): {}", m.author.name, m.content)),
        })
        .collect();
    let seventh = story.iter().enumerate().filter(|(_, s)| s.starts_with("floor")).nth(6).map(|(i, _)| i);
    story.truncate(seventh.expect("seven announcements in the channel") + 1);
    let expected = [
        "floor py",
        "PyAgent (relayed): py answers call 1",
        "floor js",
        "JsAgent (relayed): js answers call 1",
        "floor rs",
        "RsAgent (relayed): rs answers call 1",
        "floor py",
        "PyAgent (relayed): py answers call 2",
        "floor js",
        "JsAgent (relayed): js answers call 2",
        "floor rs",
        "⏱️ rs turn timed out",
        "floor py",
    ];
    assert_eq!(story, expected, "the channel, in order; everything printed:\n{}", procs.report());
    for (name, user) in [("discord.py", py.0), ("discord.js", js.0), ("serenity", rs.0)] {
        assert!(typing.contains(&user), "the {name} agent showed typing while it worked");
    }
    println!("two rounds and a timeout through three real agents in {:.1}s", took.as_secs_f64());
}

/// The reference agents' own unit tests (examples/agents/python/test_agent.py, examples/agents/node/agent.test.js):
/// how a reply is split and signed, which calls are answered, a command past its time killed with its children.
#[test]
fn the_reference_agents_unit_tests_pass() {
    ensure_agents_installed();
    let agents = Path::new(AGENTS);
    let mut python = Command::new(agents.join("python/.venv/bin/python"));
    python.args(["-m", "unittest", "-v", "test_agent"]).current_dir(agents.join("python"));
    python.env("PYTHONDONTWRITEBYTECODE", "1");
    let mut node = Command::new("node");
    node.args(["--test", "agent.test.js"]).current_dir(agents.join("node"));
    for (name, command) in [("discord.py agent", &mut python), ("discord.js agent", &mut node)] {
        let out = command.output().unwrap_or_else(|e| panic!("the {name}'s tests cannot run: {e}"));
        assert!(
            out.status.success(),
            "the {name}'s unit tests failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

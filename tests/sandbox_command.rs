//! `turn-manager sandbox` as a process: it writes sandbox.json and the personas' sandbox copy, every token in it
//! works, lines on standard input are posted as the operator, and SIGTERM stops it cleanly.

use serenity::all::{ChannelId, HttpBuilder};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_hands_out_working_accounts_and_posts_stdin_as_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BINARY)
        .args(["sandbox", "--port", "0", "--dir"])
        .arg(dir.path())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let printed: Vec<String> = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        for line in stdout.by_ref() {
            let line = line.unwrap();
            let done = line.starts_with("sandbox ready:");
            lines.push(line);
            if done {
                break;
            }
        }
        // Keep reading so the sandbox never blocks on a full pipe.
        std::thread::spawn(move || stdout.for_each(drop));
        lines
    })
    .await
    .unwrap();
    assert!(printed.last().is_some_and(|l| l.starts_with("sandbox ready:")), "{printed:?}");

    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("sandbox.json")).unwrap()).unwrap();
    let printed_json: serde_json::Value =
        serde_json::from_str(&printed[..printed.iter().position(|l| l.is_empty()).unwrap()].join("\n")).unwrap();
    assert_eq!(file, printed_json, "what is printed is what is written");
    let base = file["baseUrl"].as_str().unwrap();
    assert!(base.starts_with("http://127.0.0.1:"));
    assert_eq!(file["gatewayUrl"].as_str().unwrap(), format!("{}/gateway", base.replace("http", "ws")));

    // Every persona of personas/ has an account whose token works, and the copy carries its id.
    for persona in ["pm", "dev", "critic"] {
        let agent = &file["agents"][persona];
        let http = HttpBuilder::new(agent["token"].as_str().unwrap()).proxy(base).ratelimiter_disabled(true).build();
        let me = http.get_current_user().await.unwrap();
        assert_eq!(me.id.to_string(), agent["userId"].as_str().unwrap());
        let copy = std::fs::read_to_string(dir.path().join("personas").join(format!("{persona}.json"))).unwrap();
        let copy: serde_json::Value = serde_json::from_str(&copy).unwrap();
        assert_eq!(copy["discordUserId"], agent["userId"]);
        assert_eq!(copy["id"], persona);
        // The line printed for the agent has all the reference agents read, the manager's id included.
        let expected = format!(
            "DISCORD_API_BASE={base} DISCORD_TOKEN={} AGENT_MANAGER_ID={}",
            agent["token"].as_str().unwrap(),
            file["manager"]["userId"].as_str().unwrap()
        );
        assert!(printed.iter().any(|l| l.trim_start().starts_with(persona) && l.ends_with(&expected)), "{printed:?}");
    }

    let manager =
        HttpBuilder::new(file["manager"]["token"].as_str().unwrap()).proxy(base).ratelimiter_disabled(true).build();
    let channel = ChannelId::new(file["channelId"].as_str().unwrap().parse().unwrap());
    // Kept open until the end: the sandbox must stop on SIGTERM while its standard input is still open.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"hello from the operator\n").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let posted = loop {
        let messages = manager.get_messages(channel, None, Some(10)).await.unwrap();
        if let Some(m) = messages.into_iter().find(|m| m.content == "hello from the operator") {
            break m;
        }
        assert!(tokio::time::Instant::now() < deadline, "the line was never posted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(posted.author.id.to_string(), file["operatorId"].as_str().unwrap());

    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{status:?}");
    drop(stdin);
}

/// Found by a review: `sandbox --dir personas` wrote sandbox.json among the persona files, which `check` and `run`
/// then refused as a persona without an id.
#[test]
fn a_sandbox_in_the_persona_folder_itself_is_refused_and_writes_nothing() {
    let personas = tempfile::tempdir().unwrap();
    std::fs::write(personas.path().join("pm.json"), r#"{"id": "pm", "discordUserId": "1"}"#).unwrap();
    std::fs::write(personas.path().join("dev.json"), r#"{"id": "dev", "discordUserId": "2"}"#).unwrap();
    let mut child = Command::new(BINARY)
        .args(["sandbox", "--port", "0", "--personas"])
        .arg(personas.path())
        .arg("--dir")
        .arg(personas.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounds a failing test only: a sandbox that starts runs until it is stopped.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the sandbox started in the persona folder instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(stderr.contains("a persona folder, where it would be read as a persona file"), "{stderr}");
    assert!(!personas.path().join("sandbox.json").exists());
}

/// Found by a newcomer: a bad persona file stopped the sandbox with "the bot will not start until they are fixed".
#[test]
fn a_bad_persona_file_stops_the_sandbox_saying_so() {
    let personas = tempfile::tempdir().unwrap();
    std::fs::write(personas.path().join("pm.json"), r#"{"id": "pm"}"#).unwrap();
    let sandbox = tempfile::tempdir().unwrap();
    let out = Command::new(BINARY)
        .args(["sandbox", "--port", "0", "--personas"])
        .arg(personas.path())
        .arg("--dir")
        .arg(sandbox.path().join("s"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("pm.json") && stderr.contains("discordUserId"), "names the file and field: {stderr}");
    assert!(stderr.contains("1 error found; the sandbox will not start until they are fixed."), "{stderr}");
}

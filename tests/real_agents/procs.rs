//! Child processes for the real-agents tests: each one's output lines go to one channel (for waiting on them and
//! for the failure report), and every child is killed with its own children (its process group) when the test
//! ends, however it ends.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// `turn-manager run` against the sandbox described by `sandbox` (its `sandbox.json`), with the sandbox folder's
/// personas and a state folder beside them.
pub fn manager(binary: &str, base: &str, dir: &std::path::Path, sandbox: &serde_json::Value) -> Command {
    let mut command = Command::new(binary);
    command
        .args(["run", "--api-base", base, "--personas"])
        .arg(dir.join("personas"))
        .arg("--state")
        .arg(dir.join("state"))
        .env("DISCORD_TOKEN", sandbox["manager"]["token"].as_str().expect("the manager's token"))
        .env("RUST_LOG", "warn");
    command
}

/// The processes of a test and everything they printed.
pub struct Procs {
    children: Vec<(String, Child)>,
    tx: UnboundedSender<(String, String)>,
    rx: UnboundedReceiver<(String, String)>,
    /// Every line so far: who printed it, and the line.
    lines: Vec<(String, String)>,
}

impl Procs {
    pub fn new() -> Self {
        let (tx, rx) = unbounded_channel();
        Self { children: Vec::new(), tx, rx, lines: Vec::new() }
    }

    /// Starts `command`, its stdout and stderr read line by line under `name`. Returns the child's stdin if piped.
    pub fn spawn(&mut self, name: &str, command: &mut Command) -> Option<std::process::ChildStdin> {
        let mut child = command
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        self.forward(name, child.stdout.take().unwrap());
        self.forward(name, child.stderr.take().unwrap());
        let stdin = child.stdin.take();
        self.children.push((name.to_owned(), child));
        stdin
    }

    fn forward(&self, name: &str, output: impl Read + Send + 'static) {
        let (tx, name) = (self.tx.clone(), name.to_owned());
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                if tx.send((name.clone(), line)).is_err() {
                    break;
                }
            }
        });
    }

    /// Waits for a line of `name` that satisfies `want` (one printed already counts).
    pub async fn line(&mut self, name: &str, within: Duration, want: impl Fn(&str) -> bool) -> String {
        self.drain();
        if let Some((_, line)) = self.lines.iter().find(|(from, line)| from == name && want(line)) {
            return line.clone();
        }
        let found = tokio::time::timeout(within, async {
            while let Some((from, line)) = self.rx.recv().await {
                self.lines.push((from.clone(), line.clone()));
                if from == name && want(&line) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            _ => panic!("{name} never printed the line awaited; everything printed:\n{}", self.report()),
        }
    }

    fn drain(&mut self) {
        while let Ok(line) = self.rx.try_recv() {
            self.lines.push(line);
        }
    }

    /// Everything printed so far, for a failure message.
    pub fn report(&mut self) -> String {
        self.drain();
        self.lines.iter().map(|(from, line)| format!("{from} | {line}")).collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            // The group's id is the child's: scripts' own children (a Gateway, a stub server) go with them.
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
        }
    }
}

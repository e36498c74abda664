//! Spec 9, "a state change is on disk before the announcement that tells the channel about it is sent", watched in
//! the real binary's system calls: `turn-manager run` under `strace -f` against the local server, three turns, then
//! every request that carries an announcement's nonce must come after an `fdatasync` of the journal that returned
//! once the journal record holding that nonce was written. The store's own tests count the syncs it asks for; this
//! one sees them happen: removing the journal's `sync_data` fails it every time; handing the sender its effects
//! before the save returns failed it in one run of three (a race it can only catch when the sender wins it).
//!
//! Needs `strace` and permission to trace a child (`.ci/run` installs strace); without them it is skipped, saying
//! why on the standard error, unless `TM_REQUIRE_STRACE` is set.

mod common;

use common::{PATIENCE, is_floor, personas, write_personas};
use std::collections::HashMap;
use std::io::Write as _;
use std::process::{Command, Stdio};
use turn_manager::demo::stage::Stage;

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");

/// Whether `strace -f` can trace a child here; the reason when it cannot.
fn strace_works() -> Result<(), String> {
    match Command::new("strace").args(["-f", "-o", "/dev/null", "true"]).stderr(Stdio::piped()).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!("strace cannot trace here: {}", String::from_utf8_lossy(&out.stderr).trim())),
        Err(e) => Err(format!("strace is not installed ({e}); `apt-get install strace`")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_announcement_is_sent_only_after_the_journal_record_deciding_it_was_fdatasynced() {
    if let Err(reason) = strace_works() {
        assert!(std::env::var_os("TM_REQUIRE_STRACE").is_none(), "TM_REQUIRE_STRACE is set but {reason}");
        let _ = writeln!(std::io::stderr(), "durable_before_sent: SKIPPED: {reason}");
        return;
    }
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let (personas_dir, state, scratch) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_personas(&stage, personas_dir.path());
    let trace = scratch.path().join("strace.txt");
    let log = scratch.path().join("run.log");
    let strace = Command::new("strace")
        // Whole buffers (-s), every thread (-f); file descriptors followed through openat, socket and close.
        .args([
            "-f",
            "-s",
            "1000000",
            "-e",
            "trace=openat,close,socket,write,writev,pwrite64,sendto,sendmsg,fdatasync,fsync",
        ])
        .arg("-o")
        .arg(&trace)
        .args([BINARY, "run", "--api-base", &stage.server.base_url()])
        .arg("--personas")
        .arg(personas_dir.path())
        .arg("--state")
        .arg(state.path())
        .env("DISCORD_TOKEN", &stage.bot_token)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut strace = Traced(strace);
    let me = stage.bot_user;
    let connected = stage.server.wait_for("run to connect", PATIENCE * 4, |w| w.is_connected(me).then_some(())).await;
    if let Err(e) = connected {
        panic!("{e}; the bot said:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
    }
    let channel = stage.channel;
    let floor = async |persona: &'static str| {
        let seen = |w: &local_discord::world::World| w.view(channel).iter().any(|m| is_floor(m, persona)).then_some(());
        stage.server.wait_for(&format!("{persona}'s floor"), PATIENCE * 4, seen).await
    };
    stage.operator_says("!turn start");
    floor("pm").await.unwrap();
    stage.server.post(channel, stage.user_of("pm"), "My part. TURN_COMPLETE");
    floor("dev").await.unwrap();
    stage.server.post(channel, stage.user_of("dev"), "Mine. TURN_COMPLETE");
    floor("critic").await.unwrap();

    // SIGTERM to the bot itself (strace's child), which stops gracefully; strace then ends.
    let bot = strace.bot().expect("the bot runs under strace");
    assert!(Command::new("kill").args(["-TERM", &bot]).status().unwrap().success());
    let deadline = std::time::Instant::now() + PATIENCE * 2;
    while strace.0.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the bot did not stop on SIGTERM");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let trace = std::fs::read_to_string(&trace).unwrap();
    let sent = check(&trace).unwrap_or_else(|e| panic!("{e}"));
    // The session start, pm's floor, dev's floor, critic's floor: each a request with its nonce.
    assert!(sent >= 4, "only {sent} requests with a nonce were seen: the test would prove nothing");
}

/// strace and the bot it runs, both killed if the test ends early (a tracer killed alone lets its tracee run on).
struct Traced(std::process::Child);

impl Traced {
    /// The bot's process id, strace's child.
    fn bot(&self) -> Option<String> {
        let id = self.0.id();
        let children = std::fs::read_to_string(format!("/proc/{id}/task/{id}/children")).ok()?;
        children.split_whitespace().next().map(str::to_owned)
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            if let Some(bot) = self.bot() {
                let _ = Command::new("kill").args(["-KILL", &bot]).status();
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// One journal append: its file descriptor, its text as strace printed it, whether an fdatasync of that file
/// returned since.
struct Append {
    fd: i64,
    text: String,
    durable: bool,
}

/// Goes through the trace in order; every request sent with a nonce must follow a durable journal append holding
/// that nonce. The number of such requests, or the first one sent too early.
fn check(trace: &str) -> Result<usize, String> {
    let mut files: HashMap<i64, String> = HashMap::new();
    let mut appends: Vec<Append> = Vec::new();
    let mut unfinished: HashMap<&str, String> = HashMap::new();
    let mut sent = 0;
    for line in trace.lines() {
        let Some((pid, rest)) = line.split_once(' ') else { continue };
        let rest = rest.trim_start();
        // A call another thread's call interrupted in the output: its start now, its end (and result) later.
        let (call, started, ended) = if let Some(start) = rest.strip_suffix(" <unfinished ...>") {
            unfinished.insert(pid, start.to_owned());
            (start.to_owned(), true, false)
        } else if rest.starts_with("<... ") {
            let end = rest.split_once("resumed>").map_or("", |(_, end)| end);
            (format!("{}{end}", unfinished.remove(pid).unwrap_or_default()), false, true)
        } else {
            (rest.to_owned(), true, true)
        };
        let Some((name, args)) = call.split_once('(') else { continue };
        let fd = args.split([',', ')']).next().and_then(|fd| fd.trim().parse::<i64>().ok());
        // strace pads before ` = result`.
        let result = call.rsplit_once(" = ").and_then(|(_, r)| r.split(' ').next()?.parse::<i64>().ok());
        match name {
            "openat" if ended => {
                if let (Some(fd), Some(path)) = (result.filter(|fd| *fd >= 0), args.split('"').nth(1)) {
                    files.insert(fd, path.to_owned());
                }
            }
            "close" if ended => {
                files.remove(&fd.unwrap_or(-1));
            }
            "socket" if ended => {
                files.remove(&result.unwrap_or(-1));
            }
            "write" | "writev" | "pwrite64" | "sendto" | "sendmsg" if started => {
                // Not the standard streams (the log).
                let Some(fd) = fd.filter(|fd| *fd > 2) else { continue };
                match files.get(&fd) {
                    Some(path) if path.contains("/journal-") => {
                        appends.push(Append { fd, text: call.clone(), durable: false })
                    }
                    Some(_) => {} // a session file, a log, a temporary file
                    None => {
                        for nonce in nonces(&call) {
                            sent += 1;
                            let durable = appends.iter().any(|a| a.durable && a.text.contains(&nonce));
                            if !durable {
                                let decided = appends.iter().any(|a| a.text.contains(&nonce));
                                return Err(format!(
                                    "the request carrying nonce {nonce} was sent before its journal record was \
                                     {}:\n{call}",
                                    if decided { "made durable" } else { "even written" }
                                ));
                            }
                        }
                    }
                }
            }
            "fdatasync" | "fsync" if ended && result == Some(0) => {
                for append in appends.iter_mut().filter(|a| Some(a.fd) == fd) {
                    append.durable = true;
                }
            }
            _ => {}
        }
    }
    Ok(sent)
}

/// The nonces in a request's body as strace shows it (`\"nonce\":\"t...\"`).
fn nonces(call: &str) -> Vec<String> {
    call.split("nonce\\\":\\\"")
        .skip(1)
        .filter_map(|rest| rest.split('\\').next())
        .filter(|nonce| nonce.starts_with('t') && nonce.len() > 10)
        .map(str::to_owned)
        .collect()
}

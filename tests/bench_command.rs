//! `turn-manager bench` as a process, with tiny numbers: it runs every part against this build and prints every
//! figure, with the sessions in state folders and (when `PGHOST` names a Postgres, see `postgres_support`) in
//! databases of its own shared by two processes of the bot. Timings are never asserted: only that each figure was
//! measured, and where.

mod postgres_support;

use postgres_support::TestDatabase;
use std::process::{Command, Output};

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");

/// The tiny sizes: 3 channels, 2 active, 10 saved sessions, 3 messages each, 1 s turns, 300 ms windows.
const TINY: [&str; 13] = [
    "bench",
    "--quick",
    "--channels",
    "3",
    "--active",
    "2",
    "--sessions",
    "10",
    "--messages",
    "3",
    "--turn-seconds",
    "1",
    "--window-ms",
];

/// Every row of the table, each measured: a value, not `—`, `no samples` or `?`.
fn assert_every_figure_measured(stdout: &str) {
    for figure in [
        "| handoff, 1 channel, p50 / p99 / max |",
        "| handoff, 2 channels active, p50 / p99 / max |",
        "| handoff, 2 channels active, agents answering 50 ms after their mention (turns/s), p50 / p99 / max |",
        "| handoff, 3 channels active, p50 / p99 / max |",
        "| completed turns/s, 3 channels |",
        "| bot CPU per completed turn, 3 channels |",
        "| non-signal messages/s, 3 channels |",
        "| timeout lateness, 3 channels (notice created), p50 / p99 / max |",
        "| timeout lateness, same deadlines (turn ended: the bot's history time), p50 / p99 / max |",
        "| REST calls per completed turn |",
        "| RSS per idle session, 10 saved sessions |",
        "| start-up to IDENTIFY, 10 saved sessions (0 sessions) |",
        "| RSS idle, 0 / 10 saved sessions |",
    ] {
        let row = stdout.lines().find(|l| l.starts_with(figure)).unwrap_or_else(|| panic!("no {figure} in:\n{stdout}"));
        let measured = row.trim_start_matches(figure).split('|').next().unwrap().trim();
        assert!(
            !measured.is_empty() && measured != "—" && !measured.contains("no samples") && !measured.contains('?'),
            "{figure} was not measured: {row}"
        );
    }
}

fn texts(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_tiny_bench_runs_every_part_and_prints_every_figure() {
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(BINARY)
        .args(TINY)
        .args(["300", "--timeout-rounds", "2", "--turn-rounds", "2", "--work-dir"])
        .arg(work.path().join("bench"))
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_every_figure_measured(&stdout);
    let rounds = stdout.lines().find(|l| l.contains("- timeouts: 2 rounds, notice p99 ")).expect("the rounds' p99s");
    assert_eq!(rounds.matches(" ms").count(), 2, "two lists, in ms: {rounds}");
    let ended = rounds.split_once("(turn ended p99 ").expect("the bot's own part, round by round").1;
    assert_eq!(ended.split(", ").count(), 2, "two rounds: {rounds}");
    let turns = stdout.lines().find(|l| l.contains("- turns, all channels: 2 rounds, turns/s ")).expect("the rounds");
    assert_eq!(turns.matches(" µs) in the order run").count(), 1, "each round's CPU per turn: {turns}");
    assert_eq!(stdout.matches("  - turns, all channels (3): ").count(), 1, "the median round's details: {stdout}");
    assert!(stdout.contains("| figure | A (files, 1 process) |"), "the column says what it ran with:\n{stdout}");
    assert!(stdout.contains("(this build)"), "{stdout}");
    assert!(stdout.contains("REST per turn: DELETE /channels/{id}/messages/{id} 1.00"), "{stdout}");
    assert!(!work.path().join("bench").exists(), "the work folder is removed after a successful run");
}

/// Two processes of the bot, shard 0 and shard 1 of 2, on databases the bench makes on the test's server (the test
/// database's URL: the bench swaps its name for its own) and drops after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_bench_on_postgres_runs_two_processes_on_a_database_of_each_phase_and_drops_them() {
    let Some(db) = TestDatabase::create("a_tiny_bench_on_postgres_runs_two_processes").await else { return };
    let work = tempfile::tempdir().unwrap();
    let bench = work.path().join("bench");
    let child = std::process::Command::new(BINARY)
        .args(TINY)
        .args(["300", "--only", "handoff,turns,messages,timeouts,startup", "--keep", "--processes", "2"])
        .args(["--store", &db.url, "--work-dir"])
        .arg(&bench)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_every_figure_measured(&stdout);
    assert!(stdout.contains("| figure | A (Postgres, 2 processes) |"), "the column says what it ran with:\n{stdout}");
    assert!(stdout.contains("2 bot processes, shard i of 2 each"), "{stdout}");

    // Each phase's two processes ran their own shard on a database of the bench's, not in the state folder.
    for phase in ["one", "active", "turns", "messages", "timeouts"] {
        for (process, shards) in [(0, "shards 0-0 of 2"), (1, "shards 1-1 of 2")] {
            let log = bench.join("bot-0").join(phase).join(format!("bot-{process}.log"));
            let log = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
            assert!(log.contains(&format!("running {shards}")), "{phase}, process {process}:\n{log}");
            let database = format!("/tm_bench_{pid}_");
            assert!(
                log.lines().any(|l| l.contains("sessions are kept in the database") && l.contains(&database)),
                "{phase}, process {process} used a database of the bench's:\n{log}"
            );
        }
    }
    // The start-up phase resumed every saved session (each read at least once), from the database.
    let reads = stdout.split("start-up: ").nth(1).and_then(|rest| rest.split(' ').next()?.parse::<u32>().ok());
    assert!(reads.is_some_and(|n| n >= 10), "every saved session resumed:\n{stdout}");
    assert!(stdout.contains(" history reads for 10 saved sessions"), "{stdout}");
    assert!(!bench.join("startup").join("state").join("channels").exists(), "no session was kept in files");

    // Every database the bench made is gone.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let (left,): (i64,) = sqlx::query_as("SELECT count(*) FROM pg_database WHERE datname LIKE $1")
        .bind(format!("tm_bench_{pid}_%"))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "the bench drops the databases it made");
}

#[test]
fn two_processes_without_a_database_are_refused_before_anything_runs() {
    let out = Command::new(BINARY).args(["bench", "--processes", "2"]).output().unwrap();
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--processes 2 needs --store postgres://"), "{stderr}");
}

#[test]
fn a_missing_bot_binary_is_refused_before_anything_runs() {
    let out = Command::new(BINARY).args(["bench", "--bot-binary", "/nonexistent/turn-manager"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/turn-manager: no such file"));
}

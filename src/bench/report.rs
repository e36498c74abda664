//! The bench's output: one Markdown table, a column per bot binary (headed with the store and the process count it
//! ran with) beside the floor of the same run and the target, then the details that explain each figure (CPU
//! use, REST routes, how each was measured).

use super::stats::{Summary, group, ms};
use super::{PACED_THINK, Report, Run, is_this_build, label};
use std::fmt::Write as _;

const NOT_RUN: &str = "—";

/// One row of the table.
struct Row {
    figure: String,
    cells: Vec<String>,
    floor: String,
    target: &'static str,
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let o = &report.options;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(out, "turn-manager bench: {cores} cores; the floor is measured in the same run.\n");
    for (i, run) in report.runs.iter().enumerate() {
        let this = if is_this_build(&run.binary) { " (this build)" } else { "" };
        let _ = writeln!(out, "- {} = {}{this}", label(i), run.binary.display());
    }
    let _ = writeln!(out, "- every column: {}", o.layout.describe());
    out.push('\n');
    let rows = rows(report);
    let mut header = vec!["figure".to_owned()];
    header.extend((0..report.runs.len()).map(|i| format!("{} ({})", label(i), o.layout.short())));
    header.extend(["floor (same run)".to_owned(), "target".to_owned()]);
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    for row in rows {
        let mut cells = vec![row.figure];
        cells.extend(row.cells);
        cells.extend([row.floor, row.target.to_owned()]);
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push_str(&details(report));
    let _ = writeln!(
        out,
        "\nTook {:.0} s ({} channels, {} active, {} saved sessions, {} messages per channel, {} s timeouts, {} s windows).",
        report.took.as_secs_f64(),
        o.channels,
        o.active,
        o.sessions,
        o.messages_per_channel,
        o.turn_seconds,
        o.window.as_secs_f64()
    );
    out
}

fn rows(report: &Report) -> Vec<Row> {
    let o = &report.options;
    let floor = report.floor.as_ref();
    let handoff_floor =
        floor.map_or(NOT_RUN.into(), |f| format!("{} (loopback + durable 4 KiB write)", f.handoff.two()));
    let cells = |f: &dyn Fn(&Run) -> Option<String>| -> Vec<String> {
        report.runs.iter().map(|r| f(r).unwrap_or_else(|| NOT_RUN.into())).collect()
    };
    let three = |s: &Option<Summary>| s.as_ref().map_or("no samples".into(), Summary::three);
    let sessions = group(o.sessions as u64);
    vec![
        Row {
            figure: "handoff, 1 channel, p50 / p99 / max".into(),
            cells: cells(&|r| r.one.as_ref().map(|t| three(&t.handoff))),
            floor: handoff_floor.clone(),
            target: "p99 ≤ floor + 2 ms",
        },
        Row {
            figure: format!("handoff, {} channels active, p50 / p99 / max", group(o.active as u64)),
            cells: cells(&|r| r.active.as_ref().map(|t| three(&t.handoff))),
            floor: handoff_floor.clone(),
            target: "p99 < 10 ms",
        },
        Row {
            figure: format!(
                "handoff, {} channels active, agents answering {} ms after their mention (turns/s), p50 / p99 / max",
                group(o.active as u64),
                PACED_THINK.as_millis()
            ),
            cells: cells(&|r| {
                r.paced.as_ref().map(|t| format!("{} ({})", three(&t.handoff), group(t.turns_per_s.round() as u64)))
            }),
            floor: handoff_floor.clone(),
            target: "(the same target, if busy means agents that think)",
        },
        Row {
            figure: format!("handoff, {} channels active, p50 / p99 / max", group(o.channels as u64)),
            cells: cells(&|r| r.all().map(|t| three(&t.handoff))),
            floor: handoff_floor,
            target: "",
        },
        Row {
            figure: format!("completed turns/s, {} channels", group(o.channels as u64)),
            cells: cells(&|r| r.all().map(|t| group(t.turns_per_s.round() as u64))),
            floor: floor.map_or(NOT_RUN.into(), |f| {
                format!("{} parallel durable writes/s", group(f.parallel_writes_per_s.round() as u64))
            }),
            target: "≥ 5,000",
        },
        Row {
            figure: format!("bot CPU per completed turn, {} channels", group(o.channels as u64)),
            cells: cells(&|r| r.all()?.cpu_per_turn().map(|cpu| format!("{:.0} µs", cpu.as_secs_f64() * 1e6))),
            floor: NOT_RUN.into(),
            target: "",
        },
        Row {
            figure: format!("non-signal messages/s, {} channels", group(o.channels as u64)),
            cells: cells(&|r| r.messages.as_ref().map(messages_cell)),
            floor: NOT_RUN.into(),
            target: "≥ 20,000",
        },
        Row {
            figure: format!(
                "timeout lateness, {} channels (notice created), p50 / p99 / max",
                group(o.channels as u64)
            ),
            cells: cells(&|r| r.timeouts().map(|t| three(&t.lateness))),
            floor: floor.map_or(NOT_RUN.into(), |f| {
                format!("tokio timers {}; 1,000 messages asked at once, created {}", f.timers.three(), f.burst.three())
            }),
            target: "p99 ≤ 5 ms, max ≤ 50 ms",
        },
        Row {
            figure: "timeout lateness, same deadlines (turn ended: the bot's history time), p50 / p99 / max".into(),
            cells: cells(&|r| r.timeouts().map(|t| three(&t.ended))),
            floor: floor.map_or(NOT_RUN.into(), |f| format!("tokio timers {}", f.timers.three())),
            target: "",
        },
        Row {
            figure: "REST calls per completed turn".into(),
            cells: cells(&|r| r.all().map(|t| format!("{:.2}", t.rest_per_turn))),
            floor: NOT_RUN.into(),
            target: "",
        },
        Row {
            figure: format!("RSS per idle session, {sessions} saved sessions"),
            cells: cells(&|r| r.startup.as_ref()?.per_session_kib.map(|k| format!("{k:.1} KiB"))),
            floor: NOT_RUN.into(),
            target: "≤ 8 KB",
        },
        Row {
            figure: format!("start-up to IDENTIFY, {sessions} saved sessions (0 sessions)"),
            cells: cells(&|r| {
                let s = r.startup.as_ref()?;
                Some(format!("{} ms ({} ms)", ms_or(s.full.identify), ms_or(s.empty.identify)))
            }),
            floor: NOT_RUN.into(),
            target: "< 1 s",
        },
        Row {
            figure: format!("RSS idle, 0 / {sessions} saved sessions"),
            cells: cells(&|r| {
                let s = r.startup.as_ref()?;
                Some(format!("{} / {} MiB", mib(s.empty.rss_kib), mib(s.full.rss_kib)))
            }),
            floor: NOT_RUN.into(),
            target: "",
        },
    ]
}

fn messages_cell(m: &super::messages::MessageFigures) -> String {
    let rate = group(m.per_s.round() as u64);
    match (&m.drained_after, m.drained) {
        (Some(d), true) => format!("{rate} ({} messages drained in {} ms)", group(m.posted as u64), ms(d.max)),
        (_, true) => rate,
        (_, false) => {
            format!("{rate} (not drained: {} of {} in {:.0} s)", m.handled, m.posted, m.elapsed.as_secs_f64())
        }
    }
}

fn ms_or(d: Option<std::time::Duration>) -> String {
    d.map_or("?".into(), ms)
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("?".into(), |k| format!("{:.1}", k as f64 / 1024.0))
}

/// What stands behind each figure.
fn details(report: &Report) -> String {
    let mut out = String::from("\nDetails\n");
    if let Some(f) = &report.floor {
        let _ = writeln!(
            out,
            "- floor: loopback round trip (GET /api/v10/gateway on a kept-alive connection) p50/p99 {}; durable 4 KiB \
             write (temporary file, fsync, rename, folder fsync) p50/p99 {}; {} threads rewriting their own files: \
             {} durable writes/s; tokio timers: {} rounds of 1,000 sleeps due at one instant on a runtime with one \
             worker per core.",
            f.loopback.two(),
            f.durable.two(),
            f.parallel_threads,
            group(f.parallel_writes_per_s.round() as u64),
            f.timers.count / super::floor::TIMERS_PER_ROUND,
        );
        let _ = writeln!(
            out,
            "- floor: a message in each of {} channels of local-discord, all asked for at one instant over {} \
             kept-alive connections by the smallest client, nobody connected to the gateway: created p50/p99/max {} \
             after that instant, {} messages/s.",
            group(super::floor::BURST_CHANNELS as u64),
            super::floor::BURST_CONNECTIONS,
            f.burst.three(),
            group(f.burst_per_s.round() as u64),
        );
    }
    if let Some(s) = &report.saved {
        let _ = writeln!(
            out,
            "- saved sessions: {} made by the engine (30 turns each) and saved by the store in {:.1} s; {} bytes per \
             session file.",
            group(s.sessions as u64),
            s.took.as_secs_f64(),
            group(s.bytes_per_file)
        );
    }
    for (i, run) in report.runs.iter().enumerate() {
        let _ = writeln!(out, "- {}:", label(i));
        let named = [
            ("1 channel", run.one.as_ref()),
            ("active", run.active.as_ref()),
            ("active, paced", run.paced.as_ref()),
            ("all channels", run.all()),
        ];
        for (name, turns) in named {
            if let Some(t) = turns {
                let routes: Vec<String> = t.rest_routes.iter().map(|(r, n)| format!("{r} {n:.2}")).collect();
                let _ = writeln!(
                    out,
                    "  - turns, {name} ({}): {} turns completed in {:.1} s ({} handoffs timed); CPU {}; REST per turn: \
                     {}{}{}",
                    t.channels,
                    group(t.completed as u64),
                    t.window.as_secs_f64(),
                    t.handoff.map_or(0, |h| h.count),
                    t.cpu.cores(),
                    routes.join(", "),
                    warn(t.cold_channels, "channels not warmed up when timing began"),
                    warn(t.missed as usize, "messages the observer missed"),
                );
            }
        }
        if let Some(m) = &run.messages {
            let _ = writeln!(
                out,
                "  - messages: {} posted while the bot was frozen (at {}/s), {} handled in {:.2} s after it was let go; \
                 channels drained after {} (p50 / p99 / max); CPU {}{}",
                group(m.posted as u64),
                group(m.offered_per_s.round() as u64),
                group(m.handled as u64),
                m.elapsed.as_secs_f64(),
                m.drained_after.map_or("none".into(), |h| h.three()),
                m.cpu.cores(),
                warn(m.missed as usize, "messages the observer missed"),
            );
        }
        if run.turn_rounds.len() > 1 {
            let each = |f: &dyn Fn(&super::turns::TurnFigures) -> String| -> String {
                run.turn_rounds.iter().map(f).collect::<Vec<_>>().join(", ")
            };
            let _ = writeln!(
                out,
                "  - turns, all channels: {} rounds, turns/s {} (bot CPU per turn {} µs) in the order run; the median \
                 round is shown",
                run.turn_rounds.len(),
                each(&|r| group(r.turns_per_s.round() as u64)),
                each(&|r| r.cpu_per_turn().map_or("none".into(), |cpu| format!("{:.0}", cpu.as_secs_f64() * 1e6))),
            );
        }
        if run.timeout_rounds.len() > 1 {
            let p99s = |of: &dyn Fn(&super::timeouts::TimeoutFigures) -> Option<&Summary>| -> String {
                run.timeout_rounds
                    .iter()
                    .map(|r| of(r).map_or("none".into(), |l| ms(l.p99)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                out,
                "  - timeouts: {} rounds, notice p99 {} ms (turn ended p99 {} ms) in the order run; the median round \
                 is shown",
                run.timeout_rounds.len(),
                p99s(&|r| r.lateness.as_ref()),
                p99s(&|r| r.ended.as_ref()),
            );
        }
        if let Some(t) = run.timeouts() {
            let ready = match t.ready_before {
                Some(ms) if ms >= 0.0 => format!("the bot had read every channel's missed messages {ms:.0} ms before"),
                Some(ms) => format!("WARNING: the bot was still reading missed messages {:.0} ms after", -ms),
                None => "WARNING: the bot had not read every channel's missed messages when they fell due".into(),
            };
            let _ = writeln!(
                out,
                "  - timeouts: {} deadlines spread over {} ms; {ready}; CPU while they fell due {}{}{}{}",
                group(t.channels as u64),
                ms(t.deadline_spread),
                t.cpu.cores(),
                warn(t.unmeasured, "channels unmeasured"),
                warn(t.early, "notices before their deadline (counted as 0)"),
                warn(t.missed as usize, "messages the observer missed"),
            );
        }
        if let Some(s) = &run.startup {
            let _ = writeln!(
                out,
                "  - start-up: {} history reads for {} saved sessions (each resumed channel reads what it missed, and one \
                 page more if it has a message an edit may still finish older than that); RSS just after IDENTIFY {} / \
                 {} MiB (0 / {} sessions){}{}",
                group(s.full.catch_up_reads as u64),
                group(s.sessions as u64),
                mib(s.empty.rss_at_identify_kib),
                mib(s.full.rss_at_identify_kib),
                group(s.sessions as u64),
                if s.full.busy || s.empty.busy { "; still busy when memory was read" } else { "" },
                if s.empty.catch_up_reads > 0 { "; it also read channels with no saved session" } else { "" },
            );
        }
    }
    out.push_str(HOW);
    out
}

fn warn(count: usize, what: &str) -> String {
    if count == 0 { String::new() } else { format!("; WARNING: {count} {what}") }
}

const HOW: &str = "
How: each bot runs as `turn-manager run --api-base <local-discord>` (separate processes with their own runtimes, \
RUST_LOG as --bot-log says); local-discord and the agents run in the bench process, on the same cores (`others` is \
what the rest of the machine used meanwhile). Times are the server's: when it created the agent's signal and the \
bot's next announcement (handoff), or the timeout notice (lateness, against `turnTimeoutAt` read from the saved \
session, its file or its row; the timed-out sessions were saved by the engine as started at one instant, so every \
build meets deadlines that fall together); 'turn ended' is the bot's own part, the time of the `turn_timeout` \
event in the saved history (the actor's clock when it ended the turn, before its save and the notice's REST call). \
Agents answer the moment they are mentioned, so every channel always has \
a turn in flight and a handoff with N channels is about N / (turns/s). Turns/s: announcements following a signal in \
a fixed window opened after every channel completed two turns. REST calls per turn: from quiet to quiet, every \
channel completes one more turn. Messages/s: with the bot frozen (SIGSTOP), the floor holder of every channel posts \
messages without the signal, then one with it; timed from SIGCONT to the last channel's next announcement. Memory: \
VmRSS of the idle bot (no REST call and next to no CPU for 1 s).
";

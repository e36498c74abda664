//! The soak's figures and its table: what was done to the bot, what it did, and every violation by kind.

use super::invariants::Violation;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub seed: u64,
    /// SIGKILLs in all, and how many fell in start-up (before the bot had caught up) or just after a signal.
    pub kills: u32,
    pub kills_in_start_up: u32,
    pub kills_after_signal: u32,
    pub restarts: u32,
    pub turns_completed: usize,
    pub turns_timed_out: usize,
    pub late_signals: usize,
    pub agent_signals: usize,
    pub floor_announcements: usize,
    pub timeout_announcements: usize,
    /// Agents' messages written while the bot was down.
    pub messages_while_down: usize,
    pub signals_while_down: usize,
    /// Start-ups that found effects left undone in an outbox, and log repairs the bot reported.
    pub outbox_replays: usize,
    pub log_catch_ups: usize,
    pub torn_log_tails_cut: usize,
    /// Session files found behind the journal at a start (a kill between a save and its checkpoint), and journals
    /// ending with a torn record.
    pub sessions_from_journal: usize,
    pub torn_journal_tails: usize,
    /// The local server's faults injected between kills (`--faults`).
    pub faults: super::faults::Injected,
    pub violations: BTreeSet<Violation>,
    pub wall: Duration,
}

impl Summary {
    /// The table printed at the end of a soak.
    pub fn table(&self) -> String {
        let mut rows: Vec<(String, String)> = vec![
            ("seed".into(), self.seed.to_string()),
            ("wall time".into(), format!("{:.1} s", self.wall.as_secs_f64())),
            (
                "kills (SIGKILL)".into(),
                format!(
                    "{} ({} in start-up, {} right after a signal, {} at random)",
                    self.kills,
                    self.kills_in_start_up,
                    self.kills_after_signal,
                    self.kills - self.kills_in_start_up - self.kills_after_signal
                ),
            ),
            ("restarts".into(), self.restarts.to_string()),
            (
                "turns".into(),
                format!(
                    "{} ({} by signal, {} by timeout)",
                    self.turns_completed + self.turns_timed_out,
                    self.turns_completed,
                    self.turns_timed_out
                ),
            ),
            ("agent signals".into(), format!("{} ({} late)", self.agent_signals, self.late_signals)),
            (
                "announcements".into(),
                format!(
                    "{} ({} floor, {} timeout)",
                    self.floor_announcements + self.timeout_announcements,
                    self.floor_announcements,
                    self.timeout_announcements
                ),
            ),
            (
                "written while down".into(),
                format!("{} message(s), {} signal(s)", self.messages_while_down, self.signals_while_down),
            ),
            (
                "recovery seen in the bot's log".into(),
                format!(
                    "{} outbox replay(s), {} log catch-up(s), {} torn log tail(s) cut, {} session(s) from the \
                     journal, {} torn journal tail(s)",
                    self.outbox_replays,
                    self.log_catch_ups,
                    self.torn_log_tails_cut,
                    self.sessions_from_journal,
                    self.torn_journal_tails
                ),
            ),
        ];
        if self.faults.total() > 0 {
            let groups: Vec<String> = self.faults.by_group().iter().map(|(g, n)| format!("{g} {n}")).collect();
            rows.push(("faults injected".into(), format!("{} ({})", self.faults.total(), groups.join(", "))));
            for (what, n) in &self.faults.0 {
                rows.push((format!("  {what}"), n.to_string()));
            }
        }
        rows.push(("violations".into(), self.violations.len().to_string()));
        for kind in Violation::KINDS {
            let n = self.violations.iter().filter(|v| v.kind() == kind).count();
            rows.push((format!("  {kind}"), n.to_string()));
        }
        let width = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
        let mut out = String::new();
        for (key, value) in rows {
            let _ = writeln!(out, "{key:<width$}  {value}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_every_kind_of_violation_with_its_count() {
        let mut summary = Summary { kills: 3, kills_in_start_up: 1, ..Summary::default() };
        summary.violations.insert(Violation::SignalLost { channel: 1, message: 2 });
        let table = summary.table();
        assert!(table.contains("kills (SIGKILL)"), "{table}");
        assert!(table.contains("(1 in start-up, 0 right after a signal, 2 at random)"), "{table}");
        assert!(table.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["signal_lost", "1"]), "{table}");
        assert!(table.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["violations", "1"]), "{table}");
        assert_eq!(table.lines().filter(|l| l.starts_with("  ")).count(), Violation::KINDS.len());
    }
}

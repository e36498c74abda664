//! Figures the running bot keeps for the demo, the benchmark, the logs and the tests.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many lateness samples are kept (the oldest are dropped first).
const LATENESS_SAMPLES_KEPT: usize = 100_000;

#[derive(Default)]
pub struct Stats {
    messages_handled: AtomicU64,
    /// Other work that allocates: history pages read by catch-ups, reports of effects carried out.
    work: AtomicU64,
    timeouts: AtomicU64,
    /// A ring buffer: dropping the oldest sample is O(1) under the lock every actor's timeout takes.
    lateness_ms: Mutex<VecDeque<i64>>,
    /// Looks the connection watch has finished (not activity: it looks every 100 ms, busy or not).
    connection_checks: AtomicU64,
}

/// A copy of the figures at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Messages and edits given to the engine (live and read back after a reconnect).
    pub messages_handled: u64,
    /// Turns ended by their deadline.
    pub timeouts: u64,
    /// How long after its deadline each timed-out turn was ended, in milliseconds.
    pub lateness_ms: Vec<i64>,
    /// How many times the connection watch has looked at the shards and told their channels what it saw: a test
    /// that checks the watch asked for nothing waits for it to have looked, instead of assuming it had time to.
    pub connection_checks: u64,
}

impl StatsSnapshot {
    pub fn max_lateness_ms(&self) -> i64 {
        self.lateness_ms.iter().copied().max().unwrap_or(0)
    }

    pub fn mean_lateness_ms(&self) -> i64 {
        self.lateness_ms.iter().sum::<i64>() / (self.lateness_ms.len().max(1) as i64)
    }
}

impl Stats {
    pub fn message(&self) {
        self.messages_handled.fetch_add(1, Ordering::Relaxed);
    }

    pub fn timeout(&self, lateness_ms: i64) {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
        let mut samples = self.lateness_ms.lock().expect("stats lock");
        if samples.len() == LATENESS_SAMPLES_KEPT {
            samples.pop_front();
        }
        samples.push_back(lateness_ms);
    }

    /// Counts work that is neither a message nor a timeout (a history page read, an effect reported).
    pub fn work(&self) {
        self.work.fetch_add(1, Ordering::Relaxed);
    }

    /// The connection watch has looked at the shards, and told their channels of any change it saw.
    pub fn connection_checked(&self) {
        self.connection_checks.fetch_add(1, Ordering::Relaxed);
    }

    /// A number that changes whenever a message is handled, a turn times out or other work is done: whether the bot
    /// was busy meanwhile.
    pub fn activity(&self) -> u64 {
        let handled = self.messages_handled.load(Ordering::Relaxed).wrapping_add(self.timeouts.load(Ordering::Relaxed));
        handled.wrapping_add(self.work.load(Ordering::Relaxed))
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            messages_handled: self.messages_handled.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
            lateness_ms: self.lateness_ms.lock().expect("stats lock").iter().copied().collect(),
            connection_checks: self.connection_checks.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_samples_are_bounded_and_kept_oldest_first() {
        let stats = Stats::default();
        for sample in 0..(LATENESS_SAMPLES_KEPT as i64 + 5) {
            stats.timeout(sample);
        }
        let snapshot = stats.snapshot();
        assert_eq!(snapshot.timeouts, LATENESS_SAMPLES_KEPT as u64 + 5, "every timeout is counted");
        assert_eq!(snapshot.lateness_ms.len(), LATENESS_SAMPLES_KEPT, "only the newest samples are kept");
        assert_eq!(snapshot.lateness_ms.first(), Some(&5), "the five oldest were dropped");
        assert!(snapshot.lateness_ms.windows(2).all(|w| w[0] + 1 == w[1]), "oldest first, none out of order");
    }
}

//! Figures the running bot keeps for the demo, the benchmark, the logs and the tests.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many lateness samples are kept (the oldest are dropped first).
const LATENESS_SAMPLES_KEPT: usize = 100_000;

#[derive(Default)]
pub struct Stats {
    messages_handled: AtomicU64,
    timeouts: AtomicU64,
    lateness_ms: Mutex<Vec<i64>>,
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
            samples.remove(0);
        }
        samples.push(lateness_ms);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            messages_handled: self.messages_handled.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
            lateness_ms: self.lateness_ms.lock().expect("stats lock").clone(),
        }
    }
}

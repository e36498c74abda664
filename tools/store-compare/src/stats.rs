//! Latency figures of a series of commits: count, rate, and the p50/p99/max of one commit.

use std::time::Duration;

#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    pub count: usize,
    /// The commits' time added up: the rate is what a writer doing nothing else could sustain.
    pub busy: Duration,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Summary {
    pub fn of(mut latencies: Vec<Duration>) -> Summary {
        latencies.sort_unstable();
        let count = latencies.len();
        if count == 0 {
            return Summary::default();
        }
        // Nearest rank: the smallest latency with at least q of the commits at or below it.
        let rank = |q: f64| latencies[((q * count as f64).ceil() as usize).clamp(1, count) - 1];
        Summary { count, busy: latencies.iter().sum(), p50: rank(0.50), p99: rank(0.99), max: latencies[count - 1] }
    }

    /// Commits per second of busy time.
    pub fn rate(&self) -> f64 {
        if self.busy.is_zero() { 0.0 } else { self.count as f64 / self.busy.as_secs_f64() }
    }
}

/// Milliseconds, for tables.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::Summary;
    use std::time::Duration;

    #[test]
    fn percentiles_by_nearest_rank() {
        let s = Summary::of((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!((s.count, s.p50, s.p99, s.max), (100, ms(50), ms(99), ms(100)));
        assert!((s.rate() - 100.0 / 5.05).abs() < 1e-9);
        let one = Summary::of(vec![ms(3)]);
        assert_eq!((one.p50, one.p99, one.max), (ms(3), ms(3), ms(3)));
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
}

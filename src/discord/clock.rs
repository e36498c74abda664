//! The Discord layer's clock: wall-clock time (what the engine and Discord's snowflakes speak) derived from tokio's
//! monotonic clock, so that deadlines become timers exactly and unit tests can run on tokio's paused clock.

use chrono::{DateTime, TimeDelta, Utc};
use tokio::time::Instant;

/// Maps tokio instants to UTC times from one reference point taken at start.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base_utc: DateTime<Utc>,
    base_instant: Instant,
}

impl Clock {
    /// The real clock, from now on.
    pub fn system() -> Self {
        Self::starting_at(Utc::now())
    }

    /// A clock that reads `at` now and advances with tokio's clock (paused in tests).
    pub fn starting_at(at: DateTime<Utc>) -> Self {
        Self { base_utc: at, base_instant: Instant::now() }
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.base_utc + TimeDelta::from_std(self.base_instant.elapsed()).unwrap_or(TimeDelta::MAX)
    }

    /// The tokio instant at which the clock will read `at` (now, if `at` has passed).
    pub fn instant_at(&self, at: DateTime<Utc>) -> Instant {
        let now = Instant::now();
        let ahead = (at - self.now()).to_std().unwrap_or_default();
        now + ahead
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn the_clock_follows_tokio_time_and_maps_deadlines_to_instants() {
        let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = Clock::starting_at(t0);
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(clock.now(), t0 + TimeDelta::milliseconds(1500));
        let due = clock.instant_at(t0 + TimeDelta::seconds(3));
        assert_eq!(due - Instant::now(), Duration::from_millis(1500));
        assert_eq!(clock.instant_at(t0), Instant::now(), "a past time is now");
    }
}

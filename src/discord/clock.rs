//! The Discord layer's clock: wall-clock time (what the engine and Discord's snowflakes speak), mapped to tokio's
//! monotonic instants for timers. In a running bot it is the system's clock, read afresh each time, so that a clock
//! set right after the bot started (a board without a real-time clock, NTP syncing late) is followed; unit tests run
//! one that advances with tokio's paused clock.

use chrono::{DateTime, TimeDelta, Utc};
use tokio::time::Instant;

/// The system's clock, or (tests) one that reads a given time at a given tokio instant and advances with tokio.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base: Option<(DateTime<Utc>, Instant)>,
}

impl Clock {
    /// The system's clock. Before, it was read once at start and advanced by the monotonic clock from there, so a
    /// clock set after the start (by a late NTP sync) was never followed: messages were judged by their arrival and
    /// saved deadlines were off by the difference after a restart (found by a review).
    pub fn system() -> Self {
        Self { base: None }
    }

    /// A clock that reads `at` now and advances with tokio's clock (paused in tests).
    pub fn starting_at(at: DateTime<Utc>) -> Self {
        Self { base: Some((at, Instant::now())) }
    }

    pub fn now(&self) -> DateTime<Utc> {
        match self.base {
            None => Utc::now(),
            Some((utc, instant)) => utc + TimeDelta::from_std(instant.elapsed()).unwrap_or(TimeDelta::MAX),
        }
    }

    /// The tokio instant at which the clock will read `at` (now, if `at` has passed), as the clock reads now.
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

    /// The system clock is read at each call, not once at start: a clock set after the bot started is followed.
    #[test]
    fn the_system_clock_is_read_afresh_each_time() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        runtime.block_on(async {
            let clock = Clock::system();
            // Paused, tokio's clock stands still while the thread sleeps: a clock derived from it would too.
            let first = clock.now();
            std::thread::sleep(Duration::from_millis(20));
            let second = clock.now();
            assert!(second - first >= TimeDelta::milliseconds(20), "{first} then {second}");
            assert!((Utc::now() - second).abs() < TimeDelta::seconds(1));
        });
    }
}

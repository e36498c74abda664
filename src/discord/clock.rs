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
    /// The wall clock read when there is no base: the system's (a test's own, to step it).
    wall: fn() -> DateTime<Utc>,
}

impl Clock {
    /// The system's clock. Before, it was read once at start and advanced by the monotonic clock from there, so a
    /// clock set after the start (by a late NTP sync) was never followed: messages were judged by their arrival and
    /// saved deadlines were off by the difference after a restart (found by a review).
    pub fn system() -> Self {
        Self { base: None, wall: Utc::now }
    }

    /// A clock that reads `at` now and advances with tokio's clock (paused in tests).
    pub fn starting_at(at: DateTime<Utc>) -> Self {
        Self { base: Some((at, Instant::now())), wall: Utc::now }
    }

    pub fn now(&self) -> DateTime<Utc> {
        match self.base {
            None => (self.wall)(),
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

    /// A wall clock a test sets, in milliseconds.
    static WALL_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

    fn test_wall() -> DateTime<Utc> {
        DateTime::from_timestamp_millis(WALL_MS.load(std::sync::atomic::Ordering::SeqCst)).unwrap()
    }

    /// Found by a review: the system clock was read once at start and advanced by a monotonic clock, so a clock set
    /// after the start (a late NTP sync) was never followed. It is read at each call: a step, either way, is followed
    /// at once, by the time read and by the instants deadlines become.
    #[tokio::test(start_paused = true)]
    async fn the_system_clock_follows_a_step_of_the_wall_clock_at_once() {
        let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        WALL_MS.store(t0.timestamp_millis(), std::sync::atomic::Ordering::SeqCst);
        let clock = Clock { wall: test_wall, ..Clock::system() };
        assert_eq!(clock.now(), t0);
        for step in [TimeDelta::hours(1), TimeDelta::hours(-2)] {
            let stepped = clock.now() + step;
            WALL_MS.store(stepped.timestamp_millis(), std::sync::atomic::Ordering::SeqCst);
            assert_eq!(clock.now(), stepped, "stepped by {step}");
            let due = clock.instant_at(stepped + TimeDelta::seconds(3));
            assert_eq!(due - Instant::now(), Duration::from_secs(3), "a deadline 3 s after the stepped time");
        }
        assert_eq!((Clock::system().now() - Utc::now()).num_seconds(), 0, "the system's clock by default");
    }
}

//! How many gateway messages wait in a channel's inbox: the router counts them in and leaves the rest in the
//! channel's history once [`INBOX_MESSAGES_MAX`] wait; the actor counts them out and reads the history again.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Gateway messages waiting in one channel's inbox at the most: as many as an actor holds during a catch-up.
pub const INBOX_MESSAGES_MAX: usize = 1_000;

/// Shared by a channel's actor and the router's handle to it.
#[derive(Debug, Default)]
pub struct Backlog {
    waiting: AtomicUsize,
    /// Messages were left in the history since the actor last started to read it again.
    leaving: AtomicBool,
}

impl Backlog {
    /// Counts a message in, unless [`INBOX_MESSAGES_MAX`] wait already.
    pub fn admit(&self) -> bool {
        self.waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < INBOX_MESSAGES_MAX).then_some(n + 1))
            .is_ok()
    }

    /// Counts in a message that is in the inbox already (handed over from a retired actor).
    pub fn admit_anyway(&self) {
        self.waiting.fetch_add(1, Ordering::AcqRel);
    }

    /// A message left the inbox (the actor took it, or the send failed).
    pub fn taken(&self) {
        self.waiting.fetch_sub(1, Ordering::AcqRel);
    }

    /// A message is left in the history: true for the first since the actor last started to read it again, so it
    /// is told once.
    pub fn leave_in_history(&self) -> bool {
        !self.leaving.swap(true, Ordering::AcqRel)
    }

    /// The actor starts to read the history again: a message left after this asks for another reading.
    pub fn reading_again(&self) {
        self.leaving.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_bound_and_asks_once_per_reading_for_what_it_left() {
        let backlog = Backlog::default();
        assert!((0..INBOX_MESSAGES_MAX).all(|_| backlog.admit()));
        assert!(!backlog.admit(), "one past the bound is left in the history");
        assert!(backlog.leave_in_history(), "the first one left asks for a reading");
        assert!(!backlog.leave_in_history(), "the next ones ride on it");
        backlog.taken();
        assert!(backlog.admit(), "room again once the actor took one");
        backlog.reading_again();
        assert!(backlog.leave_in_history(), "left after the reading began: asks again");
    }
}

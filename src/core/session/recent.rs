//! Exactly once per message id (spec 5, step 6): the ids handled lately, so a message the gateway delivers twice is
//! handled once, while one overtaken by newer messages is still handled when it arrives.

use crate::core::ids::MessageId;
use std::collections::BTreeSet;

/// The newest message ids handled, at most [`RecentIds::CAPACITY`] of them, kept in memory only.
///
/// It keeps the newest ids rather than the last arrived, so what it has forgotten is exactly what lies below its
/// oldest id: once full, an id below that is too old to tell and counts as handled. Repeats and late deliveries come
/// within moments of the original, far inside 256 messages of one channel.
#[derive(Clone, Debug, Default)]
pub struct RecentIds {
    ids: BTreeSet<MessageId>,
    /// Nothing at or below this is new: the newest id handled before this process loaded the session, whose
    /// predecessors it never saw. Taken from the session on first use, as the set starts empty after a load.
    floor: Option<Option<MessageId>>,
}

impl RecentIds {
    pub const CAPACITY: usize = 256;

    /// Records `id` as handled; false when it was handled before (or is too old to tell). `newest_handled` is the
    /// session's `last_message_id`, read only the first time, when it is all a freshly loaded session knows.
    pub(super) fn claim(&mut self, id: MessageId, newest_handled: Option<MessageId>) -> bool {
        let floor = *self.floor.get_or_insert(newest_handled);
        if floor.is_some_and(|floor| id <= floor) || self.ids.contains(&id) {
            return false;
        }
        let full = self.ids.len() >= Self::CAPACITY;
        if full && self.ids.first().is_some_and(|oldest| id < *oldest) {
            return false;
        }
        self.ids.insert(id);
        if self.ids.len() > Self::CAPACITY {
            self.ids.pop_first();
        }
        true
    }

    /// Whether `id` counts as handled, by the same rule as [`RecentIds::claim`], without recording it.
    pub(super) fn contains(&self, id: MessageId, newest_handled: Option<MessageId>) -> bool {
        let floor = self.floor.unwrap_or(newest_handled);
        floor.is_some_and(|floor| id <= floor)
            || self.ids.contains(&id)
            || (self.ids.len() >= Self::CAPACITY && self.ids.first().is_some_and(|oldest| id < *oldest))
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// Any two are equal: this is a cache of what this process handled, not part of the session, and a session saved
/// and loaded again (which starts it empty) is the same session.
impl PartialEq for RecentIds {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RecentIds {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_claimed_once_and_an_older_unseen_id_still_counts_as_new() {
        let mut recent = RecentIds::default();
        assert!(recent.claim(MessageId(10), None));
        assert!(!recent.claim(MessageId(10), Some(MessageId(10))), "a repeat");
        assert!(recent.claim(MessageId(9), Some(MessageId(10))), "overtaken, not a repeat");
        assert!(!recent.claim(MessageId(9), Some(MessageId(10))));
        assert!(
            recent.contains(MessageId(9), Some(MessageId(10))) && !recent.contains(MessageId(8), Some(MessageId(10)))
        );
    }

    #[test]
    fn after_a_load_nothing_at_or_below_the_saved_newest_id_is_new() {
        let mut recent = RecentIds::default();
        assert!(!recent.claim(MessageId(100), Some(MessageId(100))));
        assert!(!recent.claim(MessageId(50), Some(MessageId(100))));
        assert!(recent.claim(MessageId(101), Some(MessageId(100))));
        // The floor stays once ids are remembered: 99 may have been handled before the restart.
        assert!(!recent.claim(MessageId(99), Some(MessageId(101))));
    }

    #[test]
    fn a_full_set_forgets_its_oldest_and_treats_anything_older_as_handled() {
        let mut recent = RecentIds::default();
        for id in 1..=1000 {
            assert!(recent.claim(MessageId(id), Some(MessageId(id - 1)).filter(|_| id > 1)));
        }
        assert_eq!(recent.len(), RecentIds::CAPACITY);
        let oldest = 1000 - RecentIds::CAPACITY as u64 + 1;
        for id in [1, 500, oldest, 1000] {
            assert!(!recent.claim(MessageId(id), Some(MessageId(1000))), "{id} was handled");
        }
        assert!(recent.claim(MessageId(1001), Some(MessageId(1000))));
        assert!(!recent.claim(MessageId(oldest), Some(MessageId(1001))), "forgotten now, and older than all it keeps");
        assert_eq!(recent.len(), RecentIds::CAPACITY);
    }

    #[test]
    fn a_full_set_still_takes_an_unseen_id_newer_than_its_oldest() {
        let mut recent = RecentIds::default();
        for id in (2..=600).step_by(2) {
            recent.claim(MessageId(id), None);
        }
        assert!(recent.claim(MessageId(599), None), "599 falls among the ids kept and was never handled");
        assert!(!recent.claim(MessageId(599), None));
    }
}

//! Exactly once per message id (spec 5, step 6): the ids handled lately, so a message the gateway delivers twice is
//! handled once, while one overtaken by newer messages is still handled when it arrives, even after a crash: the
//! ids handled within [`REORDER_WINDOW`] of the newest are saved with the session, and a catch-up reads again from
//! the start of that window, so a message overtaken just before a crash is not skipped for good.

use crate::core::ids::MessageId;
use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

/// How far behind the newest handled message another may still be written and not yet handled: overtaken by newer
/// ones (serenity hands each event to its own task), delayed around a reconnect, or lost to a crash before its turn
/// came. Far longer than such reorderings last; a catch-up reads this much again, which costs one page at most.
pub const REORDER_WINDOW: TimeDelta = TimeDelta::seconds(10);

/// The message ids handled lately, at most [`RecentIds::CAPACITY`] of them.
///
/// It keeps the newest ids rather than the last arrived, so what it has forgotten is exactly what lies below its
/// oldest id: once full, an id below that is too old to tell and counts as handled. Repeats and late deliveries come
/// within moments of the original, far inside 256 messages of one channel.
///
/// The ids are a sorted array, not a tree: ids mostly arrive in order (a push at the end), and every durable save
/// copies the session for the store's writer, which for a tree of 256 ids cost some two dozen allocations and as
/// many frees (5% of the bot's CPU in a profile of the bench's turns phase); the array is one block, copied whole.
/// Dropping its oldest id shifts 2 KiB, some 40 ns; a `VecDeque` would not shift, but is 8 bytes more in every
/// session, which fills the tokio task cell each channel's actor lives in to its last byte.
#[derive(Clone, Debug, Default)]
pub struct RecentIds {
    /// Ascending, no repeats.
    ids: Vec<MessageId>,
    /// Nothing at or below this is new. A session saved before the window was saved (no `recentlyHandled` in its
    /// file) takes it from `last_message_id` on first use: every predecessor of that is taken as handled.
    floor: Option<Option<MessageId>>,
}

/// What a session file keeps of [`RecentIds`]: everything at or below `through` was handled, and above it exactly
/// `ids`.
#[derive(Serialize, Deserialize)]
struct Saved {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    through: Option<MessageId>,
    #[serde(default)]
    ids: Vec<MessageId>,
}

impl RecentIds {
    pub const CAPACITY: usize = 256;

    /// Records `id` as handled; false when it was handled before (or is too old to tell). `newest_handled` is the
    /// session's `last_message_id`, read only the first time, when it is all a session from an older file knows.
    pub(super) fn claim(&mut self, id: MessageId, newest_handled: Option<MessageId>) -> bool {
        let floor = *self.floor.get_or_insert(newest_handled);
        if floor.is_some_and(|floor| id <= floor) {
            return false;
        }
        let Err(mut at) = self.ids.binary_search(&id) else { return false };
        if self.ids.len() >= Self::CAPACITY {
            if at == 0 {
                return false; // Older than everything kept, so too old to tell.
            }
            // The oldest goes first, so the array never outgrows its block.
            self.ids.remove(0);
            at -= 1;
        }
        self.ids.insert(at, id);
        true
    }

    /// Whether `id` counts as handled, by the same rule as [`RecentIds::claim`], without recording it.
    pub(super) fn contains(&self, id: MessageId, newest_handled: Option<MessageId>) -> bool {
        let floor = self.floor.unwrap_or(newest_handled);
        floor.is_some_and(|floor| id <= floor)
            || self.ids.binary_search(&id).is_ok()
            || (self.ids.len() >= Self::CAPACITY && self.ids.first().is_some_and(|oldest| id < *oldest))
    }

    /// The newest id at or below which every message is taken as handled (the window's start, or older knowledge):
    /// where a catch-up reads from, and what a saved session keeps as `through`.
    pub fn settled(&self, newest_handled: Option<MessageId>) -> Option<MessageId> {
        let floor = self.floor.unwrap_or(newest_handled);
        let newest = self.ids.last().copied().max(floor).max(newest_handled)?;
        let window_start = MessageId(MessageId::first_at(newest.created_at() - REORDER_WINDOW).0.saturating_sub(1));
        let forgotten = (self.ids.len() >= Self::CAPACITY)
            .then(|| self.ids.first().map(|oldest| MessageId(oldest.0.saturating_sub(1))))
            .flatten();
        floor.max(Some(window_start)).max(forgotten)
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Nothing known yet (a new session, or one from an older file before its first message): nothing to save.
    pub fn is_unknown(&self) -> bool {
        self.ids.is_empty() && self.floor.is_none()
    }
}

impl Serialize for RecentIds {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let through = self.settled(None);
        let ids = self.ids.iter().copied().filter(|id| through.is_none_or(|t| *id > t)).collect();
        Saved { through, ids }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RecentIds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let saved = Saved::deserialize(deserializer)?;
        let mut ids: Vec<_> = saved.ids.into_iter().filter(|id| saved.through.is_none_or(|t| *id > t)).collect();
        // Saved in order, but a file edited by hand need not be.
        ids.sort_unstable();
        ids.dedup();
        ids.drain(..ids.len().saturating_sub(Self::CAPACITY)); // The newest are kept.
        Ok(Self { ids, floor: Some(saved.through) })
    }
}

/// Any two are equal: this is a cache of what was handled, not part of the session's meaning, and a session saved
/// and loaded again keeps only the window of it.
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

    /// Ids `ms` milliseconds apart on Discord's clock, starting at a fixed instant.
    fn at_ms(ms: i64) -> MessageId {
        MessageId::first_at(
            "2026-05-01T12:00:00Z".parse::<chrono::DateTime<chrono::Utc>>().unwrap() + TimeDelta::milliseconds(ms),
        )
    }

    #[test]
    fn a_saved_and_loaded_set_still_takes_a_message_overtaken_within_the_window() {
        let mut recent = RecentIds::default();
        let (older, overtaken, newest) = (at_ms(0), at_ms(20_000), at_ms(20_050));
        assert!(recent.claim(older, None));
        assert!(recent.claim(newest, None), "overtakes the message written 50 ms before it");
        let mut loaded: RecentIds = serde_json::from_str(&serde_json::to_string(&recent).unwrap()).unwrap();
        assert_eq!(loaded.settled(Some(newest)), Some(MessageId(at_ms(10_050).0 - 1)), "the window's start");
        assert!(!loaded.contains(overtaken, Some(newest)), "never handled, and inside the window");
        assert!(loaded.contains(older, Some(newest)), "older than the window: handled");
        assert!(!loaded.claim(newest, Some(newest)), "handled before the save");
        assert!(loaded.claim(overtaken, Some(newest)));
    }

    #[test]
    fn a_session_from_an_older_file_takes_everything_up_to_its_newest_id_as_handled() {
        let mut loaded = RecentIds::default();
        assert!(loaded.is_unknown());
        assert_eq!(loaded.settled(Some(at_ms(5_000))), Some(at_ms(5_000)));
        assert!(!loaded.claim(at_ms(4_999), Some(at_ms(5_000))));
        assert!(loaded.claim(at_ms(5_001), Some(at_ms(5_000))));
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

    #[test]
    fn a_file_edited_by_hand_loads_its_ids_in_order_without_repeats_and_at_most_the_capacity() {
        let mut ids: Vec<String> = (1..=300u64).rev().map(|id| id.to_string()).collect();
        ids.push("150".into());
        let json = serde_json::json!({ "through": "10", "ids": ids });
        let mut loaded: RecentIds = serde_json::from_value(json).unwrap();
        assert_eq!(loaded.len(), RecentIds::CAPACITY, "the newest kept");
        let oldest = 300 - RecentIds::CAPACITY as u64 + 1;
        assert_eq!(loaded.ids.first(), Some(&MessageId(oldest)));
        assert!(loaded.ids.iter().zip(loaded.ids.iter().skip(1)).all(|(a, b)| a < b), "ascending, no repeats");
        assert!(!loaded.claim(MessageId(150), None), "handled");
        assert!(!loaded.claim(MessageId(oldest - 1), None), "below what it keeps: too old to tell");
        assert!(loaded.claim(MessageId(301), None));
    }

    /// The rule as it was first written, over a tree: the array must answer every claim as this does.
    #[derive(Default)]
    struct TreeModel {
        ids: std::collections::BTreeSet<MessageId>,
    }

    impl TreeModel {
        fn claim(&mut self, id: MessageId) -> bool {
            if self.ids.contains(&id)
                || (self.ids.len() >= RecentIds::CAPACITY && self.ids.first().is_some_and(|oldest| id < *oldest))
            {
                return false;
            }
            self.ids.insert(id);
            if self.ids.len() > RecentIds::CAPACITY {
                self.ids.pop_first();
            }
            true
        }

        fn contains(&self, id: MessageId) -> bool {
            self.ids.contains(&id)
                || (self.ids.len() >= RecentIds::CAPACITY && self.ids.first().is_some_and(|oldest| id < *oldest))
        }

        /// `settled` with nothing known beyond the ids (no floor).
        fn settled(&self) -> Option<MessageId> {
            let newest = self.ids.last().copied()?;
            let window_start = MessageId(MessageId::first_at(newest.created_at() - REORDER_WINDOW).0.saturating_sub(1));
            let forgotten = (self.ids.len() >= RecentIds::CAPACITY)
                .then(|| self.ids.first().map(|oldest| MessageId(oldest.0.saturating_sub(1))))
                .flatten();
            Some(window_start).max(forgotten)
        }
    }

    proptest::proptest! {
        #[test]
        fn the_array_claims_and_keeps_exactly_what_a_tree_would(
            steps in proptest::collection::vec((0u64..60, 0u64..60, 0u64..8), 1..2_000)
        ) {
            let (mut recent, mut tree) = (RecentIds::default(), TreeModel::default());
            // Ids counted in milliseconds on Discord's clock from a recent instant.
            let start = at_ms(0).0;
            let id_at = |ms: u64| MessageId(start + (ms << 22));
            let mut newest = 10_000u64;
            for (a, b, ahead) in steps {
                // Newer ids, repeats, ids overtaken, and now and then one as old as the oldest kept.
                newest += ahead;
                let id = id_at(newest - a * b);
                let probe = id_at(newest - b * b);
                proptest::prop_assert_eq!(recent.contains(probe, None), tree.contains(probe), "probing {:?}", probe);
                proptest::prop_assert_eq!(recent.claim(id, None), tree.claim(id), "claiming {:?}", id);
                proptest::prop_assert_eq!(recent.settled(None), tree.settled());
            }
            proptest::prop_assert!(recent.ids.iter().eq(tree.ids.iter()));
            // Saved and loaded, it answers as before for everything above what it saved as settled.
            let loaded: RecentIds = serde_json::from_str(&serde_json::to_string(&recent).unwrap()).unwrap();
            let through = recent.settled(None);
            for probe in (newest - 4_000..=newest + 1).map(id_at) {
                let expected = if through.is_some_and(|t| probe <= t) { true } else { tree.contains(probe) };
                proptest::prop_assert_eq!(loaded.contains(probe, None), expected, "after a load, {:?}", probe);
            }
        }
    }
}

//! Which of this process's gateway shards are connected now. A channel whose server is on a shard that is not (still
//! starting, or lost) cannot see its messages: its deadline waits for that shard's catch-up, however the channel came
//! to be asked to read what it missed (a lease taken over, its server learned late).
//!
//! A shard is marked up or down and its channels are told in one step, under one lock: a channel that finds its shard
//! down is then sure to hear when it is back, and the watch does not ask again for a read a READY already asked for,
//! nor for one a RESUMED made needless.
//! (An actor asking meanwhile waits for the broadcast: a few ms with 10,000 channels, at a READY or a loss only.)

use crate::core::ids::GuildId;
use crate::core::shards::{Shard, ShardRange};
use std::collections::HashSet;
use std::sync::Mutex;

#[derive(Debug)]
pub struct ShardsUp {
    range: ShardRange,
    down: Mutex<HashSet<u32>>,
}

impl Default for ShardsUp {
    /// One shard, up: what the actors' unit tests run with.
    fn default() -> Self {
        Self { range: ShardRange::whole(1), down: Mutex::new(HashSet::new()) }
    }
}

impl ShardsUp {
    /// The shards a process runs, none connected yet.
    pub fn starting(range: ShardRange) -> Self {
        Self { range, down: Mutex::new((range.first..=range.last).collect()) }
    }

    /// The shards this process runs.
    pub fn ids(&self) -> std::ops::RangeInclusive<u32> {
        self.range.first..=self.range.last
    }

    /// A READY: marks `shard` up and tells its channels (`tell`, a broadcast), with no other change of the shards in
    /// between. A loss told before it is thus heard before this; one told after it is the watch's to answer.
    pub fn came_up(&self, shard: u32, tell: impl FnOnce()) {
        let mut down = self.down.lock().expect("shards lock");
        down.remove(&shard);
        tell();
    }

    /// A shard found lost is connected again, as the watch sees it or as its RESUMED says: marks it up and tells its
    /// channels, unless a READY or the other of the two already did since the loss was told (its channels need not
    /// be told twice).
    pub fn back(&self, shard: u32, tell: impl FnOnce()) {
        let mut down = self.down.lock().expect("shards lock");
        if down.remove(&shard) {
            tell();
        }
    }

    /// Marks `shard` down and tells its channels, unless it already was (not connected yet, or already lost).
    /// Answers whether it told them.
    pub fn went_down(&self, shard: u32, tell: impl FnOnce()) -> bool {
        let mut down = self.down.lock().expect("shards lock");
        let was_up = down.insert(shard);
        if was_up {
            tell();
        }
        was_up
    }

    fn is_up(&self, shard: u32) -> bool {
        !self.down.lock().expect("shards lock").contains(&shard)
    }

    /// Whether the shard carrying `guild` is connected.
    pub fn carries_up(&self, guild: GuildId) -> bool {
        self.is_up(self.range.shard_of(guild))
    }

    /// `shard` as the actors' inputs name it.
    pub fn shard(&self, id: u32) -> Shard {
        Shard { id, total: self.range.total }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_start_down_and_a_server_is_up_with_its_shard() {
        let shards = ShardsUp::starting(ShardRange::parse("0-1", 2).unwrap());
        let on = |shard: u64| GuildId((shard + 2 * 1_000) << 22);
        assert!(!shards.carries_up(on(0)) && !shards.carries_up(on(1)));
        shards.came_up(1, || {});
        assert!(!shards.carries_up(on(0)) && shards.carries_up(on(1)));
        assert!(ShardsUp::default().carries_up(on(1)), "one shard, up");
    }

    #[test]
    fn a_loss_is_told_once_and_a_return_once_whether_a_ready_or_the_watch_sees_it_first() {
        let shards = ShardsUp::starting(ShardRange::whole(1));
        let told = std::cell::RefCell::new(Vec::new());
        let told = &told;
        let tell = |what: &'static str| move || told.borrow_mut().push(what);
        assert!(!shards.went_down(0, tell("down")), "starting: not lost");
        shards.came_up(0, tell("ready"));
        assert!(shards.went_down(0, tell("down")));
        assert!(!shards.went_down(0, tell("down")), "already told");
        shards.back(0, tell("back"));
        shards.back(0, tell("back"));
        // A new session: its READY tells the channels; the watch, seeing it connected after, does not again.
        assert!(shards.went_down(0, tell("down")));
        shards.came_up(0, tell("ready"));
        shards.back(0, tell("back"));
        assert_eq!(*told.borrow(), ["ready", "down", "back", "down", "ready"]);
    }
}

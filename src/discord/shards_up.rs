//! Which of this process's gateway shards are connected now. A channel whose server is on a shard that is not (still
//! starting, or lost) cannot see its messages: its deadline waits for that shard's catch-up, however the channel came
//! to be asked to read what it missed (a lease taken over, its server learned late).
//!
//! A shard is marked up before its READY (or its return) is broadcast, and down before its loss is: a channel that
//! finds its shard down is then sure to be told when it is back.

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

    pub fn mark_up(&self, shard: u32) {
        self.down.lock().expect("shards lock").remove(&shard);
    }

    /// Marks `shard` down; false if it already was (not connected yet, or already lost).
    pub fn mark_down(&self, shard: u32) -> bool {
        self.down.lock().expect("shards lock").insert(shard)
    }

    pub fn is_up(&self, shard: u32) -> bool {
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
        shards.mark_up(1);
        assert!(!shards.carries_up(on(0)) && shards.carries_up(on(1)));
        assert!(shards.mark_down(1), "it was up");
        assert!(!shards.mark_down(1), "already down");
        assert!(ShardsUp::default().carries_up(on(1)), "one shard, up");
    }
}

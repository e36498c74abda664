//! Which of this process's gateway shards are connected now. A channel whose server is on a shard that is not (still
//! starting, or lost) cannot see its messages: its deadline waits for that shard's catch-up or resume, however the
//! channel came to be asked to read what it missed (a lease taken over, its server learned late).
//!
//! A shard is marked up or down and its channels are told in one step, under one lock: a channel that finds its shard
//! down is then sure to hear when it is back. What marked a shard down decides what brings it back: a shard lost as
//! the connection watch saw it is back when the watch sees it connected again (unless a READY came first), but one
//! that serenity is reconnecting waits for RESUMED or READY, since serenity's shard manager goes on saying
//! "connected" during a resume. So the watch never asks for a read that a READY already asked for, nor for one that
//! a RESUMED makes needless. (An actor asking meanwhile waits for the broadcast: a few ms with 10,000 channels.)

use crate::core::ids::GuildId;
use crate::core::shards::{Shard, ShardRange};
use std::collections::HashMap;
use std::sync::Mutex;

/// Why a shard is down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Down {
    /// Not connected yet: its first READY brings it up.
    Starting,
    /// The connection watch saw it lost (its runner gone).
    Lost,
    /// serenity is resuming it, or identifying again (`reconnecting.rs`).
    Reconnecting,
}

#[derive(Debug)]
pub struct ShardsUp {
    range: ShardRange,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    down: HashMap<u32, Down>,
    /// Per shard, how many times it was marked up or down: the watch judges a snapshot of serenity's shards only if
    /// nothing marked them since it was taken.
    changes: HashMap<u32, u64>,
}

impl State {
    fn set(&mut self, shard: u32, down: Option<Down>) {
        match down {
            Some(why) => self.down.insert(shard, why),
            None => self.down.remove(&shard),
        };
        *self.changes.entry(shard).or_default() += 1;
    }
}

impl Default for ShardsUp {
    /// One shard, up: what the actors' unit tests run with.
    fn default() -> Self {
        Self { range: ShardRange::whole(1), state: Mutex::default() }
    }
}

impl ShardsUp {
    /// The shards a process runs, none connected yet.
    pub fn starting(range: ShardRange) -> Self {
        let down = (range.first..=range.last).map(|id| (id, Down::Starting)).collect();
        Self { range, state: Mutex::new(State { down, changes: HashMap::new() }) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("shards lock")
    }

    /// How many times `shard` was marked up or down so far (see [`ShardsUp::went_down`]).
    pub fn changes(&self, shard: u32) -> u64 {
        self.state().changes.get(&shard).copied().unwrap_or_default()
    }

    /// The shards this process runs.
    pub fn ids(&self) -> std::ops::RangeInclusive<u32> {
        self.range.first..=self.range.last
    }

    /// A READY: marks `shard` up and tells its channels (`tell`, a broadcast), with no other change of the shards in
    /// between. A loss told before it is thus heard before this; one told after it is the watch's to answer.
    pub fn came_up(&self, shard: u32, tell: impl FnOnce()) {
        let mut state = self.state();
        state.set(shard, None);
        tell();
    }

    /// RESUMED: marks `shard` up and tells its channels, if it was down (it is not if nothing saw it lost).
    pub fn resumed(&self, shard: u32, tell: impl FnOnce()) {
        let mut state = self.state();
        if state.down.contains_key(&shard) {
            state.set(shard, None);
            tell();
        }
    }

    /// The watch sees `shard` connected: marks it up and tells its channels if the watch itself had found it lost,
    /// and nothing brought it back since (a READY, a RESUMED), nor began to reconnect it.
    pub fn seen_connected(&self, shard: u32, tell: impl FnOnce()) {
        let mut state = self.state();
        if state.down.get(&shard) == Some(&Down::Lost) {
            state.set(shard, None);
            tell();
        }
    }

    /// The watch saw `shard` not connected, in a snapshot taken when its [`ShardsUp::changes`] were `seen`: marks it
    /// down and tells its channels, unless it already was (not connected yet, already lost, or reconnecting), or was
    /// marked since (a RESUMED or READY handled meanwhile: the snapshot is stale). Answers whether it told them.
    pub fn went_down(&self, shard: u32, seen: u64, tell: impl FnOnce()) -> bool {
        let mut state = self.state();
        if state.changes.get(&shard).copied().unwrap_or_default() != seen || state.down.contains_key(&shard) {
            return false;
        }
        state.set(shard, Some(Down::Lost));
        tell();
        true
    }

    /// serenity began to reconnect `shard`: marks it down until RESUMED or READY, and tells its channels unless it
    /// was down already. Answers whether it told them.
    pub fn reconnecting(&self, shard: u32, tell: impl FnOnce()) -> bool {
        let mut state = self.state();
        match state.down.get(&shard).copied() {
            None => {
                state.set(shard, Some(Down::Reconnecting));
                tell();
                true
            }
            // Lost as the watch saw it, then reconnecting: only RESUMED or READY brings it back now.
            Some(Down::Lost) => {
                state.set(shard, Some(Down::Reconnecting));
                false
            }
            Some(_) => false,
        }
    }

    fn is_up(&self, shard: u32) -> bool {
        !self.state().down.contains_key(&shard)
    }

    /// Whether every shard of this process is connected.
    pub fn all_up(&self) -> bool {
        self.state().down.is_empty()
    }

    /// Whether this process runs the shard carrying `guild`.
    pub fn runs(&self, guild: GuildId) -> bool {
        self.range.owns(guild)
    }

    /// Whether this process runs every shard (a single process does).
    pub fn runs_all(&self) -> bool {
        self.range == ShardRange::whole(self.range.total)
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
        assert!(!shards.went_down(0, shards.changes(0), tell("down")), "starting: not lost");
        shards.seen_connected(0, tell("back"));
        shards.came_up(0, tell("ready"));
        assert!(shards.went_down(0, shards.changes(0), tell("down")));
        assert!(!shards.went_down(0, shards.changes(0), tell("down")), "already told");
        shards.seen_connected(0, tell("back"));
        shards.seen_connected(0, tell("back"));
        // A new session: its READY tells the channels; the watch, seeing it connected after, does not again.
        assert!(shards.went_down(0, shards.changes(0), tell("down")));
        shards.came_up(0, tell("ready"));
        shards.seen_connected(0, tell("back"));
        assert_eq!(*told.borrow(), ["ready", "down", "back", "down", "ready"]);
    }

    #[test]
    fn a_shard_serenity_reconnects_comes_back_at_resumed_or_ready_whatever_the_watch_sees() {
        let shards = ShardsUp::starting(ShardRange::whole(1));
        let told = std::cell::RefCell::new(Vec::new());
        let told = &told;
        let tell = |what: &'static str| move || told.borrow_mut().push(what);
        shards.came_up(0, tell("ready"));
        assert!(shards.reconnecting(0, tell("down")));
        assert!(!shards.went_down(0, shards.changes(0), tell("down")), "already told");
        shards.seen_connected(0, tell("back")); // serenity's manager still says "connected" during a resume
        assert!(!shards.all_up());
        shards.resumed(0, tell("resumed"));
        assert!(shards.all_up());
        shards.resumed(0, tell("resumed")); // nothing saw it lost
        // Lost as the watch saw it, then a resume begins: the watch's next look does not bring it back either.
        assert!(shards.went_down(0, shards.changes(0), tell("down")));
        assert!(!shards.reconnecting(0, tell("down")));
        shards.seen_connected(0, tell("back"));
        shards.came_up(0, tell("ready"));
        assert_eq!(*told.borrow(), ["ready", "down", "resumed", "down", "ready"]);
    }

    #[test]
    fn the_watch_does_not_mark_a_shard_lost_from_a_snapshot_older_than_its_resumed() {
        let shards = ShardsUp::starting(ShardRange::whole(1));
        shards.came_up(0, || {});
        shards.reconnecting(0, || {});
        let seen = shards.changes(0); // the watch's snapshot: serenity's manager shows the shard resuming
        shards.resumed(0, || {});
        assert!(!shards.went_down(0, seen, || panic!("told from a stale snapshot")));
        assert!(shards.all_up());
        assert!(shards.went_down(0, shards.changes(0), || {}), "a fresh snapshot is judged");
    }
}

//! The channels whose lease another live process of the bot holds, as this process found when it tried to act for
//! them (a store shared by several processes). Both processes read a `!turn` message in such a channel (a second
//! process on the same shard, in a rolling deploy): the holder runs and answers it, and this one must stay silent,
//! not answer "try again" for a command that ran. A holder that died meanwhile runs nothing, but its lease runs out
//! and the process that takes the channel over reads the message back and runs the command then (`catch_up`), so
//! "try again" would be wrong there too: it would run twice.

use crate::core::ids::ChannelId;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Default)]
pub struct ActingElsewhere {
    /// Until when each channel's lease runs for the other process, unless it renews it.
    until: Mutex<HashMap<ChannelId, Instant>>,
}

impl ActingElsewhere {
    /// This process found the channel's lease held by another process for `expires_in` more.
    pub fn found(&self, channel: ChannelId, expires_in: Duration) {
        let mut until = self.until.lock().expect("acting elsewhere lock");
        let now = Instant::now();
        until.retain(|_, at| *at > now);
        until.insert(channel, now + expires_in);
    }

    /// This process holds the channel now.
    pub fn held_here(&self, channel: ChannelId) {
        self.until.lock().expect("acting elsewhere lock").remove(&channel);
    }

    /// Whether another process held the channel's lease when this one last tried, and its lease still runs.
    pub fn acts_for(&self, channel: ChannelId) -> bool {
        self.until.lock().expect("acting elsewhere lock").get(&channel).is_some_and(|at| *at > Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_channel_held_elsewhere_is_so_until_its_lease_runs_out_or_this_process_holds_it() {
        let elsewhere = ActingElsewhere::default();
        let (a, b) = (ChannelId(1), ChannelId(2));
        assert!(!elsewhere.acts_for(a));
        elsewhere.found(a, Duration::from_secs(10));
        elsewhere.found(b, Duration::from_secs(10));
        assert!(elsewhere.acts_for(a) && elsewhere.acts_for(b));
        elsewhere.held_here(b);
        assert!(!elsewhere.acts_for(b));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(!elsewhere.acts_for(a), "its lease ran out unless renewed: the next try tells");
    }
}

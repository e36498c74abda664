//! A feed of created messages for in-process observers (benchmarks, agents at scale): each new message once, with
//! the instant the server created it, on a broadcast channel. Unlike [`LocalDiscord::wait_for`], which wakes every
//! waiter on every change and has it scan the world, a subscriber here costs one queue entry per message.
//!
//! The channel is made on the first [`LocalDiscord::subscribe`]; until then, publishing costs nothing.

use crate::LocalDiscord;
use crate::world::{Author, Message};
use std::time::Instant;
use tokio::sync::broadcast;

/// Messages a subscriber may fall behind by before it misses some (it is then told how many it missed).
pub const FEED_CAPACITY: usize = 1 << 16;

/// A message as it was created.
#[derive(Clone, Debug)]
pub struct FeedEvent {
    /// When the server created it (under the world's lock, before dispatching it).
    pub at: Instant,
    pub channel: u64,
    pub id: u64,
    pub author: Author,
    pub content: String,
    /// Everyone it pinged, as `allowed_mentions` decided.
    pub pinged: Vec<u64>,
}

/// The sending side, kept in the world.
#[derive(Default)]
pub struct Feed {
    sender: Option<broadcast::Sender<FeedEvent>>,
}

impl Feed {
    /// Publishes a message that was just created, if anyone listens.
    pub(crate) fn publish(&self, message: &Message) {
        let Some(sender) = &self.sender else { return };
        if sender.receiver_count() == 0 {
            return;
        }
        let _ = sender.send(FeedEvent {
            at: Instant::now(),
            channel: message.channel_id,
            id: message.id,
            author: message.author.clone(),
            content: message.content.clone(),
            pinged: message.pinged.clone(),
        });
    }
}

impl LocalDiscord {
    /// Every message created from now on, in creation order.
    pub fn subscribe(&self) -> broadcast::Receiver<FeedEvent> {
        let mut world = self.world();
        world.feed.sender.get_or_insert_with(|| broadcast::channel(FEED_CAPACITY).0).subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_subscriber_sees_each_new_message_once_with_its_author_and_pings() {
        let server = LocalDiscord::start().await.unwrap();
        let owner = server.create_user("owner");
        let guild = server.create_guild("g", owner);
        let channel = server.create_channel(guild, "c");
        let before = server.post(channel, owner, "before anyone listens");
        let mut feed = server.subscribe();
        let id = server.post(channel, owner, &format!("hello <@{owner}>"));
        let event = feed.recv().await.unwrap();
        assert_ne!(event.id, before);
        assert_eq!((event.id, event.channel, event.author), (id, channel, Author::User(owner)));
        assert_eq!(event.content, format!("hello <@{owner}>"));
        assert_eq!(event.pinged, vec![owner]);
        assert!(feed.try_recv().is_err(), "one event per message");
    }
}

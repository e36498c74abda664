//! The saves to commit: a session JSON shaped like turn-manager's `state/channels/<id>.json` (about 4 KB, its last
//! history events inside) and two history events of about 200 bytes, for channels taken in turn.

use serde_json::{Value, json};
use std::collections::VecDeque;

/// Channel ids start here, so they look like Discord snowflakes.
const FIRST_CHANNEL: u64 = 1_290_000_000_000_000_000;
/// Message ids grow from here.
const FIRST_MESSAGE: u64 = 1_300_000_000_000_000_000;
/// Events a session file keeps (the bot's default history limit is 20; 13 gives a session of about 4.2 KB).
const HISTORY_KEPT: usize = 13;
const ROSTER: [&str; 3] = ["developer-persona", "critic-persona", "auditor-persona"];

/// One channel's save: its whole session and the events new since its last save.
#[derive(Clone, Debug)]
pub struct Save {
    pub channel: u64,
    /// Compact JSON, one line, no final newline.
    pub session: String,
    /// (sequence number in the channel, compact JSON).
    pub events: Vec<(u64, String)>,
}

impl Save {
    pub fn bytes(&self) -> usize {
        self.session.len() + self.events.iter().map(|(_, e)| e.len()).sum::<usize>()
    }
}

/// What varies in a channel between saves.
struct Channel {
    id: u64,
    round: u32,
    seq: u64,
    last_message: u64,
    history: VecDeque<Value>,
}

/// Every channel's state; hands out batches of saves, each channel at most once in a batch.
pub struct Workload {
    channels: Vec<Channel>,
    next: usize,
}

impl Workload {
    /// Channels that have been running for a while: their sessions already hold a full history.
    pub fn new(channels: usize) -> Self {
        let channels = (0..channels as u64)
            .map(|i| {
                let mut channel = Channel {
                    id: FIRST_CHANNEL + i,
                    round: 0,
                    seq: 0,
                    last_message: FIRST_MESSAGE + i * 1_000_000,
                    history: VecDeque::new(),
                };
                for _ in 0..HISTORY_KEPT / 2 {
                    channel.save();
                }
                channel
            })
            .collect();
        Workload { channels, next: 0 }
    }

    /// The same channels as a later process would find them: rounds and event numbers past any a first run used,
    /// so its events do not collide with the ones already stored.
    pub fn resumed(channels: usize) -> Self {
        let mut work = Self::new(channels);
        for channel in &mut work.channels {
            channel.round = 1_000_000;
            channel.seq = 1 << 40;
        }
        work
    }

    pub fn channels(&self) -> usize {
        self.channels.len()
    }

    /// The next `size` saves (at most one per channel), channels taken round-robin.
    pub fn batch(&mut self, size: usize) -> Vec<Save> {
        let size = size.min(self.channels.len());
        (0..size)
            .map(|_| {
                let at = self.next;
                self.next = (self.next + 1) % self.channels.len();
                self.channels[at].save()
            })
            .collect()
    }
}

impl Channel {
    /// A completed turn: the round moves on, two events are recorded, the session is saved.
    fn save(&mut self) -> Save {
        self.round += 1;
        self.last_message += 7_340_032 + u64::from(self.round % 13);
        let holder = ROSTER[self.round as usize % ROSTER.len()];
        let next = ROSTER[(self.round as usize + 1) % ROSTER.len()];
        let events = [
            json!({
                "at": timestamp(self.round, 0), "round": self.round, "agentId": holder,
                "event": "turn_complete",
                "details": {"messageId": self.last_message.to_string(), "keyword": "DONE", "nextAgent": next},
            }),
            json!({
                "at": timestamp(self.round, 1), "round": self.round, "agentId": next,
                "event": "out_of_turn",
                "details": {
                    "messageId": (self.last_message + 4_194_304).to_string(),
                    "text": format!("Round {} notes: I will pick this up after {holder} is done.", self.round),
                    "removed": false,
                },
            }),
        ];
        let mut new = Vec::with_capacity(events.len());
        for event in events {
            self.seq += 1;
            new.push((self.seq, event.to_string()));
            self.history.push_back(event);
            if self.history.len() > HISTORY_KEPT {
                self.history.pop_front();
            }
        }
        Save { channel: self.id, session: self.session(next).to_string(), events: new }
    }

    fn session(&self, next: &str) -> Value {
        let recent: Vec<String> = (0..8).map(|k| (self.last_message - k * 4_194_304).to_string()).collect();
        let agents: serde_json::Map<String, Value> = ROSTER
            .iter()
            .map(|&persona| {
                let state = json!({
                    "lastActivity": timestamp(self.round, 2),
                    "awaitingLateReply": false,
                    "consecutiveTimeouts": u32::from(persona == next && self.round.is_multiple_of(5)),
                    "lastTurn": {"after": recent[3], "until": recent[1]},
                });
                (persona.to_owned(), state)
            })
            .collect();
        json!({
            "version": 1,
            "channelId": self.id.to_string(),
            "status": "running",
            "displayMode": "relay",
            "roster": ROSTER,
            "activeAgent": next,
            "round": self.round,
            "turnStartedAt": timestamp(self.round, 2),
            "turnTimeoutAt": timestamp(self.round, 302),
            "turnTimeoutSeconds": 300,
            "turnExtendedSeconds": 0,
            "turnPausedMs": 0,
            "turnAnnounced": true,
            "pausedAt": null,
            "pausedRemainingMs": null,
            "agents": agents,
            "lastMessageId": recent[0],
            "recentlyHandled": {"through": recent[7], "ids": &recent[..7]},
            "turnBeganAfter": recent[0],
            "editableMessages": &recent[1..3],
            "announcementSeq": self.round,
            "turnAnnouncement": format!("tm-{}-{}", self.id, self.round),
            "outboxSeq": self.round * 2,
            "history": self.history,
        })
    }
}

/// An RFC 3339 time that moves with the round (the date itself does not matter to the cost).
fn timestamp(round: u32, plus_seconds: u32) -> String {
    let s = round * 61 + plus_seconds;
    format!(
        "2026-05-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        1 + (s / 86_400) % 28,
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60,
        round % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::Workload;

    #[test]
    fn a_batch_holds_each_channel_once_and_sessions_are_about_4_kb() {
        let mut work = Workload::new(10);
        let batch = work.batch(10);
        let mut channels: Vec<u64> = batch.iter().map(|s| s.channel).collect();
        channels.dedup();
        assert_eq!(channels.len(), 10);
        let session = batch[0].session.len();
        assert!((3_500..5_000).contains(&session), "session of {session} bytes");
        for (_, event) in &batch[0].events {
            assert!((150..300).contains(&event.len()), "event of {} bytes", event.len());
        }
    }
}

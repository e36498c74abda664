//! The bench's eyes and its agents: one task reads local-discord's feed of created messages, records each with the
//! server's creation instant, and answers announcements the moment they are created, as the agent they mention.
//! What the figures are computed from is this record, never the bot's own word.

use super::scene::Scene;
use local_discord::LocalDiscord;
use local_discord::feed::FeedEvent;
use local_discord::world::Author;
use std::collections::HashMap;
use std::hash::{Hash as _, Hasher as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;

/// The signal the agents end their turns with.
pub const SIGNAL: &str = "TURN_COMPLETE";

/// What a created message was, as the bench sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The bot gives an agent the floor.
    Announce,
    /// The bot ends a turn by timeout.
    TimeoutNotice,
    /// An agent's message ending with the signal.
    Signal,
    /// An agent's message without it.
    AgentMessage,
    /// Anything else: reposts, the bot's other notices, people.
    Other,
}

/// One created message.
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    pub at: Instant,
    pub channel: u64,
    pub id: u64,
    pub kind: Kind,
}

/// Per-channel counts, for phases to wait on while they run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    pub announces: u32,
    pub signals: u32,
    pub timeouts: u32,
    /// The agent the latest announcement gave the floor to.
    pub holder: Option<u64>,
    /// Answers the agents decided to post (posted, or about to be: an answer is counted as a signal only once the
    /// feed shows it).
    pub answers: u32,
    /// Answers still thinking, not decided yet.
    pub thinking: u32,
}

impl Counts {
    /// Nothing on its way: every answer decided is seen, none is thinking, and the latest signal was announced after.
    pub fn quiet(&self) -> bool {
        self.thinking == 0 && self.signals >= self.answers && self.announces > self.signals
    }
}

#[derive(Default)]
pub struct Tally {
    channels: Mutex<HashMap<u64, Counts>>,
}

impl Tally {
    /// How many channels satisfy `condition`.
    pub fn channels_where(&self, condition: impl Fn(&Counts) -> bool) -> usize {
        self.channels.lock().expect("tally lock").values().filter(|c| condition(c)).count()
    }

    /// Every channel's counts now.
    pub fn snapshot(&self) -> HashMap<u64, Counts> {
        self.channels.lock().expect("tally lock").clone()
    }

    /// Each channel's floor holder, by its latest announcement.
    pub fn holders(&self) -> Vec<(u64, u64)> {
        let channels = self.channels.lock().expect("tally lock");
        channels.iter().filter_map(|(channel, c)| Some((*channel, c.holder?))).collect()
    }

    fn bump(&self, channel: u64, f: impl FnOnce(&mut Counts)) {
        f(self.channels.lock().expect("tally lock").entry(channel).or_default());
    }

    /// Whether an agent posts its answer in `channel` (after thinking, if `thought`), decided under the tally's lock:
    /// an answer is either counted here before [`Tally::stop_answering`] or never posted.
    fn decide(&self, channel: u64, answering: &AtomicBool, thought: bool) -> bool {
        let mut channels = self.channels.lock().expect("tally lock");
        let counts = channels.entry(channel).or_default();
        if thought {
            counts.thinking -= 1;
        }
        let answers = answering.load(Ordering::Relaxed);
        if answers {
            counts.answers += 1;
        }
        answers
    }

    fn stop_answering(&self, answering: &AtomicBool) {
        let _channels = self.channels.lock().expect("tally lock");
        answering.store(false, Ordering::Relaxed);
    }
}

/// What the observer saw, in creation order.
pub struct Observed {
    pub records: Vec<Rec>,
    /// Messages the observer fell too far behind to see (then the figures are incomplete, and say so).
    pub missed: u64,
}

pub struct Observer {
    pub tally: Arc<Tally>,
    /// While set, agents answer announcements (up to `answer_turns` per channel).
    pub answering: Arc<AtomicBool>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Observed>,
}

impl Observer {
    /// Starts watching the scene's server (call before the bot starts). Agents answer each channel's first
    /// `answer_turns` announcements with a signal, `think` after the announcement (at once when zero); 0 turns makes
    /// them silent.
    pub fn start(scene: &Scene, answer_turns: u32, think: Duration) -> Self {
        let feed = scene.stage.server.subscribe();
        let tally = Arc::new(Tally::default());
        let answering = Arc::new(AtomicBool::new(answer_turns > 0));
        let (stop, stopped) = oneshot::channel();
        let agents: HashMap<u64, String> =
            scene.stage.personas.iter().map(|p| (p.discord_user_id.0, p.id.to_string())).collect();
        let watcher = Watcher {
            server: scene.stage.server.clone(),
            bot: scene.stage.bot_user,
            agents,
            tally: tally.clone(),
            answering: answering.clone(),
            answer_turns,
            think,
            answered: HashMap::new(),
            records: Vec::new(),
            missed: 0,
        };
        let task = tokio::spawn(watcher.run(feed, stopped));
        Self { tally, answering, stop, task }
    }

    /// Agents answer no more: from now on every answer is either counted in the tally already or never posted.
    pub fn stop_answering(&self) {
        self.tally.stop_answering(&self.answering);
    }

    /// Stops watching and hands over the record (everything created before the call is in it).
    pub async fn finish(self) -> Observed {
        let _ = self.stop.send(());
        self.task.await.expect("the observer task")
    }
}

struct Watcher {
    server: LocalDiscord,
    bot: u64,
    /// Agent account -> persona id.
    agents: HashMap<u64, String>,
    tally: Arc<Tally>,
    answering: Arc<AtomicBool>,
    answer_turns: u32,
    think: Duration,
    answered: HashMap<u64, u32>,
    records: Vec<Rec>,
    missed: u64,
}

impl Watcher {
    async fn run(mut self, mut feed: broadcast::Receiver<FeedEvent>, mut stopped: oneshot::Receiver<()>) -> Observed {
        loop {
            tokio::select! {
                biased;
                _ = &mut stopped => break,
                event = feed.recv() => match event {
                    Ok(event) => self.see(event),
                    Err(broadcast::error::RecvError::Lagged(n)) => self.missed += n,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            }
        }
        loop {
            match feed.try_recv() {
                Ok(event) => self.see(event),
                Err(broadcast::error::TryRecvError::Lagged(n)) => self.missed += n,
                Err(_) => break,
            }
        }
        Observed { records: self.records, missed: self.missed }
    }

    fn see(&mut self, event: FeedEvent) {
        let kind = self.classify(&event);
        self.records.push(Rec { at: event.at, channel: event.channel, id: event.id, kind });
        match kind {
            Kind::Announce => {
                let holder = event.pinged.iter().copied().find(|u| self.agents.contains_key(u));
                self.tally.bump(event.channel, |c| {
                    c.announces += 1;
                    c.holder = holder;
                });
                self.answer(&event);
            }
            Kind::TimeoutNotice => self.tally.bump(event.channel, |c| c.timeouts += 1),
            Kind::Signal => self.tally.bump(event.channel, |c| c.signals += 1),
            Kind::AgentMessage | Kind::Other => {}
        }
    }

    fn classify(&self, event: &FeedEvent) -> Kind {
        match event.author {
            Author::User(user) if user == self.bot => {
                if event.content.contains("has the floor") {
                    Kind::Announce
                } else if event.content.starts_with("⏱️") {
                    Kind::TimeoutNotice
                } else {
                    Kind::Other
                }
            }
            Author::User(user) if self.agents.contains_key(&user) => {
                if event.content.trim_end().ends_with(SIGNAL) {
                    Kind::Signal
                } else {
                    Kind::AgentMessage
                }
            }
            _ => Kind::Other,
        }
    }

    /// The agent the announcement pings answers (after thinking, if it thinks), if it still answers in this channel.
    fn answer(&mut self, event: &FeedEvent) {
        if !self.answering.load(Ordering::Relaxed) {
            return;
        }
        let answered = self.answered.entry(event.channel).or_default();
        if *answered >= self.answer_turns {
            return;
        }
        let Some((user, persona)) = event.pinged.iter().find_map(|u| self.agents.get(u).map(|p| (*u, p))) else {
            return;
        };
        *answered += 1;
        let text = format!("{persona}: my answer for turn {answered}.\n\n{SIGNAL}");
        if self.think.is_zero() {
            if self.tally.decide(event.channel, &self.answering, false) {
                self.server.post(event.channel, user, &text);
            }
            return;
        }
        let (server, answering, channel) = (self.server.clone(), self.answering.clone(), event.channel);
        let think = spread(self.think, channel, *answered);
        let tally = self.tally.clone();
        tally.bump(channel, |c| c.thinking += 1);
        tokio::spawn(async move {
            tokio::time::sleep(think).await;
            if tally.decide(channel, &answering, true) {
                server.post(channel, user, &text);
            }
        });
    }
}

/// `think` give or take half, drawn from the channel and the turn: agents that think do not answer in step, as 100
/// channels started together and all answering after the same time would.
fn spread(think: Duration, channel: u64, turn: u32) -> Duration {
    let mut hasher = std::hash::DefaultHasher::new();
    (channel, turn).hash(&mut hasher);
    think.mul_f64(0.5 + (hasher.finish() % 1_000) as f64 / 1_000.0)
}

/// Handoff times: from each agent's signal created in `window` to the next announcement created in its channel.
pub fn handoffs(records: &[Rec], window: (Instant, Instant)) -> Vec<Duration> {
    let mut pending: HashMap<u64, Instant> = HashMap::new();
    let mut samples = Vec::new();
    for rec in records {
        match rec.kind {
            Kind::Signal if rec.at >= window.0 && rec.at < window.1 => {
                pending.insert(rec.channel, rec.at);
            }
            Kind::Announce => {
                if let Some(signal) = pending.remove(&rec.channel) {
                    samples.push(rec.at - signal);
                }
            }
            _ => {}
        }
    }
    samples
}

/// Turns completed in `window`: announcements created in it that follow a signal in their channel.
pub fn completed(records: &[Rec], window: (Instant, Instant)) -> usize {
    let mut signalled: HashMap<u64, bool> = HashMap::new();
    let mut count = 0;
    for rec in records {
        match rec.kind {
            Kind::Signal => {
                signalled.insert(rec.channel, true);
            }
            Kind::Announce => {
                let after_signal = signalled.insert(rec.channel, false).unwrap_or(false);
                if after_signal && rec.at >= window.0 && rec.at < window.1 {
                    count += 1;
                }
            }
            _ => {}
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(t0: Instant, ms: u64, channel: u64, kind: Kind) -> Rec {
        Rec { at: t0 + Duration::from_millis(ms), channel, id: ms, kind }
    }

    #[test]
    fn a_handoff_runs_from_a_signal_to_the_next_announcement_of_its_own_channel() {
        let t0 = Instant::now();
        let records = [
            rec(t0, 0, 1, Kind::Announce),
            rec(t0, 10, 1, Kind::Signal),
            rec(t0, 11, 2, Kind::Signal),
            rec(t0, 12, 1, Kind::Other),
            rec(t0, 14, 2, Kind::Announce),
            rec(t0, 15, 1, Kind::Announce),
            rec(t0, 40, 1, Kind::Announce),
        ];
        let window = (t0, t0 + Duration::from_secs(1));
        assert_eq!(handoffs(&records, window), vec![Duration::from_millis(3), Duration::from_millis(5)]);
        assert_eq!(completed(&records, window), 2, "the first and last announcements follow no signal");
    }

    #[test]
    fn only_signals_and_completions_inside_the_window_count() {
        let t0 = Instant::now();
        let records = [
            rec(t0, 5, 1, Kind::Signal),
            rec(t0, 20, 1, Kind::Announce),
            rec(t0, 30, 1, Kind::Signal),
            rec(t0, 60, 1, Kind::Announce),
        ];
        let window = (t0 + Duration::from_millis(10), t0 + Duration::from_millis(50));
        assert_eq!(handoffs(&records, window), vec![Duration::from_millis(30)], "a handoff may end after the window");
        assert_eq!(completed(&records, window), 1);
    }

    #[test]
    fn a_channel_is_quiet_only_once_every_answer_decided_is_seen_and_none_is_thinking() {
        let seen = Counts { announces: 3, signals: 2, answers: 2, ..Counts::default() };
        assert!(seen.quiet());
        assert!(!Counts { answers: 3, ..seen }.quiet(), "an answer posted, not seen yet");
        assert!(!Counts { thinking: 1, ..seen }.quiet(), "an answer still thinking");
        assert!(!Counts { announces: 2, ..seen }.quiet(), "a signal not announced after yet");
    }

    #[test]
    fn once_agents_stop_answering_no_answer_is_decided() {
        let (tally, answering) = (Tally::default(), AtomicBool::new(true));
        tally.bump(7, |c| c.thinking += 1);
        assert!(tally.decide(7, &answering, false));
        tally.stop_answering(&answering);
        assert!(!tally.decide(7, &answering, true), "the answer that was thinking is not posted");
        let counts = tally.snapshot()[&7];
        assert_eq!((counts.answers, counts.thinking), (1, 0));
    }
}

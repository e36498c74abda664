//! The sessions the configuration starts (`channels`): each begins when its server is first seen on this process's
//! shards (its GUILD_CREATE), so that with several processes only the one whose shards carry a channel starts it
//! (another would claim a channel whose messages it never sees), and its first announcement goes out on a
//! connection that is up.

use super::actor::Input;
use super::router::Router;
use crate::core::config::Config;
use crate::core::ids::{ChannelId, GuildId};
use crate::core::persona::PersonaCatalog;
use crate::core::session::{Command, Session};
use crate::core::shards::Shard;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub struct ConfiguredStarts {
    /// The `start` of each configured channel not started yet.
    waiting: Mutex<HashMap<ChannelId, Command>>,
    /// The `start` of every configured channel, for a server the bot is added back to.
    every: HashMap<ChannelId, Command>,
    /// The server of each configured channel, as its saved session or its server's GUILD_CREATE told: a removal
    /// from a server serenity's cache no longer holds (removed while the server was out) names the server only.
    servers: Mutex<HashMap<ChannelId, GuildId>>,
}

impl ConfiguredStarts {
    /// Every channel the configuration manages from start-up that has no running or paused session, nor one ended on
    /// purpose (a manager's `stop`, an `end` signal, `maxRounds`: found by a review, every restart started it again,
    /// and called its agents); one whose channel was lost (deleted, the bot removed from its server) waits for its
    /// server.
    pub fn new(config: &Config, personas: &PersonaCatalog, saved: &[Session]) -> Self {
        let every: HashMap<ChannelId, Command> = config
            .channels
            .iter()
            .map(|managed| {
                // Ids, quoted: never read together as a display name with spaces.
                let roster = managed.roster.iter().map(|p| format!("\"{}\"", p.as_str())).collect();
                (managed.channel_id, Command::Start { roster })
            })
            .collect();
        let ended: Vec<ChannelId> = saved
            .iter()
            .filter(|s| every.contains_key(&s.channel_id) && s.stays_stopped())
            .map(|s| s.channel_id)
            .collect();
        if !ended.is_empty() {
            let ids: Vec<String> = ended.iter().map(ToString::to_string).collect();
            tracing::info!(
                channels = %ids.join(", "),
                "configured channel(s) whose session was ended on purpose (a stop, an end signal, maxRounds) are not \
                 started again: `!turn start` there starts one"
            );
        }
        // A session none of whose personas is known any more (all renamed) is stopped by its actor as it begins: the
        // configuration starts it again with its own roster (found by a review: it stayed stopped until a restart).
        let runs = |s: &Session| s.is_active() && s.roster.iter().any(|p| personas.get(p).is_some());
        let waiting = every
            .iter()
            .filter(|(channel, _)| {
                !ended.contains(channel) && !saved.iter().any(|s| s.channel_id == **channel && runs(s))
            })
            .map(|(channel, start)| (*channel, start.clone()))
            .collect();
        let servers = saved
            .iter()
            .filter(|s| every.contains_key(&s.channel_id))
            .filter_map(|s| Some((s.channel_id, s.guild_id?)))
            .collect();
        Self { waiting: Mutex::new(waiting), every, servers: Mutex::new(servers) }
    }

    /// The bot was removed from the server of `channels`, ending their sessions: those the configuration manages
    /// start again when it is added back (the server's next GUILD_CREATE), as a headless deployment expects.
    pub fn rearm(&self, channels: impl Iterator<Item = ChannelId>) {
        let mut waiting = self.waiting.lock().expect("configured starts lock");
        for channel in channels {
            if let Some(start) = self.every.get(&channel) {
                waiting.insert(channel, start.clone());
            }
        }
    }

    /// [`ConfiguredStarts::rearm`] for the configured channels known to be in `guild`.
    pub fn rearm_server(&self, guild: GuildId) {
        let servers = self.servers.lock().expect("configured servers lock");
        self.rearm(servers.iter().filter(|(_, server)| **server == guild).map(|(channel, _)| *channel));
    }

    /// [`ConfiguredStarts::rearm`] for the configured channels known to be in a server of `shard` (`None`: the only
    /// shard) that `servers` (sorted), all the servers a READY listed for it, leaves out: the bot was removed from it
    /// while it was not connected.
    pub fn rearm_unlisted(&self, shard: Option<Shard>, servers: &[GuildId]) {
        let known = self.servers.lock().expect("configured servers lock");
        let unlisted = |server: &GuildId| {
            shard.is_none_or(|shard| shard.carries(*server)) && servers.binary_search(server).is_err()
        };
        self.rearm(known.iter().filter(|(_, server)| unlisted(server)).map(|(channel, _)| *channel));
    }

    pub fn waiting(&self) -> usize {
        self.waiting.lock().expect("configured starts lock").len()
    }

    /// The starts of those of `channels` still waiting, each given once whatever GUILD_CREATEs follow.
    fn take(&self, channels: impl Iterator<Item = ChannelId>) -> Vec<(ChannelId, Command)> {
        let mut waiting = self.waiting.lock().expect("configured starts lock");
        if waiting.is_empty() {
            return Vec::new();
        }
        channels.filter_map(|channel| waiting.remove(&channel).map(|command| (channel, command))).collect()
    }

    /// The starts of those of `guild`'s `channels` still waiting; the server of every configured one noted.
    fn seen(&self, guild: GuildId, channels: impl Iterator<Item = ChannelId>) -> Vec<(ChannelId, Command)> {
        let channels: Vec<ChannelId> = channels.filter(|channel| self.every.contains_key(channel)).collect();
        let mut servers = self.servers.lock().expect("configured servers lock");
        servers.extend(channels.iter().map(|channel| (*channel, guild)));
        drop(servers);
        self.take(channels.into_iter())
    }

    /// Starts the sessions of those of `guild`'s `channels` still waiting.
    pub fn start_seen(&self, router: &Arc<Router>, guild: GuildId, channels: impl Iterator<Item = ChannelId>) {
        for (channel, command) in self.seen(guild, channels) {
            let router = router.clone();
            tokio::spawn(async move {
                let started = |reply| Input::command(command, None, Some(reply));
                // Refused: a session ended on purpose (the reason says so), or one that runs already.
                if let Some(Err(refusal)) = router.ask(channel, started).await {
                    tracing::info!(channel = %channel, "the configured session was not started: {refusal}");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::ManagedChannel;
    use crate::core::ids::PersonaId;
    use crate::core::session::SessionStatus;

    fn catalog() -> PersonaCatalog {
        crate::core::persona::two_personas(60)
    }

    /// A session that runs (paused), its roster the catalog's.
    fn paused(channel: u64) -> Session {
        let roster = catalog().all().iter().map(|p| p.id.clone()).collect();
        Session { status: SessionStatus::Paused, roster, ..Session::new(ChannelId(channel)) }
    }

    fn config(channels: &[u64]) -> Config {
        let roster = vec![PersonaId::parse("dev").unwrap()];
        let channels =
            channels.iter().map(|c| ManagedChannel { channel_id: ChannelId(*c), roster: roster.clone() }).collect();
        Config { channels, ..Config::default() }
    }

    #[test]
    fn each_configured_channel_starts_once_when_its_server_is_seen_and_only_then() {
        let starts = ConfiguredStarts::new(&config(&[1, 2, 3]), &catalog(), &[]);
        assert!(starts.take([7, 8].map(ChannelId).into_iter()).is_empty(), "another server's channels");
        let first = starts.take([9, 2, 1].map(ChannelId).into_iter());
        let started: Vec<u64> = first.iter().map(|(c, _)| c.0).collect();
        assert_eq!(started, [2, 1]);
        // The configured ids, quoted: never read together as a display name (found by a review).
        assert!(matches!(&first[0].1, Command::Start { roster } if roster == &["\"dev\"".to_owned()]));
        assert!(starts.take([1, 2].map(ChannelId).into_iter()).is_empty(), "a server seen again starts nothing again");
        assert_eq!(starts.waiting(), 1, "channel 3's server was never seen");
    }

    #[test]
    fn a_configured_channel_of_a_server_the_bot_left_starts_again_when_the_server_is_seen_again() {
        let starts = ConfiguredStarts::new(&config(&[1, 2]), &catalog(), &[]);
        assert_eq!(starts.take([1, 2].map(ChannelId).into_iter()).len(), 2);
        starts.rearm([1, 5].map(ChannelId).into_iter());
        assert_eq!(starts.waiting(), 1, "only the configured channels of that server");
        let again: Vec<u64> = starts.take([1, 2].map(ChannelId).into_iter()).iter().map(|(c, _)| c.0).collect();
        assert_eq!(again, [1]);
    }

    #[test]
    fn a_removal_naming_only_the_server_rearms_its_configured_channels_known_from_a_create_or_a_saved_session() {
        // 3's session runs (saved, so not started again): its server is known from its file only.
        let saved = Session { guild_id: Some(GuildId(70)), ..paused(3) };
        let starts = ConfiguredStarts::new(&config(&[1, 2, 3]), &catalog(), &[saved]);
        assert_eq!(starts.seen(GuildId(60), [1, 9].map(ChannelId).into_iter()).len(), 1);
        assert_eq!(starts.seen(GuildId(70), [2].map(ChannelId).into_iter()).len(), 1);
        assert_eq!(starts.waiting(), 0, "all taken");
        starts.rearm_server(GuildId(60));
        assert_eq!(starts.take([1, 2, 3].map(ChannelId).into_iter()).iter().map(|(c, _)| c.0).collect::<Vec<_>>(), [1]);
        starts.rearm_server(GuildId(70));
        let mut again: Vec<u64> = starts.take([1, 2, 3].map(ChannelId).into_iter()).iter().map(|(c, _)| c.0).collect();
        again.sort();
        assert_eq!(again, [2, 3]);
        starts.rearm_server(GuildId(80));
        assert_eq!(starts.waiting(), 0, "no configured channel there");
    }

    /// A READY lists every server of its shard the bot is in: a configured channel known to be in a server of that
    /// shard it leaves out starts again when the server is seen; one of another shard's server waits for its own.
    #[test]
    fn a_ready_rearms_the_configured_channels_of_its_shards_servers_it_does_not_list() {
        let starts = ConfiguredStarts::new(&config(&[1, 2, 3]), &catalog(), &[]);
        let shard = |id| Some(Shard { id, total: 2 });
        let (on_0, on_1, also_on_0) = (GuildId(0), GuildId(1 << 22), GuildId(2 << 22));
        assert!(
            shard(0).unwrap().carries(on_0) && shard(1).unwrap().carries(on_1) && shard(0).unwrap().carries(also_on_0)
        );
        starts.seen(on_0, [1].map(ChannelId).into_iter());
        starts.seen(on_1, [2].map(ChannelId).into_iter());
        starts.seen(also_on_0, [3].map(ChannelId).into_iter());
        assert_eq!(starts.waiting(), 0, "all started");
        starts.rearm_unlisted(shard(0), &[also_on_0]);
        assert_eq!(starts.take([1, 2, 3].map(ChannelId).into_iter()).iter().map(|(c, _)| c.0).collect::<Vec<_>>(), [1]);
        starts.rearm_unlisted(None, &[on_0, on_1]);
        assert_eq!(starts.take([1, 2, 3].map(ChannelId).into_iter()).iter().map(|(c, _)| c.0).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn a_channel_whose_saved_session_is_paused_or_runs_is_not_started_again() {
        let running = paused(1);
        assert!(running.is_active(), "precondition");
        let never_started = Session::new(ChannelId(2));
        let starts = ConfiguredStarts::new(&config(&[1, 2]), &catalog(), &[running, never_started]);
        let started: Vec<u64> = starts.take([1, 2].map(ChannelId).into_iter()).iter().map(|(c, _)| c.0).collect();
        assert_eq!(started, [2]);
    }

    /// Found by a review: a session none of whose personas is known any more (all renamed, the configuration's roster
    /// naming the new ones) was stopped by its actor as it began, and not started again until the next restart.
    #[test]
    fn a_running_session_whose_personas_are_all_gone_is_started_again_by_the_configuration() {
        let gone = Session { roster: vec![PersonaId::parse("old-pm").unwrap()], ..paused(1) };
        let starts = ConfiguredStarts::new(&config(&[1, 2]), &catalog(), &[gone, paused(2)]);
        let started: Vec<u64> = starts.take([1, 2].map(ChannelId).into_iter()).iter().map(|(c, _)| c.0).collect();
        assert_eq!(started, [1]);
    }

    /// Found by a review: a session a manager stopped (or that ended by an `end` signal or `maxRounds`) was started
    /// again by every restart, calling its agents. One ended because its channel was lost (the bot removed from the
    /// server) still starts when its server is seen again, as a headless deployment expects.
    #[test]
    fn a_session_ended_on_purpose_is_not_started_again_and_one_whose_channel_was_lost_is() {
        let (personas, config) = (crate::core::persona::two_personas(60), Config::default());
        let ctx = crate::core::session::Context { personas: &personas, config: &config };
        let at = |s: i64| chrono::DateTime::UNIX_EPOCH + chrono::TimeDelta::seconds(1_800_000_000 + s);
        let ended = |channel: u64, how: &dyn Fn(&mut Session)| {
            let mut session = Session::new(ChannelId(channel));
            let start = Command::Start { roster: Vec::new() };
            session.handle_command(&start, None, at(0), ctx).expect("started");
            how(&mut session);
            assert!(!session.is_active(), "precondition: ended");
            session
        };
        let stopped = ended(1, &|s| {
            s.handle_command(&Command::Stop, None, at(5), ctx).expect("stopped");
        });
        let lost = ended(2, &|s| {
            s.unreachable(crate::core::session::lost::Unreachable::LeftServer, at(5), ctx);
        });
        let saved = [stopped, lost];
        let restarted: Vec<Session> =
            saved.iter().map(|s| serde_json::from_value(serde_json::json!(s)).unwrap()).collect();
        let starts = ConfiguredStarts::new(&self::config(&[1, 2]), &personas, &restarted);
        let started: Vec<u64> = starts.take([1, 2].map(ChannelId).into_iter()).iter().map(|(c, _)| c.0).collect();
        assert_eq!(started, [2]);
    }
}

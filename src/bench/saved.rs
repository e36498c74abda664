//! Saved sessions made by running the real engine and saved by the real store, so their format is exactly what the
//! bot under test reads: a session started at a chosen instant, then some turns of an agent's message and its signal
//! (thirty seconds each), in a channel whose server it knows. Played on a few threads (the engine's work) and saved
//! in batches, each one group commit, then checkpointed: the bot under test starts with an empty journal, as after a
//! graceful stop. A database gets them from this folder through `convert` ([`super::phase_store`]).

use crate::core::config::Config;
use crate::core::ids::{ChannelId, GuildId, MessageId};
use crate::core::persona::PersonaCatalog;
use crate::core::session::history::HistoryEvent;
use crate::core::session::{Command, Context, IncomingMessage, Session};
use crate::store::Store;
use anyhow::Context as _;
use chrono::{DateTime, Utc};
use std::path::Path;
use std::time::{Duration, Instant};

/// Threads that play and save the sessions.
const WRITERS: usize = 16;
/// Sessions saved in one group commit.
const BATCH: usize = 256;

/// What each saved session went through.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// When its session started (whole milliseconds): with no turns played, its first turn's deadline is this plus
    /// the first persona's timeout.
    pub start: DateTime<Utc>,
    pub turns: i64,
}

/// What the saved sessions are like.
#[derive(Clone, Debug)]
pub struct Saved {
    pub sessions: usize,
    pub bytes_per_file: u64,
    pub took: Duration,
}

/// Writes one saved session per channel (`(channel, its guild)`) under `dir` (a state folder) as `plan` says, from
/// [`WRITERS`] threads.
pub fn generate(dir: &Path, channels: &[(u64, u64)], catalog: &PersonaCatalog, plan: Plan) -> anyhow::Result<Saved> {
    let started = Instant::now();
    let store = Store::open(dir)?;
    let config = Config::default();
    let chunk = channels.len().div_ceil(WRITERS).max(1);
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let writers: Vec<_> = channels
            .chunks(chunk)
            .map(|part| {
                let (store, config) = (&store, &config);
                scope.spawn(move || -> anyhow::Result<()> {
                    for batch in part.chunks(BATCH) {
                        let played: Vec<(Session, Vec<HistoryEvent>)> = batch
                            .iter()
                            .map(|(channel, guild)| {
                                played_session(ChannelId(*channel), GuildId(*guild), catalog, config, plan)
                            })
                            .collect::<anyhow::Result<_>>()?;
                        store.save_many(&played)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for writer in writers {
            writer.join().map_err(|_| anyhow::anyhow!("a session writer panicked"))??;
        }
        Ok(())
    })?;
    store.checkpoint()?;
    let bytes: u64 = channels
        .iter()
        .filter_map(|(c, _)| std::fs::metadata(store.session_path(ChannelId(*c))).ok())
        .map(|m| m.len())
        .sum();
    let bytes_per_file = bytes / channels.len().max(1) as u64;
    Ok(Saved { sessions: channels.len(), bytes_per_file, took: started.elapsed() })
}

/// A session as the engine leaves it after the plan's turns, each an agent's message then its signal; and every
/// event, for the log. It records its server, as the bot's sessions do, so that each process of several resumes
/// those of its own shards.
fn played_session(
    channel: ChannelId,
    guild: GuildId,
    catalog: &PersonaCatalog,
    config: &Config,
    plan: Plan,
) -> anyhow::Result<(Session, Vec<HistoryEvent>)> {
    let ctx = Context { personas: catalog, config };
    let at = |ms: i64| DateTime::from_timestamp_millis(ms).expect("a time in range");
    let mut ms = plan.start.timestamp_millis();
    let mut session = Session::new(channel);
    session.guild_id = Some(guild);
    let start = session.handle_command(&Command::Start { roster: Vec::new() }, None, at(ms), ctx);
    let mut events = start.map_err(|refusal| anyhow::anyhow!("the engine refused to start: {refusal}"))?.events;
    for turn in 1..=plan.turns {
        let holder = session.active_agent.clone().context("a running session has a holder")?;
        let author = catalog.get(&holder).context("the holder is a persona")?.discord_user_id;
        for (wait_ms, text) in [
            (20_000, format!("{holder}: a first thought on turn {turn}, before the real answer.")),
            (10_000, format!("{holder}: my answer for turn {turn}, with the reasons for it.\n\nTURN_COMPLETE")),
        ] {
            ms += wait_ms;
            let id = MessageId::first_at(at(ms));
            let message = IncomingMessage {
                id,
                author,
                text,
                edited: false,
                written_at: id.created_at(),
                edited_at: None,
                has_files: false,
                flags: Default::default(),
                mentions: None,
            };
            events.extend(session.handle_message(&message, at(ms), ctx).events);
        }
    }
    Ok((session, events))
}

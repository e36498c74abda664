//! Scripted agents: simulated agent bots that answer when they are mentioned (pinged), after a delay, with a
//! behaviour chosen per test or per demo persona. They act through the server's handle, as their own users.

use crate::LocalDiscord;
use crate::world::{Author, World};
use std::time::Duration;
use tokio::task::JoinHandle;

/// How an agent answers when it is called on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Behavior {
    /// One message ending with the signal.
    Finish,
    /// `n` messages, the last one ending with the signal.
    SeveralThenFinish(u32),
    /// One message without the signal: its turn can only time out.
    NeverFinish,
    /// Waits this long (past its timeout), then answers with the signal.
    FinishLate(Duration),
    /// Finishes when called, and also speaks once, uninvited, when another agent is called.
    OutOfTurn,
    /// Posts one message and edits it `n` times; the last edit adds the signal.
    StreamByEditing(u32),
    /// A script: on its n-th call, posts the n-th reply exactly as written (its own signals included, so it can
    /// speak any protocol); once the replies run out it stays silent.
    Replies(Vec<String>),
}

/// One simulated agent bot.
#[derive(Clone, Debug)]
pub struct ScriptedAgent {
    pub user: u64,
    pub name: String,
    pub channel: u64,
    /// How long it "thinks" before answering.
    pub delay: Duration,
    pub behavior: Behavior,
    /// The end-of-turn keyword it ends with.
    pub signal: String,
}

/// Runs the agent until the task is aborted.
pub fn spawn(server: LocalDiscord, agent: ScriptedAgent) -> JoinHandle<()> {
    // Read before the task runs: a call posted right after `spawn` returns must not be missed.
    let mut last_seen = server.with(|w| w.messages.keys().next_back().copied().unwrap_or(0));
    tokio::spawn(async move {
        let mut interjected = false;
        let mut turn = 0u32;
        loop {
            let Ok((id, for_me)) =
                server.wait_for("a call", Duration::from_secs(24 * 3600), |w| next_call(w, &agent, last_seen)).await
            else {
                continue;
            };
            last_seen = id;
            if !for_me {
                if agent.behavior == Behavior::OutOfTurn && !interjected {
                    interjected = true;
                    tokio::time::sleep(agent.delay).await;
                    server.post(
                        agent.channel,
                        agent.user,
                        &format!("{}: may I add something? {}", agent.name, agent.signal),
                    );
                }
                continue;
            }
            turn += 1;
            tokio::time::sleep(agent.delay).await;
            answer(&server, &agent, turn).await;
            // Whatever it posted itself is not a call.
            last_seen = last_seen.max(server.with(|w| w.messages.keys().next_back().copied().unwrap_or(0)));
        }
    })
}

/// The next message after `after` in the agent's channel that pings someone: (id, whether it pings this agent).
fn next_call(w: &World, agent: &ScriptedAgent, after: u64) -> Option<(u64, bool)> {
    w.messages
        .range(after + 1..)
        .map(|(_, m)| m)
        .filter(|m| m.channel_id == agent.channel && !m.deleted && m.author != Author::User(agent.user))
        .find(|m| !m.pinged.is_empty())
        .map(|m| (m.id, m.pinged.contains(&agent.user)))
}

async fn answer(server: &LocalDiscord, agent: &ScriptedAgent, turn: u32) {
    let (name, signal, channel) = (&agent.name, &agent.signal, agent.channel);
    match &agent.behavior {
        Behavior::Finish | Behavior::OutOfTurn => {
            server.post(channel, agent.user, &format!("{name}: my answer for turn {turn}.\n\n{signal}"));
        }
        Behavior::SeveralThenFinish(n) => {
            for part in 1..=*n {
                let end = if part == *n { format!(" {signal}") } else { String::new() };
                server.post(channel, agent.user, &format!("{name}: part {part} of {n}.{end}"));
                tokio::time::sleep(agent.delay).await;
            }
        }
        Behavior::NeverFinish => {
            server.post(channel, agent.user, &format!("{name}: still thinking about turn {turn}..."));
        }
        Behavior::FinishLate(late) => {
            tokio::time::sleep(*late).await;
            server.post(channel, agent.user, &format!("{name}: sorry, I was slow. {signal}"));
        }
        Behavior::StreamByEditing(n) => {
            let mut text = format!("{name}: streaming");
            let message = server.post(channel, agent.user, &text);
            for step in 1..=*n {
                tokio::time::sleep(agent.delay).await;
                text.push_str(&format!(" ...{step}"));
                let shown = if step == *n { format!("{text}.\n{signal}") } else { text.clone() };
                server.edit(message, &shown);
            }
        }
        Behavior::Replies(replies) => {
            if let Some(reply) = usize::try_from(turn - 1).ok().and_then(|i| replies.get(i)) {
                server.post(channel, agent.user, reply);
            }
        }
    }
}

//! Scripted agents answer when they are pinged, each with its behaviour; checked in the channel as people see it.

use local_discord::LocalDiscord;
use local_discord::agents::{Behavior, ScriptedAgent, spawn};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(5);

struct Setup {
    server: LocalDiscord,
    channel: u64,
    operator: u64,
}

async fn setup() -> Setup {
    let server = LocalDiscord::start().await.unwrap();
    let operator = server.create_user("operator");
    let guild = server.create_guild("Lab", operator);
    let channel = server.create_channel(guild, "agents");
    Setup { server, channel, operator }
}

fn agent(s: &Setup, name: &str, behavior: Behavior) -> u64 {
    let (user, _) = s.server.create_bot(name);
    let guild = s.server.with(|w| w.channels[&s.channel].guild_id);
    s.server.add_member(guild, user, &[]);
    let agent = ScriptedAgent {
        user,
        name: name.into(),
        channel: s.channel,
        delay: Duration::from_millis(5),
        behavior,
        signal: "TURN_COMPLETE".into(),
    };
    spawn(s.server.clone(), agent);
    user
}

/// Waits until the channel holds `n` messages from `user`, and returns their contents.
async fn said(s: &Setup, user: u64, n: usize) -> Vec<String> {
    s.server
        .wait_for("agent messages", WAIT, |w| {
            let mine: Vec<String> =
                w.view(s.channel).into_iter().filter(|m| m.author_id == user).map(|m| m.content).collect();
            (mine.len() >= n).then_some(mine)
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn an_agent_answers_only_when_pinged_and_finishes_with_the_signal() {
    let s = setup().await;
    let pm = agent(&s, "pm", Behavior::Finish);
    s.server.post(s.channel, s.operator, "nobody is called here");
    s.server.post(s.channel, s.operator, &format!("<@{pm}> your turn"));
    let answers = said(&s, pm, 1).await;
    assert!(answers[0].ends_with("TURN_COMPLETE"), "{answers:?}");
    assert_eq!(said(&s, pm, 1).await.len(), 1, "one call, one answer");
}

#[tokio::test]
async fn several_messages_then_the_signal() {
    let s = setup().await;
    let dev = agent(&s, "dev", Behavior::SeveralThenFinish(3));
    s.server.post(s.channel, s.operator, &format!("<@{dev}> go"));
    let answers = said(&s, dev, 3).await;
    assert!(!answers[0].contains("TURN_COMPLETE") && !answers[1].contains("TURN_COMPLETE"));
    assert!(answers[2].ends_with("TURN_COMPLETE"));
}

#[tokio::test]
async fn never_finishing_and_finishing_late() {
    let s = setup().await;
    let stuck = agent(&s, "stuck", Behavior::NeverFinish);
    let late = agent(&s, "late", Behavior::FinishLate(Duration::from_millis(50)));
    s.server.post(s.channel, s.operator, &format!("<@{stuck}> <@{late}> both of you"));
    assert!(!said(&s, stuck, 1).await[0].contains("TURN_COMPLETE"));
    assert!(said(&s, late, 1).await[0].ends_with("TURN_COMPLETE"));
}

#[tokio::test]
async fn an_out_of_turn_agent_speaks_once_when_another_is_called() {
    let s = setup().await;
    let pm = agent(&s, "pm", Behavior::Finish);
    let critic = agent(&s, "critic", Behavior::OutOfTurn);
    s.server.post(s.channel, s.operator, &format!("<@{pm}> your turn"));
    let interjection = said(&s, critic, 1).await;
    assert!(interjection[0].starts_with("critic: may I add something?"));
    said(&s, pm, 1).await;
}

#[tokio::test]
async fn streaming_edits_one_message_and_the_last_edit_adds_the_signal() {
    let s = setup().await;
    let dev = agent(&s, "dev", Behavior::StreamByEditing(3));
    s.server.post(s.channel, s.operator, &format!("<@{dev}> stream it"));
    let done = s
        .server
        .wait_for("the final edit", WAIT, |w| {
            let mine: Vec<_> = w.view(s.channel).into_iter().filter(|m| m.author_id == dev).collect();
            mine.first().filter(|m| m.content.ends_with("TURN_COMPLETE")).cloned().map(|m| (mine.len(), m))
        })
        .await
        .unwrap();
    assert_eq!(done.0, 1, "one message, edited");
    assert!(done.1.edited);
    assert_eq!(done.1.content, "dev: streaming ...1 ...2 ...3.\nTURN_COMPLETE");
}

#[tokio::test]
async fn a_scripted_agent_posts_its_replies_in_order_then_stays_silent() {
    let s = setup().await;
    let replies = vec!["first\nREADY_FOR_REVIEW: task-1".to_owned(), "second".to_owned()];
    let dev = agent(&s, "dev", Behavior::Replies(replies.clone()));
    s.server.post(s.channel, s.operator, &format!("<@{dev}> one"));
    assert_eq!(said(&s, dev, 1).await, replies[..1]);
    s.server.post(s.channel, s.operator, &format!("<@{dev}> two"));
    assert_eq!(said(&s, dev, 2).await, replies);
    // Called a third time together with another agent with the same delay: by the time that one has answered,
    // this one has had its chance to answer too, and has nothing left to say.
    let pm = agent(&s, "pm", Behavior::Finish);
    s.server.post(s.channel, s.operator, &format!("<@{dev}> <@{pm}> three"));
    said(&s, pm, 1).await;
    assert_eq!(said(&s, dev, 2).await.len(), 2, "silent once the replies run out");
}

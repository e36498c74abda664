//! End to end, relay mode's reposts against the local server: found again however busy the channel got, and
//! carrying the agent's files and embeds.

mod common;

use common::personas;
use local_discord::messages::Draft;
use local_discord::world::Author;
use std::sync::Arc;
use turn_manager::core::ids::{ChannelId, MessageId};
use turn_manager::demo::stage::Stage;
use turn_manager::discord::access::Access;
use turn_manager::discord::identity::Identity;
use turn_manager::discord::rest::Rest;
use turn_manager::discord::rest::discord::DiscordRest;
use turn_manager::discord::rest::http::DiscordHttp;

/// The bot's REST seam on the stage, without a gateway connection (history reads need none).
fn rest_of(stage: &Stage) -> DiscordRest {
    let identity = Arc::new(Identity::default());
    let http = DiscordHttp::new(&stage.bot_token, Some(&stage.server.base_url()));
    DiscordRest::new(Arc::new(http), Arc::new(Access::new(identity.clone(), Vec::new())), identity)
}

/// A message posted through a webhook as `name`.
fn webhook_says(stage: &Stage, name: &str, text: &str) -> u64 {
    let author = Author::Webhook { webhook_id: 77, name: name.into(), avatar_url: None };
    stage
        .server
        .with(|w| w.create_message(stage.channel, author, Draft { content: text, ..Draft::default() }).ok())
        .expect("posted")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repost_is_found_after_more_than_a_page_of_messages_in_a_busy_channel() {
    let stage = Stage::new(&personas([60, 60, 60])).await.expect("local server");
    let original = stage.server.post(stage.channel, stage.user_of("pm"), "Part one. Part two. TURN_COMPLETE");
    for i in 0..150 {
        stage.operator_says(&format!("chatter {i}"));
    }
    webhook_says(&stage, "PM", "Part one.");
    for i in 0..120 {
        stage.operator_says(&format!("more chatter {i}"));
    }
    webhook_says(&stage, "PM", "Part two.");
    let rest = rest_of(&stage);
    let (channel, after) = (ChannelId(stage.channel), MessageId(original));
    let parts = ["Part one.".to_owned(), "Part two.".to_owned(), "Part three.".to_owned()];
    assert_eq!(rest.reposts_made(channel, after, "PM", &parts[..1]).await.unwrap(), 1, "past 150 messages");
    assert_eq!(rest.reposts_made(channel, after, "PM", &parts).await.unwrap(), 2, "two of three, to the end");
    assert_eq!(rest.reposts_made(channel, after, "Developer", &parts).await.unwrap(), 0, "another persona's name");
}

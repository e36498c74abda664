//! What a repost carries over from the agent's message besides its text (spec 6: never lose an agent's file): its
//! files, downloaded to be uploaded again, and its own embeds. Fetched only for a message the gateway marked as
//! carrying some, so a plain text relay costs no extra call.

use super::http::DiscordHttp;
use super::{Carried, File, RestError};
use serde_json::Value;

/// The most a repost carries in files, all together: more is not downloaded, and the original message stays (a
/// webhook may upload 25 MiB at most, less on servers without boosts, which Discord answers with a 413).
pub const CARRIED_FILES_MAX: u64 = 25 * 1024 * 1024;

/// The files and embeds of `message`. A 404 means the message is gone; files too large, or whose download is
/// refused, are [`RestError::Impossible`]: the relay fails and the original stays.
pub async fn fetch(http: &DiscordHttp, channel: u64, message: u64) -> Result<Carried, RestError> {
    let found = http.get_message(channel, message).await?;
    let list = |key: &str| found[key].as_array().cloned().unwrap_or_default();
    let attachments = list("attachments");
    let total: u64 = attachments.iter().filter_map(|a| a["size"].as_u64()).sum();
    if total > CARRIED_FILES_MAX {
        return Err(RestError::Impossible(format!(
            "its files take {} MiB, more than the {} MiB a repost carries",
            total.div_ceil(1024 * 1024),
            CARRIED_FILES_MAX / (1024 * 1024)
        )));
    }
    let mut files = Vec::with_capacity(attachments.len());
    for attachment in &attachments {
        let text = |key: &str| attachment[key].as_str().map(str::to_owned);
        let url = text("url").ok_or_else(|| RestError::Impossible("a file without a URL".into()))?;
        files.push(File {
            name: text("filename").unwrap_or_else(|| "file".into()),
            content_type: text("content_type"),
            description: text("description"),
            bytes: http.download(&url, attachment["size"].as_u64().unwrap_or(0)).await?,
        });
    }
    Ok(Carried {
        files,
        embeds: list("embeds").into_iter().filter(|e| super::is_own_embed(e["type"].as_str())).map(sendable).collect(),
    })
}

/// An embed as it can be sent: without the parts only Discord sets.
fn sendable(mut embed: Value) -> Value {
    if let Some(fields) = embed.as_object_mut() {
        for only_discord in ["type", "video", "provider"] {
            fields.remove(only_discord);
        }
    }
    embed
}

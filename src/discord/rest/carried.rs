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
    // A webhook can post neither: reposted without it, the sticker or poll would be lost with the original (found by
    // a review), so the relay fails and the original stays, as for files that cannot be carried.
    if !list("sticker_items").is_empty() {
        return Err(RestError::Impossible("it has a sticker, which a webhook cannot post".into()));
    }
    if !found["poll"].is_null() {
        return Err(RestError::Impossible("it has a poll, whose votes a repost would lose".into()));
    }
    // Reposted, buttons and menus would answer to this bot's application, not the agent's (found by a review).
    if !list("components").is_empty() {
        return Err(RestError::Impossible("it has buttons or menus, which only its author's app can answer".into()));
    }
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
    // The files by their address (without the signature Discord appends), for the embeds that show them.
    let own: Vec<(&str, &str)> = attachments
        .iter()
        .filter_map(|a| Some((without_query(a["url"].as_str()?), a["filename"].as_str().unwrap_or("file"))))
        .collect();
    let embeds = list("embeds").into_iter().filter(|e| super::is_own_embed(e["type"].as_str()));
    Ok(Carried { files, embeds: embeds.map(|embed| sendable(embed, &own)).collect(), flags: Default::default() })
}

/// An embed as it can be sent: without the parts only Discord sets, and showing the repost's copy of a file of the
/// message (`attachment://name`) where it showed the original's: that one goes with the original (found by a
/// review: the embed's image broke once the original was deleted, and the copy showed as a loose file).
fn sendable(mut embed: Value, own: &[(&str, &str)]) -> Value {
    if let Some(fields) = embed.as_object_mut() {
        for only_discord in ["type", "video", "provider"] {
            fields.remove(only_discord);
        }
        let shows = [
            ("image", "url", "proxy_url"),
            ("thumbnail", "url", "proxy_url"),
            ("author", "icon_url", "proxy_icon_url"),
            ("footer", "icon_url", "proxy_icon_url"),
        ];
        for (part, key, proxy) in shows {
            let Some(Value::Object(shown)) = fields.get_mut(part) else { continue };
            let url = shown.get(key).and_then(Value::as_str).map(without_query);
            if let Some((_, name)) = url.and_then(|url| own.iter().find(|(own, _)| *own == url)) {
                shown.insert(key.to_owned(), Value::String(format!("attachment://{name}")));
                shown.remove(proxy);
            }
        }
    }
    embed
}

/// A file's address without its query (Discord signs its attachment addresses with an expiry there).
fn without_query(url: &str) -> &str {
    url.split_once('?').map_or(url, |(address, _)| address)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discord::rest::budget::RestBudget;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-message server on a real socket: GET of message 2 in channel 1 answers `message` (given the server's
    /// address, for the files' addresses), any other path a file's bytes.
    async fn serving(message: impl FnOnce(&str) -> Value) -> DiscordHttp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let json = message(&base).to_string();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let json = json.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let head = String::from_utf8_lossy(&head);
                    let path = head.split(' ').nth(1).unwrap_or_default();
                    let body = if path.contains("/messages/") { json.into_bytes() } else { b"PNGDATA".to_vec() };
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                    let _ = socket.write_all(&body).await;
                });
            }
        });
        DiscordHttp::new("token", Some(&base), Arc::new(RestBudget::new(45)))
    }

    /// Found by a review: an embed showing the message's own file (sent as `attachment://chart.png`, given back as
    /// the original's signed address) kept pointing at the original's file, gone with the original, while the
    /// uploaded copy showed beside it as a loose file.
    #[tokio::test]
    async fn an_embed_showing_the_messages_own_file_shows_the_reposts_copy() {
        let http = serving(|base| {
            let url = format!("{base}/attachments/1/9/chart.png?ex=1&is=2&hm=3");
            serde_json::json!({
                "id": "2", "channel_id": "1", "content": "Weekly numbers",
                "attachments": [{"id": "9", "filename": "chart.png", "size": 7, "url": url, "proxy_url": url,
                                 "content_type": "image/png"}],
                "embeds": [{"type": "rich", "title": "Chart",
                            "image": {"url": url, "proxy_url": url, "width": 10, "height": 10},
                            "thumbnail": {"url": "https://example.org/logo.png"}}],
            })
        })
        .await;
        let carried = fetch(&http, 1, 2).await.expect("fetched");
        assert_eq!(carried.files.len(), 1);
        assert_eq!(&carried.files[0].bytes[..], b"PNGDATA");
        let embed = &carried.embeds[0];
        assert_eq!(embed["image"]["url"], "attachment://chart.png", "{embed}");
        assert!(embed["image"].get("proxy_url").is_none(), "{embed}");
        assert_eq!(embed["thumbnail"]["url"], "https://example.org/logo.png", "another address is left as it is");
    }

    /// Found by a review: a webhook cannot post a sticker, and a poll reposted loses its votes: carried over
    /// silently, they were lost with the original. The relay fails instead, and the original stays.
    #[tokio::test]
    async fn a_message_with_a_sticker_or_a_poll_cannot_be_carried_over() {
        let sticker = serde_json::json!({"id": "749054660769218631", "name": "Wave", "format_type": 1});
        let poll = serde_json::json!({"question": {"text": "Ship it?"}, "answers": []});
        let row = serde_json::json!([{"type": 1, "components": [{"type": 2, "style": 1, "label": "Ship", "custom_id": "s"}]}]);
        for (key, value) in [("sticker_items", serde_json::json!([sticker])), ("poll", poll), ("components", row)] {
            let http = serving(|_| {
                let mut message = serde_json::json!({"id": "2", "channel_id": "1", "content": "Shipped!",
                                                     "attachments": [], "embeds": []});
                message[key] = value;
                message
            })
            .await;
            let carried = fetch(&http, 1, 2).await;
            assert!(matches!(carried, Err(RestError::Impossible(_))), "{key}: {carried:?}");
        }
    }
}

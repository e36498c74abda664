//! Reading the bot's saved sessions from outside (a state file, or a row's JSON: [`super::phase_store`] fetches
//! them), in both formats the bench meets: compact (this build) and pretty-printed (builds before the channel
//! actors). Three things matter: `turnTimeoutAt`, `lastMessageId`, and when the history tail says the first timeout
//! was handled.

use serde_json::Value;

/// The running turn's deadline in Unix milliseconds, if the file says a turn runs.
pub fn turn_timeout_at_ms(text: &str) -> Option<i64> {
    let session: Value = serde_json::from_str(text).ok()?;
    let deadline = session.get("turnTimeoutAt")?.as_str()?;
    chrono::DateTime::parse_from_rfc3339(deadline).ok().map(|t| t.timestamp_millis())
}

/// The newest message id the bot has handled in the channel.
pub fn last_message_id(text: &str) -> Option<u64> {
    let session: Value = serde_json::from_str(text).ok()?;
    session.get("lastMessageId")?.as_str()?.parse().ok()
}

/// When the bot handled the first turn timeout its history tail holds (the event's time: the actor's clock when it
/// ended the turn, before the save), in Unix milliseconds.
pub fn first_timeout_ms(text: &str) -> Option<f64> {
    let session: Value = serde_json::from_str(text).ok()?;
    let event = session.get("history")?.as_array()?.iter().find(|e| e["event"] == "turn_timeout")?;
    let at = chrono::DateTime::parse_from_rfc3339(event["at"].as_str()?).ok()?;
    Some(at.timestamp_micros() as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_timeout_is_read_from_the_history_tail() {
        let text = r#"{"history":[
            {"at":"2026-11-21T11:07:50Z","round":1,"event":"session_started","details":{"roster":["pm"]}},
            {"at":"2026-11-21T11:07:56.1235Z","round":1,"agentId":"pm","event":"turn_timeout",
             "details":{"durationSeconds":6,"nextAgent":"pm"}},
            {"at":"2026-11-21T11:08:56Z","round":2,"agentId":"pm","event":"turn_timeout",
             "details":{"durationSeconds":60,"nextAgent":"pm"}}]}"#;
        assert_eq!(first_timeout_ms(text), Some(1_795_259_276_123.5));
        assert_eq!(first_timeout_ms(r#"{"history":[]}"#), None);
        assert_eq!(first_timeout_ms(r#"{"turnTimeoutAt":null}"#), None);
    }

    #[test]
    fn the_deadline_and_last_message_are_read_from_compact_and_pretty_files() {
        let compact =
            r#"{"version":1,"channelId":"7","turnTimeoutAt":"2026-11-21T11:07:56.123Z","lastMessageId":"1312"}"#;
        let pretty = "{\n  \"turnTimeoutAt\": \"2026-11-21T11:07:56.123Z\",\n  \"lastMessageId\": \"1312\"\n}\n";
        for text in [compact, pretty] {
            assert_eq!(turn_timeout_at_ms(text), Some(1_795_259_276_123));
            assert_eq!(last_message_id(text), Some(1312));
        }
    }

    #[test]
    fn a_stopped_session_or_a_torn_file_has_neither() {
        assert_eq!(turn_timeout_at_ms(r#"{"turnTimeoutAt":null,"lastMessageId":null}"#), None);
        assert_eq!(last_message_id(r#"{"turnTimeoutAt":null,"lastMessageId":null}"#), None);
        assert_eq!(turn_timeout_at_ms(r#"{"turnTimeoutAt":"2026-11-2"#), None);
    }
}

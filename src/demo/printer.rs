//! Prints a channel live, as a person watching it would see it: each message as it appears (time, author as shown,
//! text with mentions as names), edits, reactions, and messages that vanish.

use local_discord::LocalDiscord;
use local_discord::world::{SeenMessage, World};
use std::collections::BTreeMap;
use std::time::Duration;

/// A removed message longer than this (in characters, on one line) is shown by its gist.
const GIST_MAX: usize = 120;
/// How much of a long removed message's start (and of its last line) is shown.
const GIST_START: usize = 60;

/// Runs until the task is aborted.
pub async fn print_channel(server: LocalDiscord, channel: u64) {
    let mut shown: BTreeMap<u64, SeenMessage> = BTreeMap::new();
    loop {
        let changed = server
            .wait_for("a change in the channel", Duration::from_secs(3600), |w| {
                let now = w.view(channel);
                let before: Vec<&SeenMessage> = shown.values().collect();
                (now.iter().collect::<Vec<_>>() != before).then(|| (now, names(w)))
            })
            .await;
        let Ok((now, names)) = changed else { continue };
        for line in differences(&shown, &now, &names) {
            println!("{line}");
        }
        shown = now.into_iter().map(|m| (m.id, m)).collect();
    }
}

/// The lines that describe how the channel went from `before` to `now`.
pub fn differences(
    before: &BTreeMap<u64, SeenMessage>,
    now: &[SeenMessage],
    names: &BTreeMap<u64, String>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let time = chrono::Local::now().format("%H:%M:%S%.3f");
    for gone in before.values().filter(|old| !now.iter().any(|m| m.id == old.id)) {
        lines.push(format!("{time}  ✂ {}'s message was removed: \"{}\"", gone.author, gist(&gone.content, names)));
    }
    for message in now {
        match before.get(&message.id) {
            None => {
                let who =
                    if message.from_webhook { format!("{} (relayed)", message.author) } else { message.author.clone() };
                lines.push(format!("{time}  {who}: {}", indent(&readable(&message.content, names))));
                lines.extend(message.reactions.iter().map(|(emoji, _)| format!("{time}    {emoji} on it")));
            }
            Some(old) => {
                if old.content != message.content {
                    lines.push(format!(
                        "{time}  {} edited: {}",
                        message.author,
                        indent(&readable(&message.content, names))
                    ));
                }
                for (emoji, _) in message.reactions.iter().filter(|r| !old.reactions.iter().any(|o| o.0 == r.0)) {
                    lines.push(format!("{time}    {emoji} on {}'s message", message.author));
                }
            }
        }
    }
    lines
}

/// Every user's name by id, to show `<@id>` as `@name`.
fn names(w: &World) -> BTreeMap<u64, String> {
    w.users.values().map(|u| (u.id, u.name.clone())).collect()
}

/// Mentions and times as a person sees them: `<@123>` becomes `@PM`, `<t:1795861267:T>` the time in the local zone.
fn readable(text: &str, names: &BTreeMap<u64, String>) -> String {
    let mut out = text.to_owned();
    for (id, name) in names {
        out = out.replace(&format!("<@{id}>"), &format!("@{name}")).replace(&format!("<@!{id}>"), &format!("@{name}"));
    }
    local_times(&out, &chrono::Local)
}

/// Discord's timestamp markup (`<t:seconds>` or `<t:seconds:style>`), which a Discord client shows in its reader's
/// zone, written out in `zone` (found by a newcomer: the sandbox printed `!turn history` as raw `<t:…:T>`). The
/// relative style (`R`) is shown as the time, which stays true however late the line is read.
fn local_times<Z: chrono::TimeZone>(text: &str, zone: &Z) -> String
where
    Z::Offset: std::fmt::Display,
{
    static MARKUP: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"<t:(-?\d{1,12})(?::([tTdDfFR]))?>").expect("a valid pattern"));
    MARKUP
        .replace_all(text, |found: &regex::Captures| {
            let Some(at) = found[1].parse().ok().and_then(|s| chrono::DateTime::from_timestamp(s, 0)) else {
                return found[0].to_owned();
            };
            let format = match found.get(2).map_or("f", |style| style.as_str()) {
                "t" => "%H:%M",
                "T" | "R" => "%H:%M:%S",
                "d" => "%Y-%m-%d",
                "D" => "%-d %B %Y",
                "F" => "%A %-d %B %Y %H:%M",
                _ => "%-d %B %Y %H:%M",
            };
            at.with_timezone(zone).format(format).to_string()
        })
        .into_owned()
}

fn one_line(text: &str, names: &BTreeMap<u64, String>) -> String {
    readable(text, names).replace('\n', " ⏎ ")
}

/// A message that is gone, on one line: whole when short; else its start and its last line, where a signal that
/// made it vanish usually is (its full text was printed when it appeared).
fn gist(text: &str, names: &BTreeMap<u64, String>) -> String {
    let whole = one_line(text, names);
    if whole.chars().count() <= GIST_MAX {
        return whole;
    }
    let start: String = whole.chars().take(GIST_START).collect();
    let readable = readable(text, names);
    let last = readable.lines().rev().map(str::trim).find(|line| !line.is_empty()).unwrap_or_default();
    let mut end: String = last.chars().take(GIST_START).collect();
    if end.len() < last.len() {
        end.push('…');
    }
    format!("{} … {end}", start.trim_end())
}

/// Continuation lines of a multi-line message, indented under its first line.
fn indent(text: &str) -> String {
    text.replace('\n', "\n              ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(id: u64, author: &str, content: &str) -> SeenMessage {
        SeenMessage {
            id,
            author: author.into(),
            author_id: 7,
            from_webhook: false,
            content: content.into(),
            edited: false,
            reactions: Vec::new(),
            pinged: Vec::new(),
            created_ms: 0,
            flags: 0,
        }
    }

    #[test]
    fn new_edited_removed_and_reacted_messages_are_each_described() {
        let names = BTreeMap::from([(42, "PM".to_owned())]);
        let before: BTreeMap<u64, SeenMessage> =
            [seen(1, "dev", "part one"), seen(2, "pm", "bye TURN_COMPLETE")].into_iter().map(|m| (m.id, m)).collect();
        let mut edited = seen(1, "dev", "part one, two");
        edited.reactions.push(("✅".into(), 1));
        let now = vec![edited, seen(3, "turn-manager", "🎙️ <@42> (pm) has the floor")];
        let lines = differences(&before, &now, &names);
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(lines[0].ends_with("✂ pm's message was removed: \"bye TURN_COMPLETE\""));
        assert!(lines[1].ends_with("dev edited: part one, two"));
        assert!(lines[2].ends_with("✅ on dev's message"));
        assert!(lines[3].ends_with("turn-manager: 🎙️ @PM (pm) has the floor"));
    }

    #[test]
    fn discord_times_are_written_out_as_a_client_shows_them() {
        let utc = chrono::Utc;
        assert_eq!(local_times("<t:1795861267:T> turn_complete", &utc), "10:21:07 turn_complete");
        assert_eq!(local_times("at <t:1795861267:t>, <t:1795861267:d>", &utc), "at 10:21, 2026-11-28");
        assert_eq!(local_times("<t:1795861267>", &utc), "28 November 2026 10:21");
        assert_eq!(local_times("<t:1795861267:R>", &utc), "10:21:07");
        assert_eq!(local_times("<t:nope:T> <t:1795861267:X>", &utc), "<t:nope:T> <t:1795861267:X>", "not markup");
        let names = BTreeMap::from([(42, "PM".to_owned())]);
        assert!(readable("<t:1795861267:T> <@42>", &names).ends_with(" @PM"));
        assert!(!readable("<t:1795861267:T> <@42>", &names).contains("<t:"));
    }

    #[test]
    fn a_long_removed_message_is_shown_by_its_start_and_its_last_line() {
        let body = format!("Implemented the task.\n\n{}\n\nREADY_FOR_REVIEW: task-1", "- a change\n".repeat(20));
        let before = BTreeMap::from([(1, seen(1, "Developer", &body))]);
        let lines = differences(&before, &[], &BTreeMap::new());
        assert_eq!(lines.len(), 1);
        assert!(lines[0].ends_with(" … READY_FOR_REVIEW: task-1\""), "{}", lines[0]);
        assert!(lines[0].contains("removed: \"Implemented the task. ⏎  ⏎ - a change"), "{}", lines[0]);
        assert!(lines[0].chars().count() < 200, "{}", lines[0]);
    }
}

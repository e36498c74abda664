//! Announcement templates (spec 7): their defaults, the placeholders each may use, and rendering.

use super::session::effects::MESSAGE_CONTENT_LENGTH_MAX;
use std::collections::BTreeMap;

/// One kind of announcement, with its configuration key, default text and allowed placeholders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Template {
    TurnStart,
    Timeout,
    Silent,
    SessionStart,
    SessionStop,
    Paused,
    Resumed,
    Skipped,
    FloorGiven,
    Extended,
    RosterChanged,
    Passed,
    HandedOff,
    HandoffRefused,
    HandoffToSelf,
    Routed,
    TaskFinished,
    Kept,
    KeepsUsed,
    Progress,
    Escalated,
    Recorded,
    SessionEnded,
    UnknownSignal,
    SignalFailure,
    Benched,
    Unbenched,
    LoopDetected,
    MaxRounds,
}

impl Template {
    pub const ALL: [Template; 29] = [
        Template::TurnStart,
        Template::Timeout,
        Template::Silent,
        Template::SessionStart,
        Template::SessionStop,
        Template::Paused,
        Template::Resumed,
        Template::Skipped,
        Template::FloorGiven,
        Template::Extended,
        Template::RosterChanged,
        Template::Passed,
        Template::HandedOff,
        Template::HandoffRefused,
        Template::HandoffToSelf,
        Template::Routed,
        Template::TaskFinished,
        Template::Kept,
        Template::KeepsUsed,
        Template::Progress,
        Template::Escalated,
        Template::Recorded,
        Template::SessionEnded,
        Template::UnknownSignal,
        Template::SignalFailure,
        Template::Benched,
        Template::Unbenched,
        Template::LoopDetected,
        Template::MaxRounds,
    ];

    /// The key under `templates` in the configuration file.
    pub fn key(self) -> &'static str {
        match self {
            Template::TurnStart => "turnStart",
            Template::Timeout => "timeout",
            Template::Silent => "silent",
            Template::SessionStart => "sessionStart",
            Template::SessionStop => "sessionStop",
            Template::Paused => "paused",
            Template::Resumed => "resumed",
            Template::Skipped => "skipped",
            Template::FloorGiven => "floorGiven",
            Template::Extended => "extended",
            Template::RosterChanged => "rosterChanged",
            Template::Passed => "passed",
            Template::HandedOff => "handedOff",
            Template::HandoffRefused => "handoffRefused",
            Template::HandoffToSelf => "handoffToSelf",
            Template::Routed => "routed",
            Template::TaskFinished => "taskFinished",
            Template::Kept => "kept",
            Template::KeepsUsed => "keepsUsed",
            Template::Progress => "progress",
            Template::Escalated => "escalated",
            Template::Recorded => "recorded",
            Template::SessionEnded => "sessionEnded",
            Template::UnknownSignal => "unknownSignal",
            Template::SignalFailure => "signalFailure",
            Template::Benched => "benched",
            Template::Unbenched => "unbenched",
            Template::LoopDetected => "loopDetected",
            Template::MaxRounds => "maxRounds",
        }
    }

    pub fn default_text(self) -> &'static str {
        match self {
            Template::TurnStart => {
                "🎙️ <@{userId}> ({agent}) has the floor: {timeout}s. End your message with {signal}."
            }
            Template::Timeout => "⏱️ {agent} turn timed out after {duration}s",
            Template::Silent => "🤫 {agent} was silent for {seconds}s; the floor moves on.",
            Template::SessionStart => "▶️ Turn management started. Roster: {roster}.",
            Template::SessionStop => "⏹️ Turn management stopped in round {round}. History is kept.",
            Template::Paused => "⏸️ Paused. {agent} keeps the floor with {remaining}s left.",
            Template::Resumed => "▶️ Resumed. {agent} has {remaining}s left.",
            Template::Skipped => "⏭️ {agent}'s turn was skipped.",
            Template::FloorGiven => "👉 The floor goes to {agent}.",
            Template::Extended => "⏩ {agent}'s turn extended by {seconds}s: {remaining}s left.",
            Template::RosterChanged => "🔀 Roster: {roster}.",
            Template::Passed => "⏭️ {agent} passes.",
            Template::HandedOff => "🤝 {agent} hands the floor to {target}.",
            Template::HandoffRefused => {
                "⚠️ There is no {target} in this session (roster: {roster}); {agent} keeps the floor."
            }
            Template::HandoffToSelf => {
                "⚠️ {agent} already has the floor: hand it to someone else (roster: {roster}), or end the turn."
            }
            Template::Routed => "📋 Task {task}: {stage}. Over to {target}.",
            Template::TaskFinished => "✅ Task {task} is done.",
            Template::Kept => {
                "🔁 <@{userId}> ({agent}) keeps the floor for another turn: {timeout}s ({count} of {maxKeeps})."
            }
            Template::KeepsUsed => "🔁 {agent} kept the floor {maxKeeps} times in a row; the floor moves on.",
            Template::Progress => "📈 {agent} is at {percent}%.",
            Template::Escalated => {
                "🚨 {agent} needs a person: {reason}. The session is paused; a manager's `resume` goes on."
            }
            Template::Recorded => "",
            Template::SessionEnded => "🏁 {agent} ended the session ({signal}). History is kept.",
            Template::UnknownSignal => {
                "⚠️ `{line}` is not a signal here ({count} of {limit}). Valid signals: {signals}."
            }
            Template::SignalFailure => {
                "⚠️ {agent} sent {count} unrecognised signals in a row; its turn ends as if it had timed out."
            }
            Template::Benched => {
                "🪑 {agent} timed out {count} times in a row and is benched: skipped until it speaks again or a manager adds it back."
            }
            Template::Unbenched => "🪑 {agent} is back in the rotation.",
            Template::LoopDetected => {
                "🔁 The same message came {count} times in a row; the session is paused. A manager's `resume` goes on."
            }
            Template::MaxRounds => "🏁 {round} rounds done: turn management stopped. History is kept.",
        }
    }

    /// Placeholders this template may use; anything else in braces is a configuration error.
    pub fn placeholders(self) -> &'static [&'static str] {
        const PERSONA: &[&str] = &["agent", "name", "round", "roster"];
        match self {
            Template::TurnStart => &["agent", "name", "userId", "timeout", "signal", "round", "roster"],
            Template::Timeout => &["agent", "name", "duration", "round", "roster"],
            Template::Silent => &["agent", "name", "seconds", "round", "roster"],
            Template::SessionStart | Template::RosterChanged | Template::SessionStop => &["roster", "round"],
            Template::Paused | Template::Resumed => &["agent", "name", "remaining", "round", "roster"],
            Template::Extended => &["agent", "name", "seconds", "remaining", "round", "roster"],
            Template::Skipped | Template::FloorGiven | Template::Passed | Template::Unbenched => PERSONA,
            Template::HandedOff | Template::HandoffRefused | Template::HandoffToSelf => {
                &["agent", "name", "target", "round", "roster"]
            }
            Template::Routed => &["agent", "name", "task", "stage", "target", "round", "roster"],
            Template::TaskFinished => &["agent", "name", "task", "target", "round", "roster"],
            Template::Kept => &["agent", "name", "userId", "timeout", "count", "maxKeeps", "reason", "round", "roster"],
            Template::KeepsUsed => &["agent", "name", "maxKeeps", "round", "roster"],
            Template::Progress => &["agent", "name", "percent", "remaining", "round", "roster"],
            Template::Escalated => &["agent", "name", "reason", "signal", "round", "roster"],
            Template::Recorded => &["agent", "name", "signal", "payload", "round", "roster"],
            Template::SessionEnded => &["agent", "name", "signal", "round", "roster"],
            Template::UnknownSignal => &["agent", "name", "line", "signals", "count", "limit", "round", "roster"],
            Template::SignalFailure | Template::Benched => &["agent", "name", "count", "round", "roster"],
            Template::LoopDetected => &["agent", "name", "count", "text", "round", "roster"],
            Template::MaxRounds => &["round", "roster"],
        }
    }

    /// Announcements a channel may do without: an empty text in the configuration means "say nothing". The others
    /// carry what an agent or a person must hear (whose turn it is, why the session stopped).
    pub fn may_be_silent(self) -> bool {
        matches!(
            self,
            Template::Passed
                | Template::Silent
                | Template::HandedOff
                | Template::Routed
                | Template::TaskFinished
                | Template::KeepsUsed
                | Template::Progress
                | Template::Recorded
                | Template::Unbenched
                | Template::Benched
        )
    }

    /// Checks a configured text: every `{placeholder}` must be one this template offers, and the text without them
    /// must fit in a Discord message (else it would be cut when posted, a mention past the cut lost).
    pub fn check(self, text: &str) -> Result<(), String> {
        for name in placeholders_in(text) {
            if !self.placeholders().contains(&name) {
                return Err(format!(
                    "uses {{{name}}}, which this announcement does not offer; available: {}",
                    self.placeholders().iter().map(|p| format!("{{{p}}}")).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        let placeholders: usize = placeholders_in(text).map(|name| name.chars().count() + "{}".len()).sum();
        let length = text.chars().count() - placeholders;
        if length > MESSAGE_CONTENT_LENGTH_MAX {
            return Err(format!(
                "is {length} characters without its placeholders, more than the 2,000 Discord allows in a message: it \
                 would be cut, and a mention past the cut lost"
            ));
        }
        Ok(())
    }
}

/// The first `{` of `text` that no `}` closes before the next `{` or the end, with what follows it (a few words):
/// a placeholder meant and mistyped (`({agent) has the floor`) is shown as written, never filled in.
pub fn unclosed_brace(text: &str) -> Option<String> {
    let piece = text.split('{').skip(1).find(|piece| !piece.contains('}'))?;
    let shown: String = piece.chars().take(20).collect();
    let cut = if shown.len() < piece.len() { "…" } else { "" };
    Some(format!("{{{shown}{cut}"))
}

fn placeholders_in(text: &str) -> impl Iterator<Item = &str> {
    text.split('{').skip(1).filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

/// How much of an agent's text an announcement quotes (the rest is cut with `…`).
pub const QUOTED_TEXT_MAX_CHARS: usize = 80;

/// Agent text made safe to quote inside a code span (`` `{line}` ``): a backtick in it would close the span and let
/// the rest be read as markdown (bold, headings, mentions shown as mentions), so backticks become `'`; line breaks and
/// other control characters become spaces; the text is cut to [`QUOTED_TEXT_MAX_CHARS`].
pub fn quotable(text: &str) -> String {
    quotable_within(text, QUOTED_TEXT_MAX_CHARS)
}

/// [`quotable`], cut to `max` characters.
pub fn quotable_within(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| match c {
            '`' => '\'',
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => ' ',
            c => c,
        })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        return flat.to_owned();
    }
    let kept: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

/// The configured text of every template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Templates(BTreeMap<Template, String>);

impl Default for Templates {
    fn default() -> Self {
        Self(Template::ALL.iter().map(|t| (*t, t.default_text().to_owned())).collect())
    }
}

impl Templates {
    pub fn set(&mut self, template: Template, text: String) {
        self.0.insert(template, text);
    }

    pub fn text(&self, template: Template) -> &str {
        self.0.get(&template).map_or(template.default_text(), String::as_str)
    }

    /// Fills `template` with `values`; placeholders without a value are left as written.
    pub fn render(&self, template: Template, values: &[(&str, String)]) -> String {
        let mut out = String::new();
        let mut rest = self.text(template);
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            match after.split_once('}') {
                Some((name, tail)) if values.iter().any(|(k, _)| *k == name) => {
                    out.push_str(&values.iter().find(|(k, _)| *k == name).expect("checked").1);
                    rest = tail;
                }
                _ => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_default_renders_the_seed_text() {
        let text = Templates::default().render(Template::Timeout, &[("agent", "pm".into()), ("duration", "90".into())]);
        assert_eq!(text, "⏱️ pm turn timed out after 90s");
    }

    #[test]
    fn turn_start_default_renders_the_spec_text() {
        let values = [
            ("userId", "42".to_owned()),
            ("agent", "pm".into()),
            ("timeout", "90".into()),
            ("signal", "TURN_COMPLETE".into()),
        ];
        let text = Templates::default().render(Template::TurnStart, &values);
        assert_eq!(text, "🎙️ <@42> (pm) has the floor: 90s. End your message with TURN_COMPLETE.");
    }

    #[test]
    fn every_default_uses_only_its_own_placeholders() {
        for template in Template::ALL {
            assert_eq!(template.check(template.default_text()), Ok(()), "{template:?}");
            assert!(template.may_be_silent() || !template.default_text().is_empty(), "{template:?}");
        }
    }

    #[test]
    fn unknown_placeholder_is_refused_with_the_available_ones() {
        let err = Template::Timeout.check("{agent} late by {lateness}").unwrap_err();
        assert!(err.contains("{lateness}") && err.contains("{duration}"), "{err}");
    }

    #[test]
    fn quoted_agent_text_has_no_backticks_or_line_breaks_and_is_bounded() {
        assert_eq!(quotable("A: `x` ```rust\n# h\r\u{2028}y "), "A: 'x' '''rust # h  y");
        let long = quotable(&"é".repeat(500));
        assert_eq!(long.chars().count(), QUOTED_TEXT_MAX_CHARS);
        assert!(long.ends_with('…'));
        assert_eq!(quotable("SHORT: ok"), "SHORT: ok");
    }

    #[test]
    fn a_brace_never_closed_is_found_with_what_follows_it() {
        assert_eq!(
            unclosed_brace("<@{userId}> ({agent) has the floor: {timeout}s"),
            Some("{agent) has the floor…".into())
        );
        assert_eq!(unclosed_brace("{agent} ends with {"), Some("{".into()));
        assert_eq!(unclosed_brace("<@{userId}> ({agent}) has the floor"), None);
        assert_eq!(unclosed_brace("no braces"), None);
    }

    #[test]
    fn configured_text_replaces_the_default_and_unfilled_braces_stay() {
        let mut templates = Templates::default();
        templates.set(Template::Skipped, "skip {agent} {json: 1}".into());
        assert_eq!(templates.render(Template::Skipped, &[("agent", "dev".into())]), "skip dev {json: 1}");
    }
}

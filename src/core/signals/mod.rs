//! The signal grammar (spec 4): rules as data, and what a message's signals are.
//!
//! A message is matched against every rule its author may use; when several match, the highest `priority` wins and
//! ties go to the rule listed first. What the channel shows is the message without every match of every rule that
//! matched and strips. `TURN_COMPLETE` at the end of the message is simply the default rule.
//!
//! - [`rules`]: one compiled rule and its action.
//! - [`config`]: reading `signals` (and the older `signal`) from the configuration, and checking it.
//! - [`text`]: invisible characters, and removing matched spans.

pub mod config;
pub mod rules;
pub mod text;

#[cfg(test)]
mod legacy_tests;
#[cfg(test)]
mod tests;

use crate::core::ids::PersonaId;
use regex::Regex;
pub use rules::{Action, At, Found, Rule};
use std::sync::LazyLock;

/// The default end-of-turn keyword.
pub const DEFAULT_KEYWORD: &str = "TURN_COMPLETE";
/// An upper-case word and a colon at a line start: what looks like a signal (seed 000's recovery).
pub const DEFAULT_UNKNOWN_PATTERN: &str = r"[A-Z][A-Z0-9_]+:";

/// The recovery rules (spec 4.2), each configurable.
#[derive(Clone, Debug, PartialEq)]
pub struct Recovery {
    /// How many unknown signals in a row count as a timeout of the turn; 0: never.
    pub unknown_limit: u32,
    /// Timeouts in a row after which a persona is benched; 0: never.
    pub bench_after: u32,
    /// The same text (or `keep`/`escalate` payload) this many times in a row pauses the session; 0: never.
    pub loop_after: u32,
    /// The session ends when this many rounds are done.
    pub max_rounds: Option<u32>,
    /// A signal written within this long after the deadline still counts.
    pub grace_seconds: u32,
    /// Auto-detection: a turn ends after this much silence following a message from its holder.
    pub silence_seconds: Option<u32>,
    /// Auto-detection: phrases (case-insensitive) that end a turn like a signal.
    pub completion_phrases: Vec<String>,
}

impl Default for Recovery {
    fn default() -> Self {
        Self {
            unknown_limit: 3,
            bench_after: 3,
            loop_after: 3,
            max_rounds: None,
            grace_seconds: 0,
            silence_seconds: None,
            completion_phrases: Vec::new(),
        }
    }
}

/// The configured rules, in the order they were listed, and the recovery settings.
#[derive(Clone, Debug)]
pub struct SignalRules {
    rules: Vec<Rule>,
    /// What looks like a signal; `None`: unknown-signal recovery is off.
    unknown: Option<Regex>,
    pub recovery: Recovery,
    /// `signal.turnComplete` (or the default keyword), when it is among the rules: what announcements name, rather
    /// than an alternative listed before it.
    keyword: Option<String>,
}

/// The signal a message carries: the winning rule, its groups, and what to show instead of the message.
#[derive(Clone, Debug)]
pub struct Detected<'r> {
    pub rule: &'r Rule,
    pub payload: Option<String>,
    pub task: Option<String>,
    /// The text to show; `None` when nothing is left (or the winning rule does not strip, and nothing matched that
    /// does: then the message is shown as it is and `stripped` is false).
    pub display: Option<String>,
    /// Whether anything was removed from the message.
    pub stripped: bool,
}

static DEFAULT_RULES: LazyLock<SignalRules> = LazyLock::new(|| {
    SignalRules::new(vec![keyword_rule(DEFAULT_KEYWORD)], Some(DEFAULT_UNKNOWN_PATTERN), Recovery::default())
        .expect("the default rule compiles")
        .naming(Some(DEFAULT_KEYWORD.to_owned()))
});

impl Default for SignalRules {
    fn default() -> Self {
        DEFAULT_RULES.clone()
    }
}

/// A plain keyword that ends the turn at the end of the message: the default rule, and how the older
/// `signal.turnComplete` and `signal.alternatives` are read.
pub fn keyword_rule(keyword: &str) -> Rule {
    Rule::new(keyword.to_owned(), regex::escape(keyword), At::End, true, 0, Vec::new(), Action::Complete)
        .expect("an escaped keyword compiles")
}

impl SignalRules {
    /// Rules in their listed order; `unknown_pattern` is matched at line starts.
    pub fn new(rules: Vec<Rule>, unknown_pattern: Option<&str>, recovery: Recovery) -> Result<Self, String> {
        let unknown = unknown_pattern.map(Self::unknown_regex).transpose()?;
        Ok(Self { rules, unknown, recovery, keyword: None })
    }

    /// The same rules, announcements naming `keyword` (`signal.turnComplete`) as what ends a turn.
    pub fn naming(mut self, keyword: Option<String>) -> Self {
        self.keyword = keyword;
        self
    }

    /// `unknownPattern` as it is matched: at a line's start, after its indentation.
    pub fn unknown_regex(pattern: &str) -> Result<Regex, String> {
        rules::anchored_regex(pattern, &format!(r"(?mR)^[ \t]*(?:{pattern})"))
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether lines that look like a signal but match no rule are looked for: not when `unknownPattern` is null or
    /// empty.
    pub fn detects_unknown(&self) -> bool {
        self.unknown.is_some()
    }

    /// The signal `text` carries for `author`, if any: the highest priority among the rules that match.
    pub fn detect(&self, text: &str, author: &PersonaId) -> Option<Detected<'_>> {
        self.detect_among(text, author, false)
    }

    /// [`Signals::detect`] among the rules that end the turn only (with `ending`), for an edit of a message whose
    /// other signal was acted on already.
    pub fn detect_among(&self, text: &str, author: &PersonaId, ending: bool) -> Option<Detected<'_>> {
        let copy = text::normalized(text);
        let mut best: Option<(&Rule, Found)> = None;
        for rule in self.rules.iter().filter(|r| r.allows(author) && (!ending || r.action.ends_turn())) {
            let Some(found) = rule.find(&copy) else { continue };
            if best.as_ref().is_none_or(|(b, _)| rule.priority > b.priority) {
                best = Some((rule, found));
            }
        }
        let (rule, found) = best?;
        let spans = self.strip_spans(&copy, author);
        let stripped = !spans.is_empty();
        let display = if stripped { text::remove_spans(text, spans) } else { text::trim_blank(text).to_owned() };
        Some(Detected {
            rule,
            payload: found.payload,
            task: found.task,
            display: (!display.is_empty()).then_some(display),
            stripped,
        })
    }

    /// Whether `text` carries a signal for `author`.
    pub fn has_signal(&self, text: &str, author: &PersonaId) -> bool {
        self.has_signal_among(text, author, false)
    }

    /// [`Signals::has_signal`] among the rules that end the turn only (with `ending`).
    pub fn has_signal_among(&self, text: &str, author: &PersonaId, ending: bool) -> bool {
        let copy = text::normalized(text);
        self.rules.iter().any(|r| r.allows(author) && (!ending || r.action.ends_turn()) && r.find(&copy).is_some())
    }

    /// Whether `text` carries a signal whoever wrote it (rules limited by `from` included): for tools that watch
    /// the channel from outside, such as the soak test.
    pub fn has_any_signal(&self, text: &str) -> bool {
        let copy = text::normalized(text);
        self.rules.iter().any(|r| r.find(&copy).is_some())
    }

    /// The message as the channel should show it: every match of every stripping rule removed, the rest trimmed.
    pub fn strip(&self, text: &str, author: &PersonaId) -> String {
        let copy = text::normalized(text);
        text::remove_spans(text, self.strip_spans(&copy, author))
    }

    fn strip_spans(&self, copy: &str, author: &PersonaId) -> Vec<(usize, usize)> {
        self.rules.iter().filter(|r| r.strip && r.allows(author)).flat_map(|r| r.spans(copy)).collect()
    }

    /// Every match of every rule `author` may use, stripping or not.
    fn match_spans(&self, copy: &str, author: &PersonaId) -> Vec<(usize, usize)> {
        self.rules.iter().filter(|r| r.allows(author)).flat_map(|r| r.spans(copy)).collect()
    }

    /// The first line of `text` that looks like a signal (by `unknownPattern`) and that no rule `author` may use
    /// matched: beside a signal a rule acted on (`CHECKPOINT: step-1`, itself an upper-case word and a colon), a
    /// mistyped one is still found (spec 4.2; before, such a line was only looked for in a message with no signal).
    pub fn unknown_signal(&self, text: &str, author: &PersonaId) -> Option<String> {
        let copy = text::normalized(text);
        let mut looks_like = self.unknown.as_ref()?.find_iter(&copy).peekable();
        looks_like.peek()?; // most messages have no such line: the rules are not run again for them
        let matched = self.match_spans(&copy, author);
        let a_rule_matched = |m: &regex::Match| matched.iter().any(|&(start, end)| start < m.end() && m.start() < end);
        let found = looks_like.find(|m| !a_rule_matched(m))?;
        let line_end = copy[found.start()..].find(['\n', '\r']).map_or(copy.len(), |i| found.start() + i);
        Some(text::trim_blank(&copy[found.start()..line_end]).to_owned())
    }

    /// The end of `text`, from the keyword's line, when it would end with a signal of an `end` rule `author` may use
    /// but for Markdown marks or punctuation after the keyword: alone on its line (`**TURN_COMPLETE**`, a line
    /// `TURN_COMPLETE.`, a code block's closing fence), or after words, wrapped in the same marks on both sides and
    /// nothing after them (`Done. **TURN_COMPLETE**`). It looks like a signal to the people in the channel, and
    /// agents (language models) write it so: answered as an unknown signal, the agent is told within its turn, where
    /// before the turn timed out unsaid. Prose naming the keyword (`I will write TURN_COMPLETE.`, `I will end my turns
    /// with `TURN_COMPLETE`.`) and a question (`TURN_COMPLETE?`) are not. Nothing when `unknownPattern` is off.
    pub fn near_miss(&self, text: &str, author: &PersonaId) -> Option<String> {
        self.unknown.as_ref()?;
        let copy = text::normalized(text);
        let written = text::trim_blank(&copy);
        let marks = |c: char| "*_~`".contains(c);
        let bare = written.trim_end_matches(|c: char| text::is_blank(c) || marks(c) || ".,;:!".contains(c));
        if bare.len() == written.len() || bare.is_empty() {
            return None;
        }
        let found = self.rules.iter().filter(|r| r.at == At::End && r.allows(author)).find_map(|r| r.find(bare))?;
        let start = bare[..found.start].rfind(['\n', '\r']).map_or(0, |i| i + 1);
        let (before, after) = (&bare[start..found.start], &written[bare.len()..]);
        let alone = before.chars().all(|c| text::is_blank(c) || marks(c));
        // After words, only wrapped as emphasis or code is: with a full stop after it, it is a sentence naming it.
        let opening = &before[before.trim_end_matches(marks).len()..];
        let wrapped = !opening.is_empty() && text::trim_blank(after) == opening.chars().rev().collect::<String>();
        (alone || wrapped).then(|| text::trim_blank(&written[start..]).to_owned())
    }

    /// What of `text` gets the unknown-signal reply: its first line that looks like a signal and is none
    /// ([`SignalRules::unknown_signal`]), or else its near miss of a signal ending the turn
    /// ([`SignalRules::near_miss`]).
    pub fn signal_like(&self, text: &str, author: &PersonaId) -> Option<String> {
        self.unknown_signal(text, author).or_else(|| self.near_miss(text, author))
    }

    /// The names of the signals `author` may use, for the reply to an unknown one.
    pub fn names_for(&self, author: &PersonaId) -> Vec<&str> {
        self.rules.iter().filter(|r| r.allows(author)).map(|r| r.name.as_str()).collect()
    }

    /// What announcements tell `holder` to end its turn with: `signal.turnComplete`, or the first `complete` rule it
    /// may use (its keyword, or its name), or the first other rule ending a turn it may use. (Before, an alternative
    /// keyword, or a rule only another persona may use, could be named: found by a review.)
    pub fn turn_end_hint(&self, holder: &PersonaId) -> String {
        if let Some(keyword) = &self.keyword {
            return keyword.clone();
        }
        let usable = || self.rules.iter().filter(|r| r.allows(holder));
        let complete = usable().find(|r| r.action == Action::Complete);
        let rule = complete.or_else(|| usable().find(|r| r.action.ends_the_turn()));
        let phrase = || self.recovery.completion_phrases.first().cloned();
        rule.map(|r| r.literal().unwrap_or(&r.name).to_owned()).or_else(phrase).unwrap_or_default()
    }

    /// Whether `text` contains one of the completion phrases (auto-detection), case-insensitively.
    pub fn completion_phrase(&self, text: &str) -> Option<&str> {
        if self.recovery.completion_phrases.is_empty() {
            return None;
        }
        let lower = text.to_lowercase();
        self.recovery.completion_phrases.iter().find(|p| lower.contains(&p.to_lowercase())).map(String::as_str)
    }
}

/// A progress payload as a percentage, clamped to 0-100 (seed 002): `45`, `45%`, `99.6` (rounded), `150` (100).
/// `None` when it holds no number.
pub fn percent(payload: &str) -> Option<u8> {
    let digits = text::trim_blank(payload).trim_end_matches('%').trim();
    let value: f64 = digits.parse().ok().filter(|v: &f64| v.is_finite())?;
    Some(value.round().clamp(0.0, 100.0) as u8)
}

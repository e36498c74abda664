//! One signal rule (spec 4.2): where its pattern may match, what it does, who may use it. Compiled once from the
//! configuration; see [`super::config`] for how rules are read and checked.

use super::text::normalized;
use crate::core::ids::PersonaId;
use regex::{Captures, Regex};

/// Where a rule's pattern may match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// It must end the message, after trailing whitespace (seed 004's `TURN_COMPLETE\s*$`).
    End,
    /// Anywhere, anchored at a line start (seed 001's `^READY_FOR_REVIEW:\s*(\S+)` in multi-line mode).
    Line,
    /// Anywhere in the text (seeds 002 and 003's tags).
    Anywhere,
}

impl At {
    pub const NAMES: [&'static str; 3] = ["end", "line", "anywhere"];

    pub fn parse(name: &str) -> Option<At> {
        match name {
            "end" => Some(At::End),
            "line" => Some(At::Line),
            "anywhere" => Some(At::Anywhere),
            _ => None,
        }
    }
}

/// What a rule does when it wins (spec 4.2's table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// End the turn; the floor goes to the next in the roster.
    Complete,
    /// End the turn with nothing to say; nothing is shown.
    Pass,
    /// End the turn; the floor goes to the persona named by `payload`, or to `to`.
    Handoff { to: Option<PersonaId> },
    /// End the turn; the floor goes to `to`; the task (group `task`, else `payload`) moves to `stage`.
    Route { to: PersonaId, stage: String },
    /// The task is done; the floor goes to `to`, or the next in the roster.
    FinishTask { to: Option<PersonaId> },
    /// The persona keeps the floor for another turn, at most `max_keeps` times in a row.
    Keep { max_keeps: u32 },
    /// Record the percentage in `payload` and extend the deadline by `extend_seconds`, once per turn.
    Progress { extend_seconds: u32 },
    /// Pause the session and call the managers, with `payload` as the reason.
    Escalate,
    /// Only record the signal and its payload; the turn goes on.
    Record,
    /// End the session.
    End,
}

impl Action {
    /// Whether the signal ends the holder's turn (the floor moves, or the session ends).
    pub fn ends_the_turn(&self) -> bool {
        matches!(
            self,
            Action::Complete
                | Action::Pass
                | Action::Handoff { .. }
                | Action::Route { .. }
                | Action::FinishTask { .. }
                | Action::End
        )
    }

    pub const NAMES: [&'static str; 10] =
        ["complete", "pass", "handoff", "route", "finishTask", "keep", "progress", "escalate", "record", "end"];

    pub fn name(&self) -> &'static str {
        match self {
            Action::Complete => "complete",
            Action::Pass => "pass",
            Action::Handoff { .. } => "handoff",
            Action::Route { .. } => "route",
            Action::FinishTask { .. } => "finishTask",
            Action::Keep { .. } => "keep",
            Action::Progress { .. } => "progress",
            Action::Escalate => "escalate",
            Action::Record => "record",
            Action::End => "end",
        }
    }

    /// Whether the action ends the holder's turn (or the session) when it wins.
    pub fn ends_turn(&self) -> bool {
        !matches!(self, Action::Progress { .. } | Action::Record | Action::Escalate)
    }

    /// The personas the action names, for checking them against the persona files.
    pub fn target(&self) -> Option<&PersonaId> {
        match self {
            Action::Handoff { to } | Action::FinishTask { to } => to.as_ref(),
            Action::Route { to, .. } => Some(to),
            _ => None,
        }
    }
}

/// A compiled rule.
#[derive(Clone, Debug)]
pub struct Rule {
    pub name: String,
    /// The pattern as written in the configuration.
    pub pattern: String,
    pub at: At,
    pub strip: bool,
    pub priority: i64,
    /// The personas allowed to use it; empty: every persona.
    pub from: Vec<PersonaId>,
    pub action: Action,
    /// Its index in `signals.rules`, for naming it in problems; `None` for the default rule and the older keywords.
    pub listed_at: Option<usize>,
    /// The pattern with its anchoring: `(?:p)\s*\z` for `end`, `(?m)^(?:p)` for `line`.
    regex: Regex,
}

/// One match of a rule in a message: its span in the text, and its named groups, trimmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub start: usize,
    pub end: usize,
    pub payload: Option<String>,
    pub task: Option<String>,
}

impl Rule {
    /// Compiles `pattern` anchored as `at` says. The error is the regex crate's, for the configuration check.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        pattern: String,
        at: At,
        strip: bool,
        priority: i64,
        from: Vec<PersonaId>,
        action: Action,
    ) -> Result<Rule, String> {
        // Invisible characters are spaces by the time the regex sees the text, so `\s` covers them.
        let anchored = match at {
            At::End => format!(r"(?:{pattern})\s*\z"),
            At::Line => format!(r"(?mR)^[ \t]*(?:{pattern})"),
            At::Anywhere => pattern.clone(),
        };
        let regex = anchored_regex(&pattern, &anchored)?;
        Ok(Rule { name, pattern, at, strip, priority, from, action, listed_at: None, regex })
    }

    /// The named groups the pattern defines.
    pub fn group_names(&self) -> impl Iterator<Item = &str> {
        self.regex.capture_names().flatten()
    }

    /// Whether `author` may use this rule.
    pub fn allows(&self, author: &PersonaId) -> bool {
        self.from.is_empty() || self.from.contains(author)
    }

    /// The first match in `normalized` (the text with invisible characters as spaces), if any. A match of nothing
    /// but whitespace (the anchor's, around a pattern that matched nothing) is none: a signal is something written
    /// (`\b(DONE)?` would otherwise end every turn at a word's end).
    pub fn find(&self, normalized: &str) -> Option<Found> {
        // A plain search first: it is far cheaper than one with groups (an `end` rule is searched from the end),
        // and most messages carry no signal.
        let whole = self.regex.find_iter(normalized).find(written)?;
        self.regex.captures_at(normalized, whole.start()).map(|c| found(&c))
    }

    /// Whether the pattern matches an empty message: a mistake, refused by the configuration's check.
    pub fn matches_empty(&self) -> bool {
        self.regex.is_match("")
    }

    /// Every match, for stripping: for `end`, the repeated keyword at the very end (`Done. X\nX` loses both).
    /// Matches of nothing but whitespace are none (see [`Rule::find`]).
    pub fn spans(&self, normalized: &str) -> Vec<(usize, usize)> {
        match self.at {
            At::End => {
                let mut spans = Vec::new();
                let mut text = normalized;
                // A match of nothing written strips nothing more (and would be found again for ever: found by a
                // review).
                while let Some(m) = self.regex.find(text).filter(written) {
                    let start = text[..m.start()].trim_end().len();
                    spans.push((start, m.end()));
                    text = &text[..start];
                    if start == 0 {
                        break;
                    }
                }
                spans
            }
            At::Line | At::Anywhere => {
                self.regex.find_iter(normalized).filter(written).map(|m| (m.start(), m.end())).collect()
            }
        }
    }

    /// The literal text the rule stands for, when its pattern is plain text (`TURN_COMPLETE`), for announcements.
    pub fn literal(&self) -> Option<&str> {
        (regex::escape(&self.pattern) == self.pattern).then_some(self.pattern.as_str())
    }
}

/// Whether a match holds something written: not nothing, nor only whitespace (invisible characters are spaces in
/// the normalized text).
fn written(m: &regex::Match) -> bool {
    !m.as_str().trim().is_empty()
}

fn found(c: &Captures) -> Found {
    let whole = c.get(0).expect("group 0 always matches");
    let group =
        |name: &str| c.name(name).map(|m| super::text::trim_blank(m.as_str()).to_owned()).filter(|s| !s.is_empty());
    Found { start: whole.start(), end: whole.end(), payload: group("payload"), task: group("task") }
}

/// `anchored`, the user's `pattern` wrapped as it is used, compiled. The pattern is compiled alone first, and its
/// own error said: wrapped, its error could be the wrapper's (a trailing `\` escapes the closing parenthesis, said as
/// an unclosed group), and an unbalanced pattern could even compile, its parentheses closed by the wrapper's, and
/// match outside its anchor (`DONE)|(READY` at the end: `DONE` anywhere; found by a review). A pattern that compiles alone but
/// not wrapped: under `(?x)` a `#` comment runs to the end of the line, over the wrapper's closing parenthesis.
pub(super) fn anchored_regex(pattern: &str, anchored: &str) -> Result<Regex, String> {
    Regex::new(pattern).map_err(|own| compact_regex_error(&own))?;
    Regex::new(anchored).map_err(|_| {
        "does not compile where it is used, after its anchor: under `(?x)`, end a `#` comment with a new line (`\\n` \
         in JSON)"
            .to_owned()
    })
}

/// The regex crate's error on one line (its own is a multi-line drawing).
fn compact_regex_error(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().rev().find(|l| l.trim_start().starts_with("error:")).unwrap_or(&text);
    format!("does not compile: {}", last.trim().trim_start_matches("error: "))
}

/// Matches `rule` against `text`; a convenience for tests and tools.
pub fn find_in(rule: &Rule, text: &str) -> Option<Found> {
    rule.find(&normalized(text))
}

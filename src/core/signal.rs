//! End-of-turn signal detection and stripping (spec 4.1, seed 004).
//!
//! A message ends a turn when, after trailing whitespace, it ends with a keyword: the seed's pattern
//! `TURN_COMPLETE\s*$`, case-sensitive, nowhere else in the message. What the channel shows is the message with
//! `\s*KEYWORD\s*$` removed and the rest trimmed.

use regex::Regex;
use std::sync::LazyLock;

/// The default end-of-turn keyword.
pub const DEFAULT_KEYWORD: &str = "TURN_COMPLETE";

/// A detected end-of-turn signal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignalMatch {
    /// Which keyword ended the message (the main one or an alternative).
    pub keyword: String,
    /// The text to show in the channel; `None` when nothing is left after stripping.
    pub display: Option<String>,
}

/// Detects and strips the configured end-of-turn keywords. Built once from the configuration.
#[derive(Clone, Debug)]
pub struct SignalMatcher {
    detect: Regex,
    strip: Regex,
}

static DEFAULT_MATCHER: LazyLock<SignalMatcher> =
    LazyLock::new(|| SignalMatcher::new(DEFAULT_KEYWORD, &[]).expect("default keyword is valid"));

impl Default for SignalMatcher {
    fn default() -> Self {
        DEFAULT_MATCHER.clone()
    }
}

impl SignalMatcher {
    /// Builds a matcher for `keyword` and its `alternatives`, each matched literally.
    pub fn new(keyword: &str, alternatives: &[String]) -> Result<Self, String> {
        let keywords: Vec<&str> = std::iter::once(keyword).chain(alternatives.iter().map(String::as_str)).collect();
        if let Some(bad) = keywords.iter().find(|k| k.trim().is_empty() || k.trim() != **k) {
            return Err(format!(
                "signal keyword {bad:?} is empty or has surrounding whitespace; a keyword must be visible text"
            ));
        }
        // Longest first so that an alternative containing another one (NOT_DONE vs DONE) wins the alternation.
        let mut sorted = keywords.clone();
        sorted.sort_by_key(|k| std::cmp::Reverse(k.len()));
        let alternation = sorted.iter().map(|k| regex::escape(k)).collect::<Vec<_>>().join("|");
        let detect = Regex::new(&format!(r"({alternation})\s*$")).map_err(|e| e.to_string())?;
        let strip = Regex::new(&format!(r"\s*({alternation})\s*$")).map_err(|e| e.to_string())?;
        Ok(Self { detect, strip })
    }

    /// Whether `message` ends with an end-of-turn keyword.
    pub fn has_signal(&self, message: &str) -> bool {
        self.detect.is_match(message)
    }

    /// The signal `message` ends with, and what to show instead of it; `None` when it carries no signal.
    pub fn detect(&self, message: &str) -> Option<SignalMatch> {
        let keyword = self.detect.captures(message)?.get(1)?.as_str().to_owned();
        let display = self.strip(message);
        Some(SignalMatch { keyword, display: (!display.is_empty()).then_some(display) })
    }

    /// The message as the channel should show it: every trailing keyword removed and the rest trimmed.
    ///
    /// The seed removes one occurrence; a message ending in the keyword twice would then still show it, so the
    /// removal repeats until the text no longer ends with a keyword.
    pub fn strip(&self, message: &str) -> String {
        let mut text = message.trim().to_owned();
        while let Some(found) = self.strip.find(&text) {
            text.truncate(found.start());
            text = text.trim().to_owned();
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher() -> SignalMatcher {
        SignalMatcher::default()
    }

    // The spec's table, row by row.
    #[test]
    fn spec_row_response_with_blank_line_before_signal() {
        let m = matcher().detect("Here's my response.\n\nTURN_COMPLETE").unwrap();
        assert_eq!(m.display.as_deref(), Some("Here's my response."));
        assert_eq!(m.keyword, "TURN_COMPLETE");
    }

    #[test]
    fn spec_row_signal_after_a_space_on_the_same_line() {
        let m = matcher().detect("Done with analysis. TURN_COMPLETE").unwrap();
        assert_eq!(m.display.as_deref(), Some("Done with analysis."));
    }

    #[test]
    fn spec_row_signal_alone_shows_nothing() {
        let m = matcher().detect("TURN_COMPLETE").unwrap();
        assert_eq!(m.display, None);
    }

    #[test]
    fn spec_row_signal_in_the_middle_is_not_detected() {
        assert!(matcher().detect("My answer TURN_COMPLETE more text").is_none());
        assert_eq!(matcher().strip("My answer TURN_COMPLETE more text"), "My answer TURN_COMPLETE more text");
    }

    #[test]
    fn spec_row_lowercase_is_not_detected() {
        assert!(!matcher().has_signal("turn_complete"));
        assert!(!matcher().has_signal("Done. Turn_Complete"));
    }

    // The edges a real agent produces.
    #[test]
    fn crlf_line_endings_are_whitespace() {
        let m = matcher().detect("Line one.\r\nLine two.\r\n\r\nTURN_COMPLETE\r\n").unwrap();
        assert_eq!(m.display.as_deref(), Some("Line one.\r\nLine two."));
    }

    #[test]
    fn trailing_spaces_and_blank_lines_after_the_signal() {
        let m = matcher().detect("Answer.\nTURN_COMPLETE   \n\n\t \n").unwrap();
        assert_eq!(m.display.as_deref(), Some("Answer."));
    }

    #[test]
    fn unicode_whitespace_around_the_signal() {
        // No-break space, ideographic space, line separator.
        let m = matcher().detect("Réponse.\u{00A0}TURN_COMPLETE\u{3000}\u{2028}").unwrap();
        assert_eq!(m.display.as_deref(), Some("Réponse."));
    }

    #[test]
    fn keyword_inside_a_code_block_in_the_middle_is_not_a_signal() {
        let text = "Use it like this:\n```\nprint('TURN_COMPLETE')\nTURN_COMPLETE\n```\nthen stop.";
        assert!(matcher().detect(text).is_none());
    }

    #[test]
    fn code_block_in_the_middle_and_signal_at_the_end() {
        let text = "Example:\n```\nTURN_COMPLETE\n```\nDone.\nTURN_COMPLETE";
        let m = matcher().detect(text).unwrap();
        assert_eq!(m.display.as_deref(), Some("Example:\n```\nTURN_COMPLETE\n```\nDone."));
    }

    #[test]
    fn keyword_twice_at_the_end_is_stripped_entirely() {
        let m = matcher().detect("Done. TURN_COMPLETE\nTURN_COMPLETE").unwrap();
        assert_eq!(m.display.as_deref(), Some("Done."));
        assert_eq!(matcher().detect("TURN_COMPLETE TURN_COMPLETE").unwrap().display, None);
    }

    #[test]
    fn keyword_earlier_and_at_the_end_keeps_the_earlier_one() {
        let m = matcher().detect("I said TURN_COMPLETE once. TURN_COMPLETE").unwrap();
        assert_eq!(m.display.as_deref(), Some("I said TURN_COMPLETE once."));
    }

    #[test]
    fn message_of_two_thousand_characters() {
        let body = "x".repeat(2000 - " TURN_COMPLETE".len());
        let text = format!("{body} TURN_COMPLETE");
        assert_eq!(text.chars().count(), 2000);
        let m = matcher().detect(&text).unwrap();
        assert_eq!(m.display.as_deref(), Some(body.as_str()));
    }

    #[test]
    fn signal_glued_to_text_follows_the_seed_pattern() {
        // The seed's pattern has no word boundary, so the keyword ending a word still counts.
        let m = matcher().detect("All done.TURN_COMPLETE").unwrap();
        assert_eq!(m.display.as_deref(), Some("All done."));
    }

    #[test]
    fn configured_keyword_replaces_the_default() {
        let m = SignalMatcher::new("OVER", &[]).unwrap();
        assert!(m.has_signal("Roger. OVER"));
        assert!(!m.has_signal("Roger. TURN_COMPLETE"));
    }

    #[test]
    fn alternatives_are_matched_the_same_way() {
        let m = SignalMatcher::new("TURN_COMPLETE", &["DONE".into(), "NOT_DONE".into()]).unwrap();
        let done = m.detect("Finished. DONE\n").unwrap();
        assert_eq!((done.keyword.as_str(), done.display.as_deref()), ("DONE", Some("Finished.")));
        let not_done = m.detect("Hmm. NOT_DONE").unwrap();
        assert_eq!((not_done.keyword.as_str(), not_done.display.as_deref()), ("NOT_DONE", Some("Hmm.")));
        assert!(m.detect("DONE deal").is_none());
    }

    #[test]
    fn keyword_with_regex_characters_is_literal() {
        let m = SignalMatcher::new("[END]", &[]).unwrap();
        assert!(m.has_signal("ok [END]"));
        assert!(!m.has_signal("ok E"));
    }

    #[test]
    fn blank_keyword_is_refused() {
        assert!(SignalMatcher::new(" ", &[]).is_err());
        assert!(SignalMatcher::new("OK", &[String::new()]).is_err());
    }

    #[test]
    fn message_without_signal_is_left_alone() {
        assert!(matcher().detect("Still thinking...").is_none());
        assert!(matcher().detect("").is_none());
    }
}

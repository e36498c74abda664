//! Seed 004's `TURN_COMPLETE` (spec 4.1) as the default rule: the spec's table and the edges real agents produce.
//! These are the tests of the single-keyword matcher this grammar replaced; they pass unchanged in meaning.

use super::config;
use super::*;
use crate::core::problems::Checker;

/// The single-keyword matcher's interface, over the rules.
#[derive(Clone)]
struct Matcher(SignalRules);

#[derive(Debug)]
struct Match {
    keyword: String,
    display: Option<String>,
}

impl Matcher {
    fn new(keyword: &str, alternatives: &[String]) -> Result<Matcher, String> {
        let text = serde_json::json!({"signal": {"turnComplete": keyword, "alternatives": alternatives}}).to_string();
        let mut c = Checker::new("c.json", &text);
        let object = c.parse_object().unwrap();
        let rules = config::read(&mut c, &object);
        if c.problems.is_empty() { Ok(Matcher(rules)) } else { Err(format!("{:?}", c.problems)) }
    }
    fn author() -> PersonaId {
        PersonaId::parse("pm").unwrap()
    }
    fn detect(&self, text: &str) -> Option<Match> {
        let found = self.0.detect(text, &Self::author())?;
        Some(Match { keyword: found.rule.name.clone(), display: found.display })
    }
    fn has_signal(&self, text: &str) -> bool {
        self.0.has_signal(text, &Self::author())
    }
    fn strip(&self, text: &str) -> String {
        self.0.strip(text, &Self::author())
    }
}

type SignalMatcher = Matcher;

fn matcher() -> Matcher {
    Matcher(SignalRules::default())
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

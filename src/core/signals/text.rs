//! Text helpers for detection: invisible characters seen as whitespace, and removing matched spans cleanly.
//!
//! A zero-width space or a direction mark next to a keyword is invisible in the channel, so a message that looks
//! like a signal to people must be one to the manager (spec 4.1). Detection runs on a copy of the text in which
//! every invisible character is replaced by spaces of the same byte length: every byte offset found in the copy is
//! the same in the original, so what is removed for display is cut from the original text.

use std::borrow::Cow;

/// The Unicode format characters (category Cf, every one of them: a test checks the list against the regex crate's
/// Unicode tables): soft hyphen, Arabic and Syriac marks, zero-width space and joiners, direction marks and
/// embeddings, word joiner and invisible operators, the byte-order mark, interlinear annotation marks, and outside
/// the first plane Kaithi, Egyptian hieroglyph, shorthand and musical format controls and the tag characters.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}' | '\u{070F}' | '\u{0890}'..='\u{0891}'
        | '\u{08E2}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}' | '\u{110BD}' | '\u{110CD}'
        | '\u{13430}'..='\u{1343F}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0001}'
        | '\u{E0020}'..='\u{E007F}')
}

/// Whitespace or an invisible character: what surrounds a keyword without being seen.
pub fn is_blank(c: char) -> bool {
    c.is_whitespace() || is_invisible(c)
}

/// The black flag that tag characters follow to spell a region's flag (England, Scotland, Wales): there they are
/// part of what is seen, not invisible (found by a review: a flag before the keyword was reposted cut to 🏴).
const TAG_BASE: char = '\u{1F3F4}';

fn is_tag(c: char) -> bool {
    ('\u{E0020}'..='\u{E007F}').contains(&c)
}

/// The tag that ends a flag's tag characters.
const CANCEL_TAG: char = '\u{E007F}';

/// Whether a tag character right after `before` is part of a flag: 🏴 and tags not ended yet.
fn spells_a_flag(before: &str) -> bool {
    let base = before.trim_end_matches(is_tag);
    base.ends_with(TAG_BASE) && !before[base.len()..].contains(CANCEL_TAG)
}

/// The text with every invisible character replaced by spaces of the same byte length (tag characters spelling a
/// flag are kept).
pub fn normalized(text: &str) -> Cow<'_, str> {
    // Every invisible character is outside ASCII; most messages are ASCII, and that test is a fast byte scan.
    if text.is_ascii() || !text.chars().any(is_invisible) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut in_flag = false;
    for c in text.chars() {
        let flag_tag = in_flag && is_tag(c);
        in_flag = c == TAG_BASE || (flag_tag && c != CANCEL_TAG);
        if is_invisible(c) && !flag_tag {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Trims whitespace and invisible characters from both ends (not a flag's tag characters).
pub fn trim_blank(text: &str) -> &str {
    let text = text.trim_start_matches(is_blank);
    let mut end = text.len();
    for (i, c) in text.char_indices().rev() {
        if !is_blank(c) || (is_tag(c) && spells_a_flag(&text[..i])) {
            break;
        }
        end = i;
    }
    &text[..end]
}

/// Removes the byte ranges `spans` (from the normalized copy, so valid in `text`) and tidies what is left: a line
/// emptied by a removal goes with its line break, and the result is trimmed.
pub fn remove_spans(text: &str, mut spans: Vec<(usize, usize)>) -> String {
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in merged {
        let (start, end) = widen_to_empty_line(text, start, end);
        if start < at {
            continue;
        }
        out.push_str(&text[at..start]);
        at = end;
    }
    out.push_str(&text[at..]);
    trim_blank(&out).to_owned()
}

/// When a span is all that stands on its line (blanks aside), the whole line goes, with its line break.
fn widen_to_empty_line(text: &str, start: usize, end: usize) -> (usize, usize) {
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[end..].find('\n').map_or(text.len(), |i| end + i);
    let before_blank = text[line_start..start].chars().all(|c| c != '\n' && is_blank(c));
    let after_blank = text[end..line_end].chars().all(is_blank);
    if before_blank && after_blank {
        let mut with_break = if line_end < text.len() { line_end + 1 } else { line_end };
        // A line between two paragraphs takes one of the blank lines around it, so the paragraphs stay one apart.
        // CRLF text too (found by a review: `\r\n\r\n` never matched `\n\n`, and a blank line was left over).
        let previous_line = text[..line_start].strip_suffix('\n').map(|b| b.strip_suffix('\r').unwrap_or(b));
        let blank_before = previous_line.is_some_and(|b| b.trim_end_matches([' ', '\t']).ends_with('\n'));
        if blank_before && text[with_break..].starts_with('\n') {
            with_break += 1;
        } else if blank_before && text[with_break..].starts_with("\r\n") {
            with_break += 2;
        }
        (line_start, with_break)
    } else {
        (start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by a review: the list missed the format characters outside the first plane (the tag characters, which
    /// show as nothing), so `Done. TURN_COMPLETE` followed by one was no signal. Every Cf character, and no other.
    #[test]
    fn every_format_character_and_no_other_is_invisible() {
        let format = regex::Regex::new(r"^\p{Cf}$").unwrap();
        let mut buffer = [0; 4];
        let wrong: Vec<String> = (0..=u32::from(char::MAX))
            .filter_map(char::from_u32)
            .filter(|c| is_invisible(*c) != format.is_match(c.encode_utf8(&mut buffer)))
            .map(|c| format!("U+{:04X}", u32::from(c)))
            .collect();
        assert!(wrong.is_empty(), "misjudged: {wrong:?}");
    }

    #[test]
    fn normalizing_keeps_every_byte_offset() {
        let text = "a\u{200B}b\u{FEFF}c";
        let copy = normalized(text);
        assert_eq!(copy.len(), text.len());
        assert_eq!(copy, "a   b   c");
        assert!(matches!(normalized("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_span_alone_on_its_line_takes_the_line_with_it() {
        let text = "READY: t1\nbody\nmore";
        assert_eq!(remove_spans(text, vec![(0, 9)]), "body\nmore");
        let text = "intro\n<x>tag</x>\noutro";
        assert_eq!(remove_spans(text, vec![(6, 16)]), "intro\noutro");
    }

    #[test]
    fn a_signal_line_between_paragraphs_leaves_one_blank_line() {
        let text = "First.\n\nSIGNAL: t1\n\nSecond.";
        assert_eq!(remove_spans(text, vec![(8, 18)]), "First.\n\nSecond.");
    }

    #[test]
    fn a_span_inside_a_line_leaves_the_line() {
        let text = "I am <p>45</p> done";
        assert_eq!(remove_spans(text, vec![(5, 14)]), "I am  done");
    }

    #[test]
    fn overlapping_spans_are_removed_once() {
        assert_eq!(remove_spans("abcdef", vec![(1, 3), (2, 4)]), "aef");
    }
}

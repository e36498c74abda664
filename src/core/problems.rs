//! Problems found in a user's JSON file, and the field-by-field checker that finds all of them at once.
//!
//! serde stops at the first error; people fixing a file want every problem, each with the file, line and field.
//! So files are parsed into a `serde_json::Value` first and then read field by field, collecting problems.

use serde_json::{Map, Value};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One thing wrong (or suspicious) in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    pub file: String,
    /// 1-based line, where it could be found.
    pub line: Option<usize>,
    /// Dotted path of the field (`turnBehavior.timeoutSeconds`); empty for the whole file.
    pub field: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{kind}: {}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if self.field.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": field \"{}\" {}", self.field, self.message)
        }
    }
}

/// Problems of one or more files; `Display` lists each on its own line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.0.iter().filter(|p| p.severity == Severity::Error)
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Problem> {
        self.0.iter().filter(|p| p.severity == Severity::Warning)
    }

    pub fn has_errors(&self) -> bool {
        self.errors().next().is_some()
    }

    /// Puts each file's problems in the order of their lines (a whole file's first), the files in the order they were
    /// read: the checks run field by field and rule by rule, so a file's problems came out of line order (found by a
    /// review: lines 4, 6, 2, 5, 3).
    pub fn sort_by_place(&mut self) {
        let mut files: Vec<String> = Vec::new();
        for problem in &self.0 {
            if !files.contains(&problem.file) {
                files.push(problem.file.clone());
            }
        }
        let file_at = |file: &str| files.iter().position(|f| f == file).unwrap_or(usize::MAX);
        self.0.sort_by_key(|p| (file_at(&p.file), p.line.unwrap_or(0)));
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}

/// Reads one JSON file field by field, collecting every problem with its line.
pub struct Checker<'a> {
    file: &'a str,
    text: &'a str,
    pub problems: Vec<Problem>,
}

impl<'a> Checker<'a> {
    pub fn new(file: &'a str, text: &'a str) -> Self {
        Self { file, text, problems: Vec::new() }
    }

    /// How many errors were found so far (warnings change nothing that is read).
    pub fn errors_found(&self) -> usize {
        self.problems.iter().filter(|p| p.severity == Severity::Error).count()
    }

    /// Parses the whole file; a syntax error is reported with serde_json's line.
    pub fn parse_object(&mut self) -> Option<Map<String, Value>> {
        match serde_json::from_str::<Value>(self.text) {
            Ok(Value::Object(map)) => Some(map),
            Ok(other) => {
                self.push(Severity::Error, &[], format!("must hold a JSON object, found {}", kind_of(&other)), Some(1));
                None
            }
            // serde's "EOF while parsing a value at line 1 column 0" for an empty file, or one cut short, says little
            // to a person editing it.
            Err(_) if self.text.trim().is_empty() => {
                self.push(Severity::Error, &[], "is empty: it must hold a JSON object (`{ ... }`)".into(), None);
                None
            }
            Err(e) if e.is_eof() => {
                let line = (e.line() > 0).then_some(e.line());
                let message = "ends before its JSON does (cut short, or a `}`, `]` or `\"` missing at the end)";
                self.push(Severity::Error, &[], message.into(), line);
                None
            }
            Err(e) => {
                let (line, message) = syntax_error(self.text, &e);
                self.push(Severity::Error, &[], message, line);
                None
            }
        }
    }

    /// Reports each key given twice in one object of the file (serde_json keeps the last): an error where the bot
    /// reads the field (`read`, by its path), a warning elsewhere (a field the agent runtime sharing the file reads).
    pub fn repeated_keys(&mut self, read: impl Fn(&str) -> bool) {
        for repeated in super::repeated_keys::repeated_keys(self.text) {
            let first = repeated.first_line;
            if read(&repeated.field) {
                let message = format!("is given again (first on line {first}): give it once, as meant");
                self.push_at(Severity::Error, &repeated.field, Some(repeated.line), message);
            } else {
                let message = format!(
                    "is given again (first on line {first}); not read by turn-manager, but a program \
                     that reads it may take either"
                );
                self.push_at(Severity::Warning, &repeated.field, Some(repeated.line), message);
            }
        }
    }

    pub fn error(&mut self, path: &[&str], message: impl Into<String>) {
        let line = locate_line(self.text, path);
        self.push(Severity::Error, path, message.into(), line);
    }

    pub fn warning(&mut self, path: &[&str], message: impl Into<String>) {
        let line = locate_line(self.text, path);
        self.push(Severity::Warning, path, message.into(), line);
    }

    /// An error on a field named by hand (`signals.rules[2].pattern`), at a line found by the caller.
    pub fn error_at(&mut self, field: &str, line: Option<usize>, message: impl Into<String>) {
        self.push_at(Severity::Error, field, line, message.into());
    }

    /// A warning on a field named by hand, at a line found by the caller.
    pub fn warning_at(&mut self, field: &str, line: Option<usize>, message: impl Into<String>) {
        self.push_at(Severity::Warning, field, line, message.into());
    }

    fn push_at(&mut self, severity: Severity, field: &str, line: Option<usize>, message: String) {
        self.problems.push(Problem { severity, file: self.file.to_owned(), line, field: field.to_owned(), message });
    }

    /// The line of `key` in item `index` of the list at `list` (or of the item itself when the key is absent).
    pub fn line_in_list(&self, list: &[&str], index: usize, key: &str) -> Option<usize> {
        locate_in_list(self.text, list, index, key)
    }

    fn push(&mut self, severity: Severity, path: &[&str], message: String, line: Option<usize>) {
        self.push_at(severity, &path.join("."), line, message);
    }

    /// Reports fields of `object` that are not in `known`. Unknown fields are errors when `strict`; otherwise only
    /// the ones that look like typos of a known field are reported, as warnings.
    pub fn unknown_fields(&mut self, object: &Map<String, Value>, prefix: &[&str], known: &[&str], strict: bool) {
        self.unknown_fields_except(object, prefix, known, &[], strict);
    }

    /// [`Checker::unknown_fields`], passing over the keys in `said`: reported by a check of their own (a token the
    /// configuration refuses), so neither unknown nor offered as what another key may mean.
    pub fn unknown_fields_except(
        &mut self,
        object: &Map<String, Value>,
        prefix: &[&str],
        known: &[&str],
        said: &[&str],
        strict: bool,
    ) {
        for key in object.keys().filter(|k| !known.contains(&k.as_str()) && !said.contains(&k.as_str())) {
            let path = join(prefix, key);
            match (closest(key, known), strict) {
                (_, true) => self.error(&path, not_a_setting(key, known)),
                (Some(guess), false) => {
                    self.warning(&path, format!("is not a known field and is ignored; did you mean \"{guess}\"?"))
                }
                (None, false) => {}
            }
        }
    }

    /// A string field; `None` (and a problem if it is present but not a string) otherwise.
    pub fn string(&mut self, object: &Map<String, Value>, prefix: &[&str], key: &str) -> Option<String> {
        match object.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.error(&join(prefix, key), format!("must be a string, found {}", kind_of(other)));
                None
            }
        }
    }

    /// A whole number within `min..=max`.
    pub fn integer(
        &mut self,
        object: &Map<String, Value>,
        prefix: &[&str],
        key: &str,
        min: i64,
        max: i64,
    ) -> Option<i64> {
        let value = object.get(key)?;
        let path = join(prefix, key);
        match value.as_i64() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            Some(n) => {
                self.error(&path, format!("must be between {min} and {max}, found {n}"));
                None
            }
            None => {
                let found = match value {
                    Value::Number(_) => format!("{value}"),
                    other => kind_of(other).to_owned(),
                };
                self.error(&path, format!("must be a whole number between {min} and {max}, found {found}"));
                None
            }
        }
    }

    pub fn boolean(&mut self, object: &Map<String, Value>, prefix: &[&str], key: &str) -> Option<bool> {
        match object.get(key)? {
            Value::Bool(b) => Some(*b),
            other => {
                self.error(&join(prefix, key), format!("must be true or false, found {}", kind_of(other)));
                None
            }
        }
    }

    /// A nested object; `None` and a problem if it is present but not an object.
    pub fn object<'v>(
        &mut self,
        object: &'v Map<String, Value>,
        prefix: &[&str],
        key: &str,
    ) -> Option<&'v Map<String, Value>> {
        match object.get(key)? {
            Value::Object(map) => Some(map),
            other => {
                self.error(&join(prefix, key), format!("must be an object, found {}", kind_of(other)));
                None
            }
        }
    }

    /// A list of strings; wrong elements are reported by index.
    pub fn string_list(&mut self, object: &Map<String, Value>, prefix: &[&str], key: &str) -> Option<Vec<String>> {
        let path = join(prefix, key);
        match object.get(key)? {
            Value::Array(items) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        other => {
                            let message = format!("item {i} must be a string, found {}", kind_of(other));
                            self.error(&path, message);
                        }
                    }
                }
                Some(out)
            }
            other => {
                self.error(&path, format!("must be a list of strings, found {}", kind_of(other)));
                None
            }
        }
    }
}

/// A syntax error said in a person's words where the character serde_json stopped at tells what it is: a comma left
/// before a closing bracket (at the comma's line: serde_json gives the bracket's, a line below), a comment, single
/// quotes; any other in serde_json's words, at its line.
fn syntax_error(text: &str, e: &serde_json::Error) -> (Option<usize>, String) {
    let line = (e.line() > 0).then_some(e.line());
    let in_its_words = || (line, format!("is not valid JSON: {e}"));
    // serde_json tells the kind of an error only in its message. These kinds stop at the character that was not
    // expected; others do not (a line break inside a string is reported on the next line).
    let said = e.to_string();
    let stops_at_it = ["trailing comma", "key must be a string", "expected"].iter().any(|kind| said.starts_with(kind));
    let Some(at) = byte_stopped_at(text, e.line(), e.column()).filter(|_| stops_at_it) else {
        return in_its_words();
    };
    match text.as_bytes()[at] {
        // Only where serde_json says so: a comma before a bracket that closes nothing open (`["a",\n}`) is a
        // bracket left out, not a comma too many (found by a review).
        closing @ (b'}' | b']') if said.starts_with("trailing comma") => {
            match text[..at].trim_end().strip_suffix(',') {
                Some(before_comma) => (
                    Some(line_of(text, before_comma.len())),
                    format!(
                        "a comma is left before the closing {} (JSON allows none after the last item)",
                        closing as char
                    ),
                ),
                None => in_its_words(),
            }
        }
        b'/' => (line, "a comment starts here (JSON allows no comments: remove it)".into()),
        b'\'' => (
            line,
            "a single quote starts a string or key here (JSON strings and keys take double quotes: \"id\", not 'id')"
                .into(),
        ),
        _ => in_its_words(),
    }
}

/// The byte serde_json stopped at: its line and column count bytes, the column those read on that line so far.
fn byte_stopped_at(text: &str, line: usize, column: usize) -> Option<usize> {
    let line_start = match line {
        0 => return None,
        1 => 0,
        _ => text.match_indices('\n').nth(line - 2)?.0 + 1,
    };
    let at = line_start + column.checked_sub(1)?;
    (at < text.len() && text.is_char_boundary(at)).then_some(at)
}

/// The 1-based line of the byte at `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

fn join<'p>(prefix: &[&'p str], key: &'p str) -> Vec<&'p str> {
    let mut path = prefix.to_vec();
    path.push(key);
    path
}

/// The JSON type of a value, as a person would name it.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "true/false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Best-effort 1-based line of a field: each key of `path` is looked for inside the previous one's object, at its
/// own depth (a key of the same name in a nested object, or in a string, is not it); failing that, anywhere after
/// the previous one.
pub fn locate_line(text: &str, path: &[&str]) -> Option<usize> {
    let mut from = 0;
    for (depth, key) in path.iter().enumerate() {
        match key_at_depth(text, from, depth, key) {
            Some(at) => from = at,
            None => return locate_line_anywhere(text, path),
        }
    }
    (!path.is_empty()).then(|| text[..from].matches('\n').count() + 1)
}

/// Where `"key":` is among the keys of the object whose value starts after `from` (the whole text's object when
/// `depth` is 0), `from` being at nesting `depth`: `None` if that value is not an object or has no such key.
fn key_at_depth(text: &str, from: usize, depth: usize, key: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let (mut level, mut at, mut entered) = (depth, from, false);
    if depth > 0 {
        // Past the key itself and its colon, to the value.
        at += text[at..].find(':')? + 1;
        let value = at + text[at..].find(|c: char| !c.is_whitespace())?;
        if bytes[value] != b'{' {
            return None;
        }
        at = value;
    }
    while at < bytes.len() {
        match bytes[at] {
            b'{' | b'[' => {
                level += 1;
                entered = true;
            }
            b'}' | b']' => {
                level = level.checked_sub(1)?;
                if entered && level == depth {
                    return None; // the object closed without the key
                }
            }
            b'"' => {
                let start = at;
                let is_key;
                (at, is_key) = quoted_at(text, start);
                if level == depth + 1 && is_key && text.get(start + 1..at) == Some(key) {
                    return Some(start);
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// The JSON string whose opening quote is at `start`: where its closing quote is (the text's end if none), and
/// whether it is a key (a `:` follows).
pub(super) fn quoted_at(text: &str, start: usize) -> (usize, bool) {
    let bytes = text.as_bytes();
    let mut at = start + 1;
    while at < bytes.len() && bytes[at] != b'"' {
        at += if bytes[at] == b'\\' { 2 } else { 1 };
    }
    (at, text.get(at + 1..).is_some_and(|after| after.trim_start().starts_with(':')))
}

/// [`locate_line`]'s fallback: each key of `path` looked for anywhere after the previous one.
fn locate_line_anywhere(text: &str, path: &[&str]) -> Option<usize> {
    let mut from = 0;
    for key in path {
        let quoted = format!("\"{key}\"");
        let mut search = from;
        loop {
            let found = search + text[search..].find(&quoted)?;
            let after = &text[found + quoted.len()..];
            if after.trim_start().starts_with(':') {
                from = found;
                break;
            }
            search = found + quoted.len();
        }
    }
    (!path.is_empty()).then(|| text[..from].matches('\n').count() + 1)
}

/// Best-effort 1-based line of `key` inside item `index` of the list at `list`; the item's own line without `key`.
pub fn locate_in_list(text: &str, list: &[&str], index: usize, key: &str) -> Option<usize> {
    let mut from = 0;
    for name in list {
        let quoted = format!("\"{name}\"");
        from += text[from..].find(&quoted)? + quoted.len();
    }
    let open = from + text[from..].find('[')?;
    let (start, end) = list_items(text, open).into_iter().nth(index)?;
    let item = &text[start..end];
    let quoted = format!("\"{key}\"");
    let at = item.find(&quoted).map_or(start, |i| start + i);
    Some(text[..at].matches('\n').count() + 1)
}

/// The byte ranges of the items of the JSON list opening at `open`.
fn list_items(text: &str, open: usize) -> Vec<(usize, usize)> {
    let mut items = Vec::new();
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut start = None;
    for (i, c) in text[open..].char_indices().map(|(i, c)| (open + i, c)) {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                start.get_or_insert(i);
            }
            '[' | '{' => {
                if depth == 1 {
                    start.get_or_insert(i);
                }
                depth += 1;
            }
            ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    items.extend(start.take().map(|s| (s, i)));
                    break;
                }
            }
            ',' if depth == 1 => items.extend(start.take().map(|s| (s, i))),
            c if depth == 1 && !c.is_whitespace() => {
                start.get_or_insert(i);
            }
            _ => {}
        }
    }
    items
}

/// What is said of a key that is no setting among `known`: the one it likely misspells, or the known ones.
pub fn not_a_setting(key: &str, known: &[&str]) -> String {
    match closest(key, known).or_else(|| completed(key, known)) {
        Some(guess) => format!("is not a known setting; did you mean \"{guess}\"?"),
        None => format!("is not a known setting; known: {}", known.join(", ")),
    }
}

/// The known name that `unknown` most likely misspells: same letters in another case, or at most two edits away.
pub fn closest<'k>(unknown: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = unknown.to_lowercase();
    if let Some(same) = known.iter().find(|k| k.to_lowercase() == lower) {
        return Some(same);
    }
    let limit = if unknown.chars().count() <= 4 { 1 } else { 2 };
    known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_lowercase()), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The one known name that starts with `unknown`, in any case: a setting written short (`defaultTimeout` for
/// `defaultTimeoutSeconds`) is too many edits away for [`closest`]. Offered only where an unknown key is an error
/// anyway: in a persona file it would warn about an agent runtime's own keys (a `discord` of its own settings).
fn completed<'k>(unknown: &str, known: &[&'k str]) -> Option<&'k str> {
    // Shorter, it tells too little of what was meant.
    const SHORTEST: usize = 4;
    let lower = unknown.to_lowercase();
    let mut starting = known.iter().filter(|k| k.to_lowercase().starts_with(&lower));
    match (starting.next(), starting.next()) {
        (Some(one), None) if unknown.chars().count() >= SHORTEST => Some(one),
        _ => None,
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_put_in_line_order_within_each_file_and_files_keep_their_order() {
        let at = |file: &str, line: Option<usize>| Problem {
            severity: Severity::Error,
            file: file.into(),
            line,
            field: String::new(),
            message: String::new(),
        };
        let mut problems = Problems(vec![
            at("b.json", Some(4)),
            at("a.json", Some(9)),
            at("b.json", Some(2)),
            at("b.json", None),
            at("a.json", Some(1)),
        ]);
        problems.sort_by_place();
        let places: Vec<(&str, Option<usize>)> = problems.0.iter().map(|p| (p.file.as_str(), p.line)).collect();
        assert_eq!(
            places,
            [("b.json", None), ("b.json", Some(2)), ("b.json", Some(4)), ("a.json", Some(1)), ("a.json", Some(9))]
        );
    }

    #[test]
    fn syntax_error_reports_the_line() {
        let text = "{\n  \"id\": \"pm\",\n  \"displayName\": \"PM\"\n  \"x\": 1\n}";
        let mut checker = Checker::new("p.json", text);
        assert!(checker.parse_object().is_none());
        assert_eq!(checker.problems[0].line, Some(4));
        assert!(checker.problems[0].to_string().starts_with("error: p.json:4: is not valid JSON"));
    }

    /// Found by a review: an empty file, or one cut short, was reported in serde's words ("EOF while parsing a
    /// value at line 1 column 0").
    #[test]
    fn an_empty_file_or_one_cut_short_is_said_to_be_so() {
        let mut checker = Checker::new("p.json", " \n");
        assert!(checker.parse_object().is_none());
        assert_eq!(checker.problems[0].to_string(), "error: p.json: is empty: it must hold a JSON object (`{ ... }`)");
        let mut checker = Checker::new("p.json", "{\n  \"id\": \"pm\",\n");
        assert!(checker.parse_object().is_none());
        let said = checker.problems[0].to_string();
        assert!(said.starts_with("error: p.json:3: ends before its JSON does"), "{said}");
    }

    /// Found by a newcomer: serde_json says where it noticed a trailing comma, the closing brace a line below it
    /// (`trailing comma at line 4 column 1`).
    #[test]
    fn a_trailing_comma_is_reported_at_its_own_line() {
        let text = "{\"id\": \"alice\",\n \"displayName\": \"A\",\n \"discordUserId\": \"1312000000000000021\",\n}";
        let mut checker = Checker::new("alice.json", text);
        assert!(checker.parse_object().is_none());
        let said = checker.problems[0].to_string();
        assert_eq!(
            said,
            "error: alice.json:3: a comma is left before the closing } (JSON allows none after the last item)"
        );
        let mut checker = Checker::new("c.json", "{\"controlRoles\": [\"a\",\n\n  ]}");
        assert!(checker.parse_object().is_none());
        let said = checker.problems[0].to_string();
        assert_eq!(
            said,
            "error: c.json:1: a comma is left before the closing ] (JSON allows none after the last item)"
        );
    }

    /// Found by a newcomer: a comment and single quotes were both `key must be a string at line 2 column 3`.
    #[test]
    fn a_comment_or_single_quotes_are_said_to_be_no_json() {
        let comments = "JSON allows no comments";
        let quotes = "JSON strings and keys take double quotes";
        for (text, line, says) in [
            ("{\n  // a comment\n  \"id\": \"pm\"\n}", 2, comments),
            ("{\"id\": \"pm\",\n  /* a note */ \"order\": 1}", 2, comments),
            ("{\n  \"id\": \"pm\" // after a value\n}", 2, comments),
            ("{\n  'id': \"pm\"\n}", 2, quotes),
            ("{\n  \"id\": 'pm'\n}", 2, quotes),
        ] {
            let mut checker = Checker::new("p.json", text);
            assert!(checker.parse_object().is_none(), "{text}");
            let said = checker.problems[0].to_string();
            assert!(said.starts_with(&format!("error: p.json:{line}: ")) && said.contains(says), "{text}: {said}");
        }
        // A bracket left out after a comma is not said to be a comma too many.
        let mut checker = Checker::new("c.json", "{\"controlRoles\": [\"a\",\n}");
        assert!(checker.parse_object().is_none());
        let said = checker.problems[0].to_string();
        assert!(said.starts_with("error: c.json:2: is not valid JSON") && !said.contains("comma is left"), "{said}");
        // A quote or a slash serde_json did not stop at is no reason to say so: a line break inside a string.
        let mut checker = Checker::new("p.json", "{\"id\": \"it'\ns\"}");
        assert!(checker.parse_object().is_none());
        let said = checker.problems[0].to_string();
        assert!(said.contains("is not valid JSON: control character"), "{said}");
    }

    #[test]
    fn nested_field_line_is_found_after_its_parent() {
        let text = "{\n \"timeoutSeconds\": 1,\n \"turnBehavior\": {\n   \"timeoutSeconds\": 0\n }\n}";
        assert_eq!(locate_line(text, &["turnBehavior", "timeoutSeconds"]), Some(4));
        assert_eq!(locate_line(text, &["timeoutSeconds"]), Some(2));
        assert_eq!(locate_line(text, &["missing"]), None);
    }

    #[test]
    fn a_key_of_the_same_name_in_a_nested_object_is_not_the_field() {
        // Found by a review: shared persona files often carry a model's own "id".
        let text = "{\n  \"model\": {\n    \"id\": \"gpt-4o\"\n  },\n  \"id\": \"Critic\"\n}";
        assert_eq!(locate_line(text, &["id"]), Some(5));
        assert_eq!(locate_line(text, &["model", "id"]), Some(3));
        let listed = "{\"rules\": [{\"id\": 1}],\n \"id\": 2}";
        assert_eq!(locate_line(listed, &["id"]), Some(2));
    }

    #[test]
    fn value_equal_to_a_key_name_is_not_mistaken_for_the_key() {
        let text = "{\n \"a\": \"id\",\n \"id\": 3\n}";
        assert_eq!(locate_line(text, &["id"]), Some(3));
    }

    #[test]
    fn typos_are_matched_to_known_names() {
        let known = ["timeoutSeconds", "displayName", "id"];
        assert_eq!(closest("timeoutSecond", &known), Some("timeoutSeconds"));
        assert_eq!(closest("displayname", &known), Some("displayName"));
        assert_eq!(closest("dispalyName", &known), Some("displayName"));
        assert_eq!(closest("systemPrompt", &known), None);
        assert_eq!(closest("ix", &known), Some("id"));
        assert_eq!(closest("xy", &known), None, "short names allow one edit only");
    }

    #[test]
    fn a_setting_written_short_is_completed_when_one_known_name_starts_so() {
        let known = ["defaultTimeoutSeconds", "displayMode", "stateDir"];
        let completed = not_a_setting("defaultTimeout", &known);
        assert_eq!(completed, "is not a known setting; did you mean \"defaultTimeoutSeconds\"?");
        assert!(not_a_setting("DefaultTime", &known).contains("\"defaultTimeoutSeconds\""), "in any case");
        assert!(not_a_setting("d", &known).contains("known: "), "too short to tell");
        let known = ["defaultTimeoutSeconds", "defaultTimeoutAnnounced"];
        assert!(not_a_setting("defaultTimeout", &known).contains("known: "), "two start so: neither is offered");
    }

    #[test]
    fn every_wrong_field_is_reported_not_just_the_first() {
        let text = r#"{"a": "x", "b": true, "c": [1, "ok", false]}"#;
        let mut checker = Checker::new("f.json", text);
        let object = checker.parse_object().unwrap();
        checker.integer(&object, &[], "a", 0, 10);
        checker.string(&object, &[], "b");
        checker.string_list(&object, &[], "c");
        let messages: Vec<String> = checker.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(messages.len(), 4, "{messages:#?}");
        assert!(messages[0].contains("field \"a\" must be a whole number"));
        assert!(messages[2].contains("item 0 must be a string"));
        assert!(messages[3].contains("item 2 must be a string"));
    }

    #[test]
    fn integer_out_of_range_names_the_range_and_value() {
        let mut checker = Checker::new("f.json", r#"{"n": 0}"#);
        let object = checker.parse_object().unwrap();
        assert_eq!(checker.integer(&object, &[], "n", 1, 86_400), None);
        assert_eq!(checker.problems[0].message, "must be between 1 and 86400, found 0");
    }
}

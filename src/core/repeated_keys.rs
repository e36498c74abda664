//! Keys given twice in one JSON object. serde_json keeps the last without a word, and a problem about the field
//! would point at the first: in a file a person wrote (the configuration, a persona), each is an error of its own.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

/// A key given again in its object: the field's path (`turnBehavior.timeoutSeconds`, `channels[1].roster`) and the
/// 1-based lines of its first and its repeated occurrence.
#[derive(Debug, PartialEq, Eq)]
pub struct RepeatedKey {
    pub field: String,
    pub first_line: usize,
    pub line: usize,
}

/// Where a container began, and what it has seen so far.
enum Frame {
    /// An object's path, the keys seen in it with the line of each one's first occurrence, and the key whose value
    /// comes next.
    Object { path: String, first_lines: HashMap<String, usize>, current: Option<String> },
    /// A list's path and the index of the item being read.
    List { path: String, index: usize },
}

impl Frame {
    /// The path of the value being read in this container.
    fn child_path(&self) -> String {
        match self {
            Frame::Object { path, current, .. } => {
                let key = current.as_deref().unwrap_or_default();
                if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
            }
            Frame::List { path, index } => format!("{path}[{index}]"),
        }
    }
}

/// Every key given twice in one object of `text`, which must be valid JSON (scanned as it is written, so that each
/// occurrence has its line), in the order they come.
pub fn repeated_keys(text: &str) -> Vec<RepeatedKey> {
    let bytes = text.as_bytes();
    let (mut stack, mut found, mut line, mut at) = (Vec::<Frame>::new(), Vec::new(), 1, 0);
    while at < bytes.len() {
        match bytes[at] {
            b'\n' => line += 1,
            b'{' | b'[' => {
                let path = stack.last().map(Frame::child_path).unwrap_or_default();
                stack.push(if bytes[at] == b'{' {
                    Frame::Object { path, first_lines: HashMap::new(), current: None }
                } else {
                    Frame::List { path, index: 0 }
                });
            }
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(Frame::List { index, .. }) = stack.last_mut() {
                    *index += 1;
                }
            }
            b'"' => {
                let start = at;
                let is_key;
                (at, is_key) = super::problems::quoted_at(text, start);
                if let (true, Some(Frame::Object { path, first_lines, current })) = (is_key, stack.last_mut()) {
                    // As serde_json reads it: `"a\u0062"` and `"ab"` are one key.
                    let key = serde_json::from_str::<String>(&text[start..=at]).unwrap_or_default();
                    match first_lines.entry(key.clone()) {
                        Entry::Occupied(first) => {
                            let field = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                            found.push(RepeatedKey { field, first_line: *first.get(), line });
                        }
                        Entry::Vacant(first) => {
                            first.insert(line);
                        }
                    }
                    *current = Some(key);
                }
            }
            _ => {}
        }
        at += 1;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_given_twice_in_one_object_is_found_with_both_lines_and_its_path() {
        let text = "{\n  \"historyLimit\": 5,\n  \"channels\": [\n    {\"channelId\": \"1\"},\n    {\"channelId\": \"2\",\n     \"roster\": [\"pm\"], \"roster\": []}\n  ],\n  \"historyLimit\": 6\n}";
        assert_eq!(
            repeated_keys(text),
            [
                RepeatedKey { field: "channels[1].roster".into(), first_line: 6, line: 6 },
                RepeatedKey { field: "historyLimit".into(), first_line: 2, line: 8 },
            ]
        );
    }

    #[test]
    fn the_same_key_in_different_objects_and_keys_inside_strings_are_not_repeats() {
        let text = r#"{"a": {"id": 1}, "b": {"id": 2}, "c": "\"id\": 3, \"id\": 4", "list": [{"id": 5}, {"id": 6}]}"#;
        assert_eq!(repeated_keys(text), []);
        assert_eq!(repeated_keys(r#"{"a\u0062": 1, "ab": 2}"#).len(), 1, "one key, as serde_json reads it");
    }
}

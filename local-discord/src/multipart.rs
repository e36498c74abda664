//! multipart/form-data request bodies, as clients send messages with files: a `payload_json` part (the JSON body)
//! and one part per file (`files[0]`, `files[1]`, ... or any other name with a filename).

use serde_json::Value;

/// One uploaded file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The form field's name, e.g. `files[0]`.
    pub field: String,
    pub filename: String,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
}

/// A request body: its JSON and its files.
#[derive(Clone, Debug, Default)]
pub struct Body {
    pub json: Value,
    pub files: Vec<Upload>,
}

/// The boundary of a `multipart/form-data; boundary=...` content type, if it is one.
pub fn boundary(content_type: &str) -> Option<String> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (key, value) = p.trim().split_once('=')?;
        key.trim().eq_ignore_ascii_case("boundary").then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// Splits a multipart body into its JSON (`payload_json`, or plain fields such as `content`) and files. `None`
/// when the body is not well formed.
pub fn parse(body: &[u8], boundary: &str) -> Option<Body> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut parsed = Body { json: Value::Object(Default::default()), files: Vec::new() };
    let mut rest = &body[find(body, &delimiter)? + delimiter.len()..];
    loop {
        if rest.starts_with(b"--") {
            return Some(parsed);
        }
        rest = rest.strip_prefix(b"\r\n")?;
        let end = find(rest, &delimiter)?;
        // The part's content ends with the CRLF that precedes the next delimiter.
        let part = rest[..end].strip_suffix(b"\r\n")?;
        add_part(&mut parsed, part)?;
        rest = &rest[end + delimiter.len()..];
    }
}

fn add_part(parsed: &mut Body, part: &[u8]) -> Option<()> {
    let split = find(part, b"\r\n\r\n")?;
    let headers = std::str::from_utf8(&part[..split]).ok()?;
    let content = &part[split + 4..];
    let (mut name, mut filename, mut content_type) = (None, None, None);
    for line in headers.split("\r\n") {
        let (key, value) = line.split_once(':')?;
        if key.trim().eq_ignore_ascii_case("content-disposition") {
            name = parameter(value, "name");
            filename = parameter(value, "filename");
        } else if key.trim().eq_ignore_ascii_case("content-type") {
            content_type = Some(value.trim().to_owned());
        }
    }
    let name = name?;
    match filename {
        Some(filename) => {
            parsed.files.push(Upload { field: name, filename, content_type, bytes: content.to_vec() });
        }
        None if name == "payload_json" => parsed.json = serde_json::from_slice(content).ok()?,
        None => {
            let text = String::from_utf8_lossy(content).into_owned();
            parsed.json.as_object_mut()?.entry(name).or_insert(Value::String(text));
        }
    }
    Some(())
}

/// `name="value"` (or unquoted) in a Content-Disposition header.
fn parameter(header: &str, key: &str) -> Option<String> {
    header.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_json_and_files_are_separated() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"payload_json\"\r\nContent-Type: application/json\r\n\r\n{\"content\":\"hi\"}\r\n--XyZ\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nline1\r\nline2\r\n--XyZ--\r\n";
        let parsed = parse(body, "XyZ").expect("well formed");
        assert_eq!(parsed.json["content"], "hi");
        assert_eq!(parsed.files.len(), 1);
        let file = &parsed.files[0];
        assert_eq!((file.field.as_str(), file.filename.as_str()), ("files[0]", "a.txt"));
        assert_eq!(file.content_type.as_deref(), Some("text/plain"));
        assert_eq!(file.bytes, b"line1\r\nline2", "CRLFs inside a file are kept, the one before the delimiter is not");
    }

    #[test]
    fn plain_fields_become_json_and_bad_bodies_are_refused() {
        let body = b"--b\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\nhello\r\n--b--";
        assert_eq!(parse(body, "b").unwrap().json["content"], "hello");
        assert!(parse(b"--b\r\nno headers end", "b").is_none());
        assert_eq!(boundary("multipart/form-data; boundary=\"abc\"").as_deref(), Some("abc"));
        assert_eq!(boundary("application/json"), None);
    }
}

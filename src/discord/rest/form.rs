//! multipart/form-data bodies, as Discord takes a message with files: the JSON as `payload_json`, then each file as
//! `files[n]`, described by the JSON's `attachments` entry of id `n`.

use super::File;
use serde_json::Value;

/// The boundary and body of a form holding `json` and `files`. The JSON should describe the files in its
/// `attachments` (see [`describe`]).
pub fn multipart(json: &Value, files: &[File]) -> (String, Vec<u8>) {
    let boundary = boundary_for(files);
    let mut body = Vec::new();
    let mut part = |headers: String, content: &[u8]| {
        body.extend_from_slice(format!("--{boundary}\r\n{headers}\r\n\r\n").as_bytes());
        body.extend_from_slice(content);
        body.extend_from_slice(b"\r\n");
    };
    part(
        "Content-Disposition: form-data; name=\"payload_json\"\r\nContent-Type: application/json".into(),
        json.to_string().as_bytes(),
    );
    for (n, file) in files.iter().enumerate() {
        let kind = file.content_type.as_deref().unwrap_or("application/octet-stream");
        let name = quoted(&file.name);
        part(
            format!("Content-Disposition: form-data; name=\"files[{n}]\"; filename=\"{name}\"\r\nContent-Type: {kind}"),
            &file.bytes,
        );
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (boundary, body)
}

/// The `attachments` entries that describe `files` (ids 0, 1, ...: their `files[n]` parts).
pub fn describe(files: &[File]) -> Value {
    let entries = files.iter().enumerate().map(|(n, file)| {
        let mut entry = serde_json::json!({"id": n, "filename": file.name});
        if let Some(description) = &file.description {
            entry["description"] = Value::String(description.clone());
        }
        entry
    });
    Value::Array(entries.collect())
}

/// A boundary that appears in none of the files.
fn boundary_for(files: &[File]) -> String {
    (0u32..)
        .map(|n| format!("turn-manager-{n:08x}-boundary"))
        .find(|b| !files.iter().any(|f| f.bytes.windows(b.len()).any(|w| w == b.as_bytes())))
        .expect("some boundary is in no file")
}

/// A file name safe inside a quoted header parameter.
fn quoted(name: &str) -> String {
    name.chars().map(|c| if c == '"' || c == '\\' || c.is_control() { '_' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, bytes: &[u8]) -> File {
        File { name: name.into(), content_type: Some("text/plain".into()), description: None, bytes: bytes.to_vec() }
    }

    #[test]
    fn a_form_holds_the_json_and_each_file_byte_for_byte_under_a_boundary_found_in_none() {
        let tricky = b"line\r\n--turn-manager-00000000-boundary\r\nmore".to_vec();
        let files = [file("a \"b\".txt", &tricky), file("c.bin", &[0, 159, 255])];
        let json = serde_json::json!({"content": "hi", "attachments": describe(&files)});
        let (boundary, body) = multipart(&json, &files);
        assert_ne!(boundary, "turn-manager-00000000-boundary", "that one is inside a file");
        // Read back as a server reads it.
        let parsed = local_discord::multipart::parse(&body, &boundary).expect("well formed");
        assert_eq!(parsed.json, json);
        let read: Vec<(&str, &str, &[u8])> =
            parsed.files.iter().map(|f| (f.field.as_str(), f.filename.as_str(), f.bytes.as_slice())).collect();
        assert_eq!(read, [("files[0]", "a _b_.txt", tricky.as_slice()), ("files[1]", "c.bin", &[0, 159, 255][..])]);
        assert_eq!(json["attachments"][1]["id"], 1);
        assert_eq!(json["attachments"][1]["filename"], "c.bin");
    }
}

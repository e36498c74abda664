//! The smallest HTTP/1.1 client that can time a loopback round trip: one kept-alive connection, `GET` or a JSON
//! `POST`, a body read to its `Content-Length`. Blocking, so the floor carries no async runtime's overhead.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long one request may take before the floor gives up on the server.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Bigger answers are refused: the floor's route answers a few dozen bytes.
const RESPONSE_MAX: usize = 64 * 1024;

pub struct Client {
    stream: TcpStream,
    host: String,
    buffer: Vec<u8>,
}

impl Client {
    /// Connects to `http://127.0.0.1:PORT` (the scheme is optional).
    pub fn connect(base_url: &str) -> std::io::Result<Self> {
        let host = base_url.trim_start_matches("http://").trim_end_matches('/').to_owned();
        let stream = TcpStream::connect(&host)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        Ok(Self { stream, host, buffer: Vec::with_capacity(4096) })
    }

    /// Sends `GET path` and reads the whole answer; returns its status.
    pub fn get(&mut self, path: &str) -> std::io::Result<u16> {
        let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\n\r\n", self.host);
        self.exchange(&request)
    }

    /// Sends `POST path` with a JSON body, as the bot `token` (Discord's `Authorization: Bot ...`); returns the status.
    pub fn post_json(&mut self, path: &str, token: &str, body: &str) -> std::io::Result<u16> {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bot {token}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.exchange(&request)
    }

    /// Writes a request and reads the whole answer; returns its status.
    fn exchange(&mut self, request: &str) -> std::io::Result<u16> {
        self.stream.write_all(request.as_bytes())?;
        self.buffer.clear();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some((status, length)) = parse_response(&self.buffer)? {
                if self.buffer.len() >= length {
                    return Ok(status);
                }
            }
            let read = self.stream.read(&mut chunk)?;
            if read == 0 || self.buffer.len() + read > RESPONSE_MAX {
                return Err(std::io::Error::other("the server closed or sent too much"));
            }
            self.buffer.extend_from_slice(&chunk[..read]);
        }
    }
}

/// The status and the full length (head and body) of a response, once its head has arrived.
pub fn parse_response(bytes: &[u8]) -> std::io::Result<Option<(u16, usize)>> {
    let Some(head_end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else { return Ok(None) };
    let head = String::from_utf8_lossy(&bytes[..head_end]);
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{what}: {head}"));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let mut length = 0;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("transfer-encoding") {
                return Err(bad("chunked answers are not supported"));
            }
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().map_err(|_| bad("bad content-length"))?;
            }
        }
    }
    Ok(Some((status, head_end + 4 + length)))
}

#[cfg(test)]
mod tests {
    use super::parse_response;

    #[test]
    fn a_response_is_complete_at_its_head_plus_content_length() {
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 12\r\n\r\n";
        assert_eq!(parse_response(&head[..20]).unwrap(), None, "the head is not there yet");
        assert_eq!(parse_response(head).unwrap(), Some((200, head.len() + 12)));
    }

    #[test]
    fn a_bodiless_answer_and_odd_ones() {
        assert_eq!(parse_response(b"HTTP/1.1 204 No Content\r\n\r\n").unwrap(), Some((204, 27)));
        assert!(parse_response(b"garbage\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
    }
}

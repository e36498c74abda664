//! REST API v10, the HTTP side: route faults, JSON and multipart bodies, percent-decoded path segments, Discord's
//! error bodies, the log of every call, and uploaded files served back. The routes themselves are in `routes`
//! and `hooks`; unknown routes answer 404 and are logged loudly.

use crate::Shared;
use crate::faults::RouteAction;
use crate::multipart::{self, Upload};
use crate::permissions::Permissions;
use crate::routes;
use crate::world::LogKind;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// An error answered the way Discord answers it.
pub struct ApiError {
    pub status: u16,
    pub code: u32,
    pub message: String,
    pub errors: Option<Value>,
}

impl ApiError {
    pub fn new(status: u16, code: u32, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), errors: None }
    }

    pub(crate) fn missing(what: Permissions) -> Self {
        tracing::debug!("missing {}", what.name_of());
        Self::new(403, 50013, "Missing Permissions")
    }

    pub(crate) fn not_found(what: &str, code: u32) -> Self {
        Self::new(404, code, format!("Unknown {what}"))
    }

    /// Discord's answer to content over the message limit.
    pub(crate) fn too_long(limit: usize) -> Self {
        let mut e = Self::new(400, 50035, "Invalid Form Body");
        e.errors = Some(json!({"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH",
            "message": format!("Must be {limit} or fewer in length.")}]}}));
        e
    }
}

pub(crate) type Reply = Result<(u16, Value), ApiError>;

pub async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let query: HashMap<String, String> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('=').map(|(k, v)| (percent_decode(k), percent_decode(v))))
        .collect();
    let action = shared.world.lock().expect("world lock").faults.take_route_action(method.as_str(), &path);
    if action.is_some() {
        shared.changed.notify_waiters();
    }
    match action {
        Some(RouteAction::RateLimit { retry_after }) => {
            let secs = retry_after.as_secs_f64();
            let body = json!({"message": "You are being rate limited.", "retry_after": secs, "global": false});
            let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
            let h = response.headers_mut();
            h.insert("retry-after", HeaderValue::from_str(&format!("{}", secs.ceil() as u64)).expect("digits"));
            h.insert("x-ratelimit-global", HeaderValue::from_static("false"));
            h.insert("x-ratelimit-scope", HeaderValue::from_static("user"));
            log_call(&shared, &method, &path, 429);
            return response;
        }
        Some(RouteAction::ServerError(status)) => {
            log_call(&shared, &method, &path, status);
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (code, "upstream connect error").into_response();
        }
        Some(RouteAction::Slow(delay)) => tokio::time::sleep(delay).await,
        None => {}
    }
    let token = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    // Path segments are decoded one by one, so an encoded `/` stays inside its segment.
    let decoded: Vec<String> = api_route(&path).split('/').map(percent_decode).collect();
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    if let (&Method::GET, ["attachments", _channel, file, _name]) = (&method, segments.as_slice()) {
        return serve_file(&shared, &path, file);
    }
    let result = {
        let mut world = shared.world.lock().expect("world lock");
        let bot = world.bot_by_token(&token).map(|u| u.id);
        let result = parse_body(&content_type, &body).and_then(|body| {
            let call =
                Call { method: method.as_str(), seg: &segments, query: &query, body: &body.json, files: &body.files };
            routes::route_call(&mut world, &shared.gateway_url, &call, bot)
        });
        if let Err(e) = &result
            && e.status == 404
            && e.code == 0
        {
            world.record(LogKind::Refused { what: format!("unknown route {method} {path}") });
        }
        result
    };
    shared.changed.notify_waiters();
    let (status, value) = match result {
        Ok(ok) => ok,
        Err(e) => {
            let mut value = json!({"message": e.message, "code": e.code});
            if let Some(errors) = e.errors {
                value["errors"] = errors;
            }
            (e.status, value)
        }
    };
    log_call(&shared, &method, &path, status);
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    if status == 204 { code.into_response() } else { (code, axum::Json(value)).into_response() }
}

/// One REST call, its path split into decoded segments.
pub(crate) struct Call<'a> {
    pub method: &'a str,
    pub seg: &'a [&'a str],
    pub query: &'a HashMap<String, String>,
    pub body: &'a Value,
    pub files: &'a [Upload],
}

/// The route below the API prefix: `/api/v10/users/@me` -> `users/@me` (any version, or none, is accepted).
fn api_route(path: &str) -> &str {
    let route = path.strip_prefix("/api/").unwrap_or(path.trim_start_matches('/'));
    let unversioned = route
        .strip_prefix('v')
        .and_then(|rest| rest.split_once('/'))
        .filter(|(version, _)| !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()))
        .map(|(_, rest)| rest);
    unversioned.unwrap_or(route).trim_end_matches('/')
}

/// A JSON body, or a multipart/form-data one (`payload_json` and files); a body that is neither is refused as
/// Discord refuses it.
fn parse_body(content_type: &str, body: &[u8]) -> Result<multipart::Body, ApiError> {
    if let Some(boundary) = multipart::boundary(content_type) {
        let parsed = multipart::parse(body, &boundary);
        return parsed.ok_or_else(|| ApiError::new(400, 50035, "Invalid Form Body"));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(multipart::Body::default());
    }
    let json = serde_json::from_slice(body)
        .map_err(|_| ApiError::new(400, 50109, "The request body contains invalid JSON."))?;
    Ok(multipart::Body { json, files: Vec::new() })
}

/// An uploaded file's bytes, at the `url` its attachment gives.
fn serve_file(shared: &Shared, path: &str, file: &str) -> Response {
    let mut world = shared.world.lock().expect("world lock");
    let found = file.parse::<u64>().ok().and_then(|id| world.files.get(&id).cloned());
    let status = if found.is_some() { 200 } else { 404 };
    world.record(LogKind::Rest { method: "GET".into(), path: path.to_owned(), status });
    match found {
        Some(bytes) => bytes.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn log_call(shared: &Shared, method: &Method, path: &str, status: u16) {
    let mut world = shared.world.lock().expect("world lock");
    world.record(LogKind::Rest { method: method.to_string(), path: path.to_owned(), status });
}

/// Decodes `%E2%9C%85`, `%40me` and friends in a path segment or a query value.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((high * 16 + low) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::{api_route, percent_decode};

    #[test]
    fn routes_are_read_below_any_api_version() {
        assert_eq!(api_route("/api/v10/users/@me"), "users/@me");
        assert_eq!(api_route("/api/v9/channels/1/"), "channels/1");
        assert_eq!(api_route("/api/users/@me"), "users/@me");
        assert_eq!(api_route("/api/v10/voice/regions"), "voice/regions");
        assert_eq!(api_route("/api/vip/x"), "vip/x", "only v followed by digits is a version");
    }

    #[test]
    fn percent_decoding_handles_emoji_and_stray_percent_signs() {
        assert_eq!(percent_decode("%E2%9C%85"), "✅");
        assert_eq!(percent_decode("✅"), "✅");
        assert_eq!(percent_decode("%✅"), "%✅", "a % before a multi-byte character must not panic");
        assert_eq!(percent_decode("100%"), "100%");
    }
}

//! A small client for the REST calls the effects make (announce, repost through a webhook, delete, react, read a
//! channel's history), made directly with reqwest so that Discord's rate-limit headers and `retry_after` reach the
//! bot: with `--api-base` serenity's own limiter must be off, and its client drops both on that path. Each route's
//! bucket is respected from the headers of its last answer, so a busy channel waits instead of earning 429s.

use super::budget::RestBudget;
use super::form;
use super::{File, INVALID_WEBHOOK_TOKEN, NETWORK_REFUSAL, NETWORK_REFUSAL_PAUSE, RestError};
use crate::metrics::Answer;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The longest a single REST call may take before it is given up (and retried by the sender's policy).
pub const REST_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a file's download may take, for a repost, on top of the time its size takes at
/// [`FILE_BYTES_PER_SECOND`].
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// The slowest transfer of an agent's files a call is given time for (a repost's upload, on top of [`REST_TIMEOUT`],
/// and each file's download): 25 MiB over a modest link take far longer than 10 s, and cut off each time they would
/// be sent again and again for ten minutes, holding the channel's announcements behind them.
const FILE_BYTES_PER_SECOND: u64 = 256 * 1024;
/// Calls in flight at once; the next wait for a slot in the order they came (a fair semaphore). In a burst (1,000
/// deadlines at one instant: 1,000 notices, then 1,000 announcements behind them) calls are then answered first come
/// first served, instead of all 2,000 slowing down together until the last: the notices' lateness p99 fell from
/// 315-525 ms to 122-181 ms in `bench --only timeouts` (16 slots: 240 ms, 128: 275 ms, unbounded: as before), turns/s
/// unchanged. Discord's 50 calls/s bound a bot long before 64 slots do, even at 1 s per call.
pub const IN_FLIGHT_MAX: usize = 64;
/// Discord's API host, when no `--api-base` is given.
const DISCORD: &str = "https://discord.com";

/// Discord asks every REST client to name itself as `DiscordBot ($url, $versionNumber)`; a call without a User-Agent
/// "may be blocked" by its network (a 403 with code 40333). serenity names itself for its own calls; reqwest sends
/// none unless told (found by a review).
const USER_AGENT: &str = concat!("DiscordBot (turn-manager, ", env!("CARGO_PKG_VERSION"), ")");

/// A wait a header or a body gives in seconds, as a duration, at most a day; `None` for what is no number of seconds
/// (`inf` from a broken proxy panicked the channel's sender; taken for no wait, a 429 would be tried again at once).
fn seconds_said(seconds: f64) -> Option<Duration> {
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(86_400.0)))
}

/// How long a call may take: [`REST_TIMEOUT`], and for a form with files the time to send them at
/// [`FILE_BYTES_PER_SECOND`] on top.
fn timeout_for(body: Option<&Payload<'_>>) -> Duration {
    match body {
        Some(Payload::Form { bytes, .. }) => time_limit_with(bytes.len() as u64),
        _ => REST_TIMEOUT,
    }
}

/// How long a call carrying `file_bytes` of files may take (see [`timeout_for`]).
pub fn time_limit_with(file_bytes: u64) -> Duration {
    REST_TIMEOUT + Duration::from_secs(file_bytes / FILE_BYTES_PER_SECOND)
}

/// A message a webhook posted: its id, and the channel (or thread) it went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posted {
    pub id: u64,
    pub channel: u64,
}

/// How often a call waiting for the probe of its route's bucket ([`Buckets::take`]) looks again.
const RATE_LIMIT_RECHECK: Duration = Duration::from_millis(50);

/// A route's bucket as Discord last described it.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    remaining: u64,
    reset_at: Instant,
    /// The call out to learn the size of the bucket, refilled since it was spent (see [`Buckets::take`]), by its
    /// number: only its own end frees the next probe.
    probe: Option<u64>,
    /// Which answer told of it: a place taken before a later answer is not given back to that answer's count.
    told_by: u64,
}

/// What [`Buckets::take`] gave a call that may go.
#[derive(Debug, PartialEq, Eq)]
enum Taken {
    /// One of the calls the bucket has left (by the answer that told of it, see [`Buckets::give_back`]), or a route
    /// not known yet (`None`).
    Spent(Option<u64>),
    /// The call that learns the refilled bucket's size, with its number: the others wait for its answer
    /// ([`Buckets::settle`]).
    Probe(u64),
}

/// Rate-limit state: per route (with its major parameter, as Discord counts them) and global.
#[derive(Default)]
pub struct Buckets {
    routes: Mutex<HashMap<String, Bucket>>,
    global_until: Mutex<Option<Instant>>,
    /// Numbers the probes, so that an older probe ending late never frees a newer one's route, and the answers
    /// that tell of a bucket.
    numbers: std::sync::atomic::AtomicU64,
}

impl Buckets {
    /// How long to wait before calling `route` now: until its bucket resets if it is spent, or the global limit
    /// lifts; while a probe of the bucket is out ([`Buckets::take`]), [`RATE_LIMIT_RECHECK`], to look again then.
    pub fn wait_before(&self, route: &str, now: Instant) -> Duration {
        let global =
            self.global_until.lock().expect("global lock").map_or(Duration::ZERO, |until| until - now.min(until));
        let routes = self.routes.lock().expect("buckets lock");
        let bucket = match routes.get(route).filter(|b| b.remaining == 0) {
            None => Duration::ZERO,
            Some(b) if b.probe.is_some() => RATE_LIMIT_RECHECK,
            Some(b) => b.reset_at - now.min(b.reset_at),
        };
        global.max(bucket)
    }

    /// Learns from an answer's headers: what is left of the route's bucket and when it refills.
    pub fn learn(&self, route: &str, now: Instant, remaining: Option<u64>, reset_after: Option<f64>) {
        let (Some(remaining), Some(reset_after)) = (remaining, reset_after) else { return };
        let Some(reset_after) = seconds_said(reset_after) else { return };
        let reset_at = now + reset_after;
        let told_by = self.numbers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let bucket = Bucket { remaining, reset_at, probe: None, told_by };
        self.routes.lock().expect("buckets lock").insert(route.to_owned(), bucket);
    }

    /// A 429 with `global` set: every route waits.
    pub fn pause_everything(&self, until: Instant) {
        let mut global = self.global_until.lock().expect("global lock");
        *global = Some(global.map_or(until, |old| old.max(until)));
    }

    /// Takes one call from the route's bucket if it may be made at `now`, so two calls never both spend its last
    /// one; otherwise how long to wait. A bucket spent and since refilled has a size no answer has told yet: one call
    /// goes (the probe), and the others wait until its answer tells the size or it ends without telling
    /// ([`Buckets::settle`]), looking again every [`RATE_LIMIT_RECHECK`]; before, every call waiting for the
    /// refill went at once and earned 429s (found by a review: threads share their parent's webhook route).
    fn take(&self, route: &str, now: Instant) -> Result<Taken, Duration> {
        let wait = self.wait_before(route, now);
        if !wait.is_zero() {
            return Err(wait);
        }
        let mut routes = self.routes.lock().expect("buckets lock");
        let Some(bucket) = routes.get_mut(route) else { return Ok(Taken::Spent(None)) };
        if bucket.remaining > 0 {
            bucket.remaining -= 1;
            Ok(Taken::Spent(Some(bucket.told_by)))
        } else if bucket.reset_at <= now && bucket.probe.is_none() {
            let probe = self.numbers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            bucket.probe = Some(probe);
            Ok(Taken::Probe(probe))
        } else if bucket.probe.is_some() {
            Err(RATE_LIMIT_RECHECK)
        } else {
            Err(bucket.reset_at - now) // spent by a call between the two locks
        }
    }

    /// A call that took its place in `route`'s bucket, as answer `told_by` told of it, was not made after all. A
    /// bucket told of by a later answer since counted without the call already: nothing is given back to it (found by
    /// a review: the bucket then said one call more than Discord did, and one went into a 429).
    fn give_back(&self, route: &str, told_by: u64) {
        let mut routes = self.routes.lock().expect("buckets lock");
        if let Some(bucket) = routes.get_mut(route).filter(|bucket| bucket.told_by == told_by) {
            bucket.remaining += 1;
        }
    }

    /// The probe `probe` of `route` ended: if its answer told nothing of the bucket (a time-out, a failure, an
    /// answer without the headers, a call not made), the next call may probe now. A probe whose route was told of
    /// meanwhile by another answer, and probed again since, frees nothing: before, an older probe ending late let a
    /// second one go beside the newer (found reading the diff).
    fn settle(&self, route: &str, probe: u64) {
        let mut routes = self.routes.lock().expect("buckets lock");
        if let Some(bucket) = routes.get_mut(route).filter(|b| b.probe == Some(probe)) {
            bucket.probe = None;
        }
    }
}

/// A call's place in its route's bucket, from [`Buckets::take`] until it ends. However it ends (refused before it
/// is made, failed, timed out, cancelled while it waits for the global budget), a probe that learned nothing lets
/// the next call go, and a place taken by a call never made is given back (before, a call cancelled while it waited
/// for the budget kept it until the next answer's headers set the count right).
struct Place<'a> {
    buckets: &'a Buckets,
    route: &'a str,
    taken: Taken,
    made: bool,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        match self.taken {
            Taken::Probe(probe) => self.buckets.settle(self.route, probe),
            Taken::Spent(Some(told_by)) if !self.made => self.buckets.give_back(self.route, told_by),
            Taken::Spent(_) => {}
        }
    }
}

/// The REST client. It holds the token, so it has no `Debug` and never logs a request's headers.
pub struct DiscordHttp {
    client: reqwest::Client,
    /// e.g. `https://discord.com/api/v10`.
    api: String,
    authorization: String,
    buckets: Buckets,
    /// The bot's global budget, shared with its serenity calls.
    budget: Arc<RestBudget>,
    in_flight: tokio::sync::Semaphore,
    /// Calls waiting for a slot.
    waiting: std::sync::atomic::AtomicUsize,
}

/// A message as the history pages give it, with the fields the bot reads.
#[derive(Debug, Deserialize)]
pub struct PageMessage {
    pub id: String,
    pub content: String,
    pub author: PageAuthor,
    #[serde(default)]
    pub webhook_id: Option<String>,
    /// When it was last edited, if it was: catch-up judges an edit it finds by it.
    #[serde(default)]
    pub edited_timestamp: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default)]
    pub attachments: Vec<Value>,
    #[serde(default)]
    pub embeds: Vec<Value>,
    #[serde(default)]
    pub sticker_items: Vec<Value>,
    #[serde(default)]
    pub poll: Option<Value>,
    #[serde(default)]
    pub components: Vec<Value>,
    /// Discord's message flags (`@silent`, previews suppressed...).
    #[serde(default)]
    pub flags: u64,
    /// Discord's message type: 0 or 19 for one someone wrote, others for its system messages.
    #[serde(default, rename = "type")]
    pub kind: u8,
    /// The users it mentioned, as Discord applied its author's allowed mentions.
    #[serde(default)]
    pub mentions: Option<Vec<Mentioned>>,
}

/// A user a message mentioned: only the id is read.
#[derive(Debug, Deserialize)]
pub struct Mentioned {
    pub id: String,
}

impl PageMessage {
    /// Whether it carries files or embeds of its own ("rich"), which a repost must carry over, or a sticker, a poll
    /// or buttons, which one cannot (the relay then finds that out and leaves the original: found by reviews).
    pub fn has_files(&self) -> bool {
        !self.attachments.is_empty()
            || self.embeds.iter().any(|e| super::is_own_embed(e["type"].as_str()))
            || !self.sticker_items.is_empty()
            || self.poll.as_ref().is_some_and(|poll| !poll.is_null())
            || !self.components.is_empty()
    }
}

/// A request's body.
enum Payload<'a> {
    Json(&'a Value),
    /// multipart/form-data, with files.
    Form {
        boundary: String,
        bytes: Vec<u8>,
    },
}

#[derive(Debug, Deserialize)]
pub struct PageAuthor {
    pub id: String,
    pub username: String,
}

impl DiscordHttp {
    pub fn new(token: &str, api_base: Option<&str>, budget: Arc<RestBudget>) -> Self {
        Self::with_slots(token, api_base, budget, IN_FLIGHT_MAX)
    }

    fn with_slots(token: &str, api_base: Option<&str>, budget: Arc<RestBudget>, slots: usize) -> Self {
        let base = api_base.unwrap_or(DISCORD).trim_end_matches('/');
        Self {
            client: reqwest::Client::builder()
                .user_agent(USER_AGENT)
                .build()
                .expect("a client with a User-Agent: reqwest fails to build only without a TLS backend"),
            api: format!("{base}/api/v10"),
            authorization: format!("Bot {token}"),
            buckets: Buckets::default(),
            budget,
            in_flight: tokio::sync::Semaphore::new(slots),
            waiting: Default::default(),
        }
    }

    /// Posts a message; answers its id.
    pub async fn create_message(&self, channel: u64, body: &Value) -> Result<String, RestError> {
        let route = format!("POST channels/{channel}/messages");
        let answer = self
            .send(reqwest::Method::POST, &route, &format!("/channels/{channel}/messages"), Some(Payload::Json(body)))
            .await?;
        // Only the id is read: the rest of the message is skipped, not built.
        #[derive(Deserialize)]
        struct Created {
            id: String,
        }
        Ok(serde_json::from_slice::<Created>(&answer).map(|created| created.id).unwrap_or_default())
    }

    pub async fn delete_message(&self, channel: u64, message: u64) -> Result<(), RestError> {
        let route = format!("DELETE channels/{channel}/messages");
        self.send(reqwest::Method::DELETE, &route, &format!("/channels/{channel}/messages/{message}"), None)
            .await
            .map(drop)
    }

    pub async fn react(&self, channel: u64, message: u64, emoji: &str) -> Result<(), RestError> {
        let route = format!("PUT channels/{channel}/reactions");
        let path = format!("/channels/{channel}/messages/{message}/reactions/{}/@me", percent_encode(emoji));
        self.send(reqwest::Method::PUT, &route, &path, None).await.map(drop)
    }

    /// Posts through a webhook (into `thread` when given), with `files` (multipart) if any, and waits for Discord to
    /// confirm the message: its id and the channel it went to (the webhook's, which someone may have changed).
    pub async fn execute_webhook(
        &self,
        id: u64,
        token: &str,
        thread: Option<u64>,
        body: &Value,
        files: &[File],
    ) -> Result<Posted, RestError> {
        let route = format!("POST webhooks/{id}");
        let thread = thread.map(|t| format!("&thread_id={t}")).unwrap_or_default();
        let path = format!("/webhooks/{id}/{token}?wait=true{thread}");
        let payload = if files.is_empty() {
            Payload::Json(body)
        } else {
            let (boundary, bytes) = form::multipart(body, files);
            Payload::Form { boundary, bytes }
        };
        let answer = self.send(reqwest::Method::POST, &route, &path, Some(payload)).await?;
        #[derive(Deserialize)]
        struct Created {
            id: String,
            channel_id: String,
        }
        let created: Created = serde_json::from_slice(&answer)
            .map_err(|e| RestError::Impossible(format!("the webhook's answer is not a message: {e}")))?;
        let number = |s: &str| s.parse::<u64>().map_err(|e| RestError::Impossible(format!("a bad id {s:?}: {e}")));
        Ok(Posted { id: number(&created.id)?, channel: number(&created.channel_id)? })
    }

    /// Deletes a message a webhook posted (in `thread`, if it is in one), with the webhook's token (no permission
    /// needed).
    pub async fn delete_webhook_message(
        &self,
        id: u64,
        token: &str,
        thread: Option<u64>,
        message: u64,
    ) -> Result<(), RestError> {
        let route = format!("DELETE webhooks/{id}/messages");
        let thread = thread.map(|t| format!("?thread_id={t}")).unwrap_or_default();
        let path = format!("/webhooks/{id}/{token}/messages/{message}{thread}");
        self.send(reqwest::Method::DELETE, &route, &path, None).await.map(drop)
    }

    /// One message, as Discord holds it.
    pub async fn get_message(&self, channel: u64, message: u64) -> Result<Value, RestError> {
        let route = format!("GET channels/{channel}/messages/id");
        let answer =
            self.send(reqwest::Method::GET, &route, &format!("/channels/{channel}/messages/{message}"), None).await?;
        serde_json::from_slice(&answer).map_err(|e| RestError::Transport(format!("unreadable message: {e}")))
    }

    /// Downloads an attachment from its URL (Discord's CDN, which takes no token: none is sent). A refusal is
    /// [`RestError::Impossible`], so it is never taken for the message being gone; a 429, 5xx or time-out is
    /// transient.
    pub async fn download(&self, url: &str, size: u64) -> Result<Vec<u8>, RestError> {
        let exchange = async {
            let response = self.client.get(url).send().await.map_err(|e| RestError::Transport(without_url(&e)))?;
            let status = response.status().as_u16();
            if status == 429 || status >= 500 {
                return Err(RestError::Status { status, message: "download failed".into(), retry_after: None });
            }
            if !(200..300).contains(&status) {
                return Err(RestError::Impossible(format!("the file's download was refused ({status})")));
            }
            response.bytes().await.map(|b| b.to_vec()).map_err(|e| RestError::Transport(without_url(&e)))
        };
        let timeout = DOWNLOAD_TIMEOUT + Duration::from_secs(size / FILE_BYTES_PER_SECOND);
        tokio::time::timeout(timeout, exchange).await.unwrap_or(Err(RestError::Timeout(timeout)))
    }

    /// Up to `limit` messages after `after`, in the order Discord gives them.
    pub async fn messages_after(&self, channel: u64, after: u64, limit: u8) -> Result<Vec<PageMessage>, RestError> {
        let route = format!("GET channels/{channel}/messages");
        let path = format!("/channels/{channel}/messages?after={after}&limit={limit}");
        let answer = self.send(reqwest::Method::GET, &route, &path, None).await?;
        serde_json::from_slice(&answer).map_err(|e| RestError::Transport(format!("unreadable page of messages: {e}")))
    }

    /// Waits for one of the [`IN_FLIGHT_MAX`] slots, held until the answer is read. A route's rate limit is waited
    /// for before, so that no slot is held idle for one channel; the global budget after, so that it times the calls
    /// as they go out.
    async fn slot(&self) -> tokio::sync::SemaphorePermit<'_> {
        use std::sync::atomic::Ordering::Relaxed;
        self.waiting.fetch_add(1, Relaxed);
        let slot = self.in_flight.acquire().await.expect("the semaphore is never closed");
        self.waiting.fetch_sub(1, Relaxed);
        slot
    }

    async fn send(
        &self,
        method: reqwest::Method,
        route: &str,
        path: &str,
        body: Option<Payload<'_>>,
    ) -> Result<Vec<u8>, RestError> {
        // The route's limit is waited for without a slot, then its call taken from the bucket once a slot is held:
        // another call of the route may have spent it meanwhile (found by a review: it was looked at once).
        let mut logged = false;
        let (_slot, taken) = loop {
            let wait = self.buckets.wait_before(route, Instant::now());
            if !wait.is_zero() {
                if !std::mem::replace(&mut logged, true) {
                    tracing::debug!(route, "waiting {wait:?} for the rate limit");
                }
                tokio::time::sleep(wait).await;
                continue;
            }
            let slot = self.slot().await;
            match self.buckets.take(route, Instant::now()) {
                Ok(taken) => break (slot, taken),
                // Taken meanwhile (a probe went, or the last call): waited for without the slot, never in a spin
                // (found by a review: a call behind a probe out for long looped without sleeping).
                Err(wait) => {
                    drop(slot);
                    tokio::time::sleep(wait).await;
                }
            }
        };
        let mut place = Place { buckets: &self.buckets, route, taken, made: false };
        self.budget.take().await;
        if !super::MAY_SEND.try_with(|may| may()).unwrap_or(true) {
            return Err(RestError::Unavailable("not sent: this process may no longer act for the channel".into()));
        }
        let metric = crate::metrics::rest_route(method.as_str(), path);
        let mut request =
            self.client.request(method, format!("{}{path}", self.api)).header("Authorization", &self.authorization);
        let timeout = timeout_for(body.as_ref());
        match body {
            Some(Payload::Json(body)) => {
                request = request.header("Content-Type", "application/json").body(body.to_string());
            }
            Some(Payload::Form { boundary, bytes }) => {
                request =
                    request.header("Content-Type", format!("multipart/form-data; boundary={boundary}")).body(bytes);
            }
            None => {}
        }
        let exchange = async {
            let response = request.send().await.map_err(|e| RestError::Transport(without_url(&e)))?;
            let limits = Limits::of(response.headers());
            let status = response.status().as_u16();
            let bytes = response.bytes().await.map_err(|e| RestError::Transport(without_url(&e)))?;
            Ok::<_, RestError>((status, limits, bytes))
        };
        place.made = true; // from here it may reach Discord, whether or not its answer does
        let started = Instant::now();
        let answer = tokio::time::timeout(timeout, exchange).await;
        let metric_answer = match &answer {
            Ok(Ok((status, ..))) => Answer::Status(*status),
            Ok(Err(_)) => Answer::Failed,
            Err(_) => Answer::Timeout,
        };
        crate::metrics::rest_call(metric, metric_answer, started.elapsed());
        let (status, limits, bytes) = match answer {
            Ok(answer) => answer?,
            Err(_) => return Err(RestError::Timeout(timeout)),
        };
        let now = Instant::now();
        self.buckets.learn(route, now, limits.remaining.map(|n| n as u64), limits.reset_after);
        if (200..300).contains(&status) {
            return Ok(bytes.to_vec());
        }
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let message = answer["message"].as_str().unwrap_or("no explanation").to_owned();
        // The body's wait first, then the header's: a wait that is no number of seconds in one leaves the other.
        let said = |seconds: Option<f64>| seconds.and_then(seconds_said);
        let retry_after =
            (status == 429).then(|| said(answer["retry_after"].as_f64()).or(said(limits.retry_after))).flatten();
        // A 429 from Cloudflare that is not Discord's JSON (its ban of the address, an HTML page) holds for every
        // route, like a global limit: each route trying meanwhile would only prolong it (found by a review). A plain
        // 429 from a proxy of one's own is that route's.
        let banned = status == 429 && answer.is_null() && limits.cloudflare;
        if status == 429 && (answer["global"].as_bool() == Some(true) || limits.global || banned) {
            self.buckets.pause_everything(now + retry_after.unwrap_or(Duration::from_secs(1)));
        }
        let code = answer["code"].as_i64();
        if status == 403 && (code == Some(NETWORK_REFUSAL) || (answer.is_null() && limits.cloudflare)) {
            self.buckets.pause_everything(now + NETWORK_REFUSAL_PAUSE);
            return Err(RestError::NetworkRefused(message));
        }
        if status == 401 && code == Some(INVALID_WEBHOOK_TOKEN) {
            return Err(RestError::WebhookTokenRefused(message));
        }
        Err(RestError::Status { status, message, retry_after })
    }
}

/// What an answer's headers say of the rate limits: read from them as they come, rather than copying them all.
struct Limits {
    remaining: Option<f64>,
    reset_after: Option<f64>,
    retry_after: Option<f64>,
    global: bool,
    /// Answered by Cloudflare (Discord's front): its own 429s are bans of the address.
    cloudflare: bool,
}

impl Limits {
    fn of(headers: &reqwest::header::HeaderMap) -> Self {
        let number = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<f64>().ok());
        Limits {
            remaining: number("x-ratelimit-remaining"),
            reset_after: number("x-ratelimit-reset-after"),
            retry_after: number("retry-after"),
            cloudflare: headers.contains_key("cf-ray")
                || headers
                    .get("server")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.eq_ignore_ascii_case("cloudflare")),
            // Discord sends it only on a global limit, as `true`; a proxy or a test server may send `false` (found
            // by a review: taken for global by its mere presence, one route's 429 held every call).
            global: headers
                .get("x-ratelimit-global")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        }
    }
}

/// reqwest's errors name the URL, and a webhook's URL holds its token: never let it reach a log.
fn without_url(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "the request failed"
    };
    format!("{kind}: {}", std::error::Error::source(error).map_or(String::new(), |s| s.to_string()))
}

/// Percent-encodes a path segment (an emoji), byte by byte.
fn percent_encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn a_call_with_files_is_given_time_to_upload_them() {
        let json = Value::Null;
        assert_eq!(timeout_for(Some(&Payload::Json(&json))), REST_TIMEOUT);
        assert_eq!(timeout_for(None), REST_TIMEOUT);
        let form = |len: usize| Payload::Form { boundary: String::new(), bytes: vec![0; len] };
        assert_eq!(timeout_for(Some(&form(1_000))), REST_TIMEOUT, "a small form: no more");
        assert_eq!(timeout_for(Some(&form(25 * 1024 * 1024))), REST_TIMEOUT + Duration::from_secs(100));
    }

    /// Found by a review: `inf` in a rate limit's header (a broken proxy) panicked the channel's sender.
    #[test]
    fn a_wait_said_in_seconds_is_bounded_and_never_panics() {
        let cases =
            [(f64::INFINITY, None), (f64::NAN, None), (-3.0, None), (1e300, Some(86_400.0)), (0.25, Some(0.25))];
        for (said, wait) in cases {
            assert_eq!(super::seconds_said(said), wait.map(Duration::from_secs_f64), "{said}");
        }
    }

    /// A server that answers every request with status 429, `headers` and `body`, and closes the connection.
    async fn limiting(headers: &str, body: &'static str) -> String {
        answering("429 Too Many Requests", &format!("Retry-After: 7\r\n{headers}"), body).await.0
    }

    /// A server that answers every request with `status`, `headers` and `body`, and closes the connection; each
    /// request's head (lowercase) is sent on the channel.
    pub(crate) async fn answering(
        status: &str,
        headers: &str,
        body: &'static str,
    ) -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let answer =
            format!("HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        let (heads, received) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).await.unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let _ = heads.send(String::from_utf8_lossy(&head).to_ascii_lowercase());
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        (base, received)
    }

    /// Found by a review: the bot's own calls went out with no User-Agent, which Discord asks of every client and
    /// may block (a 403, code 40333); such a 403, or Cloudflare's, was taken for a missing permission (sessions
    /// paused, channels turned to observe mode). A permission's 403 is still one.
    #[tokio::test]
    async fn every_call_names_the_bot_and_a_403_from_discords_network_is_not_a_missing_permission() {
        let json = "Content-Type: application/json\r\n";
        let (base, mut heads) =
            answering("403 Forbidden", json, r#"{"message": "internal network error", "code": 40333}"#).await;
        let http = DiscordHttp::new("t", Some(&base), Arc::new(RestBudget::new(0)));
        let refused = http.create_message(1, &serde_json::json!({"content": "hi"})).await.unwrap_err();
        let head = heads.recv().await.unwrap();
        let agent = head.lines().find_map(|l| l.strip_prefix("user-agent: ")).unwrap_or("none");
        assert!(agent.starts_with("discordbot (turn-manager, "), "the User-Agent Discord asks for: {agent}");
        assert!(matches!(refused, RestError::NetworkRefused(_)), "refused, not perhaps made: {refused:?}");
        assert!(refused.is_transient() && refused.to_string().contains("internal network error"), "{refused}");
        let other_route = http.buckets.wait_before("DELETE channels/1/messages/2", Instant::now());
        assert!(other_route > Duration::from_secs(4), "every route waits a little: {other_route:?}");

        let cloudflare = "Content-Type: text/html\r\nServer: cloudflare\r\nCF-RAY: 8f0c\r\n";
        let (base, _) = answering("403 Forbidden", cloudflare, "<html>blocked</html>").await;
        let http = DiscordHttp::new("t", Some(&base), Arc::new(RestBudget::new(0)));
        let refused = http.delete_message(1, 2).await.unwrap_err();
        assert!(matches!(refused, RestError::NetworkRefused(_)), "Cloudflare's 403: {refused:?}");

        // A webhook's own token refused: the webhook is taken for gone (found or made again), not the bot's token.
        let hook = r#"{"message": "Invalid Webhook Token", "code": 50027}"#;
        let (base, _) = answering("401 Unauthorized", json, hook).await;
        let http = DiscordHttp::new("t", Some(&base), Arc::new(RestBudget::new(0)));
        let refused = http.delete_webhook_message(1, "w", None, 2).await.unwrap_err();
        assert!(matches!(refused, RestError::WebhookTokenRefused(_)) && !refused.is_transient(), "{refused:?}");

        let missing = r#"{"message": "Missing Permissions", "code": 50013}"#;
        let (base, _) = answering("403 Forbidden", json, missing).await;
        let http = DiscordHttp::new("t", Some(&base), Arc::new(RestBudget::new(0)));
        let refused = http.delete_message(1, 2).await.unwrap_err();
        assert_eq!(refused.status(), Some(403), "a permission's refusal");
        assert!(!refused.is_transient());
    }

    /// Found by reviews: a 429 from Cloudflare that is not Discord's JSON (its ban of the address) held back only its
    /// own route, and every other route's calls earned 429s meanwhile, prolonging the ban; and a route's 429 saying
    /// `X-RateLimit-Global: false` was taken for a global one.
    #[tokio::test]
    async fn a_429_that_is_not_discords_holds_every_route_and_one_saying_not_global_only_its_own() {
        let other_route = |http: &DiscordHttp| http.buckets.wait_before("POST /channels/{id}/messages", Instant::now());
        let cloudflare = "Content-Type: text/html\r\nServer: cloudflare\r\nCF-RAY: 8f0c\r\n";
        let banned = limiting(cloudflare, "<html>banned</html>").await;
        let http = DiscordHttp::new("t", Some(&banned), Arc::new(RestBudget::new(0)));
        assert_eq!(http.get_message(1, 2).await.unwrap_err().status(), Some(429));
        assert!(other_route(&http) > Duration::from_secs(5), "another route waits too: {:?}", other_route(&http));

        // A proxy of one's own (nginx's limit_req) answering a plain 429 limits that route only.
        let plain = limiting("Content-Type: text/plain\r\n", "Too Many Requests").await;
        let http = DiscordHttp::new("t", Some(&plain), Arc::new(RestBudget::new(0)));
        assert_eq!(http.get_message(1, 2).await.unwrap_err().status(), Some(429));
        assert_eq!(other_route(&http), Duration::ZERO, "a proxy's plain 429 holds its own route");

        let headers = "Content-Type: application/json\r\nX-RateLimit-Global: false\r\nX-RateLimit-Scope: user\r\n";
        let body = r#"{"message": "You are being rate limited.", "retry_after": 7, "global": false}"#;
        let http = DiscordHttp::new("t", Some(&limiting(headers, body).await), Arc::new(RestBudget::new(0)));
        assert_eq!(http.get_message(1, 2).await.unwrap_err().status(), Some(429));
        assert_eq!(other_route(&http), Duration::ZERO, "only its own route waits");
    }

    /// A server that answers each request with a message id only once the test lets it (one permit of `release` per
    /// answer); every request's arrival is sent on the channel.
    async fn holding_server() -> (String, tokio::sync::mpsc::UnboundedReceiver<()>, Arc<tokio::sync::Semaphore>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (arrived, arrivals) = tokio::sync::mpsc::unbounded_channel();
        let release = Arc::new(tokio::sync::Semaphore::new(0));
        let gate = release.clone();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let (arrived, gate) = (arrived.clone(), gate.clone());
                tokio::spawn(async move {
                    let mut bytes = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        // One request: its head, then its body (the test's bodies are small JSON).
                        let complete = |b: &[u8]| {
                            let end = b.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
                            let head = String::from_utf8_lossy(&b[..end]).to_ascii_lowercase();
                            let length = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                            (b.len() >= end + length).then_some(end + length)
                        };
                        let used = loop {
                            if let Some(used) = complete(&bytes) {
                                break used;
                            }
                            match socket.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
                            }
                        };
                        bytes.drain(..used);
                        let _ = arrived.send(());
                        gate.acquire().await.unwrap().forget();
                        let body = r#"{"id":"1"}"#;
                        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                        if socket.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (base, arrivals, release)
    }

    #[tokio::test]
    async fn past_its_slots_a_call_waits_and_goes_out_when_one_is_answered() {
        let (base, mut arrivals, release) = holding_server().await;
        let http = Arc::new(DiscordHttp::with_slots("t", Some(&base), Arc::new(RestBudget::new(0)), 2));
        let calls: Vec<_> = (0..3u64)
            .map(|channel| {
                let http = http.clone();
                tokio::spawn(async move { http.create_message(channel, &serde_json::json!({"content": "hi"})).await })
            })
            .collect();
        let patience = Duration::from_secs(10);
        for _ in 0..2 {
            tokio::time::timeout(patience, arrivals.recv()).await.expect("two calls go out at once");
        }
        let queued = async {
            while http.waiting.load(Relaxed) != 1 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(patience, queued).await.expect("the third call waits for a slot");
        assert!(arrivals.try_recv().is_err(), "waiting for a slot, it has not gone out");

        release.add_permits(1);
        tokio::time::timeout(patience, arrivals.recv()).await.expect("one answered: the third goes out");
        assert_eq!(http.waiting.load(Relaxed), 0);
        release.add_permits(2);
        for call in calls {
            assert_eq!(call.await.unwrap().unwrap(), "1", "every call answered");
        }
    }

    #[tokio::test]
    async fn a_call_whose_sender_may_no_longer_act_while_it_waited_is_not_sent() {
        let (base, mut arrivals, release) = holding_server().await;
        let http = Arc::new(DiscordHttp::with_slots("t", Some(&base), Arc::new(RestBudget::new(0)), 1));
        let acting = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let call =
            |channel: u64| {
                let (http, acting) = (http.clone(), acting.clone());
                let may: Arc<dyn Fn() -> bool + Send + Sync> = Arc::new(move || acting.load(Relaxed));
                tokio::spawn(super::super::MAY_SEND.scope(may, async move {
                    http.create_message(channel, &serde_json::json!({"content": "hi"})).await
                }))
            };
        let patience = Duration::from_secs(10);
        let first = call(1);
        tokio::time::timeout(patience, arrivals.recv()).await.expect("the first call goes out");
        let second = call(2);
        let queued = async {
            while http.waiting.load(Relaxed) != 1 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(patience, queued).await.expect("the second call waits for the slot");
        // The lease may have run out while it waited.
        acting.store(false, Relaxed);
        release.add_permits(1);
        assert_eq!(first.await.unwrap().unwrap(), "1", "the call sent before is answered");
        let refused = second.await.unwrap().unwrap_err();
        assert!(matches!(refused, RestError::Unavailable(_)), "{refused}");
        assert!(arrivals.try_recv().is_err(), "the second call never went out");
        // A call made outside a sender goes out.
        release.add_permits(1);
        assert_eq!(http.create_message(3, &serde_json::json!({"content": "hi"})).await.unwrap(), "1");
    }

    #[test]
    fn a_spent_bucket_waits_until_it_refills_and_a_global_limit_holds_every_route() {
        let buckets = Buckets::default();
        let now = Instant::now();
        assert_eq!(buckets.wait_before("POST channels/1/messages", now), Duration::ZERO, "unknown: go");
        buckets.learn("POST channels/1/messages", now, Some(0), Some(2.5));
        assert_eq!(buckets.wait_before("POST channels/1/messages", now), Duration::from_millis(2500));
        assert_eq!(buckets.wait_before("POST channels/2/messages", now), Duration::ZERO, "another channel's bucket");
        buckets.learn("POST channels/2/messages", now, Some(3), Some(5.0));
        assert_eq!(buckets.wait_before("POST channels/2/messages", now), Duration::ZERO, "calls left");
        buckets.pause_everything(now + Duration::from_secs(4));
        assert_eq!(buckets.wait_before("POST channels/2/messages", now), Duration::from_secs(4));
        assert_eq!(buckets.wait_before("POST channels/1/messages", now + Duration::from_secs(5)), Duration::ZERO);
    }

    #[test]
    fn the_last_call_of_a_bucket_is_spent_before_it_is_made() {
        let buckets = Buckets::default();
        let now = Instant::now();
        buckets.learn("r", now, Some(1), Some(1.0));
        assert!(matches!(buckets.take("r", now), Ok(Taken::Spent(Some(_)))));
        assert_eq!(buckets.wait_before("r", now), Duration::from_secs(1));
        assert_eq!(buckets.take("r", now), Err(Duration::from_secs(1)), "spent: the next waits");
    }

    /// Found by a review: once a spent bucket refilled, every call waiting for it went at once and earned 429s.
    /// One goes; the others wait for its answer to tell the bucket's size.
    #[test]
    fn a_refilled_bucket_lets_one_call_go_until_its_answer_tells_the_size() {
        let buckets = Buckets::default();
        let now = Instant::now();
        buckets.learn("r", now, Some(0), Some(1.0));
        let refilled = now + Duration::from_millis(1_500);
        let after = |ms: u64| refilled + Duration::from_millis(ms);
        let Ok(Taken::Probe(probe)) = buckets.take("r", refilled) else { panic!("the first goes") };
        assert_eq!(buckets.take("r", refilled), Err(RATE_LIMIT_RECHECK), "the next waits for its answer");
        // However long the probe is out (an upload), the others wait, looking again now and then: never a wait of
        // zero, which would spin (found by a review).
        assert_eq!(buckets.wait_before("r", after(5_000)), RATE_LIMIT_RECHECK);
        assert_eq!(buckets.take("r", after(5_000)), Err(RATE_LIMIT_RECHECK));
        buckets.learn("r", after(5_050), Some(4), Some(5.0));
        buckets.settle("r", probe); // the probe's end, once its answer was read
        assert!(matches!(buckets.take("r", after(5_060)), Ok(Taken::Spent(Some(_)))), "told: 4 left");
        assert_eq!(buckets.take("unknown", now), Ok(Taken::Spent(None)), "an unknown route goes");

        // A probe that ends without telling (a time-out, an answer without the headers): the next call probes at once
        // (found by a review).
        buckets.learn("s", now, Some(0), Some(1.0));
        let Ok(Taken::Probe(probe)) = buckets.take("s", refilled) else { panic!("a probe") };
        assert!(buckets.take("s", after(100)).is_err(), "the probe is out");
        buckets.settle("s", probe);
        assert!(matches!(buckets.take("s", after(100)), Ok(Taken::Probe(_))), "the next one learns the size");
    }

    /// Found reading the diff: a probe whose route another answer told of meanwhile, and which was probed again since,
    /// freed the newer probe's route when it ended late without telling, so two probes went out at once.
    #[test]
    fn a_probe_ending_late_frees_no_newer_probe_of_its_route() {
        let buckets = Buckets::default();
        let now = Instant::now();
        let at = |ms: u64| now + Duration::from_millis(ms);
        buckets.learn("r", now, Some(0), Some(1.0));
        let Ok(Taken::Probe(older)) = buckets.take("r", at(1_000)) else { panic!("a probe") };
        buckets.learn("r", at(1_010), Some(0), Some(0.5)); // another call's answer: spent again
        let Ok(Taken::Probe(newer)) = buckets.take("r", at(1_600)) else { panic!("a probe of the refill") };
        assert_ne!(older, newer);
        buckets.settle("r", older); // the older probe times out, having told nothing
        assert_eq!(buckets.take("r", at(1_700)), Err(RATE_LIMIT_RECHECK), "the newer probe is still out");
        buckets.settle("r", newer);
        assert!(matches!(buckets.take("r", at(1_700)), Ok(Taken::Probe(_))), "its end lets the next go");
    }

    /// Found by a review: a place given back after a later answer had told of the bucket (Discord's count, which never
    /// included the call not made) counted that call twice, and the bucket let a call go into a 429. The same for a
    /// route not known when the call took its place.
    #[test]
    fn a_place_is_given_back_only_to_the_count_it_was_taken_from() {
        let buckets = Buckets::default();
        let now = Instant::now();
        buckets.learn("r", now, Some(1), Some(30.0));
        let taken = buckets.take("r", now).unwrap();
        let place = Place { buckets: &buckets, route: "r", taken, made: false };
        buckets.learn("r", now, Some(0), Some(30.0)); // another call's answer: nothing left
        drop(place); // cancelled while it waited for the global budget
        assert!(buckets.take("r", now).is_err(), "Discord said 0 left");

        let taken = buckets.take("u", now).unwrap();
        let place = Place { buckets: &buckets, route: "u", taken, made: false };
        buckets.learn("u", now, Some(0), Some(30.0));
        drop(place);
        assert!(buckets.take("u", now).is_err(), "Discord said 0 left");

        buckets.learn("s", now, Some(1), Some(30.0));
        let taken = buckets.take("s", now).unwrap();
        drop(Place { buckets: &buckets, route: "s", taken, made: false });
        assert!(buckets.take("s", now).is_ok(), "told of by no answer since: its place is back");
    }

    /// Found reading the diff: a call cancelled while it waited for the global budget (its sender stopped) kept its place
    /// in the route's bucket, so a later call waited for a refill the bucket did not need.
    #[tokio::test(start_paused = true)]
    async fn a_call_cancelled_while_it_waits_for_the_budget_gives_its_place_back() {
        let budget = Arc::new(RestBudget::new(1));
        let http = DiscordHttp::new("t", Some("http://127.0.0.1:9"), budget.clone());
        let route = "DELETE channels/1/messages";
        http.buckets.learn(route, Instant::now(), Some(1), Some(30.0));
        budget.take().await; // the second's one call is spent: the next waits a second for the budget
        let cancelled = tokio::time::timeout(Duration::from_millis(100), http.delete_message(1, 2)).await;
        assert!(cancelled.is_err(), "cancelled while it waited");
        assert!(matches!(http.buckets.take(route, Instant::now()), Ok(Taken::Spent(_))), "its place is still there");
    }

    /// A call refused before it is made (its process no longer acts for the channel) while it was a bucket's probe
    /// lets the others go at once (found by a review: they were held).
    #[tokio::test]
    async fn a_probe_not_sent_lets_the_next_call_of_its_route_go_at_once() {
        let (base, _) = answering("200 OK", "", "{}").await;
        let http = DiscordHttp::new("t", Some(&base), Arc::new(RestBudget::new(0)));
        let route = "DELETE channels/1/messages";
        http.buckets.learn(route, Instant::now() - Duration::from_secs(2), Some(0), Some(1.0));
        let never: Arc<dyn Fn() -> bool + Send + Sync> = Arc::new(|| false);
        let refused = super::super::MAY_SEND.scope(never.clone(), http.delete_message(1, 2)).await;
        assert!(matches!(refused, Err(RestError::Unavailable(_))), "{refused:?}");
        let probe = http.buckets.take(route, Instant::now());
        assert!(matches!(probe, Ok(Taken::Probe(_))), "not held by the call not made: {probe:?}");
        // Nor does an ordinary call not made spend the bucket's last place (found by a review).
        http.buckets.learn(route, Instant::now(), Some(1), Some(5.0));
        let refused = super::super::MAY_SEND.scope(never, http.delete_message(1, 2)).await;
        assert!(matches!(refused, Err(RestError::Unavailable(_))), "{refused:?}");
        assert!(matches!(http.buckets.take(route, Instant::now()), Ok(Taken::Spent(_))), "its place is still there");
    }

    #[test]
    fn a_pages_message_carries_discords_edit_time() {
        let page: Vec<PageMessage> = serde_json::from_str(
            r#"[{"id": "1", "content": "a", "author": {"id": "2", "username": "pm"}, "edited_timestamp": null},
                {"id": "3", "content": "b", "author": {"id": "2", "username": "pm"},
                 "edited_timestamp": "2026-05-01T12:00:30.250000+00:00"}]"#,
        )
        .unwrap();
        assert_eq!(page[0].edited_timestamp, None);
        assert_eq!(page[1].edited_timestamp, Some("2026-05-01T12:00:30.250Z".parse().unwrap()));
    }

    #[test]
    fn a_page_message_with_files_or_its_own_embeds_is_marked_and_a_link_preview_is_not() {
        let page = |extra: &str| -> PageMessage {
            serde_json::from_str(&format!(
                r#"{{"id": "1", "content": "x", "author": {{"id": "2", "username": "a"}}{extra}}}"#
            ))
            .unwrap()
        };
        assert!(!page("").has_files(), "plain text: no extra call for it");
        assert!(page(r#", "attachments": [{"id": "3", "filename": "a.txt"}]"#).has_files());
        assert!(page(r#", "embeds": [{"type": "rich", "title": "t"}]"#).has_files());
        assert!(!page(r#", "embeds": [{"type": "link", "url": "https://example.org"}]"#).has_files());
        // Found by a review: a sticker or a poll read back was relayed as text, and lost with the original.
        assert!(page(r#", "sticker_items": [{"id": "7", "name": "Wave", "format_type": 1}]"#).has_files());
        assert!(page(r#", "poll": {"question": {"text": "Ship it?"}, "answers": []}"#).has_files());
        assert!(!page(r#", "poll": null, "sticker_items": []"#).has_files());
        assert!(page(r#", "components": [{"type": 1, "components": []}]"#).has_files(), "buttons, which stay");
        assert!(!page(r#", "components": []"#).has_files());
    }

    #[test]
    fn an_answers_rate_limit_headers_are_read_and_missing_ones_are_none() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-remaining", HeaderValue::from_static("4"));
        headers.insert("x-ratelimit-reset-after", HeaderValue::from_static("1.250"));
        let limits = Limits::of(&headers);
        assert_eq!(
            (limits.remaining, limits.reset_after, limits.retry_after, limits.global),
            (Some(4.0), Some(1.25), None, false)
        );
        headers.insert("x-ratelimit-global", HeaderValue::from_static("false"));
        assert!(!Limits::of(&headers).global, "a proxy's `false` is no global limit");
        headers.insert("retry-after", HeaderValue::from_static("3"));
        headers.insert("x-ratelimit-global", HeaderValue::from_static("true"));
        headers.insert("x-ratelimit-remaining", HeaderValue::from_static("not a number"));
        let limits = Limits::of(&headers);
        assert_eq!((limits.remaining, limits.retry_after, limits.global), (None, Some(3.0), true));
    }

    #[test]
    fn emoji_are_percent_encoded_as_utf8() {
        assert_eq!(percent_encode("✅"), "%E2%9C%85");
        assert_eq!(percent_encode("ok_1"), "ok_1");
    }
}

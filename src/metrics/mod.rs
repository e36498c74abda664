//! Prometheus metrics (`turn-manager run --metrics ADDR`): what the bot counts and times, served at
//! `http://ADDR/metrics`. Without `--metrics` no recorder is installed, and every function here returns after one
//! atomic load: nothing is allocated, locked, formatted or timed on the bot's paths.
//!
//! - [`exporter`]: installs the recorder (once per process: the `metrics` facade has one global recorder) and
//!   serves it with the exporter's own HTTP listener;
//! - [`route`]: REST routes as labels, as templates that never carry an id or a token;
//! - [`turns`]: how each turn ended, from its history events, and each channel's handoff;
//! - [`gateway`]: the shards' connection state and latency, read on the bot's connection watch.
//!
//! The metrics are listed in [`DESCRIPTIONS`], which is also what `# HELP` says of each.

mod exporter;
mod gateway;
pub mod route;
mod turns;

pub use exporter::{MetricsError, serve};
pub use gateway::Shards;
pub use turns::{Handoff, TurnEnd, turns_ended};

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use std::time::Duration;

pub const TURNS_ENDED: &str = "turn_manager_turns_ended_total";
pub const TIMEOUTS: &str = "turn_manager_timeouts_total";
pub const TIMEOUT_LATENESS: &str = "turn_manager_timeout_lateness_seconds";
pub const HANDOFF: &str = "turn_manager_handoff_latency_seconds";
pub const REST_DURATION: &str = "turn_manager_rest_request_duration_seconds";
pub const REST_RESPONSES: &str = "turn_manager_rest_responses_total";
pub const REST_RATE_LIMITED: &str = "turn_manager_rest_rate_limited_total";
pub const SHARD_LATENCY: &str = "turn_manager_gateway_shard_latency_seconds";
pub const SHARD_CONNECTED: &str = "turn_manager_gateway_shard_connected";
pub const ACTIVE_ACTORS: &str = "turn_manager_active_actors";
pub const LEASE_TAKEOVERS: &str = "turn_manager_lease_takeovers_total";
pub const FENCED_SAVES_REJECTED: &str = "turn_manager_fenced_saves_rejected_total";

/// The kinds of metric, for their descriptions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric: its name, kind, and what `# HELP` says of it.
pub const DESCRIPTIONS: [(&str, Kind, &str); 12] = [
    (
        TURNS_ENDED,
        Kind::Counter,
        "Turns ended, by reason: signal, pass, handoff, route, task_finished, keep (signal rules), timeout, \
         signal_failure, silence, skip, give.",
    ),
    (
        TIMEOUTS,
        Kind::Counter,
        "Turns that timed out: ended by their deadline's timer, or found overdue when a message written after the \
         deadline or a command was handled.",
    ),
    (
        TIMEOUT_LATENESS,
        Kind::Histogram,
        "Seconds from the instant a turn was due to end (its deadline plus any grace, or its silence limit) to when \
         its channel's timer ended it.",
    ),
    (
        HANDOFF,
        Kind::Histogram,
        "Seconds from handling the message that ended a turn to Discord accepting the next turn's floor \
         announcement (saved, relayed and announced).",
    ),
    (REST_DURATION, Kind::Histogram, "Seconds each REST call to Discord took, by route (rate-limit waits excluded)."),
    (
        REST_RESPONSES,
        Kind::Counter,
        "REST calls to Discord, by route and status class (2xx, 3xx, 4xx, 5xx; timeout or failed when no answer).",
    ),
    (REST_RATE_LIMITED, Kind::Counter, "REST calls Discord answered with 429 (rate limited), by route."),
    (
        SHARD_LATENCY,
        Kind::Gauge,
        "Gateway heartbeat latency of each shard in seconds, refreshed every 5 seconds; NaN while not connected or \
         before the first heartbeat.",
    ),
    (SHARD_CONNECTED, Kind::Gauge, "Whether each gateway shard is connected (1) or not (0)."),
    (ACTIVE_ACTORS, Kind::Gauge, "Channels with an actor task (a running or paused session, or one finishing)."),
    (
        LEASE_TAKEOVERS,
        Kind::Counter,
        "Channel leases taken over from another process (the Postgres store; always 0 with the file store).",
    ),
    (
        FENCED_SAVES_REJECTED,
        Kind::Counter,
        "Saves rejected because a newer lease holder fenced them (the Postgres store; always 0 with the file store).",
    ),
];

/// The upper bounds of every histogram's buckets, in seconds: a millisecond to a minute.
pub const SECONDS_BUCKETS: [f64; 15] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Whether metrics are on: the one check every function here makes before doing anything.
#[inline]
pub fn enabled() -> bool {
    exporter::installed()
}

/// Gives every metric its `# HELP` line, and the counters without labels their 0, so that a dashboard finds them
/// before anything happens (the store's lease counters stay 0 until the Postgres store counts them).
fn describe() {
    for (name, kind, help) in DESCRIPTIONS {
        match kind {
            Kind::Counter => describe_counter!(name, help),
            Kind::Gauge => describe_gauge!(name, help),
            Kind::Histogram => describe_histogram!(name, help),
        }
    }
    for name in [TIMEOUTS, LEASE_TAKEOVERS, FENCED_SAVES_REJECTED] {
        counter!(name).increment(0);
    }
    gauge!(ACTIVE_ACTORS).increment(0.0);
}

/// A channel's actor handled a turn's deadline `lateness_ms` after it (a timer is never early: clamped at 0).
pub fn deadline_handled(lateness_ms: i64) {
    if enabled() {
        record_lateness(lateness_ms);
    }
}

fn record_lateness(lateness_ms: i64) {
    histogram!(TIMEOUT_LATENESS).record(lateness_ms.max(0) as f64 / 1000.0);
}

/// How a REST call ended, for its status class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Status(u16),
    /// No answer within the call's time limit.
    Timeout,
    /// No usable answer: the connection failed, or the answer could not be read.
    Failed,
}

impl Answer {
    /// The answer a finished call gives: a success whose exact status is not known (serenity's calls) is a 200.
    pub fn of<T>(result: &Result<T, crate::discord::rest::RestError>) -> Self {
        use crate::discord::rest::RestError;
        match result {
            Ok(_) => Answer::Status(200),
            Err(RestError::Status { status, .. }) => Answer::Status(*status),
            Err(RestError::Timeout(_)) => Answer::Timeout,
            // Discord's own refusal (400, code 30007 or 30058), named for what it means.
            Err(RestError::WebhooksFull(_)) => Answer::Status(400),
            Err(RestError::NetworkRefused(_)) => Answer::Status(403),
            Err(RestError::WebhookTokenRefused(_)) => Answer::Status(401),
            Err(_) => Answer::Failed,
        }
    }

    pub fn class(self) -> &'static str {
        match self {
            Answer::Status(status) => match status / 100 {
                1 => "1xx",
                2 => "2xx",
                3 => "3xx",
                4 => "4xx",
                5 => "5xx",
                _ => "other",
            },
            Answer::Timeout => "timeout",
            Answer::Failed => "failed",
        }
    }
}

/// A REST call's route label, made only while metrics are on (`None` otherwise): `method` and the path after the
/// API's base, as a template ([`route::template`]).
pub fn rest_route(method: &str, path: &str) -> Option<String> {
    enabled().then(|| route::template(method, path))
}

/// A REST call to `route` (from [`rest_route`]; nothing when `None`) ended with `answer` after `took`.
pub fn rest_call(route: Option<String>, answer: Answer, took: Duration) {
    if let Some(route) = route {
        record_rest(route.into(), answer, took);
    }
}

/// A REST call made through serenity, whose route is named where it is made.
pub fn rest_call_to(route: &'static str, answer: Answer, took: Duration) {
    if enabled() {
        record_rest(route.into(), answer, took);
    }
}

fn record_rest(route: metrics::SharedString, answer: Answer, took: Duration) {
    histogram!(REST_DURATION, "route" => route.clone()).record(took.as_secs_f64());
    counter!(REST_RESPONSES, "route" => route.clone(), "status" => answer.class()).increment(1);
    if answer == Answer::Status(429) {
        counter!(REST_RATE_LIMITED, "route" => route).increment(1);
    }
}

/// Counts a channel's actor task while it lives (the gauge of active actors); hold it for the task's life.
#[must_use = "the actor is counted while this is held"]
pub struct ActorAlive {
    counted: bool,
}

/// A channel's actor task started.
pub fn actor_alive() -> ActorAlive {
    let counted = enabled();
    if counted {
        gauge!(ACTIVE_ACTORS).increment(1.0);
    }
    ActorAlive { counted }
}

impl Drop for ActorAlive {
    fn drop(&mut self) {
        if self.counted {
            gauge!(ACTIVE_ACTORS).decrement(1.0);
        }
    }
}

/// A channel of this process's shards that no live process held (its process stopped or died) was taken over.
pub fn lease_taken_over() {
    if enabled() {
        counter!(LEASE_TAKEOVERS).increment(1);
    }
}

/// A save was refused because another process holds the channel's lease now (a newer epoch): the actor stops.
pub fn fenced_save_rejected() {
    if enabled() {
        counter!(FENCED_SAVES_REJECTED).increment(1);
    }
}

#[cfg(test)]
mod tests;

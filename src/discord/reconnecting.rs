//! Seeing serenity begin to reconnect a shard. serenity tells the shard manager a runner's stage only between events,
//! so the connection watch (which polls the manager) misses two gaps, and a deadline falling due in one would end a
//! turn blind while the signal that beat it waits to be seen (spec 8):
//! - a connection that Discord closes (a close frame, an op 7 RECONNECT, which Discord sends every so often) and that
//!   serenity resumes shows as connected throughout;
//! - a session that Discord invalidates on a live connection: the runner asks the manager to restart it, and the
//!   manager waits 5 s for that runner to stop (it is the one waiting), showing it connected meanwhile.
//!
//! serenity opens a tracing span for each, `resume` (`Shard::resume`) and `request_restart` (`ShardRunner`), on the
//! shard runner's own task, the task on which the runner also calls our collector for each event (`in_order.rs`). So a
//! layer that sees either span open knows from the task which shard is reconnecting, in order with its events: what
//! the collector delivered before is from before the loss. A resume's replay comes after, then RESUMED; a restart's
//! new runner starts with READY. The layer must be in the process's subscriber ([`layer`]: `main` adds it, and so do
//! the end-to-end tests); without it, only the losses the watch sees hold the deadlines.

use super::in_order::InOrder;
use std::sync::{Arc, Mutex, Weak};
use tracing::span::{Attributes, Id};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// serenity's spans that begin a reconnection, as (target, name).
const RECONNECTING: [(&str, &str); 2] =
    [("serenity::gateway::shard", "resume"), ("serenity::gateway::bridge::shard_runner", "request_restart")];

/// The tracing layer that tells a shard's channels when serenity begins to reconnect it; it sees no other span or
/// event.
pub fn layer<S>() -> impl Layer<S>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    // The spans are at INFO (`#[instrument]`'s level): the hint lets every DEBUG and TRACE callsite be skipped at once.
    let filter = tracing_subscriber::filter::filter_fn(is_reconnecting).with_max_level_hint(tracing::Level::INFO);
    ReconnectingSeen.with_filter(filter)
}

fn is_reconnecting(metadata: &Metadata<'_>) -> bool {
    metadata.is_span() && RECONNECTING.contains(&(metadata.target(), metadata.name()))
}

struct ReconnectingSeen;

impl<S: Subscriber> Layer<S> for ReconnectingSeen {
    /// Only serenity's reconnection spans get here: [`layer`]'s filter lets nothing else through.
    fn on_new_span(&self, _attributes: &Attributes<'_>, _id: &Id, _context: Context<'_, S>) {
        reconnecting_here();
    }
}

/// A shard runner's task, as its collector first saw it.
struct Runner {
    task: tokio::task::Id,
    in_order: Weak<InOrder>,
    shard: u32,
}

/// One entry per shard runner alive (a runner restarted replaces its shard's entry).
static RUNNERS: Mutex<Vec<Runner>> = Mutex::new(Vec::new());

/// Notes that the current task runs `shard`'s runner, for `in_order`. Called by the runner's collector, on that task.
pub(super) fn note_runner(in_order: &Arc<InOrder>, shard: u32) {
    let Some(task) = tokio::task::try_id() else { return };
    let mut runners = RUNNERS.lock().expect("runners lock");
    let same = |runner: &Runner| Weak::as_ptr(&runner.in_order) == Arc::as_ptr(in_order) && runner.shard == shard;
    runners.retain(|runner| runner.in_order.strong_count() > 0 && !same(runner));
    runners.push(Runner { task, in_order: Arc::downgrade(in_order), shard });
}

/// serenity began to reconnect the runner whose task this is (if it is one noted).
fn reconnecting_here() {
    let Some(task) = tokio::task::try_id() else { return };
    let runner = RUNNERS
        .lock()
        .expect("runners lock")
        .iter()
        .find(|runner| runner.task == task)
        .and_then(|runner| Some((runner.in_order.upgrade()?, runner.shard)));
    if let Some((in_order, shard)) = runner {
        in_order.reconnecting(shard);
    }
}

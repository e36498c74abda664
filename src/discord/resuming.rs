//! Seeing a shard begin to resume. serenity tells the shard manager a runner's stage only between events, so a
//! connection that Discord closes (a close frame, an op 7 RECONNECT, which Discord sends every so often) and that
//! serenity resumes shows as connected throughout: the connection watch cannot see that gap, and a deadline falling
//! due in it would end a turn blind while the signal that beat it waits in Discord's replay (spec 8).
//!
//! serenity's `Shard::resume` opens a tracing span named `resume`, on the shard runner's own task, the task on which
//! the runner also calls our collector for each event (`in_order.rs`). So a layer that sees that span open knows from
//! the task which shard is resuming, in order with its events: what the collector delivered before is from before
//! the loss, the replay comes after, RESUMED last. The layer must be in the process's subscriber ([`layer`]: `main`
//! adds it, and so do the end-to-end tests); without it, only losses the watch sees hold the deadlines.

use super::in_order::InOrder;
use std::sync::{Arc, Mutex, Weak};
use tracing::span::{Attributes, Id};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// The tracing layer that tells a shard's channels when serenity starts resuming it; it sees no other span or event.
pub fn layer<S>() -> impl Layer<S>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    // The span is at INFO (`#[instrument]`'s level): the hint lets every DEBUG and TRACE callsite be skipped at once.
    ResumeSeen.with_filter(tracing_subscriber::filter::filter_fn(is_resume).with_max_level_hint(tracing::Level::INFO))
}

fn is_resume(metadata: &Metadata<'_>) -> bool {
    metadata.is_span() && metadata.target() == "serenity::gateway::shard" && metadata.name() == "resume"
}

struct ResumeSeen;

impl<S: Subscriber> Layer<S> for ResumeSeen {
    fn on_new_span(&self, attributes: &Attributes<'_>, _id: &Id, _context: Context<'_, S>) {
        if is_resume(attributes.metadata()) {
            resuming_here();
        }
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

/// serenity began to resume the runner whose task this is (if it is one noted).
fn resuming_here() {
    let Some(task) = tokio::task::try_id() else { return };
    let runner = RUNNERS
        .lock()
        .expect("runners lock")
        .iter()
        .find(|runner| runner.task == task)
        .and_then(|runner| Some((runner.in_order.upgrade()?, runner.shard)));
    if let Some((in_order, shard)) = runner {
        in_order.resuming(shard);
    }
}

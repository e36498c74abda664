//! The gateway's shards as gauges, read where the bot already looks at them: its connection watch, every 100 ms.
//! The state is set on every look (an atomic store through a kept handle); the latency, which serenity measures once
//! per heartbeat, at most every [`LATENCY_EVERY`]; NaN (no value) while it is not known: before the first heartbeat
//! and while the shard is not connected, where the last value would tell of a connection that is gone.

use super::{SHARD_CONNECTED, SHARD_LATENCY, enabled};
use metrics::{Gauge, gauge};
use std::time::Duration;
use tokio::time::Instant;

/// How often the shards' latency is read into its gauge.
pub const LATENCY_EVERY: Duration = Duration::from_secs(5);

/// The connection watch's gauges: one pair per shard seen, made once.
#[derive(Default)]
pub struct Shards {
    gauges: Vec<ShardGauges>,
    latency_read_at: Option<Instant>,
}

struct ShardGauges {
    shard: u32,
    connected: Gauge,
    latency: Gauge,
    seen: bool,
}

impl Shards {
    /// Records each shard's `(id, connected, latency)`; a shard seen before and missing now (serenity restarting
    /// its runner) is not connected. Nothing is read unless metrics are on.
    pub fn observe(&mut self, shards: impl IntoIterator<Item = (u32, bool, Option<Duration>)>) {
        if enabled() {
            self.record(shards, Instant::now());
        }
    }

    pub(super) fn record(&mut self, shards: impl IntoIterator<Item = (u32, bool, Option<Duration>)>, now: Instant) {
        let read_latency = self.latency_read_at.is_none_or(|at| now - at >= LATENCY_EVERY);
        if read_latency {
            self.latency_read_at = Some(now);
        }
        for known in &mut self.gauges {
            known.seen = false;
        }
        for (shard, connected, latency) in shards {
            let gauges = self.of(shard);
            gauges.seen = true;
            gauges.connected.set(if connected { 1.0 } else { 0.0 });
            match latency.filter(|_| connected) {
                Some(latency) if read_latency => gauges.latency.set(latency.as_secs_f64()),
                Some(_) => {}
                None => gauges.latency.set(f64::NAN),
            }
        }
        for missing in self.gauges.iter().filter(|g| !g.seen) {
            missing.connected.set(0.0);
            missing.latency.set(f64::NAN);
        }
    }

    fn of(&mut self, shard: u32) -> &mut ShardGauges {
        let at = match self.gauges.iter().position(|g| g.shard == shard) {
            Some(at) => at,
            None => {
                let label = shard.to_string();
                self.gauges.push(ShardGauges {
                    shard,
                    connected: gauge!(SHARD_CONNECTED, "shard" => label.clone()),
                    latency: gauge!(SHARD_LATENCY, "shard" => label),
                    seen: false,
                });
                self.gauges.len() - 1
            }
        };
        &mut self.gauges[at]
    }
}

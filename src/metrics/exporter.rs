//! Installs the Prometheus recorder and serves it at `http://ADDR/metrics` with the exporter's own HTTP listener.
//! The `metrics` facade takes one global recorder per process, for the life of the process: the first bot started
//! with an address installs it and later ones in the same process (the end-to-end tests start many) share it. The
//! listener lives as long as the process, like the recorder, on a thread of its own with its own small runtime: it
//! does not end with the runtime that started it (each test has its own), and a scrape's rendering does not take
//! a worker from the channels.

use metrics_exporter_prometheus::PrometheusBuilder;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Where this process serves its metrics, once it does.
static SERVING: OnceLock<SocketAddr> = OnceLock::new();
/// Two bots starting at once in one process install one recorder between them.
static INSTALLING: Mutex<()> = Mutex::new(());

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("cannot serve metrics on {addr}: {reason}")]
    Listen { addr: SocketAddr, reason: String },
    #[error("this process serves its metrics on {serving} already; it cannot also serve them on {asked}")]
    AlreadyServing { serving: SocketAddr, asked: SocketAddr },
    #[error("another metrics recorder is installed in this process")]
    RecorderTaken,
}

/// Whether this process records metrics (a recorder of ours is installed).
#[inline]
pub(super) fn installed() -> bool {
    SERVING.get().is_some()
}

/// The listener's own runtime, shut down in the background when it is dropped: `serve` is called from async code,
/// where dropping a runtime the ordinary way panics (found by a review: a metrics port already taken, say by the
/// process a rolling deploy replaces, panicked the bot instead of saying so).
struct ListenerRuntime(Option<tokio::runtime::Runtime>);

impl ListenerRuntime {
    fn get(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().expect("taken only when dropped")
    }
}

impl Drop for ListenerRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// The exporter as the bot configures it: every histogram with [`super::SECONDS_BUCKETS`].
pub(super) fn builder() -> PrometheusBuilder {
    PrometheusBuilder::new().set_buckets(&super::SECONDS_BUCKETS).expect("the buckets are not empty")
}

/// Installs the recorder and serves it at `http://{addr}/metrics` (the listener answers every path; Prometheus
/// asks for `/metrics`). Asking again for the same address is done already; another address is an error, as one
/// process has one recorder.
pub fn serve(addr: SocketAddr) -> Result<(), MetricsError> {
    if addr.port() == 0 {
        let reason = "port 0 would pick a port nobody is told of; give one, e.g. 127.0.0.1:9184".into();
        return Err(MetricsError::Listen { addr, reason });
    }
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(serving) = SERVING.get() {
        return if *serving == addr {
            Ok(())
        } else {
            Err(MetricsError::AlreadyServing { serving: *serving, asked: addr })
        };
    }
    let runtime = ListenerRuntime(Some(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| MetricsError::Listen { addr, reason: format!("no runtime for the listener: {e}") })?,
    ));
    // The exporter spawns its upkeep task where it is built: on that runtime too.
    let (recorder, listener) = {
        let _inside = runtime.get().enter();
        builder().with_http_listener(addr).build().map_err(|e| MetricsError::Listen { addr, reason: e.to_string() })?
    };
    metrics::set_global_recorder(recorder).map_err(|_| MetricsError::RecorderTaken)?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            if let Err(e) = runtime.get().block_on(listener) {
                tracing::error!("the metrics endpoint stopped: {e:?}");
            }
        })
        .map_err(|e| MetricsError::Listen { addr, reason: format!("no thread for the listener: {e}") })?;
    SERVING.set(addr).expect("set once, under the lock");
    super::describe();
    tracing::info!("serving metrics at http://{addr}/metrics");
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Found by a review: called from the bot's async start-up, the failure dropped the listener's runtime there,
    /// which panicked.
    #[tokio::test]
    async fn a_metrics_port_already_taken_is_an_error_that_says_so_not_a_panic() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let error = super::serve(addr).expect_err("the port is taken");
        assert!(matches!(error, super::MetricsError::Listen { .. }), "{error}");
        assert!(error.to_string().contains(&addr.to_string()), "{error}");
    }
}

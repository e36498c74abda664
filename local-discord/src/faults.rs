//! Fault injection: what the server does wrong on purpose, so that tests can see the client cope.

use std::time::Duration;

/// What happens to a dispatch that a fault matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DispatchAction {
    /// Never sent (as an event lost while a client was away).
    Drop,
    /// Sent twice with the same sequence number (as around a reconnect).
    Duplicate,
    /// Sent after a while; later dispatches may overtake it.
    Delay(Duration),
}

/// What happens to a REST call that a fault matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteAction {
    /// 429 with `Retry-After` and Discord's rate-limit body.
    RateLimit { retry_after: Duration },
    /// An error status (500, 502, 503...) with no useful body.
    ServerError(u16),
    /// Answered normally, after a delay.
    Slow(Duration),
}

#[derive(Clone, Debug)]
struct DispatchFault {
    event: Option<String>,
    action: DispatchAction,
    remaining: u32,
}

#[derive(Clone, Debug)]
struct RouteFault {
    method: Option<String>,
    path_contains: String,
    action: RouteAction,
    remaining: u32,
}

/// The faults armed now; each applies to the next `times` matches and is then spent.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    dispatch: Vec<DispatchFault>,
    routes: Vec<RouteFault>,
}

impl Faults {
    /// Applies `action` to the next `times` dispatches named `event` (any dispatch when `None`).
    pub fn on_dispatch(&mut self, event: Option<&str>, action: DispatchAction, times: u32) {
        self.dispatch.push(DispatchFault { event: event.map(str::to_owned), action, remaining: times });
    }

    /// Applies `action` to the next `times` REST calls whose path contains `path_contains` (and whose method is
    /// `method`, when given).
    pub fn on_route(&mut self, method: Option<&str>, path_contains: &str, action: RouteAction, times: u32) {
        self.routes.push(RouteFault {
            method: method.map(str::to_uppercase),
            path_contains: path_contains.to_owned(),
            action,
            remaining: times,
        });
    }

    pub fn clear(&mut self) {
        self.dispatch.clear();
        self.routes.clear();
    }

    pub(crate) fn take_dispatch_action(&mut self, event: &str) -> Option<DispatchAction> {
        let fault =
            self.dispatch.iter_mut().find(|f| f.remaining > 0 && f.event.as_deref().is_none_or(|e| e == event))?;
        fault.remaining -= 1;
        Some(fault.action)
    }

    /// Whether a REST fault is still to apply (each taken one wakes `wait_for`).
    pub fn route_faults_armed(&self) -> bool {
        self.routes.iter().any(|f| f.remaining > 0)
    }

    pub(crate) fn take_route_action(&mut self, method: &str, path: &str) -> Option<RouteAction> {
        let fault = self.routes.iter_mut().find(|f| {
            f.remaining > 0 && f.method.as_deref().is_none_or(|m| m == method) && path.contains(&f.path_contains)
        })?;
        fault.remaining -= 1;
        Some(fault.action)
    }
}

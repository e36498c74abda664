//! The faults a soak injects between its kills (`soak --faults`): the local server's own faults, each the kind the
//! fault tests (`tests/bot_faults.rs`) check one at a time, drawn from the seed while the bot is up and working, so
//! that crashes, reconnections, repeated or late dispatches and failing REST calls meet each other.

use super::stage::SoakStage;
use local_discord::faults::{DispatchAction, RouteAction};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The share of up periods (between a start and its kill) in which one fault is injected.
const FAULT_SHARE: f64 = 0.6;

/// A family of faults, named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultGroup {
    /// The gateway connection closed (resumable or not), or the session invalidated on a live connection.
    Gateway,
    /// MESSAGE_CREATE / MESSAGE_UPDATE dispatches sent twice, or late (overtaken by newer ones).
    Dispatch,
    /// 429s and server errors on the announcements, the webhook reposts, the deletions and the history reads.
    Rest,
    /// One route answering slowly for a while.
    Slow,
}

impl FaultGroup {
    pub const ALL: [FaultGroup; 4] = [FaultGroup::Gateway, FaultGroup::Dispatch, FaultGroup::Rest, FaultGroup::Slow];

    fn name(self) -> &'static str {
        match self {
            FaultGroup::Gateway => "gateway",
            FaultGroup::Dispatch => "dispatch",
            FaultGroup::Rest => "rest",
            FaultGroup::Slow => "slow",
        }
    }
}

impl fmt::Display for FaultGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultGroup {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|g| g.name() == text.trim()).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|g| g.name()).collect();
            format!("unknown fault group {text:?}: the groups are {} (or all)", names.join(", "))
        })
    }
}

/// Reads `--faults`: group names separated by commas, or `all`.
pub fn parse_groups(text: &str) -> Result<Vec<FaultGroup>, String> {
    if text.trim() == "all" {
        return Ok(FaultGroup::ALL.to_vec());
    }
    let mut groups: Vec<FaultGroup> = text.split(',').map(str::parse).collect::<Result<_, _>>()?;
    groups.sort();
    groups.dedup();
    Ok(groups)
}

/// The faults injected so far, by what they were ("gateway: resumable close" -> 3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Injected(pub BTreeMap<String, usize>);

impl Injected {
    pub fn total(&self) -> usize {
        self.0.values().sum()
    }

    pub fn by_group(&self) -> BTreeMap<&str, usize> {
        let mut groups = BTreeMap::new();
        for (what, n) in &self.0 {
            *groups.entry(what.split(':').next().unwrap_or(what)).or_default() += n;
        }
        groups
    }
}

/// Maybe injects one fault of the enabled groups now, drawn from `rng`; nothing is drawn when no group is enabled,
/// so a soak without faults keeps the plan its seed always gave.
pub fn maybe_inject(soak: &SoakStage, groups: &[FaultGroup], rng: &mut fastrand::Rng, injected: &mut Injected) {
    if groups.is_empty() || rng.f64() >= FAULT_SHARE {
        return;
    }
    let group = groups[rng.usize(..groups.len())];
    let server = &soak.stage.server;
    let bot = soak.stage.bot_user;
    let what = match group {
        FaultGroup::Gateway => match rng.u8(0..4) {
            0 => {
                server.close_gateway(bot, true);
                "resumable close"
            }
            3 => {
                // RESUMED comes late: deadlines falling due meanwhile wait for it, and the replay before it.
                let delay = Duration::from_millis(rng.u64(200..=2_000));
                server.faults(|f| f.on_dispatch(Some("RESUMED"), DispatchAction::Delay(delay), 1));
                server.close_gateway(bot, true);
                "resumable close, slow resume"
            }
            1 => {
                server.close_gateway(bot, false);
                "close, session forgotten"
            }
            _ => {
                server.invalidate_session(bot);
                "session invalidated"
            }
        },
        FaultGroup::Dispatch => {
            let event = if rng.bool() { "MESSAGE_CREATE" } else { "MESSAGE_UPDATE" };
            let times = rng.u32(1..=4);
            if rng.bool() {
                server.faults(|f| f.on_dispatch(Some(event), DispatchAction::Duplicate, times));
                "duplicated"
            } else {
                let delay = Duration::from_millis(rng.u64(100..=600));
                server.faults(|f| f.on_dispatch(Some(event), DispatchAction::Delay(delay), times));
                "delayed"
            }
        }
        FaultGroup::Rest => {
            let (method, path) = [
                ("POST", "/messages"),  // announcements
                ("POST", "/webhooks/"), // reposts
                ("DELETE", "/messages/"),
                ("GET", "/messages"), // the catch-up's reads
            ][rng.usize(..4)];
            let times = rng.u32(1..=3);
            let (action, what) = if rng.bool() {
                let retry_after = Duration::from_millis(rng.u64(50..=500));
                (RouteAction::RateLimit { retry_after }, "429")
            } else {
                (RouteAction::ServerError([500, 502, 503][rng.usize(..3)]), "5xx")
            };
            server.faults(|f| f.on_route(Some(method), path, action, times));
            what
        }
        FaultGroup::Slow => {
            let path = ["/messages", "/webhooks/"][rng.usize(..2)];
            let delay = Duration::from_millis(rng.u64(300..=1500));
            server.faults(|f| f.on_route(None, path, RouteAction::Slow(delay), rng.u32(1..=4)));
            "slow route"
        }
    };
    *injected.0.entry(format!("{group}: {what}")).or_default() += 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_read_by_name_or_all_and_a_typo_names_the_valid_ones() {
        assert_eq!(parse_groups("rest,gateway,rest").unwrap(), vec![FaultGroup::Gateway, FaultGroup::Rest]);
        assert_eq!(parse_groups("all").unwrap(), FaultGroup::ALL.to_vec());
        let error = parse_groups("gateway,rset").unwrap_err();
        assert!(error.contains("\"rset\"") && error.contains("gateway, dispatch, rest, slow"), "{error}");
    }

    #[test]
    fn injected_faults_are_counted_by_group() {
        let mut injected = Injected::default();
        injected.0.insert("rest: 429".into(), 2);
        injected.0.insert("rest: 5xx".into(), 1);
        injected.0.insert("gateway: resumable close".into(), 4);
        assert_eq!(injected.total(), 7);
        assert_eq!(injected.by_group(), BTreeMap::from([("gateway", 4), ("rest", 3)]));
    }
}

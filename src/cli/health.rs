//! `turn-manager health`: whether the bot serving its metrics at an address has every gateway shard connected, for a
//! container's HEALTHCHECK or a readiness probe (not a liveness one: a restart cannot end a Discord outage, and each
//! spends an IDENTIFY of the day's budget). Exit 0 when it has, 1 otherwise, with one line saying why.

use super::HealthArgs;
use crate::metrics::SHARD_CONNECTED;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

/// How long the probe waits for the metrics: a probe that hangs is a failed one (Docker's default timeout is 30 s).
const ANSWER_WITHIN: Duration = Duration::from_secs(3);

pub fn run(args: &HealthArgs) -> ExitCode {
    let url = format!("http://{}/metrics", reachable(args.metrics));
    let answer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
        .and_then(|runtime| runtime.block_on(scrape(&url)));
    match answer.and_then(|text| judge(&text)) {
        Ok(healthy) => {
            println!("healthy: {healthy}");
            ExitCode::SUCCESS
        }
        Err(unhealthy) => {
            println!("unhealthy: {unhealthy}");
            ExitCode::FAILURE
        }
    }
}

/// The address to ask: a bot listening on every interface (`0.0.0.0:9184`, to publish the port) is asked on the
/// loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port()),
        _ => addr,
    }
}

async fn scrape(url: &str) -> Result<String, String> {
    let no_answer = |e: reqwest::Error| {
        format!("no answer from {url} ({e}): is the bot running with `--metrics` (TM_METRICS) at that address?")
    };
    // Never through a proxy of the environment's (HTTP_PROXY): the bot is on this machine (found by a review).
    let client = reqwest::Client::builder().timeout(ANSWER_WITHIN).no_proxy().build().map_err(|e| e.to_string())?;
    let response = client.get(url).send().await.map_err(no_answer)?;
    if !response.status().is_success() {
        return Err(format!("{url} answered {}", response.status()));
    }
    response.text().await.map_err(no_answer)
}

/// Healthy when the scrape shows every shard connected: what it says then, or why not.
pub fn judge(scrape: &str) -> Result<String, String> {
    let mut connected = Vec::new();
    let mut not = Vec::new();
    let of_the_gauge =
        |line: &&str| line.strip_prefix(SHARD_CONNECTED).is_some_and(|rest| rest.starts_with(['{', ' ']));
    for line in scrape.lines().filter(of_the_gauge) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let shard = series.split("shard=\"").nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("?");
        match value.parse::<f64>() {
            Ok(1.0) => connected.push(shard.to_owned()),
            _ => not.push(shard.to_owned()),
        }
    }
    match (connected.is_empty(), not.is_empty()) {
        (_, false) => Err(format!("gateway shard {} not connected", not.join(", "))),
        (true, true) => Err("no gateway shard connected yet".to_owned()),
        (false, true) => Ok(format!("gateway shard {} connected", connected.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shard_connected_is_healthy_and_one_down_or_none_yet_is_not() {
        let line = |shard: u32, v: &str| format!("{SHARD_CONNECTED}{{shard=\"{shard}\"}} {v}\n");
        let both = format!("# HELP x\n{}{}", line(0, "1"), line(1, "1"));
        assert_eq!(judge(&both), Ok("gateway shard 0, 1 connected".into()));
        let one_down = format!("{}{}", line(0, "1"), line(1, "0"));
        assert_eq!(judge(&one_down), Err("gateway shard 1 not connected".into()));
        assert_eq!(judge("turn_manager_turns_total 3\n"), Err("no gateway shard connected yet".into()));
        let another_metric = format!("{SHARD_CONNECTED}_changes_total{{shard=\"0\"}} 0\n{}", line(0, "1"));
        assert_eq!(judge(&another_metric), Ok("gateway shard 0 connected".into()), "only the gauge itself is read");
    }

    #[test]
    fn a_bot_listening_everywhere_is_asked_on_the_loopback() {
        assert_eq!(reachable("0.0.0.0:9184".parse().unwrap()), "127.0.0.1:9184".parse().unwrap());
        assert_eq!(reachable("[::]:9184".parse().unwrap()), "[::1]:9184".parse().unwrap());
        assert_eq!(reachable("10.0.0.2:9184".parse().unwrap()), "10.0.0.2:9184".parse().unwrap());
    }
}

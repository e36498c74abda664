//! A scrape of a bot's Prometheus endpoint (`run --metrics ADDR`), read as series and values.

use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The samples of a scrape of `/metrics`: series (name and labels, as rendered) to value.
#[derive(Debug)]
pub struct Scrape {
    pub text: String,
    pub samples: BTreeMap<String, f64>,
}

impl Scrape {
    pub async fn take(addr: SocketAddr) -> Self {
        let url = format!("http://{addr}/metrics");
        let response = reqwest::get(&url).await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert!(response.status().is_success(), "GET {url}: {}", response.status());
        let text = response.text().await.expect("the scrape's text");
        let samples = text
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .filter_map(|line| {
                let (series, value) = line.rsplit_once(' ')?;
                Some((series.to_owned(), value.parse().ok()?))
            })
            .collect();
        Self { text, samples }
    }

    /// A series' value; 0 for one not recorded yet (a counter that has not counted).
    pub fn get(&self, series: &str) -> f64 {
        self.samples.get(series).copied().unwrap_or(0.0)
    }

    /// How much a series grew since `before`.
    pub fn since(&self, before: &Scrape, series: &str) -> f64 {
        self.get(series) - before.get(series)
    }

    /// The sum of every series of metric `name` (all its labels) grown since `before`.
    pub fn total_since(&self, before: &Scrape, name: &str) -> f64 {
        let sum = |s: &Scrape| {
            s.samples.iter().filter(|(k, _)| k.starts_with(&format!("{name}{{"))).map(|(_, v)| v).sum::<f64>()
        };
        sum(self) - sum(before)
    }
}

/// A free local port, found by binding port 0 and letting it go.
pub fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port")
}

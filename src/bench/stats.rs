//! Percentiles and the few ways the bench prints a figure.

use std::time::Duration;

/// A distribution of durations, summarised.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Summary {
    /// Summarises samples (in any order); `None` when there are none.
    pub fn of(samples: &[Duration]) -> Option<Summary> {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        Some(Summary {
            count: sorted.len(),
            p50: percentile(&sorted, 50.0)?,
            p99: percentile(&sorted, 99.0)?,
            max: *sorted.last()?,
        })
    }

    /// `p50 / p99 / max ms`.
    pub fn three(&self) -> String {
        format!("{} / {} / {} ms", ms(self.p50), ms(self.p99), ms(self.max))
    }

    /// `p50 / p99 ms`.
    pub fn two(&self) -> String {
        format!("{} / {} ms", ms(self.p50), ms(self.p99))
    }
}

/// The nearest-rank percentile of sorted samples: the smallest sample at or below which `p` percent of them lie.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Milliseconds with as many decimals as make sense for the size.
pub fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.2}")
    } else if ms < 100.0 {
        format!("{ms:.1}")
    } else {
        group(ms.round() as u64)
    }
}

/// A count or rate with thousands separated by commas: `12,345`.
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `count / seconds`, or 0 for an empty window.
pub fn rate(count: usize, window: Duration) -> f64 {
    if window.is_zero() { 0.0 } else { count as f64 / window.as_secs_f64() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_of_one_to_a_hundred_are_the_ranks_themselves() {
        let sorted: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&sorted, 50.0), Some(50));
        assert_eq!(percentile(&sorted, 99.0), Some(99));
        assert_eq!(percentile(&sorted, 100.0), Some(100));
        assert_eq!(percentile(&sorted, 0.0), Some(1), "the smallest, never out of range");
    }

    #[test]
    fn percentiles_of_small_and_empty_sets() {
        assert_eq!(percentile::<u32>(&[], 50.0), None);
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[1, 2], 50.0), Some(1));
        assert_eq!(percentile(&[1, 2, 3], 99.0), Some(3), "p99 of three samples is the largest");
    }

    #[test]
    fn a_summary_sorts_its_samples_and_keeps_the_maximum() {
        let ms = Duration::from_millis;
        let s = Summary::of(&[ms(5), ms(1), ms(4), ms(2), ms(3)]).unwrap();
        assert_eq!((s.count, s.p50, s.p99, s.max), (5, ms(3), ms(5), ms(5)));
        assert_eq!(s.three(), "3.00 / 5.00 / 5.00 ms");
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn figures_are_printed_with_sensible_precision_and_separators() {
        assert_eq!(ms(Duration::from_micros(370)), "0.37");
        assert_eq!(ms(Duration::from_micros(25_640)), "25.6");
        assert_eq!(ms(Duration::from_millis(1342)), "1,342");
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(4577), "4,577");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(rate(500, Duration::from_millis(250)), 2000.0);
        assert_eq!(rate(5, Duration::ZERO), 0.0);
    }
}

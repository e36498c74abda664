//! Gives the memory the allocator keeps but no longer uses back to the system once the bot is quiet. An allocator
//! keeps what a burst freed (a start-up's catch-ups reading every channel's history, a thousand turns ending at once)
//! for the next one: measured with 10,000 saved sessions and glibc's malloc, an idle bot held 15.1 KiB per session, of
//! which 6.6 KiB was free memory kept that way (8.5 KiB once trimmed). The binary's allocator is mimalloc
//! (`main.rs`), whose `mi_collect` hands it back (without it, an idle bot with no session held 96 MiB instead of 42);
//! it walks every heap, so it runs only once the bot is quiet (half a second without work, the store's writer thread
//! included: it goes on writing the start-up's checkpoints after the channels are quiet, and frees their buffers
//! last), a few times per quiet spell, ever more rarely, on a blocking thread.

use super::stats::Stats;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long the bot must have handled no message, ended no turn, read no history page, had no effect reported and
/// written nothing to the store before the allocator is trimmed.
const QUIET: Duration = Duration::from_millis(500);

/// Trims the allocator in each quiet spell, until the task is aborted.
pub fn trim_when_quiet(stats: Arc<Stats>) -> JoinHandle<()> {
    after_quiet_spells(move || activity(&stats), trim)
}

/// Changes whenever a channel did some work or the store's writer thread wrote something.
fn activity(stats: &Stats) -> u64 {
    stats.activity().wrapping_add(crate::store::writer::activity())
}

/// `activity` changes whenever the bot did some work.
fn after_quiet_spells(activity: impl Fn() -> u64 + Send + 'static, trim: fn()) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen = activity();
        // Quiet ticks in a row: a trim at the 1st, 2nd, 4th, 8th... of them, since memory may still be freed after
        // the bot goes quiet (a reply in flight, a timer), so a spell gets a few trims, ever rarer.
        let mut quiet_ticks: u32 = 0;
        loop {
            tokio::time::sleep(QUIET).await;
            let now = activity();
            if now != seen {
                (seen, quiet_ticks) = (now, 0);
                continue;
            }
            quiet_ticks = quiet_ticks.saturating_add(1);
            if quiet_ticks.is_power_of_two() {
                let _ = tokio::task::spawn_blocking(trim).await;
            }
        }
    })
}

fn trim() {
    // SAFETY: mi_collect only frees what mimalloc holds unused; it may be called from any thread at any time (where
    // mimalloc is not the global allocator, as in the tests, it finds nothing to free).
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    static TRIMMED: AtomicU32 = AtomicU32::new(0);

    fn count() {
        TRIMMED.fetch_add(1, Ordering::Relaxed);
    }

    #[tokio::test(start_paused = true)]
    async fn the_allocator_is_trimmed_a_few_times_per_quiet_spell_ever_more_rarely_and_never_while_busy() {
        let stats = Arc::new(Stats::default());
        let watched = stats.clone();
        let task = after_quiet_spells(move || watched.activity(), count);
        for n in 0..20 {
            // Busy: a message, an effect reported or a history page read, more often than the quiet spell.
            match n % 3 {
                0 => stats.message(),
                1 => stats.work(),
                _ => stats.timeout(1),
            }
            tokio::time::sleep(QUIET / 2).await;
        }
        assert_eq!(TRIMMED.load(Ordering::Relaxed), 0, "never while busy");
        tokio::time::sleep(QUIET * 7 + QUIET / 2).await;
        assert_eq!(TRIMMED.load(Ordering::Relaxed), 3, "after 1, 2 and 4 quiet ticks, not at every tick");
        stats.work();
        tokio::time::sleep(QUIET * 3).await;
        assert_eq!(TRIMMED.load(Ordering::Relaxed), 5, "again after 1 and 2 quiet ticks of the next spell");
        task.abort();
    }

    #[tokio::test]
    async fn the_store_writing_checkpoints_after_the_channels_go_quiet_counts_as_work() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path()).unwrap();
        let writer = crate::store::Writer::spawn(store);
        let stats = Stats::default();
        let before = activity(&stats);
        writer.save_lazy(crate::core::session::Session::new(crate::core::ids::ChannelId(7)));
        writer.flush().await;
        assert_ne!(activity(&stats), before, "no channel worked, but the writer did");
    }
}

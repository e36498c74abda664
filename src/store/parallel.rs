//! Work spread over a few threads, for steps that wait on the disk (fsyncs): the disk serves them together instead
//! of one after another.

/// How many threads at most; a small amount of work stays on the calling thread.
const THREADS_MAX: usize = 8;
const PER_THREAD_MIN: usize = 4;

/// `f` over `items` on up to [`THREADS_MAX`] scoped threads, the results in the items' order.
pub(super) fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = (items.len() / PER_THREAD_MIN).clamp(1, THREADS_MAX);
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let f = &f;
        // A thread the system will not start (a container's limit on threads) leaves its part to this one: a panic
        // here would stop the store's writer, and with it every save, for good.
        let parts: Vec<Result<_, Vec<R>>> = items
            .chunks(chunk)
            .map(|part| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || part.iter().map(f).collect::<Vec<R>>())
                    .map_err(|_| part.iter().map(f).collect())
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|part| match part {
                Ok(thread) => thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(done_here) => done_here,
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::in_parallel;

    #[test]
    fn work_spread_over_threads_comes_back_in_the_items_order() {
        let items: Vec<u32> = (0..103).collect();
        assert_eq!(in_parallel(&items, |n| n * 2), items.iter().map(|n| n * 2).collect::<Vec<_>>());
        assert_eq!(in_parallel(&[7u32], |n| n + 1), vec![8], "a lone item stays on the calling thread");
    }
}

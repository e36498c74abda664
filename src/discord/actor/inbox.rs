//! A channel actor's inbox: an unbounded queue with many senders and one receiver, as tokio's unbounded `mpsc`
//! channel, built for the many idle channels of a large bot. tokio's channel takes a block of 32 inputs (544 bytes)
//! and a header padded to cache lines (512 bytes) from its start, whether it is used or not (heaptrack, 10,000 saved
//! sessions); this one is a queue behind a lock and a `Notify`: 104 bytes, and room for inputs only while some wait
//! (a drained queue gives its room back, so an idle channel's inbox holds none: 80 bytes a channel otherwise).
//!
//! The lock is never held across an `.await`, and a receiver taking an input spends from the task's cooperative
//! budget as tokio's channel does, so one channel's long backlog does not keep the others' actors from running.

use super::Input;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::Notify;

/// A new inbox: the handle to send to it, and its receiver.
pub fn inbox() -> (InboxSender, Inbox) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State { queue: VecDeque::new(), closed: false }),
        senders: AtomicUsize::new(1),
        arrived: Notify::new(),
    });
    (InboxSender { shared: shared.clone() }, Inbox { shared })
}

struct Shared {
    state: Mutex<State>,
    /// The senders alive (counted apart from the lock: a handle is cloned for every input the router gives).
    senders: AtomicUsize,
    /// Told when an input arrives, the inbox closes or the last sender goes.
    arrived: Notify,
}

struct State {
    queue: VecDeque<Input>,
    /// The receiver closed the inbox or is gone: sending fails, giving the input back.
    closed: bool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Sends to an actor's inbox. Cloning is cheap.
pub struct InboxSender {
    shared: Arc<Shared>,
}

impl InboxSender {
    /// Queues the input, or gives it back if the inbox is closed (its actor retired or stopped).
    pub fn send(&self, input: Input) -> Result<(), Input> {
        {
            let mut state = self.shared.state();
            if state.closed {
                return Err(input);
            }
            state.queue.push_back(input);
        }
        self.shared.arrived.notify_one();
        Ok(())
    }

    /// Whether the receiver closed the inbox or is gone.
    pub fn is_closed(&self) -> bool {
        self.shared.state().closed
    }
}

impl Clone for InboxSender {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        InboxSender { shared: self.shared.clone() }
    }
}

impl Drop for InboxSender {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.arrived.notify_one();
        }
    }
}

impl std::fmt::Debug for InboxSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxSender").finish_non_exhaustive()
    }
}

/// The actor's end of its inbox.
pub struct Inbox {
    shared: Arc<Shared>,
}

impl Inbox {
    /// The next input, in the order sent; `None` once the inbox is closed or every sender is gone, and it is empty.
    /// Cancel safe: an input is taken only when this returns it.
    pub async fn recv(&mut self) -> Option<Input> {
        loop {
            let has_input = {
                let state = self.shared.state();
                if state.queue.is_empty() && (state.closed || self.shared.senders.load(Ordering::Acquire) == 0) {
                    return None;
                }
                !state.queue.is_empty()
            };
            if has_input {
                // As tokio's channel: a task that always finds input yields now and then.
                tokio::task::coop::consume_budget().await;
                if let Some(input) = self.try_recv() {
                    return Some(input);
                }
                continue;
            }
            // A wake-up that comes between the look above and this wait is kept by `Notify` as a permit.
            self.shared.arrived.notified().await;
        }
    }

    /// The next input if one is waiting.
    pub fn try_recv(&mut self) -> Option<Input> {
        let mut state = self.shared.state();
        let input = state.queue.pop_front();
        if state.queue.is_empty() && state.queue.capacity() > 0 {
            state.queue = VecDeque::new();
        }
        input
    }

    pub fn is_empty(&self) -> bool {
        self.shared.state().queue.is_empty()
    }

    /// Refuses every input sent from now on; those already queued can still be received.
    pub fn close(&mut self) {
        self.shared.state().closed = true;
    }
}

impl Drop for Inbox {
    /// Closes the inbox and drops what it holds (outside the lock): a question waiting there is answered with a
    /// closed reply.
    fn drop(&mut self) {
        let queued = {
            let mut state = self.shared.state();
            state.closed = true;
            std::mem::take(&mut state.queue)
        };
        drop(queued);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(inbox: &InboxSender, n: usize) {
        for _ in 0..n {
            inbox.send(Input::CatchUp(None)).unwrap();
        }
    }

    #[tokio::test]
    async fn inputs_come_out_in_the_order_sent_by_every_sender() {
        let (first, mut inbox) = inbox();
        let second = first.clone();
        first.send(Input::CatchUp(None)).unwrap();
        second.send(Input::Disconnected(None)).unwrap();
        first.send(Input::ReadAgain).unwrap();
        assert!(matches!(inbox.recv().await, Some(Input::CatchUp(None))));
        assert!(matches!(inbox.recv().await, Some(Input::Disconnected(None))));
        assert!(matches!(inbox.try_recv(), Some(Input::ReadAgain)));
        assert!(inbox.try_recv().is_none());
        assert!(inbox.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_receiver_wakes_for_an_input_sent_later_from_another_task() {
        let (sender, mut inbox) = inbox();
        let later = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            sender.send(Input::CatchUp(None)).unwrap();
            sender
        });
        assert!(matches!(inbox.recv().await, Some(Input::CatchUp(None))));
        drop(later.await.unwrap());
        assert!(inbox.recv().await.is_none(), "every sender is gone and nothing is left");
    }

    #[tokio::test]
    async fn a_closed_inbox_refuses_new_inputs_giving_them_back_and_still_hands_out_the_queued_ones() {
        let (sender, mut inbox) = inbox();
        sent(&sender, 2);
        inbox.close();
        assert!(sender.is_closed());
        assert!(matches!(sender.send(Input::ReadAgain), Err(Input::ReadAgain)));
        assert!(inbox.recv().await.is_some());
        assert!(inbox.recv().await.is_some());
        assert!(inbox.recv().await.is_none());
    }

    #[tokio::test]
    async fn dropping_the_receiver_answers_the_questions_left_in_it() {
        let (sender, inbox) = inbox();
        let (reply, answer) = tokio::sync::oneshot::channel();
        sender.send(Input::Flush(reply)).unwrap();
        drop(inbox);
        assert!(answer.await.is_err(), "the question is dropped, not left hanging");
        assert!(sender.is_closed());
    }

    #[tokio::test]
    async fn a_drained_inbox_gives_back_its_room_and_an_idle_one_holds_none() {
        let (sender, mut inbox) = inbox();
        assert_eq!(inbox.shared.state().queue.capacity(), 0, "nothing is taken before the first input");
        for burst in [1, 3, 1_000] {
            sent(&sender, burst);
            assert!(inbox.shared.state().queue.capacity() >= burst);
            while inbox.recv().await.is_some() && !inbox.is_empty() {}
            assert_eq!(inbox.shared.state().queue.capacity(), 0, "room kept after a burst of {burst}");
        }
    }
}

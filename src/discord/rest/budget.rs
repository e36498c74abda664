//! The bot's global REST budget: at most so many calls in any second, all routes and all channels together
//! (`restRequestsPerSecond`, 45 by default, under Discord's global 50/s). A burst (a thousand turns timing out at
//! once, a restart's replays) waits its turn here instead of meeting global 429s, which count toward Discord's ban
//! for invalid requests (10,000 in 10 minutes). Every REST call the bot makes takes a token first: the effects and
//! the catch-up reads ([`super::http`]), the webhooks, the serenity calls ([`super::serenity::call`], command
//! replies, the slash commands' registration) and serenity's own request for the gateway's address at start-up. One instance per bot, shared. 0 turns it off, for a bot behind a rate-limiting proxy that keeps the
//! global limit itself (`--api-base`), or a local server with none (the bench).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

const WINDOW: Duration = Duration::from_secs(1);

pub struct RestBudget {
    /// 0: no budget.
    per_second: usize,
    /// The instants granted to the last `per_second` calls, in order (some may lie ahead: calls waiting for them).
    granted: Mutex<VecDeque<Instant>>,
}

impl RestBudget {
    pub fn new(per_second: u32) -> Self {
        let per_second = per_second as usize;
        Self { per_second, granted: Mutex::new(VecDeque::with_capacity(per_second)) }
    }

    /// Waits until a call may be made without going over the budget. A call may go once the call `per_second`
    /// calls before it is a second old: never more than `per_second` in any second, and a quiet bot never waits.
    /// The lock is held only to reserve the instant, never across the wait.
    pub async fn take(&self) {
        if self.per_second == 0 {
            return;
        }
        let at = {
            let mut granted = self.granted.lock().expect("budget lock");
            let now = Instant::now();
            let at = if granted.len() < self.per_second {
                now
            } else {
                let oldest = granted.pop_front().expect("full");
                now.max(oldest + WINDOW)
            };
            granted.push_back(at);
            at
        };
        if at > Instant::now() {
            tokio::time::sleep_until(at).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn a_budget_of_0_never_waits() {
        let budget = RestBudget::new(0);
        let start = Instant::now();
        for _ in 0..10_000 {
            budget.take().await;
        }
        assert_eq!(Instant::now(), start);
        assert!(budget.granted.lock().unwrap().is_empty(), "keeps nothing");
    }

    #[tokio::test(start_paused = true)]
    async fn calls_over_the_budget_are_spread_at_its_rate_and_never_more_in_any_second() {
        let budget = Arc::new(RestBudget::new(45));
        let start = Instant::now();
        let calls: Vec<_> = (0..200)
            .map(|_| {
                let budget = budget.clone();
                tokio::spawn(async move {
                    budget.take().await;
                    Instant::now()
                })
            })
            .collect();
        let mut made = Vec::new();
        for call in calls {
            made.push(call.await.unwrap());
        }
        made.sort();
        for (i, first) in made.iter().enumerate() {
            let in_window = made[i..].iter().take_while(|t| **t < *first + WINDOW).count();
            assert!(in_window <= 45, "{in_window} calls in the second from {:?}", *first - start);
        }
        assert_eq!(made.iter().filter(|t| **t == start).count(), 45, "the first 45 go at once");
        // 200 calls at 45 a second: the last one goes in the fifth second.
        assert_eq!(made.last().unwrap().duration_since(start), Duration::from_secs(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_bot_never_waits() {
        let budget = RestBudget::new(2);
        for _ in 0..5 {
            let before = Instant::now();
            budget.take().await;
            assert_eq!(Instant::now(), before);
            tokio::time::advance(Duration::from_millis(600)).await;
        }
    }
}

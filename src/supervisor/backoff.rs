//! Restart arithmetic: exponential backoff with jitter, and the crash budget.
//!
//! The crash budget marks a crash loop. No IO.

use crate::config::RestartPolicy;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// Exponential backoff: `initial`, doubling per attempt up to `max`, with "equal jitter"
/// (a random point in the upper half), so many servers failing together do not retry in
/// lockstep yet each still waits at least half its step.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(policy: &RestartPolicy) -> Backoff {
        Backoff {
            initial: policy.backoff_initial,
            max: policy.backoff_max,
            attempt: 0,
        }
    }

    /// The delay before the next attempt; `jitter` is uniform in [0, 1).
    pub fn next_delay(&mut self, jitter: f64) -> Duration {
        let step = self
            .initial
            .saturating_mul(1u32 << self.attempt.min(20))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        step / 2 + step.mul_f64(jitter.clamp(0.0, 1.0) / 2.0)
    }

    /// How many delays have been handed out since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// Counts crashes in a sliding window; more than `max_restarts` in `window` is a crash loop.
#[derive(Debug, Clone)]
pub struct CrashBudget {
    window: Duration,
    max: u32,
    crashes: VecDeque<Instant>,
}

impl CrashBudget {
    pub fn new(policy: &RestartPolicy) -> CrashBudget {
        CrashBudget {
            window: policy.window,
            max: policy.max_restarts,
            crashes: VecDeque::new(),
        }
    }

    /// Records a crash at `now`; returns true when the budget is exhausted.
    pub fn record(&mut self, now: Instant) -> bool {
        while let Some(first) = self.crashes.front() {
            if now.duration_since(*first) >= self.window {
                self.crashes.pop_front();
            } else {
                break;
            }
        }
        self.crashes.push_back(now);
        self.crashes.len() > self.max as usize
    }

    pub fn recent(&self) -> usize {
        self.crashes.len()
    }

    pub fn clear(&mut self) {
        self.crashes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RestartPolicy {
        RestartPolicy {
            backoff_initial: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
            max_restarts: 5,
            window: Duration::from_secs(60),
            stable_after: Duration::from_secs(30),
        }
    }

    #[test]
    fn backoff_doubles_to_the_cap_with_jitter_in_the_upper_half() {
        let mut b = Backoff::new(&policy());
        let ms = |d: Duration| d.as_millis();
        let lows: Vec<u128> = (0..10).map(|_| ms(b.next_delay(0.0))).collect();
        assert_eq!(
            lows,
            vec![125, 250, 500, 1000, 2000, 4000, 8000, 15000, 15000, 15000]
        );
        b.reset();
        let highs: Vec<u128> = (0..9).map(|_| ms(b.next_delay(1.0))).collect();
        assert_eq!(
            highs,
            vec![250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]
        );
        for _ in 0..100 {
            b.next_delay(0.5); // no overflow after many attempts
        }
        assert_eq!(ms(b.next_delay(0.5)), 22500);
    }

    #[tokio::test(start_paused = true)]
    async fn crash_budget_trips_on_the_sixth_crash_within_the_window() {
        let mut budget = CrashBudget::new(&policy());
        for _ in 0..5 {
            assert!(!budget.record(Instant::now()));
            tokio::time::advance(Duration::from_secs(5)).await;
        }
        assert!(budget.record(Instant::now()), "6 crashes in 25 s");
        budget.clear();
        for _ in 0..20 {
            assert!(
                !budget.record(Instant::now()),
                "one crash every 13 s never trips"
            );
            tokio::time::advance(Duration::from_secs(13)).await;
        }
        assert!(budget.recent() <= 5);
    }
}

//! The training queue's scheduling core: per-account FIFO queues served round-robin.
//!
//! Queueing is never refused. When a worker becomes free it takes the next job of the
//! account at the front of the ring; an account with more work goes to the back, and an
//! account that queues its first job joins at the back. So an account that queued 10
//! trainings cannot starve one that queued 1 later: the newcomer is served after at most
//! one more job of each account already waiting. Pure data structure, no I/O or time.

use std::collections::{HashMap, VecDeque};

#[derive(Debug)]
pub struct FairQueue<J> {
    ring: VecDeque<String>,
    jobs: HashMap<String, VecDeque<J>>,
}

impl<J> Default for FairQueue<J> {
    fn default() -> Self {
        FairQueue {
            ring: VecDeque::new(),
            jobs: HashMap::new(),
        }
    }
}

impl<J> FairQueue<J> {
    /// Appends a job to its account's queue (never refused).
    pub fn push(&mut self, account: &str, job: J) {
        let q = self.jobs.entry(account.to_string()).or_default();
        if q.is_empty() {
            self.ring.push_back(account.to_string());
        }
        q.push_back(job);
    }

    /// The next job to start, round-robin over accounts with queued work.
    pub fn pop(&mut self) -> Option<(String, J)> {
        let account = self.ring.pop_front()?;
        let q = self.jobs.get_mut(&account)?;
        let job = q.pop_front()?;
        if q.is_empty() {
            self.jobs.remove(&account);
        } else {
            self.ring.push_back(account.clone());
        }
        Some((account, job))
    }

    /// Jobs waiting, all accounts together.
    pub fn len(&self) -> usize {
        self.jobs.values().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Drops every waiting job of an account (its data was purged).
    pub fn forget(&mut self, account: &str) {
        self.jobs.remove(account);
        self.ring.retain(|a| a != account);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pool of one worker: A queues 10 trainings (the first starts at once), then B
    /// queues 1. B's training starts before A's third.
    #[test]
    fn a_late_account_is_served_before_a_busy_accounts_third_job() {
        let mut q = FairQueue::default();
        let mut started = Vec::new();
        q.push("A", 1);
        // The single worker is free: A1 starts immediately.
        started.push(q.pop().expect("A1"));
        for i in 2..=10 {
            q.push("A", i);
        }
        q.push("B", 1);
        while let Some(j) = q.pop() {
            started.push(j);
        }
        let pos = |acc: &str, n: i32| {
            started
                .iter()
                .position(|(a, j)| a == acc && *j == n)
                .expect("started")
        };
        assert!(pos("B", 1) < pos("A", 3), "order: {started:?}");
        assert_eq!(started.len(), 11, "nothing lost or refused");
        let a_order: Vec<i32> = started
            .iter()
            .filter(|(a, _)| a == "A")
            .map(|(_, j)| *j)
            .collect();
        assert_eq!(
            a_order,
            (1..=10).collect::<Vec<_>>(),
            "FIFO within an account"
        );
    }

    #[test]
    fn round_robin_over_three_accounts_and_forget() {
        let mut q = FairQueue::default();
        for j in 0..3 {
            q.push("A", j);
            q.push("B", j);
        }
        q.push("C", 0);
        assert_eq!(q.len(), 7);
        let order: Vec<String> = std::iter::from_fn(|| q.pop())
            .map(|(a, _)| a)
            .take(4)
            .collect();
        assert_eq!(order, ["A", "B", "C", "A"]);
        q.forget("A");
        let rest: Vec<String> = std::iter::from_fn(|| q.pop()).map(|(a, _)| a).collect();
        assert_eq!(rest, ["B", "B"]);
        assert!(q.is_empty());
    }
}

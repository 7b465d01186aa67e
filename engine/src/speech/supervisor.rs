//! The speech node's supervisor as a state machine: what to do when the node was started,
//! became ready, exited or overran its start-up time, and when to start it again. No I/O
//! and no clock of its own: the caller says what happened and what time it is, and does
//! the [`Action`]s it gets back (`super::process` is that caller).
//!
//! ```text
//!            spawned            ready
//!  Idle ──▶ Starting ─────────▶ Ready
//!   ▲ spawn    │ deadline: Kill   │ unresponsive: Kill ──▶ Killing
//!   │          ▼                  │ exited
//!   │       Killing ── exited ──▶ Backoff ── until: Spawn ──▶ (spawned / spawn_failed)
//!   │                               │ give_up_after consecutive failures
//!   │                               ▼
//!   └─ (start)                    GaveUp
//! ```
//!
//! A ready node whose `/ready` has not answered for `unresponsive_after` (hung, or stopped)
//! is killed like one that overran its start-up time.
//!
//! Backoff doubles from `backoff_min` with every consecutive failure (an exit, a start-up
//! timeout, a spawn error) up to `backoff_max`; a node that was ready for [`STABLE_AFTER`]
//! before it exited starts the count afresh.

use std::time::{Duration, Instant};

use callsmith_domain::readiness::ComponentStatus;

/// A node ready at least this long before it exits counts as having run well: its exit
/// restarts it after `backoff_min` again.
pub const STABLE_AFTER: Duration = Duration::from_secs(60);

/// Bounds of the supervision (from `[speech]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// A node not ready this long after it was started is killed.
    pub startup_timeout: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Consecutive failures after which the node is left down; 0: never.
    pub give_up_after: u32,
    /// A ready node whose readiness probe has not succeeded for this long is killed; None:
    /// never.
    pub unresponsive_after: Option<Duration>,
}

/// Where the node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not started yet.
    Idle,
    /// The process runs and loads its models; it is killed at `deadline` if not ready.
    Starting { since: Instant, deadline: Instant },
    /// Ready (its `/ready` answered 200) since `since`; it last answered at `answered`.
    Ready { since: Instant, answered: Instant },
    /// Killed for overrunning its start-up time; its exit is awaited.
    Killing,
    /// Not running; started again at `until`.
    Backoff { until: Instant },
    /// Not running, and not started again (`give_up_after` failures in a row).
    GaveUp,
    /// Being stopped for shutdown; its exit is awaited.
    Stopping,
    /// Stopped for shutdown.
    Stopped,
}

/// What the caller is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start the process, then report [`Supervisor::spawned`] or [`Supervisor::spawn_failed`].
    Spawn,
    /// Kill the process, then report its exit ([`Supervisor::exited`]).
    Kill,
}

/// The supervisor's state and failure count.
#[derive(Debug, Clone)]
pub struct Supervisor {
    policy: Policy,
    state: State,
    /// Consecutive failures since the node last ran well.
    failures: u32,
    /// Starts so far (the first included).
    starts: u64,
}

impl Supervisor {
    pub fn new(policy: Policy) -> Supervisor {
        Supervisor {
            policy,
            state: State::Idle,
            failures: 0,
            starts: 0,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Consecutive failures since the node last ran well.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Starts so far.
    pub fn starts(&self) -> u64 {
        self.starts
    }

    /// The node's readiness: `ok` while ready, `starting` while its process runs and is not
    /// ready yet, `down` while no process runs.
    pub fn status(&self) -> ComponentStatus {
        match self.state {
            State::Ready { .. } => ComponentStatus::Ok,
            State::Starting { .. } | State::Killing => ComponentStatus::Starting,
            State::Idle | State::Backoff { .. } | State::GaveUp => ComponentStatus::Down,
            State::Stopping | State::Stopped => ComponentStatus::Down,
        }
    }

    /// Its process is running and not ready yet: the caller probes `/ready` often.
    pub fn wants_probe(&self) -> bool {
        matches!(self.state, State::Starting { .. })
    }

    /// It is ready and watched for hangs: the caller probes `/ready` now and then and
    /// reports [`Supervisor::answered`] / [`Supervisor::unanswered`].
    pub fn wants_watch(&self) -> bool {
        matches!(self.state, State::Ready { .. }) && self.policy.unresponsive_after.is_some()
    }

    /// The first start.
    pub fn start(&mut self) -> Option<Action> {
        (self.state == State::Idle).then_some(Action::Spawn)
    }

    /// The process was started.
    pub fn spawned(&mut self, now: Instant) {
        self.starts += 1;
        self.state = State::Starting {
            since: now,
            deadline: now + self.policy.startup_timeout,
        };
    }

    /// The process could not be started.
    pub fn spawn_failed(&mut self, now: Instant) {
        self.starts += 1;
        self.fail(now);
    }

    /// The node answered its readiness probe (becoming ready, or still ready).
    pub fn answered(&mut self, now: Instant) {
        match self.state {
            State::Starting { .. } => {
                self.state = State::Ready {
                    since: now,
                    answered: now,
                }
            }
            State::Ready { since, .. } => {
                self.state = State::Ready {
                    since,
                    answered: now,
                }
            }
            _ => {}
        }
    }

    /// A ready node did not answer its probe: killed once it has not answered for
    /// `unresponsive_after`.
    pub fn unanswered(&mut self, now: Instant) -> Option<Action> {
        let limit = self.policy.unresponsive_after?;
        match self.state {
            State::Ready { answered, .. } if now.saturating_duration_since(answered) >= limit => {
                self.state = State::Killing;
                Some(Action::Kill)
            }
            _ => None,
        }
    }

    /// The process exited.
    pub fn exited(&mut self, now: Instant) {
        match self.state {
            State::Stopping => self.state = State::Stopped,
            State::Ready { since, .. } => {
                if now.saturating_duration_since(since) >= STABLE_AFTER {
                    self.failures = 0;
                }
                self.fail(now);
            }
            State::Starting { .. } | State::Killing => self.fail(now),
            State::Idle | State::Backoff { .. } | State::GaveUp | State::Stopped => {}
        }
    }

    /// When [`Supervisor::tick`] has something to do, if ever.
    pub fn deadline(&self) -> Option<Instant> {
        match self.state {
            State::Starting { deadline, .. } => Some(deadline),
            State::Backoff { until } => Some(until),
            _ => None,
        }
    }

    /// Time passed: a start-up overrun is killed, a finished backoff starts the node again.
    pub fn tick(&mut self, now: Instant) -> Option<Action> {
        match self.state {
            State::Starting { deadline, .. } if now >= deadline => {
                self.state = State::Killing;
                Some(Action::Kill)
            }
            State::Backoff { until } if now >= until => Some(Action::Spawn),
            _ => None,
        }
    }

    /// Shutdown: a running process is killed; nothing is started again.
    pub fn shutdown(&mut self) -> Option<Action> {
        match self.state {
            State::Starting { .. } | State::Ready { .. } | State::Killing => {
                self.state = State::Stopping;
                Some(Action::Kill)
            }
            State::Stopping => None,
            _ => {
                self.state = State::Stopped;
                None
            }
        }
    }

    /// The delay before the next start after `failures` consecutive failures.
    pub fn backoff(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.policy
            .backoff_min
            .saturating_mul(1 << doublings)
            .min(self.policy.backoff_max)
    }

    fn fail(&mut self, now: Instant) {
        self.failures = self.failures.saturating_add(1);
        let limit = self.policy.give_up_after;
        self.state = if limit > 0 && self.failures >= limit {
            State::GaveUp
        } else {
            State::Backoff {
                until: now + self.backoff(self.failures),
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(give_up_after: u32) -> Policy {
        Policy {
            startup_timeout: Duration::from_secs(30),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(10),
            give_up_after,
            unresponsive_after: Some(Duration::from_secs(15)),
        }
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn starts_then_becomes_ready() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(0));
        assert_eq!(s.status(), ComponentStatus::Down);
        assert_eq!(s.start(), Some(Action::Spawn));
        s.spawned(t0);
        assert_eq!(s.status(), ComponentStatus::Starting);
        assert!(s.wants_probe());
        assert_eq!(s.deadline(), Some(t0 + 30 * S));
        assert_eq!(
            s.tick(t0 + 5 * S),
            None,
            "nothing to do before the deadline"
        );
        s.answered(t0 + 5 * S);
        assert_eq!(s.status(), ComponentStatus::Ok);
        assert!(!s.wants_probe());
        assert_eq!(s.deadline(), None);
        assert_eq!(s.start(), None, "started once");
        assert_eq!(s.starts(), 1);
    }

    #[test]
    fn an_exit_restarts_after_a_doubling_backoff_up_to_the_bound() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(0));
        s.start();
        let mut now = t0;
        s.spawned(now);
        s.answered(now + S);
        let mut waits = Vec::new();
        for _ in 0..6 {
            now += 2 * S;
            s.exited(now);
            assert_eq!(s.status(), ComponentStatus::Down);
            let until = s.deadline().expect("a restart is due");
            waits.push((until - now).as_secs());
            assert_eq!(s.tick(until - Duration::from_millis(1)), None);
            assert_eq!(s.tick(until), Some(Action::Spawn));
            now = until;
            s.spawned(now);
        }
        assert_eq!(waits, vec![1, 2, 4, 8, 10, 10]);
        assert_eq!(s.failures(), 6);
        assert_eq!(s.starts(), 7);
    }

    #[test]
    fn a_node_that_ran_well_restarts_at_once_again() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(0));
        s.start();
        s.spawned(t0);
        s.exited(t0 + S);
        s.tick(t0 + 2 * S);
        s.spawned(t0 + 2 * S);
        s.exited(t0 + 3 * S);
        assert_eq!(s.failures(), 2);
        s.tick(t0 + 10 * S);
        s.spawned(t0 + 10 * S);
        s.answered(t0 + 11 * S);
        // Ready for longer than STABLE_AFTER: the count starts afresh.
        let later = t0 + 11 * S + STABLE_AFTER;
        s.exited(later);
        assert_eq!(s.failures(), 1);
        assert_eq!(s.deadline(), Some(later + S));
    }

    #[test]
    fn a_start_up_overrun_is_killed_and_counts_as_a_failure() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(0));
        s.start();
        s.spawned(t0);
        assert_eq!(s.tick(t0 + 30 * S), Some(Action::Kill));
        assert_eq!(s.state(), State::Killing);
        assert_eq!(s.status(), ComponentStatus::Starting);
        // A late probe answer does not revive a node being killed.
        s.answered(t0 + 30 * S);
        assert_eq!(s.state(), State::Killing);
        s.exited(t0 + 31 * S);
        assert_eq!(s.state(), State::Backoff { until: t0 + 32 * S });
    }

    #[test]
    fn a_ready_node_that_stops_answering_is_killed() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(0));
        s.start();
        s.spawned(t0);
        assert!(!s.wants_watch(), "starting: probed, not watched");
        s.answered(t0 + S);
        assert!(s.wants_watch());
        assert_eq!(s.unanswered(t0 + 10 * S), None, "silent for 9 s");
        s.answered(t0 + 12 * S);
        assert_eq!(s.unanswered(t0 + 26 * S), None, "silent for 14 s");
        assert_eq!(s.unanswered(t0 + 27 * S), Some(Action::Kill));
        assert_eq!(s.state(), State::Killing);
        assert_eq!(s.status(), ComponentStatus::Starting);
        s.exited(t0 + 28 * S);
        assert!(matches!(s.state(), State::Backoff { .. }));
        assert_eq!(s.failures(), 1);

        // Not watched without the bound.
        let mut s = Supervisor::new(Policy {
            unresponsive_after: None,
            ..policy(0)
        });
        s.start();
        s.spawned(t0);
        s.answered(t0 + S);
        assert!(!s.wants_watch());
        assert_eq!(s.unanswered(t0 + 1000 * S), None);
    }

    #[test]
    fn gives_up_after_consecutive_failures() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(3));
        s.start();
        s.spawn_failed(t0);
        assert_eq!(s.tick(t0 + S), Some(Action::Spawn));
        s.spawned(t0 + S);
        s.exited(t0 + 2 * S);
        assert_eq!(s.tick(t0 + 4 * S), Some(Action::Spawn));
        s.spawned(t0 + 4 * S);
        s.exited(t0 + 5 * S);
        assert_eq!(s.state(), State::GaveUp);
        assert_eq!(s.status(), ComponentStatus::Down);
        assert_eq!(s.deadline(), None);
        assert_eq!(s.tick(t0 + 1000 * S), None, "never started again");
    }

    #[test]
    fn shutdown_kills_a_running_node_and_starts_nothing() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(0));
        s.start();
        s.spawned(t0);
        s.answered(t0 + S);
        assert_eq!(s.shutdown(), Some(Action::Kill));
        assert_eq!(s.shutdown(), None, "asked once");
        s.exited(t0 + 2 * S);
        assert_eq!(s.state(), State::Stopped);
        assert_eq!(s.deadline(), None);

        // Between a crash and its restart there is nothing to kill.
        let mut s = Supervisor::new(policy(0));
        s.start();
        s.spawned(t0);
        s.exited(t0 + S);
        assert_eq!(s.shutdown(), None);
        assert_eq!(s.state(), State::Stopped);
        assert_eq!(s.tick(t0 + 100 * S), None);
    }

    #[test]
    fn backoff_saturates() {
        let s = Supervisor::new(Policy {
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(3600),
            ..policy(0)
        });
        assert_eq!(s.backoff(1), Duration::from_millis(500));
        assert_eq!(s.backoff(2), S);
        assert_eq!(s.backoff(u32::MAX), Duration::from_secs(3600));
    }
}

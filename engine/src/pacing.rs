//! How fast and how late this process runs: the token bucket that paces call starts
//! ([`StartRate`]) and the lateness of its timers ([`LoopLag`]), two signals the node's
//! capacity (`crate::runtime::Capacity`) reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A token bucket of call starts: `per_sec` tokens a second, holding a tenth of a
/// second's worth (at least one). Sans-IO: the caller says what time it is.
#[derive(Debug, Clone)]
pub struct StartRate {
    per_sec: f64,
    burst: f64,
    tokens: f64,
    at: std::time::Instant,
}

impl StartRate {
    pub fn new(per_sec: u32, now: std::time::Instant) -> StartRate {
        let burst = (f64::from(per_sec) / 10.0).max(1.0);
        StartRate {
            per_sec: f64::from(per_sec),
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// Takes one start if the rate allows it at `now`.
    pub fn take(&mut self, now: std::time::Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = self.at.max(now);
        self.tokens = (self.tokens + elapsed * self.per_sec).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// How late this process runs a timer, recently: the sign that its CPU is saturated (every
/// call's signalling and media waits behind the others). A probe sleeps [`LoopLag::TICK`]
/// again and again; its lateness, decayed by a quarter per tick, is the figure, so a burst
/// of lateness counts for about a tenth of a second after it ends.
#[derive(Debug, Default)]
pub struct LoopLag {
    lag_us: AtomicU64,
}

impl LoopLag {
    pub const TICK: Duration = Duration::from_millis(10);

    /// The recent lateness, µs.
    pub fn recent_us(&self) -> u64 {
        self.lag_us.load(Ordering::Relaxed)
    }

    /// Takes in one tick's lateness.
    pub fn observe(&self, late: Duration) {
        let late = late.as_micros().min(u64::MAX as u128) as u64;
        let decayed = self.recent_us() * 3 / 4;
        self.lag_us.store(late.max(decayed), Ordering::Relaxed);
    }

    /// Probes the runtime for as long as `lag` is in use.
    pub(crate) fn start(lag: &Arc<LoopLag>) {
        let lag = Arc::downgrade(lag);
        tokio::spawn(async move {
            loop {
                let asked = tokio::time::Instant::now() + LoopLag::TICK;
                tokio::time::sleep_until(asked).await;
                let Some(lag) = lag.upgrade() else { return };
                lag.observe(tokio::time::Instant::now().saturating_duration_since(asked));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_lag_is_the_recent_worst_and_fades() {
        let lag = LoopLag::default();
        lag.observe(Duration::from_millis(2));
        assert_eq!(lag.recent_us(), 2_000);
        // A stall counts at once...
        lag.observe(Duration::from_millis(400));
        assert_eq!(lag.recent_us(), 400_000);
        // ...and fades by a quarter per punctual tick: under 100 ms after 5 ticks.
        for _ in 0..5 {
            lag.observe(Duration::ZERO);
        }
        assert!(lag.recent_us() < 100_000, "{}", lag.recent_us());
        assert!(lag.recent_us() > 0);
    }

    #[test]
    fn start_rate_allows_its_rate_and_a_tenth_of_a_second_at_once() {
        let t0 = std::time::Instant::now();
        let mut r = StartRate::new(100, t0);
        // A tenth of a second's worth at once, then nothing more at that instant.
        assert_eq!((0..20).filter(|_| r.take(t0)).count(), 10);
        // Then one per 10 ms.
        assert!(!r.take(t0 + Duration::from_millis(5)));
        assert!(r.take(t0 + Duration::from_millis(11)));
        // Over a second at the rate: about the rate, never more than rate + burst.
        let mut taken = 0;
        for ms in 0..1000 {
            if r.take(t0 + Duration::from_millis(1000 + ms)) {
                taken += 1;
            }
        }
        assert!((95..=110).contains(&taken), "{taken}");
        // A clock that steps back takes nothing extra.
        assert!(!r.take(t0));
        // A slow rate still lets a call through now and then.
        let mut slow = StartRate::new(1, t0);
        assert!(slow.take(t0));
        assert!(!slow.take(t0 + Duration::from_millis(500)));
        assert!(slow.take(t0 + Duration::from_millis(1001)));
    }
}

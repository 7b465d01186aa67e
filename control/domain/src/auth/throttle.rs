//! Login throttling: failed logins are counted per account email and per source address;
//! a key that reaches its limit inside the window is refused until the window ends.
//!
//! * The window of a key opens at its first failure and lasts `window`; once it has
//!   passed, the key starts again from zero. A key with `max_failures` failures in its
//!   window is locked for the rest of the window (the `Retry-After` of the refusal).
//! * An attempt is charged as a failure before the password is checked, so concurrent
//!   guesses cannot overtake the count; a success refunds the charge: it clears the
//!   email's counter and takes one failure back from the address.
//! * Emails are keyed by the SHA-256 of their normalised form (fixed-size keys, no
//!   addresses kept in memory), unknown and known emails alike. IPv6 addresses are keyed
//!   by their /64 (one subscriber's prefix), IPv4-mapped IPv6 by the IPv4 address.
//! * Memory is bounded: each table holds at most `max_keys` keys. A new key in a full
//!   table first drops the expired keys, then the key with the fewest failures (the
//!   oldest among equals), so flooding the table with one-off keys does not unlock a key
//!   that is under attack.
//!
//! Sans-IO: every call takes `now`, so the rules are tested on simulated time. The
//! counters live in this process; engines sharing a database count separately.

use std::{
    collections::HashMap,
    hash::Hash,
    net::{IpAddr, Ipv6Addr},
    time::{Duration, Instant},
};

use sha2::{Digest, Sha256};

/// One limit: `max_failures` failed logins per `window` (0 failures: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub max_failures: u32,
    pub window: Duration,
}

/// Limits of [`LoginThrottle`]: `[auth] login_*` in the engine's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleSettings {
    /// Per account email (normalised: trimmed, ASCII lower case).
    pub per_email: Limit,
    /// Per source address; higher than per email, since an office behind one NAT address
    /// shares it.
    pub per_address: Limit,
    /// Keys tracked per table at most.
    pub max_keys: usize,
}

/// Keys tracked per table by default (a few hundred KiB per table when full).
pub const DEFAULT_MAX_KEYS: usize = 10_000;

impl Default for ThrottleSettings {
    /// 5 failures per email and 20 per address in 15 minutes.
    fn default() -> Self {
        let window = Duration::from_secs(15 * 60);
        ThrottleSettings {
            per_email: Limit {
                max_failures: 5,
                window,
            },
            per_address: Limit {
                max_failures: 20,
                window,
            },
            max_keys: DEFAULT_MAX_KEYS,
        }
    }
}

/// The keys of one charged attempt; hand it back to [`LoginThrottle::succeeded`].
#[derive(Debug)]
#[must_use = "a successful login must hand its attempt back to LoginThrottle::succeeded"]
pub struct Attempt {
    email: [u8; 32],
    address: Option<IpAddr>,
}

/// Failure counters per email and per address.
#[derive(Debug)]
pub struct LoginThrottle {
    emails: Table<[u8; 32]>,
    addresses: Table<IpAddr>,
}

impl LoginThrottle {
    pub fn new(settings: ThrottleSettings) -> Self {
        LoginThrottle {
            emails: Table::new(settings.per_email, settings.max_keys),
            addresses: Table::new(settings.per_address, settings.max_keys),
        }
    }

    /// Starts a login attempt for `email` (already normalised) from `peer` (None when the
    /// server did not record the peer: only the email is counted). `Err(retry_after)` when
    /// the email or the address is locked: the attempt is refused and not counted.
    /// Otherwise the attempt is charged as a failure to both keys.
    pub fn begin(
        &mut self,
        email: &str,
        peer: Option<IpAddr>,
        now: Instant,
    ) -> Result<Attempt, Duration> {
        let attempt = Attempt {
            email: Sha256::digest(email.as_bytes()).into(),
            address: peer.map(address_key),
        };
        let locked = [
            self.emails.locked(&attempt.email, now),
            attempt.address.and_then(|a| self.addresses.locked(&a, now)),
        ];
        if let Some(wait) = locked.into_iter().flatten().max() {
            return Err(wait);
        }
        self.emails.charge(attempt.email, now);
        if let Some(a) = attempt.address {
            self.addresses.charge(a, now);
        }
        Ok(attempt)
    }

    /// The attempt logged in: the email's counter is cleared and the address gets its
    /// charge back (its other failures stay counted).
    pub fn succeeded(&mut self, attempt: Attempt, now: Instant) {
        self.emails.clear(&attempt.email);
        if let Some(a) = attempt.address {
            self.addresses.refund(&a, now);
        }
    }

    /// Keys tracked (emails, addresses), expired ones included until they are dropped.
    pub fn tracked(&self) -> (usize, usize) {
        (self.emails.entries.len(), self.addresses.entries.len())
    }
}

/// `Retry-After` seconds for a wait: rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// The key of an address: IPv4 as is, IPv4-mapped IPv6 as IPv4, other IPv6 by its /64.
fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & (u128::MAX << 64);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    /// Start of the window: the first failure.
    since: Instant,
}

#[derive(Debug)]
struct Table<K> {
    limit: Limit,
    max_keys: usize,
    entries: HashMap<K, Entry>,
}

impl<K: Hash + Eq + Copy> Table<K> {
    fn new(limit: Limit, max_keys: usize) -> Self {
        Table {
            limit,
            max_keys: max_keys.max(1),
            entries: HashMap::new(),
        }
    }

    fn enabled(&self) -> bool {
        self.limit.max_failures > 0
    }

    fn live(&self, e: &Entry, now: Instant) -> bool {
        now.saturating_duration_since(e.since) < self.limit.window
    }

    /// The rest of the window when `k` has used up its failures.
    fn locked(&self, k: &K, now: Instant) -> Option<Duration> {
        let e = self.entries.get(k)?;
        (self.enabled() && self.live(e, now) && e.failures >= self.limit.max_failures)
            .then(|| (e.since + self.limit.window).saturating_duration_since(now))
    }

    fn charge(&mut self, k: K, now: Instant) {
        if !self.enabled() {
            return;
        }
        let live = self.entries.get(&k).is_some_and(|e| self.live(e, now));
        if live {
            if let Some(e) = self.entries.get_mut(&k) {
                e.failures += 1;
            }
            return;
        }
        if !self.entries.contains_key(&k) {
            self.make_room(now);
        }
        self.entries.insert(
            k,
            Entry {
                failures: 1,
                since: now,
            },
        );
    }

    fn refund(&mut self, k: &K, now: Instant) {
        let live = self.entries.get(k).is_some_and(|e| self.live(e, now));
        match self.entries.get_mut(k) {
            Some(e) if live && e.failures > 1 => e.failures -= 1,
            Some(_) => {
                self.entries.remove(k);
            }
            None => {}
        }
    }

    fn clear(&mut self, k: &K) {
        self.entries.remove(k);
    }

    /// Frees one slot when the table is full: drops expired keys, then the key with the
    /// fewest failures (the oldest among equals).
    fn make_room(&mut self, now: Instant) {
        if self.entries.len() < self.max_keys {
            return;
        }
        let window = self.limit.window;
        self.entries
            .retain(|_, e| now.saturating_duration_since(e.since) < window);
        if self.entries.len() < self.max_keys {
            return;
        }
        if let Some(k) = self
            .entries
            .iter()
            .min_by_key(|(_, e)| (e.failures, e.since))
            .map(|(k, _)| *k)
        {
            self.entries.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn throttle(email: u32, address: u32) -> LoginThrottle {
        LoginThrottle::new(ThrottleSettings {
            per_email: Limit {
                max_failures: email,
                window: 15 * MIN,
            },
            per_address: Limit {
                max_failures: address,
                window: 15 * MIN,
            },
            max_keys: DEFAULT_MAX_KEYS,
        })
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn an_email_locks_after_its_failures_until_the_window_ends() {
        let mut t = throttle(5, 20);
        let t0 = Instant::now();
        for i in 0..5 {
            let _ = t
                .begin("a@x.test", ip("10.0.0.1"), t0 + Duration::from_secs(i))
                .expect("under the limit");
        }
        // Locked for the rest of the window opened by the first failure, from any address.
        let at = t0 + 5 * MIN;
        assert_eq!(
            t.begin("a@x.test", ip("10.0.0.1"), at).unwrap_err(),
            10 * MIN
        );
        assert_eq!(
            t.begin("a@x.test", ip("10.0.0.2"), at).unwrap_err(),
            10 * MIN
        );
        assert_eq!(t.begin("a@x.test", None, at).unwrap_err(), 10 * MIN);
        // Refusals are not counted: the lock does not grow.
        assert_eq!(
            t.begin("a@x.test", None, t0 + 15 * MIN - Duration::from_millis(1))
                .unwrap_err(),
            Duration::from_millis(1)
        );
        // Other emails are untouched.
        let _ = t
            .begin("b@x.test", ip("10.0.0.2"), at)
            .expect("another email");
        // The window has passed: a fresh start (and a fresh count of five).
        let later = t0 + 15 * MIN;
        for _ in 0..5 {
            let _ = t
                .begin("a@x.test", ip("10.0.0.3"), later)
                .expect("new window");
        }
        assert!(t.begin("a@x.test", ip("10.0.0.3"), later).is_err());
    }

    #[test]
    fn a_success_clears_the_email_and_refunds_the_address() {
        let mut t = throttle(3, 4);
        let now = Instant::now();
        let _ = t.begin("a@x.test", ip("10.0.0.1"), now).unwrap();
        let _ = t.begin("a@x.test", ip("10.0.0.1"), now).unwrap();
        let ok = t.begin("a@x.test", ip("10.0.0.1"), now).unwrap();
        t.succeeded(ok, now);
        // The email starts over: three more failures before the lock.
        for _ in 0..3 {
            let _ = t.begin("a@x.test", ip("10.0.0.2"), now).unwrap();
        }
        assert!(t.begin("a@x.test", ip("10.0.0.2"), now).is_err());
        // The address kept its two real failures: two more and it is locked.
        let _ = t.begin("b@x.test", ip("10.0.0.1"), now).unwrap();
        let _ = t.begin("c@x.test", ip("10.0.0.1"), now).unwrap();
        assert_eq!(
            t.begin("d@x.test", ip("10.0.0.1"), now).unwrap_err(),
            15 * MIN
        );
    }

    #[test]
    fn concurrent_attempts_are_counted_before_they_finish() {
        let mut t = throttle(2, 20);
        let now = Instant::now();
        // Two attempts in flight use up the email; a third is refused before either ends.
        let first = t.begin("a@x.test", None, now).unwrap();
        let _second = t.begin("a@x.test", None, now).unwrap();
        assert!(t.begin("a@x.test", None, now).is_err());
        // One of them succeeds: the email is open again.
        t.succeeded(first, now);
        assert!(t.begin("a@x.test", None, now).is_ok());
    }

    #[test]
    fn an_address_locks_across_emails_and_its_limit_is_separate() {
        let mut t = throttle(5, 20);
        let now = Instant::now();
        for i in 0..20 {
            let _ = t
                .begin(&format!("user{i}@x.test"), ip("192.0.2.7"), now)
                .unwrap();
        }
        assert_eq!(
            t.begin("new@x.test", ip("192.0.2.7"), now + MIN)
                .unwrap_err(),
            14 * MIN
        );
        // Another address may still try those emails.
        let _ = t.begin("user0@x.test", ip("192.0.2.8"), now + MIN).unwrap();
    }

    #[test]
    fn ipv6_is_keyed_by_its_64_and_mapped_ipv4_by_the_ipv4() {
        let mut t = throttle(100, 2);
        let now = Instant::now();
        let _ = t.begin("a@x.test", ip("2001:db8:1:2::1"), now).unwrap();
        let _ = t
            .begin("b@x.test", ip("2001:db8:1:2:ffff::9"), now)
            .unwrap();
        assert!(t.begin("c@x.test", ip("2001:db8:1:2::77"), now).is_err());
        let _ = t.begin("c@x.test", ip("2001:db8:1:3::1"), now).unwrap();

        let _ = t.begin("a@x.test", ip("198.51.100.1"), now).unwrap();
        let _ = t.begin("b@x.test", ip("::ffff:198.51.100.1"), now).unwrap();
        assert!(t.begin("c@x.test", ip("198.51.100.1"), now).is_err());
    }

    #[test]
    fn zero_disables_a_limit() {
        let mut t = throttle(0, 0);
        let now = Instant::now();
        for _ in 0..100 {
            let _ = t.begin("a@x.test", ip("10.0.0.1"), now).unwrap();
        }
        assert_eq!(t.tracked(), (0, 0));
    }

    #[test]
    fn tables_stay_bounded_and_keep_the_keys_under_attack() {
        let mut t = LoginThrottle::new(ThrottleSettings {
            max_keys: 100,
            ..ThrottleSettings::default()
        });
        let t0 = Instant::now();
        // A targeted email, locked.
        for _ in 0..5 {
            let _ = t.begin("victim@x.test", None, t0).unwrap();
        }
        // A flood of one-off emails (from addresses spread over many /64s).
        for i in 0..10_000u32 {
            let peer = IpAddr::V6(Ipv6Addr::from(u128::from(i) << 64));
            let _ = t.begin(&format!("spray{i}@x.test"), Some(peer), t0 + MIN);
        }
        let (emails, addresses) = t.tracked();
        assert!(emails <= 100 && addresses <= 100, "{emails} {addresses}");
        assert!(
            t.begin("victim@x.test", None, t0 + 2 * MIN).is_err(),
            "the flood evicted the locked email"
        );
        // Expired keys make room first.
        let _ = t.begin("fresh@x.test", None, t0 + 20 * MIN).unwrap();
        assert_eq!(t.tracked().0, 1);
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(900)), 900);
        assert_eq!(retry_after_secs(Duration::from_millis(899_001)), 900);
    }
}

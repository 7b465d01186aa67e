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
//!   addresses stored), unknown and known emails alike. IPv6 addresses are keyed by their
//!   /64 (one subscriber's prefix), IPv4-mapped IPv6 by the IPv4 address.
//! * The counters are rows of the database (`login_failures`), charged with one
//!   conditional statement each: every node on the database counts the same failures, so
//!   a cluster behind a balancer allows what one node allows. Keys whose window has passed
//!   are deleted as logins come, which keeps the table to the keys of the last window.
//!
//! Every call takes `now`, so the rules are tested on chosen times.

use std::{
    net::{IpAddr, Ipv6Addr},
    time::Duration,
};

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::store::{Store, StoreResult};

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
}

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
        }
    }
}

/// The keys of one charged attempt; hand it back to [`LoginThrottle::succeeded`].
#[derive(Debug)]
#[must_use = "a successful login must hand its attempt back to LoginThrottle::succeeded"]
pub struct Attempt {
    email: String,
    address: Option<String>,
}

/// Failure counters per email and per address, kept in the database. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LoginThrottle {
    settings: ThrottleSettings,
    store: Store,
}

impl LoginThrottle {
    pub fn new(settings: ThrottleSettings, store: Store) -> Self {
        LoginThrottle { settings, store }
    }

    /// Starts a login attempt for `email` (already normalised) from `peer` (None when the
    /// server did not record the peer: only the email is counted). `Err(retry_after)` when
    /// the email or the address is locked: the attempt is refused and not counted.
    /// Otherwise the attempt is charged as a failure to both keys.
    pub async fn begin(
        &self,
        email: &str,
        peer: Option<IpAddr>,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<Attempt, Duration>> {
        let attempt = Attempt {
            email: format!("email:{}", hex::encode(Sha256::digest(email.as_bytes()))),
            address: peer.map(|p| format!("address:{}", address_key(p))),
        };
        let longest = self
            .settings
            .per_email
            .window
            .max(self.settings.per_address.window);
        self.store
            .login_failures_forget(now - chrono_span(longest))
            .await?;
        if let Some(wait) = self
            .charge(&attempt.email, self.settings.per_email, now)
            .await?
        {
            return Ok(Err(wait));
        }
        if let Some(a) = &attempt.address
            && let Some(wait) = self.charge(a, self.settings.per_address, now).await?
        {
            if self.settings.per_email.max_failures > 0 {
                self.store.login_failure_refund(&attempt.email).await?;
            }
            return Ok(Err(wait));
        }
        Ok(Ok(attempt))
    }

    /// The attempt logged in: the email's counter is cleared and the address gets its
    /// charge back (its other failures stay counted).
    pub async fn succeeded(&self, attempt: Attempt) -> StoreResult<()> {
        self.store.login_failure_clear(&attempt.email).await?;
        if let Some(a) = &attempt.address
            && self.settings.per_address.max_failures > 0
        {
            self.store.login_failure_refund(a).await?;
        }
        Ok(())
    }

    /// Charges `key` under `limit`; the rest of its window when it is locked.
    async fn charge(
        &self,
        key: &str,
        limit: Limit,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Duration>> {
        if limit.max_failures == 0 {
            return Ok(None);
        }
        let window = chrono_span(limit.window);
        let since = self
            .store
            .login_failure_charge(key, i64::from(limit.max_failures), now, now - window)
            .await?;
        Ok(since.map(|since| (since + window - now).to_std().unwrap_or(Duration::ZERO)))
    }
}

/// A window as a time span (a window beyond chrono's range reads as a century).
fn chrono_span(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or_else(|_| chrono::Duration::days(36_500))
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

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn at(t0: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
        t0 + chrono_span(d)
    }

    async fn store() -> Store {
        let store = Store::connect("sqlite::memory:", 1).await.unwrap();
        store.migrate().await.unwrap();
        store
    }

    async fn throttle(email: u32, address: u32) -> LoginThrottle {
        LoginThrottle::new(
            ThrottleSettings {
                per_email: Limit {
                    max_failures: email,
                    window: 15 * MIN,
                },
                per_address: Limit {
                    max_failures: address,
                    window: 15 * MIN,
                },
            },
            store().await,
        )
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    async fn begin(
        t: &LoginThrottle,
        email: &str,
        peer: Option<IpAddr>,
        now: DateTime<Utc>,
    ) -> Result<Attempt, Duration> {
        t.begin(email, peer, now).await.unwrap()
    }

    #[tokio::test]
    async fn an_email_locks_after_its_failures_until_the_window_ends() {
        let t = throttle(5, 20).await;
        let t0 = Utc::now();
        for i in 0..5 {
            let _ = begin(
                &t,
                "a@x.test",
                ip("10.0.0.1"),
                at(t0, Duration::from_secs(i)),
            )
            .await
            .expect("under the limit");
        }
        // Locked for the rest of the window opened by the first failure, from any address.
        let later = at(t0, 5 * MIN);
        assert_eq!(
            begin(&t, "a@x.test", ip("10.0.0.1"), later)
                .await
                .unwrap_err(),
            10 * MIN
        );
        assert_eq!(
            begin(&t, "a@x.test", ip("10.0.0.2"), later)
                .await
                .unwrap_err(),
            10 * MIN
        );
        assert_eq!(
            begin(&t, "a@x.test", None, later).await.unwrap_err(),
            10 * MIN
        );
        // Refusals are not counted: the lock does not grow.
        assert_eq!(
            begin(
                &t,
                "a@x.test",
                None,
                at(t0, 15 * MIN - Duration::from_millis(1))
            )
            .await
            .unwrap_err(),
            Duration::from_millis(1)
        );
        // Other emails are untouched.
        let _ = begin(&t, "b@x.test", ip("10.0.0.2"), later)
            .await
            .expect("another email");
        // The window has passed: a fresh start (and a fresh count of five).
        let next = at(t0, 15 * MIN);
        for _ in 0..5 {
            let _ = begin(&t, "a@x.test", ip("10.0.0.3"), next)
                .await
                .expect("new window");
        }
        assert!(begin(&t, "a@x.test", ip("10.0.0.3"), next).await.is_err());
    }

    #[tokio::test]
    async fn a_success_clears_the_email_and_refunds_the_address() {
        let t = throttle(3, 4).await;
        let now = Utc::now();
        let _ = begin(&t, "a@x.test", ip("10.0.0.1"), now).await.unwrap();
        let _ = begin(&t, "a@x.test", ip("10.0.0.1"), now).await.unwrap();
        let ok = begin(&t, "a@x.test", ip("10.0.0.1"), now).await.unwrap();
        t.succeeded(ok).await.unwrap();
        // The email starts over: three more failures before the lock.
        for _ in 0..3 {
            let _ = begin(&t, "a@x.test", ip("10.0.0.2"), now).await.unwrap();
        }
        assert!(begin(&t, "a@x.test", ip("10.0.0.2"), now).await.is_err());
        // The address kept its two real failures: two more and it is locked.
        let _ = begin(&t, "b@x.test", ip("10.0.0.1"), now).await.unwrap();
        let _ = begin(&t, "c@x.test", ip("10.0.0.1"), now).await.unwrap();
        assert_eq!(
            begin(&t, "d@x.test", ip("10.0.0.1"), now)
                .await
                .unwrap_err(),
            15 * MIN
        );
        // A refusal for the address took its email charge back: d is not charged.
        let _ = begin(&t, "d@x.test", ip("10.0.0.9"), now).await.unwrap();
        let _ = begin(&t, "d@x.test", ip("10.0.0.9"), now).await.unwrap();
        let _ = begin(&t, "d@x.test", ip("10.0.0.9"), now).await.unwrap();
        assert!(begin(&t, "d@x.test", ip("10.0.0.9"), now).await.is_err());
    }

    #[tokio::test]
    async fn concurrent_attempts_are_counted_before_they_finish() {
        let t = throttle(2, 20).await;
        let now = Utc::now();
        // Two attempts in flight use up the email; a third is refused before either ends.
        let first = begin(&t, "a@x.test", None, now).await.unwrap();
        let _second = begin(&t, "a@x.test", None, now).await.unwrap();
        assert!(begin(&t, "a@x.test", None, now).await.is_err());
        // One of them succeeds: the email is open again.
        t.succeeded(first).await.unwrap();
        assert!(begin(&t, "a@x.test", None, now).await.is_ok());
    }

    #[tokio::test]
    async fn nodes_on_one_database_share_the_counts() {
        let settings = ThrottleSettings {
            per_email: Limit {
                max_failures: 4,
                window: 15 * MIN,
            },
            ..ThrottleSettings::default()
        };
        let store = store().await;
        let (a, b) = (
            LoginThrottle::new(settings, store.clone()),
            LoginThrottle::new(settings, store),
        );
        let now = Utc::now();
        for node in [&a, &b, &a, &b] {
            let _ = begin(node, "a@x.test", ip("10.0.0.1"), now).await.unwrap();
        }
        assert!(begin(&a, "a@x.test", None, now).await.is_err());
        assert!(begin(&b, "a@x.test", None, now).await.is_err());
    }

    #[tokio::test]
    async fn an_address_locks_across_emails_and_its_limit_is_separate() {
        let t = throttle(5, 20).await;
        let now = Utc::now();
        for i in 0..20 {
            let _ = begin(&t, &format!("user{i}@x.test"), ip("192.0.2.7"), now)
                .await
                .unwrap();
        }
        assert_eq!(
            begin(&t, "new@x.test", ip("192.0.2.7"), at(now, MIN))
                .await
                .unwrap_err(),
            14 * MIN
        );
        // Another address may still try those emails.
        let _ = begin(&t, "user0@x.test", ip("192.0.2.8"), at(now, MIN))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn ipv6_is_keyed_by_its_64_and_mapped_ipv4_by_the_ipv4() {
        let t = throttle(100, 2).await;
        let now = Utc::now();
        let _ = begin(&t, "a@x.test", ip("2001:db8:1:2::1"), now)
            .await
            .unwrap();
        let _ = begin(&t, "b@x.test", ip("2001:db8:1:2:ffff::9"), now)
            .await
            .unwrap();
        assert!(
            begin(&t, "c@x.test", ip("2001:db8:1:2::77"), now)
                .await
                .is_err()
        );
        let _ = begin(&t, "c@x.test", ip("2001:db8:1:3::1"), now)
            .await
            .unwrap();

        let _ = begin(&t, "a@x.test", ip("198.51.100.1"), now)
            .await
            .unwrap();
        let _ = begin(&t, "b@x.test", ip("::ffff:198.51.100.1"), now)
            .await
            .unwrap();
        assert!(
            begin(&t, "c@x.test", ip("198.51.100.1"), now)
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn zero_disables_a_limit() {
        let t = throttle(0, 0).await;
        let now = Utc::now();
        for _ in 0..100 {
            let _ = begin(&t, "a@x.test", ip("10.0.0.1"), now).await.unwrap();
        }
        assert_eq!(t.store.login_failure_keys().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn keys_whose_window_passed_are_deleted() {
        let t = throttle(5, 20).await;
        let t0 = Utc::now();
        for i in 0..50 {
            let _ = begin(&t, &format!("spray{i}@x.test"), None, t0)
                .await
                .unwrap();
        }
        assert_eq!(t.store.login_failure_keys().await.unwrap(), 50);
        let _ = begin(&t, "fresh@x.test", None, at(t0, 15 * MIN))
            .await
            .unwrap();
        assert_eq!(t.store.login_failure_keys().await.unwrap(), 1);
    }
}

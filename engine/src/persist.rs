//! Writes that must not be lost (the end of a call, its result deliveries) are retried
//! while the database does not answer (a timeout, a pool exhausted under load), for at
//! most [`PERSIST_FOR`]. What the store says about the data (a lost claim, a constraint)
//! is not retried.

use std::future::Future;
use std::time::Duration;

use callsmith_domain::store::StoreError;
use tokio::time::Instant;
use tracing::warn;

/// How long a write is retried.
pub const PERSIST_FOR: Duration = Duration::from_secs(60);

/// The wait before retry `attempt` (from 0): 50 ms, doubling, at most 5 s.
pub fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(50u64.saturating_mul(1u64 << attempt.min(16))).min(Duration::from_secs(5))
}

/// Runs `op` until it succeeds, fails for a reason other than the database not
/// answering, or [`PERSIST_FOR`] has passed; `what` names the write in the log.
pub async fn persist<T, F, Fut>(what: &str, mut op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let deadline = Instant::now() + PERSIST_FOR;
    let mut attempt = 0;
    loop {
        match op().await {
            Err(StoreError::Db(e)) if Instant::now() + backoff(attempt) < deadline => {
                warn!(error = %e, attempt, "{what}: the database did not answer; retrying");
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use callsmith_domain::store::sqlx;

    use super::*;

    fn timeout() -> StoreError {
        StoreError::Db(sqlx::Error::PoolTimedOut)
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(0), Duration::from_millis(50));
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(6), Duration::from_millis(3200));
        assert_eq!(backoff(7), Duration::from_secs(5));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_retried_until_the_database_answers() {
        let calls = AtomicU32::new(0);
        let t0 = Instant::now();
        let r = persist("test", || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                Err(timeout())
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert_eq!(t0.elapsed(), Duration::from_millis(50 + 100 + 200));
    }

    #[tokio::test(start_paused = true)]
    async fn a_database_that_never_answers_is_given_up_within_the_bound() {
        let t0 = Instant::now();
        let r: Result<(), _> = persist("test", || async { Err(timeout()) }).await;
        assert!(matches!(r, Err(StoreError::Db(_))));
        assert!(t0.elapsed() <= PERSIST_FOR, "{:?}", t0.elapsed());
        assert!(t0.elapsed() >= PERSIST_FOR - Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn what_the_store_says_about_the_data_is_not_retried() {
        let calls = AtomicU32::new(0);
        let r: Result<(), _> = persist("test", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(StoreError::NotFound)
        })
        .await;
        assert!(matches!(r, Err(StoreError::NotFound)));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}

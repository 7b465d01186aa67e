//! The share of test calls one account may have open: scenario test dispatches
//! (`POST /v1/communication/-/dispatch` with `scenario_sid`) and browser calls
//! (`POST /v1/communication/-/browser-call`) count from the request that creates them until
//! they end. Without a bound one account's test calls could take every live-call slot of
//! the nodes (`dialer.max_live_calls`) from every other account's calls; with it a request
//! over the share is refused at once (429 `too_many_test_calls`), before a call is stored
//! or placed.
//!
//! The count comes from the store
//! ([`crate::store::Store::communication_open_test_calls`]), so it covers the calls of
//! every node. Counting and storing the new call happen under [`TestCallGate`], so
//! concurrent requests of one account through this process cannot both take the last
//! place.

use tokio::sync::{Mutex, MutexGuard};

/// Test calls one account may have open by default (`dialer.max_test_calls_per_account`).
pub const DEFAULT_MAX_TEST_CALLS_PER_ACCOUNT: u32 = 10;

/// Seconds a refused caller is told to wait (`Retry-After`): test calls last a while, and
/// the place frees when one ends.
pub const RETRY_AFTER_SECS: u64 = 10;

/// Accounts hash onto this many locks (a bounded set, nothing to clean up).
const STRIPES: usize = 64;

/// Serializes the admission of one account's test calls in this process.
#[derive(Debug)]
pub struct TestCallGate {
    stripes: Box<[Mutex<()>]>,
}

impl Default for TestCallGate {
    fn default() -> Self {
        TestCallGate {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }
}

impl TestCallGate {
    /// Held from counting `account_sid`'s open test calls until the new call is stored.
    pub async fn lock(&self, account_sid: &str) -> MutexGuard<'_, ()> {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let h = BuildHasherDefault::<DefaultHasher>::default().hash_one(account_sid);
        self.stripes[(h % STRIPES as u64) as usize].lock().await
    }
}

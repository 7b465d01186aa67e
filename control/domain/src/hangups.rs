//! Hang-up requests for live calls: the engine registers each call it runs (from the
//! moment it starts dialling or answering until its end is written) and the API's
//! `POST /v1/communication/{id}/hangup` asks the call to end. The call ends itself: it
//! hangs up its leg (a CANCEL while ringing, a BYE once answered) and writes its end with
//! `end_reason` `hangup_requested`.
//!
//! The registry is per process: a request reaches the calls of the node that receives it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// Live calls by communication sid.
#[derive(Debug, Default)]
pub struct Hangups {
    /// (registration number, token) by communication sid.
    calls: Mutex<HashMap<String, (u64, CancellationToken)>>,
    next: AtomicU64,
}

/// A call's registration; dropping it removes the call from the registry.
#[derive(Debug)]
pub struct HangupHandle {
    registry: Arc<Hangups>,
    sid: String,
    number: u64,
    token: CancellationToken,
}

impl Hangups {
    /// Registers a live call.
    pub fn register(self: &Arc<Self>, communication_sid: &str) -> HangupHandle {
        let token = CancellationToken::new();
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.calls
            .lock()
            .insert(communication_sid.to_string(), (number, token.clone()));
        HangupHandle {
            registry: self.clone(),
            sid: communication_sid.to_string(),
            number,
            token,
        }
    }

    /// Asks the live call to hang up; false when no such call runs here.
    pub fn request(&self, communication_sid: &str) -> bool {
        match self.calls.lock().get(communication_sid) {
            Some((_, t)) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// Calls registered now.
    pub fn len(&self) -> usize {
        self.calls.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl HangupHandle {
    /// Cancelled when a hang-up was requested.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }
}

impl Drop for HangupHandle {
    fn drop(&mut self) {
        let mut calls = self.registry.calls.lock();
        // A later registration of the same sid (a retried dial) keeps its entry.
        if calls.get(&self.sid).is_some_and(|(n, _)| *n == self.number) {
            calls.remove(&self.sid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reaches_a_registered_call_until_it_ends() {
        let r = Arc::new(Hangups::default());
        assert!(!r.request("com_1"));
        let h = r.register("com_1");
        assert!(!h.token().is_cancelled());
        assert!(r.request("com_1"));
        assert!(h.token().is_cancelled());
        drop(h);
        assert!(r.is_empty());
        assert!(!r.request("com_1"));
    }
}

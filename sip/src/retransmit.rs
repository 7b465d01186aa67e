//! Counts of SIP retransmissions, as SIPp shows them: a message sent again identically
//! (a request's timer A/E retransmission, a response re-sent for a retransmitted request or
//! by timer G, an ACK re-sent for a retransmitted 2xx) and a message the peer sent again.
//!
//! The endpoint's inspector ([`crate::logging::MessageLog`]) hands every message sent and
//! received to [`Retransmissions`], which keeps a 64-bit hash of each for 64×T1 (the
//! longest a transaction retransmits) and counts the messages whose hash it already holds.

use std::collections::{HashSet, VecDeque};
use std::fmt::Write;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Messages sent or received again, since the stack started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetransmissionCounts {
    pub sent: u64,
    pub received: u64,
}

/// The retransmission counters of one stack.
#[derive(Debug)]
pub struct Retransmissions {
    window: Duration,
    hasher: RandomState,
    sent: Seen,
    received: Seen,
}

#[derive(Debug, Default)]
struct Seen {
    again: AtomicU64,
    recent: parking_lot::Mutex<Recent>,
}

#[derive(Debug, Default)]
struct Recent {
    hashes: HashSet<u64>,
    by_age: VecDeque<(Instant, u64)>,
}

/// Feeds a message's text into a hasher without building the string.
struct HashWriter<'a>(&'a mut dyn Hasher);

impl Write for HashWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

impl Seen {
    fn note(&self, hash: u64, now: Instant, window: Duration) {
        let mut r = self.recent.lock();
        while let Some(&(at, h)) = r.by_age.front() {
            if now.duration_since(at) < window {
                break;
            }
            r.by_age.pop_front();
            r.hashes.remove(&h);
        }
        if r.hashes.insert(hash) {
            r.by_age.push_back((now, hash));
        } else {
            self.again.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Retransmissions {
    /// Counters that look back `window` (64×T1) for an earlier copy of a message.
    pub fn new(window: Duration) -> Retransmissions {
        Retransmissions {
            window,
            hasher: RandomState::new(),
            sent: Seen::default(),
            received: Seen::default(),
        }
    }

    fn hash(&self, msg: &dyn std::fmt::Display) -> u64 {
        let mut h = self.hasher.build_hasher();
        let _ = write!(HashWriter(&mut h), "{msg}");
        h.finish()
    }

    /// A message the stack sent.
    pub fn sent(&self, msg: &dyn std::fmt::Display) {
        self.sent.note(self.hash(msg), Instant::now(), self.window);
    }

    /// A message the stack received.
    pub fn received(&self, msg: &dyn std::fmt::Display) {
        self.received
            .note(self.hash(msg), Instant::now(), self.window);
    }

    pub fn counts(&self) -> RetransmissionCounts {
        RetransmissionCounts {
            sent: self.sent.again.load(Ordering::Relaxed),
            received: self.received.again.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_again_within_the_window_is_a_retransmission() {
        let r = Retransmissions::new(Duration::from_secs(32));
        let invite =
            "INVITE sip:1@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK1\r\n\r\n";
        let other =
            "INVITE sip:1@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK2\r\n\r\n";
        r.sent(&invite);
        r.sent(&other);
        assert_eq!(r.counts(), RetransmissionCounts::default());
        r.sent(&invite);
        r.sent(&invite);
        r.received(&invite);
        assert_eq!(
            r.counts(),
            RetransmissionCounts {
                sent: 2,
                received: 0
            }
        );
        r.received(&invite);
        assert_eq!(r.counts().received, 1);
    }

    #[test]
    fn copies_older_than_the_window_are_forgotten() {
        let seen = Seen::default();
        let w = Duration::from_secs(32);
        let t0 = Instant::now();
        seen.note(7, t0, w);
        seen.note(7, t0 + Duration::from_secs(1), w);
        assert_eq!(seen.again.load(Ordering::Relaxed), 1);
        seen.note(7, t0 + Duration::from_secs(40), w);
        assert_eq!(seen.again.load(Ordering::Relaxed), 1, "a new message");
        assert_eq!(seen.recent.lock().by_age.len(), 1, "the old copy is gone");
    }
}

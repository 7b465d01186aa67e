//! Call progress written behind the calls: the path that answers or places a call never
//! waits on the database.
//!
//! A call hands its row writes ([`CallWrite`]: inbound row created, INVITE sent, answered,
//! ended, failed, released) to the journal, a bounded queue with ONE writer task. The
//! writer takes the first write, gathers what else comes within [`LINGER`] (up to
//! [`MAX_BATCH`]) and applies it all in one transaction, in queue order, so one call's writes land in the order it made them and a
//! busy node pays one commit for many calls. While the database does not answer, the batch
//! is retried ([`crate::persist`]); a batch the database refuses is applied write by
//! write, so one bad write does not take the others with it.
//!
//! The queue is bounded: [`Journal::record`] never waits and fails when the queue is full,
//! which is the node's signal that it takes no more new calls (inbound answers 503, the
//! dialer claims nothing) until the database catches up. The end of a call is queued with
//! [`Journal::commit`], which waits for room and for the write to be stored: a call's end
//! is never dropped, and the call's live-call guard is held until it is stored, so the
//! shutdown drain waits for it too.
//!
//! The renewal of this process's claim leases goes through the same writer
//! ([`Journal::renew`]), so one task writes the rows of live calls and no two of its
//! statements wait on each other's row locks.
//!
//! What a crash can lose: the writes queued and not yet committed (at most one batch
//! plus what queued behind it, milliseconds of calls). An inbound call whose row was not
//! yet stored leaves no row (its call died with the process); an outbound row keeps its
//! claim and is reconciled as `interrupted`, never redialled (see `store::communications`).

use callsmith_domain::Store;
use callsmith_domain::metrics::Metrics;
use callsmith_domain::store::StoreResult;
use callsmith_domain::store::communications::CallWrite;
use prometheus_client::metrics::{gauge::Gauge, histogram::Histogram};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};

use crate::persist::persist;

/// Writes applied in one transaction at most.
pub const MAX_BATCH: usize = 512;

/// How long the writer gathers writes after the first one before it commits. A commit
/// costs the same for one write as for many (a statement round trip each, but one
/// transaction and one WAL append of the pages they share), so under load a few ms of
/// gathering divides the cost of storing a call; an idle node commits a lone write after
/// this much delay, which no call waits on but its stored end.
pub const LINGER: std::time::Duration = std::time::Duration::from_millis(10);

/// What the writer is asked to do.
enum Entry {
    Write(CallWrite, Option<oneshot::Sender<StoreResult<bool>>>),
    /// Answered once everything queued before it is stored.
    Flush(oneshot::Sender<()>),
    /// Extend the lease of every row the claim token holds (see [`Journal::renew`]).
    Renew {
        token: String,
        until: chrono::DateTime<chrono::Utc>,
    },
}

/// The queue is full: the node is behind on its writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalFull;

/// The write-behind queue of call progress (see the module doc). Cheap to clone.
#[derive(Clone)]
pub struct Journal {
    tx: mpsc::Sender<Entry>,
}

/// The journal on /metrics.
#[derive(Clone, Debug)]
struct JournalMetrics {
    /// Writes queued behind the calls, as the writer last saw them.
    queued: Gauge,
    /// Writes per committed batch.
    batch: Histogram,
}

impl Journal {
    /// Starts the writer over `store` with room for `capacity` queued writes, reporting on
    /// `metrics`.
    pub fn start(store: Store, capacity: usize, metrics: &Metrics) -> Journal {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let m = JournalMetrics {
            queued: Gauge::default(),
            batch: Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0]),
        };
        let mut r = metrics.registry();
        r.register(
            "callsmith_call_writes_queued",
            "Call progress writes queued behind the calls (the write-behind journal)",
            m.queued.clone(),
        );
        r.register(
            "callsmith_call_write_batch",
            "Call progress writes committed per transaction",
            m.batch.clone(),
        );
        tokio::spawn(writer(store, rx, m));
        Journal { tx }
    }

    /// Queues a write without waiting; [`JournalFull`] when there is no room.
    pub fn record(&self, write: CallWrite) -> Result<(), JournalFull> {
        self.tx
            .try_send(Entry::Write(write, None))
            .map_err(|_| JournalFull)
    }

    /// Queues a write, waiting only for room (a call's writes after its admission: they
    /// stay in the call's order, and the queue is full only while the node refuses new
    /// calls).
    pub async fn queue(&self, write: CallWrite) {
        if self.tx.send(Entry::Write(write, None)).await.is_err() {
            warn!("the call progress writer has stopped; a write is dropped");
        }
    }

    /// Queues a write (waiting for room) and waits until it is stored; true when it changed
    /// its row (false: the claim was lost).
    pub async fn commit(&self, write: CallWrite) -> StoreResult<bool> {
        let (done, stored) = oneshot::channel();
        if self.tx.send(Entry::Write(write, Some(done))).await.is_err() {
            return Err(writer_gone());
        }
        stored.await.unwrap_or_else(|_| Err(writer_gone()))
    }

    /// Waits until every write queued before this call is stored (or given up on).
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.tx.send(Entry::Flush(done)).await.is_ok() {
            let _ = flushed.await;
        }
    }

    /// Queues the renewal of this process's leases (every row `token` holds, until
    /// `until`), waiting only for room. The writer applies it after the writes queued
    /// before it, on its own: the renewal and the call writes then never hold row locks at
    /// the same time (on PostgreSQL the two, locking rows in different orders, could
    /// deadlock and stall both for the server's deadlock timeout), and the dialer does
    /// not wait on the database for it.
    pub async fn renew(&self, token: &str, until: chrono::DateTime<chrono::Utc>) {
        let renew = Entry::Renew {
            token: token.to_string(),
            until,
        };
        if self.tx.send(renew).await.is_err() {
            warn!("the call progress writer has stopped; leases are not renewed");
        }
    }

    /// Writes that fit in the queue now.
    pub fn free(&self) -> usize {
        self.tx.capacity()
    }
}

fn writer_gone() -> callsmith_domain::store::StoreError {
    callsmith_domain::store::StoreError::Db(callsmith_domain::store::sqlx::Error::PoolClosed)
}

async fn writer(store: Store, mut rx: mpsc::Receiver<Entry>, m: JournalMetrics) {
    let mut batch: Vec<Entry> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        let until = tokio::time::Instant::now() + LINGER;
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(e) => batch.push(e),
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {
                    match tokio::time::timeout_at(until, rx.recv()).await {
                        Ok(Some(e)) => batch.push(e),
                        Ok(None) | Err(_) => break,
                    }
                }
            }
        }
        m.queued.set((batch.len() + rx.len()) as i64);
        m.batch.observe(batch.len() as f64);
        apply(&store, &mut batch).await;
    }
}

/// Applies a batch in one transaction and answers its waiters; falls back to one write at
/// a time when the database refuses the batch.
async fn apply(store: &Store, batch: &mut Vec<Entry>) {
    let mut writes = Vec::with_capacity(batch.len());
    let mut waiters = Vec::with_capacity(batch.len());
    let mut flushes = Vec::new();
    let mut renew = None;
    for entry in batch.drain(..) {
        match entry {
            Entry::Write(w, done) => {
                writes.push(w);
                waiters.push(done);
            }
            Entry::Flush(done) => flushes.push(done),
            // The latest renewal covers the earlier ones.
            Entry::Renew { token, until } => renew = Some((token, until)),
        }
    }
    let started = std::time::Instant::now();
    let outcome = persist("storing call progress", || {
        store.communications_apply(&writes)
    })
    .await;
    debug!(
        writes = writes.len(),
        ms = started.elapsed().as_secs_f64() * 1e3,
        "call progress stored"
    );
    let results: Vec<StoreResult<bool>> = match outcome {
        Ok(changed) => changed.into_iter().map(Ok).collect(),
        Err(e) => {
            warn!(error = %e, writes = writes.len(), "a batch of call progress was refused; storing it write by write");
            let mut one_by_one = Vec::with_capacity(writes.len());
            for w in &writes {
                let r = persist("storing call progress", || {
                    store.communications_apply(std::slice::from_ref(w))
                })
                .await
                .map(|changed| changed.first().copied().unwrap_or(false));
                if let Err(e) = &r {
                    warn!(communication = %w.sid(), error = %e, "a call's progress could not be stored");
                }
                one_by_one.push(r);
            }
            one_by_one
        }
    };
    let mut results = results.into_iter();
    for (w, done) in writes.iter().zip(waiters) {
        let r = results.next().unwrap_or(Ok(false));
        if let Ok(false) = r {
            debug!(communication = %w.sid(), "call progress not applied: the claim is no longer this node's");
        }
        if let Some(done) = done {
            let _ = done.send(r);
        }
    }
    if let Some((token, until)) = renew
        && let Err(e) = store.communication_renew(&token, until).await
    {
        warn!(error = %e, "renewing call leases failed");
    }
    // Everything queued before a flush was in this batch or an earlier one.
    for done in flushes {
        let _ = done.send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    /// The value of an unlabelled metric line `name value` in the text exposition.
    fn metric(m: &Metrics, name: &str) -> f64 {
        m.render()
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{name} not on /metrics"))
    }

    fn release(i: usize) -> CallWrite {
        CallWrite::Release {
            sid: format!("com_{i}"),
            token: "t".into(),
            due_at: None,
            at: Utc::now(),
        }
    }

    #[tokio::test]
    async fn writes_queued_together_are_stored_in_one_batch() {
        let store = Store::connect("sqlite::memory:", 1).await.unwrap();
        store.migrate().await.unwrap();
        let metrics = Metrics::new();
        let journal = Journal::start(store, 64, &metrics);
        // The first write wakes the writer; the others come while it gathers.
        for i in 0..20 {
            journal.record(release(i)).unwrap();
        }
        // No row has this claim, so the release changes nothing, and says so.
        assert!(!journal.commit(release(20)).await.unwrap());
        assert_eq!(metric(&metrics, "callsmith_call_write_batch_count"), 1.0);
        assert_eq!(metric(&metrics, "callsmith_call_write_batch_sum"), 21.0);
        journal.flush().await;
        assert_eq!(journal.free(), 64, "nothing left queued");
    }

    #[tokio::test]
    async fn the_writer_gathers_what_comes_within_the_linger() {
        let store = Store::connect("sqlite::memory:", 1).await.unwrap();
        store.migrate().await.unwrap();
        let metrics = Metrics::new();
        let journal = Journal::start(store, 64, &metrics);
        // Time stands still but for the sleeps while the writes come (the database
        // client's own timers need real time, so it runs again before anything is stored).
        tokio::time::pause();
        journal.record(release(0)).unwrap();
        tokio::time::sleep(LINGER / 2).await;
        journal.record(release(1)).unwrap();
        tokio::time::sleep(LINGER / 4).await;
        journal.record(release(2)).unwrap();
        tokio::time::resume();
        journal.flush().await;
        assert_eq!(metric(&metrics, "callsmith_call_write_batch_count"), 1.0);
        assert!(metric(&metrics, "callsmith_call_write_batch_sum") >= 3.0);
    }
}

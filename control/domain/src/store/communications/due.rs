//! Due communications announced to the dialers (PostgreSQL): a trigger notifies the
//! channel [`DUE_CHANNEL`] when a statement stores waiting rows that are due (migration
//! 0451), and each engine's listener wakes its dialer, which claims at once instead of at
//! its next poll. The poll stays: it finds what a notification missed (while the listener
//! reconnects) and rows that become due later.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::Notify;

use crate::store::{Pool, Store};

/// The PostgreSQL notification channel of due communications.
pub const DUE_CHANNEL: &str = "callsmith_communications_due";

impl Store {
    /// A signal notified (once for any number of notifications since the last wait) when
    /// another statement stored due communications, on any engine of the database; None
    /// on SQLite (one engine: its dialer polls). Its listener ends when the signal is
    /// dropped.
    pub fn communications_due_signal(&self) -> Option<Arc<Notify>> {
        let Pool::Postgres(pool) = &self.pool else {
            return None;
        };
        let signal = Arc::new(Notify::new());
        tokio::spawn(listen(pool.clone(), Arc::downgrade(&signal)));
        Some(signal)
    }
}

/// Listens on [`DUE_CHANNEL`], notifying `signal` on each notification and when it
/// (re)connects (what came while it was away is due too); reconnects after a pause.
async fn listen(pool: PgPool, signal: Weak<Notify>) {
    const RETRY: Duration = Duration::from_secs(1);
    const CHECK: Duration = Duration::from_secs(5);
    loop {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, "due communication listener: no connection; retrying");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(DUE_CHANNEL).await {
            tracing::debug!(error = %e, "due communication listener: LISTEN failed; retrying");
            tokio::time::sleep(RETRY).await;
            continue;
        }
        let mut woke = true;
        loop {
            let Some(s) = signal.upgrade() else { return };
            if woke {
                s.notify_one();
            }
            drop(s);
            woke = match tokio::time::timeout(CHECK, listener.try_recv()).await {
                // Nothing for a while: check the signal is still wanted, keep listening.
                Err(_) => false,
                Ok(Ok(Some(_))) => true,
                // The connection was lost: start over.
                Ok(Ok(None)) | Ok(Err(_)) => break,
            };
        }
    }
}

//! Reads served from memory on SQLite until a table they depend on changes: pages of the
//! user list, and the credential lookup behind every authenticated request.
//!
//! Why: on a 2-core machine each query costs a hand-off to the connection's worker thread
//! and back, and a page of 100 users about 0.2 ms of SQLite besides; that caps `GET
//! /v1/user` near 1,300 requests/s and puts a second query on the tail of every request.
//! Users, keys and sessions change rarely next to how often they are read.
//!
//! How staleness is ruled out. Each cache has a *generation* that moves after every
//! commit that changed a row of a table it depends on, through any connection of this
//! process:
//! - SQLite's update hook marks the connection with the caches a changed table belongs to
//!   (foreign-key cascades included);
//! - SQLite's WAL hook, which SQLite calls once a commit is in the log and the write lock
//!   is released, bumps the generations the connection was marked with.
//!
//! A reader notes the generation *before* its query and stores the result under it; a
//! result is served only while the generation is still the one it was stored under. A
//! commit that lands after the reader noted the generation bumps it, so that result is
//! never served; a reader that notes the bumped generation starts after the commit and
//! sees it. A rolled-back change leaves the mark set and costs one needless bump later.
//! Time-dependent judgement (a key's or session's expiry) stays with the caller, which
//! applies it to every request, cached or not.
//!
//! The hooks see writers in this process only. The embedded SQLite file belongs to one
//! callsmith process (PostgreSQL, which several can share, never caches).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use libsqlite3_sys::{SQLITE_OK, sqlite3, sqlite3_wal_checkpoint, sqlite3_wal_hook};
use parking_lot::Mutex;
use sqlx::sqlite::SqliteConnection;

use super::keys::AuthLookup;
use super::routing::InboundRoute;
use super::users::UserRecord;

/// Entries a cache keeps at most; when full, entries of older generations go first, then all.
const MAX_ENTRIES: usize = 1024;
/// WAL pages after which a commit checkpoints (SQLite's own default, which the WAL hook
/// installed here replaces).
const AUTOCHECKPOINT_PAGES: c_int = 1000;

/// Tables whose changes move the user pages' generation.
const USER_PAGE_TABLES: &[&str] = &["users"];
/// Tables an inbound route reads (`Store::inbound_route`): the number, its pool, the
/// agent, its scenario's versions, its account and tenant. Calls write `communications`
/// all the time; that table is not among them.
const ROUTE_TABLES: &[&str] = &[
    "numbers",
    "number_pools",
    "agents",
    "scenarios",
    "scenario_versions",
    "accounts",
    "tenants",
];
/// Tables the credential lookups read (`Store::lookup_*`).
const CREDENTIAL_TABLES: &[&str] = &[
    "superuser_tokens",
    "api_keys",
    "sessions",
    "users",
    "accounts",
    "tenants",
];

/// Which page of which account's users, in which order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct UserPageKey {
    pub account_sid: String,
    pub show_deleted: bool,
    pub order: String,
    pub limit: i64,
    pub offset: i64,
}

/// A page of users and how many match in all.
pub(crate) type UserPage = (Arc<[UserRecord]>, i64);

/// Results read at a generation, served while it holds.
pub(crate) struct ReadCache<K, V> {
    generation: Arc<AtomicU64>,
    entries: Mutex<HashMap<K, (u64, V)>>,
}

impl<K, V> Default for ReadCache<K, V> {
    fn default() -> Self {
        ReadCache {
            generation: Arc::default(),
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> ReadCache<K, V> {
    /// Serves nothing read so far (a change the hooks cannot see was announced).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The generation to note before reading from the database.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The result, if it was read at the current generation.
    pub fn get(&self, key: &K) -> Option<V> {
        let current = self.generation();
        let entries = self.entries.lock();
        match entries.get(key) {
            Some((g, v)) if *g == current => Some(v.clone()),
            _ => None,
        }
    }

    /// Keeps a result read after noting `generation`.
    pub fn put(&self, key: K, generation: u64, value: V) {
        let current = self.generation();
        if generation != current {
            return;
        }
        let mut entries = self.entries.lock();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            entries.retain(|_, (g, _)| *g == current);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (generation, value));
    }

    /// The value for `key`: from memory when it was read at the current generation, else
    /// from `read`. A value `keep` accepts is stored under the generation noted *before*
    /// `read` ran, so one that a commit overtook mid-read is never served.
    pub async fn read_through<E>(
        &self,
        key: K,
        keep: impl FnOnce(&V) -> bool,
        read: impl std::future::Future<Output = Result<V, E>>,
    ) -> Result<V, E> {
        if let Some(v) = self.get(&key) {
            return Ok(v);
        }
        let noted = self.generation();
        let v = read.await?;
        if keep(&v) {
            self.put(key, noted, v.clone());
        }
        Ok(v)
    }
}

/// The store's read caches and the hooks that keep them honest.
#[derive(Default)]
pub(crate) struct Caches {
    pub user_pages: ReadCache<UserPageKey, UserPage>,
    /// Credential lookups by (token kind, secret hash). Only found credentials are kept,
    /// so unknown tokens cannot fill it.
    pub credentials: ReadCache<(u8, String), Option<AuthLookup>>,
    /// Inbound routes by called number. Only served numbers are kept, so calls to unknown
    /// numbers cannot fill it.
    pub inbound_routes: ReadCache<String, Option<Arc<InboundRoute>>>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("user_pages", &self.user_pages.entries.lock().len())
            .field("credentials", &self.credentials.entries.lock().len())
            .field("inbound_routes", &self.inbound_routes.entries.lock().len())
            .finish()
    }
}

impl Caches {
    /// Installs the hooks that move the generations on a new pool connection.
    pub async fn watch(&self, conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        let state = Arc::new(HookState {
            changed: AtomicU8::new(0),
            generations: [
                self.user_pages.generation.clone(),
                self.credentials.generation.clone(),
                self.inbound_routes.generation.clone(),
            ],
        });
        let mut handle = conn.lock_handle().await?;
        let marks = state.clone();
        // The closure is owned by the connection and freed when it closes; it also keeps
        // `state` alive for the WAL hook below, which SQLite calls only on this connection.
        handle.set_update_hook(move |change| {
            let mut bits = 0;
            if USER_PAGE_TABLES.contains(&change.table) {
                bits |= 1;
            }
            if CREDENTIAL_TABLES.contains(&change.table) {
                bits |= 2;
            }
            if ROUTE_TABLES.contains(&change.table) {
                bits |= 4;
            }
            if bits != 0 {
                marks.changed.fetch_or(bits, Ordering::SeqCst);
            }
        });
        // SAFETY: the handle is locked out of the worker thread while we call; the
        // argument points into `state`, which the update hook above keeps alive for as
        // long as the connection is open (and no hook runs after it closes).
        unsafe {
            sqlite3_wal_hook(
                handle.as_raw_handle().as_ptr(),
                Some(on_commit),
                Arc::as_ptr(&state) as *mut c_void,
            );
        }
        Ok(())
    }
}

struct HookState {
    /// Bit i: a table of cache i changed since the connection's last commit.
    changed: AtomicU8,
    generations: [Arc<AtomicU64>; 3],
}

/// SQLite's WAL hook: runs on the connection's thread after each commit.
unsafe extern "C" fn on_commit(
    arg: *mut c_void,
    db: *mut sqlite3,
    database: *const c_char,
    wal_pages: c_int,
) -> c_int {
    // SAFETY: `arg` is the `HookState` installed by `Caches::watch`, alive while the
    // connection is open.
    let state = unsafe { &*(arg as *const HookState) };
    let changed = state.changed.swap(0, Ordering::SeqCst);
    for (i, generation) in state.generations.iter().enumerate() {
        if changed & (1 << i) != 0 {
            generation.fetch_add(1, Ordering::SeqCst);
        }
    }
    if wal_pages >= AUTOCHECKPOINT_PAGES {
        // SAFETY: `db` and `database` are the ones SQLite passed to this hook; a passive
        // checkpoint from the WAL hook is what SQLite's default hook does.
        unsafe { sqlite3_wal_checkpoint(db, database) };
    }
    SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(offset: i64) -> UserPageKey {
        UserPageKey {
            account_sid: "acc_1".into(),
            show_deleted: false,
            order: "created_at ASC, sid ASC".into(),
            limit: 100,
            offset,
        }
    }

    fn page(total: i64) -> UserPage {
        (Arc::from(Vec::new()), total)
    }

    #[test]
    fn a_page_is_served_only_at_the_generation_it_was_read_at() {
        let c: ReadCache<UserPageKey, UserPage> = ReadCache::default();
        let g = c.generation();
        c.put(key(0), g, page(7));
        assert_eq!(c.get(&key(0)).map(|p| p.1), Some(7));
        assert!(c.get(&key(100)).is_none(), "another page was never read");
        c.generation.fetch_add(1, Ordering::SeqCst);
        assert!(c.get(&key(0)).is_none(), "a commit changed users since");
    }

    #[test]
    fn a_page_read_across_a_commit_is_not_kept() {
        let c: ReadCache<UserPageKey, UserPage> = ReadCache::default();
        let noted = c.generation();
        c.generation.fetch_add(1, Ordering::SeqCst); // the commit lands mid-read
        c.put(key(0), noted, page(1));
        assert!(c.get(&key(0)).is_none());
    }

    #[tokio::test]
    async fn read_through_keeps_only_what_no_commit_overtook() {
        let c: ReadCache<UserPageKey, UserPage> = ReadCache::default();
        let read = |total| async move { Ok::<_, ()>(page(total)) };
        // A commit lands while the page is read: served once, not kept.
        let overtaken = async {
            c.generation.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ()>(page(1))
        };
        assert_eq!(
            c.read_through(key(0), |_| true, overtaken).await.unwrap().1,
            1
        );
        assert!(c.get(&key(0)).is_none());
        // A clean read is kept and then served without reading.
        assert_eq!(
            c.read_through(key(0), |_| true, read(2)).await.unwrap().1,
            2
        );
        assert_eq!(
            c.read_through(key(0), |_| true, read(3)).await.unwrap().1,
            2
        );
        // What `keep` refuses is returned but not kept; an error is passed on.
        assert_eq!(
            c.read_through(key(5), |_| false, read(4)).await.unwrap().1,
            4
        );
        assert!(c.get(&key(5)).is_none());
        assert!(
            c.read_through(key(6), |_| true, async { Err(()) })
                .await
                .is_err()
        );
    }

    #[test]
    fn a_full_cache_makes_room() {
        let c: ReadCache<UserPageKey, UserPage> = ReadCache::default();
        for i in 0..MAX_ENTRIES as i64 {
            c.put(key(i), 0, page(i));
        }
        c.put(key(-1), 0, page(-1));
        assert!(c.entries.lock().len() <= MAX_ENTRIES);
        assert_eq!(c.get(&key(-1)).map(|p| p.1), Some(-1));
    }
}

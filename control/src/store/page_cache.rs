//! Pages of the user list served from memory on SQLite.
//!
//! Why: `GET /v1/user` is the control plane's heaviest read. A page of 100 users costs
//! SQLite about 0.2 ms to build, and sqlx then hands the result from the connection's
//! worker thread to the request task; on a 2-core machine that caps the endpoint near
//! 1,300 requests/s, while the users of an account change rarely. So the last pages read
//! are kept, and a page is served from memory while no user row has changed since it was
//! read.
//!
//! How staleness is ruled out. The users table has a *generation* that moves after every
//! commit that changed a users row, through any connection of this process:
//! - SQLite's update hook marks the connection when a statement inserts, updates or
//!   deletes a users row (foreign-key cascades included);
//! - SQLite's WAL hook, which SQLite calls once a commit is in the log and the write lock
//!   is released, bumps the generation if the connection was marked.
//!
//! A reader notes the generation *before* its query and stores the page under it; a page
//! is served only while the generation is still the one it was stored under. A commit
//! that lands after the reader noted the generation bumps it, so that page is never
//! served; a reader that notes the bumped generation starts after the commit and sees
//! it. A rolled-back change leaves the mark set and costs one needless bump later.
//!
//! The hooks see writers in this process only. The embedded SQLite file belongs to one
//! callsmith process (PostgreSQL, which several can share, never caches pages).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use libsqlite3_sys::{SQLITE_OK, sqlite3, sqlite3_wal_checkpoint, sqlite3_wal_hook};
use parking_lot::Mutex;
use sqlx::sqlite::SqliteConnection;

use super::users::UserRecord;

/// Pages kept at most; when full, pages of older generations go first, then all.
const MAX_PAGES: usize = 1024;
/// WAL pages after which a commit checkpoints (SQLite's own default, which the WAL hook
/// installed here replaces).
const AUTOCHECKPOINT_PAGES: c_int = 1000;
/// The table whose changes move the generation.
const WATCHED_TABLE: &str = "users";

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

#[derive(Default)]
pub(crate) struct UserPages {
    generation: Arc<AtomicU64>,
    pages: Mutex<HashMap<UserPageKey, (u64, UserPage)>>,
}

impl UserPages {
    /// The generation to note before reading a page from the database.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The page, if it was read at the current generation.
    pub fn get(&self, key: &UserPageKey) -> Option<UserPage> {
        let current = self.generation();
        let pages = self.pages.lock();
        match pages.get(key) {
            Some((g, page)) if *g == current => Some(page.clone()),
            _ => None,
        }
    }

    /// Keeps a page read after noting `generation`.
    pub fn put(&self, key: UserPageKey, generation: u64, page: UserPage) {
        let current = self.generation();
        if generation != current {
            return;
        }
        let mut pages = self.pages.lock();
        if pages.len() >= MAX_PAGES && !pages.contains_key(&key) {
            pages.retain(|_, (g, _)| *g == current);
            if pages.len() >= MAX_PAGES {
                pages.clear();
            }
        }
        pages.insert(key, (generation, page));
    }

    /// Installs the hooks that move the generation on a new pool connection.
    pub async fn watch(&self, conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        let state = Arc::new(HookState {
            changed: AtomicBool::new(false),
            generation: self.generation.clone(),
        });
        let mut handle = conn.lock_handle().await?;
        let marks = state.clone();
        // The closure is owned by the connection and freed when it closes; it also keeps
        // `state` alive for the WAL hook below, which SQLite calls only on this connection.
        handle.set_update_hook(move |change| {
            if change.table == WATCHED_TABLE {
                marks.changed.store(true, Ordering::SeqCst);
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

impl std::fmt::Debug for UserPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserPages")
            .field("generation", &self.generation())
            .field("pages", &self.pages.lock().len())
            .finish()
    }
}

struct HookState {
    changed: AtomicBool,
    generation: Arc<AtomicU64>,
}

/// SQLite's WAL hook: runs on the connection's thread after each commit.
unsafe extern "C" fn on_commit(
    arg: *mut c_void,
    db: *mut sqlite3,
    database: *const c_char,
    wal_pages: c_int,
) -> c_int {
    // SAFETY: `arg` is the `HookState` installed by `UserPages::watch`, alive while the
    // connection is open.
    let state = unsafe { &*(arg as *const HookState) };
    if state.changed.swap(false, Ordering::SeqCst) {
        state.generation.fetch_add(1, Ordering::SeqCst);
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
        let c = UserPages::default();
        let g = c.generation();
        c.put(key(0), g, page(7));
        assert_eq!(c.get(&key(0)).map(|p| p.1), Some(7));
        assert!(c.get(&key(100)).is_none(), "another page was never read");
        c.generation.fetch_add(1, Ordering::SeqCst);
        assert!(c.get(&key(0)).is_none(), "a commit changed users since");
    }

    #[test]
    fn a_page_read_across_a_commit_is_not_kept() {
        let c = UserPages::default();
        let noted = c.generation();
        c.generation.fetch_add(1, Ordering::SeqCst); // the commit lands mid-read
        c.put(key(0), noted, page(1));
        assert!(c.get(&key(0)).is_none());
    }

    #[test]
    fn a_full_cache_makes_room() {
        let c = UserPages::default();
        for i in 0..MAX_PAGES as i64 {
            c.put(key(i), 0, page(i));
        }
        c.put(key(-1), 0, page(-1));
        assert!(c.pages.lock().len() <= MAX_PAGES);
        assert_eq!(c.get(&key(-1)).map(|p| p.1), Some(-1));
    }
}

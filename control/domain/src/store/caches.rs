//! Reads served from memory on SQLite until a table they depend on changes: pages of the
//! user list, the credential lookup behind every authenticated request, inbound routes,
//! and the audio rows every call playing a recorded prompt looks up.
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

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use libsqlite3_sys::{SQLITE_OK, sqlite3, sqlite3_wal_checkpoint, sqlite3_wal_hook};
use sqlx::sqlite::SqliteConnection;

use super::audio::AudioRecord;
use super::keys::AuthLookup;
use super::read_cache::ReadCache;
use super::routing::InboundRoute;
use super::users::{UserPage, UserPageKey};

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

/// Tables an audio file's row lives in (`Store::audio_get`).
const AUDIO_TABLES: &[&str] = &["audio_files"];

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
    /// Audio rows by sid, read by every call that plays a recorded prompt. Only found
    /// rows are kept, so lookups of unknown ids cannot fill it.
    pub audio: ReadCache<String, Option<AudioRecord>>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("user_pages", &self.user_pages.len())
            .field("credentials", &self.credentials.len())
            .field("inbound_routes", &self.inbound_routes.len())
            .field("audio", &self.audio.len())
            .finish()
    }
}

impl Caches {
    /// Installs the hooks that move the generations on a new pool connection.
    pub async fn watch(&self, conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        let state = Arc::new(HookState {
            changed: AtomicU8::new(0),
            generations: [
                self.user_pages.generation_counter(),
                self.credentials.generation_counter(),
                self.inbound_routes.generation_counter(),
                self.audio.generation_counter(),
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
            if AUDIO_TABLES.contains(&change.table) {
                bits |= 8;
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
    generations: [Arc<AtomicU64>; 4],
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

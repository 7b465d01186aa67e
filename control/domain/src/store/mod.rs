//! The store: one handle over either an embedded SQLite file or a PostgreSQL server.
//!
//! Callers see typed methods (`Store::tenant_create`, `Store::user_list`, …); the SQL
//! behind them is written once in the dialect both backends accept (`$N` parameters,
//! partial unique indexes, JSON-as-text lists), and whatever only one backend understands
//! stays inside this module. Each method body is expanded once per backend by [`on_db!`],
//! so both arms are concretely typed and no generic `Database` bounds leak out.
//!
//! Migrations are embedded at build time (see `build.rs`) from `migrations/sqlite` and
//! `migrations/postgres`, which must hold the same `NNNN_description.sql` set.

use std::{path::Path, str::FromStr, time::Duration};

use chrono::{DateTime, Utc};
pub use sqlx;
use sqlx::{
    postgres::{PgConnectOptions, PgPool, PgPoolOptions},
    sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
    },
};

mod accounts;
mod agents;
mod audio;
mod caches;
mod classifiers;
pub mod communications;
mod dictionaries;
mod do_not_call;
mod filter;
mod flags;
mod fold;
mod idempotency;
mod keys;
mod legacy;
mod legacy_flow;
mod login_failures;
pub mod nodes;
mod numbers;
mod pools;
mod profile;
mod provision;
mod read_cache;
mod routing;
mod scenarios;
mod sms;
mod strategies;
mod tenants;
mod trunks;
mod users;

pub use accounts::{AccountPatch, AccountRecord, NewAccount};
pub use agents::{AgentConfig, AgentFilter, AgentRecord, AgentRef};
pub use audio::{AudioRecord, NewAudio};
pub use classifiers::{ClassifierVersionRecord, NewClassifierVersion, TrainingOutcome};
pub use communications::{CommunicationRecord, NewCommunication};
pub use dictionaries::{DictionaryPatch, DictionaryRecord};
pub use do_not_call::{DoNotCallRecord, SOURCE_OPT_OUT};
pub use idempotency::{IdempotencyRecord, Reservation};
pub use numbers::{
    NUMBER_ACTIVE_ELSEWHERE, NewNumber, NumberFilter, NumberPatch, NumberRecord, routing_key,
};
pub use pools::PoolRecord;
pub use scenarios::{ScenarioRecord, ScenarioVersionRecord, VersionAxis};
pub use sms::{SmsProviderConfig, SmsProviderRecord};
pub use strategies::StrategyRecord;
pub mod results;
pub use flags::FlagRuleRecord;
pub use keys::{ApiKeyRecord, AuthLookup, SessionLookup, TokenPurpose};
pub use legacy::{
    CampaignField, CampaignFilter, CampaignOrder, LegacyCampaignRecord, LegacyProfileRecord,
};
pub use legacy_flow::{
    AttemptCall, ContactsAdded, LegacyAttemptRecord, LegacyContactRecord, NewAttempt,
    NewAttemptCall, NewContact, Redial,
};
pub use profile::ProfileRecord;
pub use provision::create_postgres_database;
pub use results::ResultDeliveryRecord;
pub use routing::InboundRoute;
pub use tenants::{TenantPurger, TenantRecord};
pub use trunks::TrunkRecord;
pub use users::{NewPassword, NewUser, UserPatch, UserRecord};

mod generated {
    include!(concat!(env!("OUT_DIR"), "/migrations.rs"));
}

/// Every embedded migration: (version, description, sqlite sql, postgres sql).
pub fn migrations() -> &'static [(i64, &'static str, &'static str, &'static str)] {
    generated::MIGRATIONS
}

/// Which database engine a [`Store`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The connection pool of one backend. Public so a later store module in another file of
/// this crate can match on it through [`on_db!`]; outside the store use [`Store`] methods.
#[derive(Clone, Debug)]
pub enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A cheap-to-clone handle on the database.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) pool: Pool,
    /// Reads kept until a table they depend on changes (SQLite only; see `caches`).
    pub(crate) caches: Option<std::sync::Arc<caches::Caches>>,
    /// Inbound routes kept on PostgreSQL while a notification listener reports every
    /// change of the tables they read (see `routing`).
    pub(crate) pg_routes: Option<std::sync::Arc<routing::PgRouteCache>>,
    pub(crate) purgers: std::sync::Arc<parking_lot::RwLock<Vec<std::sync::Arc<dyn TenantPurger>>>>,
}

/// Errors of the store. `Unique` is a uniqueness violation (the caller knows which
/// constraint its statement can hit and maps it to the right API error).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("unique constraint violated")]
    Unique,
    #[error("{0}")]
    Conflict(String),
    #[error("tenant purge failed: {0}")]
    PurgeFailed(String),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migration error: {0}")]
    Migrate(String),
}

impl StoreError {
    /// Maps a unique violation to [`StoreError::Unique`], everything else to `Db`.
    pub fn from_write(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::Unique,
            _ => StoreError::Db(e),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Runs `$body` with `$p` bound to the concrete pool of the active backend. The body is
/// expanded once per backend, so it must evaluate to the same type in both arms.
#[macro_export]
#[doc(hidden)]
macro_rules! on_db {
    ($store:expr, $p:ident => $body:expr) => {
        match &$store.pool {
            $crate::store::Pool::Sqlite($p) => $body,
            $crate::store::Pool::Postgres($p) => $body,
        }
    };
}
pub(crate) use on_db;

/// Declares a row struct and implements `sqlx::FromRow` for both backends' rows by
/// column name (sqlx's derive macros are not built, to keep compile times down).
#[macro_export]
#[doc(hidden)]
macro_rules! store_row {
    ($(#[$m:meta])* $vis:vis struct $name:ident { $($(#[$fm:meta])* $fvis:vis $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        $vis struct $name { $($(#[$fm])* $fvis $f: $t),* }
        impl<'r> ::sqlx::FromRow<'r, ::sqlx::sqlite::SqliteRow> for $name {
            fn from_row(row: &'r ::sqlx::sqlite::SqliteRow) -> Result<Self, ::sqlx::Error> {
                use ::sqlx::Row;
                Ok(Self { $($f: row.try_get(stringify!($f))?),* })
            }
        }
        impl<'r> ::sqlx::FromRow<'r, ::sqlx::postgres::PgRow> for $name {
            fn from_row(row: &'r ::sqlx::postgres::PgRow) -> Result<Self, ::sqlx::Error> {
                use ::sqlx::Row;
                Ok(Self { $($f: row.try_get(stringify!($f))?),* })
            }
        }
        impl $crate::store::FromPrefixed<::sqlx::sqlite::SqliteRow> for $name {
            fn from_prefixed(row: &::sqlx::sqlite::SqliteRow, prefix: &str) -> Result<Self, ::sqlx::Error> {
                use ::sqlx::Row;
                Ok(Self { $($f: row.try_get(format!("{prefix}{}", stringify!($f)).as_str())?),* })
            }
        }
        impl $crate::store::FromPrefixed<::sqlx::postgres::PgRow> for $name {
            fn from_prefixed(row: &::sqlx::postgres::PgRow, prefix: &str) -> Result<Self, ::sqlx::Error> {
                use ::sqlx::Row;
                Ok(Self { $($f: row.try_get(format!("{prefix}{}", stringify!($f)).as_str())?),* })
            }
        }
    };
}
pub(crate) use store_row;

/// Decodes a record from the columns `{prefix}{field}` of a row, so one joined query
/// can return several records (see [`Store::profile_get`]). Implemented by `store_row!`.
pub(crate) trait FromPrefixed<R>: Sized {
    fn from_prefixed(row: &R, prefix: &str) -> Result<Self, sqlx::Error>;
}

/// `t.a AS {prefix}a, t.b AS {prefix}b, …` for a comma-separated column list.
pub(crate) fn prefixed_columns(table: &str, columns: &str, prefix: &str) -> String {
    columns
        .split(',')
        .map(|c| {
            let c = c.trim();
            format!("{table}.{c} AS {prefix}{c}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The current time, truncated to microseconds so SQLite and PostgreSQL hold and return
/// identical values.
pub fn now() -> DateTime<Utc> {
    let n = Utc::now();
    DateTime::from_timestamp_micros(n.timestamp_micros()).unwrap_or(n)
}

pub fn to_json_list(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

pub fn from_json_list(s: &str) -> Vec<String> {
    serde_json::from_str(s).unwrap_or_default()
}

/// A pooled PostgreSQL connection idle at least this long is pinged before reuse.
const IDLE_PING_AFTER: Duration = Duration::from_secs(30);

/// Each SQLite connection's page cache: 512 KiB (SQLite's default is 2 MiB). A connection
/// throws its whole cache away when it sees that another one has written, which under calls
/// is every few milliseconds, so a larger cache mostly holds pages that are about to be
/// dropped; a page it misses is read from the operating system's file cache.
const SQLITE_CACHE_SIZE: &str = "-512";

/// The connection pool size for `url` when none is configured.
///
/// SQLite: 4. It commits one write transaction at a time, and every connection keeps its own
/// page cache (512 KiB, `SQLITE_CACHE_SIZE`), prepared statements and worker thread, and
/// reloads its cache after other connections' writes; more connections than cores serve no
/// faster and hold more memory. PostgreSQL: 16, as its connections spend most of their time
/// waiting on the server.
pub fn default_pool_size(url: &str) -> u32 {
    if is_postgres(url) { 16 } else { 4 }
}

/// A transaction that writes. SQLite's default transaction is deferred: it reads under a
/// snapshot and takes the write lock only at its first write, and when another connection
/// committed in between (the engine's own background writers: leases, the dialer), that
/// write fails at once with `SQLITE_BUSY` (a stale snapshot is not retried under the busy
/// timeout), which the API would answer 500. `BEGIN IMMEDIATE` takes the write lock
/// first, waiting up to the busy timeout. PostgreSQL's `BEGIN` has no such failure.
pub(crate) trait BeginWrite {
    type Db: sqlx::Database;
    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, Self::Db>, sqlx::Error>;
}

impl BeginWrite for SqlitePool {
    type Db = sqlx::Sqlite;
    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
        self.begin_with("BEGIN IMMEDIATE").await
    }
}

impl BeginWrite for sqlx::PgPool {
    type Db = sqlx::Postgres;
    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
        self.begin().await
    }
}

fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl Store {
    /// Connects to `url`: `postgres://…`/`postgresql://…` selects PostgreSQL; `sqlite:…`
    /// or a bare file path selects SQLite (created if missing, WAL, foreign keys on, the
    /// `search_fold` function of text search defined on every connection).
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Store> {
        let mut caches = None;
        let pool = if is_postgres(url) {
            let opts = PgConnectOptions::from_str(url)?;
            Pool::Postgres(
                PgPoolOptions::new()
                    .max_connections(max_connections.max(1))
                    .acquire_timeout(Duration::from_secs(10))
                    // sqlx pings every connection it hands out by default: one extra
                    // network round trip per query. Ping only a connection that sat idle
                    // long enough for the server or a middlebox to have dropped it.
                    .test_before_acquire(false)
                    .before_acquire(|conn, meta| {
                        Box::pin(async move {
                            if meta.idle_for >= IDLE_PING_AFTER {
                                sqlx::Connection::ping(conn).await?;
                            }
                            Ok(true)
                        })
                    })
                    .connect_with(opts)
                    .await?,
            )
        } else {
            let opts = if url.starts_with("sqlite:") {
                SqliteConnectOptions::from_str(url)?
            } else {
                SqliteConnectOptions::new().filename(Path::new(url))
            };
            let opts = opts
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                .busy_timeout(Duration::from_secs(10))
                .pragma("cache_size", SQLITE_CACHE_SIZE);
            let kept = std::sync::Arc::new(caches::Caches::default());
            caches = Some(kept.clone());
            Pool::Sqlite(
                SqlitePoolOptions::new()
                    .max_connections(max_connections.max(1))
                    .acquire_timeout(Duration::from_secs(10))
                    // A file connection cannot be dropped by a peer; the default ping
                    // would cost a thread hand-off to the connection's worker per query.
                    .test_before_acquire(false)
                    .after_connect(move |conn, _| {
                        let kept = kept.clone();
                        Box::pin(async move {
                            fold::register(conn).await?;
                            kept.watch(conn).await
                        })
                    })
                    .connect_with(opts)
                    .await?,
            )
        };
        // The caches are invalidated from SQLite's WAL hook, which only a WAL database
        // calls (an in-memory database cannot be one): anything else reads through.
        if let Pool::Sqlite(p) = &pool {
            let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
                .fetch_one(p)
                .await?;
            if !mode.eq_ignore_ascii_case("wal") {
                caches = None;
            }
        }
        let pg_routes = match &pool {
            Pool::Postgres(p) => Some(routing::PgRouteCache::start(p.clone())),
            Pool::Sqlite(_) => None,
        };
        Ok(Store {
            pool,
            caches,
            pg_routes,
            purgers: Default::default(),
        })
    }

    /// This store with every read going to the database (the read caches off), for
    /// measuring what a cache miss costs.
    pub fn without_read_cache(mut self) -> Store {
        self.caches = None;
        self.pg_routes = None;
        self
    }

    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
        }
    }

    /// The underlying pool, for store modules added by later work.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Applies every embedded migration not yet recorded in `callsmith_migrations`, each
    /// in its own transaction. On PostgreSQL an advisory lock serialises concurrent
    /// migrators. Returns the versions applied.
    pub async fn migrate(&self) -> StoreResult<Vec<i64>> {
        const CREATE: &str = "CREATE TABLE IF NOT EXISTS callsmith_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)";
        let mut applied_now = Vec::new();
        match &self.pool {
            Pool::Sqlite(p) => {
                sqlx::query(CREATE).execute(p).await?;
                let done: Vec<i64> = sqlx::query_scalar("SELECT version FROM callsmith_migrations")
                    .fetch_all(p)
                    .await?;
                for (v, d, sql, _) in migrations() {
                    if done.contains(v) {
                        continue;
                    }
                    let mut tx = p.begin_write().await?;
                    sqlx::raw_sql(sqlx::AssertSqlSafe(*sql))
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| StoreError::Migrate(format!("{v:04}_{d}: {e}")))?;
                    sqlx::query("INSERT INTO callsmith_migrations (version, description, applied_at) VALUES ($1, $2, $3)")
                        .bind(v)
                        .bind(d)
                        .bind(now().to_rfc3339())
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    applied_now.push(*v);
                }
            }
            Pool::Postgres(p) => {
                let mut conn = p.acquire().await?;
                sqlx::query("SELECT pg_advisory_lock(7261001)")
                    .execute(&mut *conn)
                    .await?;
                let result: StoreResult<()> = async {
                    sqlx::query(CREATE).execute(&mut *conn).await?;
                    let done: Vec<i64> =
                        sqlx::query_scalar("SELECT version FROM callsmith_migrations").fetch_all(&mut *conn).await?;
                    for (v, d, _, sql) in migrations() {
                        if done.contains(v) {
                            continue;
                        }
                        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                        sqlx::raw_sql(sqlx::AssertSqlSafe(*sql))
                            .execute(&mut *tx)
                            .await
                            .map_err(|e| StoreError::Migrate(format!("{v:04}_{d}: {e}")))?;
                        sqlx::query("INSERT INTO callsmith_migrations (version, description, applied_at) VALUES ($1, $2, $3)")
                            .bind(v)
                            .bind(d)
                            .bind(now().to_rfc3339())
                            .execute(&mut *tx)
                            .await?;
                        tx.commit().await?;
                        applied_now.push(*v);
                    }
                    Ok(())
                }
                .await;
                sqlx::query("SELECT pg_advisory_unlock(7261001)")
                    .execute(&mut *conn)
                    .await?;
                result?;
            }
        }
        Ok(applied_now)
    }

    /// Whether the database answers (readiness probe).
    pub async fn ping(&self) -> bool {
        on_db!(self, p => sqlx::query("SELECT 1").execute(p).await.is_ok())
    }

    pub async fn close(&self) {
        on_db!(self, p => p.close().await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write transaction that reads first (a count before a delete) still writes when
    /// another connection committed after its read; SQLite's deferred transaction fails
    /// there at once with "database is locked", which the API answered 500.
    #[tokio::test]
    async fn a_write_transaction_that_reads_first_survives_a_commit_in_between() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(dir.path().join("w.db").to_str().unwrap(), 4)
            .await
            .unwrap();
        let Pool::Sqlite(p) = &store.pool else {
            panic!("a file is SQLite")
        };
        sqlx::query("CREATE TABLE w (x INTEGER)")
            .execute(p)
            .await
            .unwrap();
        // Deferred: the snapshot of the read is stale once the other connection commits.
        let mut tx = p.begin().await.unwrap();
        let _: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM w")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        sqlx::query("INSERT INTO w VALUES (1)")
            .execute(p)
            .await
            .unwrap();
        let deferred = sqlx::query("INSERT INTO w VALUES (2)")
            .execute(&mut *tx)
            .await;
        assert!(
            deferred.is_err(),
            "a deferred transaction's write fails here"
        );
        drop(tx);
        // Immediate: the other connection waits for the write lock instead.
        let mut tx = p.begin_write().await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM w")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        let other = {
            let p = p.clone();
            tokio::spawn(async move { sqlx::query("INSERT INTO w VALUES (3)").execute(&p).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        sqlx::query("INSERT INTO w VALUES (4)")
            .execute(&mut *tx)
            .await
            .expect("the write transaction writes");
        tx.commit().await.unwrap();
        other
            .await
            .unwrap()
            .expect("the other connection waited its turn");
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM w")
            .fetch_one(p)
            .await
            .unwrap();
        assert_eq!((n, rows), (1, 3));
    }

    #[tokio::test]
    async fn only_a_wal_database_keeps_reads_in_memory() {
        // An in-memory database has no WAL, so no hook would tell the caches of a change.
        let memory = Store::connect("sqlite::memory:", 1).await.unwrap();
        assert!(memory.caches.is_none());
        let dir = tempfile::tempdir().unwrap();
        let file = Store::connect(dir.path().join("t.db").to_str().unwrap(), 1)
            .await
            .unwrap();
        assert!(file.caches.is_some());
        assert!(file.without_read_cache().caches.is_none());
    }

    #[test]
    fn the_default_pool_is_small_for_sqlite() {
        assert_eq!(default_pool_size("sqlite:///tmp/x.db"), 4);
        assert_eq!(default_pool_size("/var/lib/callsmith/callsmith.db"), 4);
        assert_eq!(default_pool_size("postgres://u@127.0.0.1/db"), 16);
        assert_eq!(default_pool_size("postgresql://u@127.0.0.1/db"), 16);
    }

    #[tokio::test]
    async fn every_sqlite_connection_keeps_a_small_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(dir.path().join("t.db").to_str().unwrap(), 2)
            .await
            .unwrap();
        let Pool::Sqlite(p) = store.pool() else {
            unreachable!()
        };
        // Two connections held at once, so both of the pool's are asked.
        let mut a = p.acquire().await.unwrap();
        let mut b = p.acquire().await.unwrap();
        for conn in [&mut a, &mut b] {
            let kib: i64 = sqlx::query_scalar("PRAGMA cache_size")
                .fetch_one(&mut **conn)
                .await
                .unwrap();
            assert_eq!(kib.to_string(), SQLITE_CACHE_SIZE);
        }
    }
}

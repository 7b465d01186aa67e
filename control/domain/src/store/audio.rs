//! Audio files: one row per stored object (the bytes live in object storage, see
//! [`crate::objects`]).

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, now, on_db, store_row};

store_row! {
    #[derive(Debug, Clone)]
    pub struct AudioRecord {
        pub sid: String,
        pub tenant_sid: String,
        pub account_sid: String,
        // Object path in storage (`audio/<account_sid>/<sid>.wav`).
        pub object_path: String,
        // `local` or `s3`, as stored at upload time.
        pub provider: String,
        // Canonical storage URI at upload time.
        pub url: String,
        pub content_type: String,
        // The client filename (provenance only).
        pub original_filename: String,
        pub size_bytes: i64,
        pub created_at: DateTime<Utc>,
    }
}

/// Fields of a new audio row.
#[derive(Debug, Clone)]
pub struct NewAudio<'a> {
    pub sid: &'a str,
    pub tenant_sid: &'a str,
    pub account_sid: &'a str,
    pub object_path: &'a str,
    pub provider: &'a str,
    pub url: &'a str,
    pub content_type: &'a str,
    pub original_filename: &'a str,
    pub size_bytes: i64,
}

const COLS: &str = "sid, tenant_sid, account_sid, object_path, provider, url, content_type, original_filename, size_bytes, created_at";

impl Store {
    pub async fn audio_create(&self, a: &NewAudio<'_>) -> StoreResult<AudioRecord> {
        on_db!(self, p => sqlx::query("INSERT INTO audio_files (sid, tenant_sid, account_sid, object_path, provider, url, content_type, original_filename, size_bytes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
            .bind(a.sid).bind(a.tenant_sid).bind(a.account_sid).bind(a.object_path).bind(a.provider).bind(a.url)
            .bind(a.content_type).bind(a.original_filename).bind(a.size_bytes).bind(now())
            .execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.audio_get(a.sid).await?.ok_or(StoreError::NotFound)
    }

    /// An audio row by sid, whatever its account (callers check scope). On SQLite a found
    /// row is served from memory until `audio_files` changes (see `caches`).
    pub async fn audio_get(&self, sid: &str) -> StoreResult<Option<AudioRecord>> {
        let read = async {
            let sql = format!("SELECT {COLS} FROM audio_files WHERE sid = $1");
            Ok(
                on_db!(self, p => sqlx::query_as::<_, AudioRecord>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?,
            )
        };
        match &self.caches {
            Some(caches) => {
                caches
                    .audio
                    .read_through(sid.to_string(), Option::is_some, read)
                    .await
            }
            None => read.await,
        }
    }

    /// A page of an account's audio files, oldest first, with the total.
    pub async fn audio_list(
        &self,
        account_sid: &str,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<AudioRecord>, i64)> {
        let sql = format!(
            "SELECT {COLS} FROM audio_files WHERE account_sid = $1 ORDER BY created_at ASC, sid ASC LIMIT $2 OFFSET $3"
        );
        let rows = on_db!(self, p => sqlx::query_as::<_, AudioRecord>(sqlx::AssertSqlSafe(sql)).bind(account_sid).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM audio_files WHERE account_sid = $1").bind(account_sid).fetch_one(p).await)?;
        Ok((rows, total))
    }

    /// Object paths of every audio file of an account (for purging storage).
    pub async fn audio_paths_of_account(&self, account_sid: &str) -> StoreResult<Vec<String>> {
        Ok(
            on_db!(self, p => sqlx::query_scalar("SELECT object_path FROM audio_files WHERE account_sid = $1").bind(account_sid).fetch_all(p).await)?,
        )
    }

    pub async fn audio_delete(&self, sid: &str) -> StoreResult<()> {
        let n = on_db!(self, p => sqlx::query("DELETE FROM audio_files WHERE sid = $1").bind(sid).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            Err(StoreError::NotFound)
        } else {
            Ok(())
        }
    }
}

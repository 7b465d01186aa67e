//! STT dictionaries: global presets (`account_sid` NULL) and account-owned ones. A
//! name is unique per owner scope and language (`owner_key` is the account sid or '',
//! `language_key` the lower-cased tag), enforced by a unique index on both backends.

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, from_json_list, now, on_db, store_row, to_json_list};

store_row! {
    #[derive(Debug, Clone)]
    pub struct DictionaryRow {
        pub sid: String,
        pub account_sid: Option<String>,
        pub name: String,
        pub language: String,
        pub description: String,
        pub tokens: String,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
    }
}

/// A dictionary as callers see it.
#[derive(Debug, Clone)]
pub struct DictionaryRecord {
    pub sid: String,
    /// None for a global preset.
    pub account_sid: Option<String>,
    pub name: String,
    pub language: String,
    pub description: String,
    pub tokens: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<DictionaryRow> for DictionaryRecord {
    fn from(r: DictionaryRow) -> Self {
        DictionaryRecord {
            sid: r.sid,
            account_sid: r.account_sid,
            name: r.name,
            language: r.language,
            description: r.description,
            tokens: from_json_list(&r.tokens),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Changes to a dictionary (None keeps the value).
#[derive(Debug, Clone, Default)]
pub struct DictionaryPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub tokens: Option<Vec<String>>,
}

const COLS: &str = "sid, account_sid, name, language, description, tokens, created_at, updated_at";

impl Store {
    /// `Unique` when the owner scope already has the name in this language.
    pub async fn dictionary_create(
        &self,
        sid: &str,
        account_sid: Option<&str>,
        name: &str,
        language: &str,
        description: &str,
        tokens: &[String],
    ) -> StoreResult<DictionaryRecord> {
        let t = now();
        on_db!(self, p => sqlx::query("INSERT INTO stt_dictionaries (sid, account_sid, owner_key, name, language, language_key, description, tokens, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)")
            .bind(sid).bind(account_sid).bind(account_sid.unwrap_or("")).bind(name).bind(language)
            .bind(language.to_ascii_lowercase()).bind(description).bind(to_json_list(tokens)).bind(t)
            .execute(p).await.map(|_| ()))
        .map_err(StoreError::from_write)?;
        self.dictionary_get(sid).await?.ok_or(StoreError::NotFound)
    }

    pub async fn dictionary_get(&self, sid: &str) -> StoreResult<Option<DictionaryRecord>> {
        let sql = format!("SELECT {COLS} FROM stt_dictionaries WHERE sid = $1");
        let row = on_db!(self, p => sqlx::query_as::<_, DictionaryRow>(sqlx::AssertSqlSafe(sql)).bind(sid).fetch_optional(p).await)?;
        Ok(row.map(Into::into))
    }

    /// The dictionary `sid` as `account_sid` may use it (a call's recognition hints): its
    /// own, or a global preset. Another account's dictionary is None, as an unknown one:
    /// the ownership check is in the query, the one place a call resolves a dictionary.
    pub async fn dictionary_for_account(
        &self,
        account_sid: &str,
        sid: &str,
    ) -> StoreResult<Option<DictionaryRecord>> {
        let sql = format!(
            "SELECT {COLS} FROM stt_dictionaries WHERE sid = $1 AND (owner_key = '' OR owner_key = $2)"
        );
        let row = on_db!(self, p => sqlx::query_as::<_, DictionaryRow>(sqlx::AssertSqlSafe(sql)).bind(sid).bind(account_sid).fetch_optional(p).await)?;
        Ok(row.map(Into::into))
    }

    /// Whether a dictionary other than `except_sid` of the owner scope (None: global
    /// presets) has `name` in `language`.
    pub async fn dictionary_name_taken(
        &self,
        account_sid: Option<&str>,
        name: &str,
        language: &str,
        except_sid: &str,
    ) -> StoreResult<bool> {
        let n: i64 = on_db!(self, p => sqlx::query_scalar("SELECT COUNT(*) FROM stt_dictionaries WHERE owner_key = $1 AND name = $2 AND language_key = $3 AND sid <> $4")
            .bind(account_sid.unwrap_or("")).bind(name).bind(language.to_ascii_lowercase()).bind(except_sid).fetch_one(p).await)?;
        Ok(n > 0)
    }

    /// A page of dictionaries, oldest first: the account's own plus global presets
    /// (`account_sid` Some), or global presets only (None). `language` filters by tag
    /// (case-insensitive).
    pub async fn dictionary_list(
        &self,
        account_sid: Option<&str>,
        language: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<DictionaryRecord>, i64)> {
        let filter = "(owner_key = '' OR owner_key = $1) AND ($2 = '' OR language_key = $2)";
        let sql = format!(
            "SELECT {COLS} FROM stt_dictionaries WHERE {filter} ORDER BY created_at ASC, sid ASC LIMIT $3 OFFSET $4"
        );
        let count = format!("SELECT COUNT(*) FROM stt_dictionaries WHERE {filter}");
        let owner = account_sid.unwrap_or("");
        let lang = language.unwrap_or("").to_ascii_lowercase();
        let rows = on_db!(self, p => sqlx::query_as::<_, DictionaryRow>(sqlx::AssertSqlSafe(sql)).bind(owner).bind(&lang).bind(limit).bind(offset).fetch_all(p).await)?;
        let total: i64 = on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(count)).bind(owner).bind(&lang).fetch_one(p).await)?;
        Ok((rows.into_iter().map(Into::into).collect(), total))
    }

    /// Applies a patch; `Unique` when a new name clashes in the owner scope.
    pub async fn dictionary_update(
        &self,
        sid: &str,
        patch: &DictionaryPatch,
    ) -> StoreResult<DictionaryRecord> {
        let cur = self
            .dictionary_get(sid)
            .await?
            .ok_or(StoreError::NotFound)?;
        let name = patch.name.clone().unwrap_or(cur.name);
        let description = patch.description.clone().unwrap_or(cur.description);
        let tokens = patch.tokens.clone().unwrap_or(cur.tokens);
        let n = on_db!(self, p => sqlx::query("UPDATE stt_dictionaries SET name = $2, description = $3, tokens = $4, updated_at = $5 WHERE sid = $1")
            .bind(sid).bind(&name).bind(&description).bind(to_json_list(&tokens)).bind(now())
            .execute(p).await.map(|r| r.rows_affected()))
        .map_err(StoreError::from_write)?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        self.dictionary_get(sid).await?.ok_or(StoreError::NotFound)
    }

    pub async fn dictionary_delete(&self, sid: &str) -> StoreResult<()> {
        let n = on_db!(self, p => sqlx::query("DELETE FROM stt_dictionaries WHERE sid = $1").bind(sid).execute(p).await.map(|r| r.rows_affected()))?;
        if n == 0 {
            Err(StoreError::NotFound)
        } else {
            Ok(())
        }
    }
}

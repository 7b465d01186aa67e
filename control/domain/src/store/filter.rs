//! List filters: a WHERE clause over text binds, built from optional filters, and the
//! page + count queries that run it. Numbers, agents and legacy campaigns share it, so the
//! placeholder numbering, the LIKE escaping and the case folding of search live in one
//! place.

use sqlx::{FromRow, postgres::PgRow, sqlite::SqliteRow};

use super::{Pool, Store, StoreError, StoreResult, on_db};

/// `%term%` for LIKE with `\` escaping the wildcards in `term`, case-folded
/// ([`super::fold`]) to compare with `search_fold(column)`.
pub(crate) fn like_pattern(term: &str) -> String {
    let mut out = String::from("%");
    for c in super::fold::fold(term).chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// A WHERE clause whose `$n` placeholders are numbered in the order values are added.
pub(crate) struct Where {
    cond: String,
    binds: Vec<String>,
}

impl Where {
    /// Starts with `column = $1`.
    pub fn new(column: &str, value: &str) -> Where {
        Where {
            cond: format!("{column} = $1"),
            binds: vec![value.to_string()],
        }
    }

    /// `AND column = $n` when `value` is set.
    pub fn eq(&mut self, column: &str, value: Option<&String>) {
        if let Some(v) = value {
            self.binds.push(v.clone());
            self.cond
                .push_str(&format!(" AND {column} = ${}", self.binds.len()));
        }
    }

    /// `AND condition` (a fixed condition without binds).
    pub fn and(&mut self, condition: &str) {
        self.cond.push_str(" AND ");
        self.cond.push_str(condition);
    }

    /// `AND (search_fold(c1) LIKE $n OR …)`: a substring search over `columns`,
    /// case-insensitive for every script ([`super::fold`]), when `term` is non-empty and
    /// there is a column to search.
    pub fn search(&mut self, term: Option<&str>, columns: &[&str]) {
        let Some(term) = term.filter(|t| !t.is_empty()) else {
            return;
        };
        if columns.is_empty() {
            return;
        }
        self.binds.push(like_pattern(term));
        let n = self.binds.len();
        let ors: Vec<String> = columns
            .iter()
            .map(|c| format!("search_fold({c}) LIKE ${n} ESCAPE '\\'"))
            .collect();
        self.cond.push_str(&format!(" AND ({})", ors.join(" OR ")));
    }

    /// One page: `{select} WHERE … ORDER BY {order} LIMIT … OFFSET …`.
    pub async fn page<R>(
        &self,
        store: &Store,
        select: &str,
        order: &str,
        limit: i64,
        offset: i64,
    ) -> StoreResult<Vec<R>>
    where
        R: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin,
    {
        let sql = format!(
            "{select} WHERE {} ORDER BY {order} LIMIT ${} OFFSET ${}",
            self.cond,
            self.binds.len() + 1,
            self.binds.len() + 2
        );
        Ok(on_db!(store, p => {
            let mut q = sqlx::query_as::<_, R>(sqlx::AssertSqlSafe(sql.clone()));
            for b in &self.binds {
                q = q.bind(b);
            }
            q.bind(limit).bind(offset).fetch_all(p).await
        })?)
    }

    /// One page of `columns` (plain column names) from `from` and the number of rows
    /// matching in all, for rows that also deserialize from JSON; `order` may name only
    /// those columns. On SQLite both come back in one row: the page as a JSON array built
    /// by `json_group_array`, the total from a scalar subquery. sqlx hands every SQLite
    /// row (and every statement) from the connection's worker thread to the task on its
    /// own, and for a page of 100 rows those hand-offs cost more than the query.
    /// PostgreSQL streams rows over one socket and takes the plain page and count.
    pub async fn page_packed<R>(
        &self,
        store: &Store,
        columns: &str,
        from: &str,
        order: &str,
        limit: i64,
        offset: i64,
    ) -> StoreResult<(Vec<R>, i64)>
    where
        R: for<'r> FromRow<'r, SqliteRow>
            + for<'r> FromRow<'r, PgRow>
            + serde::de::DeserializeOwned
            + Send
            + Unpin,
    {
        let Pool::Sqlite(pool) = &store.pool else {
            let select = format!("SELECT {columns} FROM {from}");
            let rows = self.page(store, &select, order, limit, offset).await?;
            return Ok((rows, self.count(store, from).await?));
        };
        let object: Vec<String> = columns
            .split(',')
            .map(|c| format!("'{0}', {0}", c.trim()))
            .collect();
        let sql = format!(
            "SELECT json_group_array(json_object({}) ORDER BY {order}), \
             (SELECT COUNT(*) FROM {from} WHERE {cond}) FROM \
             (SELECT {columns} FROM {from} WHERE {cond} ORDER BY {order} LIMIT ${} OFFSET ${})",
            object.join(", "),
            self.binds.len() + 1,
            self.binds.len() + 2,
            cond = self.cond,
        );
        let mut q = sqlx::query_as::<_, (String, i64)>(sqlx::AssertSqlSafe(sql));
        for b in &self.binds {
            q = q.bind(b);
        }
        let (packed, total) = q.bind(limit).bind(offset).fetch_one(pool).await?;
        let rows = serde_json::from_str(&packed)
            .map_err(|e| StoreError::Db(sqlx::Error::Decode(Box::new(e))))?;
        Ok((rows, total))
    }

    /// `SELECT COUNT(*) FROM {from} WHERE …`.
    pub async fn count(&self, store: &Store, from: &str) -> StoreResult<i64> {
        let sql = format!("SELECT COUNT(*) FROM {from} WHERE {}", self.cond);
        Ok(on_db!(store, p => {
            let mut q = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.clone()));
            for b in &self.binds {
                q = q.bind(b);
            }
            q.fetch_one(p).await
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_the_values_added() {
        let mut w = Where::new("account_sid", "acc_1");
        w.eq("status", Some(&"active".to_string()));
        w.eq("pool_sid", None);
        w.and("archive_time IS NULL");
        w.search(Some("50%"), &["name", "identifier"]);
        w.search(Some(""), &["name"]);
        assert_eq!(
            w.cond,
            "account_sid = $1 AND status = $2 AND archive_time IS NULL AND \
             (search_fold(name) LIKE $3 ESCAPE '\\' OR search_fold(identifier) LIKE $3 ESCAPE '\\')"
        );
        assert_eq!(w.binds, ["acc_1", "active", "%50\\%%"]);
    }
}

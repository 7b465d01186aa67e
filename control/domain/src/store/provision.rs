//! Provisioning of scratch PostgreSQL databases (tests and benchmarks). PostgreSQL-only
//! SQL, so it lives inside the store module.

use sqlx::Connection;

use super::{StoreError, StoreResult};

/// Creates a fresh, empty database named `<prefix><unix time>_<pid>_<random>` through
/// `admin_url` (a role with CREATEDB) and returns its URL. Databases with the same prefix
/// older than two hours are dropped first (best effort), so aborted runs do not pile up.
pub async fn create_postgres_database(admin_url: &str, prefix: &str) -> StoreResult<String> {
    let mut conn = sqlx::PgConnection::connect(admin_url).await?;
    let now = chrono::Utc::now().timestamp();
    let pattern = format!("{}%", prefix.replace('_', "\\_"));
    let stale: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE $1")
            .bind(&pattern)
            .fetch_all(&mut conn)
            .await
            .unwrap_or_default();
    for name in stale {
        let ts = name
            .strip_prefix(prefix)
            .and_then(|r| r.split('_').next())
            .and_then(|t| t.parse::<i64>().ok());
        if ts.is_some_and(|t| now - t > 7200) && is_identifier(&name) {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
            )))
            .execute(&mut conn)
            .await;
        }
    }
    let name = format!(
        "{prefix}{now}_{}_{}",
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    if !is_identifier(&name) {
        return Err(StoreError::Conflict(format!(
            "invalid database name {name:?}"
        )));
    }
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut conn)
        .await?;
    let _ = conn.close().await;
    let mut url =
        url::Url::parse(admin_url).map_err(|e| StoreError::Conflict(format!("admin URL: {e}")))?;
    url.set_path(&format!("/{name}"));
    Ok(url.to_string())
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() < 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl super::Store {
    /// For every table with a `tenant_sid` or `account_sid` column (found through the
    /// catalog, so tables added by later migrations are included), the number of rows
    /// belonging to `tenant_sid` or to one of `account_sids`. A completed hard purge
    /// leaves every count at zero; tests use this to prove new tables cascade.
    pub async fn subtree_row_counts(
        &self,
        tenant_sid: &str,
        account_sids: &[String],
    ) -> StoreResult<Vec<(String, i64)>> {
        let columns: Vec<(String, String)> = match &self.pool {
            super::Pool::Sqlite(p) => {
                sqlx::query_as(
                    "SELECT m.name, c.name FROM sqlite_master m JOIN pragma_table_info(m.name) c \
                     WHERE m.type = 'table' AND c.name IN ('tenant_sid', 'account_sid') ORDER BY m.name, c.name",
                )
                .fetch_all(p)
                .await?
            }
            super::Pool::Postgres(p) => {
                sqlx::query_as(
                    "SELECT table_name::text, column_name::text FROM information_schema.columns \
                     WHERE table_schema = current_schema() AND column_name IN ('tenant_sid', 'account_sid') ORDER BY 1, 2",
                )
                .fetch_all(p)
                .await?
            }
        };
        // One count per table: by tenant_sid where the table has it (every subtree row
        // carries it), otherwise by account_sid.
        let mut tables: Vec<(String, bool)> = Vec::new();
        for (table, column) in columns {
            if !is_identifier(&table) {
                continue;
            }
            match tables.iter_mut().find(|(t, _)| *t == table) {
                Some((_, has_tenant)) => *has_tenant |= column == "tenant_sid",
                None => tables.push((table, column == "tenant_sid")),
            }
        }
        let mut out: Vec<(String, i64)> = Vec::new();
        for (table, has_tenant) in tables {
            let (column, owners): (&str, Vec<&str>) = if has_tenant {
                ("tenant_sid", vec![tenant_sid])
            } else {
                (
                    "account_sid",
                    account_sids.iter().map(String::as_str).collect(),
                )
            };
            let mut n = 0i64;
            for owner in owners {
                let sql = format!("SELECT COUNT(*) FROM {table} WHERE {column} = $1");
                let c: i64 = super::on_db!(self, p => sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(owner).fetch_one(p).await)?;
                n += c;
            }
            out.push((table, n));
        }
        Ok(out)
    }
}

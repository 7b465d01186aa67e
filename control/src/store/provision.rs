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
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE $1").bind(&pattern).fetch_all(&mut conn).await.unwrap_or_default();
    for name in stale {
        let ts = name.strip_prefix(prefix).and_then(|r| r.split('_').next()).and_then(|t| t.parse::<i64>().ok());
        if ts.is_some_and(|t| now - t > 7200) && is_identifier(&name) {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))).execute(&mut conn).await;
        }
    }
    let name = format!("{prefix}{now}_{}_{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..8]);
    if !is_identifier(&name) {
        return Err(StoreError::Conflict(format!("invalid database name {name:?}")));
    }
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\""))).execute(&mut conn).await?;
    let _ = conn.close().await;
    let mut url = url::Url::parse(admin_url).map_err(|e| StoreError::Conflict(format!("admin URL: {e}")))?;
    url.set_path(&format!("/{name}"));
    Ok(url.to_string())
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.len() < 63 && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

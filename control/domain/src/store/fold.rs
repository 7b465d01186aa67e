//! Case folding for text search, the same on both backends.
//!
//! A search compares `search_fold(column) LIKE pattern`, the pattern folded by [`fold`].
//! SQLite's own `LOWER()` and `LIKE` fold ASCII letters only, so "öst" would not find
//! "Zürich Öst"; each SQLite connection of the pool therefore gets `search_fold` as an
//! application-defined function running [`fold`] ([`register`]). On PostgreSQL the
//! function is SQL (migration `0330_search_fold`): ICU's root-locale lowercase when the
//! server has ICU, which does not depend on the database's `LC_CTYPE`, else `lower()`.
//!
//! Folding is Unicode lowercasing with the final sigma `ς` folded to `σ` (a word's last
//! sigma lowercases to `ς`, so the two must compare equal for "ΟΔΟΣ" to be found by
//! "οδοσ" and "Οδός" alike).

use std::{
    borrow::Cow,
    ffi::{c_int, c_void},
};

use libsqlite3_sys::{
    SQLITE_DETERMINISTIC, SQLITE_INNOCUOUS, SQLITE_NULL, SQLITE_OK, SQLITE_TRANSIENT, SQLITE_UTF8,
    sqlite3_context, sqlite3_create_function_v2, sqlite3_result_error_nomem, sqlite3_result_null,
    sqlite3_result_text64, sqlite3_value, sqlite3_value_bytes, sqlite3_value_text,
    sqlite3_value_type,
};
use sqlx::sqlite::SqliteConnection;

/// `s` folded for a case-insensitive comparison: lowercase, final sigma as `σ`.
pub(crate) fn fold(s: &str) -> Cow<'_, str> {
    if !s.bytes().any(|b| b.is_ascii_uppercase() || !b.is_ascii()) {
        return Cow::Borrowed(s);
    }
    let lower = s.to_lowercase();
    if lower.contains('ς') {
        Cow::Owned(lower.replace('ς', "σ"))
    } else {
        Cow::Owned(lower)
    }
}

/// Defines `search_fold(text)` on a SQLite connection.
pub(crate) async fn register(conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    let mut handle = conn.lock_handle().await?;
    // SAFETY: the handle is locked out of the worker thread while we call; the function
    // keeps no state (no user data, no destructor).
    let rc = unsafe {
        sqlite3_create_function_v2(
            handle.as_raw_handle().as_ptr(),
            c"search_fold".as_ptr(),
            1,
            SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
            std::ptr::null_mut::<c_void>(),
            Some(search_fold),
            None,
            None,
            None,
        )
    };
    if rc == SQLITE_OK {
        Ok(())
    } else {
        Err(sqlx::Error::Configuration(
            format!("defining search_fold on a SQLite connection: error code {rc}").into(),
        ))
    }
}

/// `search_fold(x)`: NULL for NULL, else [`fold`] of `x` as text.
unsafe extern "C" fn search_fold(
    ctx: *mut sqlite3_context,
    argc: c_int,
    argv: *mut *mut sqlite3_value,
) {
    debug_assert_eq!(argc, 1);
    // SAFETY: SQLite calls with the one argument the function was registered with, valid
    // for the duration of the call; the text pointer is read before the byte count, as
    // SQLite's documentation asks, and holds that many bytes.
    unsafe {
        let value = *argv;
        if sqlite3_value_type(value) == SQLITE_NULL {
            sqlite3_result_null(ctx);
            return;
        }
        let text = sqlite3_value_text(value);
        if text.is_null() {
            sqlite3_result_error_nomem(ctx);
            return;
        }
        let len = usize::try_from(sqlite3_value_bytes(value)).unwrap_or(0);
        let raw = std::slice::from_raw_parts(text, len);
        let text = String::from_utf8_lossy(raw);
        let folded = fold(&text);
        sqlite3_result_text64(
            ctx,
            folded.as_ptr().cast(),
            folded.len() as u64,
            SQLITE_TRANSIENT(),
            SQLITE_UTF8 as u8,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_beyond_ascii() {
        assert_eq!(fold("Zürich ÖST"), "zürich öst");
        assert_eq!(fold("ÉCOLE"), "école");
        assert_eq!(fold("МОСКВА"), "москва");
        assert_eq!(fold("ΟΔΟΣ"), "οδοσ");
        assert_eq!(fold("οδός"), "οδόσ");
        assert!(matches!(fold("plain 42"), Cow::Borrowed(_)));
    }

    #[tokio::test]
    async fn sqlite_folds_like_rust() {
        let store = super::super::Store::connect("sqlite::memory:", 1)
            .await
            .unwrap();
        let super::super::Pool::Sqlite(pool) = &store.pool else {
            unreachable!()
        };
        for s in ["Zürich ÖST", "ΟΔΟΣ", "МОСКВА", "ÉCOLE", "", "a\u{130}b"] {
            let folded: String = sqlx::query_scalar("SELECT search_fold($1)")
                .bind(s)
                .fetch_one(pool)
                .await
                .unwrap();
            assert_eq!(folded, fold(s), "{s:?}");
        }
        let null: Option<String> = sqlx::query_scalar("SELECT search_fold(NULL)")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(null, None);
        let number: String = sqlx::query_scalar("SELECT search_fold(42)")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(number, "42");
    }
}

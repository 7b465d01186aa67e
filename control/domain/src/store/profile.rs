//! The caller's profile (GET /v1/profile) in one round trip: the user, its account and
//! the account tenant's flag rules from a single joined query.

use std::sync::LazyLock;

use super::{
    AccountRecord, FlagRuleRecord, FromPrefixed, Store, StoreResult, UserRecord, accounts,
    flags::FlagRow, on_db, prefixed_columns, users,
};

/// A user with its account and the rules of the account's tenant.
#[derive(Debug, Clone)]
pub struct ProfileRecord {
    pub user: UserRecord,
    pub account: AccountRecord,
    /// The tenant's stored rules, by name (absent flags evaluate as default rules).
    pub flag_rules: Vec<FlagRuleRecord>,
}

/// One row per stored rule of the tenant (one row with null `f_*` columns when it has
/// none), each carrying the user (`u_*`) and account (`a_*`) columns.
static SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {}, {}, t.name AS a_tenant_name, {} FROM users u \
         JOIN accounts a ON a.sid = u.account_sid JOIN tenants t ON t.sid = a.tenant_sid \
         LEFT JOIN feature_flag_rules f ON f.tenant_sid = a.tenant_sid \
         WHERE u.sid = $1 ORDER BY f.name",
        prefixed_columns("u", users::COLS, "u_"),
        prefixed_columns("a", accounts::COLS, "a_"),
        prefixed_columns(
            "f",
            "tenant_sid, name, account_sids, countries, regions, enabled, invert",
            "f_"
        ),
    )
});

impl Store {
    /// The profile of a user (soft-deleted users and accounts included: the caller's
    /// session check decides who may see it); None when the user does not exist.
    pub async fn profile_get(&self, user_sid: &str) -> StoreResult<Option<ProfileRecord>> {
        Ok(on_db!(self, p => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(SQL.as_str())).bind(user_sid).fetch_all(p).await?;
            let mut profile: Option<ProfileRecord> = None;
            for row in &rows {
                use sqlx::Row;
                let profile = match &mut profile {
                    Some(p) => p,
                    None => profile.insert(ProfileRecord {
                        user: UserRecord::from_prefixed(row, "u_")?,
                        account: AccountRecord::from_prefixed(row, "a_")?,
                        flag_rules: Vec::new(),
                    }),
                };
                if row.try_get::<Option<String>, _>("f_name")?.is_some() {
                    profile.flag_rules.push(FlagRow::from_prefixed(row, "f_")?.into());
                }
            }
            Ok::<_, sqlx::Error>(profile)
        })?)
    }
}

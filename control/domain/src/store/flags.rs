//! Per-tenant feature-flag rules (one row per tenant and declared flag).

use super::{Store, StoreResult, from_json_list, now, on_db, store_row, to_json_list};

store_row! {
    #[derive(Debug, Clone)]
    pub(super) struct FlagRow {
        tenant_sid: String,
        name: String,
        account_sids: String,
        countries: String,
        regions: String,
        enabled: bool,
        invert: bool,
    }
}

/// A stored rule; absent rows read as the default (disabled, no scope).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagRuleRecord {
    pub tenant_sid: String,
    pub name: String,
    pub account_sids: Vec<String>,
    pub countries: Vec<String>,
    pub regions: Vec<String>,
    pub enabled: bool,
    pub invert: bool,
}

impl From<FlagRow> for FlagRuleRecord {
    fn from(r: FlagRow) -> Self {
        FlagRuleRecord {
            tenant_sid: r.tenant_sid,
            name: r.name,
            account_sids: from_json_list(&r.account_sids),
            countries: from_json_list(&r.countries),
            regions: from_json_list(&r.regions),
            enabled: r.enabled,
            invert: r.invert,
        }
    }
}

impl Store {
    /// Every stored rule of a tenant.
    pub async fn flag_rules(&self, tenant_sid: &str) -> StoreResult<Vec<FlagRuleRecord>> {
        let rows = on_db!(self, p => sqlx::query_as::<_, FlagRow>(
            "SELECT tenant_sid, name, account_sids, countries, regions, enabled, invert FROM feature_flag_rules WHERE tenant_sid = $1 ORDER BY name")
            .bind(tenant_sid).fetch_all(p).await)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// Writes a whole rule (the API layer merges a partial update first).
    pub async fn flag_rule_put(&self, rule: &FlagRuleRecord) -> StoreResult<()> {
        let t = now();
        on_db!(self, p => sqlx::query(
            "INSERT INTO feature_flag_rules (tenant_sid, name, account_sids, countries, regions, enabled, invert, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (tenant_sid, name) DO UPDATE SET account_sids = excluded.account_sids, \
             countries = excluded.countries, regions = excluded.regions, enabled = excluded.enabled, invert = excluded.invert, updated_at = excluded.updated_at")
            .bind(&rule.tenant_sid).bind(&rule.name).bind(to_json_list(&rule.account_sids)).bind(to_json_list(&rule.countries))
            .bind(to_json_list(&rule.regions)).bind(rule.enabled).bind(rule.invert).bind(t)
            .execute(p).await.map(|_| ()))?;
        Ok(())
    }
}

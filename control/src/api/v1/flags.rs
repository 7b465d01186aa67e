//! Per-tenant feature-flag rules (administrative).

use axum::extract::State;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{tenants::visible_tenant, views::FeatureFlagRule};
use crate::api::caller::Authz;
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    flags,
    ids::{has_prefix, prefix},
    store::FlagRuleRecord,
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_rules))
        .routes(routes!(get_rule, patch_rule))
}

/// Body of PATCH …/feature-flag/{name}: an omitted field keeps its value, an empty
/// array clears that scope axis.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchFlagRule {
    /// Account sids (`acc_…`).
    #[schema(value_type = Option<Vec<crate::api::vocab::AccountSid>>)]
    pub account_sids: Option<Vec<String>>,
    /// ISO 3166-1 alpha-2 codes, lowercase.
    #[schema(value_type = Option<Vec<crate::api::vocab::CountryCode>>)]
    pub countries: Option<Vec<String>>,
    pub enabled: Option<bool>,
    pub invert: Option<bool>,
    /// Region codes: af, ap, eu, me, na, sa.
    #[schema(value_type = Option<Vec<crate::api::vocab::RegionCode>>)]
    pub regions: Option<Vec<String>>,
}

fn declared(name: &str) -> ApiResult<()> {
    if flags::is_declared(name) {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "unknown_flag",
            format!(
                "name: {name:?} is not a declared flag ({})",
                flags::DECLARED_FLAGS.join(", ")
            ),
        ))
    }
}

async fn current(state: &AppState, tenant_sid: &str, name: &str) -> ApiResult<FlagRuleRecord> {
    let rules = state.store.flag_rules(tenant_sid).await?;
    Ok(rules
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| flags::default_rule(tenant_sid, name)))
}

/// Query of the rule list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct FlagRuleListQuery {
    /// Page size, 0..=500, default 100.
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    /// Rows to skip, default 0.
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// The rules of every declared flag for a tenant, in declaration order (unconfigured flags
/// show the default: disabled, no scope), paged like every list.
#[utoipa::path(get, path = "/v1/internal/tenant/{sid}/feature-flag", tag = "feature-flags",
    params(("sid" = String, Path), FlagRuleListQuery), security(("bearer" = [])),
    responses((status = 200, body = Page<FeatureFlagRule>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_rules(
    State(state): State<AppState>,
    auth: Authz<cap::FeatureFlagsRead>,
    Path(sid): Path<String>,
    Query(q): Query<FlagRuleListQuery>,
) -> ApiResult<Json<Page<FeatureFlagRule>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let t = visible_tenant(&state, &auth, &sid, false).await?;
    let rules = state.store.flag_rules(&t.sid).await?;
    let total = flags::DECLARED_FLAGS.len() as i64;
    let items: Vec<FeatureFlagRule> = flags::DECLARED_FLAGS
        .iter()
        .skip(usize::try_from(page.offset).unwrap_or(usize::MAX))
        .take(usize::try_from(page.limit).unwrap_or(0))
        .map(|n| {
            FeatureFlagRule::from(
                &rules
                    .iter()
                    .find(|r| r.name == *n)
                    .cloned()
                    .unwrap_or_else(|| flags::default_rule(&t.sid, n)),
            )
        })
        .collect();
    Ok(Json(Page::new(items, total, page)))
}

/// The rule of one declared flag for a tenant.
#[utoipa::path(get, path = "/v1/internal/tenant/{sid}/feature-flag/{name}", tag = "feature-flags",
    params(("sid" = String, Path), ("name" = crate::api::vocab::FlagName, Path)), security(("bearer" = [])),
    responses((status = 200, body = FeatureFlagRule), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_rule(
    State(state): State<AppState>,
    auth: Authz<cap::FeatureFlagsRead>,
    Path((sid, name)): Path<(String, String)>,
) -> ApiResult<Json<FeatureFlagRule>> {
    let t = visible_tenant(&state, &auth, &sid, false).await?;
    declared(&name)?;
    Ok(Json(FeatureFlagRule::from(
        &current(&state, &t.sid, &name).await?,
    )))
}

/// Partially update the rule of a declared flag for a tenant. An undeclared flag, an
/// unknown country or an unknown region is 400.
#[utoipa::path(patch, path = "/v1/internal/tenant/{sid}/feature-flag/{name}", tag = "feature-flags",
    params(("sid" = String, Path), ("name" = crate::api::vocab::FlagName, Path)), request_body = PatchFlagRule, security(("bearer" = [])),
    responses((status = 200, body = FeatureFlagRule), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn patch_rule(
    State(state): State<AppState>,
    auth: Authz<cap::FeatureFlagsManage>,
    Path((sid, name)): Path<(String, String)>,
    Json(b): Json<PatchFlagRule>,
) -> ApiResult<Json<FeatureFlagRule>> {
    let t = visible_tenant(&state, &auth, &sid, false).await?;
    declared(&name)?;
    let mut rule = current(&state, &t.sid, &name).await?;
    if let Some(countries) = b.countries {
        for c in &countries {
            if !flags::is_country(c) {
                return Err(ApiError::bad_request(
                    "unknown_country",
                    format!("countries: unknown ISO 3166-1 alpha-2 code {c:?} (lowercase)"),
                ));
            }
        }
        rule.countries = dedup(countries);
    }
    if let Some(regions) = b.regions {
        for r in &regions {
            if !flags::is_region(r) {
                return Err(ApiError::bad_request(
                    "unknown_region",
                    format!("regions: unknown region code {r:?}"),
                ));
            }
        }
        rule.regions = dedup(regions);
    }
    if let Some(a) = b.account_sids {
        if let Some(s) = a.iter().find(|s| !has_prefix(s, prefix::ACCOUNT)) {
            return Err(ApiError::bad_request(
                "invalid_body",
                format!("account_sids: {s:?} is not an account sid (acc_…)"),
            ));
        }
        rule.account_sids = dedup(a);
    }
    if let Some(e) = b.enabled {
        rule.enabled = e;
    }
    if let Some(i) = b.invert {
        rule.invert = i;
    }
    state.store.flag_rule_put(&rule).await?;
    Ok(Json(FeatureFlagRule::from(&rule)))
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(x.clone()));
    v
}

//! Response and shared request shapes of the v1 administration API.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::store::{
    AccountRecord, ApiKeyRecord, FlagRuleRecord, TenantRecord, TrunkRecord, UserRecord,
};

pub use crate::agent_settings::Status;

/// A user of an account.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct User {
    pub sid: String,
    pub account_sid: String,
    pub email: String,
    pub name: String,
    /// Role names: admin, member, viewer.
    pub roles: Vec<String>,
    pub status: Status,
    pub has_password: bool,
    pub last_login_at: Option<DateTime<Utc>>,
    /// Soft-delete marker.
    pub deleted_at: Option<DateTime<Utc>>,
}

impl From<&UserRecord> for User {
    fn from(u: &UserRecord) -> Self {
        User {
            sid: u.sid.clone(),
            account_sid: u.account_sid.clone(),
            email: u.email.clone(),
            name: u.name.clone(),
            roles: u.role_list(),
            status: Status::parse(&u.status),
            has_password: u.password_hash.is_some(),
            last_login_at: u.last_login_at,
            deleted_at: u.deleted_at,
        }
    }
}

/// A tenant.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Tenant {
    pub sid: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

impl From<&TenantRecord> for Tenant {
    fn from(t: &TenantRecord) -> Self {
        Tenant {
            sid: t.sid.clone(),
            name: t.name.clone(),
            created_at: t.created_at,
            updated_at: t.updated_at,
            deleted_at: t.deleted_at,
        }
    }
}

/// Administrative view of an account.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AccountAdmin {
    pub sid: String,
    pub tenant_sid: String,
    pub name: String,
    pub email: String,
    pub external_id: String,
    /// ISO 3166-1 alpha-2, lowercase; empty when unknown.
    pub country: String,
    /// Region code (see docs/feature-flags.md); empty when unassigned.
    pub region: String,
    /// IANA time zone name.
    pub timezone: String,
    pub phone: String,
    pub status: Status,
    pub deleted_at: Option<DateTime<Utc>>,
}

impl From<&AccountRecord> for AccountAdmin {
    fn from(a: &AccountRecord) -> Self {
        AccountAdmin {
            sid: a.sid.clone(),
            tenant_sid: a.tenant_sid.clone(),
            name: a.name.clone(),
            email: a.email.clone(),
            external_id: a.external_id.clone(),
            country: a.country.clone(),
            region: a.region.clone(),
            timezone: a.timezone.clone(),
            phone: a.phone.clone(),
            status: Status::parse(&a.status),
            deleted_at: a.deleted_at,
        }
    }
}

/// An API key as listed (never carries the secret).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ApiKey {
    pub sid: String,
    pub tenant_sid: String,
    /// Null for a tenant API key.
    pub account_sid: Option<String>,
    pub label: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl From<&ApiKeyRecord> for ApiKey {
    fn from(k: &ApiKeyRecord) -> Self {
        ApiKey {
            sid: k.sid.clone(),
            tenant_sid: k.tenant_sid.clone(),
            account_sid: k.account_sid.clone(),
            label: k.label.clone(),
            expires_at: k.expires_at,
            revoked_at: k.revoked_at,
            created_at: k.created_at,
        }
    }
}

/// An issued API key: the secret is shown exactly once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ApiKeySecret {
    pub sid: String,
    /// Bearer secret; store it now, it cannot be retrieved again.
    pub secret: String,
}

/// Body of an API-key issue request.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IssueApiKey {
    /// Free text to tell keys apart.
    #[serde(default)]
    pub label: Option<String>,
    /// Optional expiry; must be in the future.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// A session: the bearer token of a logged-in user.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Session {
    pub session_token: String,
    pub user_sid: String,
    pub account_sid: String,
    pub tenant_sid: String,
    pub email: String,
    /// When the session token stops working.
    pub expires_at: DateTime<Utc>,
}

/// A SIP trunk.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Trunk {
    pub sid: String,
    pub tenant_sid: String,
    /// Edge routing key, unique among the tenant's live trunks.
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

impl From<&TrunkRecord> for Trunk {
    fn from(t: &TrunkRecord) -> Self {
        Trunk {
            sid: t.sid.clone(),
            tenant_sid: t.tenant_sid.clone(),
            name: t.name.clone(),
            created_at: t.created_at,
            updated_at: t.updated_at,
            deleted_at: t.deleted_at,
        }
    }
}

/// A per-tenant feature-flag rule.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FeatureFlagRule {
    /// Declared flag name (closed set).
    pub name: String,
    pub account_sids: Vec<String>,
    /// ISO 3166-1 alpha-2, lowercase.
    pub countries: Vec<String>,
    pub regions: Vec<String>,
    /// Master switch: off resolves the flag false for every caller.
    pub enabled: bool,
    /// false: a scope match enables (whitelist); true: a scope match disables (blacklist).
    pub invert: bool,
}

impl From<&FlagRuleRecord> for FeatureFlagRule {
    fn from(r: &FlagRuleRecord) -> Self {
        FeatureFlagRule {
            name: r.name.clone(),
            account_sids: r.account_sids.clone(),
            countries: r.countries.clone(),
            regions: r.regions.clone(),
            enabled: r.enabled,
            invert: r.invert,
        }
    }
}

/// Query of list endpoints that only page and may show soft-deleted rows.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Include soft-deleted rows.
    #[serde(default)]
    pub show_deleted: Option<bool>,
    /// Page size, 0..=500, default 100.
    #[serde(default)]
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    /// Rows to skip, default 0.
    #[serde(default)]
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

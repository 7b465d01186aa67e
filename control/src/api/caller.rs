//! The caller of a request: its [`Principal`] (from the bearer secret) plus the scope
//! headers it sent, and the scope rules (spec, endpoint conventions; see
//! [`Caller::account_scope`] and [`Caller::tenant_scope`]). [`Authz<C>`] additionally
//! requires capability `C` (403 otherwise): every protected handler takes a [`Caller`]
//! or an [`Authz`], so the check lives in one place.

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use chrono::Utc;
use http::request::Parts;

use crate::{
    api::{ApiError, AppState},
    auth::{Capability, Principal, Role, cap, has_capability, tokens},
    store::{AccountRecord, AuthLookup, TenantRecord},
};

/// Header declaring the target account.
pub const ACCOUNT_HEADER: &str = "x-account-sid";
/// Header declaring the target tenant.
pub const TENANT_HEADER: &str = "x-tenant-sid";

/// The authenticated caller of a request and the scope headers it sent.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    /// The caller's own account (account keys and users), read with the credential.
    pub own_account: Option<AccountRecord>,
    /// Value of X-Account-Sid, if sent.
    pub header_account: Option<String>,
    /// Value of X-Tenant-Sid, if sent.
    pub header_tenant: Option<String>,
}

fn header(parts: &Parts, name: &str) -> Option<String> {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The bearer token of a request, if any.
pub fn bearer_token(parts: &Parts) -> Option<&str> {
    let v = parts
        .headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Resolves a bearer secret to a principal and, for account keys and users, its
/// account (None: unknown, expired or revoked).
pub async fn authenticate(
    state: &AppState,
    token: &str,
) -> Result<Option<(Principal, Option<AccountRecord>)>, ApiError> {
    let Some(kind) = tokens::TokenKind::of(token) else {
        return Ok(None);
    };
    let hash = tokens::hash_secret(token);
    let store = &state.store;
    let found = match kind {
        tokens::TokenKind::Superuser => store.lookup_superuser(&hash).await?,
        tokens::TokenKind::TenantKey | tokens::TokenKind::AccountKey => {
            store.lookup_api_key(&hash).await?
        }
        tokens::TokenKind::Session => store.lookup_session(&hash).await?,
        _ => None,
    };
    let now = Utc::now();
    Ok(match found {
        Some(AuthLookup::Superuser { sid }) => {
            Some((Principal::Superuser { token_sid: sid }, None))
        }
        Some(AuthLookup::Key { key: k, account }) => {
            if k.revoked_at.is_some() || k.expires_at.is_some_and(|e| e <= now) {
                None
            } else {
                match (kind, k.account_sid) {
                    (tokens::TokenKind::TenantKey, None) => Some((
                        Principal::TenantKey {
                            key_sid: k.sid,
                            tenant_sid: k.tenant_sid,
                        },
                        None,
                    )),
                    (tokens::TokenKind::AccountKey, Some(account_sid)) => Some((
                        Principal::AccountKey {
                            key_sid: k.sid,
                            tenant_sid: k.tenant_sid,
                            account_sid,
                        },
                        account,
                    )),
                    _ => None,
                }
            }
        }
        Some(AuthLookup::Session {
            session: s,
            account,
        }) => {
            if s.revoked_at.is_some() || s.expires_at <= now {
                None
            } else {
                let roles = crate::store::from_json_list(&s.roles)
                    .iter()
                    .filter_map(|r| Role::parse(r))
                    .collect();
                Some((
                    Principal::User {
                        user_sid: s.user_sid,
                        tenant_sid: s.tenant_sid,
                        account_sid: s.account_sid,
                        roles,
                        session_hash: hash,
                    },
                    Some(account),
                ))
            }
        }
        None => None,
    })
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let Some(token) = bearer_token(parts) else {
            return Err(ApiError::unauthenticated("missing bearer token"));
        };
        let Some((principal, own_account)) = authenticate(state, token).await? else {
            return Err(ApiError::unauthenticated(
                "invalid, expired or revoked credentials",
            ));
        };
        Ok(Caller {
            principal,
            own_account,
            header_account: header(parts, ACCOUNT_HEADER),
            header_tenant: header(parts, TENANT_HEADER),
        })
    }
}

/// An authenticated caller holding capability `C` (401 without valid credentials, 403
/// without the capability).
#[derive(Debug)]
pub struct Authz<C: cap::Cap>(pub Caller, pub PhantomData<C>);

impl<C: cap::Cap> std::ops::Deref for Authz<C> {
    type Target = Caller;
    fn deref(&self) -> &Caller {
        &self.0
    }
}

impl<C: cap::Cap> FromRequestParts<AppState> for Authz<C> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let caller = Caller::from_request_parts(parts, state).await?;
        if !caller.has(C::CAP) {
            return Err(ApiError::forbidden(format!(
                "this operation needs the {} capability",
                C::CAP.as_str()
            )));
        }
        Ok(Authz(caller, PhantomData))
    }
}

impl Caller {
    pub fn has(&self, cap: Capability) -> bool {
        has_capability(&self.principal, cap)
    }

    /// Whether this caller may see rows of `tenant_sid`.
    pub fn sees_tenant(&self, tenant_sid: &str) -> bool {
        self.principal.tenant_sid().is_none_or(|t| t == tenant_sid)
    }

    /// Whether this caller may see rows of `account` (tenant and account confinement).
    pub fn sees_account(&self, account_sid: &str, tenant_sid: &str) -> bool {
        self.sees_tenant(tenant_sid)
            && self
                .principal
                .account_sid()
                .is_none_or(|a| a == account_sid)
    }

    /// The account an account-scoped request targets, by the spec's X-Account-Sid rules:
    /// * superuser and tenant key must send X-Account-Sid (400 `account_required`);
    /// * account key and user may omit it; if sent it must equal their own account
    ///   (403 `scope_conflict`);
    /// * a tenant key's declared account must belong to its tenant (403
    ///   `scope_conflict`, whether the account exists elsewhere or not at all);
    /// * if X-Tenant-Sid is sent as well it must be the account's tenant (403
    ///   `scope_conflict`);
    /// * an account a superuser declares that does not exist (or is deleted) is 404.
    pub async fn account_scope(&self, state: &AppState) -> Result<AccountRecord, ApiError> {
        let target = match (&self.principal, &self.header_account) {
            (Principal::Superuser { .. } | Principal::TenantKey { .. }, None) => {
                return Err(ApiError::bad_request(
                    "account_required",
                    "X-Account-Sid header is required for this principal",
                ));
            }
            (Principal::Superuser { .. } | Principal::TenantKey { .. }, Some(h)) => h.clone(),
            (p, Some(h)) if p.account_sid() != Some(h.as_str()) => {
                return Err(ApiError::scope_conflict(
                    "X-Account-Sid differs from the caller's own account",
                ));
            }
            (p, _) => p.account_sid().unwrap_or_default().to_string(),
        };
        let account = match &self.own_account {
            // Read with the credential, which only matches a live, active account.
            Some(own) if own.sid == target => Some(own.clone()),
            _ => state.store.account_get(&target).await?,
        }
        .filter(|a| a.deleted_at.is_none());
        if let Some(tenant) = self.principal.tenant_sid()
            && account.as_ref().is_none_or(|a| a.tenant_sid != tenant)
        {
            return Err(ApiError::scope_conflict(
                "X-Account-Sid names an account outside the caller's tenant",
            ));
        }
        let Some(account) = account else {
            return Err(ApiError::not_found("account"));
        };
        if let Some(h) = &self.header_tenant
            && *h != account.tenant_sid
        {
            return Err(ApiError::scope_conflict(
                "X-Tenant-Sid differs from the tenant of the declared account",
            ));
        }
        Ok(account)
    }

    /// The tenant a tenant-scoped administrative request targets, by the spec's
    /// X-Tenant-Sid rules: the superuser must send it (400 `tenant_required`; 404 when
    /// it names no live tenant); a tenant key may omit it and if sent it must equal its
    /// own tenant (403 `scope_conflict`). Account-scoped principals never reach here
    /// (no tenant capability), but are refused with 403 for safety.
    pub async fn tenant_scope(&self, state: &AppState) -> Result<TenantRecord, ApiError> {
        let target = match (&self.principal, &self.header_tenant) {
            (Principal::Superuser { .. }, None) => {
                return Err(ApiError::bad_request(
                    "tenant_required",
                    "X-Tenant-Sid header is required for the superuser",
                ));
            }
            (Principal::Superuser { .. }, Some(h)) => h.clone(),
            (Principal::TenantKey { tenant_sid, .. }, Some(h)) if h != tenant_sid => {
                return Err(ApiError::scope_conflict(
                    "X-Tenant-Sid differs from the caller's own tenant",
                ));
            }
            (Principal::TenantKey { tenant_sid, .. }, _) => tenant_sid.clone(),
            _ => {
                return Err(ApiError::forbidden(
                    "this operation needs a tenant-scoped principal",
                ));
            }
        };
        match state.store.tenant_get(&target).await? {
            Some(t) if t.deleted_at.is_none() => Ok(t),
            _ => Err(ApiError::not_found("tenant")),
        }
    }

    /// The account addressed by a path sid, or 404 when absent, deleted (unless
    /// `include_deleted`) or outside the caller's scope. If X-Account-Sid is sent it
    /// must also name this account (404 otherwise: the row is outside the declared scope).
    pub async fn visible_account(
        &self,
        state: &AppState,
        sid: &str,
        include_deleted: bool,
    ) -> Result<AccountRecord, ApiError> {
        let account = state.store.account_get(sid).await?;
        match account {
            Some(a)
                if (include_deleted || a.deleted_at.is_none())
                    && self.sees_account(&a.sid, &a.tenant_sid)
                    && self.header_account.as_deref().is_none_or(|h| h == a.sid)
                    && self
                        .header_tenant
                        .as_deref()
                        .is_none_or(|h| h == a.tenant_sid) =>
            {
                Ok(a)
            }
            _ => Err(ApiError::not_found("account")),
        }
    }
}

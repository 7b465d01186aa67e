//! Legacy account tokens (`POST /v1/internal/account/{sid}/legacy-token`) and the legacy
//! account record (`GET /v1/accounts/{sid}`).

use super::*;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(issue_legacy_token))
        .routes(routes!(get_account))
}

/// Legacy credentials of an account.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LegacyToken {
    pub account_sid: String,
    /// HTTP Basic password for the legacy family; shown once.
    pub account_token: String,
}

/// Issue (or rotate) the account_token for the legacy family's HTTP Basic.
#[utoipa::path(post, path = "/v1/internal/account/{sid}/legacy-token", tag = "accounts", params(("sid" = String, Path)),
    security(("bearer" = [])),
    responses((status = 201, body = LegacyToken), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 500, body = ErrorBody)))]
async fn issue_legacy_token(
    State(state): State<AppState>,
    auth: Authz<cap::AccountKeysManage>,
    Path(sid): Path<String>,
) -> ApiResult<(StatusCode, Json<LegacyToken>)> {
    let a = auth.visible_account(&state, &sid, false).await?;
    let token = tokens::generate(tokens::TokenKind::LegacyAccount);
    state
        .store
        .legacy_token_set(&a.tenant_sid, &a.sid, &tokens::hash_secret(&token))
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(LegacyToken {
            account_sid: a.sid,
            account_token: token,
        }),
    ))
}

// --- Account -------------------------------------------------------------------------------

/// Legacy account record: the authenticated account.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LegacyAccountRecord {
    pub sid: String,
    pub tenant_sid: String,
    pub name: String,
    pub email: String,
    pub external_id: String,
    /// ISO 3166-1 alpha-2, lowercase.
    pub country: String,
    /// Region code (docs/control-api.md).
    pub region: String,
    /// IANA time zone.
    pub timezone: String,
    pub phone: String,
    /// `active` or `inactive`.
    pub status: String,
    pub creation_time: DateTime<Utc>,
    pub update_time: DateTime<Utc>,
}

impl From<&AccountRecord> for LegacyAccountRecord {
    fn from(a: &AccountRecord) -> Self {
        LegacyAccountRecord {
            sid: a.sid.clone(),
            tenant_sid: a.tenant_sid.clone(),
            name: a.name.clone(),
            email: a.email.clone(),
            external_id: a.external_id.clone(),
            country: a.country.clone(),
            region: a.region.clone(),
            timezone: a.timezone.clone(),
            phone: a.phone.clone(),
            status: a.status.clone(),
            creation_time: a.created_at,
            update_time: a.updated_at,
        }
    }
}

/// Get the account record; only the authenticated account's own sid is visible (any other
/// sid reads as absent).
#[utoipa::path(get, path = "/v1/accounts/{sid}", tag = "legacy", params(("sid" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = LegacyAccountRecord), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus),
        (status = 500, body = RpcStatus)))]
async fn get_account(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(sid): axum::extract::Path<String>,
) -> Result<axum::Json<LegacyAccountRecord>, LegacyError> {
    if sid != who.account_sid {
        return Err(LegacyError::not_found("account"));
    }
    let a = state
        .store
        .account_get(&sid)
        .await?
        .filter(|a| a.deleted_at.is_none())
        .ok_or_else(|| LegacyError::not_found("account"))?;
    Ok(axum::Json(LegacyAccountRecord::from(&a)))
}

// --- Campaign ------------------------------------------------------------------------------

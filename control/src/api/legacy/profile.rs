//! The legacy Profile group (`/profile…`).

use super::*;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_profile))
        .routes(routes!(get_profile, delete_profile, patch_profile))
}

/// Legacy Profile (OpenAPI schema `LegacyProfile`, apart from the v1 `Profile`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LegacyProfile {
    pub id: String,
    pub email: String,
    pub timezone: String,
    pub creation_time: DateTime<Utc>,
    pub update_time: DateTime<Utc>,
}

impl From<&LegacyProfileRecord> for LegacyProfile {
    fn from(p: &LegacyProfileRecord) -> Self {
        LegacyProfile {
            id: p.id.clone(),
            email: p.email.clone(),
            timezone: p.timezone.clone(),
            creation_time: p.creation_time,
            update_time: p.update_time,
        }
    }
}

/// Body of POST /profile and PATCH /profile/{id}: every field optional; `id`,
/// `creation_time` and `update_time` are maintained by the service and ignored on input.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileInput {
    pub id: Option<String>,
    pub email: Option<String>,
    pub timezone: Option<String>,
    pub creation_time: Option<DateTime<Utc>>,
    pub update_time: Option<DateTime<Utc>>,
}

/// A store error of a profile route (NotFound names the profile).
fn profile_missing(e: StoreError) -> LegacyError {
    match e {
        StoreError::NotFound => LegacyError::not_found("profile"),
        other => other.into(),
    }
}

fn timezone(tz: &str) -> Result<String, LegacyError> {
    tz.parse::<chrono_tz::Tz>()
        .map(|t| t.name().to_string())
        .map_err(|_| LegacyError::invalid(format!("timezone: unknown IANA time zone {tz:?}")))
}

/// A profile email, trimmed; 400 (reason `invalid_email`) for a character a single-line
/// field refuses ([`crate::text_field`]).
fn email(v: &str) -> Result<&str, LegacyError> {
    let v = v.trim();
    crate::api::v1::check_text(
        "email",
        v,
        crate::text_field::TextKind::Line,
        "invalid_email",
    )?;
    Ok(v)
}

/// Create a legacy profile of the authenticated account.
#[utoipa::path(post, path = "/profile", tag = "legacy", request_body = ProfileInput, security(("basic" = [])),
    responses((status = 200, body = LegacyProfile), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus), (status = 500, body = RpcStatus)))]
async fn create_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    b: Result<axum::Json<ProfileInput>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<LegacyProfile>, LegacyError> {
    let b = body(b)?;
    let tz = timezone(b.timezone.as_deref().unwrap_or("UTC"))?;
    let id = crate::ids::new_sid("prf");
    let p = state
        .store
        .legacy_profile_create(
            &id,
            &who.tenant_sid,
            &who.account_sid,
            email(b.email.as_deref().unwrap_or(""))?,
            &tz,
        )
        .await?;
    Ok(axum::Json(LegacyProfile::from(&p)))
}

/// Get a legacy profile of the authenticated account.
#[utoipa::path(get, path = "/profile/{id}", tag = "legacy", params(("id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = LegacyProfile), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus)))]
async fn get_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<axum::Json<LegacyProfile>, LegacyError> {
    let p = state
        .store
        .legacy_profile_get(&who.account_sid, &id)
        .await?
        .ok_or_else(|| LegacyError::not_found("profile"))?;
    Ok(axum::Json(LegacyProfile::from(&p)))
}

/// Delete a legacy profile; 200 with an empty object.
#[utoipa::path(delete, path = "/profile/{id}", tag = "legacy", params(("id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = Object, description = "Empty object"), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus)))]
async fn delete_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<axum::Json<serde_json::Value>, LegacyError> {
    state
        .store
        .legacy_profile_delete(&who.account_sid, &id)
        .await
        .map_err(profile_missing)?;
    Ok(axum::Json(serde_json::json!({})))
}

/// Update a legacy profile (`email`, `timezone`; the times are service-maintained).
#[utoipa::path(patch, path = "/profile/{id}", tag = "legacy", params(("id" = String, Path, description = "profile.id")), request_body = ProfileInput,
    security(("basic" = [])),
    responses((status = 200, body = LegacyProfile), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus)))]
async fn patch_profile(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(id): axum::extract::Path<String>,
    b: Result<axum::Json<ProfileInput>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<LegacyProfile>, LegacyError> {
    let b = body(b)?;
    let tz = b.timezone.as_deref().map(timezone).transpose()?;
    let p = state
        .store
        .legacy_profile_update(
            &who.account_sid,
            &id,
            b.email.as_deref().map(email).transpose()?,
            tz.as_deref(),
        )
        .await
        .map_err(profile_missing)?;
    Ok(axum::Json(LegacyProfile::from(&p)))
}

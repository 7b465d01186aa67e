//! Legacy campaigns (`/v1/campaign`): the legacy view of agents.

use super::*;
use crate::api::comma_list;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_campaigns, create_campaign))
        .routes(routes!(delete_campaign))
}

/// Legacy campaign record (list item and create reply): the legacy view of an agent.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Campaign {
    /// The agent's id (`agt_…`): the same resource on GET /v1/agent/{id}.
    pub sid: String,
    pub account_sid: String,
    /// Free text; "" for an agent created on the v1 routes.
    pub description: String,
    pub scenario_sid: String,
    /// Identifier (phone number) of the number the campaign dials from; "" for a pool.
    pub number: String,
    /// Number pool the campaign dials through; "" for a single number.
    pub pool_sid: String,
    /// `active` or `inactive`.
    pub status: String,
    /// Whether the agent is archived (an archived campaign never dials).
    pub archived: bool,
    pub creation_time: DateTime<Utc>,
    pub update_time: DateTime<Utc>,
}

impl From<&LegacyCampaignRecord> for Campaign {
    fn from(c: &LegacyCampaignRecord) -> Self {
        Campaign {
            sid: c.sid.clone(),
            account_sid: c.account_sid.clone(),
            description: c.description.clone(),
            scenario_sid: c.scenario_sid.clone(),
            number: c.number.clone(),
            pool_sid: c.pool_sid.clone(),
            status: c.status.clone(),
            archived: c.archive_time.is_some(),
            creation_time: c.created_at,
            update_time: c.updated_at,
        }
    }
}

/// Body of POST /v1/campaign. Exactly one of `number` and `pool_sid` is set. The agent
/// behind the campaign gets the v1 defaults for everything else (schedule `always`, the
/// account's time zone, limits cps 1 / cpl 10, no SMS, no result targets).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCampaign {
    /// Free text, at most 1000 characters.
    #[serde(default)]
    pub description: String,
    /// A scenario of the account.
    pub scenario_sid: String,
    /// Identifier of an active number of the account (the number gateway).
    #[serde(default)]
    pub number: String,
    /// An active number pool of the account (the pool gateway).
    #[serde(default)]
    pub pool_sid: String,
    /// Default `active`.
    #[serde(default)]
    pub status: Option<Status>,
}

/// Longest campaign description.
const MAX_DESCRIPTION: usize = 1000;

/// Create a campaign: an agent of the authenticated account. 200 returns the campaign.
#[utoipa::path(post, path = "/v1/campaign", tag = "legacy", request_body = CreateCampaign, security(("basic" = [])),
    responses((status = 200, body = Campaign, description = "The created campaign (create-campaign reply)"),
        (status = 400, body = RpcStatus, description = "Malformed body, or a rule of the agent violated (unknown number, pool or scenario, inactive gateway)"),
        (status = 401, body = RpcStatus), (status = 500, body = RpcStatus)))]
async fn create_campaign(
    State(state): State<AppState>,
    who: LegacyAccount,
    b: Result<axum::Json<CreateCampaign>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<Campaign>, LegacyError> {
    let b = body(b)?;
    let description = b.description.trim().to_string();
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(LegacyError::invalid(format!(
            "description: at most {MAX_DESCRIPTION} characters"
        )));
    }
    crate::api::v1::check_text(
        "description",
        &description,
        crate::text_field::TextKind::Multiline,
        "invalid_description",
    )?;
    if b.scenario_sid.trim().is_empty() {
        return Err(LegacyError::invalid("scenario_sid: required"));
    }
    let (number, pool_sid) = (b.number.trim(), b.pool_sid.trim());
    let account = state
        .store
        .account_get(&who.account_sid)
        .await?
        .ok_or_else(LegacyError::unauthenticated)?;
    let (gateway_type, number_sid, number_pool_sid) = match (number.is_empty(), pool_sid.is_empty())
    {
        (false, true) => {
            let n = state
                .store
                .number_by_identifier(&account.sid, number)
                .await?
                .ok_or_else(|| {
                    LegacyError::invalid(format!("number: no number {number:?} in this account"))
                })?;
            (GatewayType::Number, Some(n.sid), None)
        }
        (true, false) => (GatewayType::NumberPool, None, Some(pool_sid.to_string())),
        _ => {
            return Err(LegacyError::invalid(
                "number, pool_sid: exactly one of them is required",
            ));
        }
    };
    let agent = state
        .ops()
        .create_agent(
            &account,
            NewAgent {
                status: b.status,
                ..NewAgent::new(gateway_type, number_sid, number_pool_sid, b.scenario_sid)
            },
        )
        .await?;
    if !description.is_empty()
        && let Err(e) = state
            .store
            .legacy_campaign_describe(&agent.sid, &description)
            .await
    {
        // Nothing half-made stays behind.
        let _ = state.store.agent_delete(&agent.sid).await;
        return Err(e.into());
    }
    let c = state
        .store
        .legacy_campaign_get(&account.sid, &agent.sid)
        .await?
        .ok_or_else(LegacyError::internal)?;
    Ok(axum::Json(Campaign::from(&c)))
}

/// Query of GET /v1/campaign. Every value is a string (integers and booleans in their text
/// form); an empty value is the same as an absent one. Where a parameter has a structured
/// (`filter.*`, `options.*`) and a flat form, the structured form wins when both are given.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CampaignListQuery {
    /// `true`: archived campaigns only; `false`: live ones only; absent: both.
    #[serde(rename = "filter.archived")]
    pub filter_archived: Option<String>,
    /// Exact campaign sid.
    #[serde(rename = "filter.sid")]
    pub filter_sid: Option<String>,
    /// Exact scenario sid.
    #[serde(rename = "filter.scenario_sid")]
    pub filter_scenario_sid: Option<String>,
    /// Exact description.
    #[serde(rename = "filter.description")]
    pub filter_description: Option<String>,
    /// Exact number identifier.
    #[serde(rename = "filter.number")]
    pub filter_number: Option<String>,
    /// Page size (int64): default 100, at most 500.
    #[serde(rename = "options.limit")]
    pub options_limit: Option<String>,
    /// Campaigns skipped (int64), default 0.
    #[serde(rename = "options.offset")]
    pub options_offset: Option<String>,
    /// Order (int64 or name): 0 `CREATION_TIME_DESC` (default), 1 `CREATION_TIME_ASC`,
    /// 2 `DESCRIPTION_ASC`, 3 `DESCRIPTION_DESC`.
    #[serde(rename = "options.order_by")]
    pub options_order_by: Option<String>,
    /// Flat form of options.limit.
    pub limit: Option<String>,
    /// Flat form of options.offset.
    pub offset: Option<String>,
    /// Flat form of options.order_by.
    pub order_by: Option<String>,
    /// Flat form of filter.archived.
    pub archived: Option<String>,
    /// Flat form of filter.sid.
    pub sid: Option<String>,
    /// Flat form of filter.scenario_sid.
    pub scenario_sid: Option<String>,
    /// Flat form of filter.description.
    pub description: Option<String>,
    /// Flat form of filter.number.
    pub number: Option<String>,
    /// `active` or `inactive`.
    pub status: Option<String>,
    /// Exact number pool sid.
    pub pool_sid: Option<String>,
    /// Comma-separated fields searched by filter_query (any of them matching):
    /// sid, description, scenario_sid, number, pool_sid. Default: all of them.
    #[param(
        pattern = "^ *(?:sid|description|scenario_sid|number|pool_sid)? *(?:, *(?:sid|description|scenario_sid|number|pool_sid)? *)*$"
    )]
    pub filter_or: Option<String>,
    /// Substring searched for in the filter_or fields, case-insensitive in every script.
    pub filter_query: Option<String>,
}

/// Campaign orders by number and by name.
const ORDERS: [(i64, &str, CampaignOrder); 4] = [
    (0, "CREATION_TIME_DESC", CampaignOrder::CreationTimeDesc),
    (1, "CREATION_TIME_ASC", CampaignOrder::CreationTimeAsc),
    (2, "DESCRIPTION_ASC", CampaignOrder::DescriptionAsc),
    (3, "DESCRIPTION_DESC", CampaignOrder::DescriptionDesc),
];

fn order_param(name: &str, v: Option<String>) -> Result<CampaignOrder, LegacyError> {
    let Some(v) = v else {
        return Ok(CampaignOrder::default());
    };
    let t = v.trim();
    ORDERS
        .iter()
        .find(|(n, s, _)| t == n.to_string() || t.eq_ignore_ascii_case(s))
        .map(|(_, _, o)| *o)
        .ok_or_else(|| {
            LegacyError::invalid(format!(
                "{name}: unknown order {v:?} (0 CREATION_TIME_DESC, 1 CREATION_TIME_ASC, 2 DESCRIPTION_ASC, 3 DESCRIPTION_DESC)"
            ))
        })
}

/// The list query resolved into a filter and a page; 400 for a malformed value.
fn campaign_query(q: CampaignListQuery) -> Result<(CampaignFilter, i64, i64), LegacyError> {
    let (limit, offset) = page(q.options_limit, q.limit, q.options_offset, q.offset)?;
    let order_name = if q.options_order_by.as_deref().is_some_and(|v| !v.is_empty()) {
        "options.order_by"
    } else {
        "order_by"
    };
    let order = order_param(order_name, pick(q.options_order_by, q.order_by))?;
    let archived_name = if q.filter_archived.as_deref().is_some_and(|v| !v.is_empty()) {
        "filter.archived"
    } else {
        "archived"
    };
    let archived = bool_param(archived_name, pick(q.filter_archived, q.archived))?;
    let status = match pick(None, q.status) {
        None => None,
        Some(s) if s == "active" || s == "inactive" => Some(s),
        Some(s) => {
            return Err(LegacyError::invalid(format!(
                "status: expected active or inactive, got {s:?}"
            )));
        }
    };
    let mut search_fields = comma_list::parse(q.filter_or.as_deref(), &CampaignField::ALL)
        .map_err(|part| {
            LegacyError::invalid(format!(
                "filter_or: unknown field {part:?} (accepted: {})",
                comma_list::names(&CampaignField::ALL)
            ))
        })?;
    if search_fields.is_empty() {
        search_fields = CampaignField::ALL.iter().map(|(_, c)| *c).collect();
    }
    let filter = CampaignFilter {
        sid: pick(q.filter_sid, q.sid),
        scenario_sid: pick(q.filter_scenario_sid, q.scenario_sid),
        description: pick(q.filter_description, q.description),
        number: pick(q.filter_number, q.number),
        pool_sid: pick(None, q.pool_sid),
        status,
        archived,
        search_fields,
        query: pick(None, q.filter_query),
        order,
    };
    Ok((filter, limit, offset))
}

/// List the authenticated account's campaigns (every agent of the account). 200 returns an
/// array of campaigns.
#[utoipa::path(get, path = "/v1/campaign", tag = "legacy", params(CampaignListQuery), security(("basic" = [])),
    responses((status = 200, body = Vec<Campaign>), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus),
        (status = 500, body = RpcStatus)))]
async fn list_campaigns(
    State(state): State<AppState>,
    who: LegacyAccount,
    q: Result<axum::extract::Query<CampaignListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::Json<Vec<Campaign>>, LegacyError> {
    let (filter, limit, offset) = campaign_query(query(q)?)?;
    let rows = state
        .store
        .legacy_campaign_list(&who.account_sid, &filter, limit, offset)
        .await?;
    Ok(axum::Json(rows.iter().map(Campaign::from).collect()))
}

/// Delete a campaign (the agent behind it, as DELETE /v1/agent/{id}); 200 with an empty
/// object. Another account's campaign reads as absent.
#[utoipa::path(delete, path = "/v1/campaign/{campaign_id}", tag = "legacy", params(("campaign_id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = Object, description = "Empty object"), (status = 401, body = RpcStatus), (status = 404, body = RpcStatus),
        (status = 500, body = RpcStatus)))]
async fn delete_campaign(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(campaign_id): axum::extract::Path<String>,
) -> Result<axum::Json<serde_json::Value>, LegacyError> {
    let c = campaign_of(&state, &who, &campaign_id).await?;
    state
        .store
        .agent_delete(&c.sid)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => LegacyError::not_found("campaign"),
            other => other.into(),
        })?;
    Ok(axum::Json(serde_json::json!({})))
}

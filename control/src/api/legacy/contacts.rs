//! Contacts of a campaign (`/v1/campaign/{campaign_id}/contact…`): the recipients an
//! attempt dials. A contact's phone is checked with the rule of a dispatch recipient and
//! its variables with the rule of dispatch `data` (the same functions): they become the
//! recipient and the data of the communication an attempt creates for it.

use std::collections::BTreeSet;

use super::*;
use crate::{
    ids::{new_sid, prefix},
    store::{ContactsAdded, LegacyContactRecord, NewContact},
    usecases::{check_recipient, flat_data},
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_contacts, add_contact))
        .routes(routes!(add_contacts))
        .routes(routes!(import_contacts))
        .routes(routes!(delete_contact))
}

/// Most contacts one request adds (a JSON array or a CSV import).
pub const MAX_CONTACTS_PER_REQUEST: usize = 10_000;

/// Legacy contact record.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Contact {
    /// `cnt_…`.
    pub sid: String,
    pub campaign_sid: String,
    /// The number dialled, without separators.
    pub phone: String,
    /// Per-contact variables: the initial scenario variables of its call.
    #[schema(value_type = Object)]
    pub variables: serde_json::Value,
    /// The attempt that dialled the contact last; "" before one did.
    pub attempt_sid: String,
    /// The communication that attempt created for it; "" before.
    pub communication_sid: String,
    /// Calls made to the contact: 0 before the first attempt, more when an attempt with
    /// `redial` dialled it again.
    pub dial_count: i64,
    pub creation_time: DateTime<Utc>,
}

impl From<&LegacyContactRecord> for Contact {
    fn from(c: &LegacyContactRecord) -> Self {
        Contact {
            sid: c.sid.clone(),
            campaign_sid: c.campaign_sid.clone(),
            phone: c.phone.clone(),
            variables: serde_json::from_str(&c.variables)
                .unwrap_or_else(|_| serde_json::Value::Object(Default::default())),
            attempt_sid: c.attempt_sid.clone(),
            communication_sid: c.communication_sid.clone(),
            dial_count: c.dial_count,
            creation_time: c.creation_time,
        }
    }
}

/// One contact to add (the body of POST …/contact, an item of POST …/contact/batch).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContactInput {
    /// `+` and 3 to 32 digits; spaces, dashes, dots and parentheses are allowed and dropped.
    pub phone: String,
    /// Flat object of strings, numbers and booleans (default empty).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub variables: Option<serde_json::Value>,
}

/// The contact to store for a phone and its variables, or 400 naming where it came from
/// (`at`: `[3]`, `row 4`, or "" for a single contact) and the field.
fn checked(
    at: &str,
    phone: &str,
    variables: Option<&serde_json::Value>,
) -> Result<NewContact, LegacyError> {
    let field = |f: &str| {
        if at.is_empty() {
            f.to_string()
        } else {
            format!("{at}: {f}")
        }
    };
    let phone = check_recipient(&field("phone"), phone)
        .map_err(|e| LegacyError::from(e).with_message(|m| format!("{m}, got {phone:?}")))?;
    let variables = flat_data(&field("variables"), variables)?;
    Ok(NewContact {
        sid: new_sid(prefix::LEGACY_CONTACT),
        phone,
        variables: serde_json::Value::Object(variables).to_string(),
    })
}

async fn add(
    state: &AppState,
    who: &LegacyAccount,
    campaign_id: &str,
    contacts: Vec<NewContact>,
) -> Result<Vec<Contact>, LegacyError> {
    let c = campaign_of(state, who, campaign_id).await?;
    let added = state
        .store
        .legacy_contacts_add(
            &who.tenant_sid,
            &who.account_sid,
            &c.sid,
            &contacts,
            state.settings.legacy_max_contacts_per_campaign,
        )
        .await?;
    match added {
        ContactsAdded::Added(rows) => Ok(rows.iter().map(Contact::from).collect()),
        ContactsAdded::OverLimit { total } => Err(LegacyError::failed_precondition(format!(
            "a campaign holds at most {} contacts; with these {} it would hold {total}: put the rest in another campaign",
            state.settings.legacy_max_contacts_per_campaign,
            contacts.len()
        ))),
    }
}

/// Add one contact to a campaign. 200 returns the contact.
#[utoipa::path(post, path = "/v1/campaign/{campaign_id}/contact", tag = "legacy", params(("campaign_id" = String, Path)),
    request_body = ContactInput, security(("basic" = [])),
    responses((status = 200, body = Contact),
        (status = 400, body = RpcStatus, description = "Malformed body, a bad phone or variables (the message names the field); FAILED_PRECONDITION (9) when the campaign would hold more than 200,000 contacts"),
        (status = 401, body = RpcStatus), (status = 404, body = RpcStatus, description = "No such campaign in this account"),
        (status = 500, body = RpcStatus)))]
async fn add_contact(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(campaign_id): axum::extract::Path<String>,
    b: Result<axum::Json<ContactInput>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<Contact>, LegacyError> {
    let b = body(b)?;
    let new = checked("", &b.phone, b.variables.as_ref())?;
    let mut added = add(&state, &who, &campaign_id, vec![new]).await?;
    added
        .pop()
        .map(axum::Json)
        .ok_or_else(LegacyError::internal)
}

/// Add many contacts (a JSON array), all or none: the first bad item is a 400 naming
/// its index (`[3].phone`). 200 returns the contacts in the order given.
#[utoipa::path(post, path = "/v1/campaign/{campaign_id}/contact/batch", tag = "legacy", params(("campaign_id" = String, Path)),
    request_body = Vec<ContactInput>, security(("basic" = [])),
    responses((status = 200, body = Vec<Contact>),
        (status = 400, body = RpcStatus, description = "Malformed body, empty or above 10000 items, or a bad item (the message names its index and field); FAILED_PRECONDITION (9) when the campaign would hold more than 200,000 contacts"),
        (status = 401, body = RpcStatus), (status = 404, body = RpcStatus, description = "No such campaign in this account"),
        (status = 500, body = RpcStatus)))]
async fn add_contacts(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(campaign_id): axum::extract::Path<String>,
    b: Result<axum::Json<Vec<ContactInput>>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<Vec<Contact>>, LegacyError> {
    let b = body(b)?;
    count_ok(b.len())?;
    let contacts = b
        .iter()
        .enumerate()
        .map(|(i, c)| checked(&format!("[{i}]"), &c.phone, c.variables.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(axum::Json(add(&state, &who, &campaign_id, contacts).await?))
}

fn count_ok(n: usize) -> Result<(), LegacyError> {
    if n == 0 {
        return Err(LegacyError::invalid("no contacts given"));
    }
    if n > MAX_CONTACTS_PER_REQUEST {
        return Err(LegacyError::invalid(format!(
            "{n} contacts: at most {MAX_CONTACTS_PER_REQUEST} per request"
        )));
    }
    Ok(())
}

/// Import contacts from CSV (UTF-8, body `text/csv`), all or none. The header row names the
/// columns: `phone` (required, once) and any others, which become each contact's variables
/// (string values) under the column's name. A bad row is a 400 naming its line
/// (`row 4: phone: …`; the header is row 1). 200 returns the contacts in file order.
#[utoipa::path(post, path = "/v1/campaign/{campaign_id}/contact/import", tag = "legacy", params(("campaign_id" = String, Path)),
    request_body(content = String, content_type = "text/csv", description = "Header row with `phone` and variable columns, then one contact per row"),
    security(("basic" = [])),
    responses((status = 200, body = Vec<Contact>),
        (status = 400, body = RpcStatus, description = "Not UTF-8, malformed CSV, a bad header (no or two `phone` columns, an empty or repeated name), a row with the wrong number of fields or a bad phone, no rows or above 10000 (the message names the row); FAILED_PRECONDITION (9) when the campaign would hold more than 200,000 contacts"),
        (status = 401, body = RpcStatus), (status = 404, body = RpcStatus, description = "No such campaign in this account"),
        (status = 500, body = RpcStatus)))]
async fn import_contacts(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(campaign_id): axum::extract::Path<String>,
    b: Result<bytes::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<axum::Json<Vec<Contact>>, LegacyError> {
    let b = b.map_err(|e| LegacyError::invalid(e.body_text()))?;
    let text = std::str::from_utf8(&b)
        .map_err(|e| LegacyError::invalid(format!("body: not UTF-8 text ({e})")))?;
    let contacts = parse_import(text)?;
    Ok(axum::Json(add(&state, &who, &campaign_id, contacts).await?))
}

/// The contacts of a CSV import (see [`import_contacts`]).
fn parse_import(text: &str) -> Result<Vec<NewContact>, LegacyError> {
    let records = csv::parse(text)
        .map_err(|e| LegacyError::invalid(format!("row {}: {}", e.row, e.message)))?;
    let mut records = records.into_iter();
    let Some((_, header)) = records.next() else {
        return Err(LegacyError::invalid(
            "row 1: a header row naming the columns (phone, then variables) is required",
        ));
    };
    let header: Vec<String> = header.iter().map(|h| h.trim().to_string()).collect();
    let mut seen = BTreeSet::new();
    for (i, h) in header.iter().enumerate() {
        if h.is_empty() {
            return Err(LegacyError::invalid(format!(
                "row 1: column {}: empty name",
                i + 1
            )));
        }
        if !seen.insert(h.as_str()) {
            return Err(LegacyError::invalid(format!(
                "row 1: column {}: {h:?} named twice",
                i + 1
            )));
        }
    }
    let phone_at = header
        .iter()
        .position(|h| h == "phone")
        .ok_or_else(|| LegacyError::invalid("row 1: no phone column"))?;
    let records: Vec<_> = records.collect();
    count_ok(records.len())?;
    records
        .into_iter()
        .map(|(row, fields)| {
            if fields.len() != header.len() {
                return Err(LegacyError::invalid(format!(
                    "row {row}: {} fields, the header has {}",
                    fields.len(),
                    header.len()
                )));
            }
            let variables: serde_json::Map<String, serde_json::Value> = header
                .iter()
                .zip(&fields)
                .enumerate()
                .filter(|(i, _)| *i != phone_at)
                .map(|(_, (h, v))| (h.clone(), serde_json::Value::String(v.clone())))
                .collect();
            checked(
                &format!("row {row}"),
                &fields[phone_at],
                Some(&serde_json::Value::Object(variables)),
            )
        })
        .collect()
}

/// Query of GET /v1/campaign/{campaign_id}/contact: strings, as GET /v1/campaign's.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ContactListQuery {
    /// Exact phone (as stored: without separators; send `+` as `%2B`).
    #[serde(rename = "filter.phone")]
    pub filter_phone: Option<String>,
    /// Page size (int64): absent or 0 → 100, at most 500.
    #[serde(rename = "options.limit")]
    pub options_limit: Option<String>,
    /// Contacts skipped (int64), default 0.
    #[serde(rename = "options.offset")]
    pub options_offset: Option<String>,
    /// Flat form of filter.phone.
    pub phone: Option<String>,
    /// Flat form of options.limit.
    pub limit: Option<String>,
    /// Flat form of options.offset.
    pub offset: Option<String>,
}

/// List a campaign's contacts, oldest first. 200 returns an array.
#[utoipa::path(get, path = "/v1/campaign/{campaign_id}/contact", tag = "legacy", params(("campaign_id" = String, Path), ContactListQuery),
    security(("basic" = [])),
    responses((status = 200, body = Vec<Contact>), (status = 400, body = RpcStatus), (status = 401, body = RpcStatus),
        (status = 404, body = RpcStatus, description = "No such campaign in this account"), (status = 500, body = RpcStatus)))]
async fn list_contacts(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path(campaign_id): axum::extract::Path<String>,
    q: Result<axum::extract::Query<ContactListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::Json<Vec<Contact>>, LegacyError> {
    let q = query(q)?;
    let (limit, offset) = page(q.options_limit, q.limit, q.options_offset, q.offset)?;
    let c = campaign_of(&state, &who, &campaign_id).await?;
    let rows = state
        .store
        .legacy_contact_list(
            &who.account_sid,
            &c.sid,
            pick(q.filter_phone, q.phone).as_ref(),
            limit,
            offset,
        )
        .await?;
    Ok(axum::Json(rows.iter().map(Contact::from).collect()))
}

/// Delete a contact; 200 with an empty object. A contact already dialled keeps its call
/// (statistics and reports still count it).
#[utoipa::path(delete, path = "/v1/campaign/{campaign_id}/contact/{contact_id}", tag = "legacy",
    params(("campaign_id" = String, Path), ("contact_id" = String, Path)), security(("basic" = [])),
    responses((status = 200, body = Object, description = "Empty object"), (status = 401, body = RpcStatus),
        (status = 404, body = RpcStatus, description = "No such campaign in this account, or no such contact in it"),
        (status = 500, body = RpcStatus)))]
async fn delete_contact(
    State(state): State<AppState>,
    who: LegacyAccount,
    axum::extract::Path((campaign_id, contact_id)): axum::extract::Path<(String, String)>,
) -> Result<axum::Json<serde_json::Value>, LegacyError> {
    let c = campaign_of(&state, &who, &campaign_id).await?;
    state
        .store
        .legacy_contact_delete(&who.account_sid, &c.sid, &contact_id)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => LegacyError::not_found("contact"),
            other => other.into(),
        })?;
    Ok(axum::Json(serde_json::json!({})))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<Vec<NewContact>, LegacyError>) -> String {
        r.err().map(|e| e.message).unwrap_or_default()
    }

    #[test]
    fn import_reads_phone_and_variables() {
        let c = parse_import("name,phone , city\nAnn,+49 (11) 1,Köln\r\nBob,4912,\n").unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].phone, "+49111");
        assert_eq!(c[0].variables, r#"{"name":"Ann","city":"Köln"}"#);
        assert_eq!(c[1].variables, r#"{"name":"Bob","city":""}"#);
    }

    #[test]
    fn import_names_the_bad_row() {
        assert!(message(parse_import("")).starts_with("row 1: a header row"));
        assert_eq!(
            message(parse_import("name\nAnn\n")),
            "row 1: no phone column"
        );
        assert_eq!(
            message(parse_import("phone,a,a\n1,2,3\n")),
            "row 1: column 3: \"a\" named twice"
        );
        assert_eq!(
            message(parse_import("phone,\n")),
            "row 1: column 2: empty name"
        );
        assert_eq!(message(parse_import("phone\n")), "no contacts given");
        assert_eq!(
            message(parse_import("phone,a\n+4911,x\n+4912\n")),
            "row 3: 1 fields, the header has 2"
        );
        assert_eq!(
            message(parse_import("phone\n+4911\n\nabc\n")),
            "row 4: phone: a phone number (digits, optional leading +), got \"abc\""
        );
        assert_eq!(
            message(parse_import("phone\n\"+4911\n")),
            "row 2: unterminated quoted field"
        );
    }
}

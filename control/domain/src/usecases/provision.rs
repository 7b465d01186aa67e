//! Provisioning: a tenant ([`Ops::create_tenant`]), its trunks ([`Ops::create_trunk`])
//! and accounts ([`Ops::create_account`]), and an account's numbers
//! ([`Ops::create_number`]), with the field rules their changes share. The administrative
//! v1 routes and `callsmith load` call these.

use super::{
    Ops,
    error::{UseCaseError, UseCaseResult},
};
use crate::{
    agent_settings::Status,
    flags,
    ids::{new_sid, prefix},
    store::{
        AccountRecord, NewAccount, NewNumber, NumberRecord, StoreError, TenantRecord, TrunkRecord,
    },
    text_field::{NameRule, TextKind, check_text},
};

/// A new account as asked for (the `POST /v1/internal/account` body, decoded): `None`
/// takes the default.
#[derive(Debug, Clone, Default)]
pub struct NewAccountInput {
    pub name: String,
    pub email: String,
    pub external_id: Option<String>,
    /// ISO 3166-1 alpha-2, any case.
    pub country: Option<String>,
    /// A region code.
    pub region: Option<String>,
    /// IANA time zone, default UTC.
    pub timezone: Option<String>,
    pub phone: Option<String>,
    /// Default active.
    pub status: Option<Status>,
}

/// A new number as asked for (the `POST /v1/number` body, decoded): `None` (or blank) takes
/// the default.
#[derive(Debug, Clone, Default)]
pub struct NewNumberInput {
    pub identifier: String,
    pub name: Option<String>,
    pub pool_sid: Option<String>,
    pub trunk: Option<String>,
    /// Default active.
    pub status: Option<Status>,
}

/// A country: empty or a known ISO 3166-1 alpha-2 code, lowercased (`unknown_country`,
/// malformed).
pub fn check_country(v: &str) -> UseCaseResult<String> {
    let c = v.trim().to_ascii_lowercase();
    if c.is_empty() || flags::is_country(&c) {
        Ok(c)
    } else {
        Err(UseCaseError::malformed(
            "unknown_country",
            format!("country: unknown code {v:?}"),
        ))
    }
}

/// A region: empty or a declared region code, lowercased (`unknown_region`, malformed).
pub fn check_region(v: &str) -> UseCaseResult<String> {
    let r = v.trim().to_ascii_lowercase();
    if r.is_empty() || flags::is_region(&r) {
        Ok(r)
    } else {
        Err(UseCaseError::malformed(
            "unknown_region",
            format!("region: unknown code {v:?}"),
        ))
    }
}

/// An IANA time zone by its canonical name (`invalid_timezone`).
pub fn check_timezone(v: &str) -> UseCaseResult<String> {
    v.trim()
        .parse::<chrono_tz::Tz>()
        .map(|tz| tz.name().to_string())
        .map_err(|_| {
            UseCaseError::invalid(
                "invalid_timezone",
                format!("timezone: unknown IANA time zone {v:?}"),
            )
        })
}

/// `v` unless it holds a character a single-line field refuses (`invalid_field`).
pub fn check_line(field: &str, v: String) -> UseCaseResult<String> {
    check_text(field, &v, TextKind::Line, "invalid_field")?;
    Ok(v)
}

/// An account's e-mail address: trimmed, lowercased, one line.
pub fn check_email(v: &str) -> UseCaseResult<String> {
    check_line("email", v.trim().to_ascii_lowercase())
}

const PHONE_MAX_DIGITS: usize = 32;

/// A phone number as identifiers and SMS sender numbers are written: an optional `+`
/// and 1–32 digits (trimmed); `reason` naming `field` otherwise.
pub fn check_phone(field: &str, reason: &'static str, v: &str) -> UseCaseResult<String> {
    let t = v.trim();
    let digits = t.strip_prefix('+').unwrap_or(t);
    if digits.is_empty()
        || digits.len() > PHONE_MAX_DIGITS
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(UseCaseError::invalid(
            reason,
            format!("{field}: an optional '+' and 1 to {PHONE_MAX_DIGITS} digits, got {v:?}"),
        ));
    }
    Ok(t.to_string())
}

/// A number's identifier ([`check_phone`], `invalid_identifier`).
pub fn check_identifier(v: &str) -> UseCaseResult<String> {
    check_phone("identifier", "invalid_identifier", v)
}

/// A trunk's name: 1–128 of letters, digits, '.', '-', '_' (`invalid_name`).
pub fn check_trunk_name(n: &str) -> UseCaseResult<String> {
    let ok = !n.is_empty()
        && n.len() <= 128
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(n.to_string())
    } else {
        Err(UseCaseError::invalid(
            "invalid_name",
            "name: 1 to 128 of letters, digits, '.', '-', '_'",
        ))
    }
}

/// The refusal of a failed number write: `identifier_taken` (the account has the number),
/// `identifier_active` (conflict: the number is active elsewhere; the message names no
/// account or tenant), `number` not found.
pub fn number_write_error(e: StoreError) -> UseCaseError {
    match e {
        StoreError::Unique => UseCaseError::invalid(
            "identifier_taken",
            "identifier: the account already has this number",
        ),
        StoreError::Conflict(_) => UseCaseError::Conflict {
            reason: "identifier_active".into(),
            message: "identifier: this number is already active in the service (identifiers are \
                      compared without a leading '+' or '00'); a number is active in one account \
                      at a time"
                .into(),
        },
        StoreError::NotFound => UseCaseError::NotFound { entity: "number" },
        e => e.into(),
    }
}

/// A trimmed value; blank is none.
pub fn non_blank(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

impl Ops<'_> {
    /// Creates a tenant named `name` (the administrative name rule).
    pub async fn create_tenant(&self, name: &str) -> UseCaseResult<TenantRecord> {
        let name = NameRule::ADMIN_NAME.check("name", name)?;
        Ok(self
            .services
            .store
            .tenant_create(&new_sid(prefix::TENANT), &name)
            .await?)
    }

    /// Creates a trunk named `name` ([`check_trunk_name`]) of `tenant_sid`; `name_taken`
    /// when a live trunk of the tenant has the name.
    pub async fn create_trunk(&self, tenant_sid: &str, name: &str) -> UseCaseResult<TrunkRecord> {
        let name = check_trunk_name(name)?;
        match self
            .services
            .store
            .trunk_create(&new_sid(prefix::TRUNK), tenant_sid, &name)
            .await
        {
            Ok(t) => Ok(t),
            Err(StoreError::Unique) => Err(UseCaseError::invalid(
                "name_taken",
                "name: a live trunk of this tenant already has it",
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates an account of `tenant_sid`, every field checked.
    pub async fn create_account(
        &self,
        tenant_sid: &str,
        b: NewAccountInput,
    ) -> UseCaseResult<AccountRecord> {
        let new = NewAccount {
            sid: new_sid(prefix::ACCOUNT),
            tenant_sid: tenant_sid.to_string(),
            name: NameRule::ADMIN_NAME.check("name", &b.name)?,
            email: check_email(&b.email)?,
            external_id: check_line("external_id", b.external_id.unwrap_or_default())?,
            country: check_country(b.country.as_deref().unwrap_or(""))?,
            region: check_region(b.region.as_deref().unwrap_or(""))?,
            timezone: check_timezone(b.timezone.as_deref().unwrap_or("UTC"))?,
            phone: check_line("phone", b.phone.unwrap_or_default())?,
            status: b.status.unwrap_or(Status::Active).as_str().to_string(),
        };
        Ok(self.services.store.account_create(&new).await?)
    }

    /// Creates a number of `account`: the identifier checked, the pool one of the
    /// account's ([`Ops::check_number_pool`]), the trunk one of the tenant's that this node
    /// has ([`Ops::check_number_trunk`]); refusals of the write by [`number_write_error`].
    pub async fn create_number(
        &self,
        account: &AccountRecord,
        b: NewNumberInput,
    ) -> UseCaseResult<NumberRecord> {
        let identifier = check_identifier(&b.identifier)?;
        let pool_sid = non_blank(b.pool_sid);
        if let Some(p) = &pool_sid {
            self.check_number_pool(&account.sid, p).await?;
        }
        let trunk = non_blank(b.trunk);
        if let Some(t) = &trunk {
            self.check_number_trunk(&account.tenant_sid, t).await?;
        }
        let new = NewNumber {
            sid: new_sid(prefix::NUMBER),
            tenant_sid: account.tenant_sid.clone(),
            account_sid: account.sid.clone(),
            identifier,
            name: NameRule::FREE_NAME.check("name", b.name.as_deref().unwrap_or(""))?,
            pool_sid,
            trunk,
            status: b.status.unwrap_or(Status::Active).as_str().to_string(),
        };
        self.services
            .store
            .number_create(&new)
            .await
            .map_err(number_write_error)
    }

    /// `unknown_pool` unless `pool_sid` names a pool of `account_sid`.
    pub async fn check_number_pool(&self, account_sid: &str, pool_sid: &str) -> UseCaseResult<()> {
        match self.services.store.pool_get(pool_sid).await? {
            Some(p) if p.account_sid == account_sid => Ok(()),
            _ => Err(UseCaseError::invalid(
                "unknown_pool",
                format!("pool_sid: no number pool {pool_sid:?} in this account"),
            )),
        }
    }

    /// `unknown_trunk` unless `trunk` names a live trunk of `tenant_sid`, and
    /// `trunk_not_configured` unless this node has a `[[sip.trunks]]` of that name (calls
    /// from the number leave through it; see docs/trunks.md).
    pub async fn check_number_trunk(&self, tenant_sid: &str, trunk: &str) -> UseCaseResult<()> {
        if self
            .services
            .store
            .trunk_by_name(tenant_sid, trunk)
            .await?
            .is_none()
        {
            return Err(UseCaseError::invalid(
                "unknown_trunk",
                format!("trunk: the tenant has no live trunk named {trunk:?}"),
            ));
        }
        match &self.settings.sip_trunks {
            Some(node) if !node.has(trunk) => Err(UseCaseError::invalid(
                "trunk_not_configured",
                format!(
                    "trunk: no SIP trunk of this node is named {trunk:?} ([[sip.trunks]] in the \
                     engine's configuration): calls from the number could not leave through it"
                ),
            )),
            _ => Ok(()),
        }
    }
}

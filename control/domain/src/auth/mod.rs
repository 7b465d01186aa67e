//! Authentication (who is calling): the principals behind bearer secrets, capabilities and
//! roles, tokens, password hashing and the login throttle.
//!
//! * Bearer secrets carry a kind prefix (`cs_su_` superuser, `cs_tk_` tenant key,
//!   `cs_ak_` account key, `cs_se_` session) so one indexed hash lookup resolves them;
//!   only SHA-256 hashes are stored ([`tokens`]).
//! * A [`Principal`] is who holds a secret. The HTTP side, the request's caller and the
//!   scope (which tenant/account a request touches), is `api::caller`.

mod caps;
pub mod password;
pub mod throttle;
pub mod tokens;

pub use caps::{Capability, Role, cap, has_capability, principal_table, role_capabilities};

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// No tenant or account scope.
    Superuser { token_sid: String },
    /// Scoped to one tenant.
    TenantKey { key_sid: String, tenant_sid: String },
    /// Scoped to one account.
    AccountKey {
        key_sid: String,
        tenant_sid: String,
        account_sid: String,
    },
    /// An account-scoped user holding a session.
    User {
        user_sid: String,
        tenant_sid: String,
        account_sid: String,
        roles: Vec<Role>,
        session_hash: String,
    },
}

impl Principal {
    /// The tenant this principal is confined to (None for the superuser).
    pub fn tenant_sid(&self) -> Option<&str> {
        match self {
            Principal::Superuser { .. } => None,
            Principal::TenantKey { tenant_sid, .. }
            | Principal::AccountKey { tenant_sid, .. }
            | Principal::User { tenant_sid, .. } => Some(tenant_sid),
        }
    }
    /// The account this principal is confined to (None for superuser and tenant keys).
    pub fn account_sid(&self) -> Option<&str> {
        match self {
            Principal::AccountKey { account_sid, .. } | Principal::User { account_sid, .. } => {
                Some(account_sid)
            }
            _ => None,
        }
    }
}

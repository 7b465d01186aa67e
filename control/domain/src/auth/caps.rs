//! Roles and capabilities: the one table that says who may do what.
//!
//! Every route names the capability it needs in its handler signature
//! (`Authz<cap::UsersWrite>`); [`capabilities_of`] maps a principal to its set. Data
//! scope (which tenant/account a principal may touch) is a separate check, see
//! [`super::Caller`].

use serde::{Deserialize, Serialize};

use super::Principal;

macro_rules! capabilities {
    ($($variant:ident => $name:literal, $marker:ident, $doc:literal;)*) => {
        /// A capability. The string form (`users:write`) is what docs and errors show.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Capability { $(#[doc = $doc] $variant),* }

        impl Capability {
            pub const ALL: &'static [Capability] = &[$(Capability::$variant),*];
            pub fn as_str(self) -> &'static str {
                match self { $(Capability::$variant => $name),* }
            }
            pub fn doc(self) -> &'static str {
                match self { $(Capability::$variant => $doc),* }
            }
        }

        /// Type-level capability markers for [`super::Authz`].
        pub mod cap {
            /// A capability marker type.
            pub trait Cap: Send + Sync + 'static {
                const CAP: super::Capability;
            }
            $(
                #[doc = $doc]
                #[derive(Debug)]
                pub struct $marker;
                impl Cap for $marker { const CAP: super::Capability = super::Capability::$variant; }
            )*
        }
    };
}

capabilities! {
    TenantsManage => "tenants:manage", TenantsManage, "Create, delete, restore and list every tenant; issue tenant API keys.";
    TenantsRead => "tenants:read", TenantsRead, "Read tenants in scope.";
    AccountsRead => "accounts:read", AccountsRead, "Read the administrative view of accounts in scope.";
    AccountsWrite => "accounts:write", AccountsWrite, "Create and update accounts in scope.";
    AccountKeysManage => "account_keys:manage", AccountKeysManage, "Issue, list and revoke account API keys in scope.";
    TrunksRead => "trunks:read", TrunksRead, "Read trunks of the tenant in scope.";
    TrunksWrite => "trunks:write", TrunksWrite, "Create and delete trunks of the tenant in scope.";
    FeatureFlagsRead => "feature_flags:read", FeatureFlagsRead, "Read per-tenant feature-flag rules in scope.";
    FeatureFlagsManage => "feature_flags:manage", FeatureFlagsManage, "Change per-tenant feature-flag rules.";
    UsersRead => "users:read", UsersRead, "List and read users of the account in scope.";
    UsersWrite => "users:write", UsersWrite, "Create, update and delete users; issue password-reset and magic-link tokens.";
    ProfileRead => "profile:read", ProfileRead, "Read the caller's own profile (users only).";
    PasswordChange => "password:change", PasswordChange, "Change the caller's own password (users only).";
    LimitsAccount => "limits:account", LimitsAccount, "See account-level usage limits (account.limits in the profile).";
    ResourcesRead => "resources:read", ResourcesRead, "Read account-owned resources (agents, numbers, scenarios, audio, …).";
    ResourcesWrite => "resources:write", ResourcesWrite, "Create, change and delete account-owned resources.";
    SttPresetsManage => "stt_presets:manage", SttPresetsManage, "Create, change and delete global STT dictionary presets.";
}

/// Roles a user can hold (the `roles` array of a User).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything within the account: users, resources, limits.
    Admin,
    /// Reads and writes the account's resources; reads users.
    Member,
    /// Reads the account's resources and users.
    Viewer,
}

impl Role {
    pub const ALL: &'static [Role] = &[Role::Admin, Role::Member, Role::Viewer];
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Member => "member",
            Role::Viewer => "viewer",
        }
    }
    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.iter().copied().find(|r| r.as_str() == s)
    }
}

use Capability::*;

const SUPERUSER: &[Capability] = Capability::ALL;
const TENANT_KEY: &[Capability] = &[
    TenantsRead,
    AccountsRead,
    AccountsWrite,
    AccountKeysManage,
    TrunksRead,
    TrunksWrite,
    FeatureFlagsRead,
    UsersRead,
    UsersWrite,
    LimitsAccount,
    ResourcesRead,
    ResourcesWrite,
];
const ACCOUNT_KEY: &[Capability] = &[
    UsersRead,
    UsersWrite,
    LimitsAccount,
    ResourcesRead,
    ResourcesWrite,
];
const ROLE_ADMIN: &[Capability] = &[
    UsersRead,
    UsersWrite,
    ProfileRead,
    PasswordChange,
    LimitsAccount,
    ResourcesRead,
    ResourcesWrite,
];
const ROLE_MEMBER: &[Capability] = &[
    UsersRead,
    ProfileRead,
    PasswordChange,
    ResourcesRead,
    ResourcesWrite,
];
const ROLE_VIEWER: &[Capability] = &[UsersRead, ProfileRead, PasswordChange, ResourcesRead];

/// The capabilities of one role.
pub fn role_capabilities(role: Role) -> &'static [Capability] {
    match role {
        Role::Admin => ROLE_ADMIN,
        Role::Member => ROLE_MEMBER,
        Role::Viewer => ROLE_VIEWER,
    }
}

/// Whether `principal` holds `cap`. A user holds the union of its roles' capabilities.
pub fn has_capability(principal: &Principal, cap: Capability) -> bool {
    match principal {
        Principal::Superuser { .. } => SUPERUSER.contains(&cap),
        Principal::TenantKey { .. } => TENANT_KEY.contains(&cap),
        Principal::AccountKey { .. } => ACCOUNT_KEY.contains(&cap),
        Principal::User { roles, .. } => roles.iter().any(|r| role_capabilities(*r).contains(&cap)),
    }
}

/// The principal kinds and their fixed capability sets, for documentation.
pub fn principal_table() -> [(&'static str, &'static [Capability]); 3] {
    [
        ("superuser", SUPERUSER),
        ("tenant API key", TENANT_KEY),
        ("account API key", ACCOUNT_KEY),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_list_every_capability_and_role() {
        let doc = include_str!("../../../../docs/auth.md");
        for c in Capability::ALL {
            assert!(
                doc.contains(&format!("`{}`", c.as_str())),
                "docs/auth.md lacks `{}`",
                c.as_str()
            );
        }
        for r in Role::ALL {
            assert!(
                doc.contains(&format!("`{}`", r.as_str())),
                "docs/auth.md lacks role `{}`",
                r.as_str()
            );
        }
    }
}

//! Bearer secrets: 256 random bits, base64url, behind a kind prefix. Only the SHA-256
//! hex digest of the whole string is stored.

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// What a secret is, told by its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Superuser,
    TenantKey,
    AccountKey,
    Session,
    PasswordReset,
    MagicLink,
    /// Legacy family account_token (HTTP Basic password).
    LegacyAccount,
}

impl TokenKind {
    pub fn prefix(self) -> &'static str {
        match self {
            TokenKind::Superuser => "cs_su_",
            TokenKind::TenantKey => "cs_tk_",
            TokenKind::AccountKey => "cs_ak_",
            TokenKind::Session => "cs_se_",
            TokenKind::PasswordReset => "cs_pr_",
            TokenKind::MagicLink => "cs_ml_",
            TokenKind::LegacyAccount => "cs_lt_",
        }
    }

    /// The kind of a presented secret, by prefix.
    pub fn of(secret: &str) -> Option<TokenKind> {
        [
            TokenKind::Superuser,
            TokenKind::TenantKey,
            TokenKind::AccountKey,
            TokenKind::Session,
            TokenKind::PasswordReset,
            TokenKind::MagicLink,
            TokenKind::LegacyAccount,
        ]
        .into_iter()
        .find(|k| secret.starts_with(k.prefix()))
    }
}

/// A fresh secret of `kind`.
pub fn generate(kind: TokenKind) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!(
        "{}{}",
        kind.prefix(),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// The stored form of a secret.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_secrets_are_distinct_and_typed() {
        let a = generate(TokenKind::Session);
        let b = generate(TokenKind::Session);
        assert_ne!(a, b);
        assert_eq!(TokenKind::of(&a), Some(TokenKind::Session));
        assert_eq!(TokenKind::of("nope"), None);
        assert_eq!(hash_secret(&a).len(), 64);
        assert_ne!(hash_secret(&a), hash_secret(&b));
    }
}

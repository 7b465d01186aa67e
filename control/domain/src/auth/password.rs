//! Password hashing with argon2id. The cost is configurable (tests use a cheap one);
//! the parameters are stored inside each PHC hash string, so verification works
//! whatever the current setting.

use argon2::{
    Algorithm, Argon2, Params, PasswordHash, PasswordHasher, PasswordVerifier, Version,
    password_hash::SaltString,
};

/// Minimum length of a new password (characters).
pub const MIN_PASSWORD_LEN: usize = 8;

/// argon2id cost parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordCost {
    pub memory_kib: u32,
    pub iterations: u32,
    pub parallelism: u32,
}

impl Default for PasswordCost {
    /// OWASP's argon2id recommendation (19 MiB, 2 iterations, 1 lane).
    fn default() -> Self {
        PasswordCost {
            memory_kib: 19 * 1024,
            iterations: 2,
            parallelism: 1,
        }
    }
}

impl PasswordCost {
    /// A cheap cost for tests only.
    pub fn fast_for_tests() -> Self {
        PasswordCost {
            memory_kib: 256,
            iterations: 1,
            parallelism: 1,
        }
    }
}

/// Hashes `password` into a PHC string.
pub fn hash_password(password: &str, cost: PasswordCost) -> anyhow::Result<String> {
    let params = Params::new(cost.memory_kib, cost.iterations, cost.parallelism, None)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params);
    let mut salt_bytes = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut salt_bytes);
    let salt = SaltString::encode_b64(&salt_bytes).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(argon
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .to_string())
}

/// Whether `password` matches the stored PHC hash (false for a malformed hash).
pub fn verify_password(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(h) => Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok(),
        Err(_) => false,
    }
}

/// Whether a new password is long enough.
pub fn long_enough(password: &str) -> bool {
    password.chars().count() >= MIN_PASSWORD_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_and_verify() {
        let h = hash_password("correct horse", PasswordCost::fast_for_tests()).unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("wrong horse", &h));
        assert!(!verify_password("x", "not a hash"));
        assert!(long_enough("12345678"));
        assert!(!long_enough("1234567"));
    }
}

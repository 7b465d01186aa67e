//! First superuser credential on a fresh install.
//!
//! * With an explicit token (`CALLSMITH_BOOTSTRAP_SUPERUSER_TOKEN`, for automation and
//!   tests) its hash is recorded (idempotently) and nothing is written to disk.
//! * Otherwise, when no superuser token exists yet, a random one is generated, only its
//!   hash is stored, and the secret is written once to `<data_dir>/superuser.token`
//!   (mode 0600, created exclusively). Later starts find a token and do nothing.

use std::{
    io::Write,
    path::{Path, PathBuf},
};

use crate::{
    auth::tokens::{self, TokenKind},
    ids::{new_sid, prefix},
    store::Store,
};

/// What [`ensure_superuser`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bootstrap {
    /// The explicit token is (now) a superuser credential.
    Explicit,
    /// A token was generated and written to this file.
    Generated(PathBuf),
    /// A superuser token already existed; nothing changed.
    Existing,
}

/// Ensures at least one superuser credential exists (see module docs).
pub async fn ensure_superuser(
    store: &Store,
    data_dir: &Path,
    explicit: Option<&str>,
) -> anyhow::Result<Bootstrap> {
    if let Some(token) = explicit {
        anyhow::ensure!(
            TokenKind::of(token) == Some(TokenKind::Superuser) && token.len() >= 6 + 32,
            "the bootstrap superuser token must start with `cs_su_` followed by at least 32 characters"
        );
        store
            .superuser_token_insert(
                &new_sid(prefix::SUPERUSER_TOKEN),
                "bootstrap (explicit)",
                &tokens::hash_secret(token),
            )
            .await?;
        return Ok(Bootstrap::Explicit);
    }
    if store.superuser_token_count().await? > 0 {
        return Ok(Bootstrap::Existing);
    }
    std::fs::create_dir_all(data_dir)?;
    let path = data_dir.join("superuser.token");
    let token = tokens::generate(TokenKind::Superuser);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(&path).map_err(|e| {
        anyhow::anyhow!(
            "cannot create {} ({e}); remove a stale file to bootstrap again",
            path.display()
        )
    })?;
    f.write_all(format!("{token}\n").as_bytes())?;
    f.sync_all()?;
    store
        .superuser_token_insert(
            &new_sid(prefix::SUPERUSER_TOKEN),
            "bootstrap (generated)",
            &tokens::hash_secret(&token),
        )
        .await?;
    Ok(Bootstrap::Generated(path))
}

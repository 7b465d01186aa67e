//! The key that signs this service's storage links and capability tokens: configured, or
//! created once in the data directory and read back on every start.

use std::path::{Path as FsPath, PathBuf};

use super::{ObjectError, ObjectsConfig};

pub(super) fn signing_key(cfg: &ObjectsConfig) -> Result<Vec<u8>, ObjectError> {
    if let Some(k) = &cfg.signing_key {
        if k.len() < 32 {
            return Err(ObjectError::Config(
                "objects.signing_key must be at least 32 characters".into(),
            ));
        }
        return Ok(k.as_bytes().to_vec());
    }
    let file = cfg.signing_key_file.clone().unwrap_or_else(|| {
        let mut f = cfg.local_dir.as_os_str().to_owned();
        f.push(".key");
        PathBuf::from(f)
    });
    read_or_create_key(&file)
}

pub(super) fn read_or_create_key(file: &FsPath) -> Result<Vec<u8>, ObjectError> {
    match std::fs::read_to_string(file) {
        Ok(s) if s.trim().len() >= 32 => return Ok(s.trim().as_bytes().to_vec()),
        Ok(_) => {
            return Err(ObjectError::Config(format!(
                "{}: signing key shorter than 32 characters",
                file.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(ObjectError::Config(format!("{}: {e}", file.display()))),
    }
    if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| ObjectError::Config(format!("{}: {e}", parent.display())))?;
    }
    let key = hex::encode(rand::random::<[u8; 32]>());
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(file) {
        Ok(mut f) => {
            use std::io::Write;
            f.write_all(key.as_bytes())
                .map_err(|e| ObjectError::Config(format!("{}: {e}", file.display())))?;
            Ok(key.into_bytes())
        }
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_or_create_key(file),
        Err(e) => Err(ObjectError::Config(format!("{}: {e}", file.display()))),
    }
}

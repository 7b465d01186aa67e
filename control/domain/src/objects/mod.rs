//! Object storage facade: where audio files, call recordings and call histories live.
//!
//! One [`Objects`] per process, built from [`ObjectsConfig`]: a local directory (the
//! default, under the data dir) or an S3-compatible bucket (endpoint, bucket, region,
//! keys; `allow_http` for a local endpoint such as MinIO). Callers address objects by a
//! relative *object path* (`audio/<account_sid>/aud_….wav`); [`Objects::uri`] gives the
//! canonical, never-expiring storage URI (`file:///…` or `s3://bucket/…`) the call runtime
//! reads by, and [`Objects::signed_link`] a time-bounded download link.
//!
//! Signed links: S3 presigns with its own credentials; the local provider has no URL of
//! its own, so its links are service URLs (`{public_url}/v1/storage/signed?…`) carrying an
//! HMAC-SHA256 over path, expiry and content type, checked by [`Objects::verify`] in the
//! public route that serves them. The same key mints non-expiring capability tokens
//! ([`Objects::capability_token`]) for URLs that must never expire (an audio file's
//! `location`).
//!
//! Local [`Objects::put`]s go through a semaphore of [`LOCAL_WRITERS`] permits. Each runs
//! on tokio's blocking pool and creates a staged file, then renames it into place in the
//! object's folder. A call history is written at every call's end. Unbounded, hundreds of
//! these writes at once contend in the kernel (the folder's lock, and choosing a free
//! inode) and starve the calls of CPU: at 500 calls a second outbound, the dialer paused
//! for 135–690 ms. Measured in `bench/reports/call_rate.md`.
//!
//! Account-owned objects keep the account sid as the second path segment
//! (`<kind>/<account_sid>/…`), so [`owner_of`] tells who may read a bare path; every
//! path the service writes is made in one place, the `paths` module.

use std::{path::PathBuf, sync::Arc, time::Duration};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt, stream::BoxStream};
use hmac::{Hmac, Mac};
use object_store::{
    Attribute, Attributes, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    WriteMultipart,
    aws::{AmazonS3, AmazonS3Builder},
    local::LocalFileSystem,
    path::Path as ObjPath,
    signer::Signer,
};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

pub mod media_type;
mod paths;
mod signing_key;
pub use paths::{BUCKET, CallObjects, audio_file, bucket_reference, owner_of, strip_bucket};

/// Default lifetime of a signed link (seconds).
pub const DEFAULT_LINK_TTL_SECS: u64 = 3600;
/// Longest lifetime a signed link may be given (seconds): seven days.
pub const MAX_LINK_TTL_SECS: u64 = 604_800;
/// Route serving local-provider signed links.
pub const SIGNED_ROUTE: &str = "/v1/storage/signed";

/// Which backend holds the objects (the `provider` field of stored resources; it
/// discriminates the URI scheme: `local` → `file://`, `s3` → `s3://`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    #[default]
    Local,
    S3,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Local => "local",
            Provider::S3 => "s3",
        }
    }
}

/// S3-compatible bucket settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct S3Config {
    /// Endpoint URL for S3-compatible servers (MinIO, …); unset means AWS.
    pub endpoint: Option<String>,
    pub bucket: String,
    pub region: String,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// Allow a plain-http endpoint (local servers).
    pub allow_http: bool,
    /// Virtual-hosted-style requests (`bucket.endpoint`) instead of path style.
    pub virtual_hosted_style: bool,
}

/// `[objects]` configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ObjectsConfig {
    pub provider: Provider,
    /// Directory of the local provider (created when missing).
    pub local_dir: PathBuf,
    pub s3: S3Config,
    /// Key for signed links and capability tokens (any string of ≥ 32 characters).
    /// Unset: read from `signing_key_file`, generated there (mode 0600) when missing.
    pub signing_key: Option<String>,
    /// Where the generated signing key lives; unset: `<local_dir>.key` (a sibling of the
    /// storage directory, never inside it).
    pub signing_key_file: Option<PathBuf>,
}

impl Default for ObjectsConfig {
    fn default() -> Self {
        ObjectsConfig {
            provider: Provider::Local,
            local_dir: PathBuf::from("data/objects"),
            s3: S3Config::default(),
            signing_key: None,
            signing_key_file: None,
        }
    }
}

/// Why an object operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("object not found")]
    NotFound,
    #[error("invalid object path: {0}")]
    InvalidPath(String),
    /// The streamed body exceeded the limit; nothing was stored.
    #[error("object larger than {0} bytes")]
    TooLarge(u64),
    /// The body stream failed (client went away); nothing was stored.
    #[error("upload interrupted: {0}")]
    Interrupted(String),
    #[error("storage: {0}")]
    Store(String),
    #[error("configuration: {0}")]
    Config(String),
}

impl From<object_store::Error> for ObjectError {
    fn from(e: object_store::Error) -> Self {
        match e {
            object_store::Error::NotFound { .. } => ObjectError::NotFound,
            object_store::Error::InvalidPath { source } => {
                ObjectError::InvalidPath(source.to_string())
            }
            other => ObjectError::Store(other.to_string()),
        }
    }
}

/// A time-bounded download link (the spec's Signed link).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SignedLink {
    pub signed_url: String,
    pub expires_at: DateTime<Utc>,
}

/// Why a local signed link was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("the link has expired")]
    Expired,
    #[error("the link signature is invalid")]
    BadSignature,
}

/// Metadata of a stored object.
#[derive(Debug, Clone)]
pub struct ObjectInfo {
    pub size: u64,
    pub content_type: Option<String>,
}

/// An object's size and version ([`Objects::version`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion {
    pub size: u64,
    pub version: String,
}

/// The storage handle (cheap to clone through `Arc`).
#[derive(Debug)]
pub struct Objects {
    store: Arc<dyn ObjectStore>,
    s3: Option<Arc<AmazonS3>>,
    provider: Provider,
    /// `file:///abs/dir` (no trailing slash) or `s3://bucket`.
    uri_root: String,
    key: Vec<u8>,
    public_url: String,
    /// Bounds local writes at once (see the module notes); `None` for S3.
    local_writes: Option<tokio::sync::Semaphore>,
}

/// Local object writes (file create, write, rename) under way at once.
pub const LOCAL_WRITERS: usize = 2;

type HmacSha256 = Hmac<Sha256>;

/// Chunk size of streamed uploads (S3 parts must be ≥ 5 MiB, except the last).
const PART_SIZE: usize = 5 * 1024 * 1024;

impl Objects {
    /// Opens the configured storage. `public_url` is the service's base URL, used in
    /// local-provider signed links.
    pub fn new(cfg: &ObjectsConfig, public_url: &str) -> Result<Objects, ObjectError> {
        let key = signing_key::signing_key(cfg)?;
        let public_url = public_url.trim_end_matches('/').to_string();
        match cfg.provider {
            Provider::Local => {
                std::fs::create_dir_all(&cfg.local_dir).map_err(|e| {
                    ObjectError::Config(format!("{}: {e}", cfg.local_dir.display()))
                })?;
                let dir = std::fs::canonicalize(&cfg.local_dir).map_err(|e| {
                    ObjectError::Config(format!("{}: {e}", cfg.local_dir.display()))
                })?;
                let fs = LocalFileSystem::new_with_prefix(&dir)?.with_automatic_cleanup(true);
                let root = url::Url::from_directory_path(&dir).map_err(|_| {
                    ObjectError::Config(format!("{} is not absolute", dir.display()))
                })?;
                Ok(Objects {
                    store: Arc::new(fs),
                    s3: None,
                    provider: Provider::Local,
                    uri_root: root.as_str().trim_end_matches('/').to_string(),
                    key,
                    public_url,
                    local_writes: Some(tokio::sync::Semaphore::new(LOCAL_WRITERS)),
                })
            }
            Provider::S3 => {
                let s = &cfg.s3;
                if s.bucket.is_empty() {
                    return Err(ObjectError::Config("objects.s3.bucket is required".into()));
                }
                let mut b = AmazonS3Builder::new()
                    .with_bucket_name(&s.bucket)
                    .with_region(if s.region.is_empty() {
                        "us-east-1"
                    } else {
                        &s.region
                    })
                    .with_allow_http(s.allow_http)
                    .with_virtual_hosted_style_request(s.virtual_hosted_style);
                if let Some(e) = &s.endpoint {
                    b = b.with_endpoint(e);
                }
                if let Some(k) = &s.access_key_id {
                    b = b.with_access_key_id(k);
                }
                if let Some(k) = &s.secret_access_key {
                    b = b.with_secret_access_key(k);
                }
                let s3 = Arc::new(b.build()?);
                Ok(Objects {
                    store: s3.clone(),
                    s3: Some(s3),
                    provider: Provider::S3,
                    uri_root: format!("s3://{}", s.bucket),
                    key,
                    public_url,
                    local_writes: None,
                })
            }
        }
    }

    /// The service's base URL (no trailing slash) its own links start with.
    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The canonical storage URI of an object path (stable, never expires).
    pub fn uri(&self, path: &str) -> String {
        format!("{}/{}", self.uri_root, path.trim_start_matches('/'))
    }

    /// The object path a reference names: a canonical URI of this store, or a bare
    /// object path (a leading `/` is ignored). None when it names another store.
    pub fn path_of(&self, reference: &str) -> Option<String> {
        let rest = if reference.contains("://") {
            reference.strip_prefix(&format!("{}/", self.uri_root))?
        } else {
            reference.trim_start_matches('/')
        };
        let p = ObjPath::parse(rest).ok()?;
        (!p.as_ref().is_empty()).then(|| p.as_ref().to_string())
    }

    fn obj_path(path: &str) -> Result<ObjPath, ObjectError> {
        let p = ObjPath::parse(path).map_err(|e| ObjectError::InvalidPath(e.to_string()))?;
        if p.as_ref().is_empty() {
            return Err(ObjectError::InvalidPath("empty path".into()));
        }
        Ok(p)
    }

    fn attributes(&self, content_type: Option<&str>) -> Attributes {
        let mut a = Attributes::new();
        // The local filesystem keeps no metadata (object_store refuses attributes there);
        // callers that need the type keep it in their own row. S3 serves presigned links
        // with these: only an allow-listed type, and always as a download.
        if self.provider == Provider::S3
            && let Some(ct) = content_type
        {
            a.insert(
                Attribute::ContentType,
                media_type::served_type(ct).to_string().into(),
            );
            a.insert(Attribute::ContentDisposition, "attachment".into());
        }
        a
    }

    /// Stores `bytes` at `path` (replacing any object there).
    pub async fn put(
        &self,
        path: &str,
        bytes: Bytes,
        content_type: Option<&str>,
    ) -> Result<(), ObjectError> {
        let p = Self::obj_path(path)?;
        let opts = PutOptions {
            attributes: self.attributes(content_type),
            ..Default::default()
        };
        // The semaphore is never closed, so acquiring only waits.
        let _permit = match &self.local_writes {
            Some(s) => s.acquire().await.ok(),
            None => None,
        };
        self.store
            .put_opts(&p, PutPayload::from_bytes(bytes), opts)
            .await?;
        Ok(())
    }

    /// Streams a body into `path` without holding it in memory (multipart upload).
    /// More than `limit` bytes, or a failing stream, aborts the upload: nothing is left
    /// behind and [`ObjectError::TooLarge`] / [`ObjectError::Interrupted`] is returned.
    /// Returns the stored size.
    pub async fn put_stream<S, E>(
        &self,
        path: &str,
        content_type: Option<&str>,
        mut body: S,
        limit: u64,
    ) -> Result<u64, ObjectError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let p = Self::obj_path(path)?;
        let opts = PutMultipartOptions {
            attributes: self.attributes(content_type),
            ..Default::default()
        };
        let upload = self.store.put_multipart_opts(&p, opts).await?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
        let mut total: u64 = 0;
        let failure = loop {
            match body.next().await {
                None => break None,
                Some(Err(e)) => break Some(ObjectError::Interrupted(e.to_string())),
                Some(Ok(chunk)) => {
                    total += chunk.len() as u64;
                    if total > limit {
                        break Some(ObjectError::TooLarge(limit));
                    }
                    if let Err(e) = w.wait_for_capacity(4).await {
                        break Some(e.into());
                    }
                    w.put(chunk);
                }
            }
        };
        match failure {
            None => {
                w.finish().await?;
                Ok(total)
            }
            Some(e) => {
                if let Err(abort) = w.abort().await {
                    tracing::warn!(path, error = %abort, "aborting a failed upload");
                }
                Err(e)
            }
        }
    }

    /// The whole object.
    pub async fn get(&self, path: &str) -> Result<Bytes, ObjectError> {
        let p = Self::obj_path(path)?;
        Ok(self.store.get(&p).await?.bytes().await?)
    }

    /// The object as a byte stream, with its size and (S3 only) stored content type.
    pub async fn stream(
        &self,
        path: &str,
    ) -> Result<(ObjectInfo, BoxStream<'static, Result<Bytes, ObjectError>>), ObjectError> {
        let p = Self::obj_path(path)?;
        let got = self.store.get(&p).await?;
        let info = ObjectInfo {
            size: got.meta.size,
            content_type: got
                .attributes
                .get(&Attribute::ContentType)
                .map(|v| v.to_string()),
        };
        Ok((
            info,
            got.into_stream()
                .map(|r| r.map_err(ObjectError::from))
                .boxed(),
        ))
    }

    /// Size of an object (NotFound when absent).
    pub async fn head(&self, path: &str) -> Result<u64, ObjectError> {
        Ok(self.version(path).await?.size)
    }

    /// The object's size and version: its ETag where the store keeps one (S3; the local
    /// store derives one from the file's inode, size and modification time), else its
    /// modification time and size. An object written again under the same path gets a
    /// new version, so what is derived from its bytes (a decoded prompt) is keyed by it.
    pub async fn version(&self, path: &str) -> Result<ObjectVersion, ObjectError> {
        let p = Self::obj_path(path)?;
        let meta = self.store.head(&p).await?;
        let version = match (&meta.e_tag, &meta.version) {
            (Some(tag), _) => tag.clone(),
            (None, Some(v)) => v.clone(),
            (None, None) => format!(
                "{}-{}",
                meta.last_modified.timestamp_nanos_opt().unwrap_or_default(),
                meta.size
            ),
        };
        Ok(ObjectVersion {
            size: meta.size,
            version,
        })
    }

    /// Removes an object; an absent object is not an error (deletes are retried).
    pub async fn delete(&self, path: &str) -> Result<(), ObjectError> {
        let p = Self::obj_path(path)?;
        match self.store.delete(&p).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// A link downloading `path` until `ttl` from now. S3: a presigned GET; local: a
    /// service URL signed with [`Objects::sign`]. `content_type` is what the local route
    /// serves the bytes as, mapped onto the allow-list ([`media_type::served_type`]); S3
    /// serves the stored type.
    pub async fn signed_link(
        &self,
        path: &str,
        ttl: Duration,
        content_type: Option<&str>,
    ) -> Result<SignedLink, ObjectError> {
        let p = Self::obj_path(path)?;
        let expires_at = Utc::now() + ttl;
        let signed_url = match &self.s3 {
            Some(s3) => s3.signed_url(http::Method::GET, &p, ttl).await?.to_string(),
            None => self.sign(
                p.as_ref(),
                expires_at.timestamp(),
                content_type.map(media_type::served_type),
            ),
        };
        Ok(SignedLink {
            signed_url,
            expires_at,
        })
    }

    fn mac(&self, parts: &[&str]) -> HmacSha256 {
        // The key length is never rejected by HMAC; fall back to an empty-key MAC is unreachable.
        let mut m = <HmacSha256 as Mac>::new_from_slice(&self.key).unwrap_or_else(|_| {
            <HmacSha256 as Mac>::new_from_slice(&[0u8; 32]).expect("32-byte key")
        });
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                m.update(b"\n");
            }
            m.update(p.as_bytes());
        }
        m
    }

    /// The local signed URL for `path` valid until `expires` (Unix seconds).
    pub fn sign(&self, path: &str, expires: i64, content_type: Option<&str>) -> String {
        let ct = content_type.unwrap_or("");
        let sig = hex::encode(
            self.mac(&["signed-link", path, &expires.to_string(), ct])
                .finalize()
                .into_bytes(),
        );
        let mut u = format!("{}{SIGNED_ROUTE}?", self.public_url);
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        q.append_pair("path", path)
            .append_pair("expires", &expires.to_string());
        if !ct.is_empty() {
            q.append_pair("ct", ct);
        }
        q.append_pair("sig", &sig);
        u.push_str(&q.finish());
        u
    }

    /// Checks a local signed link's parameters (constant-time signature comparison).
    pub fn verify(
        &self,
        path: &str,
        expires: i64,
        content_type: Option<&str>,
        sig: &str,
    ) -> Result<(), LinkError> {
        let Ok(raw) = hex::decode(sig) else {
            return Err(LinkError::BadSignature);
        };
        self.mac(&[
            "signed-link",
            path,
            &expires.to_string(),
            content_type.unwrap_or(""),
        ])
        .verify_slice(&raw)
        .map_err(|_| LinkError::BadSignature)?;
        if expires <= Utc::now().timestamp() {
            return Err(LinkError::Expired);
        }
        Ok(())
    }

    /// A link for a URL this service signed itself: `(path, content type)` when `url` is
    /// a valid, unexpired local signed link of this store; None when it is not one of ours.
    pub fn resolve_signed_url(
        &self,
        url: &str,
    ) -> Option<Result<(String, Option<String>), LinkError>> {
        let rest = url.strip_prefix(&format!("{}{SIGNED_ROUTE}?", self.public_url))?;
        let mut path = None;
        let mut expires = None;
        let mut ct = None;
        let mut sig = None;
        for (k, v) in url::form_urlencoded::parse(rest.as_bytes()) {
            match k.as_ref() {
                "path" => path = Some(v.into_owned()),
                "expires" => expires = v.parse::<i64>().ok(),
                "ct" => ct = Some(v.into_owned()),
                "sig" => sig = Some(v.into_owned()),
                _ => {}
            }
        }
        let (Some(path), Some(expires), Some(sig)) = (path, expires, sig) else {
            return Some(Err(LinkError::BadSignature));
        };
        Some(
            self.verify(&path, expires, ct.as_deref(), &sig)
                .map(|()| (path, ct)),
        )
    }

    /// A non-expiring token proving the holder was given access to `subject` (e.g. an
    /// audio id); 32 hex digits of HMAC.
    pub fn capability_token(&self, subject: &str) -> String {
        let full = self.mac(&["capability", subject]).finalize().into_bytes();
        hex::encode(&full[..16])
    }

    /// Constant-time check of a [`Objects::capability_token`].
    pub fn verify_capability_token(&self, subject: &str, token: &str) -> bool {
        let Ok(raw) = hex::decode(token) else {
            return false;
        };
        self.mac(&["capability", subject])
            .verify_truncated_left(&raw)
            .is_ok()
            && raw.len() == 16
    }
}

/// Kinds of account-owned objects (`<kind>/<account_sid>/…`); a hard tenant delete
/// removes every object of its accounts under each of them. `calls` holds each
/// communication's artefacts (history, recording, speech turns) as the engine writes them.
pub const ACCOUNT_KINDS: &[&str] = &["audio", "calls"];

impl Objects {
    /// Removes every object under `prefix` (a directory-like path); returns how many.
    pub async fn delete_prefix(&self, prefix: &str) -> Result<usize, ObjectError> {
        let p = Self::obj_path(prefix)?;
        let metas: Vec<object_store::ObjectMeta> = self
            .store
            .list(Some(&p))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        for m in &metas {
            match self.store.delete(&m.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(metas.len())
    }
}

/// Purges an account's stored objects when its tenant is hard-deleted (registered on
/// the store by [`crate::api::AppState::try_new`]).
#[derive(Debug)]
pub struct ObjectsPurger(pub Arc<Objects>);

#[async_trait::async_trait]
impl crate::store::TenantPurger for ObjectsPurger {
    fn name(&self) -> &str {
        "objects"
    }
    async fn purge_account(&self, _tenant_sid: &str, account_sid: &str) -> anyhow::Result<()> {
        if account_sid.is_empty() || account_sid.contains('/') {
            return Ok(());
        }
        for kind in ACCOUNT_KINDS {
            self.0
                .delete_prefix(&format!("{kind}/{account_sid}"))
                .await?;
        }
        Ok(())
    }
}

/// Validates a requested link lifetime: default 3600 s, 1..=604800 s. `param` names the
/// query parameter it came in, for the refusal.
pub fn link_ttl(param: &str, requested: Option<u64>) -> Result<Duration, String> {
    match requested {
        None => Ok(Duration::from_secs(DEFAULT_LINK_TTL_SECS)),
        Some(0) => Err(format!("{param}: must be at least 1 second")),
        Some(t) if t > MAX_LINK_TTL_SECS => Err(format!(
            "{param}: must be at most {MAX_LINK_TTL_SECS} seconds"
        )),
        Some(t) => Ok(Duration::from_secs(t)),
    }
}

#[cfg(test)]
mod tests;

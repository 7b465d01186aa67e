//! The one resolver of audio references: every audio a call plays by reference (an
//! `audio_file` brick's url, a prompt's `file.url`) and every source a recognition run
//! reads is resolved here, so what validation accepts is exactly what a call will fetch.
//!
//! A reference of an account is one of:
//! * an audio file id (`aud_…`) of that account, or the audio file's `location`
//!   (`{public_url}/v1/audio/{id}/content?token=…`);
//! * a storage object that account owns (`<kind>/<account_sid>/…`), named by its canonical
//!   storage URI (`file:///…/objects/…` or `s3://bucket/…`, as an audio file's `url`) or by
//!   a signed link of this service;
//! * a public http(s) URL, fetched through the guarded client
//!   ([`crate::guarded_http::GuardedClient`]) within [`FETCH_TIMEOUT`] and [`MAX_AUDIO_BYTES`].
//!
//! Nothing else: no local file paths, no bare object paths, no other scheme (`file://`
//! outside the storage root, another bucket, `ftp://`, `data:`…), no object of another
//! account (answered as "not found", so a reference does not reveal what exists).

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use thiserror::Error;

use crate::{
    guarded_http::{GuardedClient, OutboundError},
    ids::{has_prefix, prefix},
    objects::{ObjectError, Objects, owner_of},
    store::{Store, StoreError},
};

/// Largest audio a call plays by reference, and the largest audio file accepted for
/// upload (the spec's upload limit).
pub const MAX_AUDIO_BYTES: u64 = 32 * 1024 * 1024;

/// Time allowed to fetch an audio URL (connect, every redirect, the body).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a reference cannot be played.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AudioRefError {
    /// The form of the reference is not allowed (a local path, a foreign scheme, a
    /// non-public address). Permanent.
    #[error("audio reference refused: {0}")]
    Refused(String),
    /// Nothing this account may play is there (no such audio file or object, or one of
    /// another account).
    #[error("{0}")]
    NotFound(String),
    /// The audio is allowed but could not be read now (storage or network failure, a
    /// non-2xx answer, too large, too slow).
    #[error("{0}")]
    Unavailable(String),
}

/// What a reference names, before any lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AudioRef {
    /// An audio file id.
    Audio(String),
    /// A storage object path.
    Object(String),
    /// A public http(s) URL.
    Remote(String),
}

/// The resolver. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AudioResolver {
    store: Store,
    objects: Arc<Objects>,
    http: GuardedClient,
}

impl AudioResolver {
    pub fn new(store: Store, objects: Arc<Objects>, http: GuardedClient) -> AudioResolver {
        AudioResolver {
            store,
            objects,
            http,
        }
    }

    /// Classifies a reference by its text (no lookup, no DNS).
    pub fn parse(&self, reference: &str) -> Result<AudioRef, AudioRefError> {
        let r = reference.trim();
        if r.is_empty() {
            return Err(AudioRefError::Refused("the reference is empty".into()));
        }
        if r.chars().any(char::is_control) {
            return Err(AudioRefError::Refused(
                "the reference contains control characters".into(),
            ));
        }
        if has_prefix(r, prefix::AUDIO) && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Ok(AudioRef::Audio(r.to_string()));
        }
        let Some((scheme, _)) = r.split_once("://") else {
            return Err(AudioRefError::Refused(format!(
                "{r:?} is not an audio reference: use an audio file id (aud_…), its location or url, \
                 a storage URI or signed link of this account's objects, or a public http(s) URL"
            )));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme == "http" || scheme == "https" {
            if let Some(id) = self.own_audio_location(r) {
                return Ok(AudioRef::Audio(id));
            }
            if let Some(signed) = self.objects.resolve_signed_url(r) {
                return match signed {
                    Ok((path, _)) => Ok(AudioRef::Object(path)),
                    Err(e) => Err(AudioRefError::NotFound(format!("signed link: {e}"))),
                };
            }
            if let Some(why) = self.http.refusal(r) {
                return Err(AudioRefError::Refused(why));
            }
            return Ok(AudioRef::Remote(r.to_string()));
        }
        match self.objects.path_of(r) {
            Some(path) => Ok(AudioRef::Object(path)),
            None => Err(AudioRefError::Refused(format!(
                "{scheme}:// is not this service's storage; only its own storage URIs and public http(s) URLs are fetched"
            ))),
        }
    }

    /// The audio id of a `location` URL of this service (`{public_url}/v1/audio/{id}/content…`).
    fn own_audio_location(&self, r: &str) -> Option<String> {
        let rest = r.strip_prefix(self.objects.public_url())?;
        let rest = rest.strip_prefix("/v1/audio/")?;
        let id = rest.split(['/', '?', '#']).next()?;
        (has_prefix(id, prefix::AUDIO)
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then(|| id.to_string())
    }

    /// The object path of an audio file or object the account owns.
    async fn owned_path(
        &self,
        account_sid: &str,
        r: AudioRef,
    ) -> Result<Option<String>, AudioRefError> {
        match r {
            AudioRef::Audio(id) => {
                let rec = self.store.audio_get(&id).await.map_err(unavailable)?;
                match rec {
                    Some(a) if a.account_sid == account_sid => Ok(Some(a.object_path)),
                    _ => Err(AudioRefError::NotFound(format!(
                        "audio file {id} not found"
                    ))),
                }
            }
            AudioRef::Object(path) => {
                if owner_of(&path) == Some(account_sid) {
                    Ok(Some(path))
                } else {
                    Err(AudioRefError::NotFound(format!("object {path} not found")))
                }
            }
            AudioRef::Remote(_) => Ok(None),
        }
    }

    /// Whether `account_sid` may play `reference`: its form is allowed, an audio file or
    /// object exists and is the account's own; a URL is judged by its text (its host is
    /// resolved and checked again when fetched). Validation uses this.
    pub async fn check(&self, account_sid: &str, reference: &str) -> Result<(), AudioRefError> {
        let r = self.parse(reference)?;
        let is_object = matches!(r, AudioRef::Object(_));
        // An audio file is known by its row; an object named directly must exist.
        if let Some(path) = self.owned_path(account_sid, r).await?
            && is_object
        {
            match self.objects.head(&path).await {
                Ok(_) => {}
                Err(ObjectError::NotFound) => {
                    return Err(AudioRefError::NotFound(format!("object {path} not found")));
                }
                Err(e) => return Err(AudioRefError::Unavailable(e.to_string())),
            }
        }
        Ok(())
    }

    /// Like [`AudioResolver::fetch`] for stored audio only (an audio file or an object of
    /// the account): a URL elsewhere is refused. Recognition runs read through this.
    pub async fn fetch_stored(
        &self,
        account_sid: &str,
        reference: &str,
    ) -> Result<Bytes, AudioRefError> {
        if let AudioRef::Remote(url) = self.parse(reference)? {
            return Err(AudioRefError::Refused(format!(
                "{url:?} is not stored audio: use an audio file id, its location or url, or a signed link of this service"
            )));
        }
        self.fetch(account_sid, reference).await
    }

    /// The bytes `account_sid` may play for `reference` (see the module doc). A URL is
    /// fetched through the guarded client: non-public targets and redirects into them are
    /// refused, the body is capped at [`MAX_AUDIO_BYTES`] and the fetch at [`FETCH_TIMEOUT`].
    /// Callers that must stop when a call ends race this against its end.
    pub async fn fetch(&self, account_sid: &str, reference: &str) -> Result<Bytes, AudioRefError> {
        match self.locate(account_sid, reference).await? {
            Located::Stored(stored) => self.read(&stored).await,
            Located::Remote(url) => self.fetch_remote(&url).await,
        }
    }

    /// Where `account_sid`'s `reference` is, with the ownership and size checks of
    /// [`AudioResolver::fetch`] done and nothing read yet: stored audio with its object
    /// version (the identity a decoded prompt is shared under), or a public URL.
    pub async fn locate(
        &self,
        account_sid: &str,
        reference: &str,
    ) -> Result<Located, AudioRefError> {
        let r = self.parse(reference)?;
        match r {
            AudioRef::Remote(url) => return Ok(Located::Remote(url)),
            // An audio file's object is written once, before its row, under a path named
            // by its id, and deleted only after the row: the row (kept in memory on
            // SQLite) is proof enough, and its id and creation time are the version.
            AudioRef::Audio(id) => {
                let rec = self.store.audio_get(&id).await.map_err(unavailable)?;
                return match rec {
                    Some(a) if a.account_sid == account_sid => stored_audio_file(a),
                    _ => Err(AudioRefError::NotFound(format!(
                        "audio file {id} not found"
                    ))),
                };
            }
            // An audio file's object named by its storage URI or a signed link is the same
            // audio as the file's id: one identity.
            AudioRef::Object(ref path) => {
                if let Some(sid) = audio_file_sid(path)
                    && let Some(a) = self.store.audio_get(sid).await.map_err(unavailable)?
                    && a.account_sid == account_sid
                    && a.object_path == *path
                {
                    return stored_audio_file(a);
                }
            }
        }
        let Some(path) = self.owned_path(account_sid, r).await? else {
            return Err(AudioRefError::NotFound("nothing to play".into()));
        };
        match self.objects.version(&path).await {
            Ok(v) if v.size > MAX_AUDIO_BYTES => Err(AudioRefError::Unavailable(format!(
                "object {path} is larger than {MAX_AUDIO_BYTES} bytes"
            ))),
            Ok(v) => Ok(Located::Stored(StoredAudio {
                path,
                version: v.version,
            })),
            Err(ObjectError::NotFound) => {
                Err(AudioRefError::NotFound(format!("object {path} not found")))
            }
            Err(e) => Err(AudioRefError::Unavailable(e.to_string())),
        }
    }

    /// The bytes of located stored audio.
    pub async fn read(&self, stored: &StoredAudio) -> Result<Bytes, AudioRefError> {
        let path = &stored.path;
        self.objects.get(path).await.map_err(|e| match e {
            ObjectError::NotFound => AudioRefError::NotFound(format!("object {path} not found")),
            e => AudioRefError::Unavailable(e.to_string()),
        })
    }

    /// A public URL's bytes through the guarded client.
    pub async fn fetch_remote(&self, url: &str) -> Result<Bytes, AudioRefError> {
        self.http
            .get_bytes(url, FETCH_TIMEOUT, MAX_AUDIO_BYTES as usize)
            .await
            .map_err(|e| match e {
                OutboundError::Refused(m) => AudioRefError::Refused(m),
                other => AudioRefError::Unavailable(format!("fetching {url}: {other}")),
            })
    }
}

/// A reference located by [`AudioResolver::locate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// Audio in this service's storage that the account owns.
    Stored(StoredAudio),
    /// A public http(s) URL (fetched through [`AudioResolver::fetch_remote`]).
    Remote(String),
}

/// Stored audio an account may play: its object path and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAudio {
    pub path: String,
    pub version: String,
}

impl StoredAudio {
    /// The identity of these bytes: the path (whose extension tells the decoder the
    /// format) and, after `#`, the version; a replaced object is a new identity.
    pub fn identity(&self) -> String {
        format!("{}#{}", self.path, self.version)
    }
}

/// An audio file located by its row: its object is written once, before the row, under a
/// path named by its id, and deleted only after the row, so the row is proof enough and its
/// id and creation time are the version.
fn stored_audio_file(a: crate::store::AudioRecord) -> Result<Located, AudioRefError> {
    if a.size_bytes as u64 > MAX_AUDIO_BYTES {
        return Err(AudioRefError::Unavailable(format!(
            "object {} is larger than {MAX_AUDIO_BYTES} bytes",
            a.object_path
        )));
    }
    Ok(Located::Stored(StoredAudio {
        version: format!("{}@{}", a.sid, a.created_at.timestamp_micros()),
        path: a.object_path,
    }))
}

/// The audio file id an object path names (`audio/<account>/<aud_…>.<ext>`), if any.
fn audio_file_sid(path: &str) -> Option<&str> {
    let name = path.strip_prefix("audio/")?.split('/').nth(1)?;
    let sid = name.split('.').next()?;
    has_prefix(sid, prefix::AUDIO).then_some(sid)
}

fn unavailable(e: StoreError) -> AudioRefError {
    AudioRefError::Unavailable(e.to_string())
}

//! Audio files (POST/GET/DELETE /v1/audio…) and the public routes serving stored bytes:
//! an audio file's never-expiring `location` and local-provider signed links.
//!
//! Upload: the `file` part of a multipart body is streamed into object storage as it
//! arrives (never held whole in memory). Above 32 MiB the upload is aborted, nothing is
//! stored, and the answer is 413 `file_too_large`. A missing `file` part or an empty file
//! is 400. The stored type follows [`crate::objects::media_type`]: the part's declared
//! type must be a well-formed, allow-listed audio type (or application/octet-stream, or
//! none) and the first bytes must be that format; it is stored under its canonical name
//! (audio/x-wav as audio/wav). Refusals: 400 `unsupported_content_type` for any other
//! declared type, 415 `content_type_mismatch` when the bytes are not the declared format
//! or are markup. `location` serves the bytes publicly from this origin, which also
//! serves the console, so every download carries the allow-listed type, `nosniff`, a
//! sandboxing CSP and `Content-Disposition: attachment` ([`serve_object`]).
//!
//! `location` is `{public_url}/v1/audio/{id}/content?token=…`: public, no bearer needed,
//! never expiring; the token is an HMAC of the id under the storage signing key, so the
//! URL is unguessable and safe to embed in scenario content. Deleting the audio file
//! ends it.

use std::time::Duration;

use axum::{
    body::Body,
    extract::{Multipart, State, multipart::MultipartRejection},
    http::{HeaderValue, StatusCode, header},
    response::Response,
};
use bytes::{Bytes, BytesMut};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::api::caller::{Authz, Caller};
use crate::{
    api::{ApiError, ApiResult, AppState, ErrorBody, Json, Page, PageParams, Path, Query},
    auth::cap,
    ids::{has_prefix, new_sid, prefix},
    objects::{
        LinkError, ObjectError, SIGNED_ROUTE, SignedLink, link_ttl,
        media_type::{self, Refusal, SNIFF_LEN},
    },
    store::{AudioRecord, NewAudio},
};

pub use crate::audio_ref::MAX_AUDIO_BYTES;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        // Uploads are bounded by the streaming check below, not by the 2 MB default.
        .routes(routes!(upload_audio))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .routes(routes!(list_audio))
        .routes(routes!(get_audio, delete_audio))
        .routes(routes!(audio_content))
        .routes(routes!(audio_signed_link))
        .routes(routes!(signed_object))
}

/// An audio file.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Audio {
    /// `aud_`-prefixed id.
    pub id: String,
    /// Stable public service URL serving the file; never expires.
    pub location: String,
    /// Stored basename: `<id>.wav` (the id carries the `aud_` prefix).
    pub filename: String,
    /// The type the file is served with: audio/wav, audio/mpeg, audio/ogg, audio/flac or
    /// application/octet-stream.
    pub content_type: String,
    /// Canonical storage object URI (`file:///…` or `s3://bucket/…`).
    pub url: String,
    /// Storage provider holding the object: `local` or `s3`.
    pub provider: String,
    /// The filename the client sent (provenance; empty when none).
    pub original_filename: String,
    pub size_bytes: i64,
    pub created_at: DateTime<Utc>,
}

fn view(state: &AppState, r: &AudioRecord) -> Audio {
    let token = state.objects.capability_token(&r.sid);
    Audio {
        id: r.sid.clone(),
        location: format!(
            "{}/v1/audio/{}/content?token={token}",
            state.settings.public_url.trim_end_matches('/'),
            r.sid
        ),
        filename: basename(&r.object_path).to_string(),
        content_type: media_type::served_type(&r.content_type).to_string(),
        url: r.url.clone(),
        provider: r.provider.clone(),
        original_filename: r.original_filename.clone(),
        size_bytes: r.size_bytes,
        created_at: r.created_at,
    }
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Multipart body of POST /v1/audio (documentation only): one part, `file`; any other
/// part is refused, as unknown fields of a JSON body are.
#[derive(serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct AudioUpload {
    /// The audio bytes. The part's Content-Type: audio/wav, audio/mpeg, audio/ogg,
    /// audio/flac (or an alias such as audio/x-wav), application/octet-stream, or none;
    /// the bytes must be the declared format, and are stored under its canonical name.
    /// With none or application/octet-stream, WAV, MPEG, Ogg and FLAC bytes take their
    /// type and other bytes are stored as application/octet-stream.
    #[schema(value_type = String, format = Binary, min_length = 1)]
    file: Vec<u8>,
}

fn refused(r: Refusal) -> ApiError {
    match r {
        Refusal::Unsupported(m) => {
            ApiError::bad_request("unsupported_content_type", format!("file: {m}"))
        }
        Refusal::Mismatch(m) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content_type_mismatch",
            format!("file: {m}"),
        ),
    }
}

fn interrupted(m: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request("invalid_body", format!("file: upload interrupted: {m}"))
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "file_too_large",
        format!("file: larger than {MAX_AUDIO_BYTES} bytes (32 MiB)"),
    )
}

/// Reads the rest of an over-limit body (bounded in time) so the client receives the
/// 413 instead of a reset connection.
async fn drain(mp: &mut Multipart) {
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(mut f)) = mp.next_field().await {
            while let Ok(Some(_)) = f.chunk().await {}
        }
    })
    .await;
}

/// Upload an audio file (multipart part `file`). Above 32 MiB: 413, nothing stored. The
/// declared type must be an allow-listed audio type (or application/octet-stream, or
/// none) and the bytes that format; refused uploads store nothing.
#[utoipa::path(post, path = "/v1/audio", tag = "audio",
    request_body(content = AudioUpload, content_type = "multipart/form-data"),
    params(("X-Account-Sid" = Option<String>, Header, description = "Account; required for the superuser and tenant keys")), security(("bearer" = [])),
    responses((status = 201, body = Audio),
        (status = 400, body = ErrorBody, description = "`unsupported_content_type`: the part's type is malformed or not an allow-listed audio type; also `file_required`, `empty_file`, `unknown_part`, `invalid_body`"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 415, body = ErrorBody, description = "`content_type_mismatch`: the bytes are not the declared audio format, or are markup (HTML, SVG, XML)"),
        (status = 500, body = ErrorBody)))]
async fn upload_audio(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    multipart: Result<Multipart, MultipartRejection>,
) -> ApiResult<(StatusCode, Json<Audio>)> {
    let account = auth.account_scope(&state).await?;
    let mut mp = multipart.map_err(|e| {
        ApiError::bad_request("invalid_body", format!("multipart body: {}", e.body_text()))
    })?;
    let sid = new_sid(prefix::AUDIO);
    let path = crate::objects::audio_file(&account.sid, &sid);
    let mut stored: Option<(&'static str, String, u64)> = None;
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                if stored.is_some() {
                    let _ = state.objects.delete(&path).await;
                }
                return Err(ApiError::bad_request(
                    "invalid_body",
                    format!("multipart body: {}", e.body_text()),
                ));
            }
        };
        if field.name() == Some("file") && stored.is_none() {
            // The raw header, not the parsed one: a value the multipart parser cannot read
            // must be refused, not taken for an absent type.
            let declared = media_type::declared(
                field
                    .headers()
                    .get(header::CONTENT_TYPE)
                    .map(HeaderValue::as_bytes),
            );
            let declared = match declared {
                Ok(d) => d,
                Err(r) => {
                    drop(field);
                    drain(&mut mp).await;
                    return Err(refused(r));
                }
            };
            let filename: String = field.file_name().unwrap_or("").chars().take(255).collect();
            if let Some(message) =
                crate::text_field::refusal("filename", &filename, crate::text_field::TextKind::Line)
            {
                drop(field);
                drain(&mut mp).await;
                return Err(ApiError::bad_request("invalid_filename", message));
            }
            // The first bytes decide the stored type before anything reaches storage;
            // the rest is streamed behind them.
            let mut field = field;
            let mut head = BytesMut::new();
            while head.len() < SNIFF_LEN {
                match field.chunk().await {
                    Ok(Some(c)) => head.extend_from_slice(&c),
                    Ok(None) => break,
                    Err(e) => return Err(interrupted(e.body_text())),
                }
            }
            if head.is_empty() {
                return Err(ApiError::bad_request("empty_file", "file: is empty"));
            }
            let content_type = match media_type::upload_type(declared, &head) {
                Ok(t) => t,
                Err(r) => {
                    drop(field);
                    drain(&mut mp).await;
                    return Err(refused(r));
                }
            };
            let head: Bytes = head.freeze();
            let body = futures::stream::once(async move { Ok(head) }).chain(field);
            match state
                .objects
                .put_stream(&path, Some(content_type), Box::pin(body), MAX_AUDIO_BYTES)
                .await
            {
                Ok(n) => stored = Some((content_type, filename, n)),
                Err(ObjectError::TooLarge(_)) => {
                    drain(&mut mp).await;
                    return Err(too_large());
                }
                Err(ObjectError::Interrupted(m)) => return Err(interrupted(m)),
                Err(e) => return Err(ApiError::internal(e)),
            }
        } else {
            if stored.is_some() {
                let _ = state.objects.delete(&path).await;
            }
            let what = match field.name() {
                Some("file") => "a second part named file".to_string(),
                Some(name) => format!("part {name:?}"),
                None => "a part without a name".to_string(),
            };
            return Err(ApiError::bad_request(
                "unknown_part",
                format!("multipart body: {what}; the only part is file"),
            ));
        }
    }
    let Some((content_type, filename, size)) = stored else {
        return Err(ApiError::bad_request(
            "file_required",
            "file: a multipart part named file is required",
        ));
    };
    let url = state.objects.uri(&path);
    let created = state
        .store
        .audio_create(&NewAudio {
            sid: &sid,
            tenant_sid: &account.tenant_sid,
            account_sid: &account.sid,
            object_path: &path,
            provider: state.objects.provider().as_str(),
            url: &url,
            content_type,
            original_filename: &filename,
            size_bytes: size as i64,
        })
        .await;
    match created {
        Ok(r) => Ok((StatusCode::CREATED, Json(view(&state, &r)))),
        Err(e) => {
            let _ = state.objects.delete(&path).await;
            Err(e.into())
        }
    }
}

/// Query of the audio list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct AudioListQuery {
    /// Page size, 0..=500, default 100.
    #[param(minimum = 0, maximum = 500)]
    pub limit: Option<i64>,
    /// Rows to skip, default 0.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// List the account's audio files, oldest first.
#[utoipa::path(get, path = "/v1/audio", tag = "audio",
    params(AudioListQuery, ("X-Account-Sid" = Option<String>, Header, description = "Account; required for the superuser and tenant keys")), security(("bearer" = [])),
    responses((status = 200, body = Page<Audio>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn list_audio(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Query(q): Query<AudioListQuery>,
) -> ApiResult<Json<Page<Audio>>> {
    let page = PageParams::new(q.limit, q.offset)?;
    let account = auth.account_scope(&state).await?;
    let (rows, total) = state
        .store
        .audio_list(&account.sid, page.limit, page.offset)
        .await?;
    Ok(Json(Page::new(
        rows.iter().map(|r| view(&state, r)).collect(),
        total,
        page,
    )))
}

/// The audio file `sid` of the account in scope (404 otherwise).
async fn scoped_audio(state: &AppState, caller: &Caller, sid: &str) -> ApiResult<AudioRecord> {
    if !has_prefix(sid, prefix::AUDIO) {
        return Err(ApiError::not_found("audio"));
    }
    let account = caller.account_scope(state).await?;
    match state.store.audio_get(sid).await? {
        Some(r) if r.account_sid == account.sid => Ok(r),
        _ => Err(ApiError::not_found("audio")),
    }
}

/// Get an audio file.
#[utoipa::path(get, path = "/v1/audio/{id}", tag = "audio", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)), security(("bearer" = [])),
    responses((status = 200, body = Audio), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_audio(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
) -> ApiResult<Json<Audio>> {
    let r = scoped_audio(&state, &auth, &id).await?;
    Ok(Json(view(&state, &r)))
}

/// Delete an audio file and its stored object (its `location` stops serving).
#[utoipa::path(delete, path = "/v1/audio/{id}", tag = "audio", params(("id" = String, Path), ("X-Account-Sid" = Option<String>, Header)), security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn delete_audio(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesWrite>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let r = scoped_audio(&state, &auth, &id).await?;
    match state.store.audio_delete(&r.sid).await {
        Ok(()) => {}
        Err(crate::store::StoreError::NotFound) => return Err(ApiError::not_found("audio")),
        Err(e) => return Err(e.into()),
    }
    // The row is gone first: a failed object delete leaves an orphan object, never a
    // row pointing at nothing.
    if let Err(e) = state.objects.delete(&r.object_path).await {
        tracing::warn!(path = %r.object_path, error = %e, "audio object not deleted");
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Query of an audio file's location.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ContentQuery {
    /// The capability token of the location URL.
    pub token: Option<String>,
}

/// Streams a stored object as a download: every route serving stored bytes answers
/// through here, with [`media_type::download_headers`] (the allow-listed type of
/// `content_type`, `nosniff`, the sandboxing CSP, `attachment` named after the path's
/// last segment). An absent object is `absent()`.
pub(super) async fn serve_object(
    state: &AppState,
    path: &str,
    content_type: &str,
    absent: impl Fn() -> ApiError,
) -> ApiResult<Response> {
    let (info, stream) = match state.objects.stream(path).await {
        Ok(s) => s,
        Err(ObjectError::NotFound | ObjectError::InvalidPath(_)) => return Err(absent()),
        Err(e) => return Err(ApiError::internal(e)),
    };
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.extend(media_type::download_headers(content_type, basename(path)));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(info.size));
    Ok(resp)
}

/// The bytes of an object download (documentation only).
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)]
pub struct ObjectBytes(Vec<u8>);

/// The headers of an object download, for the OpenAPI description of its 200.
pub(super) const DOWNLOAD_HEADERS: &str = "Served with `X-Content-Type-Options: nosniff`, \
`Content-Security-Policy: sandbox; default-src 'none'; frame-ancestors 'none'` and \
`Content-Disposition: attachment`";

/// An audio file's bytes as a download, with its allow-listed type (public: the
/// `location` URL; a missing or wrong token reads as absent). Served with
/// `X-Content-Type-Options: nosniff`, a sandboxing Content-Security-Policy and
/// `Content-Disposition: attachment`.
#[utoipa::path(get, path = "/v1/audio/{id}/content", tag = "audio", params(("id" = String, Path), ContentQuery),
    responses((status = 200, description = DOWNLOAD_HEADERS,
            content((ObjectBytes = "audio/wav"), (ObjectBytes = "audio/mpeg"), (ObjectBytes = "audio/ogg"), (ObjectBytes = "audio/flac"), (ObjectBytes = "application/octet-stream"))),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn audio_content(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<ContentQuery>,
) -> ApiResult<Response> {
    let ok = q
        .token
        .as_deref()
        .is_some_and(|t| state.objects.verify_capability_token(&id, t));
    if !ok {
        return Err(ApiError::not_found("audio"));
    }
    let r = state
        .store
        .audio_get(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("audio"))?;
    serve_object(&state, &r.object_path, &r.content_type, || {
        ApiError::not_found("object")
    })
    .await
}

/// Query of a signed-link request.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct SignedLinkQuery {
    /// Link lifetime in seconds: default 3600, at most 604800.
    #[param(minimum = 1, maximum = 604800)]
    pub ttl: Option<u64>,
}

/// A time-bounded download link for an audio file (S3: presigned; local: signed
/// service URL).
#[utoipa::path(get, path = "/v1/audio/{id}/signed-link", tag = "audio", params(("id" = String, Path), SignedLinkQuery, ("X-Account-Sid" = Option<String>, Header)), security(("bearer" = [])),
    responses((status = 200, body = SignedLink), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn audio_signed_link(
    State(state): State<AppState>,
    auth: Authz<cap::ResourcesRead>,
    Path(id): Path<String>,
    Query(q): Query<SignedLinkQuery>,
) -> ApiResult<Json<SignedLink>> {
    let ttl = link_ttl("ttl", q.ttl).map_err(|m| ApiError::bad_request("invalid_query", m))?;
    let r = scoped_audio(&state, &auth, &id).await?;
    let link = state
        .objects
        .signed_link(
            &r.object_path,
            ttl,
            Some(media_type::served_type(&r.content_type)),
        )
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(link))
}

/// Query of a local signed link (made by the service; see objects.rs).
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct SignedObjectQuery {
    /// Object path.
    pub path: String,
    /// Expiry, Unix seconds.
    pub expires: i64,
    /// Content type to serve (covered by the signature).
    pub ct: Option<String>,
    /// HMAC-SHA256 signature, hex.
    pub sig: String,
}

/// Serves an object through a local signed link as a download (public; 403
/// `link_expired` after the expiry, 403 `invalid_signature` when any parameter was
/// altered). The signed type is served only when allow-listed, application/octet-stream
/// otherwise.
#[utoipa::path(get, path = SIGNED_ROUTE, tag = "audio", params(SignedObjectQuery),
    responses((status = 200, description = DOWNLOAD_HEADERS,
            content((ObjectBytes = "audio/wav"), (ObjectBytes = "audio/mpeg"), (ObjectBytes = "audio/ogg"), (ObjectBytes = "audio/flac"), (ObjectBytes = "application/json"), (ObjectBytes = "application/octet-stream"))),
        (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 500, body = ErrorBody)))]
async fn signed_object(
    State(state): State<AppState>,
    Query(q): Query<SignedObjectQuery>,
) -> ApiResult<Response> {
    match state
        .objects
        .verify(&q.path, q.expires, q.ct.as_deref(), &q.sig)
    {
        Ok(()) => {}
        Err(LinkError::Expired) => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "link_expired",
                "the signed link has expired",
            ));
        }
        Err(LinkError::BadSignature) => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "invalid_signature",
                "the signed link's signature does not match",
            ));
        }
    }
    let ct =
        q.ct.as_deref()
            .unwrap_or_else(|| media_type::type_of_path(&q.path));
    serve_object(&state, &q.path, ct, || ApiError::not_found("object")).await
}

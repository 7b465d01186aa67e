//! Audio files over real HTTP on SQLite and PostgreSQL: multipart upload streamed to the
//! local object store, the 32 MiB limit, interrupted uploads, location and signed links,
//! and the media-type rules: declared types parsed and allow-listed, bytes sniffed, every
//! download served with an allow-listed type, `nosniff`, a sandboxing CSP and
//! `Content-Disposition: attachment`.

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use callsmith_control::{
    both_backends,
    testing::{Fixture, TestResponse, TestServer},
};
use callsmith_domain::{
    audio_ref::{AudioRefError, Located},
    objects::{CallObjects, audio_file},
    store::{self, NewAudio},
};
use reqwest::{
    Method,
    multipart::{Form, Part},
};
use serde_json::json;

const MIB: usize = 1024 * 1024;

/// The first bytes of a WAV file (enough for the sniffer).
const WAV_HEAD: &[u8] = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00";
/// An MPEG-1 layer III frame header.
const MP3_HEAD: &[u8] = &[0xff, 0xfb, 0x90, 0x00];
const OCTET: &str = "application/octet-stream";
const CSP: &str = "sandbox; default-src 'none'; frame-ancestors 'none'";

/// Asserts the headers every object download carries: `content_type`, `nosniff`, the
/// sandboxing CSP and an attachment disposition.
#[track_caller]
fn assert_download(h: &reqwest::header::HeaderMap, content_type: &str) {
    assert_eq!(h["content-type"], content_type, "{h:?}");
    assert_eq!(h["x-content-type-options"], "nosniff", "{h:?}");
    assert_eq!(h["content-security-policy"], CSP, "{h:?}");
    let d = h["content-disposition"].to_str().unwrap();
    assert!(d.starts_with("attachment; filename=\""), "{d}");
}

fn storage_dir(s: &TestServer) -> PathBuf {
    s.state.settings.objects.local_dir.clone()
}

/// Every file under `dir` (directories left empty do not count).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn file_part(bytes: Vec<u8>, mime: Option<&str>, filename: Option<&str>) -> Form {
    let mut part = Part::bytes(bytes);
    if let Some(f) = filename {
        part = part.file_name(f.to_string());
    }
    if let Some(m) = mime {
        part = part.mime_str(m).expect("valid mime");
    }
    Form::new().part("file", part)
}

async fn upload(
    s: &TestServer,
    token: &str,
    form: Form,
) -> callsmith_control::testing::TestResponse {
    s.post("/v1/audio")
        .bearer(token)
        .map(|b| b.multipart(form))
        .send()
        .await
}

/// A short real WAV made by sox (one second of a 440 Hz tone at 8 kHz).
fn tone_wav() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tone.wav");
    let out = std::process::Command::new("sox")
        .args(["-n", "-r", "8000", "-c", "1", "-b", "16"])
        .arg(&f)
        .args(["synth", "1", "sine", "440"])
        .output()
        .expect("sox is installed (scripts/test-deps.sh)");
    assert!(
        out.status.success(),
        "sox: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(f).unwrap()
}

async fn upload_get_list_serve_delete(s: TestServer) {
    let f = s.fixture().await;
    let wav = tone_wav();
    let r = upload(
        &s,
        &f.account_key,
        file_part(wav.clone(), None, Some("greeting.wav")),
    )
    .await;
    r.expect(201);
    let id = r.str("id");
    assert!(id.starts_with("aud_"), "{id}");
    assert_eq!(r.str("filename"), format!("{id}.wav"));
    assert_eq!(
        r.str("content_type"),
        "audio/wav",
        "no part type means audio/wav"
    );
    assert_eq!(r.str("original_filename"), "greeting.wav");
    assert_eq!(r.str("provider"), "local");
    assert_eq!(r.body["size_bytes"], wav.len());
    // The canonical URI names the stored object, which holds the uploaded bytes.
    let url = r.str("url");
    let stored = url::Url::parse(&url).unwrap().to_file_path().unwrap();
    assert!(
        stored.starts_with(storage_dir(&s).canonicalize().unwrap()),
        "{url}"
    );
    assert!(
        url.ends_with(&format!("/audio/{}/{id}.wav", f.account_sid)),
        "{url}"
    );
    assert_eq!(std::fs::read(&stored).unwrap(), wav);

    // location: public, serves the bytes with the content type; a wrong token is 404.
    let location = r.str("location");
    assert!(location.starts_with(&format!("{}/v1/audio/{id}/content?token=", s.base_url)));
    let got = s.client.get(&location).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_download(got.headers(), "audio/wav");
    assert_eq!(
        got.headers()["content-disposition"],
        format!("attachment; filename=\"{id}.wav\"")
    );
    assert_eq!(got.bytes().await.unwrap().to_vec(), wav);
    let forged = format!(
        "{}/v1/audio/{id}/content?token={}",
        s.base_url,
        "0".repeat(32)
    );
    assert_eq!(s.client.get(&forged).send().await.unwrap().status(), 404);
    let bare = format!("{}/v1/audio/{id}/content", s.base_url);
    assert_eq!(s.client.get(&bare).send().await.unwrap().status(), 404);

    // A preserved content type.
    let mp3 = upload(
        &s,
        &f.admin_session,
        file_part(vec![0xff, 0xfb, 0x90, 0x00], Some("audio/mpeg"), None),
    )
    .await;
    mp3.expect(201);
    assert_eq!(mp3.str("content_type"), "audio/mpeg");
    assert_eq!(mp3.str("original_filename"), "");
    let got = s.client.get(mp3.str("location")).send().await.unwrap();
    assert_download(got.headers(), "audio/mpeg");

    let g = s
        .get(&format!("/v1/audio/{id}"))
        .bearer(&f.account_key)
        .send()
        .await;
    g.expect(200);
    assert_eq!(g.body, r.body);
    let l = s
        .get("/v1/audio?limit=1")
        .bearer(&f.account_key)
        .send()
        .await;
    l.expect(200);
    assert_eq!(l.body["total"], 2);
    assert_eq!(l.body["has_more"], true);
    assert_eq!(l.body["items"][0]["id"], id.as_str());
    s.get("/v1/audio?limit=501")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(400, "invalid_query");
    // The superuser declares the account.
    s.su(Method::GET, "/v1/audio")
        .send()
        .await
        .expect_error(400, "account_required");
    let su = s
        .su(Method::GET, "/v1/audio")
        .header("X-Account-Sid", &f.account_sid)
        .send()
        .await;
    su.expect(200);
    assert_eq!(su.body["total"], 2);

    // Isolation: another account sees none of it.
    let other = s.fixture_named("b").await;
    s.get(&format!("/v1/audio/{id}"))
        .bearer(&other.account_key)
        .send()
        .await
        .expect_error(404, "audio_not_found");
    s.delete(&format!("/v1/audio/{id}"))
        .bearer(&other.account_key)
        .send()
        .await
        .expect_error(404, "audio_not_found");
    let ol = s.get("/v1/audio").bearer(&other.account_key).send().await;
    ol.expect(200);
    assert_eq!(ol.body["total"], 0);
    s.get(&format!("/v1/audio/{id}"))
        .bearer(&f.account_key)
        .header("X-Account-Sid", &other.account_sid)
        .send()
        .await
        .expect_error(403, "scope_conflict");

    // Credentials and capabilities.
    let r = s
        .post("/v1/audio")
        .map(|b| b.multipart(file_part(vec![1, 2], None, None)))
        .send()
        .await;
    r.expect_error(401, "unauthenticated");
    s.create_user(
        &f.account_sid,
        "viewer-a@example.test",
        "viewer-password",
        &["viewer"],
    )
    .await;
    let viewer = s.login("viewer-a@example.test", "viewer-password").await;
    upload(&s, &viewer, file_part(vec![1, 2], None, None))
        .await
        .expect_error(403, "forbidden");
    s.get(&format!("/v1/audio/{id}"))
        .bearer(&viewer)
        .send()
        .await
        .expect(200);

    // Delete: the row, the object and the location go.
    s.delete(&format!("/v1/audio/{id}"))
        .bearer(&f.account_key)
        .send()
        .await
        .expect(204);
    s.get(&format!("/v1/audio/{id}"))
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(404, "audio_not_found");
    assert!(!stored.exists());
    assert_eq!(s.client.get(&location).send().await.unwrap().status(), 404);
}

async fn upload_rejects_bad_bodies(s: TestServer) {
    let f = s.fixture().await;
    // A well-formed multipart body with no part at all.
    s.post("/v1/audio")
        .bearer(&f.account_key)
        .map(|b| {
            b.header("content-type", "multipart/form-data; boundary=XyZ")
                .body("--XyZ--\r\n")
        })
        .send()
        .await
        .expect_error(400, "file_required");
    let form = Form::new().text("note", "no file here");
    upload(&s, &f.account_key, form)
        .await
        .expect_error(400, "unknown_part");
    // A part beside the file refuses the upload whole: nothing is listed afterwards.
    let form = file_part(WAV_HEAD.to_vec(), Some("audio/wav"), Some("a.wav")).text("note", "x");
    upload(&s, &f.account_key, form)
        .await
        .expect_error(400, "unknown_part");
    let listed = s.get("/v1/audio").bearer(&f.account_key).send().await;
    listed.expect(200);
    assert_eq!(listed.body["total"], 0, "nothing stored: {}", listed.body);
    upload(
        &s,
        &f.account_key,
        file_part(vec![], None, Some("empty.wav")),
    )
    .await
    .expect_error(400, "empty_file");
    upload(
        &s,
        &f.account_key,
        file_part(b"<script>".to_vec(), Some("text/html"), None),
    )
    .await
    .expect_error(400, "unsupported_content_type");
    s.post("/v1/audio")
        .bearer(&f.account_key)
        .json(&json!({"file": "x"}))
        .send()
        .await
        .expect_error(400, "invalid_body");
    assert!(files_under(&storage_dir(&s)).is_empty(), "nothing stored");
    let l = s.get("/v1/audio").bearer(&f.account_key).send().await;
    assert_eq!(l.body["total"], 0);
}

async fn size_limit_is_32_mib(s: TestServer) {
    let f = s.fixture().await;
    let over = upload(
        &s,
        &f.account_key,
        file_part(vec![7u8; 32 * MIB + 1], None, None),
    )
    .await;
    over.expect_error(413, "file_too_large");
    assert_eq!(over.body["code"], "ERR010");
    assert!(
        files_under(&storage_dir(&s)).is_empty(),
        "nothing stored after 413: {:?}",
        files_under(&storage_dir(&s))
    );
    assert_eq!(
        s.get("/v1/audio").bearer(&f.account_key).send().await.body["total"],
        0
    );
    let exact = upload(
        &s,
        &f.account_key,
        file_part(vec![7u8; 32 * MIB], None, None),
    )
    .await;
    exact.expect(201);
    assert_eq!(exact.body["size_bytes"], 32 * MIB);
    assert_eq!(files_under(&storage_dir(&s)).len(), 1);
}

/// A client writing half a body, then closing: the upload is streamed (a partial object
/// exists while it runs) and aborted (nothing is left once the connection is gone).
async fn interrupted_upload_leaves_nothing(s: TestServer) {
    let f = s.fixture().await;
    let dir = storage_dir(&s);
    let mut data = WAV_HEAD.to_vec();
    data.resize(8 * MIB, 5);
    let head_part = "--XBOUNDARYX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"cut.wav\"\r\nContent-Type: audio/wav\r\n\r\n";
    let tail = "\r\n--XBOUNDARYX--\r\n";
    let length = head_part.len() + data.len() + tail.len();
    let addr = s.addr;
    let token = f.account_key.clone();
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    write!(
        sock,
        "POST /v1/audio HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: multipart/form-data; boundary=XBOUNDARYX\r\nContent-Length: {length}\r\n\r\n{head_part}"
    )
    .unwrap();
    sock.write_all(&data[..data.len() / 2]).unwrap();
    sock.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while files_under(&dir).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the upload never reached storage while streaming"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(sock);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !files_under(&dir).is_empty() {
        assert!(
            Instant::now() < deadline,
            "partial object left behind: {:?}",
            files_under(&dir)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        s.get("/v1/audio").bearer(&f.account_key).send().await.body["total"],
        0
    );
}

async fn signed_links(s: TestServer) {
    let f: Fixture = s.fixture().await;
    let wav = tone_wav();
    let r = upload(
        &s,
        &f.account_key,
        file_part(wav.clone(), Some("audio/x-wav"), None),
    )
    .await;
    r.expect(201);
    let id = r.str("id");
    let before = chrono::Utc::now();
    let l = s
        .get(&format!("/v1/audio/{id}/signed-link"))
        .bearer(&f.account_key)
        .send()
        .await;
    l.expect(200);
    let expires: chrono::DateTime<chrono::Utc> = l.str("expires_at").parse().unwrap();
    let lifetime = (expires - before).num_seconds();
    assert!(
        (3595..=3605).contains(&lifetime),
        "default lifetime 3600 s, got {lifetime}"
    );
    let signed = l.str("signed_url");
    assert!(signed.starts_with(&format!("{}/v1/storage/signed?", s.base_url)));
    // Works without credentials before expiry, with the file's (canonical) content type.
    assert_eq!(
        r.str("content_type"),
        "audio/wav",
        "audio/x-wav is stored canonical"
    );
    let got = s.client.get(&signed).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_download(got.headers(), "audio/wav");
    assert_eq!(got.bytes().await.unwrap().to_vec(), wav);
    // Tampering with any parameter breaks the signature.
    let mut u = url::Url::parse(&signed).unwrap();
    let pairs: Vec<(String, String)> = u.query_pairs().into_owned().collect();
    for victim in ["path", "expires", "ct", "sig"] {
        let q: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| {
                if k == victim {
                    let nv = match victim {
                        "path" => v.replace(".wav", ".mp3"),
                        "expires" => (v.parse::<i64>().unwrap() + 100).to_string(),
                        "ct" => "text/html".to_string(),
                        // Change the last character (to one it is not).
                        _ => {
                            let last = if v.ends_with('0') { '1' } else { '0' };
                            format!("{}{last}", &v[..v.len() - 1])
                        }
                    };
                    (k.clone(), nv)
                } else {
                    (k.clone(), v.clone())
                }
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(q);
        let resp = s
            .get(&format!("{}?{}", u.path(), u.query().unwrap()))
            .send()
            .await;
        resp.expect_error(403, "invalid_signature");
    }
    // Bounds: at most 604800 s, at least 1 s.
    let max = s
        .get(&format!("/v1/audio/{id}/signed-link?ttl=604800"))
        .bearer(&f.account_key)
        .send()
        .await;
    max.expect(200);
    for bad in ["604801", "0", "-5", "soon"] {
        s.get(&format!("/v1/audio/{id}/signed-link?ttl={bad}"))
            .bearer(&f.account_key)
            .send()
            .await
            .expect_error(400, "invalid_query");
    }
    // Expiry.
    let short = s
        .get(&format!("/v1/audio/{id}/signed-link?ttl=1"))
        .bearer(&f.account_key)
        .send()
        .await;
    short.expect(200);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let path_q = {
        let u = url::Url::parse(&short.str("signed_url")).unwrap();
        format!("{}?{}", u.path(), u.query().unwrap())
    };
    s.get(&path_q)
        .send()
        .await
        .expect_error(403, "link_expired");
    // Scope: another account cannot mint links for it; no credentials is 401.
    let other = s.fixture_named("b").await;
    s.get(&format!("/v1/audio/{id}/signed-link"))
        .bearer(&other.account_key)
        .send()
        .await
        .expect_error(404, "audio_not_found");
    s.get(&format!("/v1/audio/{id}/signed-link"))
        .send()
        .await
        .expect_error(401, "unauthenticated");
}

/// A hard tenant delete purges its accounts' stored objects; other tenants keep theirs.
async fn hard_tenant_delete_purges_objects(s: TestServer) {
    let a = s.fixture().await;
    let b = s.fixture_named("b").await;
    for t in [&a.account_key, &a.account_key, &b.account_key] {
        upload(&s, t, file_part(vec![1, 2, 3], None, None))
            .await
            .expect(201);
    }
    let dir = storage_dir(&s);
    // Call artefacts (history, recording, speech turns) live under calls/<account>/.
    for acc in [&a.account_sid, &b.account_sid] {
        let history = dir.join(CallObjects::new(acc, "com_test").history());
        std::fs::create_dir_all(history.parent().unwrap()).unwrap();
        std::fs::write(history, b"{}").unwrap();
    }
    assert_eq!(files_under(&dir).len(), 5);
    s.su(
        Method::DELETE,
        &format!("/v1/internal/tenant/{}?hard=true", a.tenant_sid),
    )
    .send()
    .await
    .expect(204);
    let left = files_under(&dir);
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.iter()
            .all(|f| f.to_string_lossy().contains(&b.account_sid))
    );
    assert_eq!(
        s.get("/v1/audio").bearer(&b.account_key).send().await.body["total"],
        1
    );
}

/// A multipart upload written by hand, so the part's Content-Type header can be any bytes
/// (reqwest refuses values that are not a valid media type).
async fn raw_upload(
    s: &TestServer,
    token: &str,
    content_type: Option<&str>,
    bytes: &[u8],
) -> TestResponse {
    let mut body =
        b"--XBOUNDARYX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n"
            .to_vec();
    if let Some(ct) = content_type {
        body.extend_from_slice(format!("Content-Type: {ct}\r\n").as_bytes());
    }
    body.extend_from_slice(b"\r\n");
    body.extend_from_slice(bytes);
    body.extend_from_slice(b"\r\n--XBOUNDARYX--\r\n");
    s.post("/v1/audio")
        .bearer(token)
        .map(|b| {
            b.header("content-type", "multipart/form-data; boundary=XBOUNDARYX")
                .body(body)
        })
        .send()
        .await
}

/// Declared types are parsed whole and mapped onto the allow-list; the bytes must be the
/// declared format; markup is refused whatever is declared. Nothing refused is stored,
/// and what is stored is served with its canonical type only.
async fn smuggled_types_are_refused_or_stored_safe(s: TestServer) {
    let f = s.fixture().await;
    let wav = tone_wav();
    let html = b"<html><body><script>alert(document.domain)</script></body></html>";
    let svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"/>";
    // Malformed or not allow-listed declared types: 400, before anything is read.
    for ct in [
        "audio/wav; text/html",
        "audio/wav, text/html",
        "audio/x; text/html",
        "audio/wav text/html",
        "text/html",
        "text/html; charset=audio/wav",
        "image/svg+xml",
        "audio/aac",
    ] {
        let r = raw_upload(&s, &f.account_key, Some(ct), &wav).await;
        r.expect_error(400, "unsupported_content_type");
        assert!(r.str("message").starts_with("file: "), "{}", r.text);
    }
    // Declared audio the bytes are not, and markup under any type: 415.
    for (ct, bytes) in [
        (Some("audio/mpeg"), &wav[..]),
        (Some("audio/wav"), MP3_HEAD),
        (Some("audio/wav"), &html[..]),
        (Some("audio/ogg"), &[1u8, 2, 3][..]),
        (Some("application/octet-stream"), &html[..]),
        (None, &html[..]),
        (None, &svg[..]),
        (Some("audio/wav"), &svg[..]),
    ] {
        raw_upload(&s, &f.account_key, ct, bytes)
            .await
            .expect_error(415, "content_type_mismatch");
    }
    assert!(files_under(&storage_dir(&s)).is_empty(), "nothing stored");
    assert_eq!(
        s.get("/v1/audio").bearer(&f.account_key).send().await.body["total"],
        0
    );
    // Accepted: stored (and served) under the canonical type, parameters dropped.
    let mut ogg = b"OggS\x00\x02".to_vec();
    ogg.resize(64, 0);
    let mut flac = b"fLaC".to_vec();
    flac.resize(64, 0);
    for (ct, bytes, stored) in [
        (Some("audio/x-wav"), &wav[..], "audio/wav"),
        (Some("Audio/WAV ; codecs=1"), &wav[..], "audio/wav"),
        (None, &wav[..], "audio/wav"),
        (Some("application/octet-stream"), &wav[..], "audio/wav"),
        (Some("audio/mp3"), MP3_HEAD, "audio/mpeg"),
        (Some("application/ogg"), &ogg[..], "audio/ogg"),
        (Some("audio/x-flac"), &flac[..], "audio/flac"),
        (None, &[1u8, 2, 3][..], OCTET),
    ] {
        let r = raw_upload(&s, &f.account_key, ct, bytes).await;
        r.expect(201);
        assert_eq!(r.str("content_type"), stored, "{ct:?}");
        let got = s.client.get(r.str("location")).send().await.unwrap();
        assert_eq!(got.status(), 200);
        assert_download(got.headers(), stored);
        assert_eq!(got.bytes().await.unwrap().as_ref(), bytes);
        let row = s.store.audio_get(&r.str("id")).await.unwrap().unwrap();
        assert_eq!(
            row.content_type, stored,
            "only the canonical type is stored"
        );
    }
}

/// A row stored with a type outside the allow-list (written straight through the store,
/// as an upload before these rules could have left it) is served as
/// application/octet-stream on its location and its signed link, and a signed link
/// carrying such a type serves octet-stream too.
async fn a_row_with_a_bad_type_is_served_as_octet_stream(s: TestServer) {
    let f = s.fixture().await;
    for bad in ["text/html", "audio/wav; text/html", "image/svg+xml"] {
        let sid = format!("aud_bad{}", bad.len());
        let path = audio_file(&f.account_sid, &sid);
        s.state
            .objects
            .put(
                &path,
                bytes::Bytes::from_static(b"<script>alert(1)</script>"),
                None,
            )
            .await
            .unwrap();
        s.store
            .audio_create(&NewAudio {
                sid: &sid,
                tenant_sid: &f.tenant_sid,
                account_sid: &f.account_sid,
                object_path: &path,
                provider: "local",
                url: &s.state.objects.uri(&path),
                content_type: bad,
                original_filename: "x.html",
                size_bytes: 25,
            })
            .await
            .unwrap();
        let g = s
            .get(&format!("/v1/audio/{sid}"))
            .bearer(&f.account_key)
            .send()
            .await;
        g.expect(200);
        assert_eq!(g.str("content_type"), OCTET, "{bad}");
        let got = s.client.get(g.str("location")).send().await.unwrap();
        assert_eq!(got.status(), 200);
        assert_download(got.headers(), OCTET);
        let l = s
            .get(&format!("/v1/audio/{sid}/signed-link"))
            .bearer(&f.account_key)
            .send()
            .await;
        l.expect(200);
        let got = s.client.get(l.str("signed_url")).send().await.unwrap();
        assert_eq!(got.status(), 200);
        assert_download(got.headers(), OCTET);
        // A link signed with the bad type itself.
        let expires = chrono::Utc::now().timestamp() + 600;
        let forged = s.state.objects.sign(&path, expires, Some(bad));
        let got = s.client.get(&forged).send().await.unwrap();
        assert_eq!(got.status(), 200);
        assert_download(got.headers(), OCTET);
    }
}

/// A call locates an audio file by its row alone (kept in memory on SQLite between
/// changes): the same file locates to the same identity every time, another account's
/// file is "not found", and a deleted file stops locating the moment its row is gone,
/// whether deleted through the API or by raw SQL.
async fn a_located_audio_file_follows_its_row(s: TestServer) {
    let f = s.fixture().await;
    let other = s.fixture_named("other").await;
    let wav = tone_wav();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let form = Form::new().part(
            "file",
            Part::bytes(wav.clone())
                .file_name("tone.wav")
                .mime_str("audio/wav")
                .unwrap(),
        );
        let r = upload(&s, &f.account_key, form).await;
        r.expect(201);
        ids.push(r.str("id"));
    }
    let audio = &s.state.audio;
    let identity = |l: Located| match l {
        Located::Stored(st) => st.identity(),
        other => panic!("stored audio, got {other:?}"),
    };
    let first = identity(audio.locate(&f.account_sid, &ids[0]).await.unwrap());
    assert_eq!(
        identity(audio.locate(&f.account_sid, &ids[0]).await.unwrap()),
        first,
        "a second call locates the same identity"
    );
    let second = identity(audio.locate(&f.account_sid, &ids[1]).await.unwrap());
    assert_ne!(first, second, "two files are two identities");
    let bytes = audio.fetch(&f.account_sid, &ids[0]).await.unwrap();
    assert_eq!(bytes.as_ref(), wav.as_slice(), "the bytes uploaded");
    assert!(matches!(
        audio.locate(&other.account_sid, &ids[0]).await,
        Err(AudioRefError::NotFound(_))
    ));

    s.request(Method::DELETE, &format!("/v1/audio/{}", ids[0]))
        .bearer(&f.account_key)
        .send()
        .await
        .expect(204);
    assert!(matches!(
        audio.locate(&f.account_sid, &ids[0]).await,
        Err(AudioRefError::NotFound(_))
    ));

    let sql = format!("DELETE FROM audio_files WHERE sid = '{}'", ids[1]);
    match s.store.pool() {
        store::Pool::Sqlite(p) => {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(p)
                .await
                .unwrap();
        }
        store::Pool::Postgres(p) => {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(p)
                .await
                .unwrap();
        }
    }
    assert!(matches!(
        audio.locate(&f.account_sid, &ids[1]).await,
        Err(AudioRefError::NotFound(_))
    ));
}

both_backends!(
    a_located_audio_file_follows_its_row,
    smuggled_types_are_refused_or_stored_safe,
    a_row_with_a_bad_type_is_served_as_octet_stream,
    hard_tenant_delete_purges_objects,
    upload_get_list_serve_delete,
    upload_rejects_bad_bodies,
    size_limit_is_32_mib,
    interrupted_upload_leaves_nothing,
    signed_links
);

//! The web console: a browser client of the v1 API, served by the control plane on the
//! same origin (docs/console.md).
//!
//! `GET /` answers the application shell and `GET /console/<file>` its assets, all of
//! them files under `control/console/` embedded into the binary at build time, so the
//! console needs no network access and no front-end build. The console holds no state of
//! its own on the server: it logs in through `POST /v1/auth/login` (or takes a pasted
//! bearer token) and calls the API with `Authorization: Bearer`, so the API's scopes and
//! roles apply to it as to any client.
//!
//! These routes are not part of the API and not in `/openapi.json`: they answer HTML,
//! JavaScript and CSS for a browser, never JSON. An unknown asset is the API's 404
//! `route_not_found` and another method the 405 `method_not_allowed`, both in the
//! envelope, as everywhere else.
//!
//! Every answer carries an `ETag` (a hash of the file) and `Cache-Control: no-cache`: the
//! browser revalidates and gets `304 Not Modified` while the binary is unchanged, and the
//! new files at once after an upgrade (asset URLs carry no version). A Content-Security-
//! Policy allows only same-origin scripts, styles and connections, and `blob:` media (a
//! recording is fetched with the bearer header and played from a blob URL).

use std::sync::OnceLock;

use axum::{
    Router,
    extract::Path,
    response::{IntoResponse, Response},
    routing::get,
};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

use super::{AppState, error::route_not_found};

/// One embedded file: its name under `/console/` and its content type.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

macro_rules! asset {
    ($name:literal, $ty:expr) => {
        Asset {
            name: $name,
            content_type: $ty,
            body: include_str!(concat!("../../console/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the console; `index.html` is the shell served at `/`.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("js/api.js", JS),
    asset!("js/app.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/graph.js", JS),
    asset!("js/call.js", JS),
    asset!("js/lists.js", JS),
    asset!("js/scenario.js", JS),
    asset!("js/communication.js", JS),
    asset!("js/templates.js", JS),
    asset!("js/bricks.js", JS),
    asset!("js/model.js", JS),
    asset!("js/builder.js", JS),
];

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   media-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// The console's routes (merged into [`super::router`] beside the API).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(shell))
        .route("/console/{*file}", get(asset))
}

async fn shell(headers: HeaderMap) -> Response {
    serve(0, &headers)
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().position(|a| a.name == file) {
        Some(i) => serve(i, &headers),
        None => route_not_found().await.into_response(),
    }
}

/// The strong validator of every asset, computed once.
fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let digest = Sha256::digest(a.body.as_bytes());
                format!("\"{}\"", hex::encode(&digest[..12]))
            })
            .collect()
    })
}

/// Whether an `If-None-Match` header names `etag` (or is `*`).
fn matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*")
}

fn serve(i: usize, headers: &HeaderMap) -> Response {
    let a = &ASSETS[i];
    let etag = &etags()[i];
    let status = if matches(headers, etag) {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let mut r = if status == StatusCode::OK {
        a.body.into_response()
    } else {
        status.into_response()
    };
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(a.content_type),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_named_once_and_the_shell_comes_first() {
        assert_eq!(ASSETS[0].name, "index.html");
        let mut names: Vec<_> = ASSETS.iter().map(|a| a.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ASSETS.len());
        assert!(ASSETS.iter().all(|a| !a.body.is_empty()));
    }

    #[test]
    fn every_file_of_the_console_directory_is_served() {
        // A file added under control/console/ but not to ASSETS would be a page that
        // loads in development and 404s in the binary.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("console");
        let mut found = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("console dir") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    let rel = p.strip_prefix(&root).expect("under root");
                    found.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        for f in &found {
            assert!(
                ASSETS.iter().any(|a| a.name == f),
                "control/console/{f} is not in ASSETS"
            );
        }
    }

    /// The kinds the builder's model (`js/bricks.js`) declares, each with its fixed output
    /// types: the lines `  <kind>: {` of `KINDS`, and the first `outputs: [...]` after each.
    fn builder_kinds() -> Vec<(String, Vec<String>)> {
        let js = ASSETS
            .iter()
            .find(|a| a.name == "js/bricks.js")
            .expect("bricks.js is served")
            .body;
        let start = js.find("export const KINDS = {").expect("KINDS");
        let end = start + js[start..].find("\n};").expect("end of KINDS");
        let block = &js[start..end];
        let mut kinds = Vec::new();
        for (at, line) in block
            .match_indices('\n')
            .map(|(i, _)| (i + 1, &block[i + 1..]))
        {
            let line = line.lines().next().unwrap_or("");
            let Some(name) = line
                .strip_prefix("  ")
                .and_then(|l| l.strip_suffix(": {"))
                .filter(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            else {
                continue;
            };
            let rest = &block[at..];
            let list = rest.find("outputs: [").expect("outputs of a kind") + "outputs: [".len();
            let close = rest[list..].find(']').expect("end of outputs") + list;
            let outputs = rest[list..close]
                .split(',')
                .map(|t| t.trim().trim_matches('\'').to_string())
                .filter(|t| !t.is_empty())
                .collect();
            kinds.push((name.to_string(), outputs));
        }
        kinds
    }

    #[test]
    fn the_builder_offers_every_brick_kind_with_the_outputs_validation_allows() {
        use callsmith_scenarios::{model::BrickKind, validate::fixed_output_types};
        let kinds = builder_kinds();
        let names: Vec<&str> = kinds.iter().map(|(k, _)| k.as_str()).collect();
        for kind in BrickKind::ALL {
            assert!(
                names.contains(&kind.as_str()),
                "the builder's palette has no {}",
                kind.as_str()
            );
        }
        assert_eq!(kinds.len(), BrickKind::ALL.len(), "{names:?}");
        for (name, outputs) in &kinds {
            let kind = BrickKind::parse(name)
                .unwrap_or_else(|| panic!("bricks.js names {name}, not a brick kind"));
            let mut ours: Vec<&str> = outputs.iter().map(String::as_str).collect();
            let mut allowed = fixed_output_types(kind).to_vec();
            ours.sort_unstable();
            allowed.sort_unstable();
            assert_eq!(ours, allowed, "the output types of {name}");
        }
    }

    #[test]
    fn if_none_match_lists_and_wildcards() {
        let mut h = HeaderMap::new();
        h.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_static("\"a\", W/\"b\""),
        );
        assert!(matches(&h, "\"b\""));
        assert!(!matches(&h, "\"c\""));
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(matches(&h, "\"c\""));
        assert!(!matches(&HeaderMap::new(), "\"c\""));
    }
}

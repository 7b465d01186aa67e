//! The web console's routes: the shell at `/`, its assets under `/console/`, their content
//! types and cache validators, and the envelope errors for unknown assets and methods.

use callsmith_control::testing::{TestDb, TestServer};
use reqwest::Method;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_and_its_assets_are_served_with_types_and_validators() {
    let s = TestServer::start(TestDb::Sqlite).await;
    let shell = s.get("/").send().await;
    shell.expect(200);
    let header = |r: &callsmith_control::testing::TestResponse, name: &str| {
        r.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(header(&shell, "content-type"), "text/html; charset=utf-8");
    assert_eq!(header(&shell, "cache-control"), "no-cache");
    assert!(header(&shell, "content-security-policy").contains("script-src 'self'"));
    assert_eq!(header(&shell, "x-content-type-options"), "nosniff");
    assert!(shell.text.contains("/console/js/app.js"), "{}", shell.text);
    // The shell names only assets that are served, each with its type.
    for (path, ty) in [
        ("/console/js/app.js", "text/javascript; charset=utf-8"),
        ("/console/console.css", "text/css; charset=utf-8"),
        ("/console/favicon.svg", "image/svg+xml"),
    ] {
        assert!(shell.text.contains(path), "the shell links {path}");
        let r = s.get(path).send().await;
        r.expect(200);
        assert_eq!(header(&r, "content-type"), ty, "{path}");
        assert!(!r.text.is_empty());
    }
    // Every module app.js imports is served too.
    let app = s.get("/console/js/app.js").send().await;
    for line in app.text.lines().filter(|l| l.starts_with("import ")) {
        let module = line
            .rsplit("from './")
            .next()
            .and_then(|m| m.split('\'').next())
            .expect("a relative import");
        s.get(&format!("/console/js/{module}"))
            .send()
            .await
            .expect(200);
    }

    // A validator: the same file again is 304 without a body; another tag gets the file.
    let etag = header(&shell, "etag");
    assert!(etag.starts_with('"') && etag.len() > 10, "{etag}");
    let again = s.get("/").header("if-none-match", &etag).send().await;
    again.expect(304);
    assert!(again.text.is_empty());
    assert_eq!(header(&again, "etag"), etag);
    s.get("/")
        .header("if-none-match", "\"other\"")
        .send()
        .await
        .expect(200);
    // HEAD answers like GET without a body.
    let head = s.request(Method::HEAD, "/console/console.css").send().await;
    head.expect(200);
    assert_eq!(header(&head, "content-type"), "text/css; charset=utf-8");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_assets_and_other_methods_are_envelope_errors() {
    let s = TestServer::start(TestDb::Sqlite).await;
    for path in [
        "/console/nope.js",
        "/console/js/app.js%00",
        "/console/",
        "/console/js/app.js/x",
    ] {
        s.get(path)
            .send()
            .await
            .expect_error(404, "route_not_found");
    }
    s.post("/")
        .send()
        .await
        .expect_error(405, "method_not_allowed");
    s.request(Method::DELETE, "/console/js/app.js")
        .send()
        .await
        .expect_error(405, "method_not_allowed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_not_part_of_the_openapi_document() {
    let s = TestServer::start(TestDb::Sqlite).await;
    let doc = s.get("/openapi.json").send().await;
    doc.expect(200);
    let paths = doc.body["paths"].as_object().expect("paths");
    assert!(
        paths.keys().all(|p| p != "/" && !p.starts_with("/console")),
        "console routes leaked into the API document"
    );
}

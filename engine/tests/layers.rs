//! The workspace's house rules. Which crate may use which is the compiler's rule: the
//! call runtime (this crate) depends on the domain (callsmith-domain), never on the HTTP
//! crate (callsmith-control), and the domain has no HTTP server, router or OpenAPI crate
//! (its `utoipa` is optional, behind the `openapi` feature only the HTTP crate turns on);
//! only the binary (engine/cli) names both. A use of the HTTP layer from either is a
//! build error. Checked here: that the manifests keep it so, and that no source file of
//! the engine or the control plane is over 700 lines.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `[dependencies]` lines of a manifest (up to the next table).
fn dependencies(manifest: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(manifest))
        .expect("manifest");
    text.split("\n[dependencies]\n")
        .nth(1)
        .unwrap_or("")
        .split("\n[")
        .next()
        .unwrap_or("")
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

#[test]
fn the_runtime_and_the_domain_depend_on_no_http_crate() {
    const HTTP: &[&str] = &[
        "callsmith-control",
        "axum",
        "utoipa-axum",
        "tower-http",
        "hyper",
    ];
    for manifest in ["Cargo.toml", "../control/domain/Cargo.toml"] {
        let deps = dependencies(manifest);
        assert!(deps.len() > 5, "{manifest}: dependencies found: {deps:?}");
        for d in &deps {
            let name = d.split(['=', '.', ' ']).next().unwrap_or("");
            assert!(!HTTP.contains(&name), "{manifest} depends on {name}");
            if name == "utoipa" {
                assert!(
                    d.contains("optional = true"),
                    "{manifest}: utoipa must stay optional"
                );
            }
        }
    }
}

/// No source file of the engine or the control plane grows past 700 lines: a file that
/// does has more than one job (split it by job, as `engine/src/call/` is).
#[test]
fn no_engine_or_control_source_file_is_over_700_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in [
        "engine/src",
        "engine/cli/src",
        "control/src",
        "control/domain/src",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "sources found: {}", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).ok()?.lines().count();
            (n > 700).then(|| format!("{}: {n} lines", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "{}", long.join("\n"));
}

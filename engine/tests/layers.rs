//! The engine's and the control plane's house rules, checked on their sources:
//! * the call runtime (everything under engine/src but `main.rs`, which wires the binary)
//!   uses the control crate's domain (`Services`, the store, objects, clients), never its
//!   HTTP layer (`callsmith_control::api`, `AppState`, the router, axum);
//! * inside the control crate, only the HTTP layer itself (`control/src/api/`), the crate
//!   root and its test harness name `crate::api`: the domain, the store, auth and the
//!   adapters sit under it and never reach up into it;
//! * no source file of either is over 700 lines.
//!
//! A file that breaks a rule fails its test with its path (and line).

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

const HTTP_LAYER: &[&str] = &[
    "callsmith_control::api",
    "callsmith_control::AppState",
    "callsmith_control::router",
    "AppState",
    "axum",
];

#[test]
fn the_call_runtime_never_imports_the_http_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 5, "engine sources found: {files:?}");
    let mut offences = Vec::new();
    for f in files.iter().filter(|f| !f.ends_with("main.rs")) {
        let text = std::fs::read_to_string(f).expect("read source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for needle in HTTP_LAYER {
                if code.contains(needle) {
                    offences.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "the call runtime imports the HTTP layer:\n{}",
        offences.join("\n")
    );
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("manifest");
    assert!(
        !manifest.lines().any(|l| l.trim_start().starts_with("axum")),
        "the engine depends on axum directly"
    );
}

#[test]
fn the_control_domain_never_imports_the_http_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../control/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "control sources found: {}", files.len());
    let above = |f: &Path| {
        let rel = f.strip_prefix(&src).expect("under control/src");
        rel.starts_with("api") || rel == Path::new("lib.rs") || rel == Path::new("testing.rs")
    };
    let mut offences = Vec::new();
    for f in files.iter().filter(|f| !above(f)) {
        let text = std::fs::read_to_string(f).expect("read source");
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        if code.contains("crate::api") {
            offences.push(format!("{}: names crate::api", f.display()));
        }
        // `use crate::{…, api::…, …};`: a top-level item of a grouped import.
        for group in code.split("use crate::{").skip(1) {
            let group = group.split(';').next().unwrap_or("");
            if top_level_items(group).any(|item| item == "api" || item.starts_with("api::")) {
                offences.push(format!("{}: imports crate::{{api…}}", f.display()));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "the control domain imports the HTTP layer:\n{}",
        offences.join("\n")
    );
}

/// The top-level items of a grouped import's inside (`a::{b, c}, d` → `a::{b, c}`, `d`).
fn top_level_items(group: &str) -> impl Iterator<Item = String> + '_ {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
        .into_iter()
        .map(|s| s.split_whitespace().collect::<String>())
}

/// No source file of the engine or the control plane grows past 700 lines: a file that
/// does has more than one job (split it by job, as `engine/src/call/` is).
#[test]
fn no_engine_or_control_source_file_is_over_700_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&root.join("engine/src"), &mut files);
    rust_files(&root.join("control/src"), &mut files);
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

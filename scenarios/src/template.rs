//! `{{placeholder}}` templating.
//!
//! Syntax: `{{` optional spaces, a variable name, optional spaces, `}}`. A name is one or more
//! letters, digits, `-`, `_` or `.`. Every `{{` must open a well-formed placeholder; a stray
//! `}}` is ordinary text (JSON bodies end with `}}` all the time). Syntax errors are reported
//! by validation (SCN115); rendering never fails: an unknown variable renders as the empty
//! string and a malformed `{{` is copied through literally.

/// A lookup of variable values by name.
pub trait Vars {
    /// The value of `name`, or `None` when unknown.
    fn lookup(&self, name: &str) -> Option<String>;
}

impl<S: std::hash::BuildHasher> Vars for std::collections::HashMap<String, String, S> {
    fn lookup(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

impl Vars for std::collections::BTreeMap<String, String> {
    fn lookup(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

/// A template syntax error: byte offset of the offending `{{` and a description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub offset: usize,
    pub message: String,
}

/// True when `c` may appear in a variable name.
pub fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '-' || c == '_' || c == '.'
}

/// True when `name` is a valid variable name.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(is_name_char)
}

/// True when `s` contains `{{` (a byte scan: cheaper than a substring search for the short
/// strings of a scenario, and this runs for every string property).
pub fn has_open(s: &str) -> bool {
    s.as_bytes().windows(2).any(|w| w == b"{{")
}

/// A piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a str),
    Var(&'a str),
}

/// Tries to read a placeholder at `s` (which starts with `{{`): returns (name, length consumed).
fn placeholder_at(s: &str) -> Result<(&str, usize), String> {
    let inner_start = 2;
    let Some(close) = s[inner_start..].find("}}") else {
        return Err("`{{` without a closing `}}`".to_string());
    };
    let inner = &s[inner_start..inner_start + close];
    let name = inner.trim_matches(' ');
    if name.is_empty() {
        return Err("empty placeholder `{{}}`".to_string());
    }
    if let Some(bad) = name.chars().find(|c| !is_name_char(*c)) {
        return Err(format!(
            "invalid character {bad:?} in placeholder name {name:?}"
        ));
    }
    Ok((name, inner_start + close + 2))
}

/// Parses a template into pieces, or returns its first syntax error.
pub fn parse(template: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let mut pieces = Vec::new();
    let mut rest = template;
    let mut offset = 0;
    while let Some(pos) = rest.find("{{") {
        if pos > 0 {
            pieces.push(Piece::Text(&rest[..pos]));
        }
        match placeholder_at(&rest[pos..]) {
            Ok((name, len)) => {
                pieces.push(Piece::Var(name));
                rest = &rest[pos + len..];
                offset += pos + len;
            }
            Err(message) => {
                return Err(TemplateError {
                    offset: offset + pos,
                    message,
                });
            }
        }
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    Ok(pieces)
}

/// Checks a template's syntax.
pub fn check(template: &str) -> Result<(), TemplateError> {
    if !has_open(template) {
        return Ok(());
    }
    parse(template).map(|_| ())
}

/// The variable names a template references (in order, duplicates kept).
pub fn variables(template: &str) -> Vec<&str> {
    match parse(template) {
        Ok(p) => p
            .into_iter()
            .filter_map(|p| match p {
                Piece::Var(v) => Some(v),
                Piece::Text(_) => None,
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Renders a template. Unknown variables render as ""; a malformed `{{` is kept literally.
pub fn render(template: &str, vars: &dyn Vars) -> String {
    if !has_open(template) {
        return template.to_string();
    }
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(pos) = rest.find("{{") {
        out.push_str(&rest[..pos]);
        match placeholder_at(&rest[pos..]) {
            Ok((name, len)) => {
                if let Some(v) = vars.lookup(name) {
                    out.push_str(&v);
                }
                rest = &rest[pos + len..];
            }
            Err(_) => {
                out.push_str("{{");
                rest = &rest[pos + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Strips one `{{ }}` wrapper from a mapping target (`{{order.id}}` → `order.id`); a bare name
/// is returned as is. `None` when the result is not a valid variable name.
pub fn unwrap_target(target: &str) -> Option<&str> {
    let t = target.trim();
    let name = match t.strip_prefix("{{").and_then(|r| r.strip_suffix("}}")) {
        Some(inner) => inner.trim_matches(' '),
        None => t,
    };
    is_valid_name(name).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn vars() -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert("name".into(), "Ann".into());
        m.insert("order.id-2_x".into(), "42".into());
        m.insert("имя".into(), "Анна".into());
        m
    }

    #[test]
    fn renders_known_unknown_and_spaced_names() {
        let v = vars();
        assert_eq!(render("Hi {{name}}!", &v), "Hi Ann!");
        assert_eq!(render("Hi {{ name }}!", &v), "Hi Ann!");
        assert_eq!(render("#{{order.id-2_x}}", &v), "#42");
        assert_eq!(render("[{{missing}}]", &v), "[]");
        assert_eq!(render("{{имя}}", &v), "Анна");
        assert_eq!(render("{{name}}{{name}}", &v), "AnnAnn");
    }

    #[test]
    fn stray_closing_braces_are_text() {
        let v = vars();
        assert_eq!(check(r#"{"a":{"b":"{{name}}"}}"#), Ok(()));
        assert_eq!(
            render(r#"{"a":{"b":"{{name}}"}}"#, &v),
            r#"{"a":{"b":"Ann"}}"#
        );
        assert_eq!(render("}} {", &v), "}} {");
    }

    #[test]
    fn syntax_errors_are_detected_but_render_never_panics() {
        let v = vars();
        for bad in [
            "{{",
            "a {{name",
            "{{}}",
            "{{ }}",
            "{{na me}}",
            "{{a/b}}",
            "x{{é$}}",
        ] {
            assert!(check(bad).is_err(), "{bad} should be rejected");
            let _ = render(bad, &v);
        }
        assert_eq!(render("a {{name", &v), "a {{name");
        assert_eq!(render("{{a/b}} {{name}}", &v), "{{a/b}} Ann");
        assert_eq!(check("ok {{name}}").map_err(|e| e.offset), Ok(()));
        assert_eq!(check("ok {{name}} {{").map_err(|e| e.offset), Err(12));
    }

    #[test]
    fn names_and_targets() {
        assert!(is_valid_name("a.b-c_d9"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("a b"));
        assert_eq!(unwrap_target("{{order_id}}"), Some("order_id"));
        assert_eq!(unwrap_target("{{ order_id }}"), Some("order_id"));
        assert_eq!(unwrap_target("order_id"), Some("order_id"));
        assert_eq!(unwrap_target("{{bad name}}"), None);
        assert_eq!(variables("{{a}} and {{b.c}}"), vec!["a", "b.c"]);
    }
}

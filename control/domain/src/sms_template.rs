//! The template language of `http` SMS providers: `{{from}}`, `{{to}}` and `{{text}}`
//! (spaces inside the braces allowed) in the url, header values and body template.
//! [`check`] is what the API validates a provider with; [`render`] is what the sender
//! uses to build the request of one message.

/// The variables a provider template may use.
pub const VARIABLES: &[&str] = &["from", "to", "text"];

/// A template problem: the variable (or fragment) at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub fragment: String,
    pub reason: &'static str,
}

/// Splits a template into literal text and variable names.
fn parts(t: &str) -> Result<Vec<(bool, &str)>, TemplateError> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find("{{") {
        out.push((false, &rest[..i]));
        let after = &rest[i + 2..];
        let Some(j) = after.find("}}") else {
            return Err(TemplateError {
                fragment: rest[i..].chars().take(40).collect(),
                reason: "`{{` without a closing `}}`",
            });
        };
        let name = after[..j].trim();
        if !VARIABLES.contains(&name) {
            return Err(TemplateError {
                fragment: name.to_string(),
                reason: "unknown variable (allowed: from, to, text)",
            });
        }
        out.push((true, name));
        rest = &after[j + 2..];
    }
    out.push((false, rest));
    Ok(out)
}

/// Checks that every `{{…}}` of `t` names a known variable and is closed.
pub fn check(t: &str) -> Result<(), TemplateError> {
    parts(t).map(|_| ())
}

/// Renders `t` with the message's values; `escape` encodes each substituted value (for
/// example percent-encoding inside a URL). Templates are checked on save, so an invalid
/// one here is an error, not a panic.
pub fn render(
    t: &str,
    from: &str,
    to: &str,
    text: &str,
    escape: impl Fn(&str) -> String,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(t.len() + text.len());
    for (var, s) in parts(t)? {
        if var {
            let v = match s {
                "from" => from,
                "to" => to,
                _ => text,
            };
            out.push_str(&escape(v));
        } else {
            out.push_str(s);
        }
    }
    Ok(out)
}

/// Percent-encodes a value for a URL (everything but unreserved characters).
pub fn url_escape(v: &str) -> String {
    url::form_urlencoded::byte_serialize(v.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_variables_pass_and_render() {
        let t = "https://sms.test/send?from={{from}}&to={{ to }}&msg={{text}}";
        assert!(check(t).is_ok());
        let url = render(t, "+49 1", "+49 2", "hi & bye", url_escape).unwrap();
        assert_eq!(
            url,
            "https://sms.test/send?from=%2B49%201&to=%2B49%202&msg=hi%20%26%20bye"
        );
        assert_eq!(
            render("{\"t\":\"{{text}}\"}", "a", "b", "x", str::to_string).unwrap(),
            "{\"t\":\"x\"}"
        );
        assert_eq!(
            render("no vars }}", "a", "b", "c", str::to_string).unwrap(),
            "no vars }}"
        );
    }

    #[test]
    fn unknown_or_unclosed_variables_fail() {
        assert_eq!(check("{{token}}").unwrap_err().fragment, "token");
        assert!(check("{{from").is_err());
        assert!(check("{{}}").is_err());
        assert!(render("{{x}}", "", "", "", str::to_string).is_err());
    }
}

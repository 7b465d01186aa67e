//! Query parameters that take a comma-separated list of names (`include`, `filter_or`):
//! each part is trimmed, empty parts are skipped, a repeated name counts once, and any
//! name outside the accepted ones refuses the request. [`pattern`] is the same rule as
//! the regular expression the OpenAPI document gives the parameter.

/// The accepted values named in `raw`, in order of first mention; `Err(part)` names the
/// first part that is not one of `accepted`'s names.
pub fn parse<T: Copy + PartialEq>(
    raw: Option<&str>,
    accepted: &[(&str, T)],
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for part in raw
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let Some((_, value)) = accepted.iter().find(|(name, _)| *name == part) else {
            return Err(part.to_string());
        };
        if !out.contains(value) {
            out.push(*value);
        }
    }
    Ok(out)
}

/// The names of `accepted`, comma-separated (for error messages).
pub fn names<T>(accepted: &[(&str, T)]) -> String {
    accepted
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The ECMA-262 pattern of a list [`parse`] accepts (spaces being the only blanks it
/// documents around parts).
pub fn pattern(names: &[&str]) -> String {
    let one = names.join("|");
    format!("^ *(?:{one})? *(?:, *(?:{one})? *)*$")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELDS: &[(&str, u8)] = &[("identifier", 1), ("name", 2)];

    #[test]
    fn parts_are_trimmed_deduplicated_and_checked() {
        assert_eq!(parse(None, FIELDS), Ok(vec![]));
        assert_eq!(parse(Some(" , ,"), FIELDS), Ok(vec![]));
        assert_eq!(
            parse(Some("name, identifier ,name"), FIELDS),
            Ok(vec![2, 1])
        );
        assert_eq!(parse(Some("name name"), FIELDS), Err("name name".into()));
        assert_eq!(parse(Some("name,nom"), FIELDS), Err("nom".into()));
        assert_eq!(names(FIELDS), "identifier, name");
    }

    #[test]
    fn the_pattern_states_the_rule() {
        let p = pattern(&["identifier", "name"]);
        assert_eq!(
            p,
            "^ *(?:identifier|name)? *(?:, *(?:identifier|name)? *)*$"
        );
    }

    /// Each list parameter of the OpenAPI document carries the pattern of the names its
    /// handler accepts.
    #[test]
    fn the_document_gives_each_list_its_pattern() {
        let doc = serde_json::to_value(crate::api::openapi()).expect("document");
        let cases: [(&str, &str, Vec<&str>); 4] = [
            ("/v1/number", "include", vec!["pool"]),
            ("/v1/number", "filter_or", vec!["identifier", "name"]),
            ("/v1/communication-result", "include", vec!["communication"]),
            (
                "/v1/campaign",
                "filter_or",
                crate::store::CampaignField::ALL
                    .iter()
                    .map(|(n, _)| *n)
                    .collect(),
            ),
        ];
        for (path, param, names) in cases {
            let documented = doc["paths"][path]["get"]["parameters"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["name"] == param))
                .map(|p| p["schema"]["pattern"].clone());
            assert_eq!(
                documented,
                Some(serde_json::Value::from(pattern(&names))),
                "{path} {param}"
            );
        }
    }
}

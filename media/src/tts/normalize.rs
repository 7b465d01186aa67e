//! The pure synthesis URL normaliser behind GET /v1/adapters/tts/normalize/{path}.

use base64::Engine as _;
use thiserror::Error;

/// Why a synthesis URL could not be normalised.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum NormalizeError {
    /// Neither `text` nor `text_b64` was given (the route answers `{"error": ...}`).
    #[error("text or text_b64 is required")]
    MissingText,
    #[error("text_b64 is not valid base64 UTF-8")]
    InvalidTextB64,
    #[error("invalid synthesis URL: {0}")]
    InvalidUrl(String),
}

/// Default `sr` of a normalised synthesis URL.
pub const DEFAULT_SYNTH_SAMPLE_RATE: u32 = 16000;

/// GET /v1/adapters/tts/normalize/{path}: rewrites a synthesis URL to platform-safe parameters.
///
/// `path` is the engine URL (scheme optional, `https://` assumed; it may carry its own query);
/// `query` is the request's query. The result keeps every parameter except `sampleRate`,
/// `format`, `fsFix` and `text_b64`; forces `f=wav`; keeps a valid positive integer `sr`,
/// else sets `sr=16000`; and carries the text as `text` (decoded from `text_b64` when
/// `text` is absent). Missing text is an error.
pub fn normalize_tts_url(path: &str, query: &[(String, String)]) -> Result<String, NormalizeError> {
    let text = match query.iter().find(|(k, _)| k == "text") {
        Some((_, t)) => t.clone(),
        None => {
            let b64 = query
                .iter()
                .find(|(k, _)| k == "text_b64")
                .map(|(_, v)| v)
                .ok_or(NormalizeError::MissingText)?;
            decode_b64_text(b64)?
        }
    };
    let path = path.trim_start_matches('/');
    if path.is_empty() {
        return Err(NormalizeError::InvalidUrl("empty path".into()));
    }
    let with_scheme = if path.contains("://") {
        path.to_string()
    } else {
        format!("https://{path}")
    };
    let mut url =
        url::Url::parse(&with_scheme).map_err(|e| NormalizeError::InvalidUrl(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(NormalizeError::InvalidUrl(format!(
            "scheme {} is not http(s)",
            url.scheme()
        )));
    }
    let mut params: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    params.extend(query.iter().cloned());
    const DROP: [&str; 7] = [
        "sampleRate",
        "format",
        "fsFix",
        "text_b64",
        "text",
        "f",
        "sr",
    ];
    let sr = params
        .iter()
        .rev()
        .find(|(k, _)| k == "sr")
        .and_then(|(_, v)| v.parse::<u32>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_SYNTH_SAMPLE_RATE);
    let mut kept: Vec<(String, String)> = Vec::new();
    for (k, v) in params {
        if DROP.contains(&k.as_str()) || kept.iter().any(|(kk, _)| *kk == k) {
            continue;
        }
        kept.push((k, v));
    }
    url.set_query(None);
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in &kept {
            q.append_pair(k, v);
        }
        q.append_pair("text", &text);
        q.append_pair("f", "wav");
        q.append_pair("sr", &sr.to_string());
    }
    Ok(url.to_string())
}

fn decode_b64_text(s: &str) -> Result<String, NormalizeError> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let s = s.trim();
    let bytes = STANDARD
        .decode(s)
        .or_else(|_| STANDARD_NO_PAD.decode(s))
        .or_else(|_| URL_SAFE.decode(s))
        .or_else(|_| URL_SAFE_NO_PAD.decode(s))
        .map_err(|_| NormalizeError::InvalidTextB64)?;
    String::from_utf8(bytes).map_err(|_| NormalizeError::InvalidTextB64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn params(url: &str) -> Vec<(String, String)> {
        url::Url::parse(url)
            .unwrap()
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    #[test]
    fn normalize_forces_wav_and_default_sr() {
        let u = normalize_tts_url(
            "tts.example.com/v1/synth",
            &q(&[
                ("text", "hello world"),
                ("voice", "anna"),
                ("sampleRate", "8000"),
                ("format", "mp3"),
                ("fsFix", "1"),
                ("f", "mp3"),
            ]),
        )
        .unwrap();
        assert!(u.starts_with("https://tts.example.com/v1/synth?"));
        let p = params(&u);
        assert!(p.contains(&("voice".into(), "anna".into())));
        assert!(p.contains(&("text".into(), "hello world".into())));
        assert!(p.contains(&("f".into(), "wav".into())));
        assert!(p.contains(&("sr".into(), "16000".into())));
        for gone in ["sampleRate", "format", "fsFix"] {
            assert!(!p.iter().any(|(k, _)| k == gone), "{gone} kept in {u}");
        }
        assert_eq!(p.iter().filter(|(k, _)| k == "f").count(), 1);
    }

    #[test]
    fn normalize_keeps_valid_sr_and_decodes_b64() {
        let b64 = base64::engine::general_purpose::STANDARD.encode("привет, мир");
        let u = normalize_tts_url(
            "http://127.0.0.1:9/s?sr=8000&lang=ru",
            &q(&[("text_b64", &b64)]),
        )
        .unwrap();
        let p = params(&u);
        assert!(p.contains(&("sr".into(), "8000".into())));
        assert!(p.contains(&("lang".into(), "ru".into())));
        assert!(p.contains(&("text".into(), "привет, мир".into())));
        assert!(!p.iter().any(|(k, _)| k == "text_b64"));
        let u = normalize_tts_url("http://h/s", &q(&[("text", "x"), ("sr", "abc")])).unwrap();
        assert!(params(&u).contains(&("sr".into(), "16000".into())));
    }

    #[test]
    fn normalize_errors() {
        assert_eq!(
            normalize_tts_url("h/s", &q(&[("voice", "a")])),
            Err(NormalizeError::MissingText)
        );
        assert_eq!(
            normalize_tts_url("h/s", &q(&[("text_b64", "%%%")])),
            Err(NormalizeError::InvalidTextB64)
        );
        assert!(matches!(
            normalize_tts_url("", &q(&[("text", "a")])),
            Err(NormalizeError::InvalidUrl(_))
        ));
        assert!(matches!(
            normalize_tts_url("ftp://h/s", &q(&[("text", "a")])),
            Err(NormalizeError::InvalidUrl(_))
        ));
    }
}

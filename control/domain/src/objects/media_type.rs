//! The media types stored objects are kept and served with: one allow-list, one parser,
//! one sniffer and one set of download headers, used by every upload and every route
//! that serves stored bytes (docs/security.md, "Stored objects: media types and
//! downloads").
//!
//! The service's origin also serves the console, so a stored object served as HTML, SVG
//! or XML would run script there. Hence:
//!
//! - **Declared types are parsed, not matched by prefix.** A Content-Type must be one
//!   `type/subtype` of RFC 9110 tokens, optionally followed by well-formed `;name=value`
//!   parameters; parameters are dropped, never stored. `audio/wav; text/html` (a
//!   parameter without `=`) and `audio/wav, text/html` (a list) are malformed.
//! - **Only the audio the media decoder plays is stored as audio**: WAV, MPEG audio,
//!   Ogg and FLAC ([`AudioType`]), each under one canonical name (`audio/x-wav` is
//!   stored as `audio/wav`). Anything stored otherwise is `application/octet-stream`.
//! - **The bytes are sniffed.** [`upload_type`] reads the first [`SNIFF_LEN`] bytes: a
//!   declared audio type must match the file's magic; with no type (or
//!   `application/octet-stream`) a recognised audio file takes its sniffed type and other
//!   bytes are kept as `application/octet-stream`; bytes that look like markup (HTML,
//!   SVG, XML) are refused whatever was declared.
//! - **Serving re-checks.** [`served_type`] maps whatever a row holds onto the allow-list
//!   (rows written before these rules were enforced included), and [`download_headers`]
//!   adds `nosniff`, a sandboxing Content-Security-Policy and `Content-Disposition:
//!   attachment`.

use http::{HeaderMap, HeaderValue, header};

/// Bytes of arbitrary data: the type of every stored object that is not allow-listed audio.
pub const OCTET_STREAM: &str = "application/octet-stream";
/// A saved call history.
pub const JSON: &str = "application/json";

/// How many leading bytes of an upload [`sniff`] reads.
pub const SNIFF_LEN: usize = 512;

/// The Content-Security-Policy of every object download: no resource loads, and a
/// document opened from it anyway runs sandboxed (an opaque origin, no scripts).
pub const DOWNLOAD_CSP: &str = "sandbox; default-src 'none'; frame-ancestors 'none'";

/// The audio formats the media decoder plays (`media/src/prompt.rs`: hound for WAV,
/// symphonia's mp3, ogg/vorbis and flac features).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioType {
    Wav,
    Mpeg,
    Ogg,
    Flac,
}

impl AudioType {
    /// The canonical media type, the only one stored and served for the format.
    pub fn as_str(self) -> &'static str {
        match self {
            AudioType::Wav => "audio/wav",
            AudioType::Mpeg => "audio/mpeg",
            AudioType::Ogg => "audio/ogg",
            AudioType::Flac => "audio/flac",
        }
    }

    /// The format a media type names (lowercase `type/subtype`, parameters stripped):
    /// the canonical name or one of its common aliases.
    fn of_essence(essence: &str) -> Option<AudioType> {
        Some(match essence {
            "audio/wav" | "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => AudioType::Wav,
            "audio/mpeg" | "audio/mp3" | "audio/x-mp3" | "audio/mpeg3" | "audio/x-mpeg"
            | "audio/mpa" => AudioType::Mpeg,
            "audio/ogg" | "application/ogg" | "audio/x-ogg" => AudioType::Ogg,
            "audio/flac" | "audio/x-flac" => AudioType::Flac,
            _ => return None,
        })
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The length of the token at the start of `s` (0 when none).
fn token_len(s: &[u8]) -> usize {
    s.iter().take_while(|b| is_tchar(**b)).count()
}

fn skip_ows(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|b| **b == b' ' || **b == b'\t').count();
    &s[n..]
}

/// The length of the quoted-string at the start of `s` (which starts with `"`), or None
/// when it is not terminated or holds a byte the grammar refuses.
fn quoted_len(s: &[u8]) -> Option<usize> {
    let mut i = 1;
    while i < s.len() {
        match s[i] {
            b'"' => return Some(i + 1),
            b'\\' => {
                let next = *s.get(i + 1)?;
                if !(next == b'\t' || next == b' ' || (0x21..=0x7e).contains(&next) || next >= 0x80)
                {
                    return None;
                }
                i += 2;
            }
            b'\t' | b' ' | 0x21 | 0x23..=0x5b | 0x5d..=0x7e | 0x80..=0xff => i += 1,
            _ => return None,
        }
    }
    None
}

/// The lowercase `type/subtype` of a Content-Type value following RFC 9110's
/// `media-type` grammar (`token "/" token *( OWS ";" OWS [ token "=" ( token /
/// quoted-string ) ] )`); None when the value is anything else. Parameters are checked
/// for form and dropped.
pub fn essence(value: &[u8]) -> Option<String> {
    let s = skip_ows(value);
    let t = token_len(s);
    if t == 0 || s.get(t) != Some(&b'/') {
        return None;
    }
    let rest = &s[t + 1..];
    let st = token_len(rest);
    if st == 0 {
        return None;
    }
    let essence = std::str::from_utf8(&s[..t + 1 + st])
        .ok()?
        .to_ascii_lowercase();
    let mut rest = skip_ows(&rest[st..]);
    while !rest.is_empty() {
        rest = skip_ows(rest.strip_prefix(b";")?);
        if rest.is_empty() || rest[0] == b';' {
            continue;
        }
        let n = token_len(rest);
        if n == 0 || rest.get(n) != Some(&b'=') {
            return None;
        }
        rest = &rest[n + 1..];
        let v = match rest.first() {
            Some(b'"') => quoted_len(rest)?,
            _ => token_len(rest),
        };
        if v == 0 {
            return None;
        }
        rest = skip_ows(&rest[v..]);
    }
    Some(essence)
}

/// What an upload declared its type to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declared {
    /// No Content-Type, or `application/octet-stream`: the bytes decide.
    Unspecified,
    /// One of the audio formats the service plays.
    Audio(AudioType),
}

/// Why an upload is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The declared type is malformed or not an allow-listed one (400
    /// `unsupported_content_type`).
    Unsupported(String),
    /// The bytes are not what was declared, or are markup (415 `content_type_mismatch`).
    Mismatch(String),
}

/// Parses an upload's declared Content-Type (the raw header value, None when absent).
pub fn declared(value: Option<&[u8]>) -> Result<Declared, Refusal> {
    let Some(value) = value else {
        return Ok(Declared::Unspecified);
    };
    let shown = String::from_utf8_lossy(value);
    let Some(essence) = essence(value) else {
        return Err(Refusal::Unsupported(format!(
            "content type {shown:?} is not a well-formed media type (type/subtype, optional ;name=value parameters)"
        )));
    };
    if essence == OCTET_STREAM {
        return Ok(Declared::Unspecified);
    }
    AudioType::of_essence(&essence)
        .map(Declared::Audio)
        .ok_or_else(|| {
            Refusal::Unsupported(format!(
                "content type {shown:?} is not one of audio/wav, audio/mpeg, audio/ogg, audio/flac (or an alias of one) or application/octet-stream"
            ))
        })
}

/// What the first bytes of a file are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    Audio(AudioType),
    /// Text that a browser would render as HTML, SVG or XML.
    Markup,
    Unknown,
}

/// Whether `h` starts with an MPEG audio frame header (11 sync bits, then a version,
/// layer, bitrate and sample rate that are not reserved).
fn mpeg_frame(h: &[u8]) -> bool {
    let [a, b, c, ..] = *h else {
        return false;
    };
    a == 0xff
        && b & 0xe0 == 0xe0
        && (b >> 3) & 3 != 1
        && (b >> 1) & 3 != 0
        && c >> 4 != 0xf
        && (c >> 2) & 3 != 3
}

/// Tags that make a browser's sniffer (or a lenient parser) read text as a document.
const MARKUP_TAGS: &[&[u8]] = &[
    b"<!doctype",
    b"<html",
    b"<head",
    b"<body",
    b"<script",
    b"<svg",
    b"<?xml",
    b"<iframe",
    b"<object",
    b"<embed",
    b"<img",
    b"<a ",
    b"<div",
    b"<style",
    b"<title",
    b"<meta",
    b"<!--",
    b"<xsl",
    b"<x:",
    b"<math",
];

fn looks_like_markup(h: &[u8]) -> bool {
    // Text starting with `<` (after a byte-order mark and white space), in UTF-8 or
    // UTF-16, is a document to a browser; so is any of the tags anywhere in the window.
    let body = h
        .strip_prefix(b"\xef\xbb\xbf")
        .or_else(|| h.strip_prefix(b"\xfe\xff"))
        .or_else(|| h.strip_prefix(b"\xff\xfe"))
        .unwrap_or(h);
    let first = body
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'\x0c' | 0));
    if first == Some(&b'<') {
        return true;
    }
    let lower: Vec<u8> = h
        .iter()
        .filter(|b| **b != 0)
        .map(u8::to_ascii_lowercase)
        .collect();
    MARKUP_TAGS
        .iter()
        .any(|t| lower.windows(t.len()).any(|w| w == *t))
}

/// Classifies a file by its first bytes (at most [`SNIFF_LEN`] are looked at).
pub fn sniff(head: &[u8]) -> Sniffed {
    let h = &head[..head.len().min(SNIFF_LEN)];
    if h.len() >= 12 && h.starts_with(b"RIFF") && &h[8..12] == b"WAVE" {
        return Sniffed::Audio(AudioType::Wav);
    }
    if h.starts_with(b"fLaC") {
        return Sniffed::Audio(AudioType::Flac);
    }
    if h.starts_with(b"OggS") {
        return Sniffed::Audio(AudioType::Ogg);
    }
    // An ID3v2 tag opens most MP3 files; a bare frame the rest.
    if h.starts_with(b"ID3") || mpeg_frame(h) {
        return Sniffed::Audio(AudioType::Mpeg);
    }
    if looks_like_markup(h) {
        return Sniffed::Markup;
    }
    Sniffed::Unknown
}

/// The type an upload is stored with: the declared audio type when the bytes are that
/// format; with no declared type, the sniffed audio type or `application/octet-stream`.
/// Refused: a declared audio type the bytes are not, and markup whatever was declared.
/// `head` is the file's first [`SNIFF_LEN`] bytes (fewer when the file is shorter).
pub fn upload_type(declared: Declared, head: &[u8]) -> Result<&'static str, Refusal> {
    match (declared, sniff(head)) {
        (_, Sniffed::Markup) => Err(Refusal::Mismatch(
            "the bytes are markup (HTML, SVG or XML), not audio".into(),
        )),
        (Declared::Audio(d), Sniffed::Audio(s)) if d == s => Ok(d.as_str()),
        (Declared::Audio(d), Sniffed::Audio(s)) => Err(Refusal::Mismatch(format!(
            "declared {} but the bytes are {}",
            d.as_str(),
            s.as_str()
        ))),
        (Declared::Audio(d), Sniffed::Unknown) => Err(Refusal::Mismatch(format!(
            "declared {} but the bytes are no audio format the service plays (WAV, MPEG, Ogg, FLAC)",
            d.as_str()
        ))),
        (Declared::Unspecified, Sniffed::Audio(s)) => Ok(s.as_str()),
        (Declared::Unspecified, Sniffed::Unknown) => Ok(OCTET_STREAM),
    }
}

/// The type stored bytes are served with: a stored (or signed) type mapped onto the
/// allow-list (the canonical audio types and `application/json`); anything else,
/// malformed values included, is `application/octet-stream`.
pub fn served_type(stored: &str) -> &'static str {
    match essence(stored.as_bytes()) {
        Some(e) if e == JSON => JSON,
        Some(e) => AudioType::of_essence(&e).map_or(OCTET_STREAM, AudioType::as_str),
        None => OCTET_STREAM,
    }
}

/// The type of an object the service wrote itself, by its path's extension (call
/// recordings, speech turns, histories); always an allow-listed type.
pub fn type_of_path(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("wav") => AudioType::Wav.as_str(),
        Some("mp3") => AudioType::Mpeg.as_str(),
        Some("ogg") | Some("oga") => AudioType::Ogg.as_str(),
        Some("flac") => AudioType::Flac.as_str(),
        Some("json") => JSON,
        _ => OCTET_STREAM,
    }
}

/// `name` reduced to letters, digits, `.`, `-` and `_` (anything else `_`), for a
/// `Content-Disposition` filename that needs no quoting rules; `download` when empty.
pub fn safe_filename(name: &str) -> String {
    let s: String = name
        .chars()
        .take(128)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() { "download".into() } else { s }
}

/// The headers of every response carrying stored bytes: the served type of
/// `content_type` ([`served_type`]), `X-Content-Type-Options: nosniff`, the sandboxing
/// [`DOWNLOAD_CSP`] and `Content-Disposition: attachment` with a [`safe_filename`].
pub fn download_headers(content_type: &str, filename: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(served_type(content_type)),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(DOWNLOAD_CSP),
    );
    let disposition = format!("attachment; filename=\"{}\"", safe_filename(filename));
    h.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_str(&disposition)
            .unwrap_or_else(|_| HeaderValue::from_static("attachment")),
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAV: &[u8] = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00";

    #[test]
    fn essence_follows_the_media_type_grammar() {
        for (v, e) in [
            ("audio/wav", "audio/wav"),
            (" Audio/X-WAV ", "audio/x-wav"),
            ("audio/wav;codecs=1", "audio/wav"),
            ("audio/wav ; name=\"a; b=c\" ;", "audio/wav"),
            ("audio/wav;;x=1", "audio/wav"),
        ] {
            assert_eq!(essence(v.as_bytes()).as_deref(), Some(e), "{v}");
        }
        for v in [
            "audio/wav; text/html",
            "audio/wav, text/html",
            "audio/wav text/html",
            "audio/",
            "/wav",
            "audio",
            "",
            "audio/wav; x=",
            "audio/wav; x=\"open",
            "audio/wav; =x",
            "audio/wav\x00",
            "audio/wav; x=a b",
            "audio/wav\ntext/html",
        ] {
            assert_eq!(essence(v.as_bytes()), None, "{v:?}");
        }
    }

    #[test]
    fn declared_types_map_onto_the_allow_list() {
        assert_eq!(declared(None), Ok(Declared::Unspecified));
        assert_eq!(
            declared(Some(b"application/octet-stream")),
            Ok(Declared::Unspecified)
        );
        assert_eq!(
            declared(Some(b"audio/x-wav")),
            Ok(Declared::Audio(AudioType::Wav))
        );
        assert_eq!(
            declared(Some(b"audio/mp3")),
            Ok(Declared::Audio(AudioType::Mpeg))
        );
        assert_eq!(
            declared(Some(b"application/ogg")),
            Ok(Declared::Audio(AudioType::Ogg))
        );
        for bad in [
            "text/html",
            "image/svg+xml",
            "audio/aac",
            "audio/wav; text/html",
            "audio/wav, text/html",
            "text/html; x=audio/wav",
        ] {
            assert!(
                matches!(declared(Some(bad.as_bytes())), Err(Refusal::Unsupported(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn sniffing_knows_the_played_formats_and_markup() {
        assert_eq!(sniff(WAV), Sniffed::Audio(AudioType::Wav));
        assert_eq!(sniff(b"ID3\x04\x00"), Sniffed::Audio(AudioType::Mpeg));
        assert_eq!(
            sniff(&[0xff, 0xfb, 0x90, 0x00]),
            Sniffed::Audio(AudioType::Mpeg)
        );
        assert_eq!(sniff(b"OggS\x00\x02"), Sniffed::Audio(AudioType::Ogg));
        assert_eq!(sniff(b"fLaC\x00\x00"), Sniffed::Audio(AudioType::Flac));
        // ADTS AAC (layer 0) and UTF-16 markup share the sync bits; neither is MPEG audio.
        assert_eq!(sniff(&[0xff, 0xf1, 0x50, 0x80]), Sniffed::Unknown);
        assert_eq!(sniff(b"\xff\xfe<\x00h\x00"), Sniffed::Markup);
        for m in [
            &b"<html><script>alert(1)</script>"[..],
            b"\xef\xbb\xbf  \n<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
            b"<?xml version=\"1.0\"?>",
            b"junk then <SCRIPT>x</SCRIPT>",
            b"RIFF\x00\x00\x00\x00AVI <html>",
        ] {
            assert_eq!(sniff(m), Sniffed::Markup, "{}", String::from_utf8_lossy(m));
        }
        assert_eq!(sniff(&[1, 2, 3]), Sniffed::Unknown);
        assert_eq!(sniff(b""), Sniffed::Unknown);
    }

    #[test]
    fn uploads_are_stored_as_their_sniffed_audio_or_refused() {
        let wav = Declared::Audio(AudioType::Wav);
        let mpeg = Declared::Audio(AudioType::Mpeg);
        assert_eq!(upload_type(wav, WAV), Ok("audio/wav"));
        assert_eq!(upload_type(Declared::Unspecified, WAV), Ok("audio/wav"));
        assert_eq!(
            upload_type(Declared::Unspecified, &[1, 2]),
            Ok(OCTET_STREAM)
        );
        assert!(matches!(upload_type(mpeg, WAV), Err(Refusal::Mismatch(_))));
        assert!(matches!(
            upload_type(wav, &[1, 2, 3]),
            Err(Refusal::Mismatch(_))
        ));
        for d in [wav, Declared::Unspecified] {
            assert!(matches!(
                upload_type(d, b"<html>"),
                Err(Refusal::Mismatch(_))
            ));
        }
    }

    #[test]
    fn serving_keeps_only_allow_listed_types() {
        for (stored, served) in [
            ("audio/wav", "audio/wav"),
            ("audio/x-wav", "audio/wav"),
            ("audio/mpeg; bitrate=128", "audio/mpeg"),
            ("application/json", "application/json"),
            ("audio/wav; text/html", OCTET_STREAM),
            ("audio/x; text/html", OCTET_STREAM),
            ("text/html", OCTET_STREAM),
            ("image/svg+xml", OCTET_STREAM),
            ("text/plain; charset=utf-8", OCTET_STREAM),
            ("audio/aac", OCTET_STREAM),
            ("", OCTET_STREAM),
        ] {
            assert_eq!(served_type(stored), served, "{stored}");
        }
        assert_eq!(type_of_path("calls/a/b/recording.wav"), "audio/wav");
        assert_eq!(type_of_path("calls/a/b.history.json"), JSON);
        assert_eq!(type_of_path("x.html"), OCTET_STREAM);
        assert_eq!(type_of_path("x.txt"), OCTET_STREAM);
    }

    #[test]
    fn download_headers_are_complete() {
        let h = download_headers("text/html", "a\"b\r\n<x>.wav");
        assert_eq!(h[header::CONTENT_TYPE], OCTET_STREAM);
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::CONTENT_SECURITY_POLICY], DOWNLOAD_CSP);
        assert_eq!(
            h[header::CONTENT_DISPOSITION],
            "attachment; filename=\"a_b___x_.wav\""
        );
        assert_eq!(safe_filename(".."), "download");
        assert_eq!(safe_filename(""), "download");
    }
}

//! Bounded fuzzing of the SMS provider template language (`sms_template`): `check` is what the
//! API validates a provider's url, headers and body with, `render` what the sender builds each
//! message's request with, `url_escape` what encodes values inside a URL.
//!
//! The target replays `tests/fuzz_corpus/sms_template/` and then mutations of it for at most
//! ~3 s or its iteration cap, whichever comes first (see `tests/fuzz/harness.rs`).
//! `CALLSMITH_FUZZ_SEED=<u64>|random` sets the seed (printed on every run; the default is
//! fixed); `CALLSMITH_FUZZ_SECS=<secs>` sets the time budget and lifts the cap:
//! `CALLSMITH_FUZZ_SECS=600 cargo test -p callsmith-control --test fuzz -- --nocapture`.

#[path = "../../tests/fuzz/harness.rs"]
mod harness;

use callsmith_domain::sms_template::{check, render, url_escape};

#[test]
fn fuzz_sms_template() {
    harness::run(
        "sms_template",
        &harness::corpus_dir("sms_template"),
        Vec::new(),
        100_000,
        |bytes| {
            let t = String::from_utf8_lossy(bytes);
            // The value substituted for `text` is the template itself: values are inserted
            // verbatim, never expanded again.
            let (from, to, text) = ("+4930\u{e9}", "{{to}}", t.as_ref());
            let checked = check(&t);
            let plain = render(&t, from, to, text, |v| v.to_string());
            if checked.is_ok() != plain.is_ok() {
                return Err(format!("check {checked:?} but render {plain:?}"));
            }
            if let Ok(out) = &plain
                && !t.contains("{{")
                && *out != *t
            {
                return Err(format!(
                    "a template without placeholders rendered as {out:?}"
                ));
            }
            if let Ok(url) = render(&t, from, to, text, url_escape) {
                // Escaped values add only unreserved characters and percent escapes.
                for v in [from, to, text] {
                    let e = url_escape(v);
                    if let Some(c) = e
                        .chars()
                        .find(|c| !(c.is_ascii_alphanumeric() || "-._~*%".contains(*c)))
                    {
                        return Err(format!("url_escape({v:?}) kept {c:?}"));
                    }
                }
                if checked.is_err() {
                    return Err(format!("rendered {url:?} from a template check refused"));
                }
            }
            Ok(())
        },
    );
}

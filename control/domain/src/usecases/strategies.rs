//! Communication strategies, the do-not-call list and idempotency keys: the rules the v1
//! API, the legacy API and the dialer share (docs/strategies.md).

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{
    Ops,
    error::{UseCaseError, UseCaseResult},
};
use crate::{
    store::{AccountRecord, Reservation, StrategyRecord},
    strategy::Strategy,
};

/// `invalid_strategy` naming the offending member of `definition` (also in
/// `data.field`) unless `v` is a valid strategy ([`Strategy::parse`]).
pub fn check_strategy_definition(v: &Value) -> UseCaseResult<Strategy> {
    Strategy::parse(v).map_err(|e| {
        let field = if e.field.is_empty() {
            "definition".to_string()
        } else {
            format!("definition.{}", e.field)
        };
        UseCaseError::Invalid {
            reason: "invalid_strategy".into(),
            message: format!("{field}: {}", e.message),
            data: Some(serde_json::json!({"field": field})),
        }
    })
}

/// Most digits an E.164 number has.
const E164_MAX_DIGITS: usize = 15;
/// Fewest digits accepted (a country code and a short subscriber number).
const E164_MIN_DIGITS: usize = 7;

/// A phone number in E.164 form (`+` and 7 to 15 digits) from what a caller wrote:
/// spaces, dashes, dots and parentheses are dropped and a leading international prefix
/// `00` becomes `+`. A number without `+` or `00` is refused (`invalid_number`, naming
/// `field`): its country cannot be known.
pub fn normalize_e164(field: &str, raw: &str) -> UseCaseResult<String> {
    let s: String = raw
        .trim()
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '(' | ')'))
        .collect();
    let digits = s.strip_prefix('+').or_else(|| s.strip_prefix("00"));
    match digits {
        Some(d)
            if (E164_MIN_DIGITS..=E164_MAX_DIGITS).contains(&d.len())
                && d.bytes().all(|b| b.is_ascii_digit())
                && !d.starts_with('0') =>
        {
            Ok(format!("+{d}"))
        }
        _ => Err(UseCaseError::invalid(
            "invalid_number",
            format!(
                "{field}: {raw:?} is not an international number (+ or 00, a country code, {E164_MIN_DIGITS} to {E164_MAX_DIGITS} digits in all)"
            ),
        )),
    }
}

/// The form a dialled recipient is looked up in on the do-not-call list: its E.164 form,
/// or `+` and its digits when it carries no international prefix.
pub fn do_not_call_key(recipient: &str) -> String {
    normalize_e164("recipient", recipient).unwrap_or_else(|_| {
        let digits: String = recipient.chars().filter(char::is_ascii_digit).collect();
        format!("+{digits}")
    })
}

/// The number an in-call opt-out adds to the do-not-call list: the recipient's
/// [`do_not_call_key`] when that is an international number; None for a party that is no
/// phone number (a browser call).
pub fn opt_out_number(recipient: &str) -> Option<String> {
    normalize_e164("recipient", &do_not_call_key(recipient)).ok()
}

/// Most numbers one CSV import may carry.
pub const MAX_IMPORT_NUMBERS: usize = 100_000;

/// The numbers of a do-not-call CSV: one number per line in the first column (more
/// columns are allowed and ignored), an optional header line whose first cell is `number`
/// or `phone`, blank lines skipped, quotes around a cell allowed. The first bad line is
/// refused with `invalid_csv` naming its line number (1-based) and content; nothing is
/// returned then.
pub fn parse_do_not_call_csv(text: &str) -> UseCaseResult<Vec<String>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim_start_matches('\u{feff}').trim();
        if line.is_empty() {
            continue;
        }
        let first = line.split([',', ';', '\t']).next().unwrap_or("").trim();
        let first = first
            .strip_prefix('"')
            .and_then(|f| f.strip_suffix('"'))
            .unwrap_or(first)
            .trim();
        if out.is_empty()
            && n == 1
            && matches!(first.to_ascii_lowercase().as_str(), "number" | "phone")
        {
            continue;
        }
        match normalize_e164("number", first) {
            Ok(num) => out.push(num),
            Err(_) => {
                let shown: String = line.chars().take(80).collect();
                return Err(UseCaseError::Invalid {
                    reason: "invalid_csv".into(),
                    message: format!(
                        "line {n}: {shown:?} does not start with an international phone number (+ or 00, a country code, {E164_MIN_DIGITS} to {E164_MAX_DIGITS} digits); nothing was imported"
                    ),
                    data: Some(serde_json::json!({"line": n})),
                });
            }
        }
        if out.len() > MAX_IMPORT_NUMBERS {
            return Err(UseCaseError::Invalid {
                reason: "invalid_csv".into(),
                message: format!(
                    "line {n}: more than {MAX_IMPORT_NUMBERS} numbers in one import; split the file"
                ),
                data: Some(serde_json::json!({"line": n})),
            });
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// How long a repeated `Idempotency-Key` returns the first result (24 hours).
pub const IDEMPOTENCY_WINDOW_HOURS: i64 = 24;
/// Longest key accepted.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// Whether `key` is a usable `Idempotency-Key`: 1 to 255 visible ASCII characters.
pub fn is_idempotency_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_IDEMPOTENCY_KEY_LEN
        && key.bytes().all(|b| b.is_ascii_graphic())
}

/// The identity of a request for its idempotency key: what it is (`what`, e.g. the
/// method and path) and its body as sent, re-encoded so that key order and spacing do not
/// count.
pub fn request_hash(what: &str, body: &Value) -> String {
    let mut h = Sha256::new();
    h.update(what.as_bytes());
    h.update([0]);
    h.update(canonical(body).as_bytes());
    hex::encode(h.finalize())
}

fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[*k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// What an idempotency key says about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idempotent {
    /// Run the request, then [`Ops::idempotency_finish`].
    Run,
    /// The first request with this key created this resource: answer it again.
    Replay(String),
}

impl Ops<'_> {
    /// The strategy `sid` of `account`, checked: `unknown_strategy` naming `field` when the
    /// account has none of that id.
    pub async fn account_strategy(
        &self,
        account: &AccountRecord,
        field: &str,
        sid: &str,
    ) -> UseCaseResult<StrategyRecord> {
        self.services
            .store
            .strategy_get(sid.trim())
            .await?
            .filter(|s| s.account_sid == account.sid)
            .ok_or_else(|| {
                UseCaseError::invalid(
                    "unknown_strategy",
                    format!("{field}: no strategy {sid:?} in this account"),
                )
            })
    }

    /// `recipient_suppressed` when `recipient` is on the account's do-not-call list.
    pub async fn check_not_suppressed(
        &self,
        account_sid: &str,
        recipient: &str,
    ) -> UseCaseResult<()> {
        let key = do_not_call_key(recipient);
        if self
            .services
            .store
            .do_not_call_contains(account_sid, &key)
            .await?
        {
            return Err(UseCaseError::invalid(
                "recipient_suppressed",
                format!("recipient: {key} is on the account's do-not-call list"),
            ));
        }
        Ok(())
    }

    /// Starts a request carrying `key`: [`Idempotent::Run`] when it is the first within
    /// the window ([`IDEMPOTENCY_WINDOW_HOURS`]), [`Idempotent::Replay`] when an earlier
    /// identical request created something, `idempotency_key_reused` (422) when the
    /// earlier request with the key asked something else, `idempotency_key_in_flight`
    /// (409) while it still runs.
    pub async fn idempotency_start(
        &self,
        account_sid: &str,
        key: &str,
        hash: &str,
    ) -> UseCaseResult<Idempotent> {
        let now = Utc::now();
        let since: DateTime<Utc> = now - Duration::hours(IDEMPOTENCY_WINDOW_HOURS);
        // Every key older than the window has expired, whoever's it is.
        self.services.store.idempotency_prune(since).await?;
        let held = match self
            .services
            .store
            .idempotency_reserve(account_sid, key, hash, now)
            .await?
        {
            Reservation::Reserved => return Ok(Idempotent::Run),
            Reservation::Held(h) => h,
        };
        if held.request_hash != hash {
            return Err(UseCaseError::invalid(
                "idempotency_key_reused",
                "Idempotency-Key: an earlier request with this key asked for something else; use a new key for a new request",
            ));
        }
        match held.resource_sid {
            Some(sid) => Ok(Idempotent::Replay(sid)),
            None => Err(UseCaseError::Conflict {
                reason: "idempotency_key_in_flight".into(),
                message: "Idempotency-Key: the first request with this key is still running; repeat it once that one has answered".into(),
            }),
        }
    }

    /// Ends a request started with [`Ops::idempotency_start`]: records what it created,
    /// or frees the key when it failed (it created nothing, so a retry may run).
    pub async fn idempotency_finish(
        &self,
        account_sid: &str,
        key: &str,
        created: Option<&str>,
    ) -> UseCaseResult<()> {
        let store = &self.services.store;
        match created {
            Some(sid) => store.idempotency_complete(account_sid, key, sid).await?,
            None => store.idempotency_release(account_sid, key).await?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_normalise_to_e164_or_are_refused() {
        for (raw, want) in [
            ("+1 (212) 555-0100", "+12125550100"),
            ("0049 30 1234567", "+49301234567"),
            ("+44.20.7946.0000", "+442079460000"),
        ] {
            assert_eq!(normalize_e164("n", raw).unwrap(), want, "{raw}");
        }
        for raw in [
            "2125550100",
            "+12",
            "+1234567890123456",
            "+1 212 555 01x0",
            "",
            "+0123456789",
        ] {
            let e = normalize_e164("number", raw).unwrap_err().to_string();
            assert!(e.starts_with("invalid_number: number:"), "{raw}: {e}");
        }
        assert_eq!(do_not_call_key("12125550100"), "+12125550100");
        assert_eq!(do_not_call_key("00 1 212 555 0100"), "+12125550100");
        assert_eq!(
            opt_out_number("0012125550100").as_deref(),
            Some("+12125550100")
        );
        assert_eq!(
            opt_out_number("12125550100").as_deref(),
            Some("+12125550100")
        );
        assert_eq!(opt_out_number("browser"), None);
    }

    #[test]
    fn csv_takes_the_first_column_and_names_the_first_bad_line() {
        let ok = parse_do_not_call_csv(
            "number,name\n+1 212 555 0100,Ann\n\n\"0049301234567\";x\n+12125550100\n",
        )
        .unwrap();
        assert_eq!(ok, ["+12125550100", "+49301234567"]);
        let e =
            parse_do_not_call_csv("+12125550100\n+12125550101\nhello,world\n+1212").unwrap_err();
        match e {
            UseCaseError::Invalid {
                reason,
                message,
                data,
            } => {
                assert_eq!(reason, "invalid_csv");
                assert!(message.starts_with("line 3: \"hello,world\""), "{message}");
                assert_eq!(data, Some(json!({"line": 3})));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn request_hash_ignores_key_order_but_not_values() {
        let a = request_hash("POST x", &json!({"a": 1, "b": {"c": [1, 2]}}));
        let b = request_hash("POST x", &json!({"b": {"c": [1, 2]}, "a": 1}));
        assert_eq!(a, b);
        assert_ne!(
            a,
            request_hash("POST x", &json!({"a": 2, "b": {"c": [1, 2]}}))
        );
        assert_ne!(
            a,
            request_hash("POST y", &json!({"a": 1, "b": {"c": [1, 2]}}))
        );
    }

    #[test]
    fn idempotency_keys_are_bounded_visible_ascii() {
        assert!(is_idempotency_key("order-42/retry"));
        assert!(is_idempotency_key(&"k".repeat(255)));
        for bad in ["", " a", "ä", &"k".repeat(256)] {
            assert!(!is_idempotency_key(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_bad_definition_names_its_field() {
        let e =
            check_strategy_definition(&json!({"frequency_cap": {"calls": 0, "period_s": 3600}}))
                .unwrap_err();
        match e {
            UseCaseError::Invalid {
                reason,
                message,
                data,
            } => {
                assert_eq!(reason, "invalid_strategy");
                assert!(
                    message.starts_with("definition.frequency_cap.calls:"),
                    "{message}"
                );
                assert_eq!(
                    data,
                    Some(json!({"field": "definition.frequency_cap.calls"}))
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

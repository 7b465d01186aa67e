//! What the stack writes to the log, and how much of it.
//!
//! * Whole SIP messages, as sent and as received, are DEBUG events of the target
//!   [`MESSAGE_TARGET`] (field `sip`, one line with `\r\n` escaped), from an inspector on the
//!   endpoint ([`MessageLog`]).
//! * Call lines at INFO name the parties through [`redact_number`] only.

use rsipstack::sip::SipMessage;
use rsipstack::transaction::endpoint::MessageInspector;
use rsipstack::transport::SipAddr;
use tracing::debug;

/// The tracing target of the whole-message DEBUG events (`callsmith_sip::message=debug`
/// turns them on alone).
pub const MESSAGE_TARGET: &str = "callsmith_sip::message";

/// A phone number (or any party name) fit for an INFO log line: most of it hidden, e.g.
/// `+4930123456567` → `+49********567`.
///
/// A leading `+` stays. Of the rest, 10 characters or more show their first two (the
/// country code, usually) and last three; 7–9 their last three; 4–6 their last two; fewer
/// are hidden whole. Each hidden character becomes `*`.
pub fn redact_number(number: &str) -> String {
    let (plus, rest) = match number.strip_prefix('+') {
        Some(rest) => ("+", rest),
        None => ("", number),
    };
    let chars: Vec<char> = rest.chars().collect();
    let n = chars.len();
    let (head, tail) = match n {
        10.. => (2, 3),
        7..=9 => (0, 3),
        4..=6 => (0, 2),
        _ => (0, 0),
    };
    let mut out = String::with_capacity(number.len());
    out.push_str(plus);
    for (i, c) in chars.iter().enumerate() {
        out.push(if i < head || i >= n - tail { *c } else { '*' });
    }
    out
}

/// Logs every message the endpoint sends or receives at DEBUG ([`MESSAGE_TARGET`]) around an
/// inner inspector: what is sent after the inner one rewrote it, what is received before.
/// What is sent is counted for retransmissions too, when `1` is set.
pub(crate) struct MessageLog<I>(
    pub I,
    pub Option<std::sync::Arc<crate::retransmit::Retransmissions>>,
);

impl<I: MessageInspector> MessageInspector for MessageLog<I> {
    fn before_send(&self, msg: SipMessage, dest: Option<&SipAddr>) -> SipMessage {
        let msg = self.0.before_send(msg, dest);
        if let Some(r) = &self.1 {
            r.sent(&msg);
        }
        debug!(target: MESSAGE_TARGET, dest = %OptAddr(dest), sip = ?crate::sdes::redact_keys(&msg.to_string()), "sip send");
        msg
    }

    fn after_received(&self, msg: SipMessage, from: Option<&SipAddr>) -> SipMessage {
        debug!(target: MESSAGE_TARGET, src = %OptAddr(from), sip = ?crate::sdes::redact_keys(&msg.to_string()), "sip received");
        self.0.after_received(msg, from)
    }
}

struct OptAddr<'a>(Option<&'a SipAddr>);

impl std::fmt::Display for OptAddr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{a}"),
            None => f.write_str("-"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_only_their_ends() {
        assert_eq!(redact_number("+4930123456567"), "+49********567");
        assert_eq!(redact_number("+49301234567"), "+49******567");
        assert_eq!(redact_number("4930123456"), "49*****456");
        assert_eq!(redact_number("+15550100"), "+*****100");
        assert_eq!(redact_number("5550100"), "****100");
        assert_eq!(redact_number("4711"), "**11");
        assert_eq!(redact_number("112"), "***");
        assert_eq!(redact_number("+"), "+");
        assert_eq!(redact_number(""), "");
        assert_eq!(redact_number("anonymous"), "******ous");
    }

    #[test]
    fn no_digit_but_the_shown_ones_survives() {
        for number in ["+4930123456567", "+15550100", "015112345678"] {
            let r = redact_number(number);
            assert_eq!(r.chars().count(), number.chars().count());
            let shown = r.chars().filter(char::is_ascii_digit).count();
            assert!(shown <= 5, "{number} -> {r}");
            assert!(!r.contains(&number[number.len() - 6..]), "{number} -> {r}");
        }
    }

    struct Passthrough;

    impl MessageInspector for Passthrough {
        fn before_send(&self, msg: SipMessage, _: Option<&SipAddr>) -> SipMessage {
            msg
        }
        fn after_received(&self, msg: SipMessage, _: Option<&SipAddr>) -> SipMessage {
            msg
        }
    }

    #[derive(Clone, Default)]
    struct Capture(std::sync::Arc<parking_lot::Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What the inspector logs for one message sent and one received under `filter`.
    fn logged_under(filter: &str) -> String {
        logged_message(
            filter,
            "OPTIONS sip:+4930123456567@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bK1\r\nFrom: <sip:+15550001@127.0.0.1>;tag=1\r\nTo: <sip:+4930123456567@127.0.0.1>\r\nCall-ID: log\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n",
        )
    }

    /// What the inspector logs for `text` sent and received under `filter`.
    fn logged_message(filter: &str, text: &str) -> String {
        let capture = Capture::default();
        let writer = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let msg = SipMessage::try_from(text).unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let log = MessageLog(Passthrough, None);
            let msg = log.before_send(msg, None);
            log.after_received(msg, None);
        });
        String::from_utf8(capture.0.lock().clone()).unwrap()
    }

    #[test]
    fn whole_messages_are_debug_lines_of_their_own_target() {
        for filter in ["debug", "info,callsmith_sip::message=debug"] {
            let out = logged_under(filter);
            assert_eq!(out.lines().count(), 2, "{filter}: {out}");
            assert!(out.contains("DEBUG callsmith_sip::message"), "{out}");
            assert!(
                out.contains("sip send") && out.contains("sip received"),
                "{out}"
            );
            assert!(
                out.contains("OPTIONS sip:+4930123456567@127.0.0.1 SIP/2.0\\r\\nVia:"),
                "{out}"
            );
        }
        for filter in ["info", "warn", "debug,callsmith_sip::message=info"] {
            assert_eq!(logged_under(filter), "", "{filter}");
        }
    }

    #[test]
    fn sdes_keys_in_a_body_are_not_logged() {
        let key = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz";
        let body = format!(
            "v=0\r\nm=audio 6000 RTP/SAVP 0\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{key}\r\n"
        );
        let text = format!(
            "INVITE sip:1@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bK1\r\nFrom: <sip:2@127.0.0.1>;tag=1\r\nTo: <sip:1@127.0.0.1>\r\nCall-ID: keys\r\nCSeq: 1 INVITE\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let out = logged_message("debug", &text);
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(out.contains("inline:<redacted>"), "{out}");
        assert!(!out.contains(key), "{out}");
    }

    #[test]
    fn multibyte_names_do_not_panic() {
        assert_eq!(redact_number("Jürgen"), "****en");
    }
}

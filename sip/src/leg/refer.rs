//! Blind transfer (REFER): the target URI, the progress NOTIFY's sipfrag, and the bookkeeping
//! that turns the REFER's response, NOTIFYs and deadlines into one outcome per transfer.

use std::time::{Duration, Instant};

use rsipstack::sip::{HeadersExt, Request, Uri};

use super::ReferOutcome;

/// Names one transfer between the machine and its shell (which holds the caller's reply).
pub(crate) type ReferId = u64;

/// How long a decided REFER outcome waits for the NOTIFY's 200 to go out.
pub(crate) const NOTIFY_ANSWER_GRACE: Duration = Duration::from_millis(500);

/// Where a leg's transfers go when given as a number, and what its signalling allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReferBase {
    /// The host (and port) a number is put at: the trunk's gateway.
    pub host: String,
    /// The dialog is a `sips:` one (its trunk's gateway, or the INVITE's Request-URI):
    /// a number becomes a `sips:` target.
    pub sips: bool,
    /// The leg's signalling is TLS: only then may a target be a `sips:` URI.
    pub tls: bool,
}

/// The Refer-To URI: a `sip:`, `sips:` or `tel:` URI as given, else a number at the
/// base's host (`sips:` on a `sips:` dialog). A `sips:` target is refused on a leg whose
/// signalling is not TLS ([`crate::tls::check_sips`]).
pub(crate) fn refer_target(target: &str, base: &ReferBase) -> Result<Uri, String> {
    crate::tls::check_sips(target, base.tls).map_err(|e| format!("bad transfer target: {e}"))?;
    let lower = target.get(..5).unwrap_or(target).to_ascii_lowercase();
    let uri =
        if lower.starts_with("sip:") || lower.starts_with("sips:") || lower.starts_with("tel:") {
            target.to_string()
        } else {
            let scheme = if base.sips { "sips" } else { "sip" };
            format!("{scheme}:{target}@{}", base.host)
        };
    Uri::try_from(uri.as_str()).map_err(|e| format!("bad transfer target: {e}"))
}

/// The sipfrag status of a REFER progress NOTIFY and whether the subscription ended.
/// (rsipstack's `ReferStatus::parse` misses parsed `Event` headers, hence our own.)
pub(crate) fn refer_notify_status(req: &Request) -> Option<(u16, bool)> {
    let event = req.header_value("Event")?;
    let package = event.split(';').next().unwrap_or("").trim();
    if !package.eq_ignore_ascii_case("refer") {
        return None;
    }
    let terminated = req
        .header_value("Subscription-State")
        .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("terminated"));
    let body = String::from_utf8_lossy(&req.body);
    let line = body
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("SIP/2.0"))?;
    let code: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
    (100..700).contains(&code).then_some((code, terminated))
}

/// A transfer's outcome, for the caller of the transfer it names.
pub(crate) type Decision = (ReferId, ReferOutcome);

/// A REFER sent and not decided yet.
#[derive(Debug)]
struct Pending {
    id: ReferId,
    /// No final NOTIFY by then: the transfer failed.
    deadline: Instant,
}

/// A REFER outcome decided by a final NOTIFY, held until our 200 to that NOTIFY is sent (the
/// dialog reports `Confirmed` again) so that a BYE the engine sends next cannot overtake it.
#[derive(Debug)]
struct Decided {
    id: ReferId,
    outcome: ReferOutcome,
    /// Deliver anyway by then.
    at_latest: Instant,
}

/// The leg's transfers: at most one in progress, and at most one decided outcome held back.
#[derive(Debug, Default)]
pub(crate) struct Transfers {
    pending: Option<Pending>,
    decided: Option<Decided>,
}

impl Transfers {
    pub fn in_progress(&self) -> bool {
        self.pending.is_some()
    }

    /// A REFER is on its way; without a final NOTIFY by `deadline` it fails.
    pub fn start(&mut self, id: ReferId, deadline: Instant) {
        self.pending = Some(Pending { id, deadline });
    }

    /// The final response to the REFER itself (or why there is none). A 2xx only says the
    /// peer accepted the REFER; the NOTIFYs tell the rest.
    pub fn on_response(&mut self, id: ReferId, result: Result<u16, String>) -> Option<Decision> {
        let outcome = match result {
            Ok(code) if (200..300).contains(&code) => return None,
            Ok(code) => ReferOutcome::Failed {
                sip_code: Some(code),
                reason: "REFER refused".into(),
            },
            Err(reason) => ReferOutcome::Failed {
                sip_code: None,
                reason,
            },
        };
        let p = self.pending.take_if(|p| p.id == id)?;
        Some((p.id, outcome))
    }

    /// A progress NOTIFY's sipfrag status. A final status (or an ended subscription) decides
    /// the transfer in progress; its outcome is held until our answer to the NOTIFY is out.
    /// Returns a decision held from before, which this one displaces.
    pub fn on_notify(&mut self, code: u16, terminated: bool, now: Instant) -> Option<Decision> {
        if code < 200 && !terminated {
            return None;
        }
        let p = self.pending.take()?;
        let outcome = if (200..300).contains(&code) {
            ReferOutcome::Succeeded { sip_code: code }
        } else {
            ReferOutcome::Failed {
                sip_code: Some(code),
                reason: "transfer target did not answer".into(),
            }
        };
        let earlier = self.decided.replace(Decided {
            id: p.id,
            outcome,
            at_latest: now + NOTIFY_ANSWER_GRACE,
        });
        earlier.map(|d| (d.id, d.outcome))
    }

    /// Our answer to an in-dialog request went out: a held decision can be told now.
    pub fn on_answer_sent(&mut self) -> Option<Decision> {
        self.decided.take().map(|d| (d.id, d.outcome))
    }

    /// When a held decision is told at the latest.
    pub fn decided_at(&self) -> Option<Instant> {
        self.decided.as_ref().map(|d| d.at_latest)
    }

    /// When the transfer in progress times out.
    pub fn deadline(&self) -> Option<Instant> {
        self.pending.as_ref().map(|p| p.deadline)
    }

    /// The held decision's grace is over.
    pub fn grace_over(&mut self) -> Option<Decision> {
        self.on_answer_sent()
    }

    /// No final NOTIFY came in time.
    pub fn deadline_passed(&mut self) -> Option<Decision> {
        let p = self.pending.take()?;
        Some((
            p.id,
            ReferOutcome::Failed {
                sip_code: None,
                reason: "no final NOTIFY before timeout".into(),
            },
        ))
    }

    /// The call ended: a held decision is told, a transfer in progress failed.
    pub fn finish(&mut self) -> impl Iterator<Item = Decision> + use<> {
        let decided = self.decided.take().map(|d| (d.id, d.outcome));
        let pending = self.pending.take().map(|p| {
            (
                p.id,
                ReferOutcome::Failed {
                    sip_code: None,
                    reason: "call ended".into(),
                },
            )
        });
        decided.into_iter().chain(pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notify(event: &str, state: &str, body: &str) -> Request {
        let text = format!(
            "NOTIFY sip:a@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK3\r\nFrom: <sip:b@127.0.0.1>;tag=1\r\nTo: <sip:a@127.0.0.1>;tag=2\r\nCall-ID: x\r\nCSeq: 4 NOTIFY\r\nEvent: {event}\r\nSubscription-State: {state}\r\nContent-Type: message/sipfrag\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        Request::try_from(text.as_bytes()).unwrap()
    }

    #[test]
    fn refer_notify_sipfrag() {
        assert_eq!(
            refer_notify_status(&notify(
                "refer",
                "active;expires=60",
                "SIP/2.0 100 Trying\r\n"
            )),
            Some((100, false))
        );
        assert_eq!(
            refer_notify_status(&notify(
                "refer;id=7",
                "terminated;reason=noresource",
                "SIP/2.0 200 OK"
            )),
            Some((200, true))
        );
        assert_eq!(
            refer_notify_status(&notify("refer", "terminated", "SIP/2.0 486 Busy Here")),
            Some((486, true))
        );
        assert_eq!(
            refer_notify_status(&notify("presence", "active", "SIP/2.0 200 OK")),
            None
        );
        assert_eq!(
            refer_notify_status(&notify("refer", "active", "garbage")),
            None
        );
    }

    fn base(host: &str, sips: bool, tls: bool) -> ReferBase {
        ReferBase {
            host: host.into(),
            sips,
            tls,
        }
    }

    #[test]
    fn refer_targets() {
        let plain = base("10.0.0.1:5060", false, false);
        assert_eq!(
            refer_target("+4930123", &plain).unwrap().to_string(),
            "sip:+4930123@10.0.0.1:5060"
        );
        assert_eq!(
            refer_target("sip:bob@example.com", &plain)
                .unwrap()
                .to_string(),
            "sip:bob@example.com"
        );
        assert!(
            refer_target("sip:", &plain)
                .unwrap_err()
                .starts_with("bad transfer target")
        );
    }

    /// `sips:` targets only on a TLS leg; a number on a `sips:` dialog becomes `sips:`.
    #[test]
    fn sips_refer_targets_need_a_tls_leg() {
        for leg in [
            base("10.0.0.1:5060", false, false),
            base("10.0.0.1:5060", false, true),
        ] {
            let got = refer_target("sips:bob@example.com", &leg);
            if leg.tls {
                assert_eq!(got.unwrap().to_string(), "sips:bob@example.com");
            } else {
                let e = got.unwrap_err();
                assert!(
                    e.contains("sips:bob@example.com") && e.contains("TLS"),
                    "{e}"
                );
            }
            assert!(refer_target("SIPS:bob@example.com", &leg).is_ok() == leg.tls);
        }
        let secure = base("sip.carrier.example:5061", true, true);
        assert_eq!(
            refer_target("+4930123", &secure).unwrap().to_string(),
            "sips:+4930123@sip.carrier.example:5061"
        );
    }

    #[test]
    fn a_refer_response_only_ends_the_transfer_it_answers() {
        let t0 = Instant::now();
        let mut t = Transfers::default();
        t.start(2, t0 + Duration::from_secs(32));
        assert_eq!(t.on_response(1, Ok(403)), None, "an older REFER's answer");
        assert!(t.in_progress());
        assert_eq!(t.on_response(2, Ok(202)), None);
        assert!(t.in_progress());
        assert_eq!(
            t.on_response(2, Err("no response to REFER".into())),
            Some((
                2,
                ReferOutcome::Failed {
                    sip_code: None,
                    reason: "no response to REFER".into()
                }
            ))
        );
        assert!(!t.in_progress());
    }
}

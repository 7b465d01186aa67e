//! What another process needs to end a dialog this one holds: [`DialogRecord`], taken
//! when the call is answered and stored with the call, and [`SipStack::end_dialog`], the
//! BYE a peer builds from it when the process that ran the call died.
//!
//! The far end knows a dialog by its Call-ID and the two tags (RFC 3261 12: the From and
//! To tags of the requests it receives), not by the address or process that sends in it:
//! a BYE that carries the dialog's Call-ID, our tag in From, its tag in To, a CSeq above
//! any the dialog used, addressed to its remote target through its route set, ends the
//! call whichever of our nodes sends it. The Via (where the 200 comes back) is the
//! sender's own transport address.
//!
//! What the record does not follow: a target refresh by the far end after the answer
//! (a re-INVITE with a new Contact) and requests the dead process sent after the answer
//! (session refreshes, REFER) beyond [`CSEQ_GAP`] of them.

use rsipstack::sip::{Header, Method, Request, SipMessage, StatusCodeKind};
use rsipstack::transaction::key::{TransactionKey, TransactionRole};
use rsipstack::transaction::transaction::Transaction;
use rsipstack::transport::SipAddr;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::error::SipError;
use crate::stack::SipStack;

/// How far above the CSeq recorded at the answer a peer's BYE numbers its own: the
/// in-dialog requests the dead process may have sent after the answer (a session refresh
/// every half `Session-Expires`, a transfer's REFER) are far fewer, and the far end
/// refuses a request whose CSeq is below one it already saw (RFC 3261 12.2.2).
pub const CSEQ_GAP: u32 = 1000;

/// An answered dialog as a peer process needs it to send the BYE (see the module doc).
/// Serialised as JSON with the call's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DialogRecord {
    pub call_id: String,
    /// Our side as the far end knows it: name-addr with our tag (the From of our requests).
    pub local: String,
    /// The far end, name-addr with its tag (the To of our requests).
    pub remote: String,
    /// The last CSeq number our side used in the dialog when it was recorded.
    pub local_cseq: u32,
    /// The far end's Contact: the Request-URI of in-dialog requests.
    pub remote_target: String,
    /// Route headers of in-dialog requests, in order (the Record-Route the far end or its
    /// proxies asked for).
    pub route_set: Vec<String>,
}

impl DialogRecord {
    /// The dialog as rsipstack holds it now.
    pub(crate) fn of(dialog: &rsipstack::dialog::invite_dialog::InviteDialog) -> DialogRecord {
        let s = dialog.snapshot();
        let (from, to) = (s.from.to_string(), s.to.to_string());
        // A client dialog's From is ours; a server dialog keeps the INVITE's From (the far
        // end) and its To with our tag.
        let (local, remote) = match s.role {
            TransactionRole::Client => (from, to),
            TransactionRole::Server => (to, from),
        };
        DialogRecord {
            call_id: s.id.call_id,
            local,
            remote,
            local_cseq: s.local_cseq,
            remote_target: s.remote_uri.to_string(),
            route_set: s.route_set.iter().map(|r| r.value().to_string()).collect(),
        }
    }

    /// The BYE that ends the dialog, sent with `via` (see the module doc).
    pub fn bye(&self, via: rsipstack::sip::Via, user_agent: &str) -> Result<Request, SipError> {
        let uri = rsipstack::sip::Uri::try_from(self.remote_target.as_str()).map_err(|e| {
            SipError::Stack(format!("bad remote target {}: {e}", self.remote_target))
        })?;
        let mut headers: Vec<Header> = vec![
            Header::Via(via),
            Header::CallId(self.call_id.clone().into()),
            Header::From(self.local.clone().into()),
            Header::To(self.remote.clone().into()),
            Header::CSeq(
                rsipstack::sip::typed::CSeq {
                    seq: self.local_cseq.saturating_add(CSEQ_GAP),
                    method: Method::Bye,
                }
                .into(),
            ),
            Header::MaxForwards(70.into()),
        ];
        headers.extend(
            self.route_set
                .iter()
                .map(|r| Header::Route(r.clone().into())),
        );
        headers.push(Header::Other(
            "Reason".into(),
            "SIP;cause=200;text=\"the node running the call stopped\"".into(),
        ));
        headers.push(Header::UserAgent(user_agent.to_string().into()));
        headers.push(Header::ContentLength(0.into()));
        Ok(Request {
            method: Method::Bye,
            uri,
            version: rsipstack::sip::Version::V2,
            headers: headers.into(),
            body: vec![],
        })
    }

    /// The transport in-dialog requests use: the first route's, else the remote
    /// target's `transport` parameter; UDP when neither names one.
    fn transport(&self) -> rsipstack::sip::Transport {
        let named = |uri: &str| {
            let lower = uri.to_ascii_lowercase();
            lower
                .contains("transport=tcp")
                .then_some(rsipstack::sip::Transport::Tcp)
        };
        self.route_set
            .first()
            .map(|r| named(r))
            .unwrap_or_else(|| named(&self.remote_target))
            .unwrap_or(rsipstack::sip::Transport::Udp)
    }
}

impl SipStack {
    /// Ends a dialog another process recorded ([`DialogRecord`]) with a BYE from this
    /// stack's own transport. Returns once the BYE is sent: the session ends when the BYE
    /// is handed to its transaction (RFC 3261 15.1.1), whatever comes back; the final
    /// response (or its absence) is logged when it comes.
    pub async fn end_dialog(&self, dialog: &DialogRecord) -> Result<(), SipError> {
        let endpoint = self.endpoint();
        let transport = dialog.transport();
        let local: Option<SipAddr> = endpoint
            .get_addrs()
            .into_iter()
            .find(|a| a.r#type == Some(transport));
        let bye = dialog.bye(endpoint.get_via(local, None)?.into(), &endpoint.user_agent)?;
        let key = TransactionKey::from_request(&bye, TransactionRole::Client)?;
        let mut tx = Transaction::new_client(key, bye, endpoint, None);
        tx.send().await?;
        let call_id = dialog.call_id.clone();
        tokio::spawn(async move {
            while let Some(msg) = tx.receive().await {
                if let SipMessage::Response(r) = msg
                    && r.status_code.kind() != StatusCodeKind::Provisional
                {
                    info!(%call_id, code = u16::from(r.status_code), "BYE of a lost node's call answered");
                    return;
                }
            }
            warn!(%call_id, "BYE of a lost node's call: no final response");
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> DialogRecord {
        DialogRecord {
            call_id: "c1@127.0.0.1".into(),
            local: "<sip:+4930100800@callsmith>;tag=ours".into(),
            remote: "<sip:+15550001@127.0.0.1:5070>;tag=theirs".into(),
            local_cseq: 2,
            remote_target: "sip:callee@127.0.0.1:5070".into(),
            route_set: vec!["<sip:127.0.0.1:5090;lr>".into()],
        }
    }

    #[test]
    fn the_bye_carries_the_dialog_id_and_a_higher_cseq_through_the_route_set() {
        let via: rsipstack::sip::Via =
            rsipstack::sip::Via::new("SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bKx1");
        let bye = record().bye(via, "callsmith").expect("bye").to_string();
        assert!(
            bye.starts_with("BYE sip:callee@127.0.0.1:5070 SIP/2.0\r\n"),
            "{bye}"
        );
        for line in [
            "Call-ID: c1@127.0.0.1",
            "From: <sip:+4930100800@callsmith>;tag=ours",
            "To: <sip:+15550001@127.0.0.1:5070>;tag=theirs",
            "CSeq: 1002 BYE",
            "Route: <sip:127.0.0.1:5090;lr>",
            "Via: SIP/2.0/UDP 127.0.0.1:5099;branch=z9hG4bKx1",
        ] {
            assert!(
                bye.contains(&format!("{line}\r\n")),
                "{line} missing:\n{bye}"
            );
        }
    }

    #[test]
    fn the_record_reads_back_from_its_json() {
        let r = record();
        let text = serde_json::to_string(&r).expect("json");
        assert_eq!(
            serde_json::from_str::<DialogRecord>(&text).expect("reads"),
            r
        );
    }

    #[test]
    fn the_transport_is_the_first_routes_else_the_targets() {
        let mut r = record();
        assert_eq!(r.transport(), rsipstack::sip::Transport::Udp);
        r.route_set = vec!["<sip:127.0.0.1:5090;transport=tcp;lr>".into()];
        assert_eq!(r.transport(), rsipstack::sip::Transport::Tcp);
        r.route_set.clear();
        r.remote_target = "sip:callee@127.0.0.1:5070;transport=TCP".into();
        assert_eq!(r.transport(), rsipstack::sip::Transport::Tcp);
    }
}

//! One channel for what every inbound dialog sends to its INVITE server transaction.
//!
//! rsipstack gives a server dialog a clone of its INVITE transaction's event sender, and a
//! dialog lives as long as its call. That clone keeps the transaction's whole channel
//! allocated after the transaction has ended at the ACK: tokio allocates an unbounded
//! channel's first block (32 events of a few hundred bytes each, about 11 KiB) up front,
//! which was a quarter of the memory of a live inbound call. Inbound dialogs are created
//! with a sender of this relay instead: one channel for all of them, and a task that hands
//! each event to the transaction it belongs to, found in the endpoint's table of running
//! transactions. An event for a transaction that has ended is dropped, as rsipstack drops
//! it when the dialog's own send fails. Outbound dialogs are given the same sender
//! ([`crate::outbound`]); a client dialog sends nothing to its INVITE transaction.
//!
//! A dialog sends two kinds of event: a response to the INVITE (ringing, answer, reject),
//! whose Via and CSeq name the transaction, and an ACK that reached the dialog as a
//! transaction of its own before the INVITE transaction saw it, which is routed by the
//! Call-ID and From tag the INVITE was registered under.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rsipstack::sip::prelude::*;
use rsipstack::sip::{Request, SipMessage};
use rsipstack::transaction::endpoint::EndpointInnerRef;
use rsipstack::transaction::key::{TransactionKey, TransactionRole};
use rsipstack::transaction::transaction::{TransactionEvent, TransactionEventSender};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// (Call-ID, From tag) of an inbound INVITE.
type DialogRef = (String, String);

/// The relay: a sender for dialogs, and the INVITE transactions ACKs are routed to.
#[derive(Clone)]
pub(crate) struct DialogRelay {
    sender: TransactionEventSender,
    invites: Arc<Mutex<HashMap<DialogRef, TransactionKey>>>,
}

impl DialogRelay {
    /// Starts the relay task; it ends with `cancel`.
    pub(crate) fn start(endpoint: EndpointInnerRef, cancel: CancellationToken) -> DialogRelay {
        let (sender, rx) = unbounded_channel::<TransactionEvent>();
        let relay = DialogRelay {
            sender,
            invites: Arc::new(Mutex::new(HashMap::new())),
        };
        tokio::spawn(run(rx, endpoint, relay.invites.clone(), cancel));
        relay
    }

    /// The sender a dialog is created with.
    pub(crate) fn sender(&self) -> TransactionEventSender {
        self.sender.clone()
    }

    /// Routes ACKs of `invite`'s dialog to its transaction until the guard drops.
    pub(crate) fn register(&self, invite: &Request, key: &TransactionKey) -> Option<Registered> {
        let dialog = dialog_ref(invite)?;
        self.invites.lock().insert(dialog.clone(), key.clone());
        Some(Registered {
            invites: self.invites.clone(),
            dialog,
        })
    }
}

/// Removes an INVITE's route when dropped.
pub(crate) struct Registered {
    invites: Arc<Mutex<HashMap<DialogRef, TransactionKey>>>,
    dialog: DialogRef,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.invites.lock().remove(&self.dialog);
    }
}

fn dialog_ref(req: &Request) -> Option<DialogRef> {
    let call_id = req.call_id_header().ok()?.value().to_string();
    let tag = req.from_header().ok()?.tag().ok()??.value().to_string();
    Some((call_id, tag))
}

/// The transaction an event from a dialog belongs to.
fn destination(
    ev: &TransactionEvent,
    invites: &Mutex<HashMap<DialogRef, TransactionKey>>,
) -> Option<TransactionKey> {
    match ev {
        TransactionEvent::Respond(resp) => {
            TransactionKey::from_response(resp, TransactionRole::Server).ok()
        }
        TransactionEvent::Received(SipMessage::Request(req), _) => {
            invites.lock().get(&dialog_ref(req)?).cloned()
        }
        _ => None,
    }
}

async fn run(
    mut rx: UnboundedReceiver<TransactionEvent>,
    endpoint: EndpointInnerRef,
    invites: Arc<Mutex<HashMap<DialogRef, TransactionKey>>>,
    cancel: CancellationToken,
) {
    loop {
        let ev = tokio::select! {
            _ = cancel.cancelled() => break,
            ev = rx.recv() => match ev { Some(ev) => ev, None => break },
        };
        let Some(key) = destination(&ev, &invites) else {
            debug!("dialog event for no transaction dropped");
            continue;
        };
        match endpoint.transactions.get(&key) {
            Some(tx) => {
                if tx.send(ev).is_err() {
                    debug!(%key, "dialog event for an ended transaction dropped");
                }
            }
            None => debug!(%key, "dialog event for an ended transaction dropped"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsipstack::sip::Response;

    const INVITE: &str = "INVITE sip:+4930900@127.0.0.1:5060 SIP/2.0\r\n\
        Via: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK-invite-1\r\n\
        From: <sip:+4930100@127.0.0.1>;tag=caller-1\r\n\
        To: <sip:+4930900@127.0.0.1>\r\n\
        Call-ID: relay-1@127.0.0.1\r\n\
        CSeq: 1 INVITE\r\n\
        Contact: <sip:+4930100@127.0.0.1:5070>\r\n\
        Max-Forwards: 70\r\n\
        Content-Length: 0\r\n\r\n";

    fn request(text: &str) -> Request {
        Request::try_from(text.as_bytes()).expect("parses")
    }

    fn relay_without_task() -> DialogRelay {
        let (sender, _rx) = unbounded_channel::<TransactionEvent>();
        DialogRelay {
            sender,
            invites: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    #[test]
    fn a_response_of_the_dialog_goes_to_its_invite_transaction() {
        let invite = request(INVITE);
        let key = TransactionKey::from_request(&invite, TransactionRole::Server).unwrap();
        let ok = "SIP/2.0 200 OK\r\n\
            Via: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK-invite-1\r\n\
            From: <sip:+4930100@127.0.0.1>;tag=caller-1\r\n\
            To: <sip:+4930900@127.0.0.1>;tag=callee-1\r\n\
            Call-ID: relay-1@127.0.0.1\r\n\
            CSeq: 1 INVITE\r\n\
            Content-Length: 0\r\n\r\n";
        let resp = Response::try_from(ok.as_bytes()).expect("parses");
        let relay = relay_without_task();
        // No registration needed: the response's Via and CSeq name the transaction.
        let ev = TransactionEvent::Respond(resp);
        assert_eq!(destination(&ev, &relay.invites), Some(key));
    }

    #[test]
    fn an_ack_goes_to_the_invite_it_was_registered_under_until_the_guard_drops() {
        let invite = request(INVITE);
        let key = TransactionKey::from_request(&invite, TransactionRole::Server).unwrap();
        // The ACK of a 2xx is a transaction of its own: another branch and CSeq method.
        let ack = request(
            &INVITE
                .replace("INVITE sip", "ACK sip")
                .replace("z9hG4bK-invite-1", "z9hG4bK-ack-1")
                .replace("CSeq: 1 INVITE", "CSeq: 1 ACK")
                .replace(
                    "To: <sip:+4930900@127.0.0.1>",
                    "To: <sip:+4930900@127.0.0.1>;tag=callee-1",
                ),
        );
        let relay = relay_without_task();
        let ev = TransactionEvent::Received(SipMessage::Request(ack.clone()), None);
        assert_eq!(destination(&ev, &relay.invites), None, "unregistered");

        let guard = relay.register(&invite, &key).expect("registered");
        assert_eq!(destination(&ev, &relay.invites), Some(key));

        // Another dialog's ACK (other From tag) is not routed there.
        let other = request(
            &INVITE
                .replace("INVITE sip", "ACK sip")
                .replace("tag=caller-1", "tag=caller-2")
                .replace("CSeq: 1 INVITE", "CSeq: 1 ACK"),
        );
        let other = TransactionEvent::Received(SipMessage::Request(other), None);
        assert_eq!(destination(&other, &relay.invites), None);

        drop(guard);
        assert_eq!(destination(&ev, &relay.invites), None, "route removed");
        assert!(relay.invites.lock().is_empty());
    }

    #[test]
    fn timers_and_terminations_are_never_relayed() {
        let invite = request(INVITE);
        let key = TransactionKey::from_request(&invite, TransactionRole::Server).unwrap();
        let relay = relay_without_task();
        let _guard = relay.register(&invite, &key);
        let ev = TransactionEvent::Terminate(key);
        assert_eq!(destination(&ev, &relay.invites), None);
    }
}

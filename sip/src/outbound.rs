//! The INVITE of an outbound call: its dialog, its transaction and what follows a 2xx.
//!
//! rsipstack's `do_invite_async` keeps every answered INVITE's client transaction in
//! Accepted for 64×T1 (RFC 6026 §7.2), with a task per call draining it, and gives the
//! dialog a clone of the transaction's event sender. A tokio unbounded channel allocates its
//! first block (32 events, about 11 KiB) when it is made, so through it every answered call
//! holds about 18 KiB until 32 s after its answer, and the dialog keeps the channel for the
//! whole call: at 100 calls/s of 10 s calls, about 40 KiB per live call
//! (`bench/reports/call_rate.md`).
//!
//! The stack builds the dialog and the transaction itself instead:
//! - the dialog gets the relay's sender ([`crate::relay`]): a client dialog never sends to
//!   its INVITE transaction, so it needs no sender of its own;
//! - the transaction ends once its final response has been handled. Ending it, rsipstack
//!   keeps the ACK it sent, keyed by the transaction, for 64×T1 and sends it again for every
//!   retransmission of the response: the re-ACKs that Accepted is for, at the price of one
//!   stored ACK;
//! - a 2xx from another branch of a forked INVITE (RFC 3261 §13.2.2.4) is told apart from a
//!   retransmission by [`ForkWatch`], which sees every response as it arrives, before the
//!   transaction layer does. Its branch is sent an ACK and then a BYE;
//! - in-dialog requests find the call's dialog in [`OutboundDialogs`], the stack's table of
//!   outbound dialogs (the dialog layer's own table is private to rsipstack).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use parking_lot::Mutex;
use rsipstack::dialog::DialogId;
use rsipstack::dialog::dialog::{DialogInner, DialogStateSender};
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::dialog::invitation::{InviteAsyncResult, InviteOption};
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::sip::prelude::*;
use rsipstack::sip::{Header, Method, Request, Response, SipMessage, StatusCodeKind};
use rsipstack::transaction::endpoint::{EndpointInnerRef, TransportEventInspector};
use rsipstack::transaction::key::{TransactionKey, TransactionRole};
use rsipstack::transaction::transaction::{Transaction, TransactionEventSender};
use rsipstack::transport::{SipAddr, TransportEvent};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::error::SipError;

/// (Call-ID, our tag): the parts of an outbound dialog's id that never change (the remote
/// tag is learnt from the responses).
type DialogKey = (String, String);

/// How many branches of one forked INVITE are ended; a peer answering more often than this
/// is not followed further.
const MAX_FORKS: usize = 16;

/// How often answered INVITEs whose window has passed are swept out of [`ForkWatch`].
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Makes an outbound INVITE's dialog and its client transaction. The dialog is given
/// `relay` as its transaction sender, not a clone of the transaction's own.
pub(crate) fn client_invite(
    layer: &DialogLayer,
    mut opt: InviteOption,
    states: DialogStateSender,
    relay: TransactionEventSender,
) -> Result<(InviteDialog, Transaction), SipError> {
    let mut request = layer.make_invite_request(&opt)?;
    request.body = opt.offer.take().unwrap_or_default();
    request
        .headers
        .unique_push(Header::ContentLength((request.body.len() as u32).into()));
    let key = TransactionKey::from_request(&request, TransactionRole::Client)?;
    let mut tx = Transaction::new_client(key, request.clone(), layer.endpoint.clone(), None);
    tx.destination = opt.destination.clone();
    let id = DialogId::try_from(&tx)?;
    let local_contact = request
        .contact_header()
        .ok()
        .and_then(|c| c.typed().ok().map(|c| c.uri))
        .or(Some(opt.contact.clone()));
    let inner = DialogInner::new(
        TransactionRole::Client,
        id,
        request,
        layer.endpoint.clone(),
        states,
        opt.credential.take(),
        local_contact,
        relay,
    )?;
    if let Some(destination) = &tx.destination {
        *inner.remote_uri.lock() = destination.clone().into();
    }
    Ok((InviteDialog::from_inner(Arc::new(inner)), tx))
}

/// Runs the INVITE transaction to its final response. The transaction ends when this
/// returns; see the module documentation for what carries on after a 2xx.
pub(crate) async fn run_invite(
    dialog: InviteDialog,
    mut tx: Transaction,
    watching: Watching,
) -> InviteAsyncResult {
    let result = dialog.process_invite(&mut tx).await;
    drop(tx);
    drop(watching);
    if let Err(e) = &result {
        debug!(id = %dialog.id(), error = %e, "outbound INVITE failed");
    }
    result
}

/// The stack's outbound dialogs, for in-dialog requests.
#[derive(Default)]
pub(crate) struct OutboundDialogs {
    dialogs: Mutex<HashMap<DialogKey, InviteDialog>>,
}

impl OutboundDialogs {
    /// Makes `dialog` findable until the returned guard drops.
    pub(crate) fn register(self: &Arc<Self>, dialog: &InviteDialog) -> Registered {
        let id = dialog.id();
        let key = (id.call_id, id.local_tag);
        self.dialogs.lock().insert(key.clone(), dialog.clone());
        Registered {
            dialogs: self.clone(),
            key,
        }
    }

    /// The dialog an in-dialog request from the far end belongs to: its Call-ID, its To tag
    /// (ours) and its From tag (the tag the dialog learnt from the answer).
    pub(crate) fn find(&self, request: &Request) -> Option<InviteDialog> {
        let id = DialogId::try_from((request, TransactionRole::Server)).ok()?;
        let dialogs = self.dialogs.lock();
        let dialog = dialogs.get(&(id.call_id, id.local_tag))?;
        (dialog.id().remote_tag == id.remote_tag).then(|| dialog.clone())
    }
}

/// Removes an outbound dialog from [`OutboundDialogs`] when dropped.
pub(crate) struct Registered {
    dialogs: Arc<OutboundDialogs>,
    key: DialogKey,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.dialogs.dialogs.lock().remove(&self.key);
    }
}

/// One outbound INVITE as the watch knows it.
#[derive(Default)]
struct Invite {
    /// The tag of the first 2xx, and until when later ones are looked at (64×T1 after it).
    answered: Option<(String, Instant)>,
    /// Tags of the branches already ended.
    forks: Vec<String>,
}

/// Watches the 2xx responses to outbound INVITEs for forks.
///
/// The first 2xx to an INVITE is the one its transaction and dialog take (responses reach
/// the transaction layer in the order they pass here). A later 2xx with another To tag,
/// within 64×T1 of the first, is a second branch: it is handed to a task that ends it with
/// a BYE, once per branch.
pub(crate) struct ForkWatch {
    invites: Mutex<HashMap<DialogKey, Invite>>,
    window: Duration,
    forks: UnboundedSender<(Response, SipAddr)>,
}

impl ForkWatch {
    /// The watch and the receiver of the branches to end (see [`end_forks`]).
    pub(crate) fn new(
        window: Duration,
    ) -> (Arc<ForkWatch>, UnboundedReceiver<(Response, SipAddr)>) {
        let (forks, rx) = unbounded();
        let watch = ForkWatch {
            invites: Mutex::new(HashMap::new()),
            window,
            forks,
        };
        (Arc::new(watch), rx)
    }

    /// Starts watching the INVITE of `dialog`. The INVITE is forgotten when the guard drops
    /// if it was not answered, else at the first sweep 64×T1 after its first 2xx.
    pub(crate) fn watch(self: &Arc<Self>, dialog: &DialogId) -> Watching {
        let key = (dialog.call_id.clone(), dialog.local_tag.clone());
        self.invites.lock().insert(key.clone(), Invite::default());
        Watching {
            watch: self.clone(),
            key,
        }
    }

    /// Looks at a response as it arrives.
    fn on_response(&self, response: &Response, from: &SipAddr) {
        if response.status_code.kind() != StatusCodeKind::Successful {
            return;
        }
        let Ok(cseq) = response.cseq_header().and_then(|c| c.typed()) else {
            return;
        };
        if cseq.method != Method::Invite {
            return;
        }
        let Ok(id) = DialogId::try_from((response, TransactionRole::Client)) else {
            return;
        };
        let now = Instant::now();
        let mut invites = self.invites.lock();
        let Some(invite) = invites.get_mut(&(id.call_id, id.local_tag)) else {
            return;
        };
        let tag = id.remote_tag;
        match &invite.answered {
            None => invite.answered = Some((tag, now + self.window)),
            Some((first, until)) if *first != tag && *until > now => {
                if invite.forks.contains(&tag) {
                    return;
                }
                if invite.forks.len() >= MAX_FORKS {
                    warn!(call_id = %response.call_id_header().map(|c| c.value().to_string()).unwrap_or_default(), "more forked 2xx than are ended; this one is left");
                    return;
                }
                invite.forks.push(tag);
                let _ = self.forks.unbounded_send((response.clone(), from.clone()));
            }
            Some(_) => {}
        }
    }

    /// Forgets the answered INVITEs whose window has passed.
    fn sweep(&self, now: Instant) {
        self.invites.lock().retain(|_, invite| {
            invite
                .answered
                .as_ref()
                .is_none_or(|(_, until)| *until > now)
        });
    }

    #[cfg(test)]
    fn watched(&self) -> usize {
        self.invites.lock().len()
    }
}

/// Forgets an unanswered INVITE when dropped.
pub(crate) struct Watching {
    watch: Arc<ForkWatch>,
    key: DialogKey,
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut invites = self.watch.invites.lock();
        if invites
            .get(&self.key)
            .is_some_and(|invite| invite.answered.is_none())
        {
            invites.remove(&self.key);
        }
    }
}

/// The transport inspector that shows [`ForkWatch`] every response and counts every message
/// received for retransmissions (it sees them before the endpoint answers a retransmission
/// itself).
pub(crate) struct ForkInspector(
    pub Arc<ForkWatch>,
    pub Arc<crate::retransmit::Retransmissions>,
);

#[async_trait]
impl TransportEventInspector for ForkInspector {
    async fn handle(&self, event: TransportEvent) -> Option<TransportEvent> {
        if let TransportEvent::Incoming(msg, _, from) = &event {
            self.1.received(msg);
            if let SipMessage::Response(response) = msg {
                self.0.on_response(response, from);
            }
        }
        Some(event)
    }
}

/// Ends each forked branch `watch` hands over (see [`end_fork`]) and, every
/// [`SWEEP_EVERY`], forgets the answered INVITEs whose window has passed; until `cancel`.
pub(crate) async fn end_forks(
    watch: Arc<ForkWatch>,
    endpoint: EndpointInnerRef,
    mut forks: UnboundedReceiver<(Response, SipAddr)>,
    cancel: CancellationToken,
) {
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let (response, from) = tokio::select! {
            _ = cancel.cancelled() => break,
            _ = sweep.tick() => {
                watch.sweep(Instant::now());
                continue;
            }
            fork = forks.next() => match fork { Some(f) => f, None => break },
        };
        let endpoint = endpoint.clone();
        tokio::spawn(async move {
            let call_id = response
                .call_id_header()
                .map(|c| c.value().to_string())
                .unwrap_or_default();
            match end_fork(endpoint, &response, from).await {
                Ok(code) => {
                    info!(%call_id, code, "forked 2xx: its branch ACKed and ended with a BYE (RFC 3261 13.2.2.4)")
                }
                Err(e) => warn!(%call_id, error = %e, "forked 2xx: ending its branch failed"),
            }
        });
    }
}

/// Ends one forked branch: an ACK for its 2xx, then a BYE, both sent back to where the 2xx
/// came from (the proxy that forked the INVITE, or the branch itself). Returns the BYE's
/// final response code.
async fn end_fork(
    endpoint: EndpointInnerRef,
    response: &Response,
    from: SipAddr,
) -> Result<u16, SipError> {
    let local = endpoint
        .get_addrs()
        .into_iter()
        .find(|a| a.r#type == from.r#type);
    let ack = fork_request(
        Method::Ack,
        response,
        endpoint.get_via(local.clone(), None)?.into(),
        &endpoint.user_agent,
    )?;
    let (connection, destination) = endpoint.transport_layer.lookup(&from, None).await?;
    connection.send(ack.into(), Some(&destination)).await?;

    let bye = fork_request(
        Method::Bye,
        response,
        endpoint.get_via(local, None)?.into(),
        &endpoint.user_agent,
    )?;
    let key = TransactionKey::from_request(&bye, TransactionRole::Client)?;
    let mut tx = Transaction::new_client(key, bye, endpoint, None);
    tx.destination = Some(from);
    tx.send().await?;
    while let Some(msg) = tx.receive().await {
        if let SipMessage::Response(r) = msg
            && r.status_code.kind() != StatusCodeKind::Provisional
        {
            return Ok(u16::from(r.status_code));
        }
    }
    Err(SipError::Stack("no final response to the BYE".to_string()))
}

/// The ACK or the BYE of the dialog a forked 2xx made (RFC 3261 12.1.2, 12.2.1.1, 13.2.2.4):
/// to its Contact, through its Record-Route reversed, with our From, its To (with its tag)
/// and the INVITE's CSeq number (ACK) or the next one (BYE).
fn fork_request(
    method: Method,
    response: &Response,
    via: rsipstack::sip::Via,
    user_agent: &str,
) -> Result<Request, SipError> {
    let contact = response
        .typed_contact_headers()?
        .into_iter()
        .next()
        .ok_or_else(|| SipError::Stack("forked 2xx without Contact".to_string()))?;
    let invite_seq = response.cseq_header()?.seq()?;
    let seq = if method == Method::Ack {
        invite_seq
    } else {
        invite_seq.saturating_add(1)
    };
    let mut routes: Vec<String> = response
        .record_route_headers()
        .into_iter()
        .flat_map(|rr| split_header_values(rr.value()))
        .collect();
    routes.reverse();
    let mut headers: Vec<Header> = vec![
        Header::Via(via),
        Header::CallId(response.call_id_header()?.clone()),
        Header::From(response.from_header()?.clone()),
        Header::To(response.to_header()?.clone()),
        Header::CSeq(rsipstack::sip::typed::CSeq { seq, method }.into()),
        Header::MaxForwards(70.into()),
    ];
    headers.extend(routes.into_iter().map(|r| Header::Route(r.into())));
    headers.push(Header::UserAgent(user_agent.to_string().into()));
    headers.push(Header::ContentLength(0.into()));
    Ok(Request {
        method,
        uri: contact.uri,
        version: rsipstack::sip::Version::V2,
        headers: headers.into(),
        body: vec![],
    })
}

/// Splits a header value listing several entries (`<a>, <b>`) at the commas outside angle
/// brackets and quotes.
fn split_header_values(value: &str) -> Vec<String> {
    let mut values = Vec::new();
    let mut current = String::new();
    let (mut depth, mut quoted) = (0usize, false);
    for ch in value.chars() {
        match ch {
            '"' => quoted = !quoted,
            '<' if !quoted => depth += 1,
            '>' if !quoted => depth = depth.saturating_sub(1),
            ',' if !quoted && depth == 0 => {
                let v = current.trim();
                if !v.is_empty() {
                    values.push(v.to_string());
                }
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(ch);
    }
    let v = current.trim();
    if !v.is_empty() {
        values.push(v.to_string());
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(tag: &str, cseq: &str, extra: &str) -> Response {
        response(200, "OK", tag, cseq, extra)
    }

    fn response(code: u16, reason: &str, tag: &str, cseq: &str, extra: &str) -> Response {
        let text = format!(
            "SIP/2.0 {code} {reason}\r\n\
             Via: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK-invite-1;rport\r\n\
             From: <sip:+15550001@127.0.0.1>;tag=ours\r\n\
             To: <sip:+15550100@127.0.0.1>;tag={tag}\r\n\
             Call-ID: fork-1@127.0.0.1\r\n\
             CSeq: {cseq}\r\n\
             Contact: <sip:{tag}@127.0.0.1:5070>\r\n\
             {extra}\
             Content-Length: 0\r\n\r\n"
        );
        Response::try_from(text.as_bytes()).expect("parses")
    }

    fn invite_id() -> DialogId {
        DialogId {
            call_id: "fork-1@127.0.0.1".into(),
            local_tag: "ours".into(),
            remote_tag: String::new(),
        }
    }

    fn gateway() -> SipAddr {
        SipAddr::from("127.0.0.1:5070".parse::<std::net::SocketAddr>().unwrap())
    }

    fn forks_sent(rx: &mut UnboundedReceiver<(Response, SipAddr)>) -> Vec<String> {
        let mut tags = Vec::new();
        while let Ok((r, _)) = rx.try_recv() {
            let id = DialogId::try_from((&r, TransactionRole::Client)).unwrap();
            tags.push(id.remote_tag);
        }
        tags
    }

    #[tokio::test]
    async fn a_2xx_from_a_second_branch_is_a_fork_once_and_a_retransmission_never() {
        let (watch, mut rx) = ForkWatch::new(Duration::from_secs(32));
        let _watching = watch.watch(&invite_id());
        let from = gateway();
        watch.on_response(&ok("a", "1 INVITE", ""), &from);
        watch.on_response(&ok("a", "1 INVITE", ""), &from);
        assert!(
            forks_sent(&mut rx).is_empty(),
            "the first 2xx and its retransmission"
        );
        watch.on_response(&ok("b", "1 INVITE", ""), &from);
        watch.on_response(&ok("b", "1 INVITE", ""), &from);
        watch.on_response(&ok("a", "1 INVITE", ""), &from);
        watch.on_response(&ok("c", "1 INVITE", ""), &from);
        assert_eq!(forks_sent(&mut rx), ["b", "c"]);
    }

    #[tokio::test]
    async fn only_2xx_to_a_watched_invite_count() {
        let (watch, mut rx) = ForkWatch::new(Duration::from_secs(32));
        let _watching = watch.watch(&invite_id());
        let from = gateway();
        // Provisional and error responses set no answer.
        watch.on_response(
            &response(183, "Session Progress", "x", "1 INVITE", ""),
            &from,
        );
        watch.on_response(&response(486, "Busy Here", "y", "1 INVITE", ""), &from);
        watch.on_response(&ok("a", "1 INVITE", ""), &from);
        // A 2xx to another method of the dialog, and one to another call.
        watch.on_response(&ok("b", "2 BYE", ""), &from);
        let other = Response::try_from(
            "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK-2\r\n\
             From: <sip:a@127.0.0.1>;tag=ours\r\nTo: <sip:b@127.0.0.1>;tag=z\r\n\
             Call-ID: other@127.0.0.1\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
                .as_bytes(),
        )
        .unwrap();
        watch.on_response(&other, &from);
        assert!(forks_sent(&mut rx).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_invite_is_forgotten_at_its_end_unanswered_or_a_window_after_its_answer() {
        let window = Duration::from_secs(32);
        let (watch, mut rx) = ForkWatch::new(window);
        let from = gateway();

        let unanswered = watch.watch(&invite_id());
        assert_eq!(watch.watched(), 1);
        drop(unanswered);
        assert_eq!(
            watch.watched(),
            0,
            "an INVITE that got no 2xx is forgotten at once"
        );

        let answered = watch.watch(&invite_id());
        watch.on_response(&ok("a", "1 INVITE", ""), &from);
        drop(answered);
        let ringing = DialogId {
            call_id: "ringing@127.0.0.1".into(),
            ..invite_id()
        };
        let _ringing = watch.watch(&ringing);
        watch.sweep(Instant::now() + window - Duration::from_secs(1));
        assert_eq!(watch.watched(), 2, "kept for the window after its 2xx");
        tokio::time::advance(window + Duration::from_secs(1)).await;
        watch.on_response(&ok("late", "1 INVITE", ""), &from);
        assert!(
            forks_sent(&mut rx).is_empty(),
            "a 2xx after the window is not followed"
        );
        watch.sweep(Instant::now());
        assert_eq!(
            watch.watched(),
            1,
            "the sweep forgets the answered INVITE, not the one still ringing"
        );
    }

    #[test]
    fn a_forked_branch_gets_an_ack_and_a_bye_along_its_own_route() {
        let fork = ok(
            "b",
            "7 INVITE",
            "Record-Route: <sip:p1@127.0.0.1:5071;lr>, <sip:p2@127.0.0.1:5072;lr>\r\n\
             Record-Route: <sip:p3@127.0.0.1:5073;lr>\r\n",
        );
        let via: rsipstack::sip::Via = rsipstack::sip::typed::Via {
            version: rsipstack::sip::Version::V2,
            transport: rsipstack::sip::Transport::Udp,
            uri: "127.0.0.1:5060".try_into().unwrap(),
            params: vec![],
        }
        .into();
        for (method, seq) in [(Method::Ack, 7), (Method::Bye, 8)] {
            let req = fork_request(method, &fork, via.clone(), "callsmith").unwrap();
            let text = req.to_string();
            assert!(
                text.starts_with(&format!("{method} sip:b@127.0.0.1:5070 SIP/2.0")),
                "{text}"
            );
            let routes: Vec<String> = req
                .headers
                .iter()
                .filter_map(|h| match h {
                    Header::Route(r) => Some(r.value().to_string()),
                    _ => None,
                })
                .collect();
            assert_eq!(
                routes,
                [
                    "<sip:p3@127.0.0.1:5073;lr>",
                    "<sip:p2@127.0.0.1:5072;lr>",
                    "<sip:p1@127.0.0.1:5071;lr>"
                ]
            );
            let cseq = req.cseq_header().unwrap().typed().unwrap();
            assert_eq!((cseq.seq, cseq.method), (seq, method));
            assert_eq!(
                req.to_header().unwrap().tag().unwrap().unwrap().value(),
                "b"
            );
            assert_eq!(
                req.from_header().unwrap().tag().unwrap().unwrap().value(),
                "ours"
            );
            assert_eq!(req.call_id_header().unwrap().value(), "fork-1@127.0.0.1");
        }
    }

    #[test]
    fn a_forked_2xx_without_contact_cannot_be_ended() {
        let text = "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK-1\r\n\
             From: <sip:a@127.0.0.1>;tag=ours\r\nTo: <sip:b@127.0.0.1>;tag=b\r\n\
             Call-ID: fork-1@127.0.0.1\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n";
        let fork = Response::try_from(text.as_bytes()).unwrap();
        let via: rsipstack::sip::Via = "SIP/2.0/UDP 127.0.0.1:5060".to_string().into();
        let err = fork_request(Method::Bye, &fork, via, "callsmith").unwrap_err();
        assert!(err.to_string().contains("without Contact"), "{err}");
    }

    #[test]
    fn header_values_split_at_commas_outside_brackets_and_quotes() {
        assert_eq!(
            split_header_values(r#"<sip:a;lr>, "x, y" <sip:b;lr>,<sip:c?h=1,2>, "#),
            [r#"<sip:a;lr>"#, r#""x, y" <sip:b;lr>"#, "<sip:c?h=1,2>"]
        );
        assert!(split_header_values(" ").is_empty());
    }
}

//! The running stack: transports, the inbound request loop and outbound call placement.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rsipstack::EndpointBuilder;
use rsipstack::dialog::authenticate::Credential;
use rsipstack::dialog::dialog::Dialog;
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::dialog::invitation::InviteOption;
use rsipstack::sip::prelude::*;
use rsipstack::sip::{Header, Method, Request, StatusCode, Version};
use rsipstack::transaction::endpoint::EndpointOption;
use rsipstack::transaction::make_tag;
use rsipstack::transaction::transaction::Transaction;
use rsipstack::transport::tcp_listener::TcpListenerConnection;
use rsipstack::transport::udp::UdpConnection;
use rsipstack::transport::{SipAddr, TransportLayer};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::SipConfig;
pub use crate::error::SipError;
use crate::headers::custom_headers;
use crate::leg::{
    CallLeg, Command, Driver, LegDirection, LegEvent, LegMachine, LegSetup, ReferBase,
    SessionTimer, new_leg,
};
use crate::logging::{MessageLog, redact_number};
use crate::outbound::{self, ForkInspector, ForkWatch, OutboundDialogs};
use crate::relay::DialogRelay;
use crate::retransmit::{RetransmissionCounts, Retransmissions};
use crate::sdes::LocalSrtp;
use crate::sdp::{self, LocalMedia, MediaDirection, NegotiatedMedia, SdpCodec, SessionDescription};
use crate::states::StateRouter;
use crate::trunk::{self, SipTransport, TrunkConfig};
use crate::wire;

/// Whether an inbound INVITE goes on to the engine, decided before any dialog exists (a
/// refusal costs one response).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Hand the call to the engine.
    Admit,
    /// The called number is not served: 404.
    UnknownNumber,
    /// The node takes no more calls now: 503 with `Retry-After` (seconds) and the reason
    /// in a Warning header.
    Busy {
        retry_after_secs: u32,
        reason: String,
    },
}

/// Decides whether an inbound call is taken: the engine's number table (unknown numbers
/// are answered 404 without bothering the engine) and its capacity (503 while full).
pub trait CallRouter: Send + Sync + 'static {
    fn admit(&self, trunk: &str, called: &str) -> Admission;

    /// Why the node takes no calls at all now (it drains before it stops), None while it
    /// serves. OPTIONS is answered 503 with this reason meanwhile, so an edge proxy that
    /// probes its nodes takes this one out of rotation (see [`options_answer`]). A node
    /// that is only full keeps answering OPTIONS 200: its INVITEs get 503 and the edge
    /// tries the next node.
    fn out_of_service(&self) -> Option<String> {
        None
    }
}

/// The answer to an out-of-dialog OPTIONS from a trunk: 200 with what the node supports
/// while it serves, 503 with the reason in a Warning header (and `Retry-After`) while it
/// is out of service. Sans-IO: the stack sends what this returns.
pub fn options_answer(out_of_service: Option<&str>) -> (StatusCode, Vec<Header>) {
    match out_of_service {
        None => (
            StatusCode::OK,
            vec![
                Header::Other(
                    "Allow".into(),
                    "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, UPDATE, NOTIFY, REFER".into(),
                ),
                Header::Other("Accept".into(), "application/sdp".into()),
                Header::Other("Supported".into(), "timer".into()),
            ],
        ),
        Some(reason) => (
            StatusCode::ServiceUnavailable,
            vec![
                Header::Other(
                    "Retry-After".into(),
                    OUT_OF_SERVICE_RETRY_AFTER_SECS.to_string(),
                ),
                Header::Other("Warning".into(), format!("399 callsmith \"{reason}\"")),
            ],
        ),
    }
}

/// `Retry-After` on a 503 to OPTIONS while the node is out of service, seconds: a drain
/// lasts up to `dialer.drain_timeout_secs`, and the process then stops.
const OUT_OF_SERVICE_RETRY_AFTER_SECS: u32 = 30;

/// A number filter alone: known numbers are admitted, others are 404.
impl<F> CallRouter for F
where
    F: Fn(&str, &str) -> bool + Send + Sync + 'static,
{
    fn admit(&self, trunk: &str, called: &str) -> Admission {
        if self(trunk, called) {
            Admission::Admit
        } else {
            Admission::UnknownNumber
        }
    }
}

/// An outbound call request.
#[derive(Debug, Clone)]
pub struct OutboundCall {
    /// Trunk name; `None` uses [`SipConfig::default_trunk`]. The engine passes the trunk bound
    /// to the calling number, else the tenant's default trunk.
    pub trunk: Option<String>,
    /// Caller id (From user), formatted per the trunk's number format.
    pub from_number: String,
    pub from_display: Option<String>,
    pub to_number: String,
    /// Extra SIP headers on the INVITE (e.g. the call_transfer brick's sip_headers).
    pub headers: Vec<(String, String)>,
    pub local_media: LocalMedia,
    /// CANCEL when not answered within this time; status `no_answer`.
    pub ring_timeout: Duration,
}

struct Inner {
    config: SipConfig,
    /// Each trunk's gateway address by trunk name: as written, or as its host name last
    /// resolved (see [`refresh_gateways`]).
    gateways: parking_lot::RwLock<HashMap<String, SocketAddr>>,
    dialog_layer: Arc<DialogLayer>,
    udp_addr: Option<SocketAddr>,
    /// The UDP socket's receive buffer as the kernel granted it, bytes.
    udp_receive_buffer: Option<usize>,
    tcp_addr: Option<SocketAddr>,
    /// The TLS listener's address, bound.
    tls_addr: Option<SocketAddr>,
    router: Arc<dyn CallRouter>,
    /// Every dialog's states, routed to its leg.
    states: StateRouter,
    /// What dialogs send their INVITE transaction (see [`DialogRelay`]).
    relay: DialogRelay,
    /// Outbound dialogs, for in-dialog requests.
    outbound: Arc<OutboundDialogs>,
    /// Outbound INVITEs, watched for forked 2xx.
    forks: Arc<ForkWatch>,
    /// Messages sent and received again (see [`Retransmissions`]).
    retransmissions: Arc<Retransmissions>,
    cancel: CancellationToken,
}

/// The running SIP stack. Dropping it stops the transports.
pub struct SipStack {
    inner: Arc<Inner>,
    incoming: parking_lot::Mutex<Option<IncomingCalls>>,
}

impl Drop for SipStack {
    fn drop(&mut self) {
        self.inner.cancel.cancel();
    }
}

/// The stream of inbound calls accepted by trunk, number and codec checks.
pub struct IncomingCalls {
    rx: mpsc::Receiver<IncomingCall>,
}

impl IncomingCalls {
    pub async fn recv(&mut self) -> Option<IncomingCall> {
        self.rx.recv().await
    }
}

/// An inbound call waiting for the engine: ring it, answer it or reject it.
/// Watch [`IncomingCall::next_event`] for the caller's CANCEL (`Ended{canceled}`).
pub struct IncomingCall {
    pub trunk: String,
    /// Caller number (From user) as received.
    pub from: String,
    pub from_display: Option<String>,
    /// Called number (Request-URI user), normalised (digits, leading + kept).
    pub to: String,
    /// All headers of the INVITE, in order (name, value).
    pub headers: Vec<(String, String)>,
    /// The caller's offer read against the trunk's codecs (answer may still differ
    /// if the engine answers with fewer codecs).
    pub remote_media: NegotiatedMedia,
    /// Where the INVITE came from.
    pub source: SocketAddr,
    /// The trunk's codecs the media side supports: the answer offers no others.
    codecs: Vec<SdpCodec>,
    leg: CallLeg,
    /// This side's SRTP key and the trunk's policy, as the offer was checked with: the
    /// answer uses the same, so `remote_media.srtp` holds the keys the call runs with.
    srtp: Option<LocalSrtp>,
}

impl std::fmt::Debug for IncomingCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncomingCall")
            .field("trunk", &self.trunk)
            .field("from", &self.from)
            .field("to", &self.to)
            .field("call_id", &self.leg.call_id)
            .finish()
    }
}

impl IncomingCall {
    pub fn call_id(&self) -> &str {
        self.leg.call_id()
    }
    /// Send 180 Ringing.
    pub fn ring(&self) {
        self.leg.controller.send(Command::Ring);
    }
    /// Answer with 200 and an SDP answer for `local` (first codec of the offer that `local`
    /// supports). Returns the leg, whose first event is `Answered`.
    /// The trunk's SRTP policy applies whatever `local.srtp` says.
    pub async fn answer(self, mut local: LocalMedia) -> Result<CallLeg, SipError> {
        local.codecs.retain(|c| self.codecs.contains(c));
        local.srtp = self.srtp;
        let (tx, rx) = oneshot::channel();
        if !self
            .leg
            .controller
            .send(Command::Answer { local, reply: tx })
        {
            return Err(SipError::CallGone);
        }
        match rx.await {
            Ok(Ok(_)) => Ok(self.leg),
            Ok(Err(e)) => Err(SipError::Answer(e)),
            Err(_) => Err(SipError::CallGone),
        }
    }
    /// Reject with a final status (e.g. 486, 603) and optional Reason text.
    pub fn reject(self, code: u16, reason: Option<String>) {
        let code = if (300..700).contains(&code) {
            code
        } else {
            603
        };
        self.leg.controller.send(Command::Reject { code, reason });
    }
    /// Events before answer (only `Ended` can occur: the caller canceled or went away).
    pub async fn next_event(&mut self) -> Option<LegEvent> {
        self.leg.next_event().await
    }
}

fn sip_addr(t: SipTransport, addr: SocketAddr) -> SipAddr {
    SipAddr {
        r#type: Some(match t {
            SipTransport::Udp => rsipstack::sip::Transport::Udp,
            SipTransport::Tcp => rsipstack::sip::Transport::Tcp,
            SipTransport::Tls => rsipstack::sip::Transport::Tls,
        }),
        addr: addr.into(),
    }
}

/// Where a trunk's INVITE is sent: the gateway's address now; over TLS, a gateway written
/// as a host name is given to the transport by name, which then resolves it, sends the
/// name as SNI and verifies the certificate for it (an address would be checked against
/// the certificate's IP addresses, which a carrier's certificate does not name).
fn destination(trunk: &TrunkConfig, gateway_addr: SocketAddr) -> SipAddr {
    match (&trunk.gateway.target, trunk.transport) {
        (trunk::Gateway::Host { name, port }, SipTransport::Tls) => SipAddr {
            r#type: Some(rsipstack::sip::Transport::Tls),
            addr: rsipstack::sip::HostWithPort {
                host: rsipstack::sip::Host::Domain(name.clone().into()),
                port: Some((*port).into()),
            },
        },
        _ => sip_addr(trunk.transport, gateway_addr),
    }
}

fn user_of(uri: &rsipstack::sip::Uri) -> String {
    uri.auth
        .as_ref()
        .map(|a| a.user.clone())
        .unwrap_or_default()
}

/// The address the request really came from: the connection's peer, else Via received/rport.
fn source_of(tx: &Transaction) -> Option<SocketAddr> {
    if let Some(a) = tx.connection.as_ref().and_then(|c| c.get_remote_addr())
        && let Ok(sa) = a.get_socketaddr()
    {
        return Some(sa);
    }
    let via = tx.original.via_header().ok()?.typed().ok()?;
    let mut ip: Option<IpAddr> = via.uri.host_with_port.host.to_string().parse().ok();
    let mut port = via.uri.host_with_port.port.map(u16::from).unwrap_or(5060);
    for p in via.params.iter() {
        match p {
            rsipstack::sip::Param::Received(r) => {
                ip = r.value().trim_matches(['[', ']']).parse().ok().or(ip)
            }
            rsipstack::sip::Param::Rport(Some(rp)) => port = *rp,
            _ => {}
        }
    }
    Some(SocketAddr::new(ip?, port))
}

/// Binds the SIP UDP socket (no address reuse: a taken address is an error) with a receive
/// buffer of `receive_buffer` bytes asked; returns it and the buffer the kernel granted.
fn bind_udp(
    addr: SocketAddr,
    receive_buffer: usize,
) -> std::io::Result<(tokio::net::UdpSocket, usize)> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_nonblocking(true)?;
    socket.set_recv_buffer_size(receive_buffer)?;
    // Linux reports twice what it grants (the other half is its bookkeeping allowance).
    let granted = socket.recv_buffer_size()? / 2;
    socket.bind(&addr.into())?;
    Ok((tokio::net::UdpSocket::from_std(socket.into())?, granted))
}

/// The listen address a trunk's transport sends from, as configured.
fn local_ip(config: &SipConfig, transport: SipTransport) -> Option<IpAddr> {
    match transport {
        SipTransport::Udp => config.udp,
        SipTransport::Tcp => config.tcp,
        SipTransport::Tls => config.tls.as_ref().and_then(|t| t.listen),
    }
    .map(|a| a.ip())
}

/// Every trunk's gateway address: written ones as they are, host names resolved (a name
/// that does not resolve to an address [`trunk::check_gateway_addr`] allows is an error).
async fn resolve_gateways(config: &SipConfig) -> Result<HashMap<String, SocketAddr>, SipError> {
    let mut out = HashMap::new();
    for t in &config.trunks {
        let addr = t
            .gateway
            .resolve(local_ip(config, t.transport))
            .await
            .map_err(|reason| SipError::Gateway {
                trunk: t.name.clone(),
                reason,
            })?;
        if t.gateway.addr().is_none() {
            info!(trunk = %t.name, gateway = %t.gateway, %addr, "trunk gateway resolved");
        }
        out.insert(t.name.clone(), addr);
    }
    Ok(out)
}

/// Resolves the gateways written as host names again every
/// [`crate::SipTimers::gateway_refresh`] until the stack stops. A new address (which
/// [`trunk::Gateway::resolve`] has checked against the same policy as a written one) is
/// used from the next call on; a failed resolution keeps the last address and warns.
async fn refresh_gateways(inner: Arc<Inner>) {
    let named: Vec<&TrunkConfig> = inner
        .config
        .trunks
        .iter()
        .filter(|t| t.gateway.addr().is_none())
        .collect();
    if named.is_empty() {
        return;
    }
    loop {
        tokio::select! {
            _ = inner.cancel.cancelled() => return,
            _ = tokio::time::sleep(inner.config.timers.gateway_refresh) => {}
        }
        for t in &named {
            let now = inner.gateways.read().get(&t.name).copied();
            match t
                .gateway
                .resolve(local_ip(&inner.config, t.transport))
                .await
            {
                Ok(addr) if Some(addr) != now => {
                    info!(trunk = %t.name, gateway = %t.gateway, old = ?now, new = %addr, "trunk gateway address changed");
                    inner.gateways.write().insert(t.name.clone(), addr);
                }
                Ok(_) => {}
                Err(error) => {
                    warn!(trunk = %t.name, %error, kept = ?now, "resolving the trunk gateway again failed: keeping its last address");
                }
            }
        }
    }
}

impl Inner {
    /// The trunk's gateway address now.
    fn gateway_addr(&self, trunk: &TrunkConfig) -> Option<SocketAddr> {
        self.gateways.read().get(&trunk.name).copied()
    }
}

impl SipStack {
    /// Check the configuration ([`SipConfig::check`]), resolve the trunks' gateways, bind
    /// the transports and start serving. TCP with port 0 gets a free port picked here.
    pub async fn start(config: SipConfig, router: impl CallRouter) -> Result<SipStack, SipError> {
        config.check().map_err(SipError::Config)?;
        let tls = match &config.tls {
            Some(t) => Some(Arc::new(
                crate::tls::TlsMaterial::load(t).map_err(SipError::Config)?,
            )),
            None => None,
        };
        let gateways = resolve_gateways(&config).await?;
        let cancel = CancellationToken::new();
        let transport_layer = TransportLayer::new(cancel.child_token());
        let mut udp_addr = None;
        let mut tcp_addr = None;
        let mut udp_receive_buffer = None;
        if let Some(addr) = config.udp {
            let listen_error = |e: &dyn std::fmt::Display| SipError::Listen {
                transport: "udp",
                addr,
                reason: e.to_string(),
            };
            let (socket, granted) =
                bind_udp(addr, config.udp_receive_buffer_bytes).map_err(|e| listen_error(&e))?;
            if granted < config.udp_receive_buffer_bytes {
                warn!(
                    asked = config.udp_receive_buffer_bytes,
                    granted,
                    "the SIP UDP receive buffer is smaller than asked: the kernel caps it at \
                     net.core.rmem_max (sysctl -w net.core.rmem_max=<bytes> raises it)"
                );
            }
            udp_receive_buffer = Some(granted);
            let conn =
                UdpConnection::from_socket(Arc::new(socket), None, Some(cancel.child_token()))
                    .await
                    .map_err(|e| listen_error(&e))?;
            udp_addr = Some(conn.get_addr().get_socketaddr()?);
            transport_layer.add_transport(conn.into());
        }
        if let Some(mut addr) = config.tcp {
            // rsipstack binds its TCP listener later, in the endpoint's serve task, where a
            // failure is only logged. Binding here first makes a taken address a start-up
            // error, and picks the port when 0 was asked for. Both binds set SO_REUSEADDR,
            // so the probe's closing does not hold the port.
            let probe = std::net::TcpListener::bind(addr)
                .and_then(|l| l.local_addr())
                .map_err(|e| SipError::Listen {
                    transport: "tcp",
                    addr,
                    reason: e.to_string(),
                })?;
            addr.set_port(probe.port());
            let conn = TcpListenerConnection::new(addr, None).await?;
            tcp_addr = Some(addr);
            transport_layer.add_transport(conn.into());
        }
        let mut tls_listener = None;
        if let (Some(material), Some(addr)) = (&tls, config.tls.as_ref().and_then(|t| t.listen)) {
            let listener = crate::tls::bind(addr).await.map_err(|e| SipError::Listen {
                transport: "tls",
                addr,
                reason: e.to_string(),
            })?;
            transport_layer.set_tls_config(material.client_config());
            tls_listener = Some(listener);
        }
        let tls_addr = tls_listener.as_ref().and_then(|l| l.local_addr().ok());
        let call_id_host = udp_addr.or(tcp_addr).map(|a| a.ip().to_string());
        let option = EndpointOption {
            callid_suffix: call_id_host,
            t1: config.timers.t1,
            t1x64: config.timers.t1 * 64,
            ..Default::default()
        };
        let (forks, forked) = ForkWatch::new(option.t1x64);
        let retransmissions = Arc::new(Retransmissions::new(option.t1x64));
        let endpoint = EndpointBuilder::new()
            .with_user_agent(&config.user_agent)
            .with_cancel_token(cancel.clone())
            .with_transport_layer(transport_layer)
            .with_option(option)
            .with_inspector(Box::new(MessageLog(
                crate::interop::AlgorithmNames,
                Some(retransmissions.clone()),
            )))
            .with_transport_inspector(Box::new(ForkInspector(
                forks.clone(),
                retransmissions.clone(),
            )))
            .with_allows(vec![
                Method::Invite,
                Method::Ack,
                Method::Cancel,
                Method::Bye,
                Method::Options,
                Method::Info,
                Method::Update,
                Method::Notify,
                Method::Refer,
            ])
            .build();
        let incoming_tx = endpoint.incoming_transactions()?;
        let endpoint_inner = endpoint.inner.clone();
        let dialog_layer = Arc::new(DialogLayer::new(endpoint_inner.clone()));
        tokio::spawn(async move { endpoint.serve().await });
        if let (Some(listener), Some(material)) = (tls_listener, tls) {
            tokio::spawn(crate::tls::serve(
                listener,
                material,
                endpoint_inner.clone(),
                cancel.child_token(),
            ));
        }
        tokio::spawn(outbound::end_forks(
            forks.clone(),
            endpoint_inner.clone(),
            forked,
            cancel.clone(),
        ));

        let inner = Arc::new(Inner {
            config,
            gateways: parking_lot::RwLock::new(gateways),
            dialog_layer,
            udp_addr,
            udp_receive_buffer,
            tcp_addr,
            tls_addr,
            router: Arc::new(router),
            states: StateRouter::start(cancel.clone()),
            relay: DialogRelay::start(endpoint_inner.clone(), cancel.clone()),
            outbound: Arc::default(),
            forks,
            retransmissions,
            cancel: cancel.clone(),
        });
        let (call_tx, call_rx) = mpsc::channel(1024);
        tokio::spawn(serve_requests(inner.clone(), incoming_tx, call_tx));
        tokio::spawn(refresh_gateways(inner.clone()));
        info!(?udp_addr, ?tcp_addr, ?tls_addr, "sip stack started");
        Ok(SipStack {
            inner,
            incoming: parking_lot::Mutex::new(Some(IncomingCalls { rx: call_rx })),
        })
    }

    /// The inbound call stream (once; later calls return `None`).
    pub fn take_incoming(&self) -> Option<IncomingCalls> {
        self.incoming.lock().take()
    }

    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.inner.udp_addr
    }
    /// The UDP socket's receive buffer, bytes: what the kernel granted for
    /// [`SipConfig::udp_receive_buffer_bytes`] (at most `net.core.rmem_max`).
    pub fn udp_receive_buffer(&self) -> Option<usize> {
        self.inner.udp_receive_buffer
    }
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.inner.tcp_addr
    }
    /// The TLS listener's address (see [`crate::tls`]).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.inner.tls_addr
    }
    /// SIP messages sent and received again since the stack started (see
    /// [`Retransmissions`]).
    pub fn retransmissions(&self) -> RetransmissionCounts {
        self.inner.retransmissions.counts()
    }

    pub fn trunks(&self) -> &[TrunkConfig] {
        &self.inner.config.trunks
    }

    /// The trunk an outbound call naming none leaves through ([`SipConfig::default_trunk`]).
    pub fn default_trunk(&self) -> Option<&str> {
        self.inner.config.default_trunk.as_deref()
    }

    /// The SRTP policy of the trunk a call naming `trunk` leaves through (the default
    /// trunk when None); `off` when no trunk would take it. The engine holds the call's
    /// media for the keys (`MediaSession::await_srtp`) when it is not `off`.
    pub fn srtp_policy(&self, trunk: Option<&str>) -> crate::sdes::SrtpPolicy {
        trunk::select_trunk(
            &self.inner.config.trunks,
            trunk,
            self.inner.config.default_trunk.as_deref(),
        )
        .map(|t| t.srtp)
        .unwrap_or_default()
    }

    /// Where the trunk named `name` sends INVITEs now: its written address, or the address
    /// its host name last resolved to.
    pub fn gateway_addr(&self, name: &str) -> Option<SocketAddr> {
        self.inner.gateways.read().get(name).copied()
    }

    /// The transaction endpoint, for requests outside any dialog this stack holds.
    pub(crate) fn endpoint(&self) -> rsipstack::transaction::endpoint::EndpointInnerRef {
        self.inner.dialog_layer.endpoint.clone()
    }

    /// Stop transports and timers. Calls in progress are not BYE'd.
    pub fn shutdown(&self) {
        self.inner.cancel.cancel();
    }

    /// Send an INVITE through the chosen trunk. Returns at once; progress comes as events.
    /// The trunk's SRTP policy applies (with a fresh key) whatever `call.local_media.srtp`
    /// says.
    pub async fn place_call(&self, mut call: OutboundCall) -> Result<CallLeg, SipError> {
        let inner = &self.inner;
        let trunk = trunk::select_trunk(
            &inner.config.trunks,
            call.trunk.as_deref(),
            inner.config.default_trunk.as_deref(),
        )?
        .clone();
        // The offer lists the trunk's codecs in the trunk's order.
        call.local_media.codecs = trunk.preferred_codecs(&call.local_media.codecs);
        if call.local_media.codecs.is_empty() {
            return Err(trunk::TrunkError::NoCodec(trunk.name.clone()).into());
        }
        let from = trunk::format_number(&call.from_number, &trunk.number_format)?;
        let to = trunk::format_number(&call.to_number, &trunk.number_format)?;
        let mut headers = custom_headers(&call.headers)?;
        if trunk.edge_route {
            headers.push(Header::Other(
                trunk::EDGE_TRUNK_HEADER.into(),
                trunk.name.clone(),
            ));
        }
        let local_addr = match trunk.transport {
            SipTransport::Udp => inner.udp_addr,
            SipTransport::Tcp => inner.tcp_addr,
            SipTransport::Tls => inner.tls_addr,
        }
        .ok_or(SipError::TransportDisabled(trunk.transport))?;

        // A sips: URI says TLS by its scheme (RFC 5630 §3.2 deprecates transport=tls).
        let transport_param = match trunk.transport {
            _ if trunk.gateway.sips => "",
            SipTransport::Udp => "",
            SipTransport::Tcp => ";transport=tcp",
            SipTransport::Tls => ";transport=tls",
        };
        let scheme = trunk.gateway.scheme();
        let parse = |s: String| {
            rsipstack::sip::Uri::try_from(s.as_str())
                .map_err(|e| SipError::Stack(format!("bad uri {s}: {e}")))
        };
        let caller = parse(format!("sip:{from}@{}", trunk.from_host()))?;
        let callee = parse(format!(
            "{scheme}:{to}@{}{transport_param}",
            trunk.gateway.target
        ))?;
        let gateway_addr = inner
            .gateway_addr(&trunk)
            .ok_or_else(|| SipError::Gateway {
                trunk: trunk.name.clone(),
                reason: format!("{} has no address", trunk.gateway),
            })?;
        let contact = parse(format!("{scheme}:{from}@{local_addr}{transport_param}"))?;

        call.local_media.srtp = LocalSrtp::for_policy(trunk.srtp);
        let session_id = rand::random::<u32>() as u64;
        let offer = sdp::build_offer(&call.local_media, session_id, 1, MediaDirection::SendRecv);
        let credential = trunk.credentials.as_ref().map(|c| Credential {
            username: c.username.clone(),
            password: c.password.clone(),
            realm: c.realm.clone(),
            ..Default::default()
        });
        let opt = InviteOption {
            caller_display_name: call.from_display.clone(),
            caller,
            callee,
            destination: Some(destination(&trunk, gateway_addr)),
            content_type: Some("application/sdp".into()),
            offer: Some(offer.into_bytes()),
            contact,
            credential,
            headers: if headers.is_empty() {
                None
            } else {
                Some(headers)
            },
            ..Default::default()
        };
        let (dialog, invite) = outbound::client_invite(
            &inner.dialog_layer,
            opt,
            inner.states.sender(),
            inner.relay.sender(),
        )?;
        let state_rx = inner.states.register(&dialog.id());
        let registered = inner.outbound.register(&dialog);
        let watching = inner.forks.watch(&dialog.id());
        let join = tokio::spawn(outbound::run_invite(dialog.clone(), invite, watching));
        let call_id = dialog.id().call_id.clone();
        info!(%call_id, trunk = %trunk.name, from = %redact_number(&from), to = %redact_number(&to), "placing call");
        let (leg, cmd_rx, ev_tx) = new_leg(call_id, LegDirection::Outbound, trunk.name.clone());
        let setup = LegSetup {
            call_id: dialog.id().call_id.clone(),
            direction: LegDirection::Outbound,
            local_media: Some(call.local_media),
            ring_timeout: Some(call.ring_timeout),
            session_timer: None,
            refer: ReferBase {
                host: trunk.gateway.target.to_string(),
                sips: trunk.gateway.sips,
                tls: trunk.transport == SipTransport::Tls,
            },
            refer_timeout: inner.config.timers.refer_timeout,
            session_id,
            session_version: 1,
        };
        let driver = Driver {
            answered: leg.answered.clone(),
            dialog,
            dialog_layer: inner.dialog_layer.clone(),
            state_rx,
            cmd_rx,
            events: ev_tx,
            invite: Some(join),
            outbound: Some(registered),
            machine: LegMachine::new(setup, Instant::now().into_std()),
        };
        tokio::spawn(driver.run());
        Ok(leg)
    }
}

/// The loop over new server transactions (requests that match no running transaction).
async fn serve_requests(
    inner: Arc<Inner>,
    mut incoming: rsipstack::transaction::TransactionReceiver,
    calls: mpsc::Sender<IncomingCall>,
) {
    loop {
        let tx = tokio::select! {
            _ = inner.cancel.cancelled() => break,
            tx = incoming.recv() => match tx { Some(tx) => tx, None => break },
        };
        let inner = inner.clone();
        let calls = calls.clone();
        tokio::spawn(async move {
            let method = tx.original.method;
            if let Err(e) = handle_request(inner, tx, calls).await {
                debug!(%method, error = %e, "request handling ended with error");
            }
        });
    }
}

async fn handle_request(
    inner: Arc<Inner>,
    mut tx: Transaction,
    calls: mpsc::Sender<IncomingCall>,
) -> Result<(), SipError> {
    if let Err(refusal) = wire::validate_request(&tx.original) {
        warn!(code = refusal.code, reason = %refusal.reason, "refusing a request");
        refuse(&mut tx, &refusal).await?;
        return Ok(());
    }
    let in_dialog = tx
        .original
        .to_header()
        .ok()
        .and_then(|t| t.tag().ok().flatten())
        .is_some();
    if in_dialog {
        if tx.original.method == Method::Ack {
            return Ok(());
        }
        let dialog = match inner.outbound.find(&tx.original) {
            Some(d) => Some(Dialog::Invite(d)),
            None => inner.dialog_layer.match_dialog(&tx),
        };
        match dialog {
            Some(Dialog::Invite(mut d)) => {
                d.handle(&mut tx).await?;
            }
            Some(other) => {
                let mut d = other;
                d.handle(&mut tx).await?;
            }
            None => {
                tx.reply(StatusCode::CallTransactionDoesNotExist).await?;
            }
        }
        return Ok(());
    }

    let source = source_of(&tx);
    let trunk = source
        .and_then(|s| {
            trunk::trunk_for_source(
                &inner.config.trunks,
                |t| inner.gateway_addr(t).map(|a| a.ip()),
                s.ip(),
            )
        })
        .cloned();
    let (Some(trunk), Some(source)) = (trunk, source) else {
        warn!(source = ?source, method = %tx.original.method, "request from a source no trunk allows: 403");
        tx.reply(StatusCode::Forbidden).await?;
        return Ok(());
    };
    let tls = tx
        .connection
        .as_ref()
        .is_some_and(|c| c.transport() == rsipstack::sip::Transport::Tls);
    if let Err(reason) = crate::tls::check_sips(&tx.original.uri.to_string(), tls) {
        info!(method = %tx.original.method, trunk = %trunk.name, %reason, "sips: Request-URI not over TLS");
        let warning = Header::Other(
            "Warning".into(),
            format!("399 callsmith \"{}\"", warning_text(&reason)),
        );
        tx.reply_with(
            StatusCode::from(crate::tls::SIPS_WITHOUT_TLS),
            vec![warning],
            None,
        )
        .await?;
        return Ok(());
    }
    match tx.original.method {
        Method::Invite => handle_invite(inner, tx, calls, trunk, source).await,
        Method::Options => {
            let out_of_service = inner.router.out_of_service();
            let (status, headers) = options_answer(out_of_service.as_deref());
            tx.reply_with(status, headers, None).await?;
            Ok(())
        }
        Method::Ack => Ok(()),
        Method::Bye
        | Method::Cancel
        | Method::Info
        | Method::Update
        | Method::Notify
        | Method::Refer => {
            tx.reply(StatusCode::CallTransactionDoesNotExist).await?;
            Ok(())
        }
        _ => {
            tx.reply(StatusCode::MethodNotAllowed).await?;
            Ok(())
        }
    }
}

/// Answers a request [`wire::validate_request`] refused. The response's status line is
/// `SIP/2.0` whatever version the request carried (RFC 3261 §7.2, §8.2.1); the reason goes
/// in a Warning header.
async fn refuse(tx: &mut Transaction, refusal: &wire::Refusal) -> Result<(), SipError> {
    // A final response carries a To tag (§8.2.6.2); a To that cannot be read gets none.
    if let Ok(to) = tx.original.to_header()
        && let Ok(None) = to.tag()
    {
        let tagged = to.clone().with_tag(make_tag());
        tx.original.headers.unique_push(tagged.into());
    }
    let mut resp =
        tx.endpoint_inner
            .make_response(&tx.original, StatusCode::from(refusal.code), None);
    resp.version = Version::V2;
    resp.headers.push(Header::Other(
        "Warning".into(),
        format!("399 callsmith \"{}\"", refusal.reason),
    ));
    tx.respond(resp).await?;
    Ok(())
}

/// Text fit for a Warning header's quoted string: printable ASCII without quotes or
/// backslashes, at most 200 characters (the text may quote what a peer sent).
fn warning_text(reason: &str) -> String {
    reason
        .chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            c if c == ' ' || c.is_ascii_graphic() => c,
            _ => '?',
        })
        .take(200)
        .collect()
}

fn header_pairs(req: &Request) -> Vec<(String, String)> {
    req.headers
        .iter()
        .map(|h| {
            let s = h.to_string();
            match s.split_once(':') {
                Some((n, v)) => (n.trim().to_string(), v.trim().to_string()),
                None => (s, String::new()),
            }
        })
        .collect()
}

async fn handle_invite(
    inner: Arc<Inner>,
    mut tx: Transaction,
    calls: mpsc::Sender<IncomingCall>,
    trunk: TrunkConfig,
    source: SocketAddr,
) -> Result<(), SipError> {
    let req = tx.original.clone();
    let called = trunk::normalize_received(&user_of(&req.uri));
    let (from, from_display) = match req.from_header().and_then(|f| f.typed()) {
        Ok(f) => (user_of(&f.uri), f.display_name.clone()),
        Err(_) => (String::new(), None),
    };

    // Media first: an offer we cannot serve is 488 whatever the number.
    let codecs = trunk.preferred_codecs(&inner.config.codecs);
    let srtp = LocalSrtp::for_policy(trunk.srtp);
    let probe = LocalMedia {
        codecs: codecs.clone(),
        srtp,
        ..LocalMedia::g711(sdp::LOOPBACK, 9)
    };
    let text = String::from_utf8_lossy(&req.body).to_string();
    let remote_media = match SessionDescription::parse(&text)
        .and_then(|sd| sdp::answer_offer(&sd, &probe, 0, 0))
    {
        Ok((_, neg)) => neg,
        Err(e) => {
            info!(call_id = ?req.call_id_header().map(|c| c.value().to_string()).ok(), trunk = %trunk.name, error = %e, "inbound INVITE offer not acceptable: 488");
            // The reason names what is wrong with the offer, never a key.
            let warning = Header::Other(
                "Warning".into(),
                format!("399 callsmith \"{}\"", warning_text(&e.to_string())),
            );
            tx.reply_with(StatusCode::NotAcceptableHere, vec![warning], None)
                .await?;
            return Ok(());
        }
    };
    match inner.router.admit(&trunk.name, &called) {
        Admission::Admit => {}
        Admission::UnknownNumber => {
            info!(trunk = %trunk.name, called = %redact_number(&called), "unknown called number: 404");
            tx.reply(StatusCode::NotFound).await?;
            return Ok(());
        }
        Admission::Busy {
            retry_after_secs,
            reason,
        } => {
            debug!(trunk = %trunk.name, %reason, "inbound call refused: 503");
            let headers = vec![
                Header::Other("Retry-After".into(), retry_after_secs.to_string()),
                Header::Other("Warning".into(), format!("399 callsmith \"{reason}\"")),
            ];
            tx.reply_with(StatusCode::ServiceUnavailable, headers, None)
                .await?;
            return Ok(());
        }
    }

    let session_timer = match req.header_value("Session-Expires") {
        Some(v) => match SessionTimer::from_header(&v, true) {
            Some(st) if st.interval < inner.config.timers.min_session_expires => {
                let headers = vec![Header::Other(
                    "Min-SE".into(),
                    inner.config.timers.min_session_expires.to_string(),
                )];
                tx.reply_with(StatusCode::from(422), headers, None).await?;
                return Ok(());
            }
            other => other,
        },
        None => None,
    };

    // Contact on the transport the INVITE came in on, so in-dialog requests use it too;
    // a sips: Request-URI (over TLS: handle_request refused it otherwise) gets a sips:
    // Contact (RFC 3261 §12.1.1), whose scheme says TLS.
    let transport = tx.connection.as_ref().map(|c| c.transport());
    let tls = transport == Some(rsipstack::sip::Transport::Tls);
    let (local_addr, tp) = match transport {
        Some(rsipstack::sip::Transport::Tcp) => (inner.tcp_addr, ";transport=tcp"),
        Some(rsipstack::sip::Transport::Tls) => (inner.tls_addr, ";transport=tls"),
        _ => (inner.udp_addr, ""),
    };
    let sips = req.uri.scheme == Some(rsipstack::sip::Scheme::Sips);
    let contact_uri = match local_addr {
        Some(a) if sips => Some(format!("sips:{called}@{a}")),
        Some(a) => Some(format!("sip:{called}@{a}{tp}")),
        None => None,
    };
    let contact = contact_uri.and_then(|u| rsipstack::sip::Uri::try_from(u.as_str()).ok());
    // The dialog gets the relay's sender, not a clone of the transaction's own, so the
    // transaction's channel is freed when it ends instead of when the call does.
    let own_sender = std::mem::replace(&mut tx.tu_sender, inner.relay.sender());
    let dialog =
        inner
            .dialog_layer
            .get_or_create_server_invite(&tx, inner.states.sender(), None, contact);
    tx.tu_sender = own_sender;
    let dialog = dialog?;
    let _route = inner.relay.register(&tx.original, &tx.key);
    let state_rx = inner.states.register(&dialog.id());
    let call_id = dialog.id().call_id.clone();
    info!(%call_id, trunk = %trunk.name, from = %redact_number(&from), to = %redact_number(&called), %source, "inbound call");

    let (leg, cmd_rx, ev_tx) = new_leg(call_id.clone(), LegDirection::Inbound, trunk.name.clone());
    let setup = LegSetup {
        call_id,
        direction: LegDirection::Inbound,
        local_media: None,
        ring_timeout: None,
        session_timer,
        refer: ReferBase {
            host: trunk.gateway.target.to_string(),
            sips,
            tls,
        },
        refer_timeout: inner.config.timers.refer_timeout,
        session_id: rand::random::<u32>() as u64,
        session_version: 1,
    };
    let driver = Driver {
        answered: leg.answered.clone(),
        dialog: dialog.clone(),
        dialog_layer: inner.dialog_layer.clone(),
        state_rx,
        cmd_rx,
        events: ev_tx,
        invite: None,
        outbound: None,
        machine: LegMachine::new(setup, Instant::now().into_std()),
    };
    tokio::spawn(driver.run());

    let call = IncomingCall {
        trunk: trunk.name.clone(),
        from,
        from_display,
        to: called,
        headers: header_pairs(&req),
        remote_media,
        source,
        codecs,
        leg,
        srtp,
    };
    // Run the INVITE server transaction (100 Trying, CANCEL, ACK) until it settles.
    let mut d = dialog.clone();
    if calls.try_send(call).is_err() {
        warn!("engine is not taking calls: 503");
        let _ = d.reject(Some(StatusCode::ServiceUnavailable), None);
    }
    d.handle(&mut tx).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_tcp_address_stops_the_start_and_is_named() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = held.local_addr().unwrap();
        let config = SipConfig {
            udp: None,
            tcp: Some(addr),
            ..SipConfig::default()
        };
        let err = SipStack::start(config, |_: &str, _: &str| true)
            .await
            .err()
            .expect("the start must fail");
        assert!(
            matches!(err, SipError::Listen { transport: "tcp", addr: a, .. } if a == addr),
            "{err:?}"
        );
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
        drop(held);
    }

    #[tokio::test]
    async fn a_taken_udp_address_stops_the_start_and_is_named() {
        let held = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = held.local_addr().unwrap();
        let config = SipConfig {
            udp: Some(addr),
            tcp: None,
            ..SipConfig::default()
        };
        let err = SipStack::start(config, |_: &str, _: &str| true)
            .await
            .err()
            .expect("the start must fail");
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
        drop(held);
    }

    #[tokio::test]
    async fn the_udp_socket_gets_the_receive_buffer_asked_within_the_kernel_cap() {
        let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .expect("rmem_max")
            .trim()
            .parse()
            .expect("a number");
        for asked in [256 << 10, crate::UDP_RECEIVE_BUFFER_BYTES] {
            let config = SipConfig {
                udp: Some("127.0.0.1:0".parse().unwrap()),
                tcp: None,
                udp_receive_buffer_bytes: asked,
                ..SipConfig::default()
            };
            let stack = SipStack::start(config, |_: &str, _: &str| true)
                .await
                .expect("start");
            let granted = stack.udp_receive_buffer().expect("udp is on");
            assert_eq!(
                granted,
                asked.min(rmem_max),
                "asked {asked}, rmem_max {rmem_max}"
            );
            // The socket is the one serving: a request to it is answered.
            let addr = stack.udp_addr().expect("udp address");
            let probe = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let me = probe.local_addr().unwrap();
            let options = format!(
                "OPTIONS sip:{addr} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch=z9hG4bKrcvbuf{asked}\r\n\
                 From: <sip:probe@{me}>;tag=1\r\nTo: <sip:{addr}>\r\nCall-ID: rcvbuf-{asked}\r\n\
                 CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
            );
            probe.send_to(options.as_bytes(), addr).await.unwrap();
            let mut buf = [0u8; 2048];
            let (n, _) = tokio::time::timeout(Duration::from_secs(5), probe.recv_from(&mut buf))
                .await
                .expect("an answer to OPTIONS")
                .unwrap();
            let answer = String::from_utf8_lossy(&buf[..n]);
            assert!(answer.starts_with("SIP/2.0 "), "{answer}");
        }
    }

    /// A router that admits every call and is out of service while `draining` is set.
    struct Drainable(Arc<std::sync::atomic::AtomicBool>);

    impl CallRouter for Drainable {
        fn admit(&self, _trunk: &str, _called: &str) -> Admission {
            Admission::Admit
        }

        fn out_of_service(&self) -> Option<String> {
            self.0
                .load(std::sync::atomic::Ordering::Relaxed)
                .then(|| "shutting down".to_string())
        }
    }

    #[test]
    fn options_is_200_while_serving_and_503_with_the_reason_while_out_of_service() {
        let (status, headers) = options_answer(None);
        assert_eq!(status, StatusCode::OK);
        assert!(headers.iter().any(|h| h.to_string().starts_with("Allow:")));
        let (status, headers) = options_answer(Some("shutting down"));
        assert_eq!(status, StatusCode::ServiceUnavailable);
        let text: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
        assert!(
            text.contains(&"Warning: 399 callsmith \"shutting down\"".to_string()),
            "{text:?}"
        );
        assert!(
            text.iter().any(|h| h.starts_with("Retry-After:")),
            "{text:?}"
        );
    }

    #[tokio::test]
    async fn a_trunk_probing_a_draining_node_with_options_gets_503() {
        let probe = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let me = probe.local_addr().unwrap();
        let config = SipConfig {
            udp: Some("127.0.0.1:0".parse().unwrap()),
            tcp: None,
            trunks: vec![TrunkConfig::new("edge", me)],
            ..SipConfig::default()
        };
        let draining = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stack = SipStack::start(config, Drainable(draining.clone()))
            .await
            .expect("start");
        let addr = stack.udp_addr().expect("udp address");
        let ask = |n: u32| {
            format!(
                "OPTIONS sip:{addr} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch=z9hG4bKdrain{n}\r\n\
                 From: <sip:probe@{me}>;tag=1\r\nTo: <sip:{addr}>\r\nCall-ID: drain-{n}\r\n\
                 CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
            )
        };
        let mut answers = Vec::new();
        for n in 0..2 {
            if n == 1 {
                draining.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            probe.send_to(ask(n).as_bytes(), addr).await.unwrap();
            let mut buf = [0u8; 2048];
            let (len, _) = tokio::time::timeout(Duration::from_secs(5), probe.recv_from(&mut buf))
                .await
                .expect("an answer to OPTIONS")
                .unwrap();
            answers.push(String::from_utf8_lossy(&buf[..len]).to_string());
        }
        assert!(answers[0].starts_with("SIP/2.0 200"), "{}", answers[0]);
        assert!(answers[1].starts_with("SIP/2.0 503"), "{}", answers[1]);
        assert!(answers[1].contains("shutting down"), "{}", answers[1]);
    }

    #[tokio::test]
    async fn tcp_port_zero_gets_a_bound_free_port() {
        let config = SipConfig {
            udp: None,
            tcp: Some("127.0.0.1:0".parse().unwrap()),
            ..SipConfig::default()
        };
        let stack = SipStack::start(config, |_: &str, _: &str| true)
            .await
            .expect("start");
        let addr = stack.tcp_addr().expect("tcp address");
        assert_ne!(addr.port(), 0);
        // The listener comes up in the endpoint's task.
        let mut connected = false;
        for _ in 0..50 {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                connected = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(connected, "nothing listens on {addr}");
    }
}

//! The HTTP/1.1 server: hyper's connection driver with a deadline on every phase of a
//! connection in which it waits for the client, a cap on the connections open at once from
//! one source, and graceful shutdown.
//!
//! A connection is in one of three phases:
//! * idle: open with no request under way (just accepted, or its last response sent);
//!   closed after [`HttpSettings::idle_timeout`];
//! * reading a head: the first byte of a request has arrived but not the whole head;
//!   closed after [`HttpSettings::header_read_timeout`] from that byte;
//! * busy: a request is being handled or its response sent.
//!
//! While busy, the server waits for the client in two places, each timed:
//! * reading the request body ([`TimedBody`]): while the handler waits for body bytes, the
//!   wait may last at most [`HttpSettings::body_read_timeout`], and all waits of one body
//!   together at most that timeout plus one second per [`HttpSettings::body_min_rate`]
//!   bytes received, so a large upload at a steady pace is never cut off while a trickle is.
//!   A body that runs out answers 408 `request_timeout` (the handler is dropped) and the
//!   connection is closed;
//! * sending the response: a write that the client leaves blocked (it reads nothing) for
//!   [`HttpSettings::send_timeout`] closes the connection. A response that has nothing to
//!   send (a live event stream between events) is not timed.
//!
//! The handler's own work is not timed here: what it waits for (the database, outbound
//! requests, recognition nodes) carries its own timeouts, and streamed responses (the live
//! view's server-sent events) last as long as the call they follow.
//!
//! hyper's own `header_read_timeout` is not used: it starts when hyper begins waiting for
//! a head, which includes the idle wait between keep-alive requests, so it would close
//! idle connections after the header timeout and leave no room for a longer idle timeout.
//!
//! [`HttpSettings::max_connections_per_address`] connections may be open at once from one
//! source: an IPv4 address, or an IPv6 /64 (the block one host is commonly given). More are
//! closed as they are accepted.
//!
//! Each request carries `ConnectInfo<SocketAddr>` (the TCP peer), as axum's
//! `into_make_service_with_connect_info` would add.

use std::{
    collections::HashMap,
    convert::Infallible,
    future::Future,
    io,
    net::{IpAddr, Ipv6Addr, SocketAddr},
    pin::{Pin, pin},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use crate::{api::ApiError, settings::HttpSettings};
use axum::{
    Router,
    body::Body,
    extract::ConnectInfo,
    response::{IntoResponse, Response},
};
use http::{HeaderValue, StatusCode, header};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{Notify, watch},
    time::{Instant, Sleep},
};
use tower::ServiceExt;

/// Serves `app` on `listener` until `shutdown` resolves. Then it stops accepting, lets
/// in-flight requests finish (idle connections close at once) and returns when every
/// connection has closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (stop_tx, _) = watch::channel(false);
    // Each connection holds a receiver; `closed()` resolves when the last one is dropped.
    let (open_tx, open_rx) = watch::channel(());
    let sources = Sources::new(limits.max_connections_per_address);
    let mut shutdown = pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::error!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Some(slot) = sources.admit(peer.ip()) else {
            tracing::debug!(%peer, "closing a connection over the per-address cap");
            drop(stream);
            continue;
        };
        let conn = connection(
            stream,
            peer,
            app.clone(),
            limits,
            stop_tx.subscribe(),
            (open_rx.clone(), slot),
        );
        tokio::spawn(conn);
    }
    drop(listener);
    drop(open_rx);
    stop_tx.send_replace(true);
    open_tx.closed().await;
    Ok(())
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The source a connection counts against: an IPv4 address (IPv4-mapped IPv6 included), or
/// the /64 of an IPv6 address.
fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

/// Open connections per source, capped.
#[derive(Clone)]
struct Sources {
    cap: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Sources {
    fn new(cap: usize) -> Self {
        Sources {
            cap,
            open: Arc::default(),
        }
    }

    /// A slot for one more connection from `ip`, or None when its source is at the cap
    /// (a cap of 0 admits every connection).
    fn admit(&self, ip: IpAddr) -> Option<SourceSlot> {
        let source = source_of(ip);
        let mut open = self.open.lock();
        let n = open.entry(source).or_insert(0);
        if self.cap > 0 && *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(SourceSlot {
            sources: self.clone(),
            source,
        })
    }
}

/// One admitted connection; frees its place when dropped.
struct SourceSlot {
    sources: Sources,
    source: IpAddr,
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut open = self.sources.open.lock();
        if let Some(n) = open.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.source);
            }
        }
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    limits: HttpSettings,
    mut stop: watch::Receiver<bool>,
    _held: (watch::Receiver<()>, SourceSlot),
) {
    let activity = Arc::new(Activity::new(Instant::now()));
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let service = ConnService {
        app,
        peer,
        limits,
        activity: activity.clone(),
    };
    let mut conn = pin!(
        hyper::server::conn::http1::Builder::new()
            .header_read_timeout(None)
            .serve_connection(io, service)
    );
    let mut watchdog = pin!(activity.expired(limits));
    let mut stopping = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::trace!(error = %e, %peer, "connection ended");
                }
                return;
            }
            _ = &mut watchdog => {
                tracing::debug!(%peer, "closing a connection that kept the server waiting too long");
                return;
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Where a connection stands (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle { since: Instant },
    Head { since: Instant },
    Busy { requests: usize },
}

impl Phase {
    /// When the connection is to be closed unless its phase changes first.
    fn deadline(self, limits: HttpSettings) -> Option<Instant> {
        match self {
            Phase::Idle { since } => Some(since + limits.idle_timeout),
            Phase::Head { since } => Some(since + limits.header_read_timeout),
            Phase::Busy { .. } => None,
        }
    }

    fn on_read(self, now: Instant) -> Phase {
        match self {
            Phase::Idle { .. } => Phase::Head { since: now },
            other => other,
        }
    }

    fn on_request(self) -> Phase {
        match self {
            Phase::Busy { requests } => Phase::Busy {
                requests: requests + 1,
            },
            _ => Phase::Busy { requests: 1 },
        }
    }

    fn on_response_done(self, now: Instant) -> Phase {
        match self {
            Phase::Busy { requests } if requests > 1 => Phase::Busy {
                requests: requests - 1,
            },
            _ => Phase::Idle { since: now },
        }
    }
}

/// The phase of one connection and whether a write is blocked on the client, shared by its
/// socket, its service and its watchdog.
#[derive(Debug)]
struct Activity {
    state: Mutex<ConnState>,
    changed: Notify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ConnState {
    phase: Phase,
    /// Since when a write has found the socket full (the client reads nothing); None while
    /// writes go through.
    write_blocked_since: Option<Instant>,
}

impl ConnState {
    /// When the connection is to be closed unless something changes first.
    fn deadline(self, limits: HttpSettings) -> Option<Instant> {
        let send = self.write_blocked_since.map(|t| t + limits.send_timeout);
        match (self.phase.deadline(limits), send) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Activity {
    fn new(now: Instant) -> Self {
        Activity {
            state: Mutex::new(ConnState {
                phase: Phase::Idle { since: now },
                write_blocked_since: None,
            }),
            changed: Notify::new(),
        }
    }

    fn update(&self, f: impl FnOnce(ConnState) -> ConnState) {
        let mut state = self.state.lock();
        let next = f(*state);
        if next != *state {
            *state = next;
            self.changed.notify_one();
        }
    }

    fn update_phase(&self, f: impl FnOnce(Phase) -> Phase) {
        self.update(|s| ConnState {
            phase: f(s.phase),
            ..s
        });
    }

    /// Records the outcome of a write: blocked (from now, unless already) or through.
    fn on_write<T>(&self, polled: &Poll<T>) {
        let blocked = polled.is_pending();
        if blocked == self.state.lock().write_blocked_since.is_some() {
            return;
        }
        let now = Instant::now();
        self.update(|s| ConnState {
            write_blocked_since: blocked.then_some(now),
            ..s
        });
    }

    /// Resolves once the connection has overstayed its phase or a blocked write.
    async fn expired(&self, limits: HttpSettings) {
        loop {
            let deadline = self.state.lock().deadline(limits);
            match deadline {
                Some(d) if d <= Instant::now() => return,
                Some(d) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(d) => {}
                        _ = self.changed.notified() => {}
                    }
                }
                None => self.changed.notified().await,
            }
        }
    }
}

/// The socket, reporting the bytes it reads and the writes the client leaves blocked to the
/// connection's [`Activity`].
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let now = Instant::now();
            self.activity.update_phase(|p| p.on_read(now));
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.activity.on_write(&polled);
        polled
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.activity.on_write(&polled);
        polled
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.activity.on_write(&polled);
        polled
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The router as one connection's hyper service: adds the peer address, times the request
/// body, and marks the connection busy from a request's head until its response body is
/// dropped.
#[derive(Clone)]
struct ConnService {
    app: Router,
    peer: SocketAddr,
    limits: HttpSettings,
    activity: Arc<Activity>,
}

impl hyper::service::Service<http::Request<Incoming>> for ConnService {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, mut req: http::Request<Incoming>) -> Self::Future {
        req.extensions_mut().insert(ConnectInfo(self.peer));
        self.activity.update_phase(Phase::on_request);
        let busy = Busy(self.activity.clone());
        let app = self.app.clone();
        let expiry = Arc::new(BodyExpiry::default());
        let limits = self.limits;
        let body_expiry = expiry.clone();
        let req = req.map(|body| Body::new(TimedBody::new(body, limits, body_expiry)));
        Box::pin(async move {
            let response = tokio::select! {
                biased;
                response = app.oneshot(req) => response?,
                _ = expiry.notify.notified() => request_timeout(),
            };
            // The handler may have answered the body's error itself in the same poll.
            let response = if expiry.fired.load(Ordering::Acquire) {
                request_timeout()
            } else {
                response
            };
            Ok(response.map(|body| TrackedBody { body, _busy: busy }))
        })
    }
}

/// 408 `request_timeout`, closing the connection (the rest of the body is never read).
fn request_timeout() -> Response {
    let mut response = ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "request_timeout",
        "the request body did not arrive in time",
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Raised by a [`TimedBody`] that ran out of time, for its request's service future.
#[derive(Debug, Default)]
struct BodyExpiry {
    fired: AtomicBool,
    notify: Notify,
}

/// The error a timed-out body yields to its reader.
#[derive(Debug)]
struct BodyTimeout;

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimeout {}

/// How long one request body has kept its reader waiting for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct BodyClock {
    /// Body bytes received so far.
    received: u64,
    /// The waits that ended with bytes, together.
    waited: Duration,
    /// Since when the reader has been waiting, if it is.
    waiting_since: Option<Instant>,
}

impl BodyClock {
    /// The reader found no bytes at `now`: when its wait runs out. A wait lasts at most
    /// `body_read_timeout`, and all waits together at most `body_read_timeout` plus one
    /// second per `body_min_rate` bytes received.
    fn on_pending(&mut self, now: Instant, limits: HttpSettings) -> Instant {
        let since = *self.waiting_since.get_or_insert(now);
        let gap = since + limits.body_read_timeout;
        if limits.body_min_rate == 0 {
            return gap;
        }
        let earned = Duration::from_secs_f64(self.received as f64 / limits.body_min_rate as f64);
        let total = (limits.body_read_timeout + earned).saturating_sub(self.waited);
        gap.min(since + total)
    }

    /// `n` bytes arrived at `now`.
    fn on_data(&mut self, n: usize, now: Instant) {
        if let Some(since) = self.waiting_since.take() {
            self.waited += now.saturating_duration_since(since);
        }
        self.received += n as u64;
    }
}

/// A request body that fails with [`BodyTimeout`] (and raises its [`BodyExpiry`]) when the
/// client keeps its reader waiting past the [`BodyClock`]'s deadline.
struct TimedBody {
    inner: Incoming,
    limits: HttpSettings,
    clock: BodyClock,
    /// Armed at the first wait (most bodies are read without one).
    timer: Option<Pin<Box<Sleep>>>,
    expiry: Arc<BodyExpiry>,
    timed_out: bool,
}

impl TimedBody {
    fn new(inner: Incoming, limits: HttpSettings, expiry: Arc<BodyExpiry>) -> Self {
        TimedBody {
            inner,
            limits,
            clock: BodyClock::default(),
            timer: None,
            expiry,
            timed_out: false,
        }
    }
}

impl hyper::body::Body for TimedBody {
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if this.timed_out {
            return Poll::Ready(Some(Err(BodyTimeout.into())));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map_or(0, |d| d.len());
                this.clock.on_data(n, Instant::now());
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let deadline = this.clock.on_pending(Instant::now(), this.limits);
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if timer.deadline() != deadline {
                    timer.as_mut().reset(deadline);
                }
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.timed_out = true;
                this.expiry.fired.store(true, Ordering::Release);
                this.expiry.notify.notify_one();
                Poll::Ready(Some(Err(BodyTimeout.into())))
            }
        }
    }
    fn is_end_stream(&self) -> bool {
        !self.timed_out && self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Ends one request's busy time when dropped (response sent, or the request abandoned).
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let now = Instant::now();
        self.0.update_phase(|p| p.on_response_done(now));
    }
}

/// A response body that holds its request's [`Busy`] until hyper drops it.
struct TrackedBody {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for TrackedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests;

//! The HTTP/1.1 server: hyper's connection driver with a per-connection watchdog that
//! bounds how long a client may hold a connection without using it, and graceful shutdown.
//!
//! A connection is in one of three phases:
//! * idle: open with no request under way (just accepted, or its last response sent);
//!   closed after [`HttpSettings::idle_timeout`];
//! * reading a head: the first byte of a request has arrived but not the whole head;
//!   closed after [`HttpSettings::header_read_timeout`] from that byte;
//! * busy: a request is being handled or its response sent; not timed here.
//!
//! hyper's own `header_read_timeout` is not used: it starts when hyper begins waiting for
//! a head, which includes the idle wait between keep-alive requests, so it would close
//! idle connections after the header timeout and leave no room for a longer idle timeout.
//!
//! Each request carries `ConnectInfo<SocketAddr>` (the TCP peer), as axum's
//! `into_make_service_with_connect_info` would add.

use std::{
    convert::Infallible,
    future::Future,
    io,
    net::SocketAddr,
    pin::{Pin, pin},
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use crate::settings::HttpSettings;
use axum::{Router, body::Body, extract::ConnectInfo, response::Response};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{Notify, watch},
    time::Instant,
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
        let conn = connection(
            stream,
            peer,
            app.clone(),
            limits,
            stop_tx.subscribe(),
            open_rx.clone(),
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

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    limits: HttpSettings,
    mut stop: watch::Receiver<bool>,
    _open: watch::Receiver<()>,
) {
    let activity = Arc::new(Activity::new(Instant::now()));
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let service = ConnService {
        app,
        peer,
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
                tracing::debug!(%peer, "closing a connection that sent nothing in time");
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

/// The phase of one connection, shared by its reader, its service and its watchdog.
#[derive(Debug)]
struct Activity {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Activity {
    fn new(now: Instant) -> Self {
        Activity {
            phase: Mutex::new(Phase::Idle { since: now }),
            changed: Notify::new(),
        }
    }

    fn update(&self, f: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock();
        let next = f(*phase);
        if next != *phase {
            *phase = next;
            self.changed.notify_one();
        }
    }

    /// Resolves once the connection has overstayed its phase.
    async fn expired(&self, limits: HttpSettings) {
        loop {
            let deadline = self.phase.lock().deadline(limits);
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

/// The socket, reporting the bytes it reads to the connection's [`Activity`].
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
            self.activity.update(|p| p.on_read(now));
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
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The router as one connection's hyper service: adds the peer address and marks the
/// connection busy from a request's head until its response body is dropped.
#[derive(Clone)]
struct ConnService {
    app: Router,
    peer: SocketAddr,
    activity: Arc<Activity>,
}

impl hyper::service::Service<http::Request<Incoming>> for ConnService {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, mut req: http::Request<Incoming>) -> Self::Future {
        req.extensions_mut().insert(ConnectInfo(self.peer));
        self.activity.update(Phase::on_request);
        let busy = Busy(self.activity.clone());
        let app = self.app.clone();
        Box::pin(async move {
            let response = app.oneshot(req.map(Body::new)).await?;
            Ok(response.map(|body| TrackedBody { body, _busy: busy }))
        })
    }
}

/// Ends one request's busy time when dropped (response sent, or the request abandoned).
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let now = Instant::now();
        self.0.update(|p| p.on_response_done(now));
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
mod tests {
    use super::*;

    const LIMITS: HttpSettings = HttpSettings {
        header_read_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
    };

    #[test]
    fn phases_and_their_deadlines() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let idle = Phase::Idle { since: t0 };
        assert_eq!(idle.deadline(LIMITS), Some(t0 + 60 * s));
        // The first byte starts the head clock; later bytes of the head do not reset it.
        let head = idle.on_read(t0 + 5 * s);
        assert_eq!(head.deadline(LIMITS), Some(t0 + 15 * s));
        assert_eq!(head.on_read(t0 + 9 * s), head);
        // A request under way is never timed out, however long its body or handler takes.
        let busy = head.on_request();
        assert_eq!(busy.deadline(LIMITS), None);
        assert_eq!(busy.on_read(t0 + 100 * s), busy);
        // Pipelined requests: idle again only when the last response is done.
        let two = busy.on_request();
        assert_eq!(two.on_response_done(t0 + 200 * s), busy);
        let idle_again = busy.on_response_done(t0 + 300 * s);
        assert_eq!(idle_again.deadline(LIMITS), Some(t0 + 360 * s));
    }
}

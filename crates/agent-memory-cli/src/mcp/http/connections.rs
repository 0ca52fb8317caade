//! The connections: accepting them (at most `--max-connections` open at once), TLS, HTTP/1 and
//! HTTP/2, and closing the ones that hold a socket without doing anything for a user.
//!
//! - **The cap.** A connection takes one of `--max-connections` slots before it is accepted and
//!   gives it back when it closes. At the cap the server accepts nothing more: new connections
//!   wait in the kernel's listen queue (and time out there, at the client, if no slot frees),
//!   so the process never runs out of descriptors for its store or its own files.
//! - **Idle connections are closed** after `--idle-timeout`, HTTP/1 and HTTP/2 alike. The clock
//!   runs while no request is in flight and restarts only when an authenticated request ends:
//!   requests that fail authentication, `/healthz` and the OAuth metadata never keep a
//!   connection open, so holding slots needs a valid credential, and a valid credential is
//!   rate limited. A connection that has sent no request within [`HEADER_TIMEOUT`] (or the idle
//!   timeout, when that is shorter) is closed too, as is a TLS handshake that takes longer.
//!   Closing is graceful (HTTP/2 `GOAWAY`; HTTP/1 closes between requests); a connection that
//!   still has not closed `grace` later is dropped.
//! - **HTTP/2** is spoken over TLS when the client asks for it with ALPN (`h2`), and in
//!   cleartext (h2c, prior knowledge) only with `--h2c`: without it a plain listener speaks
//!   HTTP/1.1 only. HTTP/2 connections are pinged when quiet for [`PING_EVERY`] and closed when
//!   a ping is not answered within [`PING_TIMEOUT`] (a peer that vanished), and carry at most
//!   [`MAX_STREAMS`] requests at once.
//! - **Shutdown.** When `shutdown` is cancelled the listener is closed, every connection is
//!   closed gracefully, and [`serve`] returns once they are all gone, or after `grace`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::auth::Authenticated;

/// How long a client may take for its TLS handshake, its request headers, and its
/// connection's first request.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// An HTTP/2 connection quiet for this long is pinged.
pub const PING_EVERY: Duration = Duration::from_secs(20);
/// An HTTP/2 ping not answered within this closes the connection.
pub const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests one HTTP/2 connection may have open at once.
pub const MAX_STREAMS: u32 = 32;

/// How connections are accepted and kept.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a connection may stay without an authenticated request.
    pub idle_timeout: Duration,
    /// Whether a plain listener speaks HTTP/2 (prior knowledge).
    pub h2c: bool,
    /// How long closing connections get to finish their requests.
    pub grace: Duration,
}

/// Serves `app` on `listener` (with TLS when `tls` is given) until `shutdown` is cancelled,
/// then closes every connection gracefully.
///
/// # Errors
/// When the listener cannot be handed to the runtime.
pub async fn serve(
    listener: std::net::TcpListener,
    tls: Option<Arc<ServerConfig>>,
    app: Router,
    settings: Settings,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let slots = Arc::new(Semaphore::new(settings.max_connections));
    let builder = Arc::new(builder(tls.is_some() || settings.h2c));
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let slot = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            slot = Arc::clone(&slots).acquire_owned() => slot,
        };
        let Ok(slot) = slot else { break };
        let (tcp, peer) = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors, or a connection reset before it was accepted: wait a
                    // moment rather than spin.
                    tracing::warn!(error = %err, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let connection = Connection {
            peer,
            builder: Arc::clone(&builder),
            app: app.clone(),
            settings,
            shutdown: shutdown.clone(),
        };
        let tls = tls.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            match tls {
                None => connection.run(tcp).await,
                Some(acceptor) => {
                    let handshake = tokio::select! {
                        () = connection.shutdown.cancelled() => return,
                        handshake = tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(tcp)) => handshake,
                    };
                    if let Ok(Ok(stream)) = handshake {
                        connection.run(stream).await;
                    }
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    // Every connection gives its slot back when it is gone.
    let all = u32::try_from(settings.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(settings.grace + Duration::from_secs(1), slots.acquire_many(all))
        .await;
    Ok(())
}

/// HTTP/1.1, and HTTP/2 when `http2` (TLS, or `--h2c`).
fn builder(http2: bool) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(PING_EVERY)
        .keep_alive_timeout(PING_TIMEOUT)
        .max_concurrent_streams(MAX_STREAMS);
    if http2 {
        builder
    } else {
        builder.http1_only()
    }
}

/// One accepted connection.
struct Connection {
    peer: SocketAddr,
    builder: Arc<Builder<TokioExecutor>>,
    app: Router,
    settings: Settings,
    shutdown: CancellationToken,
}

impl Connection {
    async fn run<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (activity, mut watch) = watch::channel(Activity::new());
        let activity = Arc::new(activity);
        let Connection { peer, builder, app, settings, shutdown } = self;
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let busy = Busy::begin(Arc::clone(&activity));
            let call = app.clone().oneshot(request.map(Body::new));
            async move {
                let response: Response<Body> = call.await?;
                busy.end(response.extensions().get::<Authenticated>().is_some());
                Ok::<_, Infallible>(response)
            }
        });
        let connection = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(connection);
        let first = HEADER_TIMEOUT.min(settings.idle_timeout);
        let idle = idle(&mut watch, first, settings.idle_timeout);
        tokio::pin!(idle);
        tokio::select! {
            _ = connection.as_mut() => return,
            () = shutdown.cancelled() => {}
            () = &mut idle => {}
        }
        connection.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(settings.grace, connection).await;
    }
}

/// What a connection is doing.
#[derive(Debug, Clone, Copy)]
struct Activity {
    /// Requests in flight.
    in_flight: usize,
    /// When the connection was accepted or its last authenticated request ended.
    since: Instant,
    /// Whether it has served an authenticated request.
    served: bool,
}

impl Activity {
    fn new() -> Self {
        Self { in_flight: 0, since: Instant::now(), served: false }
    }
}

/// One request in flight on a connection.
struct Busy {
    activity: Option<Arc<watch::Sender<Activity>>>,
}

impl Busy {
    fn begin(activity: Arc<watch::Sender<Activity>>) -> Self {
        activity.send_modify(|now| now.in_flight += 1);
        Self { activity: Some(activity) }
    }

    /// The request was answered; `authenticated` restarts the idle clock.
    fn end(mut self, authenticated: bool) {
        if let Some(activity) = self.activity.take() {
            activity.send_modify(|now| {
                now.in_flight -= 1;
                if authenticated {
                    now.since = Instant::now();
                    now.served = true;
                }
            });
        }
    }
}

impl Drop for Busy {
    /// A request dropped unanswered (the client went away) ends without restarting the clock.
    fn drop(&mut self) {
        if let Some(activity) = self.activity.take() {
            activity.send_modify(|now| now.in_flight -= 1);
        }
    }
}

/// Resolves when the connection has had no request in flight for `timeout` since its last
/// authenticated request (`first`, before it had one).
async fn idle(watch: &mut watch::Receiver<Activity>, first: Duration, timeout: Duration) {
    loop {
        let now = *watch.borrow_and_update();
        let deadline =
            (now.in_flight == 0).then(|| now.since + if now.served { timeout } else { first });
        match deadline {
            None => {
                if watch.changed().await.is_err() {
                    return;
                }
            }
            Some(deadline) => tokio::select! {
                () = tokio::time::sleep_until(deadline) => return,
                changed = watch.changed() => if changed.is_err() { return },
            },
        }
    }
}

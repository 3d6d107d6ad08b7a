//! The HTTP listener of `culprit serve`: accepts connections and serves HTTP/1.1 on them
//! (hyper), with the limits that keep the port answering whoever else is connected.
//!
//! * **Header-read timeout** (`server.header_read_timeout`, 10 s): a connection that has
//!   not sent a whole request head this long after it opened, or after the first byte of
//!   its next request, is closed. A slowloris client trickling one header byte every few
//!   seconds holds its slot for that long, not forever.
//! * **Idle timeout** (`server.idle_timeout`, 75 s): a kept-alive connection that sends
//!   nothing this long after an answer is closed.
//! * **Connection cap** (`server.max_connections`, 1,024, lowered below the process' file
//!   limit, see [`connection_cap`]): when it is reached, a new connection closes the
//!   **oldest connection with no request in flight** (idle, or still sending its head) and
//!   takes its place; only when every connection has a request in flight is the new one
//!   refused (closed at once). A client that sends its request at once (Alertmanager, a
//!   probe, a browser) is in flight within a round trip, so connections held open by
//!   someone else cannot keep it out: each new one pushes the oldest idle one out. A per-IP
//!   cap would not do this job: behind a load balancer or an ingress every client has the
//!   balancer's few addresses, and the cap would throttle Alertmanager with the attacker.
//! * A request head is at most [`MAX_HEADER_BYTES`] and the read buffer at most
//!   [`MAX_READ_BUFFER`], so an idle or trickling connection costs a few KiB, never more.
//! * Accept errors that are the process' (`EMFILE`, `ENFILE`, `ENOBUFS`) close the oldest
//!   idle connection and pause [`ACCEPT_ERROR_PAUSE`]: never a busy loop, logged at most
//!   once per [`ACCEPT_ERROR_LOG_EVERY`].
//!
//! A request in flight (its head read, its answer not yet made) is bounded by
//! `server.request_timeout` in the router's guard, not here. On shutdown the listener
//! closes, idle connections close, and requests in flight finish.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tower::ServiceExt;

/// The largest request head (request line and headers) read, bytes; a larger one gets
/// 431. nginx's default `large_client_header_buffers 4 8k` takes 32 KiB at most; an
/// Alertmanager webhook's head is under 1 KiB.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// The most a connection's read buffer grows to, bytes (hyper's default is about 400 KiB;
/// hyper's minimum is 8 KiB). A body is read through it in pieces of at most this.
pub const MAX_READ_BUFFER: usize = 64 * 1024;

/// How long the accept loop pauses after an error of the process (out of file
/// descriptors or memory) before it tries again: long enough not to spin, short enough
/// that `/healthz` is answered as soon as a descriptor is free.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// Accept errors are logged at most this often (with how many there were meanwhile).
pub const ACCEPT_ERROR_LOG_EVERY: Duration = Duration::from_secs(10);

/// File descriptors kept free for everything but incoming connections: standard streams,
/// the runtime's epoll and event descriptors, SQLite's database, `-wal`, `-shm` and lock
/// files, the log, the outgoing HTTP pools (Prometheus, Flink REST, each destination's
/// `notify.concurrency` connections). PostgreSQL's pool (`store.pool_size`) comes on top.
pub const FD_RESERVE: u64 = 128;

/// Connections told to close (pushed out by newer ones) that may still hold their
/// descriptor: the accept loop waits while this many are closing beyond the cap, so that a
/// client reconnecting as fast as it is pushed out cannot take the descriptors of
/// [`FD_RESERVE`] (without it, 2,000 reconnecting slowloris clients under `ulimit -n 1024`
/// drove the process to `EMFILE`).
pub const MAX_CLOSING: usize = 32;

/// The fewest connections culprit serves even under a tiny file limit (Alertmanager,
/// a probe and a scrape at once, with room to spare).
pub const MIN_CONNECTIONS: usize = 16;

/// The limits of one listener (`[server]`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

/// Raises the soft limit of open files to the hard limit where the system allows it,
/// and returns the soft limit in force (`None` when the system has no limit or cannot
/// say).
pub fn raise_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        if limit.current != limit.maximum {
            let raised = Rlimit { current: limit.maximum, maximum: limit.maximum };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => tracing::info!(from = ?limit.current, to = ?limit.maximum, "raised the open-file limit"),
                Err(e) => tracing::warn!(error = %e, soft = ?limit.current, "cannot raise the open-file limit"),
            }
        }
        getrlimit(Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The connection cap in force: `configured`, lowered to the file limit minus `reserve`
/// (but never below [`MIN_CONNECTIONS`]); with the reason when it was lowered.
pub fn connection_cap(configured: usize, file_limit: Option<u64>, reserve: u64) -> (usize, Option<String>) {
    let Some(limit) = file_limit else { return (configured, None) };
    let room = usize::try_from(limit.saturating_sub(reserve)).unwrap_or(usize::MAX).max(MIN_CONNECTIONS);
    if room >= configured {
        return (configured, None);
    }
    let why = format!(
        "server.max_connections {configured} is more than the open-file limit {limit} leaves (minus {reserve} kept for the store, outgoing HTTP and files): at most {room} connections are served; raise the limit (LimitNOFILE=, ulimit -n) to serve more"
    );
    (room, Some(why))
}

/// Time in whole milliseconds since the listener started, for the deadlines.
#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn now(self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
    fn at(self, ms: u64) -> Instant {
        self.0 + Duration::from_millis(ms)
    }
}

/// No deadline: a request is in flight.
const NO_DEADLINE: u64 = u64::MAX;

/// One connection's state, shared by its task, its I/O and its requests.
struct Conn {
    /// Requests whose head was read and whose answer is not made yet.
    busy: AtomicU32,
    /// Whether bytes of a request head arrived (or the connection is new) since the last
    /// answer: the header-read timeout runs, else the idle timeout.
    reading: AtomicBool,
    /// When the connection is closed unless a request head arrives (ms on [`Clock`]).
    deadline: AtomicU64,
    /// Told to close (pushed out by a newer connection).
    evicted: AtomicBool,
    /// Wakes the task: the deadline moved, or the connection is evicted.
    wake: Notify,
}

impl Conn {
    fn idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    /// A request head was read: no timeout of this module until its answer is made.
    fn begin(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.reading.store(false, Ordering::Release);
        self.deadline.store(NO_DEADLINE, Ordering::Release);
    }

    /// The answer is made: the idle timeout runs.
    fn end(&self, clock: Clock, limits: &Limits) {
        if self.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.deadline.store(clock.now() + limits.idle_timeout.as_millis() as u64, Ordering::Release);
            self.wake.notify_one();
        }
    }

    /// Bytes arrived: when idle, the first byte of a new head starts its timeout.
    fn bytes_arrived(&self, clock: Clock, limits: &Limits) {
        if self.idle() && !self.reading.swap(true, Ordering::AcqRel) {
            self.deadline.store(clock.now() + limits.header_read_timeout.as_millis() as u64, Ordering::Release);
            self.wake.notify_one();
        }
    }
}

/// The open connections, oldest first.
struct Registry {
    clock: Clock,
    limits: Limits,
    open: Mutex<Open>,
    /// A connection ended (wakes the accept loop waiting for [`Registry::room`]).
    removed: Notify,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    conns: BTreeMap<u64, Arc<Conn>>,
    /// Of `conns`, those told to close that have not closed yet.
    evicting: usize,
}

impl Registry {
    /// Makes room for one more connection and registers it; `None` when it must be
    /// refused (every connection has a request in flight).
    fn admit(&self) -> Option<(u64, Arc<Conn>)> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.conns.len() - open.evicting >= self.limits.max_connections && !Self::evict_oldest_idle(&mut open) {
            return None;
        }
        let id = open.next_id;
        open.next_id += 1;
        let deadline = self.clock.now() + self.limits.header_read_timeout.as_millis() as u64;
        let conn = Arc::new(Conn {
            busy: AtomicU32::new(0),
            reading: AtomicBool::new(true),
            deadline: AtomicU64::new(deadline),
            evicted: AtomicBool::new(false),
            wake: Notify::new(),
        });
        open.conns.insert(id, conn.clone());
        Some((id, conn))
    }

    /// Tells the oldest connection with no request in flight to close; false when there
    /// is none.
    fn evict_oldest_idle(open: &mut Open) -> bool {
        let Some(victim) = open.conns.values().find(|c| c.idle() && !c.evicted.load(Ordering::Acquire)) else {
            return false;
        };
        victim.evicted.store(true, Ordering::Release);
        victim.wake.notify_one();
        open.evicting += 1;
        true
    }

    /// Waits until fewer than the cap plus [`MAX_CLOSING`] connections hold a descriptor.
    async fn room(&self) {
        loop {
            {
                let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
                if open.conns.len() < self.limits.max_connections + MAX_CLOSING {
                    return;
                }
            }
            self.removed.notified().await;
        }
    }

    fn evict_one(&self) -> bool {
        Self::evict_oldest_idle(&mut self.open.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn remove(&self, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = open.conns.remove(&id)
            && c.evicted.load(Ordering::Acquire)
        {
            open.evicting -= 1;
        }
        drop(open);
        self.removed.notify_one();
    }
}

/// The socket, noting when bytes arrive.
struct Watched {
    stream: TcpStream,
    conn: Arc<Conn>,
    clock: Clock,
    limits: Limits,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let r = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.conn.bytes_arrived(this.clock, &this.limits);
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Ends a request's flight when its answer is made or the request is dropped.
struct InFlight {
    conn: Arc<Conn>,
    clock: Clock,
    limits: Limits,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conn.end(self.clock, &self.limits);
    }
}

/// Accept errors that concern one connection only (the client gave up before it was
/// accepted), not the process.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// Counts accept errors and refusals and logs them at most once per
/// [`ACCEPT_ERROR_LOG_EVERY`].
struct Throttled {
    what: &'static str,
    last: Option<Instant>,
    since: u64,
}

impl Throttled {
    fn new(what: &'static str) -> Self {
        Throttled { what, last: None, since: 0 }
    }
    fn note(&mut self, detail: &dyn std::fmt::Display) {
        self.since += 1;
        if self.last.is_none_or(|t| t.elapsed() >= ACCEPT_ERROR_LOG_EVERY) {
            tracing::warn!(count = self.since, detail = %detail, "{}", self.what);
            self.last = Some(Instant::now());
            self.since = 0;
        }
    }
}

/// Serves `app` on `listener` until `stop` turns true, then closes the listener and waits
/// for the connections' requests in flight.
pub async fn serve<S>(listener: TcpListener, app: S, limits: Limits, mut stop: watch::Receiver<bool>)
where
    S: tower::Service<axum::extract::Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    let registry =
        Arc::new(Registry { clock: Clock(Instant::now()), limits, open: Mutex::default(), removed: Notify::new() });
    // Every connection task holds a receiver; `closed()` is when the last one ended.
    let (done_tx, done_rx) = watch::channel(());
    let mut accept_errors = Throttled::new(
        "cannot accept a connection (out of file descriptors or memory?); closed the oldest idle connection",
    );
    let mut refused =
        Throttled::new("refused a connection: server.max_connections connections all have a request in flight");
    loop {
        let accepted = tokio::select! {
            a = async {
                registry.room().await;
                listener.accept().await
            } => a,
            _ = stop.wait_for(|s| *s) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                registry.evict_one();
                accept_errors.note(&e);
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        let Some((id, conn)) = registry.admit() else {
            refused.note(&limits.max_connections);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let task = Connection { registry: registry.clone(), id, conn, stop: stop.clone(), done: done_rx.clone() };
        tokio::spawn(task.run(stream, app.clone()));
    }
    drop(listener);
    drop(done_rx);
    done_tx.closed().await;
}

/// One connection's task.
struct Connection {
    registry: Arc<Registry>,
    id: u64,
    conn: Arc<Conn>,
    stop: watch::Receiver<bool>,
    /// Dropped when the task ends (see [`serve`]).
    done: watch::Receiver<()>,
}

impl Connection {
    async fn run<S>(mut self, stream: TcpStream, app: S)
    where
        S: tower::Service<axum::extract::Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send,
    {
        let (clock, limits) = (self.registry.clock, self.registry.limits);
        if !self.first_byte(&stream).await {
            drop(stream);
            self.registry.remove(self.id);
            return;
        }
        // The peer's address, as axum's `into_make_service_with_connect_info` gives it: the
        // sender of a webhook without an externalURL.
        let peer = stream.peer_addr().ok().map(axum::extract::ConnectInfo);
        let io = hyper_util::rt::TokioIo::new(Watched { stream, conn: self.conn.clone(), clock, limits });
        let conn = self.conn.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            conn.begin();
            let flight = InFlight { conn: conn.clone(), clock, limits };
            let mut req = req.map(Body::new);
            if let Some(peer) = peer {
                req.extensions_mut().insert(peer);
            }
            let answer = app.clone().oneshot(req);
            async move {
                let r = answer.await;
                drop(flight);
                r
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        // The timeouts are this module's (hyper's header timeout also ends idle keep-alive).
        builder.header_read_timeout(None).max_buf_size(MAX_READ_BUFFER).max_header_size(MAX_HEADER_BYTES);
        let mut http = Box::pin(builder.serve_connection(io, service));
        let mut stopping = false;
        loop {
            let deadline = self.conn.deadline.load(Ordering::Acquire);
            let sleep = async {
                if deadline == NO_DEADLINE {
                    std::future::pending::<()>().await
                }
                tokio::time::sleep_until(clock.at(deadline)).await
            };
            tokio::select! {
                r = http.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended");
                    }
                    break;
                }
                _ = self.conn.wake.notified() => {
                    if self.conn.evicted.load(Ordering::Acquire) {
                        if self.conn.idle() {
                            tracing::debug!("closed the oldest idle connection for a new one (server.max_connections)");
                            break;
                        }
                        // A request head came in after it was chosen: its answer goes out
                        // first, then the connection closes (never cut in flight).
                        if !stopping {
                            stopping = true;
                            http.as_mut().graceful_shutdown();
                        }
                    }
                }
                _ = sleep => {
                    if self.conn.idle() && self.conn.deadline.load(Ordering::Acquire) <= clock.now() {
                        tracing::debug!(reading = self.conn.reading.load(Ordering::Acquire), "connection timed out");
                        break;
                    }
                }
                _ = self.stop.wait_for(|s| *s), if !stopping => {
                    stopping = true;
                    http.as_mut().graceful_shutdown();
                }
            }
        }
        // The socket closes before the connection leaves the count (see `Registry::room`).
        drop(http);
        self.registry.remove(self.id);
        drop(self.done);
    }
}

impl Connection {
    /// Waits until the client sends its first byte (or closes), without hyper: hyper
    /// allocates its 8 KiB read buffer at its first read, so a connection that sends nothing
    /// costs only its socket and this task. False when the connection is to close first
    /// (header-read timeout, pushed out, shutdown).
    async fn first_byte(&mut self, stream: &TcpStream) -> bool {
        let clock = self.registry.clock;
        let deadline = clock.at(self.conn.deadline.load(Ordering::Acquire));
        loop {
            tokio::select! {
                r = stream.readable() => return r.is_ok(),
                _ = self.conn.wake.notified() => {
                    if self.conn.evicted.load(Ordering::Acquire) {
                        return false;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return false,
                _ = self.stop.wait_for(|s| *s) => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_lowered_below_the_file_limit_minus_the_reserve() {
        // 1,024 (systemd's default soft limit) − 128 reserved = 896 connections.
        let (cap, why) = connection_cap(1024, Some(1024), FD_RESERVE);
        assert_eq!(cap, 896);
        assert!(why.unwrap().contains("at most 896 connections"));
        // 1,048,576 (a container's usual limit) leaves the configured cap alone.
        assert_eq!(connection_cap(1024, Some(1 << 20), FD_RESERVE), (1024, None));
        assert_eq!(connection_cap(1024, None, FD_RESERVE), (1024, None));
        // A tiny limit still serves a few.
        assert_eq!(connection_cap(1024, Some(100), FD_RESERVE).0, MIN_CONNECTIONS);
    }

    fn registry(max_connections: usize) -> Registry {
        let limits = Limits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections,
        };
        Registry { clock: Clock(Instant::now()), limits, open: Mutex::default(), removed: Notify::new() }
    }

    #[tokio::test]
    async fn a_full_registry_pushes_out_its_oldest_idle_connection_and_refuses_only_when_all_are_busy() {
        let r = registry(2);
        let (a, ca) = r.admit().unwrap();
        let (_b, cb) = r.admit().unwrap();
        // Full: the third pushes out the oldest, `a`.
        let (_c, cc) = r.admit().unwrap();
        assert!(ca.evicted.load(Ordering::Acquire) && !cb.evicted.load(Ordering::Acquire));
        r.remove(a);
        // `b` and `c` have requests in flight: nothing to push out, the fourth is refused.
        cb.begin();
        cc.begin();
        assert!(r.admit().is_none());
        // Once `b`'s answer is made it is idle again and can be pushed out.
        cb.end(r.clock, &r.limits);
        assert!(r.admit().is_some());
        assert!(cb.evicted.load(Ordering::Acquire) && !cc.evicted.load(Ordering::Acquire));
    }

    #[tokio::test]
    async fn the_accept_loop_waits_while_pushed_out_connections_still_hold_their_descriptors() {
        let r = registry(2);
        // 2 + 32 connections, none ever closing: the last 32 each pushed one out.
        let ids: Vec<u64> = (0..2 + MAX_CLOSING).map(|_| r.admit().unwrap().0).collect();
        assert_eq!(r.open.lock().unwrap().evicting, MAX_CLOSING);
        let waits = tokio::time::timeout(Duration::from_millis(50), r.room()).await;
        assert!(waits.is_err(), "accepted while 32 pushed-out connections still hold a descriptor");
        // One of them closes: room for one more.
        r.remove(ids[0]);
        tokio::time::timeout(Duration::from_millis(50), r.room()).await.expect("room after a close");
    }
}

//! The operator's web console (docs/console.md): one page, served by the
//! bridge, showing what the robot sees and does and letting its operator
//! approve, deny and stop.
//!
//! What the page is shown is read, never asked for: pose and velocity
//! from the sensor port, the governor's restrictions from the base
//! driver, sessions, lease and pending approvals from the core, the stream
//! of calls and events from the tap. What the operator does goes through
//! the core as an admin session of the console's own (an in-process
//! connection, like any agent's): approvals are decided, refused and
//! audited there, and STOP is the `stop` tool.
//!
//! Nothing here can slow the robot's control: the tap is observed only
//! while a page is open, each page has a bounded queue that loses its
//! oldest updates when the page is slow, and requests are rate-limited.
mod feed;
mod login;
mod page;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::Stream;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, Notify};
use tokio::task::JoinHandle;

use crate::ai_control::session::{CallOutcome, Session};
use crate::config::ConsoleConfig;
use crate::perception::{encode, EncodeOptions, OutputFormat};
use crate::protocol::auth::{Scope, Tokens};
use crate::protocol::ratelimit::RateLimiter;
use crate::robot::base_driver::BaseDriver;
use crate::robot::{Sensor, SensorPort};
use crate::server::slots::ConnectionCaps;
use crate::server::Bridge;
pub use feed::{summarize, AgentFrame, Feed};
use login::{Login, Logins, COOKIE};

/// The live picture's JPEG quality: the operator sees, the agent decides.
const CAMERA_JPEG_QUALITY: u8 = 70;
/// Longest wait for one of the console's calls to the core.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The reason `stop` is given from the page.
const STOP_REASON: &str = "STOP pressed on the operator's console";
/// The request header every action must carry: a page of another origin
/// cannot set it without the browser asking first (CORS), so a forged
/// form post is refused even with the cookie.
const ACTION_HEADER: &str = "x-aicc-console";

/// Why the console cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleRefused {
    #[error("console.enabled needs an admin token: set one of security.tokens with scope admin (the console is never served without one)")]
    NoAdminToken,
    #[error("refusing to serve the console on {0}: not a loopback address. Set security.allow_remote: true and TLS (security.tls_cert_file, tls_key_file)")]
    RemoteNotAllowed(SocketAddr),
    #[error("refusing to serve the console on {0} without TLS: the admin token and the camera would cross the network in plain text (set security.tls_cert_file and tls_key_file, or security.allow_plaintext_remote)")]
    RemoteWithoutTls(SocketAddr),
}

/// Refuses a console without an admin token, or remote without TLS (`tls`:
/// TLS is configured, or plain text explicitly allowed).
pub fn check(
    address: SocketAddr,
    allow_remote: bool,
    tls: bool,
    tokens: &Tokens,
) -> Result<(), ConsoleRefused> {
    if !tokens.grants(Scope::Admin) {
        return Err(ConsoleRefused::NoAdminToken);
    }
    if !address.ip().is_loopback() {
        if !allow_remote {
            return Err(ConsoleRefused::RemoteNotAllowed(address));
        }
        if !tls {
            return Err(ConsoleRefused::RemoteWithoutTls(address));
        }
    }
    Ok(())
}

/// What the console reads and acts through.
pub struct Parts {
    pub bridge: Arc<Bridge>,
    pub sensors: Arc<dyn SensorPort>,
    pub base: Arc<BaseDriver>,
    pub tokens: Tokens,
    pub settings: ConsoleConfig,
    pub tls: Option<tokio_rustls::TlsAcceptor>,
}

/// The latest live picture.
#[derive(Clone)]
struct Picture {
    jpeg: Arc<Vec<u8>>,
    /// 1, 2, ...: one more for each new frame shown.
    seq: u64,
    stamp_s: f64,
    /// When the frame shown was received (a newer one replaces it).
    received: Instant,
}

/// The source address of a request (set per connection by the accept loop).
#[derive(Debug, Clone, Copy)]
struct Peer(SocketAddr);

struct Console {
    parts: Parts,
    logins: Mutex<Logins>,
    session: Session,
    pages: AtomicUsize,
    page_opened: Notify,
    updates: broadcast::Sender<Arc<(&'static str, String)>>,
    camera: Mutex<Option<Picture>>,
    agent_frame: Mutex<Option<AgentFrame>>,
    requests: Mutex<RateLimiter>,
    /// Connections refused for the caps, for the log's rate of warnings.
    refused_connections: std::sync::atomic::AtomicU64,
}

/// Serves the console on `listener` until the tasks are aborted.
pub fn start(
    parts: Parts,
    listener: TcpListener,
) -> std::io::Result<(SocketAddr, Vec<JoinHandle<()>>)> {
    let bound = listener.local_addr()?;
    let (updates, _) = broadcast::channel(parts.settings.page_queue.max(1));
    let console = Arc::new(Console {
        parts,
        logins: Mutex::default(),
        session: Session::named("console"),
        pages: AtomicUsize::new(0),
        page_opened: Notify::new(),
        updates,
        camera: Mutex::new(None),
        agent_frame: Mutex::new(None),
        requests: Mutex::default(),
        refused_connections: std::sync::atomic::AtomicU64::new(0),
    });
    let session_task = {
        let console = console.clone();
        tokio::spawn(async move {
            let bridge = console.parts.bridge.clone();
            let events = console.clone();
            console
                .session
                .run(
                    move || bridge.connect_in_process(Scope::Admin, "console"),
                    move |event| events.session_event(event),
                )
                .await;
        })
    };
    let observer_task = tokio::spawn(console.clone().observe());
    let router = Router::new()
        .route("/", get(index))
        .route(
            "/console.js",
            get(|| async { static_file("text/javascript; charset=utf-8", page::SCRIPT) }),
        )
        .route(
            "/console.css",
            get(|| async { static_file("text/css; charset=utf-8", page::STYLE) }),
        )
        .route("/login", post(login))
        .route("/logout", post(logout))
        .route("/events", get(events))
        .route("/camera.jpg", get(camera))
        .route("/agent-frame", get(agent_frame))
        .route("/api/stop", post(stop))
        .route("/api/release", post(release))
        .route("/api/approve", post(approve))
        .route("/api/deny", post(deny))
        .with_state(console.clone());
    let server_task = tokio::spawn(serve_connections(console, listener, router));
    Ok((bound, vec![session_task, observer_task, server_task]))
}

/// The console's accept loop: each connection in a task of its own, its
/// TLS handshake there too (a silent peer never holds up another's
/// login), within the connection caps (in all and per source address)
/// and the header timeout.
async fn serve_connections(console: Arc<Console>, listener: TcpListener, router: Router) {
    let settings = console.parts.settings.clone();
    let caps = ConnectionCaps::new(settings.max_connections, settings.max_connections_per_address);
    let header_timeout = Duration::from_secs_f64(settings.header_timeout_s);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "console: accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = caps.admit(peer.ip()) else {
            let refused = console.refused_connections.fetch_add(1, Ordering::Relaxed) + 1;
            // One warning per hundred: a flood must not flood the log.
            if refused % 100 == 1 {
                tracing::warn!(%peer, refused, max = settings.max_connections, per_address = settings.max_connections_per_address, "console: connection refused, the caps are reached (console.max_connections, max_connections_per_address)");
            }
            tokio::spawn(refuse_connection(stream));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone().layer(Extension(Peer(peer)));
        let tls = console.parts.tls.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match tls {
                Some(acceptor) => {
                    match tokio::time::timeout(header_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => serve_http(stream, router, header_timeout).await,
                        Ok(Err(error)) => {
                            tracing::info!(%peer, %error, "console: TLS handshake failed")
                        }
                        Err(_) => {
                            tracing::info!(%peer, "console: TLS handshake not done within console.header_timeout_s")
                        }
                    }
                }
                None => serve_http(stream, router, header_timeout).await,
            }
        });
    }
}

/// HTTP/1.1 on one connection; a request header not in within
/// `header_timeout` (after the connection opened or the previous response)
/// closes it.
async fn serve_http<IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static>(
    io: IO,
    router: Router,
    header_timeout: Duration,
) {
    let service = hyper_util::service::TowerToHyperService::new(router);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(header_timeout);
    if let Err(error) = builder.serve_connection(hyper_util::rt::TokioIo::new(io), service).await {
        tracing::debug!(%error, "console: a connection ended with an error");
    }
}

/// A connection over the caps: told so in one short response, bounded in
/// time (a peer that never reads cannot keep its socket).
async fn refuse_connection(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    const BODY: &str = "the console serves no more connections now (console.max_connections, console.max_connections_per_address); retry shortly\n";
    let response = format!("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{BODY}", BODY.len());
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

impl Console {
    fn admitted(&self, headers: &HeaderMap) -> bool {
        let cookie = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
        self.logins.lock().admits(cookie, Instant::now())
    }

    /// An entry or update for every open page (a page that is behind loses
    /// its oldest; nothing waits).
    fn push(&self, name: &'static str, data: &Value) {
        if self.updates.receiver_count() > 0 {
            let _ = self.updates.send(Arc::new((name, data.to_string())));
        }
    }

    /// The console's own session's events: approvals are shown (they go
    /// to admin sessions, so the tap has one copy per admin).
    fn session_event(&self, event: Value) {
        if event["type"] == "approval" {
            self.push("entry", &json!({ "kind": "approval", "at_ms": now_ms(), "payload": summarize(&event["payload"], 0) }));
        }
    }

    /// While pages are open: the tap's records become entries, and the
    /// state and live picture are pushed at their rates. With none open,
    /// nothing is observed or encoded.
    async fn observe(self: Arc<Self>) {
        let mut feed = Feed::default();
        let state_period = Duration::from_secs_f64(1.0 / self.parts.settings.state_hz);
        let camera_period = Duration::from_secs_f64(1.0 / self.parts.settings.camera_hz);
        loop {
            while self.pages.load(Ordering::SeqCst) == 0 {
                self.page_opened.notified().await;
            }
            let mut tap = self.parts.bridge.tap.subscribe();
            let mut state_tick = tokio::time::interval(state_period);
            let mut camera_tick = tokio::time::interval(camera_period);
            for tick in [&mut state_tick, &mut camera_tick] {
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            }
            while self.pages.load(Ordering::SeqCst) > 0 {
                tokio::select! {
                    record = tap.recv() => match record {
                        Some(Ok(record)) => {
                            if let Some(entry) = feed.apply(&record) {
                                self.push("entry", &entry);
                            }
                            if let Some(frame) = feed.agent_frame() {
                                let mut kept = self.agent_frame.lock();
                                if kept.as_ref().map(|k| k.seq) != Some(frame.seq) {
                                    *kept = Some(frame.clone());
                                }
                            }
                        }
                        Some(Err(lost)) => self.push("entry", &json!({ "kind": "lost", "at_ms": now_ms(), "records": lost.0 })),
                        None => return,
                    },
                    _ = state_tick.tick() => self.push("state", &self.state()),
                    _ = camera_tick.tick() => self.refresh_camera().await,
                }
            }
        }
    }

    /// What the page shows besides the stream.
    fn state(&self) -> Value {
        let now = Instant::now();
        let (status, approvals, approval_mode, held) = {
            let core = self.parts.bridge.core.lock();
            (core.status("", now), core.pending_approvals(now), core.approval_mode(), core.held())
        };
        let odometry = self.parts.sensors.odometry().map(|odom| {
            let (_, _, yaw) = odom.orientation.euler_angles();
            json!({
                "frame_id": odom.frame_id,
                "x_m": odom.position_m.x,
                "y_m": odom.position_m.y,
                "yaw_rad": yaw,
                "linear_mps": odom.linear_velocity_mps.x,
                "angular_radps": odom.angular_velocity_radps.z,
                "age_s": now.saturating_duration_since(odom.received).as_secs_f64(),
            })
        });
        let restrictions: Vec<Value> = self
            .parts
            .base
            .restrictions()
            .iter()
            .map(|r| json!({ "rule": r.rule, "reason": r.reason }))
            .collect();
        let camera =
            self.camera.lock().as_ref().map(|p| json!({ "seq": p.seq, "stamp_s": p.stamp_s }));
        let agent_frame = self.agent_frame.lock().as_ref().map(|f| json!({ "seq": f.seq, "tool": f.tool, "call_id": f.call_id, "mime_type": f.mime_type }));
        let view = self.session.view();
        json!({
            "odometry": odometry,
            "odometry_topic": self.parts.sensors.topic(Sensor::Odometry),
            "restrictions": restrictions,
            "lease_holder": status["lease_holder"],
            "sessions": status["sessions"],
            "approvals": approvals,
            "approval_mode": approval_mode,
            "held": held,
            "hold": status["hold"],
            "console_session": { "open": view.open, "id": view.session, "error": view.last_error },
            "pages": self.pages.load(Ordering::SeqCst),
            "camera": camera,
            "agent_frame": agent_frame,
        })
    }

    /// Encodes the newest camera frame when it is new.
    async fn refresh_camera(&self) {
        let Some(frame) = self.parts.sensors.camera() else { return };
        let shown = self.camera.lock().as_ref().map(|p| (p.seq, p.received));
        if shown.is_some_and(|(_, received)| received == frame.received) {
            return;
        }
        let (seq, received) = (shown.map_or(1, |(seq, _)| seq + 1), frame.received);
        let topic = self.parts.sensors.topic(Sensor::Camera);
        let stamp_s = frame.stamp_s;
        let encoded = tokio::task::spawn_blocking(move || {
            let rgb = crate::tools::shared::images::decode_frame(&frame.value, &topic)
                .map_err(|e| e.message)?;
            let options = EncodeOptions {
                format: OutputFormat::Jpeg,
                jpeg_quality: CAMERA_JPEG_QUALITY,
                max_width: Some(640),
                max_height: Some(480),
                max_bytes: None,
            };
            encode(&rgb, &options).map(|e| e.bytes).map_err(|e| e.to_string())
        })
        .await;
        match encoded {
            Ok(Ok(jpeg)) => {
                *self.camera.lock() = Some(Picture { jpeg: Arc::new(jpeg), seq, stamp_s, received })
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "console: the camera frame could not be shown")
            }
            Err(error) => tracing::warn!(%error, "console: encoding the camera frame failed"),
        }
    }

    /// Whether a request fits in the rate limit.
    fn within_rate(&self) -> bool {
        self.requests
            .lock()
            .try_call("console", self.parts.settings.max_requests_per_minute, Instant::now())
            .is_ok()
    }

    async fn call(&self, tool: &str, input: Map<String, Value>) -> Response {
        match self.session.call(tool, input, CALL_TIMEOUT).await {
            CallOutcome::Ok { output, .. } => {
                json_response(StatusCode::OK, &json!({ "ok": true, "output": output }))
            }
            CallOutcome::Failed { error, .. } => {
                tracing::warn!(tool, error = %error, "console: the core refused the operator's request");
                let status = if error["code"] == "invalid_input" {
                    StatusCode::CONFLICT
                } else {
                    StatusCode::BAD_GATEWAY
                };
                json_response(status, &json!({ "ok": false, "error": error }))
            }
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn with_common_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' blob:; frame-ancestors 'none'; form-action 'self'",
        ),
    );
    response
}

fn static_file(content_type: &'static str, body: &'static str) -> Response {
    with_common_headers(([(header::CONTENT_TYPE, content_type)], body).into_response())
}

fn html(status: StatusCode, body: String) -> Response {
    with_common_headers(
        (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response(),
    )
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    with_common_headers(
        (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response(),
    )
}

fn refused(status: StatusCode, message: &str) -> Response {
    json_response(status, &json!({ "ok": false, "error": { "message": message } }))
}

async fn index(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if console.admitted(&headers) {
        html(StatusCode::OK, page::CONSOLE.to_string())
    } else {
        html(StatusCode::UNAUTHORIZED, page::login(None))
    }
}

/// How long a throttled (wrong) login is held before its answer: a
/// guesser's connections are each slowed, within the connection caps.
const THROTTLED_DELAY: Duration = Duration::from_secs(1);

async fn login(
    State(console): State<Arc<Console>>,
    Extension(Peer(peer)): Extension<Peer>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(why) = foreign_origin(&headers, console.parts.tls.is_some()) {
        tracing::warn!(%peer, why, "console: a login from another origin was refused");
        return html(
            StatusCode::FORBIDDEN,
            page::login(Some(&format!("Refused: {why}. Log in from the console's own page."))),
        );
    }
    let token = login::form_token(&body).unwrap_or_default();
    let is_admin = console.parts.tokens.check(&token) == Some(Scope::Admin);
    let new_id = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let attempt = console.logins.lock().attempt(is_admin, new_id, peer.ip(), Instant::now());
    match attempt {
        Login::Granted(id) => {
            tracing::info!(%peer, "console: an operator logged in");
            let secure = if console.parts.tls.is_some() { "; Secure" } else { "" };
            let cookie = format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/{secure}");
            let mut response = with_common_headers(
                (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response(),
            );
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Login::Refused => {
            tracing::warn!(%peer, "console: a login with a token that is not an admin token was refused");
            html(
                StatusCode::UNAUTHORIZED,
                page::login(Some("That token is not an admin token of this bridge.")),
            )
        }
        Login::Throttled { retry_after } => {
            tracing::debug!(%peer, retry_after_s = retry_after.as_secs(), "console: a wrong login from a throttled address");
            tokio::time::sleep(THROTTLED_DELAY).await;
            let mut response = html(StatusCode::TOO_MANY_REQUESTS, page::login(Some(&format!("Too many wrong tokens from this address: wrong ones are refused for {} s more (the right token is always accepted).", retry_after.as_secs().max(1)))));
            if let Ok(value) = HeaderValue::from_str(&retry_after.as_secs().max(1).to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
    }
}

/// Why a request comes from another site than the console's own page:
/// its `Origin` is not this console's (a page elsewhere posting to it), or
/// the browser says it is cross-site. None when it is the console's own,
/// or not from a browser at all (no such headers: curl, a script).
fn foreign_origin(headers: &HeaderMap, tls: bool) -> Option<String> {
    if headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) == Some("cross-site") {
        return Some("the browser marked the request cross-site (Sec-Fetch-Site)".into());
    }
    let origin = headers.get(header::ORIGIN)?.to_str().unwrap_or("");
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let own = format!("{}://{host}", if tls { "https" } else { "http" });
    (host.is_empty() || !origin.eq_ignore_ascii_case(&own)).then(|| {
        format!(
            "the request's Origin '{}' is not the console's own ({own})",
            origin.chars().take(100).collect::<String>()
        )
    })
}

async fn logout(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    console.logins.lock().end(headers.get(header::COOKIE).and_then(|v| v.to_str().ok()));
    let mut response =
        with_common_headers((StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response());
    response
        .headers_mut()
        .insert(header::SET_COOKIE, HeaderValue::from_static("aicc_console=; Max-Age=0; Path=/"));
    response
}

/// One page's stream: counted while it lives.
struct PageGuard(Arc<Console>);

impl Drop for PageGuard {
    fn drop(&mut self) {
        self.0.pages.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn events(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if !console.admitted(&headers) {
        return refused(StatusCode::UNAUTHORIZED, "log in with an admin token first");
    }
    let max = console.parts.settings.max_pages;
    if console
        .pages
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1))
        .is_err()
    {
        tracing::warn!(max, "console: a page was refused, console.max_pages are open");
        return refused(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("{max} console pages are open already (console.max_pages)"),
        );
    }
    let guard = PageGuard(console.clone());
    let receiver = console.updates.subscribe();
    // A permit, kept if the observer is not waiting yet: it cannot miss it.
    console.page_opened.notify_one();
    let first = console.state().to_string();
    with_common_headers(
        Sse::new(page_stream(guard, receiver, first))
            .keep_alive(KeepAlive::default())
            .into_response(),
    )
}

fn page_stream(
    guard: PageGuard,
    receiver: broadcast::Receiver<Arc<(&'static str, String)>>,
    first: String,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let initial =
        futures::stream::once(async move { Ok(SseEvent::default().event("state").data(first)) });
    let rest = futures::stream::unfold((guard, receiver), |(guard, mut receiver)| async move {
        let event = match receiver.recv().await {
            Ok(update) => SseEvent::default().event(update.0).data(update.1.clone()),
            Err(broadcast::error::RecvError::Lagged(lost)) => SseEvent::default()
                .event("entry")
                .data(json!({ "kind": "lost", "at_ms": now_ms(), "updates": lost }).to_string()),
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((Ok(event), (guard, receiver)))
    });
    futures::StreamExt::chain(initial, rest)
}

fn picture(bytes: Arc<Vec<u8>>, mime_type: &str) -> Response {
    let mime = HeaderValue::from_str(mime_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    with_common_headers(
        ([(header::CONTENT_TYPE, mime)], Body::from(bytes.as_ref().clone())).into_response(),
    )
}

/// Checks a picture request: the session cookie and the rate limit.
fn picture_refused(console: &Console, headers: &HeaderMap) -> Option<Response> {
    if !console.admitted(headers) {
        return Some(refused(StatusCode::UNAUTHORIZED, "log in with an admin token first"));
    }
    if !console.within_rate() {
        return Some(refused(
            StatusCode::TOO_MANY_REQUESTS,
            "too many requests (console.max_requests_per_minute)",
        ));
    }
    None
}

async fn camera(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = picture_refused(&console, &headers) {
        return refusal;
    }
    let latest = console.camera.lock().clone();
    match latest {
        Some(p) => picture(p.jpeg, "image/jpeg"),
        None => refused(StatusCode::SERVICE_UNAVAILABLE, "no camera frame yet"),
    }
}

async fn agent_frame(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = picture_refused(&console, &headers) {
        return refusal;
    }
    let latest = console.agent_frame.lock().clone();
    match latest {
        Some(frame) => picture(frame.bytes, &frame.mime_type),
        None => refused(StatusCode::NOT_FOUND, "no agent has been given a picture yet"),
    }
}

/// Checks an action request: the session cookie and the console's header.
fn action_refused(console: &Console, headers: &HeaderMap) -> Option<Response> {
    if !console.admitted(headers) {
        tracing::warn!("console: an action without a console session was refused");
        return Some(refused(StatusCode::UNAUTHORIZED, "log in with an admin token first"));
    }
    if headers.get(ACTION_HEADER).is_none() {
        tracing::warn!(
            "console: an action without the console's header was refused (a form of another site?)"
        );
        return Some(refused(StatusCode::FORBIDDEN, "actions need the X-AICC-Console header"));
    }
    None
}

async fn stop(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = action_refused(&console, &headers) {
        return refusal;
    }
    // The hold first, then the stop, both sent before anything is awaited:
    // no call is admitted between them, and the stop is what matters. The
    // hold (every actuator call waits for an operator) is the core's: only
    // Release, or an operator's `hold {on: false}`, ends it; approval mode
    // does not.
    let mut input = Map::new();
    input.insert("on".into(), json!(true));
    input.insert("reason".into(), json!(STOP_REASON));
    let hold = console.session.start_call("hold", input);
    let sent = console.session.stop(STOP_REASON);
    tracing::warn!("console: STOP pressed");
    if let Err(not_sent) = sent {
        return refused(StatusCode::BAD_GATEWAY, &format!("STOP could not be sent: {not_sent}"));
    }
    let held = match hold {
        Ok((call_id, outcome)) => match tokio::time::timeout(CALL_TIMEOUT, outcome).await {
            Ok(Ok(CallOutcome::Ok { .. })) => Ok(()),
            Ok(Ok(CallOutcome::Failed { error, .. })) => {
                Err(error["message"].as_str().unwrap_or("refused").to_string())
            }
            Ok(Err(_)) => Err("the console's session closed".to_string()),
            Err(_) => {
                console.session.forget(&call_id);
                Err("no answer within 5 s".to_string())
            }
        },
        Err(not_sent) => Err(not_sent.to_string()),
    };
    console.push("state", &console.state());
    match held {
        Ok(()) => json_response(
            StatusCode::OK,
            &json!({ "ok": true, "output": { "stopped": true, "held": true } }),
        ),
        Err(why) => {
            tracing::error!(%why, "console: the robot was stopped but could not be held");
            json_response(
                StatusCode::BAD_GATEWAY,
                &json!({ "ok": false, "output": { "stopped": true, "held": false }, "error": { "message": format!("stopped, but not held: {why}") } }),
            )
        }
    }
}

async fn release(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = action_refused(&console, &headers) {
        return refusal;
    }
    if !console.within_rate() {
        return refused(
            StatusCode::TOO_MANY_REQUESTS,
            "too many requests (console.max_requests_per_minute)",
        );
    }
    let mut input = Map::new();
    input.insert("on".into(), json!(false));
    if let CallOutcome::Failed { error, .. } =
        console.session.call("hold", input, CALL_TIMEOUT).await
    {
        return json_response(StatusCode::BAD_GATEWAY, &json!({ "ok": false, "error": error }));
    }
    tracing::info!("console: STOP released");
    console.push("state", &console.state());
    let (held, approval_mode) = {
        let core = console.parts.bridge.core.lock();
        (core.held(), core.approval_mode())
    };
    json_response(
        StatusCode::OK,
        &json!({ "ok": true, "output": { "held": held, "approval_mode": approval_mode } }),
    )
}

async fn approve(state: State<Arc<Console>>, headers: HeaderMap, body: Bytes) -> Response {
    decide("approve", state, headers, body).await
}

async fn deny(state: State<Arc<Console>>, headers: HeaderMap, body: Bytes) -> Response {
    decide("deny", state, headers, body).await
}

/// `approve` or `deny` through the core, which refuses an approval for a
/// call that is not waiting.
async fn decide(
    tool: &str,
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = action_refused(&console, &headers) {
        return refusal;
    }
    if !console.within_rate() {
        return refused(
            StatusCode::TOO_MANY_REQUESTS,
            "too many requests (console.max_requests_per_minute)",
        );
    }
    let input = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(input)) => input,
        Ok(_) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "the body must be a JSON object: {\"approval_id\": ...}",
            )
        }
        Err(error) => {
            return refused(StatusCode::BAD_REQUEST, &format!("the body is not JSON: {error}"))
        }
    };
    console.call(tool, input).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_needs_an_admin_token_and_tls_when_remote() {
        let loopback: SocketAddr = "127.0.0.1:8765".parse().unwrap();
        let remote: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        let mut actuate_only = Tokens::default();
        actuate_only.add("drive", Scope::Actuate).unwrap();
        assert!(matches!(
            check(loopback, false, false, &Tokens::default()),
            Err(ConsoleRefused::NoAdminToken)
        ));
        assert!(matches!(
            check(loopback, false, false, &actuate_only),
            Err(ConsoleRefused::NoAdminToken)
        ));
        let mut admin = actuate_only.clone();
        admin.add("boss", Scope::Admin).unwrap();
        assert!(check(loopback, false, false, &admin).is_ok());
        assert!(matches!(
            check(remote, false, true, &admin),
            Err(ConsoleRefused::RemoteNotAllowed(_))
        ));
        assert!(matches!(
            check(remote, true, false, &admin),
            Err(ConsoleRefused::RemoteWithoutTls(_))
        ));
        assert!(check(remote, true, true, &admin).is_ok());
    }
}

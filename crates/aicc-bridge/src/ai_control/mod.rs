//! The AI-control dialect (the FOnline AiControl contract: JSON-RPC 2.0
//! envelopes over NDJSON/TCP; methods auth, ping, status, observe, events,
//! act) as a second front end of the bridge. It owns ONE in-process AICC
//! session on the bridge's core, so that validation, the governor, the
//! motion lease, rate limits and command events apply unchanged; `act`
//! commands are queued and run one at a time by a drain task, never on a
//! socket task. See docs/ai-control.md.
pub(crate) mod actions;
mod drain;
pub(crate) mod gate;
mod methods;
pub(crate) mod observation;
pub mod rpc;
pub(crate) mod server;
pub(crate) mod session;
pub(crate) mod state;

use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::protocol::auth::{Scope, Tokens};
use crate::protocol::catalog::Catalog;
use crate::protocol::manifest::ToolClass;
use crate::server::Bridge;
use session::Session;
use state::DialectState;

/// The scope of the dialect's session on the core: it may act, never
/// administer the bridge.
pub(crate) const SESSION_SCOPE: Scope = Scope::Actuate;

/// What the dialect is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_queued_commands: usize,
    pub max_events: usize,
    /// The bridge's own tokens (security.tokens); none: connections start
    /// authorized with `unauthenticated_scope` (loopback only).
    pub tokens: Tokens,
    pub unauthenticated_scope: Scope,
    pub max_auth_failures: u32,
    /// The bridge's tool timeout: a command's result is awaited this long
    /// (and a little more).
    pub tool_timeout: Duration,
    /// An owner (token) not heard from this long loses its commands.
    pub lease_timeout: Duration,
    /// Connections served at once, and from one source address.
    pub max_connections: usize,
    pub max_connections_per_address: usize,
    /// Lines that are not JSON at all before a connection is closed.
    pub max_undecodable_lines: u32,
}

impl Settings {
    /// The settings of a bridge configured with `config`, checking `tokens`.
    pub fn from_config(config: &crate::config::Config, tokens: Tokens) -> Self {
        Self {
            max_queued_commands: config.ai_control.max_queued_commands,
            max_events: config.ai_control.max_events,
            tokens,
            unauthenticated_scope: config.security.unauthenticated_scope,
            max_auth_failures: config.security.max_auth_failures,
            tool_timeout: Duration::from_secs_f64(config.tool_timeout_s),
            lease_timeout: Duration::from_secs_f64(config.ai_control.lease_timeout_s),
            max_connections: config.ai_control.max_connections,
            max_connections_per_address: config.ai_control.max_connections_per_address,
            max_undecodable_lines: config.security.max_undecodable_lines,
        }
    }
}

#[cfg(test)]
impl Settings {
    /// Settings for unit tests: no tokens unless given, short timeouts.
    pub(crate) fn for_test(max_queued_commands: usize, tokens: Tokens) -> Self {
        Self {
            max_queued_commands,
            max_events: 8,
            tokens,
            unauthenticated_scope: Scope::Actuate,
            max_auth_failures: 2,
            tool_timeout: Duration::from_secs(5),
            lease_timeout: Duration::from_secs(2),
            max_connections: 32,
            max_connections_per_address: 16,
            max_undecodable_lines: 4,
        }
    }
}

/// The stop generation, as the bridge counts it (see robot::halt).
pub(crate) type StopGeneration = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The dialect's shared state and its parts.
pub(crate) struct Dialect {
    state: Mutex<DialectState>,
    session: Session,
    catalog: Arc<Catalog>,
    /// Every actuator of the catalog that acts on the robot (the bridge's
    /// own administration, e.g. record_start, is no robot action).
    actuators: Vec<String>,
    /// The actions and their field mappings, for the observation.
    actions: Value,
    settings: Settings,
    /// Wakes the drain task (a command was queued).
    drain_wake: Notify,
    /// One observation refresh at a time.
    observe_gate: tokio::sync::Mutex<()>,
    listening: Mutex<Option<SocketAddr>>,
    connections: AtomicUsize,
    /// The bridge's stop generation: commands accepted before a stop from
    /// any front end are dropped.
    stop_generation: StopGeneration,
}

impl Dialect {
    /// A dialect whose stop generation never moves (for tests of its parts).
    #[cfg(test)]
    pub fn new(catalog: Arc<Catalog>, settings: Settings) -> Arc<Self> {
        Self::with_stop_generation(catalog, settings, Arc::new(|| 0))
    }

    pub fn with_stop_generation(
        catalog: Arc<Catalog>,
        settings: Settings,
        stop_generation: StopGeneration,
    ) -> Arc<Self> {
        let actuators = catalog
            .descriptors()
            .filter(|d| d.class == ToolClass::Actuator && d.capability != "can_administer_bridge")
            .map(|d| d.id.to_string())
            .collect();
        Arc::new(Self {
            state: Mutex::new(DialectState::new(settings.max_queued_commands, settings.max_events)),
            session: Session::default(),
            actions: actions::describe(&catalog),
            catalog,
            actuators,
            settings,
            drain_wake: Notify::new(),
            observe_gate: tokio::sync::Mutex::new(()),
            listening: Mutex::new(None),
            connections: AtomicUsize::new(0),
            stop_generation,
        })
    }
}

/// Why the AI-control listener may not bind where it was asked to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ListenRefused {
    /// A non-loopback address without `security.allow_remote`.
    #[error("refusing the AI-control listener on {0}: not a loopback address. Set security.allow_remote: true (and a token) to accept remote clients")]
    RemoteNotAllowed(SocketAddr),
    /// A remote listener that anyone could use: no token is configured.
    #[error("refusing the AI-control listener on {0} without a token: set one of the environment variables in security.tokens")]
    RemoteWithoutToken(SocketAddr),
}

/// Loopback first: another address needs the operator's explicit
/// `security.allow_remote` and a token (and, the transport having no TLS,
/// `security.allow_plaintext_remote`: see bridge::check_remote).
pub(crate) fn check_listen_address(
    address: SocketAddr,
    allow_remote: bool,
    has_tokens: bool,
) -> Result<(), ListenRefused> {
    if address.ip().is_loopback() {
        return Ok(());
    }
    if !allow_remote {
        return Err(ListenRefused::RemoteNotAllowed(address));
    }
    if !has_tokens {
        return Err(ListenRefused::RemoteWithoutToken(address));
    }
    Ok(())
}

/// Starts the dialect on a bound listener: its session on `bridge`'s
/// core, its drain task and its listener. Abort the tasks to stop it.
pub fn start(
    bridge: Arc<Bridge>,
    catalog: Arc<Catalog>,
    listener: TcpListener,
    settings: Settings,
) -> std::io::Result<(SocketAddr, Vec<JoinHandle<()>>)> {
    let bound = listener.local_addr()?;
    let generation_of = bridge.clone();
    let dialect = Dialect::with_stop_generation(
        catalog,
        settings,
        Arc::new(move || generation_of.stop_generation()),
    );
    *dialect.listening.lock() = Some(bound);
    let session_task = {
        let dialect = dialect.clone();
        tokio::spawn(async move {
            let events = dialect.clone();
            dialect
                .session
                .run(
                    move || bridge.connect_in_process(SESSION_SCOPE, "AI-control dialect"),
                    move |event| {
                        events.state.lock().history.push(event);
                    },
                )
                .await;
        })
    };
    let drain_task = tokio::spawn(drain::run(dialect.clone()));
    let server_task = tokio::spawn(server::serve(dialect, listener));
    Ok((bound, vec![session_task, drain_task, server_task]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_loopback_listener_needs_allow_remote_and_a_token() {
        let remote: SocketAddr = "0.0.0.0:43011".parse().unwrap();
        let loopback: SocketAddr = "127.0.0.1:43011".parse().unwrap();
        assert!(check_listen_address(loopback, false, false).is_ok());
        assert!(check_listen_address("[::1]:0".parse().unwrap(), false, false).is_ok());
        assert!(check_listen_address(remote, false, true)
            .unwrap_err()
            .to_string()
            .contains("security.allow_remote"));
        assert!(check_listen_address(remote, true, false)
            .unwrap_err()
            .to_string()
            .contains("without a token"));
        assert!(check_listen_address(remote, true, true).is_ok());
    }
}

//! Streamable HTTP: rmcp's service at `/mcp`, each MCP session with an
//! AICC session of its own. A bearer token (from an environment variable)
//! is required on every address, loopback included (any local process, or
//! a web page through the browser, could otherwise drive the robot at the
//! adapter's scope and answer its approval prompts), and checked on every
//! request in constant time before rmcp sees it.
use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq as _;
use tokio_util::sync::CancellationToken;

use super::server::{BridgeTarget, RobotServer};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";
/// The largest request body accepted (a tools/call input is small).
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Why an HTTP listener may not start.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HttpRefusal {
    /// Without a token anyone who reaches the address (any local process,
    /// on loopback) would drive the robot.
    #[error("--http {address}: set a bearer token in the environment variable {token_env} (and give it to the MCP host): MCP over HTTP needs one on every address, loopback too, or any local process could drive the robot and answer its approval prompts")]
    WithoutToken { address: SocketAddr, token_env: String },
}

/// The bearer token required: always, on every address.
pub fn required_token(
    address: SocketAddr,
    token_env: &str,
    token: Option<String>,
) -> Result<String, HttpRefusal> {
    token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| HttpRefusal::WithoutToken { address, token_env: token_env.to_string() })
}

/// Serves MCP over streamable HTTP on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    bridge: BridgeTarget,
    token: String,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let address = listener.local_addr()?;
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(MAX_REQUEST_BYTES);
    if !address.ip().is_loopback() {
        // Reached by its network name; the bearer token (required here)
        // is what DNS rebinding cannot forge.
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || Ok(RobotServer::new(bridge.clone(), CancellationToken::new())),
        LocalSessionManager::default().into(),
        config,
    );
    let router = axum::Router::new()
        .nest_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(std::sync::Arc::new(token), check_bearer));
    tracing::info!("MCP over streamable HTTP at http://{address}{MCP_PATH}");
    // Responses go out as several small writes (SSE frames): without
    // TCP_NODELAY each waits for the host's delayed ACK (~40 ms).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn check_bearer(
    State(token): State<std::sync::Arc<String>>,
    request: Request,
    next: Next,
) -> Response {
    let offered = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match offered {
        Some(offered) if bool::from(offered.as_bytes().ct_eq(token.as_bytes())) => {
            next.run(request).await
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required (Authorization: Bearer <token>)",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_needs_a_token_loopback_included() {
        let remote: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let refusal = required_token(remote, "AICC_MCP_TOKEN", None).unwrap_err();
        assert!(
            refusal.to_string().contains("AICC_MCP_TOKEN")
                && refusal.to_string().contains("loopback too"),
            "{refusal}"
        );
        assert!(
            required_token(remote, "AICC_MCP_TOKEN", Some(String::new())).is_err(),
            "an empty token is no token"
        );
        assert_eq!(required_token(remote, "T", Some("s".into())), Ok("s".into()));
        assert!(
            required_token("127.0.0.1:8080".parse().unwrap(), "T", None).is_err(),
            "loopback needs one too"
        );
        assert_eq!(
            required_token("[::1]:8080".parse().unwrap(), "T", Some("s".into())),
            Ok("s".into())
        );
    }
}

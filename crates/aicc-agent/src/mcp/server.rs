//! The MCP server: one per MCP session (the stdio host, or one HTTP
//! session). `initialize` opens its AICC session on the bridge; tools are
//! the manifest's; calls go through the session task (see `link`), with
//! progress from command events and MCP cancellation as an AICC cancel.
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation,
    InitializeRequestParams, InitializeResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::approval::{self, Asking, Plan};
use super::events::{DEFAULT_PAGE, MAX_PAGE};
use super::link::{self, CallUpdate, LinkHandle};
use super::operator::{self, OperatorTarget};
use super::progress::ProgressTracker;
use super::results;
use super::tools::{self, EVENTS_TOOL};
use crate::client::manifest::{LlmOffer, NotPermitted};
use crate::client::transport::{self, TlsOptions};
use crate::client::{ClientError, Session, SessionOptions};

/// The events resource (read it, or subscribe to be told of new events).
pub const EVENTS_URI: &str = "aicc://events";
/// How long a cancelled call waits for the bridge's answer before the
/// handler gives up on it (the cancel itself has been sent).
const CANCEL_GRACE: Duration = Duration::from_secs(5);
/// At most one `resources/updated` per this.
const UPDATE_INTERVAL: Duration = Duration::from_millis(250);

/// Where the bridge is and how to open the session.
#[derive(Debug, Clone)]
pub struct BridgeTarget {
    pub host: String,
    pub port: u16,
    pub tls: Option<TlsOptions>,
    pub session: SessionOptions,
    /// With an operator's admin token (`--operator-token-env`): a call
    /// waiting for approval is asked of the host's user (elicitation) and
    /// their answer carried out on a session of its own. None: never asked.
    pub operator: Option<OperatorTarget>,
    /// What the host's LLM is offered (never an operator's tool).
    pub offer: LlmOffer,
}

impl BridgeTarget {
    fn address(&self) -> String {
        let scheme = if self.tls.is_some() { "tls" } else { "tcp" };
        format!("{scheme}://{}:{}", self.host, self.port)
    }
}

/// The MCP server of one MCP session.
#[derive(Clone)]
pub struct RobotServer {
    inner: Arc<Inner>,
}

struct Inner {
    bridge: BridgeTarget,
    link: tokio::sync::OnceCell<LinkHandle>,
    events_subscribed: Arc<AtomicBool>,
    /// Cancelled when the bridge session ends (the stdio server stops then).
    bridge_lost: CancellationToken,
}

impl RobotServer {
    pub fn new(bridge: BridgeTarget, bridge_lost: CancellationToken) -> Self {
        Self {
            inner: Arc::new(Inner {
                bridge,
                link: tokio::sync::OnceCell::new(),
                events_subscribed: Arc::new(AtomicBool::new(false)),
                bridge_lost,
            }),
        }
    }

    fn link(&self) -> Result<&LinkHandle, McpError> {
        self.inner
            .link
            .get()
            .ok_or_else(|| McpError::invalid_request("the MCP session is not initialized", None))
    }

    async fn open_link(&self, peer: &Peer<RoleServer>) -> Result<&LinkHandle, ClientError> {
        self.inner
            .link
            .get_or_try_init(|| async {
                let bridge = &self.inner.bridge;
                let stream = transport::connect(
                    &bridge.host,
                    bridge.port,
                    bridge.tls.as_ref(),
                    bridge.session.timeout,
                )
                .await?;
                let session = Session::open(stream, bridge.session.clone()).await?;
                let (handle, ended) = link::start(session).await?;
                watch_the_session(
                    &handle,
                    self.inner.bridge.offer,
                    peer.clone(),
                    self.inner.events_subscribed.clone(),
                    ended,
                    self.inner.bridge_lost.clone(),
                );
                let session_id = handle
                    .manifest
                    .borrow()
                    .raw()
                    .get("session_id")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("?")
                    .to_string();
                tracing::info!("AICC session {session_id} open on {}", bridge.address());
                Ok(handle)
            })
            .await
    }

    async fn call_robot_tool(
        &self,
        link: &LinkHandle,
        name: &str,
        input: Value,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let manifest = link.manifest.borrow().clone();
        match manifest.permits(name) {
            Ok(_) => {}
            Err(NotPermitted::NotGranted { .. }) => {
                return results::local_error(
                    name,
                    "tool_unavailable",
                    &manifest.permits(name).unwrap_err().to_string(),
                    false,
                )
            }
            Err(why) => {
                return results::local_error(name, "tool_unavailable", &why.to_string(), true)
            }
        }
        let progress_token = context.meta.get_progress_token();
        let mut updates = link.call(name, input.clone()).await;
        let mut tracker = ProgressTracker::default();
        let mut call_id: Option<String> = None;
        let mut cancelled = false;
        // The question to the host's user, while it is open; dropped (and
        // so given up) when the call ends first.
        let mut asking: Option<AbortOnDrop> = None;
        let call_done = CancellationToken::new();
        let _call_done = call_done.clone().drop_guard();
        let grace = tokio::time::sleep(Duration::from_secs(u64::from(u32::MAX)));
        tokio::pin!(grace);
        loop {
            tokio::select! {
                update = updates.recv() => match update {
                    Some(CallUpdate::Started { call_id: id }) => {
                        if cancelled {
                            link.cancel(&id).await;
                        }
                        call_id = Some(id);
                    }
                    Some(CallUpdate::Command(payload)) => {
                        let asked = Asking { host_elicits_forms: operator::host_elicits_forms(&context.peer), operator_token: self.inner.bridge.operator.is_some() };
                        let progress = match approval::plan(&payload, asked) {
                            Some(plan) => {
                                match (&plan, &self.inner.bridge.operator) {
                                    (Plan::AskHost(waiting), Some(operator)) if asking.is_none() => {
                                        let task = operator::ask_and_decide(context.peer.clone(), operator.clone(), name.to_string(), input.clone(), waiting.clone(), call_done.clone());
                                        asking = Some(AbortOnDrop(tokio::spawn(task)));
                                    }
                                    (Plan::AwaitOperator { why, .. }, _) => tracing::info!(tool = name, "the call awaits an operator's approval; the MCP host's user is not asked: {why}"),
                                    _ => {}
                                }
                                tracker.on_awaiting(plan.progress_message())
                            }
                            None => tracker.on_command_event(&payload),
                        };
                        if let (Some(token), Some(progress)) = (&progress_token, progress) {
                            notify_progress(&context.peer, token, progress).await;
                        }
                    }
                    Some(CallUpdate::Answered(Ok(success))) => return results::success(name, &success),
                    Some(CallUpdate::Answered(Err(error))) => return results::remote_error(name, &error),
                    Some(CallUpdate::Failed(error)) => return client_error(name, &error),
                    None => return client_error(name, &link.ended_error()),
                },
                _ = context.ct.cancelled(), if !cancelled => {
                    // The host cancelled (or went away): the robot stops.
                    cancelled = true;
                    if let Some(id) = &call_id {
                        link.cancel(id).await;
                    }
                    grace.as_mut().reset(tokio::time::Instant::now() + CANCEL_GRACE);
                }
                _ = &mut grace => {
                    return results::local_error(name, "execution_failed", "cancelled; the bridge did not confirm the stop in time", true);
                }
            }
        }
    }

    fn events_call(&self, link: &LinkHandle, input: &Map<String, Value>) -> CallToolResult {
        let page = match events_input(input) {
            Ok((since, topics, limit)) => link.shared.events.lock().after(since, &topics, limit),
            Err(message) => {
                return results::local_error(EVENTS_TOOL, "invalid_input", &message, false)
            }
        };
        let mut result = results::success(
            EVENTS_TOOL,
            &crate::client::CallSuccess {
                call_id: String::new(),
                output: page.to_json(),
                meta: Value::Null,
            },
        );
        result.meta = None;
        result
    }
}

/// A task aborted when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The `events` input: since, topics, limit; `Err` names the field.
fn events_input(input: &Map<String, Value>) -> Result<(Option<u64>, Vec<String>, usize), String> {
    for key in input.keys() {
        if !["since", "topics", "limit"].contains(&key.as_str()) {
            return Err(format!("input.{key} is not a field of events (since, topics, limit)"));
        }
    }
    let since = match input.get("since") {
        None | Some(Value::Null) => None,
        Some(value) => Some(value.as_u64().ok_or_else(|| {
            format!(
                "input.since must be a non-negative integer (a `next` from before), got {value}"
            )
        })?),
    };
    let topics = match input.get("topics") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("input.topics must hold strings, got {t}"))
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(format!("input.topics must be an array of topic names, got {other}"))
        }
    };
    let limit = match input.get("limit") {
        None | Some(Value::Null) => DEFAULT_PAGE,
        Some(value) => match value.as_u64() {
            Some(limit) if (1..=MAX_PAGE as u64).contains(&limit) => limit as usize,
            _ => {
                return Err(format!(
                    "input.limit must be an integer from 1 to {MAX_PAGE}, got {value}"
                ))
            }
        },
    };
    Ok((since, topics, limit))
}

/// A failure of the client side as a tool result.
fn client_error(tool: &str, error: &ClientError) -> CallToolResult {
    match error {
        ClientError::Remote(remote) => results::remote_error(tool, remote),
        ClientError::Usage(message) => results::local_error(tool, "invalid_input", message, false),
        ClientError::Refused(message) => {
            results::local_error(tool, "tool_unavailable", message, true)
        }
        ClientError::Transport(message) | ClientError::Protocol(message) => results::local_error(
            tool,
            "session_expired",
            &format!("the connection to the robot's bridge is gone ({message})"),
            false,
        ),
    }
}

async fn notify_progress(
    peer: &Peer<RoleServer>,
    token: &ProgressToken,
    progress: super::progress::Progress,
) {
    let mut param = ProgressNotificationParam::new(token.clone(), progress.progress)
        .with_message(progress.message);
    if let Some(total) = progress.total {
        param = param.with_total(total);
    }
    if let Err(error) = peer.notify_progress(param).await {
        tracing::debug!("progress not sent: {error}");
    }
}

/// Tells the host of manifest changes and new events, and the server of
/// the session's end; the tasks end with the session.
fn watch_the_session(
    handle: &LinkHandle,
    offer: LlmOffer,
    peer: Peer<RoleServer>,
    subscribed: Arc<AtomicBool>,
    ended: CancellationToken,
    bridge_lost: CancellationToken,
) {
    let mut manifest = handle.manifest.clone();
    let tools_peer = peer.clone();
    tokio::spawn(async move {
        let mut listed = tool_names(&manifest.borrow(), offer);
        while manifest.changed().await.is_ok() {
            let now = tool_names(&manifest.borrow_and_update(), offer);
            if now != listed {
                listed = now;
                if tools_peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        }
    });
    let mut pulse = handle.event_pulse.clone();
    tokio::spawn(async move {
        while pulse.changed().await.is_ok() {
            if subscribed.load(Ordering::Relaxed)
                && peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(EVENTS_URI))
                    .await
                    .is_err()
            {
                break;
            }
            tokio::time::sleep(UPDATE_INTERVAL).await;
        }
    });
    tokio::spawn(async move {
        ended.cancelled().await;
        bridge_lost.cancel();
    });
}

fn tool_names(manifest: &crate::client::manifest::Manifest, offer: LlmOffer) -> Vec<String> {
    tools::mcp_tools(manifest, offer).into_iter().map(|t| t.name.into_owned()).collect()
}

const INSTRUCTIONS: &str = "These tools act on a robot through its AICC bridge, under a safety governor that limits speeds, stops for obstacles and stale sensor data, and may refuse or cut short a motion. Observe first (proprioception, vision), move in small steps, and read each result: an error says whether retrying can help and what to do. Long motions report progress; cancelling a call stops the robot. The `events` tool (or the aicc://events resource) tells what happened meanwhile (collisions, governor stops, lease changes).";

impl ServerHandler for RobotServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("aicc-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    /// The handshake revisions: this server keeps a session (the AICC one)
    /// per MCP session, which the stateless 2026 lifecycle does not have.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        if let Err(error) = self.open_link(&context.peer).await {
            let message = format!(
                "cannot open an AICC session on the bridge at {}: {error}",
                self.inner.bridge.address()
            );
            tracing::error!("{message}");
            return Err(McpError::internal_error(message, None));
        }
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let link = self.link()?;
        let manifest = link.manifest.borrow().clone();
        Ok(ListToolsResult::with_all_items(tools::mcp_tools(&manifest, self.inner.bridge.offer)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let link = self.link()?.clone();
        let name = request.name.to_string();
        let input = request.arguments.unwrap_or_default();
        if name == EVENTS_TOOL {
            return Ok(self.events_call(&link, &input).into());
        }
        if !tools::is_listed(&link.manifest.borrow(), self.inner.bridge.offer, &name) {
            return Err(McpError::invalid_params(
                format!("unknown tool '{name}': tools/list names the tools of this robot"),
                Some(json!({ "tool": name })),
            ));
        }
        Ok(self.call_robot_tool(&link, &name, Value::Object(input), context).await.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let events = Resource::new(EVENTS_URI, "events")
            .with_description("The robot's latest events (collisions, command progress, governor stops, lease changes) as JSON {events, next, dropped}; subscribe to be told when new ones come.")
            .with_mime_type("application/json");
        Ok(ListResourcesResult::with_all_items(vec![events]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        check_uri(&request.uri)?;
        let link = self.link()?;
        let page = {
            let log = link.shared.events.lock();
            log.after(Some(log.head().saturating_sub(DEFAULT_PAGE as u64)), &[], DEFAULT_PAGE)
        };
        let text = page.to_json().to_string();
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, EVENTS_URI).with_mime_type("application/json")
        ])
        .into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        check_uri(&request.uri)?;
        self.inner.events_subscribed.store(true, Ordering::Relaxed);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        check_uri(&request.uri)?;
        self.inner.events_subscribed.store(false, Ordering::Relaxed);
        Ok(())
    }
}

fn check_uri(uri: &str) -> Result<(), McpError> {
    if uri == EVENTS_URI {
        Ok(())
    } else {
        Err(McpError::resource_not_found(
            format!("no resource '{uri}': the one resource is {EVENTS_URI}"),
            None,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_events_input_is_checked_naming_the_field() {
        assert_eq!(events_input(&input(json!({}))).unwrap(), (None, vec![], DEFAULT_PAGE));
        assert_eq!(
            events_input(&input(json!({ "since": 4, "topics": ["lease"], "limit": 3 }))).unwrap(),
            (Some(4), vec!["lease".to_string()], 3)
        );
        let why = |value| events_input(&input(value)).unwrap_err();
        assert!(why(json!({ "since": -1 })).starts_with("input.since"));
        assert!(why(json!({ "limit": 0 })).starts_with("input.limit"));
        assert!(why(json!({ "topics": "lease" })).starts_with("input.topics"));
        assert!(why(json!({ "after": 1 })).starts_with("input.after"));
    }

    #[test]
    fn a_lost_connection_is_a_session_expired_result_and_usage_an_invalid_input() {
        let lost = client_error(
            "move",
            &ClientError::Transport("the bridge closed the connection".into()),
        );
        assert_eq!(lost.is_error, Some(true));
        assert_eq!(lost.structured_content.unwrap()["error"]["code"], "session_expired");
        let usage = client_error("move", &ClientError::Usage("the input must be an object".into()));
        assert_eq!(usage.structured_content.unwrap()["error"]["code"], "invalid_input");
    }
}

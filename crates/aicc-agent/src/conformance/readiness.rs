//! Waiting for a freshly started bridge to be ready before the first
//! scenario: every tool of its manifest available. A bridge lists a tool
//! whose data has not flowed yet in `tools`, but leaves it out of
//! `capabilities.sensors` / `actuators` / `generators` (what the session
//! may use now), and pushes the change in a heartbeat's `manifest_update`
//! when the data comes (AICC §3, §8; docs/protocol.md).
//!
//! Tools the robot's profile does not have (the bridge's status tool says
//! they are not configured: a TurtleBot's missing head) never become
//! available: the wait does not wait for them, and the survey it returns
//! ([`Offered`]) lets the run skip the scenarios that need them.
use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::matcher::{show, Mismatch};
use super::offered::{says_not_configured, Offered};
use super::runner::{Found, Run, RunnerOptions};
use super::scenario::DEFAULT_WITHIN_S;

/// The connection the wait uses.
const CONN: &str = "readiness";
/// How long the wait listens for a pushed manifest update before it
/// re-fetches the manifest itself.
const REFETCH_PERIOD: Duration = Duration::from_secs(2);
/// The bridge-specific status tool that can say why tools are unavailable.
const STATUS_TOOL: &str = "bridge_status";

/// A bridge found ready.
#[derive(Debug, Clone, PartialEq)]
pub struct Ready {
    /// Tools of the manifest, all available but those not configured.
    pub tools: usize,
    pub waited_s: f64,
    /// What the profile offers (and the tools it has not configured).
    pub offered: Offered,
}

/// Why the bridge was not found ready.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotReady {
    /// The manifest is not of the shape the wait reads.
    #[error(transparent)]
    Manifest(#[from] ManifestShapeError),
    /// Time ran out; each tool is listed with the bridge's reason when it gave one.
    #[error("after {waited_s} s, {} tool(s) of the manifest are still unavailable: {}", tools.len(), tools.join(", "))]
    StillUnavailable { waited_s: f64, tools: Vec<String> },
    /// The bridge closed the connection during the wait.
    #[error("the bridge closed the connection ({how}) while the runner waited for its tools")]
    ClosedWhileWaiting { how: String },
    /// The bridge answered a manifest_request with an error.
    #[error("re-fetching the manifest: the bridge answered {reply}")]
    RefetchRefused { reply: String },
    /// The bridge closed the connection while the manifest was re-fetched.
    #[error("the bridge closed the connection ({how}) while the runner re-fetched the manifest")]
    ClosedWhileRefetching { how: String },
    /// No answer to a manifest_request.
    #[error("the bridge did not answer a manifest_request within {within_s:.0} s")]
    RefetchUnanswered { within_s: f64 },
    /// Connecting, the handshake or a read failed, as a scenario step would.
    #[error("{0}")]
    Run(String),
}

/// A manifest the readiness wait cannot read (shown shortened).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestShapeError {
    /// No `tools` array.
    #[error("the manifest has no 'tools' array: {manifest}")]
    NoTools { manifest: String },
    /// No `capabilities` object.
    #[error("the manifest has no 'capabilities' object: {manifest}")]
    NoCapabilities { manifest: String },
    /// A `capabilities` list that is not an array.
    #[error("manifest capabilities.{key} must be an array, got {got}")]
    NotAnArray { key: String, got: String },
    /// A `capabilities` list holding something else than a string.
    #[error("manifest capabilities.{key} holds {item}, not a string")]
    NotAString { key: String, item: String },
    /// A tool without a string `id`.
    #[error("manifest tools.{index} has no string 'id'")]
    ToolWithoutId { index: usize },
}

/// The tools of `manifest` this session could use but which are not
/// available now, in manifest order. A tool whose `capability` the session
/// was not granted (when the manifest says what was granted) is not
/// counted: it is not this session's to use.
pub fn unavailable_tools(manifest: &Value) -> Result<Vec<String>, ManifestShapeError> {
    let tools = manifest
        .get("tools")
        .and_then(Value::as_array)
        .ok_or_else(|| ManifestShapeError::NoTools { manifest: show(manifest) })?;
    let capabilities = manifest
        .get("capabilities")
        .and_then(Value::as_object)
        .ok_or_else(|| ManifestShapeError::NoCapabilities { manifest: show(manifest) })?;
    let names = |key: &str| -> Result<Vec<&str>, ManifestShapeError> {
        match capabilities.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str().ok_or_else(|| ManifestShapeError::NotAString {
                        key: key.to_string(),
                        item: show(item),
                    })
                })
                .collect(),
            Some(other) => {
                Err(ManifestShapeError::NotAnArray { key: key.to_string(), got: show(other) })
            }
        }
    };
    let usable: HashSet<&str> = ["sensors", "actuators", "generators"]
        .iter()
        .map(|key| names(key))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    let granted: Option<Vec<&str>> =
        capabilities.contains_key("granted").then(|| names("granted")).transpose()?;
    let mut unavailable = Vec::new();
    for (index, tool) in tools.iter().enumerate() {
        let id = tool
            .get("id")
            .and_then(Value::as_str)
            .ok_or(ManifestShapeError::ToolWithoutId { index })?;
        let capability = tool.get("capability").and_then(Value::as_str);
        let ours = match (&granted, capability) {
            (Some(granted), Some(capability)) => granted.contains(&capability),
            _ => true,
        };
        if ours && !usable.contains(id) {
            unavailable.push(id.to_string());
        }
    }
    Ok(unavailable)
}

/// Connects (with the runner's own token), opens a session and waits, at
/// most `within`, until every tool of the manifest is available. The
/// error lists the tools still unavailable (with the bridge's reasons when
/// its status tool gives them).
pub async fn wait_until_ready(
    options: &RunnerOptions,
    within: Duration,
) -> Result<Ready, NotReady> {
    wait_refetching_every(options, within, REFETCH_PERIOD).await
}

async fn wait_refetching_every(
    options: &RunnerOptions,
    within: Duration,
    refetch_period: Duration,
) -> Result<Ready, NotReady> {
    let started = Instant::now();
    let mut run = Run::new(options);
    let outcome = watch(&mut run, within, refetch_period).await;
    run.close_connections().await;
    outcome.map(|(tools, offered)| Ready {
        tools,
        waited_s: started.elapsed().as_secs_f64(),
        offered,
    })
}

/// One look, no wait: the manifest and the status tool's reasons, for a
/// run without `--wait-ready-s` (which still skips what the profile lacks).
pub async fn survey(options: &RunnerOptions) -> Result<Offered, NotReady> {
    let mut run = Run::new(options);
    let outcome = look(&mut run).await;
    run.close_connections().await;
    outcome
}

async fn look(run: &mut Run<'_>) -> Result<Offered, NotReady> {
    let within = Duration::from_secs_f64(DEFAULT_WITHIN_S);
    let token = run.options.admin.value.clone();
    run.open(CONN, token.clone()).await.map_err(NotReady::Run)?;
    let manifest =
        run.handshake(CONN, token.as_deref(), None, None, within).await.map_err(NotReady::Run)?;
    let missing = unavailable_tools(&manifest)?;
    let reasons = if missing.is_empty() {
        Map::new()
    } else {
        unavailable_reasons(run, &manifest, within).await
    };
    Ok(Offered::from_manifest(&manifest, &reasons))
}

/// The wait itself; returns how many tools the manifest has, and the survey.
async fn watch(
    run: &mut Run<'_>,
    within: Duration,
    refetch_period: Duration,
) -> Result<(usize, Offered), NotReady> {
    let deadline = Instant::now() + within;
    let answer_within = Duration::from_secs_f64(DEFAULT_WITHIN_S);
    let token = run.options.admin.value.clone();
    run.open(CONN, token.clone()).await.map_err(NotReady::Run)?;
    let mut manifest = run
        .handshake(CONN, token.as_deref(), None, None, answer_within)
        .await
        .map_err(NotReady::Run)?;
    loop {
        let mut missing = unavailable_tools(&manifest)?;
        let mut reasons = Map::new();
        if !missing.is_empty() {
            // What the profile has not configured will never come.
            // Asked briefly: a bridge that does not answer its status tool
            // must not hold up a pushed update.
            reasons = unavailable_reasons(run, &manifest, refetch_period.min(answer_within)).await;
            missing.retain(|tool| {
                !reasons.get(tool).and_then(Value::as_str).is_some_and(says_not_configured)
            });
        }
        if missing.is_empty() {
            return Ok((
                manifest["tools"].as_array().map_or(0, Vec::len),
                Offered::from_manifest(&manifest, &reasons),
            ));
        }
        let now = Instant::now();
        if now >= deadline {
            let listed: Vec<String> = missing
                .iter()
                .map(|tool| match reasons.get(tool).and_then(Value::as_str) {
                    Some(reason) => format!("{tool} ({reason})"),
                    None => tool.clone(),
                })
                .collect();
            return Err(NotReady::StillUnavailable {
                waited_s: within.as_secs_f64(),
                tools: listed,
            });
        }
        // A change is pushed in a heartbeat when the data starts...
        let is_update = |message: &Value, _: &_| match (
            message.get("type").and_then(Value::as_str),
            message.get("manifest_update"),
        ) {
            (Some("heartbeat"), Some(update)) if update.is_object() => Ok(Vec::new()),
            _ => Err(Mismatch {
                path: "manifest_update".into(),
                reason: "not a heartbeat with a manifest_update".into(),
            }),
        };
        match run
            .find(CONN, refetch_period.min(deadline - now), is_update)
            .await
            .map_err(NotReady::Run)?
        {
            Found::Match(index, _) => {
                manifest = run.consume(CONN, index)["manifest_update"].take();
                continue;
            }
            Found::Closed { how, .. } => return Err(NotReady::ClosedWhileWaiting { how }),
            Found::TimedOut { .. } => {}
        }
        // ...and re-fetched, in case a bridge does not push every change.
        run.discard_pending(CONN);
        manifest = refetch(run, answer_within).await?;
    }
}

/// Sends a manifest_request on the session and returns the session_init
/// answering it.
async fn refetch(run: &mut Run<'_>, within: Duration) -> Result<Value, NotReady> {
    let message_id = format!("conformance-ready-{}", uuid::Uuid::new_v4().simple());
    let mut request = Map::new();
    request.insert("type".into(), json!("manifest_request"));
    request.insert("message_id".into(), json!(message_id));
    run.send_message(CONN, &Run::envelope(request), within).await.map_err(NotReady::Run)?;
    let answer = |message: &Value, _: &_| match (
        message.get("type").and_then(Value::as_str),
        message.get("in_reply_to").and_then(Value::as_str),
    ) {
        (Some("session_init" | "error"), Some(id)) if id == message_id => Ok(Vec::new()),
        _ => Err(Mismatch {
            path: "in_reply_to".into(),
            reason: "not the answer to the re-fetch".into(),
        }),
    };
    match run.find(CONN, within, answer).await.map_err(NotReady::Run)? {
        Found::Match(index, _) => {
            let reply = run.consume(CONN, index);
            if reply["type"] == "error" {
                return Err(NotReady::RefetchRefused { reply: show(&reply) });
            }
            Ok(reply)
        }
        Found::Closed { how, .. } => Err(NotReady::ClosedWhileRefetching { how }),
        Found::TimedOut { .. } => {
            Err(NotReady::RefetchUnanswered { within_s: within.as_secs_f64() })
        }
    }
}

/// The bridge's reasons per unavailable tool, when the manifest offers its
/// status tool (`bridge_status`, `unavailable_tools`); empty otherwise.
async fn unavailable_reasons(
    run: &mut Run<'_>,
    manifest: &Value,
    within: Duration,
) -> Map<String, Value> {
    let offered = manifest
        .pointer("/capabilities/sensors")
        .and_then(Value::as_array)
        .is_some_and(|sensors| sensors.iter().any(|s| s == STATUS_TOOL));
    if !offered {
        return Map::new();
    }
    let call_id = format!("conformance-ready-status-{}", uuid::Uuid::new_v4().simple());
    let mut call = Map::new();
    call.insert("type".into(), json!("tool_call"));
    call.insert("call_id".into(), json!(call_id));
    call.insert("tool".into(), json!(STATUS_TOOL));
    call.insert("input".into(), json!({}));
    if run.send_message(CONN, &Run::envelope(call), within).await.is_err() {
        return Map::new();
    }
    let result = |message: &Value, _: &_| match message.get("call_id").and_then(Value::as_str) {
        Some(id) if id == call_id && message["type"] == "tool_result" => Ok(Vec::new()),
        _ => Err(Mismatch { path: "call_id".into(), reason: "not the status result".into() }),
    };
    match run.find(CONN, within, result).await {
        Ok(Found::Match(index, _)) => {
            match run.consume(CONN, index).pointer_mut("/output/unavailable_tools").map(Value::take)
            {
                Some(Value::Object(reasons)) => reasons,
                _ => Map::new(),
            }
        }
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::connection::Endpoint;
    use crate::conformance::runner::{TokenSource, DEFAULT_CLOSE_WAIT};
    use std::sync::Arc;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A bridge on a free loopback port: greets each connection with
    /// `greeting` lines, then answers each line with what `answer` gives.
    async fn scripted_bridge(
        greeting: Vec<Value>,
        answer: impl Fn(&Value) -> Vec<Value> + Send + Sync + 'static,
    ) -> RunnerOptions {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let answer = Arc::new(answer);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (greeting, answer) = (greeting.clone(), answer.clone());
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut lines = BufReader::new(read).lines();
                    for line in greeting {
                        write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
                    }
                    while let Ok(Some(line)) = lines.next_line().await {
                        for line in answer(&serde_json::from_str(&line).unwrap()) {
                            write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
                        }
                    }
                });
            }
        });
        let no_token = |env: &str| TokenSource { env: env.into(), value: None };
        RunnerOptions {
            endpoint: Endpoint { host: "127.0.0.1".into(), port, tls: None },
            max_line_bytes: 1 << 20,
            admin: no_token("AICC_OPERATOR_TOKEN"),
            actuate: no_token("AICC_TOKEN"),
            observe: no_token("AICC_OBSERVE_TOKEN"),
            close_wait: DEFAULT_CLOSE_WAIT,
            truth: None,
        }
    }

    /// A session_init (or, with `in_reply_to`, a re-fetch's answer) offering
    /// `probe` and `bridge_status`, of which `sensors` are available.
    fn session_init(sensors: &[&str], in_reply_to: Option<&Value>) -> Value {
        json!({
            "protocol": "aicc/0.1", "type": "session_init", "session_id": "s-1", "message_id": "m-init", "in_reply_to": in_reply_to, "meta": { "tick": 1 },
            "capabilities": { "sensors": sensors, "actuators": [], "generators": [] },
            "tools": [{ "id": "probe", "class": "sensor" }, { "id": "bridge_status", "class": "sensor" }],
        })
    }

    fn manifest_update(sensors: &[&str]) -> Value {
        json!({ "protocol": "aicc/0.1", "type": "heartbeat", "message_id": "m-update", "meta": { "tick": 2 }, "manifest_update": session_init(sensors, None) })
    }

    #[tokio::test]
    async fn a_bridge_with_every_tool_available_is_ready_at_once() {
        let options =
            scripted_bridge(vec![session_init(&["probe", "bridge_status"], None)], |_| Vec::new())
                .await;
        let ready = wait_until_ready(&options, Duration::from_secs(5)).await.unwrap();
        assert_eq!(ready.tools, 2);
    }

    #[tokio::test]
    async fn a_tool_announced_in_a_manifest_update_makes_the_bridge_ready() {
        let options = scripted_bridge(
            vec![
                session_init(&["bridge_status"], None),
                manifest_update(&["probe", "bridge_status"]),
            ],
            |_| Vec::new(),
        )
        .await;
        assert_eq!(wait_until_ready(&options, Duration::from_secs(5)).await.unwrap().tools, 2);
    }

    #[tokio::test]
    async fn a_tool_found_on_re_fetching_the_manifest_makes_the_bridge_ready() {
        let answer = |message: &Value| match message["type"].as_str() {
            Some("manifest_request") => {
                vec![session_init(&["probe", "bridge_status"], Some(&message["message_id"]))]
            }
            _ => Vec::new(),
        };
        let options = scripted_bridge(vec![session_init(&[], None)], answer).await;
        let ready =
            wait_refetching_every(&options, Duration::from_secs(5), Duration::from_millis(20))
                .await;
        assert_eq!(ready.unwrap().tools, 2);
    }

    #[tokio::test]
    async fn when_time_runs_out_the_tools_still_unavailable_are_listed_with_the_bridges_reasons() {
        let answer = |message: &Value| match (message["type"].as_str(), message["tool"].as_str()) {
            (Some("manifest_request"), _) => {
                vec![session_init(&["bridge_status"], Some(&message["message_id"]))]
            }
            (Some("tool_call"), Some("bridge_status")) => vec![json!({
                "protocol": "aicc/0.1", "type": "tool_result", "call_id": message["call_id"], "ok": true, "meta": { "tick": 3 },
                "output": { "unavailable_tools": { "probe": "no data on /probe for 3.0 s" } },
            })],
            _ => Vec::new(),
        };
        let options = scripted_bridge(vec![session_init(&["bridge_status"], None)], answer).await;
        let error =
            wait_refetching_every(&options, Duration::from_millis(200), Duration::from_millis(20))
                .await
                .unwrap_err();
        assert!(
            matches!(&error, NotReady::StillUnavailable { tools, .. } if tools.len() == 1),
            "{error}"
        );
        let error = error.to_string();
        assert!(error.contains("1 tool(s) of the manifest are still unavailable: probe (no data on /probe for 3.0 s)"), "{error}");
        // Without the status tool, the names alone.
        let options =
            scripted_bridge(vec![session_init(&[], None)], |message: &Value| {
                match message["type"].as_str() {
                    Some("manifest_request") => {
                        vec![session_init(&[], Some(&message["message_id"]))]
                    }
                    _ => Vec::new(),
                }
            })
            .await;
        let error =
            wait_refetching_every(&options, Duration::from_millis(200), Duration::from_millis(20))
                .await
                .unwrap_err()
                .to_string();
        assert!(
            error.contains("2 tool(s) of the manifest are still unavailable: probe, bridge_status"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn tools_the_profile_has_not_configured_are_not_waited_for_and_are_surveyed() {
        // probe is never available: no controller is configured for it.
        let answer = |message: &Value| match (message["type"].as_str(), message["tool"].as_str()) {
            (Some("manifest_request"), _) => {
                vec![session_init(&["bridge_status"], Some(&message["message_id"]))]
            }
            (Some("tool_call"), Some("bridge_status")) => vec![json!({
                "protocol": "aicc/0.1", "type": "tool_result", "call_id": message["call_id"], "ok": true, "meta": { "tick": 3 },
                "output": { "unavailable_tools": { "probe": "no controller is configured for it" } },
            })],
            _ => Vec::new(),
        };
        let options = scripted_bridge(vec![session_init(&["bridge_status"], None)], answer).await;
        let ready =
            wait_refetching_every(&options, Duration::from_secs(5), Duration::from_millis(20))
                .await
                .unwrap();
        assert_eq!(
            ready.offered.not_configured.get("probe").map(String::as_str),
            Some("no controller is configured for it")
        );
        assert!(ready
            .offered
            .skip_reason(&["probe".to_string()].into())
            .unwrap()
            .contains("needs tool probe"));
        // The one-shot survey sees the same.
        let offered = survey(&options).await.unwrap();
        assert_eq!(offered, ready.offered);
        assert_eq!(offered.tools.unwrap().len(), 2);
    }

    fn manifest(sensors: &[&str], actuators: &[&str], granted: Option<&[&str]>) -> Value {
        let mut capabilities =
            json!({ "sensors": sensors, "actuators": actuators, "generators": [] });
        if let Some(granted) = granted {
            capabilities["granted"] = json!(granted);
        }
        json!({
            "capabilities": capabilities,
            "tools": [
                { "id": "vision", "class": "sensor", "capability": "can_observe_world" },
                { "id": "move", "class": "actuator", "capability": "can_move_self" },
                { "id": "memory_query", "class": "sensor" },
            ],
        })
    }

    #[test]
    fn a_tool_not_listed_among_the_capabilities_is_unavailable() {
        assert_eq!(
            unavailable_tools(&manifest(&["vision", "memory_query"], &["move"], None)).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            unavailable_tools(&manifest(&["memory_query"], &[], None)).unwrap(),
            ["vision", "move"]
        );
        assert_eq!(
            unavailable_tools(&manifest(&["vision"], &["move"], None)).unwrap(),
            ["memory_query"],
            "a tool without a capability counts"
        );
    }

    #[test]
    fn tools_of_capabilities_not_granted_are_not_waited_for() {
        let observer = manifest(&["vision", "memory_query"], &[], Some(&["can_observe_world"]));
        assert_eq!(unavailable_tools(&observer).unwrap(), Vec::<String>::new());
        let observer_without_vision =
            manifest(&["memory_query"], &[], Some(&["can_observe_world"]));
        assert_eq!(unavailable_tools(&observer_without_vision).unwrap(), ["vision"]);
    }

    #[test]
    fn a_manifest_of_the_wrong_shape_is_named() {
        let why = |manifest: Value| unavailable_tools(&manifest).unwrap_err().to_string();
        assert!(why(json!({ "capabilities": {} })).contains("no 'tools' array"));
        assert!(why(json!({ "tools": [] })).contains("no 'capabilities' object"));
        assert!(why(json!({ "tools": [], "capabilities": { "sensors": "vision" } }))
            .contains("capabilities.sensors must be an array"));
        assert!(why(json!({ "tools": [{ "class": "sensor" }], "capabilities": {} }))
            .contains("tools.0 has no string 'id'"));
        assert_eq!(
            unavailable_tools(&json!({ "tools": [{ "class": "sensor" }], "capabilities": {} })),
            Err(ManifestShapeError::ToolWithoutId { index: 0 })
        );
    }
}

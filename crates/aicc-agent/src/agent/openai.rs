//! A backend on any OpenAI-compatible chat-completions endpoint (hosted
//! or local LLMs). The manifest's tools become functions (their input
//! schemas the parameters); results go back as `tool` messages, pictures
//! (vision, depth) as image content parts of a user message, events as
//! user text. A reply without tool calls ends the run: success when it
//! starts with "DONE". Endpoint, model and key come from the environment:
//! `AICC_LLM_BASE_URL` (e.g. `https://api.openai.com/v1`, `http://127.0.0.1:8080/v1`),
//! `AICC_LLM_MODEL`, `AICC_LLM_API_KEY` (optional; never printed). HTTPS
//! checks the endpoint against the system's CA bundle (`SSL_CERT_FILE`,
//! default /etc/ssl/certs/ca-certificates.crt).
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{item_json, Backend, Decision, Item, Observation, Request, ToolSpec};
use crate::client::transport::{self, TlsOptions};

/// Largest response body, bytes.
const MAX_RESPONSE_BYTES: usize = 8 << 20;

#[derive(Clone)]
pub struct Endpoint {
    pub scheme_tls: bool,
    pub host: String,
    pub port: u16,
    /// Path prefix, e.g. "/v1".
    pub path: String,
    pub model: String,
    pub api_key: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}:{}{} model {} (key {})",
            if self.scheme_tls { "https" } else { "http" },
            self.host,
            self.port,
            self.path,
            self.model,
            if self.api_key.is_some() { "set" } else { "none" }
        )
    }
}

impl Endpoint {
    /// From a base URL (`http[s]://host[:port][/path]`).
    pub fn parse(base_url: &str, model: &str, api_key: Option<String>) -> Result<Self, String> {
        let (tls, rest) = if let Some(rest) = base_url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = base_url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!(
                "AICC_LLM_BASE_URL must start with http:// or https://, got '{base_url}'"
            ));
        };
        let (authority, path) = rest
            .split_once('/')
            .map_or((rest, String::new()), |(a, p)| (a, format!("/{}", p.trim_end_matches('/'))));
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (
                host.to_string(),
                port.parse().map_err(|_| format!("AICC_LLM_BASE_URL: bad port '{port}'"))?,
            ),
            None => (authority.to_string(), if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err("AICC_LLM_BASE_URL has no host".into());
        }
        if model.is_empty() {
            return Err("AICC_LLM_MODEL is empty".into());
        }
        Ok(Self { scheme_tls: tls, host, port, path, model: model.into(), api_key })
    }

    pub fn from_env() -> Result<Self, String> {
        let base = std::env::var("AICC_LLM_BASE_URL").map_err(|_| {
            "AICC_LLM_BASE_URL is not set (e.g. https://api.openai.com/v1)".to_string()
        })?;
        let model =
            std::env::var("AICC_LLM_MODEL").map_err(|_| "AICC_LLM_MODEL is not set".to_string())?;
        Self::parse(&base, &model, std::env::var("AICC_LLM_API_KEY").ok().filter(|k| !k.is_empty()))
    }

    /// POSTs `body` to `{path}/chat/completions`; the response's JSON.
    pub async fn post(&self, body: &Value, timeout: Duration) -> Result<Value, String> {
        let tls = self.scheme_tls.then(|| TlsOptions {
            ca_file: std::env::var("SSL_CERT_FILE")
                .unwrap_or_else(|_| "/etc/ssl/certs/ca-certificates.crt".into())
                .into(),
            server_name: None,
        });
        let mut stream = transport::connect(&self.host, self.port, tls.as_ref(), timeout)
            .await
            .map_err(|e| e.to_string())?;
        let body = body.to_string();
        let mut request = format!("POST {}/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json\r\nConnection: close\r\nContent-Length: {}\r\n", self.path, self.host, body.len());
        if let Some(key) = &self.api_key {
            request.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        request.push_str("\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("sending to the endpoint: {e}"))?;
        stream
            .write_all(body.as_bytes())
            .await
            .map_err(|e| format!("sending to the endpoint: {e}"))?;
        stream.flush().await.map_err(|e| format!("sending to the endpoint: {e}"))?;
        let mut response = Vec::new();
        stream
            .take(MAX_RESPONSE_BYTES as u64 + 1)
            .read_to_end(&mut response)
            .await
            .map_err(|e| format!("reading the endpoint's answer: {e}"))?;
        if response.len() > MAX_RESPONSE_BYTES {
            return Err(format!("the endpoint's answer is larger than {MAX_RESPONSE_BYTES} bytes"));
        }
        parse_response(&response)
    }
}

/// Status line, headers and body (Content-Length or chunked) of an HTTP/1.1 response.
fn parse_response(raw: &[u8]) -> Result<Value, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("the endpoint's answer has no HTTP header")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut body = raw[split + 4..].to_vec();
    let status: u16 =
        head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| {
            format!("not an HTTP status line: {}", head.lines().next().unwrap_or(""))
        })?;
    if head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:")
            && l.to_ascii_lowercase().contains("chunked")
    }) {
        body = dechunk(&body)?;
    }
    let text = String::from_utf8_lossy(&body);
    if !(200..300).contains(&status) {
        return Err(format!(
            "the endpoint answered HTTP {status}: {}",
            text.chars().take(500).collect::<String>()
        ));
    }
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "the endpoint's answer is not JSON ({e}): {}",
            text.chars().take(200).collect::<String>()
        )
    })
}

fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end =
            body.windows(2).position(|w| w == b"\r\n").ok_or("a chunk without its size line")?;
        let size_text = String::from_utf8_lossy(&body[..line_end]).to_string();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size '{size_text}'"))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size {
            return Err("a chunk shorter than its size".into());
        }
        out.extend_from_slice(&body[..size]);
        body = body.get(size + 2..).unwrap_or(&[]);
    }
}

/// The manifest's tools as chat-completions functions.
pub fn functions(tools: &[ToolSpec]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let parameters = t.descriptor.get("input_schema").cloned().unwrap_or_else(|| json!({ "type": "object" }));
            let description = t.descriptor.get("description").and_then(Value::as_str).unwrap_or("");
            json!({ "type": "function", "function": { "name": t.id, "description": format!("[{}] {description}", t.class), "parameters": parameters } })
        })
        .collect()
}

/// A result's output without its pictures (those go as image parts), and the pictures as data URLs.
fn split_pictures(output: &Value) -> (Value, Vec<String>) {
    let mut text = output.clone();
    let mut urls = Vec::new();
    for (field, mime) in [("jpeg_b64", "image/jpeg"), ("png_b64", "image/png")] {
        if let Some(b64) = output.get(field).and_then(Value::as_str) {
            urls.push(format!("data:{mime};base64,{b64}"));
            text[field] =
                json!(format!("(picture: {} bytes, sent as an image)", b64.len() / 4 * 3));
        }
    }
    (text, urls)
}

pub struct OpenAiBackend {
    endpoint: Endpoint,
    messages: Vec<Value>,
    request_timeout: Duration,
    next_id: u64,
}

impl OpenAiBackend {
    pub fn new(endpoint: Endpoint, goal: &str, request_timeout: Duration) -> Self {
        let system = format!(
            "You control a robot through tools (AICC). Goal: {goal}\nCall tools to perceive and act; results and events come back in tick order. Errors name what was wrong: fix the request rather than repeat it; an actuator is never retried unless its error is retryable. When the goal is reached, answer without tool calls, starting with DONE; if it cannot be reached, start with FAILED."
        );
        Self {
            endpoint,
            messages: vec![json!({ "role": "system", "content": system })],
            request_timeout,
            next_id: 0,
        }
    }

    /// Adds what happened since the last reply to the conversation.
    fn add_observation(&mut self, observation: &Observation) {
        let mut notes = Vec::new();
        let mut images = Vec::new();
        for item in &observation.items {
            match item {
                Item::Result(result) => {
                    let mut value = item_json(item);
                    if let Ok(output) = &result.outcome {
                        let (text, urls) = split_pictures(output);
                        value["output"] = text;
                        images.extend(urls.into_iter().map(|url| (result.tool.clone(), url)));
                    }
                    match &result.request_id {
                        Some(id) => self.messages.push(json!({ "role": "tool", "tool_call_id": id, "content": value.to_string() })),
                        None => notes.push(value.to_string()),
                    }
                }
                Item::Event { .. } => notes.push(item_json(item).to_string()),
            }
        }
        let mut parts = vec![
            json!({ "type": "text", "text": format!("wake: {}; calls left: {}; elapsed {:.1} s{}{}", observation.wake.as_str(), observation.calls_left, observation.elapsed_s, if notes.is_empty() { "" } else { "\n" }, notes.join("\n")) }),
        ];
        for (tool, url) in images {
            parts.push(json!({ "type": "text", "text": format!("picture from {tool}:") }));
            parts.push(json!({ "type": "image_url", "image_url": { "url": url } }));
        }
        self.messages.push(json!({ "role": "user", "content": parts }));
    }

    fn decision(&mut self, response: &Value) -> Result<Decision, String> {
        let message = response
            .pointer("/choices/0/message")
            .ok_or_else(|| {
                format!(
                    "the endpoint's answer has no choices[0].message: {}",
                    response.to_string().chars().take(300).collect::<String>()
                )
            })?
            .clone();
        let calls =
            message.get("tool_calls").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut assistant = json!({ "role": "assistant", "content": message.get("content").cloned().unwrap_or(Value::Null) });
        if calls.is_empty() {
            self.messages.push(assistant);
            let text =
                message.get("content").and_then(Value::as_str).unwrap_or("").trim().to_string();
            return Ok(Decision::Done { success: text.starts_with("DONE"), summary: text });
        }
        let mut requests = Vec::new();
        let mut echoed = Vec::new();
        for call in calls {
            let id =
                call.get("id").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| {
                    self.next_id += 1;
                    format!("call_{}", self.next_id)
                });
            let name =
                call.pointer("/function/name").and_then(Value::as_str).unwrap_or("").to_string();
            let arguments =
                call.pointer("/function/arguments").and_then(Value::as_str).unwrap_or("{}");
            let input = if name.is_empty() {
                Err(format!("a tool call without a function name: {call}"))
            } else if arguments.trim().is_empty() {
                Ok(json!({}))
            } else {
                serde_json::from_str::<Value>(arguments)
                    .map_err(|e| format!("arguments {arguments:?}: {e}"))
            };
            echoed.push(json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments } }));
            requests.push(Request { tool: name, input, id: Some(id) });
        }
        assistant["tool_calls"] = Value::Array(echoed);
        self.messages.push(assistant);
        Ok(Decision::Call(requests))
    }
}

impl Backend for OpenAiBackend {
    fn name(&self) -> String {
        format!("openai {}", self.endpoint.model)
    }

    fn decide<'a>(
        &'a mut self,
        tools: &'a [ToolSpec],
        observation: &'a Observation,
    ) -> BoxFuture<'a, Result<Decision, String>> {
        async move {
            self.add_observation(observation);
            let body = json!({ "model": self.endpoint.model, "messages": self.messages, "tools": functions(tools), "tool_choice": "auto" });
            let response = self.endpoint.post(&body, self.request_timeout).await?;
            self.decision(&response)
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_read_and_bad_ones_named() {
        let e = Endpoint::parse("http://127.0.0.1:8080/v1/", "m", None).unwrap();
        assert_eq!(
            (e.scheme_tls, e.host.as_str(), e.port, e.path.as_str()),
            (false, "127.0.0.1", 8080, "/v1")
        );
        let e = Endpoint::parse("https://api.example.com/v1", "m", Some("k".into())).unwrap();
        assert_eq!((e.scheme_tls, e.port), (true, 443));
        assert!(!format!("{e:?}").contains('k') || format!("{e:?}").contains("key set"));
        assert!(Endpoint::parse("ftp://x", "m", None).unwrap_err().contains("http://"));
        assert!(Endpoint::parse("http://x:port", "m", None).unwrap_err().contains("port"));
        assert!(Endpoint::parse("http://x", "", None).unwrap_err().contains("AICC_LLM_MODEL"));
    }

    #[test]
    fn responses_chunked_or_not_and_http_errors() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
        assert_eq!(parse_response(plain).unwrap(), json!({"a": 1}));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":2}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), json!({"a": 2}));
        let error = parse_response(b"HTTP/1.1 401 Unauthorized\r\n\r\n{\"error\":\"bad key\"}")
            .unwrap_err();
        assert!(error.contains("401") && error.contains("bad key"), "{error}");
    }
}

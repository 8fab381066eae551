//! Round trips of `tools/call` through `aicc mcp`, over stdio and over
//! streamable HTTP, beside the same calls over AICC TCP, against a running
//! bridge: p50 and p99 for proprioception and for vision. Prints figures;
//! asserts nothing.
//!
//!   aicc-bench-mcp --port 43010 [--calls 200] [--vision '{"max_width":320}']
//!
//! The MCP side is a minimal JSON-RPC client written here (so that the
//! figures are the adapter's, not a host library's); `aicc` is taken from
//! beside this binary.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 43010)]
    port: u16,
    /// Calls of each tool on each path.
    #[arg(long, default_value_t = 200)]
    calls: usize,
    /// The vision input.
    #[arg(long, default_value = r#"{"max_width":320}"#)]
    vision: String,
}

/// One way of calling a tool; returns when the answer is in.
trait Caller {
    fn call(&mut self, tool: &str, input: &Value) -> Value;
}

fn main() {
    let args = Args::parse();
    let vision: Value = serde_json::from_str(&args.vision).expect("--vision is a JSON object");
    let aicc = std::env::current_exe().expect("this binary's path").with_file_name("aicc");
    let bridge_args =
        ["--host".to_string(), args.host.clone(), "--port".to_string(), args.port.to_string()];
    println!("{} calls per tool and path; bridge {}:{}", args.calls, args.host, args.port);
    println!("{:<28} {:>10} {:>10}", "path / tool", "p50 ms", "p99 ms");

    let mut tcp = AiccTcp::connect(&args.host, args.port);
    run("aicc tcp", &mut tcp, &args, &vision);

    let mut stdio = McpStdio::start(&aicc, &bridge_args);
    run("mcp stdio", &mut stdio, &args, &vision);
    drop(stdio);

    let http_port =
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = Command::new(&aicc)
        .args(&bridge_args)
        .args(["mcp", "--http", &format!("127.0.0.1:{http_port}")])
        .stdout(Stdio::null())
        .spawn()
        .expect("aicc mcp --http starts");
    let mut http = McpHttp::start(http_port);
    run("mcp http", &mut http, &args, &vision);
    let _ = server.kill();
    let _ = server.wait();
}

fn run(path: &str, caller: &mut dyn Caller, args: &Args, vision: &Value) {
    for (tool, input) in [("proprioception", json!({})), ("vision", vision.clone())] {
        // One call first: connections warm, tools resolved.
        caller.call(tool, &input);
        let mut times_ms: Vec<f64> = (0..args.calls.max(1))
            .map(|_| {
                let started = Instant::now();
                caller.call(tool, &input);
                started.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        times_ms.sort_by(f64::total_cmp);
        let at = |p: f64| times_ms[((times_ms.len() - 1) as f64 * p).round() as usize];
        println!("{:<28} {:>10.2} {:>10.2}", format!("{path} / {tool}"), at(0.50), at(0.99));
    }
}

/// The same calls over AICC TCP, with the project's client library.
struct AiccTcp {
    runtime: tokio::runtime::Runtime,
    session: aicc_agent::client::Session,
}

impl AiccTcp {
    fn connect(host: &str, port: u16) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let session = runtime.block_on(async {
            let stream =
                aicc_agent::client::transport::connect(host, port, None, Duration::from_secs(10))
                    .await
                    .expect("connecting to the bridge");
            aicc_agent::client::Session::open(stream, Default::default())
                .await
                .expect("an AICC session")
        });
        Self { runtime, session }
    }
}

impl Caller for AiccTcp {
    fn call(&mut self, tool: &str, input: &Value) -> Value {
        let outcome = self
            .runtime
            .block_on(self.session.call(tool, input))
            .unwrap_or_else(|e| panic!("{tool}: {e}"));
        outcome.output
    }
}

fn initialize_request() -> Value {
    json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "aicc-bench-mcp", "version": "0" } } })
}

fn call_request(id: u64, tool: &str, input: &Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": tool, "arguments": input } })
}

/// Fails loudly on an MCP error or an isError result (a bench of errors measures nothing).
fn checked(tool: &str, response: Value) -> Value {
    let result = response.get("result").unwrap_or_else(|| panic!("{tool}: {response}"));
    assert_ne!(result["isError"], true, "{tool}: {result}");
    result.clone()
}

/// `aicc mcp` over stdio: one JSON-RPC message per line.
struct McpStdio {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next_id: u64,
}

impl McpStdio {
    fn start(aicc: &std::path::Path, bridge_args: &[String]) -> Self {
        let mut child = Command::new(aicc)
            .args(bridge_args)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("aicc mcp starts");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let mut stdio = Self { child, input, output, next_id: 1 };
        stdio.send(&initialize_request());
        stdio.response(0);
        stdio.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        stdio
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.input, "{message}")
            .and_then(|_| self.input.flush())
            .expect("writing to aicc mcp");
    }

    /// The response to `id` (notifications in between are skipped).
    fn response(&mut self, id: u64) -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.output.read_line(&mut line).expect("reading aicc mcp") > 0,
                "aicc mcp closed its output"
            );
            let message: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
            if message["id"] == id {
                return message;
            }
        }
    }
}

impl Caller for McpStdio {
    fn call(&mut self, tool: &str, input: &Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&call_request(id, tool, input));
        checked(tool, self.response(id))
    }
}

impl Drop for McpStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `aicc mcp --http`: POSTs on one kept-alive connection; the answer comes
/// as JSON or as a server-sent event stream.
struct McpHttp {
    port: u16,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    session: Option<String>,
    next_id: u64,
}

impl McpHttp {
    fn start(port: u16) -> Self {
        let deadline = Instant::now() + Duration::from_secs(20);
        let stream = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(stream) => break stream,
                Err(error) => {
                    assert!(Instant::now() < deadline, "aicc mcp --http did not listen: {error}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        };
        stream.set_nodelay(true).unwrap();
        let mut http = Self {
            port,
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            session: None,
            next_id: 1,
        };
        let (headers, _) = http.post(&initialize_request(), 0);
        http.session = headers
            .iter()
            .find(|(name, _)| name == "mcp-session-id")
            .map(|(_, value)| value.clone());
        assert!(http.session.is_some(), "no Mcp-Session-Id in the initialize response");
        http.post(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }), u64::MAX);
        http
    }

    /// Sends one message; returns the response headers and the JSON-RPC
    /// response to `id` (Null for a notification's empty answer).
    fn post(&mut self, message: &Value, id: u64) -> (Vec<(String, String)>, Value) {
        let body = message.to_string();
        let session = self
            .session
            .as_ref()
            .map(|s| format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-11-25\r\n"))
            .unwrap_or_default();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\n\r\n{body}",
            self.port,
            body.len()
        );
        self.writer.write_all(request.as_bytes()).expect("writing the request");
        let mut status = String::new();
        self.reader.read_line(&mut status).expect("the status line");
        assert!(status.starts_with("HTTP/1.1 2"), "HTTP status: {status}");
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("a header");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let body = if header("transfer-encoding") == Some("chunked") {
            self.read_chunked()
        } else {
            let length: usize = header("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
            let mut body = vec![0; length];
            self.reader.read_exact(&mut body).expect("the body");
            body
        };
        let body = String::from_utf8(body).expect("a UTF-8 body");
        let response = if header("content-type").is_some_and(|t| t.starts_with("text/event-stream"))
        {
            body.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m["id"] == id)
                .unwrap_or(Value::Null)
        } else {
            serde_json::from_str(&body).unwrap_or(Value::Null)
        };
        (headers, response)
    }

    fn read_chunked(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            self.reader.read_line(&mut size).expect("a chunk size");
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .expect("a hexadecimal chunk size");
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).expect("a chunk");
            if size == 0 {
                return body;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
}

impl Caller for McpHttp {
    fn call(&mut self, tool: &str, input: &Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let (_, response) = self.post(&call_request(id, tool, input), id);
        checked(tool, response)
    }
}

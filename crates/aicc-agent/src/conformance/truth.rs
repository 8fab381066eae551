//! A client of the simulator's ground-truth channel (`sim/truth.py`,
//! `aicc_sim.py --truth-listen`): NDJSON over TCP, a `hello` then a `state`
//! line per 20 ms of sim time; commands (scenes, faults) answered by `ack`s.
//! A test stand-in: a real robot has no such thing, so everything judged on
//! it is optional (the conformance runner's `--truth`, the chaos agent).
//!
//! A task reads every line as it comes and feeds the [`Judge`], so that
//! invariants are checked on every sample, whatever the reader of this
//! client is doing at the time.
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::judge::{Figures, Hello, Invariants, Judge, Sample, Violation};

/// Longest line accepted from the simulator.
pub const MAX_LINE_BYTES: usize = 4 << 20;
/// Samples kept for `recent` (10 s at 50 Hz).
pub const RECENT_SAMPLES: usize = 500;

#[derive(Default)]
struct State {
    judge: Option<Judge>,
    latest: Option<(Value, Sample)>,
    recent: VecDeque<(Value, Sample)>,
    acks: HashMap<String, Value>,
    closed: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    changed: Notify,
}

/// One connection to the ground-truth channel.
pub struct TruthClient {
    pub address: String,
    pub hello: Hello,
    pub hello_raw: Value,
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    shared: Arc<Shared>,
    next_id: std::sync::atomic::AtomicU64,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for TruthClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl TruthClient {
    /// Connects and reads the `hello` (within `within`).
    pub async fn connect(address: &str, within: Duration) -> Result<Self, String> {
        let stream = tokio::time::timeout(within, TcpStream::connect(address))
            .await
            .map_err(|_| {
                format!(
                    "connecting to the ground truth at {address} took over {:.0} s",
                    within.as_secs_f64()
                )
            })?
            .map_err(|e| format!("connecting to the ground truth at {address}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        let mut lines = BufReader::new(read);
        let mut first = Vec::new();
        let read_hello = async {
            let mut limited = (&mut lines).take(MAX_LINE_BYTES as u64);
            limited.read_until(b'\n', &mut first).await
        };
        tokio::time::timeout(within, read_hello)
            .await
            .map_err(|_| {
                format!(
                    "no hello from the ground truth at {address} within {:.0} s",
                    within.as_secs_f64()
                )
            })?
            .map_err(|e| format!("reading the ground truth's hello: {e}"))?;
        let hello_raw: Value = serde_json::from_slice(&first).map_err(|e| {
            format!(
                "the ground truth's first line is not JSON ({e}): {}",
                String::from_utf8_lossy(&first)
            )
        })?;
        if hello_raw.get("type").and_then(Value::as_str) != Some("hello") {
            return Err(format!("the ground truth's first line is not a hello: {hello_raw}"));
        }
        let hello: Hello = serde_json::from_value(hello_raw.clone())
            .map_err(|e| format!("the ground truth's hello: {e}"))?;
        let shared =
            Arc::new(Shared { state: Mutex::new(State::default()), changed: Notify::new() });
        let reader = tokio::spawn(read_lines(lines, shared.clone()));
        Ok(TruthClient {
            address: address.to_string(),
            hello,
            hello_raw,
            writer: tokio::sync::Mutex::new(write),
            shared,
            next_id: 1.into(),
            reader,
        })
    }

    /// Starts judging every sample from now on against `invariants`, with
    /// fresh figures (the previous judge's are dropped).
    pub fn judge(&self, invariants: Invariants) {
        self.shared.state.lock().judge = Some(Judge::new(self.hello.clone(), invariants));
    }

    /// Stops judging; returns the judge (violations and figures).
    pub fn take_judge(&self) -> Option<Judge> {
        self.shared.state.lock().judge.take()
    }

    /// The violations found so far (the judge keeps them).
    pub fn violations(&self) -> Vec<Violation> {
        self.shared.state.lock().judge.as_ref().map(|j| j.violations.clone()).unwrap_or_default()
    }

    pub fn figures(&self) -> Option<Figures> {
        self.shared.state.lock().judge.as_ref().map(|j| j.figures.clone())
    }

    /// Runs `f` on the judge, if one is set.
    pub fn with_judge<R>(&self, f: impl FnOnce(&mut Judge) -> R) -> Option<R> {
        self.shared.state.lock().judge.as_mut().map(f)
    }

    /// The latest sample, as sent and parsed.
    pub fn latest(&self) -> Option<(Value, Sample)> {
        self.shared.state.lock().latest.clone()
    }

    /// Samples of the last 10 s, oldest first.
    pub fn recent(&self) -> Vec<Sample> {
        self.shared.state.lock().recent.iter().map(|(_, s)| s.clone()).collect()
    }

    /// Samples of the last 10 s with `seq` after `after`, oldest first, as sent and parsed.
    pub fn since(&self, after: u64) -> Vec<(Value, Sample)> {
        self.shared.state.lock().recent.iter().filter(|(_, s)| s.seq > after).cloned().collect()
    }

    /// Why the channel closed, once it has.
    pub fn closed(&self) -> Option<String> {
        self.shared.state.lock().closed.clone()
    }

    /// Waits for a sample with `seq >= at_least` (within `within`).
    pub async fn sample_at_least(
        &self,
        at_least: u64,
        within: Duration,
    ) -> Result<(Value, Sample), String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.shared.changed.notified();
            {
                let state = self.shared.state.lock();
                if let Some((raw, sample)) = &state.latest {
                    if sample.seq >= at_least {
                        return Ok((raw.clone(), sample.clone()));
                    }
                }
                if let Some(why) = &state.closed {
                    return Err(format!("the ground truth closed ({why})"));
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(format!(
                    "no ground-truth sample with seq >= {at_least} within {:.1} s",
                    within.as_secs_f64()
                ));
            }
        }
    }

    /// Waits for the next sample (after the latest one now).
    pub async fn next_sample(&self, within: Duration) -> Result<(Value, Sample), String> {
        let after = self.latest().map_or(0, |(_, s)| s.seq + 1);
        self.sample_at_least(after, within).await
    }

    /// Sends a command (`{"scene": ...}`, `{"odom_jump": ...}`, ...) and
    /// waits for its ack; returns the seq of the first sample that shows it.
    pub async fn command(&self, command: &Value, within: Duration) -> Result<u64, String> {
        let id =
            format!("aicc-{}", self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let mut message = command.clone();
        let Value::Object(map) = &mut message else {
            return Err(format!("a ground-truth command is a JSON object, not {command}"));
        };
        map.insert("id".into(), json!(id));
        let mut line = serde_json::to_vec(&message).expect("JSON values serialize");
        line.push(b'\n');
        let notified = self.shared.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let mut writer = self.writer.lock().await;
            tokio::time::timeout(within, writer.write_all(&line))
                .await
                .map_err(|_| "writing a ground-truth command timed out".to_string())?
                .map_err(|e| format!("writing a ground-truth command: {e}"))?;
        }
        let deadline = tokio::time::Instant::now() + within;
        loop {
            {
                let mut state = self.shared.state.lock();
                if let Some(ack) = state.acks.remove(&id) {
                    if ack.get("ok") == Some(&Value::Bool(true)) {
                        return Ok(ack.get("seq").and_then(Value::as_u64).unwrap_or(0));
                    }
                    return Err(format!(
                        "the simulator refused {command}: {}",
                        ack.get("error").and_then(Value::as_str).unwrap_or("no reason given")
                    ));
                }
                if let Some(why) = &state.closed {
                    return Err(format!(
                        "the ground truth closed ({why}) before answering {command}"
                    ));
                }
            }
            if tokio::time::timeout_at(deadline, notified.as_mut()).await.is_err() {
                return Err(format!(
                    "no answer from the simulator to {command} within {:.1} s",
                    within.as_secs_f64()
                ));
            }
            notified.set(self.shared.changed.notified());
            notified.as_mut().enable();
        }
    }
}

async fn read_lines(mut lines: BufReader<tokio::net::tcp::OwnedReadHalf>, shared: Arc<Shared>) {
    let mut buffer = Vec::with_capacity(8192);
    let why = loop {
        buffer.clear();
        let read = {
            let mut limited = (&mut lines).take(MAX_LINE_BYTES as u64);
            limited.read_until(b'\n', &mut buffer).await
        };
        match read {
            Ok(0) => break "the simulator closed the connection".to_string(),
            Err(e) => break format!("reading: {e}"),
            Ok(_) if buffer.last() != Some(&b'\n') => {
                break format!("a line longer than {MAX_LINE_BYTES} bytes, or cut off")
            }
            Ok(_) => {}
        }
        let Ok(message) = serde_json::from_slice::<Value>(&buffer) else {
            break format!(
                "a line that is not JSON: {}",
                String::from_utf8_lossy(&buffer[..buffer.len().min(200)])
            );
        };
        match message.get("type").and_then(Value::as_str) {
            Some("state") => match serde_json::from_value::<Sample>(message.clone()) {
                Ok(sample) => {
                    let mut state = shared.state.lock();
                    if let Some(judge) = state.judge.as_mut() {
                        judge.observe(&sample);
                    }
                    if state.recent.len() == RECENT_SAMPLES {
                        state.recent.pop_front();
                    }
                    state.recent.push_back((message.clone(), sample.clone()));
                    state.latest = Some((message, sample));
                }
                Err(e) => break format!("a state line that does not parse ({e})"),
            },
            Some("ack") => {
                let id = message
                    .get("id")
                    .map(|id| id.as_str().map_or_else(|| id.to_string(), str::to_string))
                    .unwrap_or_default();
                shared.state.lock().acks.insert(id, message);
            }
            _ => {}
        }
        shared.changed.notify_waiters();
    };
    shared.state.lock().closed = Some(why);
    shared.changed.notify_waiters();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncBufReadExt;
    use tokio::net::TcpListener;

    /// A fake simulator: a hello, then the given lines; answers commands
    /// with an ack naming seq 7.
    async fn fake(lines: Vec<Value>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read, mut write) = stream.into_split();
            let hello = json!({ "type": "hello", "profile": "sim", "joints": {}, "objects": {}, "room": { "half_size_m": 2.0 } });
            write.write_all(format!("{hello}\n").as_bytes()).await.unwrap();
            let mut commands = tokio::io::BufReader::new(read).lines();
            let mut lines = Some(lines);
            while let Ok(Some(command)) = commands.next_line().await {
                let command: Value = serde_json::from_str(&command).unwrap();
                let ok = command.get("odom_jump").is_some();
                let ack = json!({ "type": "ack", "id": command["id"], "ok": ok, "seq": 7, "error": if ok { Value::Null } else { json!("no such command") } });
                write.write_all(format!("{ack}\n").as_bytes()).await.unwrap();
                // The state lines come after the first command.
                for line in lines.take().into_iter().flatten() {
                    write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
                }
            }
        });
        address
    }

    fn state(seq: u64, contact: bool) -> Value {
        let contacts = if contact {
            json!([{ "robot_geom": "bumper_collision", "robot_body": "bumper_link", "world_geom": "wall_north", "world_body": "world", "first_time": 0.1, "last_time": 0.1 }])
        } else {
            json!([])
        };
        json!({ "type": "state", "seq": seq, "sim_time": seq as f64 * 0.02,
            "base": { "x": 0.0, "y": 0.0, "z": 0.0, "roll": 0.0, "pitch": 0.0, "yaw": 0.0, "linear_mps": [0.0, 0.0, 0.0], "angular_radps": [0.0, 0.0, 0.0] },
            "odom": { "x": 0.0, "y": 0.0, "yaw": 0.0 }, "joints": {}, "objects": {}, "contacts": contacts })
    }

    #[tokio::test]
    async fn samples_are_judged_as_they_come_and_commands_are_acked() {
        let address = fake(vec![state(1, false), state(2, true), state(3, false)]).await;
        let client = TruthClient::connect(&address, Duration::from_secs(5)).await.unwrap();
        client.judge(Invariants { no_contact: true, ..Invariants::default() });
        let seq = client
            .command(&json!({ "odom_jump": { "dx_m": 0.5 } }), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(seq, 7);
        let refused =
            client.command(&json!({ "teleport": {} }), Duration::from_secs(5)).await.unwrap_err();
        assert!(refused.contains("no such command"), "{refused}");
        let (_, sample) = client.sample_at_least(3, Duration::from_secs(5)).await.unwrap();
        assert_eq!(sample.seq, 3);
        let judge = client.take_judge().unwrap();
        assert_eq!(judge.figures.samples, 3);
        assert_eq!(judge.violations.len(), 1, "the contact of seq 2: {:?}", judge.violations);
        assert_eq!(judge.violations[0].seq, 2);
        assert_eq!(client.recent().len(), 3);
        assert!(client
            .sample_at_least(9, Duration::from_millis(200))
            .await
            .unwrap_err()
            .contains("seq >= 9"));
    }

    #[tokio::test]
    async fn a_first_line_that_is_not_a_hello_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            stream.write_all(b"{\"type\":\"state\"}\n").await.unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
        });
        let error = TruthClient::connect(&address, Duration::from_secs(5)).await.err().unwrap();
        assert!(error.contains("not a hello"), "{error}");
    }
}

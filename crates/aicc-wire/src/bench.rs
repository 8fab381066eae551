//! Round trips as the benchmarks measure them (figures printed, never
//! asserted), and the floor they are printed beside.
//!
//! - [`LineClient`]: a blocking NDJSON client; each request is written
//!   whole, then lines are read (and parsed) until the answer comes.
//! - [`EchoFloor`]: a bare tokio loopback server that answers every line
//!   with one canned reply. Measured with the same client, the same
//!   request and the same reply bytes as the bridge, it is what the
//!   machine allows; the bridge's figure divided by it survives a noisy
//!   machine better than the figure alone.
use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// A blocking client of one connection.
pub struct LineClient {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    line: String,
}

impl LineClient {
    /// Connects with Nagle's algorithm off (as the bridge's own sockets).
    pub fn connect(address: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            line: String::new(),
        })
    }

    /// Writes `line` (which ends with its newline) in one write.
    pub fn send(&mut self, line: &[u8]) -> io::Result<()> {
        self.writer.write_all(line)
    }

    /// The next line, as received (with its newline).
    pub fn read_line(&mut self) -> io::Result<&str> {
        self.line.clear();
        if self.reader.read_line(&mut self.line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(&self.line)
    }

    /// The next line, parsed.
    pub fn read(&mut self) -> io::Result<Value> {
        let line = self.read_line()?;
        serde_json::from_str(line).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("not a JSON line: {e}"))
        })
    }

    /// One round trip: sends `request`, reads until `is_answer` accepts a
    /// message; returns it and the time taken.
    pub fn round_trip(
        &mut self,
        request: &[u8],
        is_answer: impl Fn(&Value) -> bool,
    ) -> io::Result<(Value, Duration)> {
        let started = Instant::now();
        self.send(request)?;
        loop {
            let message = self.read()?;
            if is_answer(&message) {
                return Ok((message, started.elapsed()));
            }
        }
    }
}

/// What a benchmark asks on each connection: the `n`th request line and
/// whether a message answers it.
pub trait Exchange: Sync {
    fn request(&self, n: usize) -> Vec<u8>;
    fn is_answer(&self, message: &Value, n: usize) -> bool;
}

/// A call of `tool` with empty input, call ids `c<n>`; a failed call
/// stops the benchmark (its figures would mean nothing).
pub struct ToolCall {
    pub tool: String,
}

impl Exchange for ToolCall {
    fn request(&self, n: usize) -> Vec<u8> {
        let tool = Value::String(self.tool.clone());
        format!("{{\"protocol\":\"aicc/0.1\",\"type\":\"tool_call\",\"call_id\":\"c{n}\",\"tool\":{tool},\"input\":{{}}}}\n").into_bytes()
    }

    fn is_answer(&self, message: &Value, n: usize) -> bool {
        let answers = message["type"] == "tool_result"
            && message["call_id"].as_str().and_then(|id| id.strip_prefix('c'))
                == Some(n.to_string().as_str());
        assert!(!answers || message["ok"] == true, "the call failed: {message}");
        answers
    }
}

/// The same requests, answered by the floor's canned reply.
pub struct Echo<'a>(pub &'a ToolCall);

impl Exchange for Echo<'_> {
    fn request(&self, n: usize) -> Vec<u8> {
        self.0.request(n)
    }

    fn is_answer(&self, _message: &Value, _n: usize) -> bool {
        true
    }
}

/// Round trips of `calls` requests, one after the other; request numbers
/// start at `first`.
pub fn round_trips(
    client: &mut LineClient,
    exchange: &dyn Exchange,
    first: usize,
    calls: usize,
) -> io::Result<Latencies> {
    let mut samples = Vec::with_capacity(calls);
    for n in first..first + calls {
        let request = exchange.request(n);
        samples.push(client.round_trip(&request, |message| exchange.is_answer(message, n))?.1);
    }
    Ok(Latencies::new(samples))
}

/// Calls per second over `connections` connections at once, each doing
/// `calls` round trips one after the other (a thread each).
pub fn calls_per_second(
    connections: usize,
    calls: usize,
    connect: &(dyn Fn() -> io::Result<LineClient> + Sync),
    exchange: &dyn Exchange,
) -> io::Result<f64> {
    let mut clients = (0..connections).map(|_| connect()).collect::<io::Result<Vec<_>>>()?;
    let started = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(index, client)| {
                scope.spawn(move || round_trips(client, exchange, index * calls, calls).map(|_| ()))
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|worker| worker.join().expect("a benchmark thread panicked"))
    })?;
    Ok((connections * calls) as f64 / started.elapsed().as_secs_f64())
}

/// Round-trip times of a run.
#[derive(Debug, Clone)]
pub struct Latencies {
    sorted: Vec<Duration>,
    total: Duration,
}

impl Latencies {
    pub fn new(mut samples: Vec<Duration>) -> Self {
        let total = samples.iter().sum();
        samples.sort();
        Self { sorted: samples, total }
    }

    /// Merges runs (rounds of one measurement).
    pub fn merged<'a>(runs: impl IntoIterator<Item = &'a Latencies>) -> Self {
        Self::new(runs.into_iter().flat_map(|run| run.sorted.iter().copied()).collect())
    }

    /// The `q` quantile (0..=1) in microseconds.
    pub fn quantile_us(&self, q: f64) -> f64 {
        match self.sorted.len() {
            0 => f64::NAN,
            n => self.sorted[((n - 1) as f64 * q).round() as usize].as_secs_f64() * 1e6,
        }
    }

    /// Calls per second, one after the other.
    pub fn calls_per_second(&self) -> f64 {
        self.sorted.len() as f64 / self.total.as_secs_f64()
    }
}

/// A bare loopback echo on a runtime of its own (two workers, as the
/// bridge's): every line received is answered with `reply`. Stops when
/// dropped.
pub struct EchoFloor {
    pub address: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EchoFloor {
    /// `reply` is written as given (it ends with its newline).
    pub fn start(reply: Vec<u8>) -> io::Result<Self> {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let address = listener.local_addr()?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let reply: std::sync::Arc<[u8]> = reply.into();
                let serve = async {
                    while let Ok((stream, _)) = listener.accept().await {
                        let reply = reply.clone();
                        tokio::spawn(async move {
                            let _ = stream.set_nodelay(true);
                            let mut stream = tokio::io::BufReader::new(stream);
                            let mut line = Vec::new();
                            loop {
                                line.clear();
                                match stream.read_until(b'\n', &mut line).await {
                                    Ok(0) | Err(_) => return,
                                    Ok(_) => {}
                                }
                                if stream.get_mut().write_all(&reply).await.is_err() {
                                    return;
                                }
                            }
                        });
                    }
                };
                tokio::select! {
                    () = serve => {}
                    _ = stopped => {}
                }
            });
        });
        Ok(Self { address, shutdown: Some(shutdown), thread: Some(thread) })
    }
}

impl Drop for EchoFloor {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `figure` beside `floor`, as benchmarks print it: "118.0 us (2.31x the
/// floor's 51.1 us)".
pub fn beside_floor(figure: f64, floor: f64, unit: &str) -> String {
    format!("{figure:.1} {unit} ({:.2}x the floor's {floor:.1} {unit})", figure / floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_is_one_json_line_with_its_call_id_and_an_escaped_tool_name() {
        let call = ToolCall { tool: "odd\"name".into() };
        let line = call.request(7);
        assert_eq!(line.last(), Some(&b'\n'));
        let message: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            (&message["type"], &message["call_id"], &message["tool"], &message["input"]),
            (
                &Value::from("tool_call"),
                &Value::from("c7"),
                &Value::from("odd\"name"),
                &serde_json::json!({})
            )
        );
        let result = serde_json::json!({ "type": "tool_result", "call_id": "c7", "ok": true });
        assert!(call.is_answer(&result, 7));
        assert!(!call.is_answer(&result, 8));
        assert!(
            Echo(&call).is_answer(&Value::Null, 8),
            "the floor's canned reply answers any request"
        );
    }

    struct Ping;

    impl Exchange for Ping {
        fn request(&self, n: usize) -> Vec<u8> {
            format!("{{\"n\":{n}}}\n").into_bytes()
        }
        fn is_answer(&self, message: &Value, _n: usize) -> bool {
            message["pong"] == true
        }
    }

    #[test]
    fn the_floor_answers_every_line_with_its_reply() {
        let floor = EchoFloor::start(b"{\"pong\":true}\n".to_vec()).unwrap();
        let mut client = LineClient::connect(floor.address).unwrap();
        let run = round_trips(&mut client, &Ping, 0, 20).unwrap();
        assert!(run.quantile_us(0.5) > 0.0 && run.calls_per_second() > 0.0);
        let parallel =
            calls_per_second(3, 10, &|| LineClient::connect(floor.address), &Ping).unwrap();
        assert!(parallel > 0.0);
    }

    #[test]
    fn quantiles_are_taken_from_the_sorted_samples() {
        let run = Latencies::new([5, 1, 3, 2, 4].map(Duration::from_micros).to_vec());
        assert_eq!(
            (run.quantile_us(0.0), run.quantile_us(0.5), run.quantile_us(1.0)),
            (1.0, 3.0, 5.0)
        );
        let both = Latencies::merged([&run, &Latencies::new(vec![Duration::from_micros(6)])]);
        assert_eq!(both.quantile_us(1.0), 6.0);
        assert_eq!(beside_floor(100.0, 50.0, "us"), "100.0 us (2.00x the floor's 50.0 us)");
    }
}

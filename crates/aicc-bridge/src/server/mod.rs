//! The TCP (or TLS) shell around the protocol core: it moves bytes, runs
//! tools, and applies what the [`Core`] decides. One task reads each
//! connection, one writes it through a bounded [`Outbox`].
pub mod outbox;
pub mod slots;
pub mod tls;
pub mod trim;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::protocol::auth::Scope;
use crate::protocol::codec::{Frame, LineFramer};
use crate::protocol::core::{ConnId, Core, Output, ToolSuccess};
use crate::protocol::ids::{IdSource, RandomIds};
use crate::protocol::message::envelope;
use crate::protocol::{AiccError, ErrorCode};
use crate::tap::{Tap, TapBody};
use crate::tools::{Registry, ToolContext};
use outbox::{Outbox, OutboxLimits};

/// Bytes read at once from a connection: its read buffer, held per
/// connection, so small; a long line takes several reads.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Lines handled in a row before the connection's task lets others run:
/// a peer that sends a burst of requests does not hold a worker thread
/// (one: a healthy agent's p99 during a flood of ten connections halved
/// against eight, see aicc-bench-load).
const FRAMES_PER_TURN: usize = 1;
/// Bytes buffered each way on an in-process connection.
const IN_PROCESS_BUFFER_BYTES: usize = 256 * 1024;
/// Executions handed to a connection by another one's line (an operator's
/// `approve` starts the agent's waiting call) not yet taken up by it.
const HANDOVER_QUEUE: usize = 64;

/// The AICC listener's refusal: an `error` envelope, retryable.
struct AiccRefusal {
    max_connections: usize,
    per_address: usize,
}

impl slots::Refusal for AiccRefusal {
    const LOG_PREFIX: &'static str = "";

    fn why(&self, cap: slots::CapReached, peer: std::net::IpAddr) -> String {
        let (max_connections, per_address) = (self.max_connections, self.per_address);
        match cap {
            slots::CapReached::Total => format!("the bridge serves at most {max_connections} connections; retry later"),
            slots::CapReached::PerAddress => format!("the bridge serves at most {per_address} connections from one address ({peer}; security.max_connections_per_address); retry when one of them has closed"),
        }
    }

    fn line(&self, why: String) -> Vec<u8> {
        let error = AiccError::new(ErrorCode::ToolUnavailable, true, why);
        let mut line =
            serde_json::to_vec(&envelope("error", "", RandomIds.next_id(), error.to_json()))
                .expect("serializable");
        line.push(b'\n');
        line
    }
}

/// Everything the connections share.
pub struct Bridge {
    pub core: Mutex<Core>,
    outboxes: Mutex<HashMap<ConnId, Arc<Outbox>>>,
    /// Where to hand a connection the executions of its calls that another
    /// connection's line released: they run among its own tools, so they
    /// end with it (the deadman) and its `cancel` finds them.
    handovers: Mutex<HashMap<ConnId, tokio::sync::mpsc::Sender<Output>>>,
    registry: Registry,
    tools: ToolContext,
    next_conn: AtomicU64,
    max_line_bytes: usize,
    outbox_limits: OutboxLimits,
    /// TLS handshake bound (authentication's is the core's).
    handshake_timeout: Duration,
    tool_timeout: Duration,
    trimmer: trim::Trimmer,
    /// A copy of the traffic for observers that are not agents (recorder,
    /// console): bounded, never waited for.
    pub tap: Tap,
}

impl Bridge {
    pub fn new(core: Core, registry: Registry, tools: ToolContext) -> Arc<Self> {
        let config = tools.config.clone();
        Arc::new(Self {
            core: Mutex::new(core),
            outboxes: Mutex::new(HashMap::new()),
            handovers: Mutex::new(HashMap::new()),
            registry,
            tools,
            next_conn: AtomicU64::new(1),
            max_line_bytes: config.max_line_bytes,
            outbox_limits: OutboxLimits {
                messages: config.outbound_queue,
                bytes: config.outbound_queue_bytes,
                write_stall: Duration::from_secs_f64(config.write_stall_timeout_s),
            },
            handshake_timeout: Duration::from_secs_f64(config.handshake_timeout_s),
            tool_timeout: Duration::from_secs_f64(config.tool_timeout_s),
            trimmer: trim::Trimmer::default(),
            tap: Tap::default(),
        })
    }

    /// The configuration the bridge runs with.
    pub fn config(&self) -> Arc<crate::config::Config> {
        self.tools.config.clone()
    }

    /// The settings that may change while it runs.
    pub fn live(&self) -> Arc<crate::live::Live> {
        self.tools.live.clone()
    }

    /// The stop generation: it moves at every `stop`, from any front end
    /// (see robot::halt). A front end with work of its own queued (the
    /// AI-control dialect) drops what it accepted before a stop.
    pub fn stop_generation(&self) -> u64 {
        self.tools.base.begin_motion()
    }

    /// Publishes an event from the robot side (sensors, governor).
    pub fn publish(&self, topic: &str, payload: Value, audience: Option<&str>) {
        let mut core = self.core.lock();
        self.tap.record(None, || TapBody::Event {
            topic: topic.to_string(),
            payload: Arc::new(payload.clone()),
            audience: audience.map(str::to_string),
        });
        let outputs = core.publish(topic, payload, audience, Instant::now());
        self.apply(outputs);
    }

    /// Carries out outputs; returns the tool executions for the caller to
    /// run (they belong to the connection that asked for them).
    /// Called with the core locked, so output order is tick order.
    fn apply(&self, outputs: Vec<Output>) -> Vec<Output> {
        let mut executions = Vec::new();
        let outboxes = self.outboxes.lock();
        for output in outputs {
            match output {
                Output::Send { conn, message, droppable } => {
                    // Observed: the tap shares the message (no copy under the core's lock).
                    if self.tap.is_observed() {
                        let message = Arc::new(message);
                        self.tap.record(Some(conn), || TapBody::Outbound {
                            message: message.clone(),
                            droppable,
                        });
                        if let Some(outbox) = outboxes.get(&conn) {
                            outbox.push_ref(&message, droppable);
                        }
                    } else if let Some(outbox) = outboxes.get(&conn) {
                        outbox.push(message, droppable);
                    }
                }
                Output::Close { conn } => {
                    if let Some(outbox) = outboxes.get(&conn) {
                        outbox.close();
                    }
                }
                Output::LeaseReleased { .. } => {
                    self.tap.record(None, || TapBody::LeaseReleased);
                    self.tools.base.stop();
                }
                Output::Halt => self.tools.base.halt(),
                own @ (Output::Execute { .. } | Output::Abort { .. }) => executions.push(own),
            }
        }
        executions
    }

    /// Runs the core's timers until the task is dropped.
    pub async fn run_timers(self: Arc<Self>, period: Duration) {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            interval.tick().await;
            let mut core = self.core.lock();
            let outputs = core.on_timer(Instant::now());
            self.apply(outputs);
        }
    }

    /// Forwards events raised by tools to the agents.
    pub async fn run_tool_events(
        self: Arc<Self>,
        mut events: tokio::sync::mpsc::Receiver<crate::robot_events::RobotEvent>,
    ) {
        while let Some(event) = events.recv().await {
            self.publish(&event.topic, event.payload, event.session.as_deref());
        }
    }

    /// Checks every tool's data source periodically and pushes changes
    /// (a sensor gone silent, or back) to the agents.
    pub async fn run_availability_watch(self: Arc<Self>, period: Duration) {
        let mut interval = tokio::time::interval(period);
        loop {
            interval.tick().await;
            let now = Instant::now();
            let availability: Vec<(String, Option<String>)> = self
                .registry
                .tools_by_id()
                .map(|(id, tool)| (id.to_string(), tool.unavailable_reason(&self.tools, now)))
                .collect();
            {
                let mut core = self.core.lock();
                let outputs = core.set_tools_availability(availability, Instant::now());
                self.apply(outputs);
            }
            // Queue occupancy and sensor deliveries, for operators' status.
            let occupancy: Vec<(ConnId, usize, usize)> = self
                .outboxes
                .lock()
                .iter()
                .map(|(conn, outbox)| {
                    (*conn, outbox.occupancy().messages, outbox.occupancy().bytes)
                })
                .collect();
            let sensors =
                serde_json::to_value(self.tools.sensors.statistics()).unwrap_or(Value::Null);
            let base_output = self.tools.base.output_unavailable().map(|error| error.to_string());
            {
                let mut core = self.core.lock();
                core.note_outbound(
                    occupancy,
                    self.outbox_limits.messages,
                    self.outbox_limits.bytes,
                );
                core.note_sensors(sensors);
                core.note_base_output(base_output);
            }
            if self.trimmer.take_due(now) {
                let started = Instant::now();
                // Off the async workers: it may take a few milliseconds.
                let _ = tokio::task::spawn_blocking(trim::release_free_memory).await;
                tracing::debug!(
                    elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
                    "freed heap returned to the system"
                );
            }
        }
    }

    /// Accepts connections until the task is dropped.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        tls: Option<tokio_rustls::TlsAcceptor>,
        max_connections: usize,
    ) {
        let per_address = self.tools.config.security.max_connections_per_address;
        if let Ok(address) = listener.local_addr() {
            self.core.lock().note_listener(
                format!("{}://{address}", if tls.is_some() { "tls" } else { "tcp" }),
                max_connections,
            );
        }
        let caps = slots::ConnectionCaps::new(max_connections, per_address);
        let refusal = AiccRefusal { max_connections, per_address };
        loop {
            let (stream, peer, admitted) =
                slots::accept_within(&listener, &caps, &refusal, self.handshake_timeout).await;
            let bridge = self.clone();
            let tls = tls.clone();
            // The handshake runs in the connection's own task: the accept
            // loop never waits for a peer.
            tokio::spawn(async move {
                let result = match tls {
                    Some(acceptor) => match tokio::time::timeout(
                        bridge.handshake_timeout,
                        acceptor.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(stream)) => {
                            bridge.handle_connection(stream, None, peer.to_string()).await
                        }
                        Ok(Err(error)) => Err(error),
                        Err(_) => Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!(
                                "TLS handshake not done within {:.1} s (handshake_timeout_s)",
                                bridge.handshake_timeout.as_secs_f64()
                            ),
                        )),
                    },
                    None => bridge.handle_connection(stream, None, peer.to_string()).await,
                };
                if let Err(error) = result {
                    tracing::info!(%peer, %error, "connection ended with an error");
                }
                drop(admitted);
            });
        }
    }

    /// Opens an AICC connection from inside the process (a second front
    /// end speaking AICC to the same core), granted `scope` without a
    /// token; the caller holds the other end of the returned stream. It is
    /// served like a network connection (validation, governor, lease, rate
    /// limits, events), but no listener leads to it.
    pub fn connect_in_process(
        self: &Arc<Self>,
        scope: Scope,
        front_end: &'static str,
    ) -> tokio::io::DuplexStream {
        let (ours, theirs) = tokio::io::duplex(IN_PROCESS_BUFFER_BYTES);
        let bridge = self.clone();
        tokio::spawn(async move {
            if let Err(error) = bridge
                .handle_connection(
                    ours,
                    Some((scope, front_end)),
                    format!("in-process {front_end}"),
                )
                .await
            {
                tracing::info!(%error, "in-process connection ended with an error");
            }
        });
        theirs
    }

    /// `granted`: the scope and front end of an in-process connection (no authentication);
    /// None for network connections. `peer`: its address, for observers.
    async fn handle_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
        self: Arc<Self>,
        stream: S,
        granted: Option<(Scope, &'static str)>,
        peer: String,
    ) -> std::io::Result<()> {
        let conn = self.next_conn.fetch_add(1, Ordering::Relaxed);
        self.tap.record(Some(conn), || TapBody::Connected { peer });
        let outbox = Arc::new(Outbox::new(self.outbox_limits));
        self.outboxes.lock().insert(conn, outbox.clone());
        let (mut reader, writer) = tokio::io::split(stream);
        let writer_outbox = outbox.clone();
        let writer_task = tokio::spawn(async move {
            let written = writer_outbox.write_to(writer).await;
            if let Err(error) = &written {
                if error.kind() == std::io::ErrorKind::TimedOut {
                    tracing::warn!(conn, %error, "closing the connection: its peer stopped reading");
                }
            }
            written
        });
        // Tool tasks of this connection: aborted with it, so a vanished
        // agent's motion stops (its setpoints expire: the deadman).
        let mut running_tools: JoinSet<()> = JoinSet::new();
        // Abort handles of this connection's calls, for `cancel`.
        let mut call_handles: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
        let (handover_tx, mut handovers) = tokio::sync::mpsc::channel(HANDOVER_QUEUE);
        self.handovers.lock().insert(conn, handover_tx);
        tracing::info!(conn, "agent connected");
        {
            let mut core = self.core.lock();
            let outputs = match granted {
                Some((scope, front_end)) => {
                    core.on_connect_in_process(conn, scope, front_end, Instant::now())
                }
                None => core.on_connect(conn, Instant::now()),
            };
            let executions = self.apply(outputs);
            debug_assert!(executions.is_empty());
        }
        let mut framer = LineFramer::new(self.max_line_bytes);
        let mut buffer = vec![0u8; READ_CHUNK_BYTES];
        let result = loop {
            if outbox.is_closed() {
                break Ok(());
            }
            // Backpressure: a peer that does not read its replies stops
            // being read from, so replies never pile up without bound.
            outbox.wait_for_room().await;
            if outbox.is_closed() {
                break Ok(());
            }
            let read = tokio::select! {
                read = reader.read(&mut buffer) => read,
                () = outbox.closed() => break Ok(()),
                Some(_) = running_tools.join_next(), if !running_tools.is_empty() => continue,
                Some(execution) = handovers.recv() => {
                    self.carry_out(execution, &mut running_tools, &mut call_handles);
                    continue;
                }
            };
            let read = match read {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(error) => break Err(error),
            };
            framer.push(&buffer[..read]);
            let mut handled = 0usize;
            while let Some(frame) = self.next_frame_when_room(&mut framer, &outbox).await {
                // Between lines, not before the first: a yield hands the
                // task to the back of the queue and wakes the other worker
                // thread, a cost per call that a lone request need not pay.
                if handled > 0 && handled.is_multiple_of(FRAMES_PER_TURN) {
                    tokio::task::yield_now().await;
                }
                handled += 1;
                let executions = {
                    let mut core = self.core.lock();
                    let now = Instant::now();
                    let outputs = match frame {
                        Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace) => continue,
                        Frame::Line(line) => {
                            self.tap.record(Some(conn), || TapBody::Inbound {
                                line: Arc::from(line.as_slice()),
                            });
                            core.on_line(conn, &line, now)
                        }
                        Frame::Oversized { limit_bytes } => {
                            let error = AiccError::invalid_input(format!(
                                "line exceeds the {limit_bytes}-byte limit; closing the connection"
                            ));
                            let correlation = Default::default();
                            vec![
                                core.error_message(conn, error, &correlation, now),
                                Output::Close { conn },
                            ]
                        }
                    };
                    self.apply(outputs)
                };
                for execution in executions {
                    match execution {
                        Output::Execute { conn: owner, .. } | Output::Abort { conn: owner, .. }
                            if owner != conn =>
                        {
                            self.hand_over(owner, execution)
                        }
                        own => self.carry_out(own, &mut running_tools, &mut call_handles),
                    }
                }
            }
        };
        self.handovers.lock().remove(&conn);
        running_tools.abort_all();
        {
            let mut core = self.core.lock();
            let outputs = core.on_disconnect(conn, Instant::now());
            self.apply(outputs);
            self.tap.record(Some(conn), || TapBody::Disconnected);
        }
        outbox.close();
        let written = writer_task.await;
        self.outboxes.lock().remove(&conn);
        self.trimmer.note_freed();
        tracing::info!(conn, "agent disconnected");
        match (result, written) {
            (Err(error), _) | (Ok(()), Ok(Err(error))) => Err(error),
            _ => Ok(()),
        }
    }

    /// The next complete line, once the outbound queue is under its bounds:
    /// requests already received wait, unparsed, for the agent to read its
    /// replies. None when no whole line is buffered or the connection closed.
    async fn next_frame_when_room(
        &self,
        framer: &mut LineFramer,
        outbox: &Outbox,
    ) -> Option<Frame> {
        if !framer.has_frame() {
            return None;
        }
        outbox.wait_for_room().await;
        if outbox.is_closed() {
            return None;
        }
        framer.next_frame()
    }

    /// Runs or aborts one of this connection's calls.
    fn carry_out(
        self: &Arc<Self>,
        execution: Output,
        running_tools: &mut JoinSet<()>,
        call_handles: &mut HashMap<String, tokio::task::AbortHandle>,
    ) {
        match execution {
            Output::Abort { call_id, .. } => {
                if let Some(handle) = call_handles.remove(&call_id) {
                    handle.abort();
                }
            }
            execute => {
                if let Some((call_id, handle)) = self.spawn_tool(execute, running_tools) {
                    call_handles.retain(|_, h| !h.is_finished());
                    call_handles.insert(call_id, handle);
                }
            }
        }
    }

    /// Gives `owner`'s connection an execution another connection's line
    /// released. A call that cannot be handed over (its connection is
    /// gone, or its queue full) ends with an error, never silently.
    fn hand_over(&self, owner: ConnId, execution: Output) {
        let sender = self.handovers.lock().get(&owner).cloned();
        let refused = match sender {
            Some(sender) => sender.try_send(execution).err().map(|e| e.into_inner()),
            None => Some(execution),
        };
        if let Some(Output::Execute { session, call_id, tool, .. }) = refused {
            tracing::warn!(conn = owner, %call_id, %tool, "an approved call could not be started on its connection");
            let error = AiccError::execution_failed(true, format!("'{tool}' was approved but could not be started (its connection is gone or busy); nothing was moved"));
            let mut core = self.core.lock();
            let outputs = core.on_tool_finished(&session, &call_id, Err(error), Instant::now());
            self.apply(outputs);
        }
    }

    /// Runs a call. Its first poll runs here, in the connection's task: a
    /// tool whose answer is at hand (a sensor read) is done without a task
    /// of its own, whose start and end would each wake a task, often on
    /// the other worker thread. One that waits (motion, an image encoded
    /// off the workers) goes on in a task of this connection, its deadline
    /// counted from now. Returns the task's abort handle, if it has one.
    fn spawn_tool(
        self: &Arc<Self>,
        execution: Output,
        running_tools: &mut JoinSet<()>,
    ) -> Option<(String, tokio::task::AbortHandle)> {
        let Output::Execute { session, call_id, tool, input, deadline, .. } = execution else {
            return None;
        };
        let context = ToolContext {
            session: session.clone(),
            call_id: call_id.clone(),
            ..self.tools.clone()
        };
        let future = match self.registry.get(&tool) {
            Some(tool) => tool.call(input, context),
            None => {
                let error = AiccError::new(
                    ErrorCode::InternalError,
                    false,
                    format!("tool '{tool}' is in the manifest but not registered"),
                );
                async move { Err(error) }.boxed()
            }
        };
        let timeout = deadline.map_or(self.tool_timeout, |d| d.min(self.tool_timeout));
        let expires = tokio::time::Instant::now() + timeout;
        let mut future = AssertUnwindSafe(future).catch_unwind().boxed();
        let panicked = |tool: &str| {
            AiccError::new(
                ErrorCode::InternalError,
                false,
                format!("tool '{tool}' failed inside the bridge (a bug); the robot was stopped"),
            )
        };
        if let Some(outcome) = (&mut future).now_or_never() {
            let outcome = outcome.unwrap_or_else(|_panic| Err(panicked(&tool)));
            let mut core = self.core.lock();
            let outputs = core.on_tool_finished(&session, &call_id, outcome, Instant::now());
            self.apply(outputs);
            return None;
        }
        let bridge = self.clone();
        let handle_call_id = call_id.clone();
        let handle = running_tools.spawn(async move {
            let outcome: Result<ToolSuccess, AiccError> =
                match tokio::time::timeout_at(expires, future).await {
                    Ok(Ok(outcome)) => outcome,
                    Ok(Err(_panic)) => Err(panicked(&tool)),
                    Err(_) => Err(AiccError::new(
                        ErrorCode::Timeout,
                        true,
                        format!(
                            "tool '{tool}' exceeded its {:.1} s deadline; the robot was stopped",
                            timeout.as_secs_f64()
                        ),
                    )),
                };
            let mut core = bridge.core.lock();
            let outputs = core.on_tool_finished(&session, &call_id, outcome, Instant::now());
            bridge.apply(outputs);
        });
        Some((handle_call_id, handle))
    }
}

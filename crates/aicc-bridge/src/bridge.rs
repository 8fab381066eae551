//! The bridge assembled: from a configuration and a [`Robot`] to running
//! listeners, the governed drivers, the sensor monitors and the protocol
//! core, until a shutdown future resolves. The ROS node's main calls
//! [`run`] with the ROS robot; tests call it in-process with a test robot.
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::diagnostics::{FrameCheck, FramesReport};
use crate::governor::JointLimits;
use crate::live::Live;
use crate::protocol::auth::Tokens;
use crate::protocol::core::{Core, CoreConfig};
use crate::robot::base_driver::{BaseDriver, BaseSettings, GovernorChange, GuardSensors};
use crate::robot::frames::{Frames, BASE_FRAME};
use crate::robot::halt::Halts;
use crate::robot::joint_driver::{JointDriver, JointSettings};
use crate::robot::kinematics::Kinematics;
use crate::robot::{monitor, Diagnostic, Robot, SignalPort};
use crate::robot_events::{EventSender, RobotEvent};
use crate::server::Bridge;
use crate::tools::{Registry, ToolContext};

/// Events from tools, the governor and the monitors waiting for the core.
const TOOL_EVENT_QUEUE: usize = 1024;
/// How often every tool's data source is checked (manifest updates).
const AVAILABILITY_PERIOD: Duration = Duration::from_millis(250);
/// How often the bridge's state goes to /diagnostics (aggregators mark a
/// source silent for a few seconds as stale).
const DIAGNOSTICS_PERIOD: Duration = Duration::from_secs(1);

/// What the bridge needs besides the robot, checked before anything starts.
pub struct Startup {
    pub config: Arc<Config>,
    /// The node's name, in diagnostics' names.
    pub node_name: String,
    /// The settings that may change while the bridge runs (shared with
    /// whoever changes them: the ROS parameter services).
    pub live: Arc<Live>,
    pub tokens: Tokens,
    pub tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Startup {
    /// Reads the tokens from `env` and the TLS files, and refuses a
    /// non-loopback listener without `security.allow_remote` and a token,
    /// or without TLS unless `security.allow_plaintext_remote` (then loud).
    pub fn from_config(
        config: Arc<Config>,
        env: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Self> {
        let tokens = config.security.load_tokens(env).map_err(|e| anyhow::anyhow!("{e}"))?;
        let listen: SocketAddr = config.listen.parse().context("parsing listen address")?;
        let security = &config.security;
        check_remote(
            listen,
            "the AICC listener (listen)",
            security,
            !tokens.is_empty(),
            !security.tls_cert_file.is_empty(),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        if config.ai_control.enabled {
            let address: SocketAddr =
                config.ai_control.listen.parse().context("parsing ai_control.listen")?;
            crate::ai_control::check_listen_address(
                address,
                security.allow_remote,
                !tokens.is_empty(),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            // The dialect has no TLS: remote, it is plain text or nothing.
            check_remote(
                address,
                "the AI-control listener (ai_control.listen)",
                security,
                !tokens.is_empty(),
                false,
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let tls = match security.tls_cert_file.as_str() {
            "" => None,
            cert => Some(crate::server::tls::acceptor(cert, &security.tls_key_file)?),
        };
        if config.console.enabled {
            let address: SocketAddr =
                config.console.listen.parse().context("parsing console.listen")?;
            crate::console::check(
                address,
                security.allow_remote,
                tls.is_some() || security.allow_plaintext_remote,
                &tokens,
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            check_remote(
                address,
                "the console (console.listen)",
                security,
                !tokens.is_empty(),
                tls.is_some(),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let live = Arc::new(Live::from_config(&config));
        Ok(Self {
            config,
            node_name: crate::config::DEFAULT_NODE_NAME.to_string(),
            live,
            tokens,
            tls,
        })
    }
}

/// Why a listener may not bind where it was asked to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RemoteRefused {
    #[error("refusing {what} on {address}: not a loopback address. Set security.allow_remote: true (and a token) to accept remote peers")]
    NotAllowed { what: &'static str, address: SocketAddr },
    #[error("refusing {what} on {address} without a token: set one of the environment variables in security.tokens")]
    WithoutToken { what: &'static str, address: SocketAddr },
    #[error("refusing {what} on {address} without TLS: tokens, commands and pictures would cross the network in plain text. Set security.tls_cert_file and tls_key_file{}, or security.allow_plaintext_remote: true to accept that", if *.tls_possible { "" } else { " (this listener has no TLS: use an encrypted tunnel)" })]
    Plaintext { what: &'static str, address: SocketAddr, tls_possible: bool },
}

/// Remote means encrypted: a listener on a non-loopback address needs
/// `security.allow_remote`, a token, and TLS (`tls`) or the explicit
/// `security.allow_plaintext_remote`, which is then logged loudly.
pub(crate) fn check_remote(
    address: SocketAddr,
    what: &'static str,
    security: &crate::config::SecurityConfig,
    has_tokens: bool,
    tls: bool,
) -> Result<(), RemoteRefused> {
    if address.ip().is_loopback() {
        return Ok(());
    }
    if !security.allow_remote {
        return Err(RemoteRefused::NotAllowed { what, address });
    }
    if !has_tokens {
        return Err(RemoteRefused::WithoutToken { what, address });
    }
    if !tls {
        if !security.allow_plaintext_remote {
            let tls_possible = !what.starts_with("the AI-control");
            return Err(RemoteRefused::Plaintext { what, address, tls_possible });
        }
        tracing::error!(%address, "PLAINTEXT REMOTE LISTENER: {what} accepts peers over the network without TLS (security.allow_plaintext_remote): tokens, commands and pictures cross the network in plain text");
        eprintln!("aicc-ros2: WARNING: {what} on {address} is remote and not encrypted (security.allow_plaintext_remote): tokens and data cross the network in plain text");
    }
    Ok(())
}

/// The bound listeners: AICC, and the AI-control dialect and the
/// operator's console when enabled.
pub struct Listeners {
    pub aicc: TcpListener,
    pub ai_control: Option<TcpListener>,
    pub console: Option<TcpListener>,
}

impl Listeners {
    /// Binds `listen` (and `ai_control.listen` when the dialect is enabled),
    /// each with a listen backlog of `listen_backlog`.
    pub async fn bind(config: &Config) -> anyhow::Result<Self> {
        let aicc = bind_with_backlog(&config.listen, config.listen_backlog)
            .with_context(|| format!("binding {}", config.listen))?;
        let ai_control = match config.ai_control.enabled {
            true => Some(
                bind_with_backlog(&config.ai_control.listen, config.listen_backlog).with_context(
                    || {
                        format!(
                            "binding the AI-control listener (ai_control.listen) {}",
                            config.ai_control.listen
                        )
                    },
                )?,
            ),
            false => None,
        };
        let console = match config.console.enabled {
            true => Some(
                bind_with_backlog(&config.console.listen, config.listen_backlog).with_context(
                    || {
                        format!(
                            "binding the console's listener (console.listen) {}",
                            config.console.listen
                        )
                    },
                )?,
            ),
            false => None,
        };
        Ok(Self { aicc, ai_control, console })
    }
}

/// A listener whose kernel queue holds `backlog` connections not yet
/// accepted: a burst beyond the default (128 in the standard library)
/// would otherwise leave connections neither greeted nor refused.
fn bind_with_backlog(address: &str, backlog: u32) -> anyhow::Result<TcpListener> {
    let address: SocketAddr = address.parse().context("not an address")?;
    let socket = match address {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As the standard listener does: a restarted bridge rebinds at once.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    Ok(socket.listen(backlog)?)
}

/// Runs the bridge for `robot` until `shutdown` resolves, then stops the
/// base (zero published) and returns.
pub async fn run(
    startup: Startup,
    listeners: Listeners,
    robot: Robot,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let Startup { config, node_name, live, tokens, tls } = startup;
    let urdf = config.urdf_text()?;
    let joint_limits =
        JointLimits::from_urdf(&urdf).map_err(|e| anyhow::anyhow!("robot description: {e}"))?;
    let joint_limits = Arc::new(
        config
            .actuators
            .joint_limits(joint_limits)
            .map_err(|e| anyhow::anyhow!("actuators: {e}"))?,
    );
    let kinematics = Arc::new(
        Kinematics::from_urdf(&urdf).map_err(|e| anyhow::anyhow!("robot description: {e}"))?,
    );
    // The governed drivers: the only holders of the actuator port.
    let halts = Arc::new(Halts::default());
    let base = Arc::new(BaseDriver::new(
        BaseSettings::from_config(&config),
        robot.actuators.clone(),
        halts.clone(),
    ));
    let joints = Arc::new(JointDriver::new(
        robot.actuators.clone(),
        robot.sensors.clone(),
        joint_limits.clone(),
        halts,
        JointSettings::from_config(&config),
    ));

    declare_coverage(&config);
    let (events_tx, events_rx) = tokio::sync::mpsc::channel(TOOL_EVENT_QUEUE);
    let mut tasks: Vec<JoinHandle<()>> = Vec::new();
    let governor_events = events_tx.clone();
    let signals = robot.signals.clone();
    // The one loop that publishes cmd_vel, supervised: if it ever ends,
    // zero is published and the bridge exits (see `base_loop_ended`).
    let mut base_loop = tokio::spawn(base.clone().run(
        robot.sensors.clone(),
        GuardSensors::from_config(&config.sensors),
        move |change| report_governor_change(&change, &governor_events, signals.as_ref()),
    ));
    tasks.push(tokio::spawn(monitor::watch_contacts_and_battery(
        robot.sensors.clone(),
        config.clone(),
        live.clone(),
        events_tx.clone(),
    )));
    let frames = Frames {
        tf: robot.sensors.frames().unwrap_or_default(),
        urdf: kinematics.clone(),
        max_age: Duration::from_secs_f64(config.tf.max_age_s),
        joint_states_max_age: Duration::from_secs_f64(config.sensors.joint_states.max_age_s),
    };
    tasks.push(tokio::spawn(monitor::watch_obstacles(
        robot.sensors.clone(),
        base.clone(),
        frames.clone(),
        config.clone(),
        joint_limits.clone(),
    )));
    tasks.push(tokio::spawn(crate::robot::arm_reach::watch_arm_reach(
        robot.sensors.clone(),
        base.clone(),
        frames.urdf.clone(),
        config.clone(),
    )));
    tasks.push(tokio::spawn(monitor::watch_scan(
        robot.sensors.clone(),
        base.clone(),
        frames.clone(),
        config.clone(),
    )));
    tasks.push(tokio::spawn(monitor::watch_odometry(
        robot.sensors.clone(),
        base.clone(),
        config.clone(),
        events_tx.clone(),
    )));

    let registry = Registry::new(&config);
    let catalog = Arc::new(registry.catalog().map_err(|e| anyhow::anyhow!("{e}"))?);
    // A misspelt name would let the calls it meant run unapproved.
    if let Some(unknown) =
        config.approvals.tools.iter().find(|tool| catalog.descriptor(tool).is_none())
    {
        anyhow::bail!(
            "approvals.tools: '{unknown}' is not a tool of this bridge (its tools: {})",
            catalog.descriptors().map(|d| d.id).collect::<Vec<_>>().join(", ")
        );
    }
    let core =
        Core::new(core_config(&config, &tokens, &joint_limits), catalog.clone(), Instant::now());
    let recorder = crate::recorder::Recorder::new(&config.record, events_tx.clone());
    // Tools read through the recorder's sample hook (the governor and the
    // monitors above read the store directly: only what a tool read is recorded).
    robot.sensors.share_wire_switch(recorder.wire_switch());
    // The recorder's own reads: the samples due at record.sample_rates_hz.
    recorder.pace_samples_of(robot.sensors.clone());
    let tool_sensors: Arc<dyn crate::robot::SensorPort> =
        Arc::new(crate::robot::wire::ToolSensors::new(robot.sensors.clone(), recorder.clone()));
    let tools = ToolContext {
        sensors: tool_sensors,
        base: base.clone(),
        joints,
        signals: robot.signals.clone(),
        config: config.clone(),
        live,
        kinematics,
        events: events_tx,
        recorder: recorder.clone(),
        session: String::new(),
        call_id: String::new(),
    };
    let bridge = Bridge::new(core, registry, tools);
    // Subscribed before any connection: the recording misses nothing.
    recorder.attach(bridge.tap.source());
    if robot.signals.publishes_events() {
        tasks.push(tokio::spawn(crate::event_lines::publish(
            bridge.tap.subscribe(),
            robot.signals.clone(),
        )));
    }
    tasks.push(tokio::spawn(bridge.clone().run_tool_events(events_rx)));
    if let Some(listener) = listeners.console {
        let parts = crate::console::Parts {
            bridge: bridge.clone(),
            sensors: robot.sensors.clone(),
            base: base.clone(),
            tokens: tokens.clone(),
            settings: config.console.clone(),
            tls: tls.clone(),
        };
        let (bound, console_tasks) = crate::console::start(parts, listener)?;
        tracing::info!(%bound, "operator's console ready");
        tasks.extend(console_tasks);
    }
    if let Some(listener) = listeners.ai_control {
        let settings = crate::ai_control::Settings::from_config(&config, tokens);
        let (bound, dialect_tasks) =
            crate::ai_control::start(bridge.clone(), catalog, listener, settings)?;
        tracing::info!(%bound, "AI-control listener ready");
        tasks.extend(dialect_tasks);
    }
    let bound = listeners.aicc.local_addr()?;
    tracing::info!(%bound, auth_required = bridge.core.lock().auth_required(), "AICC listener ready");
    let timer_period = Duration::from_secs_f64((1.0 / config.tick_rate_hz).min(0.05));
    tasks.push(tokio::spawn(bridge.clone().run_timers(timer_period)));
    tasks.push(tokio::spawn(bridge.clone().serve(listeners.aicc, tls, config.max_connections)));
    tasks.push(tokio::spawn(bridge.clone().run_availability_watch(AVAILABILITY_PERIOD)));
    tasks.push(tokio::spawn(report_diagnostics(
        bridge.clone(),
        robot.clone(),
        base.clone(),
        frames,
        node_name,
        DIAGNOSTICS_PERIOD,
    )));

    let failure = tokio::select! {
        () = shutdown => None,
        failure = base_loop_ended(&mut base_loop, &base) => Some(failure),
    };
    if failure.is_none() {
        tracing::info!("shutting down: stopping the base");
    }
    base_loop.abort();
    for task in &tasks {
        task.abort();
    }
    base.shutdown().await;
    // The recording's summary and footer, on disk before the process ends.
    let _ = tokio::task::spawn_blocking(move || recorder.close()).await;
    match failure {
        Some(failure) => Err(failure),
        None => Ok(()),
    }
}

/// Waits for the base driver's control loop to end, which it never does
/// while the bridge runs: a panic (or a return) there would leave the last
/// cmd_vel standing on a base that may have no watchdog of its own. Then
/// zero is published and the reason returned: the bridge exits non-zero.
async fn base_loop_ended(base_loop: &mut JoinHandle<()>, base: &BaseDriver) -> anyhow::Error {
    let reason = match base_loop.await {
        Ok(()) => "it returned".to_string(),
        Err(error) if error.is_panic() => {
            let panic = error.into_panic();
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            format!("it panicked: {text}")
        }
        Err(error) => error.to_string(),
    };
    tracing::error!(
        "the base driver's control loop ended ({reason}): publishing zero on {} and exiting",
        base.endpoint()
    );
    base.shutdown().await;
    anyhow::anyhow!("the base driver's control loop ended ({reason}); zero was published on {} and the bridge stopped", base.endpoint())
}

/// Whether the frames of the camera images resolve to the base frame now
/// (from their info topics: small messages, the same frames).
fn frames_report(
    frames: &Frames,
    sensors: &dyn crate::robot::SensorPort,
    base: &BaseDriver,
) -> FramesReport {
    let joints = sensors.joint_states();
    let now = sensors.now();
    let checks = [("depth", sensors.depth_info()), ("camera", sensors.camera_info())]
        .into_iter()
        .filter_map(|(sensor, info)| info.map(|info| (sensor, info.frame_id)))
        .map(|(sensor, frame)| {
            let resolved = frames
                .lookup(BASE_FRAME, &frame, &joints, now)
                .map(|_| ())
                .map_err(|e| e.to_string());
            FrameCheck { sensor, frame, resolved }
        })
        .collect();
    FramesReport {
        source: frames.source(),
        tree: frames.tf.read().summary(),
        checks,
        obstacle_unmeasured: base.obstacle_unmeasured(),
    }
}

/// Publishes the bridge's state on /diagnostics every `period`.
async fn report_diagnostics(
    bridge: Arc<Bridge>,
    robot: Robot,
    base: Arc<BaseDriver>,
    frames: Frames,
    node: String,
    period: Duration,
) {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        interval.tick().await;
        let status = bridge.core.lock().status("", Instant::now());
        let sensors = robot.sensors.statistics();
        let now = Instant::now();
        let silence =
            |sensor| robot.sensors.received(sensor).map(|at| now.saturating_duration_since(at));
        let restrictions = base.restrictions();
        let config = bridge.config();
        let frames = frames_report(&frames, robot.sensors.as_ref(), &base);
        let inputs = crate::diagnostics::Inputs {
            node: &node,
            config: &config,
            status: &status,
            sensors: &sensors,
            silence: &silence,
            restrictions: &restrictions,
            unavailable_after: bridge.live().unavailable_after(),
            frames,
        };
        let mut report = crate::diagnostics::report(&inputs);
        report.push(coverage_diagnostic(&base, &config, robot.sensors.as_ref()));
        robot.signals.publish_diagnostics(&report);
    }
}

/// What the obstacle sources observe of each direction's zone now, the
/// policy for what they do not, and the memory's size: OK while every
/// direction is observed or refused, WARN where a direction moves blind.
fn coverage_diagnostic(
    base: &BaseDriver,
    config: &Config,
    sensors: &dyn crate::robot::SensorPort,
) -> Diagnostic {
    use crate::governor::coverage::Direction;
    use crate::governor::safety::UnobservedPolicy;
    let pose = sensors.odometry().map(|o| crate::governor::safety::Pose2D {
        x_m: o.position_m.x,
        y_m: o.position_m.y,
        yaw_rad: o.orientation.euler_angles().2,
    });
    let surroundings = base.surroundings();
    let mut values = Vec::new();
    let mut parts = Vec::new();
    let mut blind = false;
    for direction in Direction::BOTH {
        let view = surroundings.view(direction, pose, Instant::now());
        let policy = config.safety.unobserved(direction);
        blind |= policy == UnobservedPolicy::Allow;
        values.push((
            format!("{}_observed_fraction", direction.name()),
            format!("{:.2}", view.observed_fraction),
        ));
        values.push((format!("unobserved_{}", direction.name()), policy.name().to_string()));
        parts.push(match view.first_unobserved_m {
            None => format!("{}: observed", direction.name()),
            Some(from) => format!(
                "{}: unobserved from {from:.2} m ({}), {}",
                direction.name(),
                view.why,
                policy.name()
            ),
        });
    }
    values.push(("remembered_obstacle_points".into(), surroundings.memory().len().to_string()));
    let message = if blind {
        format!("moves blind where allowed (safety.unobserved_*: allow); {}", parts.join("; "))
    } else {
        parts.join("; ")
    };
    Diagnostic { level: u8::from(blind), name: "aicc_bridge: coverage".into(), message, values }
}

/// Says, at start, what each direction is watched by and what happens
/// where nothing observes it; a direction allowed to move blind is a warning.
fn declare_coverage(config: &Config) {
    use crate::governor::coverage::Direction;
    use crate::governor::safety::UnobservedPolicy;
    for direction in Direction::BOTH {
        let mut sources = Vec::new();
        if config.sensors.depth.is_configured() && direction == Direction::Ahead {
            sources.push("the depth camera, where it looks".to_string());
        } else if config.sensors.depth.is_configured() && !config.actuators.head_action.is_empty() {
            sources.push("the depth camera, if the head can look there".to_string());
        }
        if config.sensors.scan.is_configured() {
            sources.push("the LiDAR, for obstacles reaching its plane".to_string());
        }
        let watched = if sources.is_empty() {
            "no obstacle source".to_string()
        } else {
            sources.join(" and ")
        };
        let policy = config.safety.unobserved(direction);
        let line = format!(
            "coverage {}: watched by {watched}; obstacles down to {:.2} m must be seen (safety.min_obstacle_height_m); where no fresh frame observes the zone: {}",
            direction.name(),
            config.safety.min_obstacle_height_m,
            policy.name()
        );
        match policy {
            UnobservedPolicy::Allow => tracing::warn!(
                "{line}: motion {} may be blind (safety.unobserved_{}: allow)",
                direction.name(),
                direction.name()
            ),
            _ if sources.is_empty() => {
                tracing::warn!("{line}: motion {} is refused", direction.name())
            }
            _ => tracing::info!("{line}"),
        }
    }
}

fn core_config(config: &Config, tokens: &Tokens, joints: &JointLimits) -> CoreConfig {
    CoreConfig {
        tick_rate_hz: config.tick_rate_hz,
        tick_mode: config.tick_mode,
        world_name: config.world_name.clone(),
        max_calls_in_flight: config.max_calls_in_flight,
        event_ring_capacity: config.event_ring_capacity,
        resume_window: Duration::from_secs_f64(config.resume_window_s),
        max_detached_sessions: config.max_detached_sessions,
        heartbeat_interval: Duration::from_secs_f64(config.heartbeat_interval_s),
        dead_peer_intervals: config.dead_peer_intervals,
        lease_timeout: Duration::from_secs_f64(config.lease_timeout_s),
        tokens: tokens.clone(),
        unauthenticated_scope: config.security.unauthenticated_scope,
        agents_may_modify_world: config.security.agents_may_modify_world,
        max_undecodable_lines: config.security.max_undecodable_lines,
        max_auth_failures: config.security.max_auth_failures,
        handshake_timeout: Duration::from_secs_f64(config.handshake_timeout_s),
        limits: limits_in_force(config, joints),
        approvals: crate::protocol::core::ApprovalRules {
            tools: config.approvals.tools.clone(),
            move_longer_than_m: (config.approvals.move_longer_than_m > 0.0)
                .then_some(config.approvals.move_longer_than_m),
            approval_mode: config.approvals.approval_mode,
            timeout: Duration::from_secs_f64(config.approvals.timeout_s),
        },
    }
}

/// The limits the governor enforces, for the manifest.
pub(crate) fn limits_in_force(config: &Config, joints: &JointLimits) -> Value {
    let base = &config.base;
    let safety = &config.safety;
    let joint_limits: serde_json::Map<String, Value> = joints
        .iter()
        .map(|j| (j.name.clone(), json!({ "lower": j.lower, "upper": j.upper, "max_velocity": j.max_velocity, "max_acceleration": j.max_acceleration, "max_effort": j.max_effort, "unit": j.kind.position_unit() })))
        .collect();
    json!({
        "base": {
            "max_linear_mps": base.max_linear_mps,
            "max_angular_radps": base.max_angular_radps,
            "max_linear_accel_mps2": base.max_linear_accel_mps2,
            "max_angular_accel_radps2": base.max_angular_accel_radps2,
            "max_move_distance_m": base.max_move_distance_m,
        },
        "safety": {
            "stop_distance_m": safety.stop_distance_m,
            "slow_down_distance_m": safety.slow_down_distance_m,
            "geofence_radius_m": safety.geofence_radius(),
            "max_sensor_age_s": safety.max_sensor_age_s,
            "emergency_decel_mps2": safety.emergency_decel_mps2,
            "min_creep_speed_mps": safety.min_creep_speed_mps,
            // What the zones must be observed for, and what happens where no
            // fresh source observes them ("allow": the robot moves blind there).
            "min_obstacle_height_m": safety.min_obstacle_height_m,
            "unobserved": { "ahead": safety.unobserved_ahead.name(), "behind": safety.unobserved_behind.name() },
            "head_for_motion": match safety.head_for_motion { crate::config::HeadForMotion::Turn => "turn", crate::config::HeadForMotion::Refuse => "refuse" },
            "zones": { "front_m": safety.zone_grid().front_m, "rear_m": safety.zone_grid().rear_m, "half_width_m": safety.zone_grid().half_width_m, "reach_m": safety.zone_grid().reach_m },
        },
        "joints": joint_limits,
        // What one connection may make the bridge hold (docs/reliability.md).
        "connection": {
            "max_line_bytes": config.max_line_bytes,
            "max_calls_in_flight": config.max_calls_in_flight,
            "outbound_queue": config.outbound_queue,
            "outbound_queue_bytes": config.outbound_queue_bytes,
            "write_stall_timeout_s": config.write_stall_timeout_s,
            "handshake_timeout_s": config.handshake_timeout_s,
            "max_connections": config.max_connections,
        },
    })
}

/// Every restriction the governor starts or stops enforcing is an event
/// agents see and a diagnostic operators see on /diagnostics.
fn report_governor_change(change: &GovernorChange, events: &EventSender, signals: &dyn SignalPort) {
    let mut diagnostics = Vec::new();
    for restriction in &change.began {
        let payload = json!({ "kind": "restriction_began", "rule": restriction.rule, "reason": restriction.reason });
        let _ = events.try_send(RobotEvent::for_all("governor", payload));
        tracing::warn!(rule = ?restriction.rule, reason = %restriction.reason, "governor restriction");
        diagnostics.push(Diagnostic {
            level: 1,
            name: "aicc_bridge: governor".into(),
            message: restriction.reason.clone(),
            values: vec![("rule".into(), format!("{:?}", restriction.rule))],
        });
    }
    for rule in &change.ended {
        let _ = events.try_send(RobotEvent::for_all(
            "governor",
            json!({ "kind": "restriction_ended", "rule": rule }),
        ));
        diagnostics.push(Diagnostic {
            level: 0,
            name: "aicc_bridge: governor".into(),
            message: format!("{rule:?} no longer restricts motion"),
            values: vec![("rule".into(), format!("{rule:?}"))],
        });
    }
    signals.publish_diagnostics(&diagnostics);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governor::BaseVelocity;
    use crate::robot::port::ActuatorPort;
    use crate::robot::testing::RecordingActuators;

    /// Records every velocity; the first non-zero one makes it panic (a
    /// bug in the loop, as far as the loop's supervisor can tell).
    #[derive(Default)]
    struct PanicsOnMotion {
        inner: RecordingActuators,
        panicked: std::sync::atomic::AtomicBool,
    }

    impl ActuatorPort for PanicsOnMotion {
        fn publish_base_velocity(&self, velocity: BaseVelocity) {
            self.inner.publish_base_velocity(velocity);
            if !velocity.is_zero() && !self.panicked.swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                panic!("injected fault in the control loop");
            }
        }
        fn follow_trajectory(
            &self,
            controller: crate::robot::Controller,
            goal: crate::robot::TrajectoryGoal,
            control: crate::robot::port::GoalControl,
        ) -> futures::future::BoxFuture<
            'static,
            Result<crate::robot::TrajectoryOutcome, crate::robot::port::PortError>,
        > {
            self.inner.follow_trajectory(controller, goal, control)
        }
        fn gripper_command(
            &self,
            goal: crate::robot::GripperGoal,
            control: crate::robot::port::GoalControl,
        ) -> futures::future::BoxFuture<
            'static,
            Result<crate::robot::GripperOutcome, crate::robot::port::PortError>,
        > {
            self.inner.gripper_command(goal, control)
        }
        fn endpoint(&self, endpoint: crate::robot::port::Endpoint) -> String {
            self.inner.endpoint(endpoint)
        }
    }

    #[tokio::test]
    async fn a_base_loop_that_dies_is_followed_by_zero_and_an_error_naming_why() {
        let config = Config::default();
        let actuators = Arc::new(PanicsOnMotion::default());
        let base = Arc::new(BaseDriver::new(
            BaseSettings::from_config(&config),
            actuators.clone(),
            Arc::new(Halts::default()),
        ));
        let robot = crate::robot::testing::TestRobot::new(&config);
        {
            let now = Instant::now();
            let stamp_s = 0.0;
            let mut latest = robot.samples.lock();
            let pose = nalgebra::Vector3::zeros();
            latest.odom = Some(crate::robot::OdometrySample {
                frame_id: "odom".into(),
                child_frame_id: "base_footprint".into(),
                position_m: pose,
                orientation: nalgebra::UnitQuaternion::identity(),
                linear_velocity_mps: pose,
                angular_velocity_radps: pose,
                stamp_s,
                received: now,
            });
            latest.imu = Some(crate::robot::ImuSample {
                frame_id: "imu".into(),
                orientation: None,
                angular_velocity_radps: pose,
                linear_acceleration_mps2: pose,
                stamp_s,
                received: now,
            });
        }
        let mut base_loop = tokio::spawn(base.clone().run(
            robot.robot.sensors.clone(),
            GuardSensors::default(),
            |_| {},
        ));
        // Turning in place: no obstacle source needed, so the loop publishes it.
        assert!(base.request(
            base.begin_motion(),
            BaseVelocity { linear_mps: 0.0, angular_radps: 0.5 },
            Instant::now()
        ));
        let error =
            tokio::time::timeout(Duration::from_secs(5), base_loop_ended(&mut base_loop, &base))
                .await
                .expect("the loop died and was noticed");
        let text = error.to_string();
        assert!(
            text.contains("it panicked: injected fault in the control loop")
                && text.contains("zero was published"),
            "{text}"
        );
        let published = actuators.inner.velocities();
        let died = published.iter().position(|v| !v.is_zero()).expect("the motion that killed it");
        assert!(
            published[died + 1..].iter().any(BaseVelocity::is_zero),
            "zero after the death: {published:?}"
        );
    }
}

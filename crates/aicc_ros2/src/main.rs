//! The bridge node: ROS 2 on one side, AICC over TCP on the other.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use tokio::net::TcpListener;

use aicc_bridge::config::{Config, DEFAULT_NODE_NAME};
use aicc_bridge::governor::{BaseLimits, BaseVelocity, JointLimits};
use aicc_bridge::robot::base_driver::GovernorChange;
use aicc_bridge::robot::kinematics::Kinematics;
use aicc_bridge::robot::{monitor, Diagnostic};
use aicc_bridge::tools::ToolEvent;
use aicc_bridge::protocol::core::{Core, CoreConfig};
use aicc_bridge::robot::base_driver::{BaseDriver, GuardSensors};
use aicc_bridge::robot::RobotPort;
use aicc_bridge::server::Bridge;
use aicc_bridge::tools::{Registry, ToolContext};

/// AICC bridge: lets LLM agents perceive and act through a ROS 2 robot,
/// behind a safety governor. ROS arguments go after `--ros-args` as usual.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Configuration file (ROS 2 parameter file format). A file given as
    /// `--ros-args --params-file FILE` is read the same way.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where to listen, HOST:PORT (port 0 picks a free port). Overrides the config.
    #[arg(long)]
    listen: Option<String>,
    /// Serve the AI-control dialect (JSON-RPC over NDJSON) on HOST:PORT as
    /// well (port 0 picks a free port). Overrides and enables `fonline`.
    #[arg(long)]
    fonline_listen: Option<String>,
}

/// Splits argv into the bridge's own arguments and a `--params-file` given
/// among the ROS arguments (rcl reads the ROS arguments itself).
fn split_args() -> (Vec<String>, Option<PathBuf>) {
    let all: Vec<String> = std::env::args().collect();
    let ros_start = all.iter().position(|a| a == "--ros-args").unwrap_or(all.len());
    let ros = &all[ros_start..];
    let params_file = ros.iter().position(|a| a == "--params-file").and_then(|i| ros.get(i + 1)).map(PathBuf::from);
    (all[..ros_start].to_vec(), params_file)
}

fn load_config(args: &Args, params_file: Option<PathBuf>) -> anyhow::Result<Config> {
    let mut config = match args.config.clone().or(params_file) {
        Some(path) => Config::load(&path, DEFAULT_NODE_NAME)?,
        None => Config::default(),
    };
    if let Some(listen) = &args.listen {
        config.listen = listen.clone();
    }
    if let Some(listen) = &args.fonline_listen {
        config.fonline.enabled = true;
        config.fonline.listen = listen.clone();
    }
    config.validate().map_err(anyhow::Error::msg)?;
    Ok(config)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let (own_args, params_file) = split_args();
    let args = Args::parse_from(own_args);
    let config = Arc::new(load_config(&args, params_file)?);
    let listen: SocketAddr = config.listen.parse().context("parsing listen address")?;
    let tokens = config.security.load_tokens(|name| std::env::var(name).ok()).map_err(anyhow::Error::msg)?;
    if !listen.ip().is_loopback() {
        anyhow::ensure!(config.security.allow_remote, "refusing to listen on {listen}: not a loopback address. Set security.allow_remote: true (and a token) to accept remote agents");
        anyhow::ensure!(!tokens.is_empty(), "refusing to listen on {listen} without a token: set one of the environment variables in security.tokens");
        if config.security.tls_cert_file.is_empty() {
            tracing::warn!(%listen, "remote listener without TLS: tokens and data cross the network in plain text");
        }
    }
    let fonline_listen: Option<SocketAddr> = match config.fonline.enabled {
        true => Some(config.fonline.listen.parse().context("parsing fonline.listen")?),
        false => None,
    };
    if let Some(address) = fonline_listen {
        aicc_bridge::fonline::check_listen_address(address, config.security.allow_remote, !tokens.is_empty()).map_err(anyhow::Error::msg)?;
        if !address.ip().is_loopback() {
            tracing::warn!(%address, "remote AI-control listener: it has no TLS, tokens and data cross the network in plain text");
        }
    }
    let tls = match config.security.tls_cert_file.as_str() {
        "" => None,
        cert => Some(aicc_bridge::server::tls::acceptor(cert, &config.security.tls_key_file)?),
    };

    let ros = aicc_ros2::ros::start(config.clone(), DEFAULT_NODE_NAME)?;
    let robot: Arc<dyn RobotPort> = ros.robot.clone();
    let base_config = &config.base;
    let limits = BaseLimits {
        max_linear_mps: base_config.max_linear_mps,
        max_angular_radps: base_config.max_angular_radps,
        max_linear_accel_mps2: base_config.max_linear_accel_mps2,
        max_angular_accel_radps2: base_config.max_angular_accel_radps2,
    };
    let safety = &config.safety;
    let base = Arc::new(BaseDriver::new(
        limits,
        safety.emergency(),
        safety.rules(),
        safety.geofence_radius(),
        Duration::from_secs_f64(base_config.setpoint_timeout_s),
        base_config.control_rate_hz,
    ));
    let urdf = config.urdf_text()?;
    let joints = Arc::new(JointLimits::from_urdf(&urdf).map_err(|e| anyhow::anyhow!("robot description: {e}"))?);
    let kinematics = Arc::new(Kinematics::from_urdf(&urdf).map_err(|e| anyhow::anyhow!("robot description: {e}"))?);
    // Events from tools, the governor and the sensor monitor to agents.
    let (events_tx, events_rx) = tokio::sync::mpsc::channel(1024);
    let governor_events = events_tx.clone();
    let governor_robot = robot.clone();
    let driver_task = tokio::spawn(base.clone().run(
        robot.clone(),
        GuardSensors::from_config(&config.sensors),
        move |change| report_governor_change(&change, &governor_events, governor_robot.as_ref()),
    ));
    let contacts_task = tokio::spawn(monitor::watch_contacts_and_battery(robot.clone(), config.clone(), events_tx.clone()));
    let obstacles_task = tokio::spawn(monitor::watch_obstacles(robot.clone(), base.clone(), kinematics.clone(), config.clone()));

    let registry = Registry::new(&config);
    let catalog = Arc::new(registry.catalog().map_err(anyhow::Error::msg)?);
    let core = Core::new(
        CoreConfig {
            tick_rate_hz: config.tick_rate_hz,
            tick_mode: config.tick_mode,
            world_name: config.world_name.clone(),
            max_calls_in_flight: config.max_calls_in_flight,
            event_ring_capacity: config.event_ring_capacity,
            resume_window: Duration::from_secs_f64(config.resume_window_s),
            heartbeat_interval: Duration::from_secs_f64(config.heartbeat_interval_s),
            dead_peer_intervals: config.dead_peer_intervals,
            lease_timeout: Duration::from_secs_f64(config.lease_timeout_s),
            tokens: tokens.clone(),
            unauthenticated_scope: config.security.unauthenticated_scope,
            max_auth_failures: config.security.max_auth_failures,
            limits: limits_in_force(&config, &joints),
        },
        catalog.clone(),
        Instant::now(),
    );
    let tools = ToolContext { robot: robot.clone(), base: base.clone(), config: config.clone(), joints, kinematics, events: events_tx, session: String::new(), call_id: String::new() };
    let bridge = Bridge::new(core, registry, tools);
    let events_task = tokio::spawn(bridge.clone().run_tool_events(events_rx));
    let listener = TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    let bound = listener.local_addr()?;
    let fonline_listener = match fonline_listen {
        Some(address) => Some(TcpListener::bind(address).await.with_context(|| format!("binding the AI-control listener (fonline.listen) {address}"))?),
        None => None,
    };
    // The line on stdout that launchers and tests wait for.
    println!("AICC_READY {}", serde_json::json!({ "host": bound.ip().to_string(), "port": bound.port(), "tls": tls.is_some() }));
    let fonline_tasks = match fonline_listener {
        Some(fonline_listener) => {
            let settings = aicc_bridge::fonline::Settings {
                max_queued_commands: config.fonline.max_queued_commands,
                max_events: config.fonline.max_events,
                tokens,
                unauthenticated_scope: config.security.unauthenticated_scope,
                max_auth_failures: config.security.max_auth_failures,
                tool_timeout: Duration::from_secs_f64(config.tool_timeout_s),
            };
            let (fonline_bound, tasks) = aicc_bridge::fonline::start(bridge.clone(), catalog, fonline_listener, settings)?;
            // Second line, once the AI-control dialect listens too.
            println!("AI_CONTROL_READY {}", serde_json::json!({ "host": fonline_bound.ip().to_string(), "port": fonline_bound.port() }));
            tracing::info!(%fonline_bound, "AI-control listener ready");
            tasks
        }
        None => Vec::new(),
    };
    tracing::info!(%bound, auth_required = bridge.core.lock().auth_required(), "AICC listener ready");
    let timer_period = Duration::from_secs_f64((1.0 / config.tick_rate_hz).min(0.05));
    let timer_task = tokio::spawn(bridge.clone().run_timers(timer_period));
    let server_task = tokio::spawn(bridge.clone().serve(listener, tls, config.max_connections));
    let watch_task = tokio::spawn(bridge.clone().run_availability_watch(Duration::from_millis(250)));

    wait_for_shutdown_signal().await;
    tracing::info!("shutting down: stopping the base");
    server_task.abort();
    for task in &fonline_tasks {
        task.abort();
    }
    events_task.abort();
    contacts_task.abort();
    obstacles_task.abort();
    watch_task.abort();
    timer_task.abort();
    driver_task.abort();
    base.stop();
    // Publish zero before exit whatever the base was doing (a few times: one
    // message may be lost before the publisher's peers drain it).
    for _ in 0..3 {
        robot.publish_base_velocity(BaseVelocity::ZERO);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(ros);
    Ok(())
}

/// The limits the governor enforces, for the manifest.
fn limits_in_force(config: &aicc_bridge::config::Config, joints: &JointLimits) -> serde_json::Value {
    let base = &config.base;
    let safety = &config.safety;
    let joint_limits: serde_json::Map<String, serde_json::Value> = joints
        .iter()
        .map(|j| (j.name.clone(), serde_json::json!({ "lower": j.lower, "upper": j.upper, "max_velocity": j.max_velocity, "unit": j.kind.position_unit() })))
        .collect();
    serde_json::json!({
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
        },
        "joints": joint_limits,
    })
}

/// Every restriction the governor starts or stops enforcing is an event
/// agents see and a diagnostic operators see on /diagnostics.
fn report_governor_change(change: &GovernorChange, events: &tokio::sync::mpsc::Sender<ToolEvent>, robot: &dyn RobotPort) {
    let mut diagnostics = Vec::new();
    for restriction in &change.began {
        let payload = serde_json::json!({ "kind": "restriction_began", "rule": restriction.rule, "reason": restriction.reason });
        let _ = events.try_send(("governor".into(), payload, None));
        tracing::warn!(rule = ?restriction.rule, reason = %restriction.reason, "governor restriction");
        diagnostics.push(Diagnostic { level: 1, name: "aicc_bridge: governor".into(), message: restriction.reason.clone(), values: vec![("rule".into(), format!("{:?}", restriction.rule))] });
    }
    for rule in &change.ended {
        let _ = events.try_send(("governor".into(), serde_json::json!({ "kind": "restriction_ended", "rule": rule }), None));
        diagnostics.push(Diagnostic { level: 0, name: "aicc_bridge: governor".into(), message: format!("{rule:?} no longer restricts motion"), values: vec![("rule".into(), format!("{rule:?}"))] });
    }
    robot.publish_diagnostics(&diagnostics);
}

async fn wait_for_shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("installing the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

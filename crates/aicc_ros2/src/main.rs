//! The bridge node: ROS 2 on one side, AICC over TCP on the other. This
//! file only parses arguments, starts the ROS adapter and hands it to the
//! bridge (crate `aicc-bridge`), which runs until SIGTERM or Ctrl-C.
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;

use aicc_bridge::bridge::{Listeners, Startup};
use aicc_bridge::config::{Config, DEFAULT_NODE_NAME};

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
    config.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
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
    let startup = Startup::from_config(config.clone(), |name| std::env::var(name).ok())?;
    let ros = aicc_ros2::ros::start(config.clone(), DEFAULT_NODE_NAME)?;
    let listeners = Listeners::bind(&config).await?;
    // The lines on stdout that launchers and tests wait for.
    let bound = listeners.aicc.local_addr()?;
    println!("AICC_READY {}", serde_json::json!({ "host": bound.ip().to_string(), "port": bound.port(), "tls": startup.tls.is_some() }));
    if let Some(listener) = &listeners.ai_control {
        let bound = listener.local_addr()?;
        println!("AI_CONTROL_READY {}", serde_json::json!({ "host": bound.ip().to_string(), "port": bound.port() }));
    }
    aicc_bridge::bridge::run(startup, listeners, ros.robot(), wait_for_shutdown_signal()).await?;
    drop(ros);
    Ok(())
}

async fn wait_for_shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("installing the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

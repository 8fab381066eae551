//! The bridge node: ROS 2 on one side, AICC over TCP on the other. This
//! file only parses arguments, starts the ROS adapter and hands it to the
//! bridge (crate `aicc-bridge`), which runs until SIGTERM or Ctrl-C.
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;

use aicc_bridge::{Config, DEFAULT_NODE_NAME};
use aicc_bridge::{Listeners, Startup};

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn ros_arguments_give_parameter_files_and_overrides_in_order() {
        let (own, ros) = split_args(&argv("aicc-ros2 --listen 127.0.0.1:0 --ros-args -r __ns:=/r1 --params-file a.yaml -p base.max_linear_mps:=0.1 --param world_name:=lab -- --config c.yaml --ros-args --params-file b.yaml")).unwrap();
        assert_eq!(own, argv("aicc-ros2 --listen 127.0.0.1:0 --config c.yaml"));
        assert_eq!(ros.files, vec![PathBuf::from("a.yaml"), PathBuf::from("b.yaml")]);
        assert_eq!(
            ros.overrides,
            vec![
                ("base.max_linear_mps".to_string(), "0.1".to_string()),
                ("world_name".to_string(), "lab".to_string())
            ]
        );
        assert!(split_args(&argv("x --ros-args -p nonsense"))
            .unwrap_err()
            .to_string()
            .contains("NAME:=VALUE"));
        assert!(split_args(&argv("x --ros-args --params-file")).is_err());
    }
}

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
    /// well (port 0 picks a free port). Overrides and enables `ai_control`.
    #[arg(long, alias = "fonline-listen")]
    ai_control_listen: Option<String>,
    /// Serve the operator's web console on HOST:PORT (port 0 picks a free
    /// port). Overrides and enables `console`; needs an admin token.
    #[arg(long)]
    console_listen: Option<String>,
    /// Record every session into DIR as MCAP files (record.mode: always,
    /// record.dir: DIR). Overrides the config; see docs/recording.md.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// Serve a recording instead of a robot (docs/recording.md, "Replay"):
    /// each tool call gets its recorded result. No ROS is started; the
    /// listener follows the configuration's rules (loopback unless
    /// security.allow_remote, the tokens, the connection caps).
    #[arg(long, value_name = "FILE", conflicts_with = "record")]
    replay: Option<PathBuf>,
    /// Preflight: start the ROS side as a run would (same --config and
    /// --ros-args), watch the live graph for --check-seconds, print one
    /// line per configured topic, actuator and the clock, with the setting
    /// that fixes it, and exit: 0 only when the bridge can run safely. No
    /// agent port is opened.
    #[arg(long, conflicts_with = "replay")]
    check: bool,
    /// How long the preflight watches, seconds.
    #[arg(long, default_value_t = 3.0, value_name = "SECONDS")]
    check_seconds: f64,
}

/// What the command line's ROS arguments say about parameters (rcl reads
/// them too, for its own purposes; the bridge applies them strictly).
#[derive(Debug, Default, PartialEq)]
struct RosParameters {
    /// `--params-file FILE`, in order.
    files: Vec<PathBuf>,
    /// `-p NAME:=VALUE` / `--param NAME:=VALUE`, in order.
    overrides: Vec<(String, String)>,
}

/// Splits argv into the bridge's own arguments and the parameters among
/// the ROS arguments (`--ros-args ... [--]`, possibly several sections).
fn split_args(all: &[String]) -> anyhow::Result<(Vec<String>, RosParameters)> {
    let mut own = Vec::new();
    let mut ros = RosParameters::default();
    let mut in_ros = false;
    let mut tokens = all.iter();
    while let Some(token) = tokens.next() {
        match (in_ros, token.as_str()) {
            (_, "--ros-args") => in_ros = true,
            (true, "--") => in_ros = false,
            (true, "--params-file") => ros.files.push(PathBuf::from(
                tokens.next().ok_or_else(|| anyhow::anyhow!("--params-file needs a file"))?,
            )),
            (true, "-p" | "--param") => {
                let assignment =
                    tokens.next().ok_or_else(|| anyhow::anyhow!("{token} needs NAME:=VALUE"))?;
                let (name, value) = assignment
                    .split_once(":=")
                    .ok_or_else(|| anyhow::anyhow!("{token} {assignment}: expected NAME:=VALUE"))?;
                ros.overrides.push((name.to_string(), value.to_string()));
            }
            (true, _) => {}
            (false, _) => own.push(token.clone()),
        }
    }
    Ok((own, ros))
}

/// Defaults, then `--config`, then the ROS parameter files (the sections
/// for this node), then `-p` overrides, then `--listen`, `--ai-control-listen`, `--console-listen` and `--record`.
fn load_config(
    args: &Args,
    ros: &RosParameters,
    node: &aicc_bridge::ros_parameters::NodeIdentity,
) -> anyhow::Result<Config> {
    let files: Vec<PathBuf> =
        args.config.iter().cloned().chain(ros.files.iter().cloned()).collect();
    let mut config = aicc_bridge::ros_parameters::load(node, &files, &ros.overrides)?;
    if let Some(listen) = &args.listen {
        config.listen = listen.clone();
    }
    if let Some(listen) = &args.ai_control_listen {
        config.ai_control.enabled = true;
        config.ai_control.listen = listen.clone();
    }
    if let Some(listen) = &args.console_listen {
        config.console.enabled = true;
        config.console.listen = listen.clone();
    }
    if let Some(dir) = &args.record {
        config.record.mode = aicc_bridge::RecordMode::Always;
        config.record.dir = dir.display().to_string();
    }
    // A node started in a namespace (-r __ns:=/robot1) names its topics
    // there: say so in messages, as the configured namespace would.
    if config.namespace.is_empty() && node.namespace != "/" {
        config.namespace = node.namespace.clone();
    }
    config.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(config)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    {
        use tracing_subscriber::prelude::*;
        // Every record to stderr; INFO and above to /rosout as well, once the node exists.
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "info".into()),
            )
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .with(aicc_ros2::ros::rosout::RosoutLayer)
            .init();
    }
    let argv: Vec<String> = std::env::args().collect();
    let (own_args, ros_parameters) = split_args(&argv)?;
    let args = Args::parse_from(own_args);
    if let Some(file) = &args.replay {
        // No node: the configuration's listen and security rules only.
        let node = aicc_bridge::ros_parameters::NodeIdentity {
            name: DEFAULT_NODE_NAME.to_string(),
            namespace: "/".to_string(),
        };
        let config = load_config(&args, &ros_parameters, &node)?;
        return serve_replay(file, &config).await;
    }
    let mut node = aicc_ros2::ros::create_node(DEFAULT_NODE_NAME)?;
    let logger = node.logger().to_string();
    aicc_ros2::ros::rosout::connect(&mut node, logger)?;
    let config = Arc::new(load_config(&args, &ros_parameters, &aicc_ros2::ros::identity(&node)?)?);
    let mut startup = Startup::from_config(config.clone(), |name| std::env::var(name).ok())?;
    startup.node_name = node.name()?;
    let parameters =
        Arc::new(aicc_ros2::ros::parameters::ParameterStore::new(&config, startup.live.clone()));
    let ros = aicc_ros2::ros::start(node, config.clone(), parameters)?;
    if args.check {
        ros.watch_graph();
        return preflight(&ros, &config, args.check_seconds).await;
    }
    let listeners = Listeners::bind(&config).await?;
    // The lines on stdout that launchers and tests wait for.
    let bound = listeners.aicc.local_addr()?;
    println!(
        "AICC_READY {}",
        serde_json::json!({ "host": bound.ip().to_string(), "port": bound.port(), "tls": startup.tls.is_some() })
    );
    if let Some(listener) = &listeners.ai_control {
        let bound = listener.local_addr()?;
        println!(
            "AI_CONTROL_READY {}",
            serde_json::json!({ "host": bound.ip().to_string(), "port": bound.port() })
        );
    }
    if let Some(listener) = &listeners.console {
        let bound = listener.local_addr()?;
        println!(
            "CONSOLE_READY {}",
            serde_json::json!({ "host": bound.ip().to_string(), "port": bound.port(), "tls": startup.tls.is_some() })
        );
    }
    aicc_bridge::run(startup, listeners, ros.robot(), wait_for_shutdown_signal()).await?;
    drop(ros);
    Ok(())
}

/// `--replay FILE`: the recording served on `listen` (`--listen` or the
/// configuration's), with no ROS node, until SIGTERM or Ctrl-C. The same
/// rules as the bridge's listener: loopback unless allowed (and then with
/// a token; a replay has no TLS), the configured tokens, the caps.
async fn serve_replay(file: &std::path::Path, config: &Config) -> anyhow::Result<()> {
    // Refused before listening: a bad file names its byte offset.
    aicc_bridge::recording::load(file).map_err(|e| anyhow::anyhow!("{e}"))?;
    let listen: std::net::SocketAddr =
        config.listen.parse().map_err(|e| anyhow::anyhow!("listen {}: {e}", config.listen))?;
    let access = aicc_bridge::recording::access(config, listen, |name| std::env::var(name).ok())?;
    let auth_required = !access.tokens.is_empty();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("binding {listen}: {e}"))?;
    let bound = listener.local_addr()?;
    println!(
        "AICC_READY {}",
        serde_json::json!({ "host": bound.ip().to_string(), "port": bound.port(), "tls": false, "replay": file.display().to_string(), "auth_required": auth_required })
    );
    tokio::select! {
        served = aicc_bridge::recording::serve_file(file, listener, access) => served.map_err(|e| anyhow::anyhow!("{e}")),
        _ = wait_for_shutdown_signal() => Ok(()),
    }
}

/// `--check`: watches for `seconds`, prints the verdicts, exits 0 only
/// when nothing failed.
async fn preflight(
    ros: &aicc_ros2::ros::RosAdapter,
    config: &Config,
    seconds: f64,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        seconds.is_finite() && seconds > 0.0,
        "--check-seconds must be above 0, not {seconds}"
    );
    tokio::time::sleep(std::time::Duration::from_secs_f64(seconds)).await;
    let lines = aicc_bridge::check::judge(&ros.preflight_facts(config, seconds));
    for line in &lines {
        println!("{line}");
    }
    let failed = lines.iter().filter(|l| l.verdict == aicc_bridge::check::Verdict::Fail).count();
    if failed > 0 {
        println!("AICC_CHECK failed: {failed} item(s) above must be fixed before the bridge runs this robot");
        std::process::exit(1);
    }
    println!("AICC_CHECK passed");
    Ok(())
}

async fn wait_for_shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

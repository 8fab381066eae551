//! The whole bridge in this process on the test robot (no ROS), served
//! on a free loopback port over real TCP: the one start-up that the
//! integration tests and the benchmarks share.
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::bridge::{run, Listeners, Startup};
use crate::config::{Config, DEFAULT_NODE_NAME};
use crate::robot::testing::TestRobot;

/// A bridge running on its own runtime thread (two workers, as on the
/// target machine); dropping it shuts the bridge down and waits for it.
pub struct InProcessBridge {
    pub port: u16,
    /// The robot's sensors to fill and its recorded commands.
    pub robot: TestRobot,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// A configuration from the text of a parameter file's `ros__parameters`
/// (each line indented by four spaces), listening on a free loopback port.
/// Panics on a configuration the bridge refuses.
pub fn loopback_config(parameters: &str) -> Config {
    let yaml = format!("{DEFAULT_NODE_NAME}:\n  ros__parameters:\n    listen: \"127.0.0.1:0\"\n{parameters}");
    let mut config = Config::from_params_yaml(&yaml, DEFAULT_NODE_NAME).expect("a valid configuration");
    config.listen = "127.0.0.1:0".into();
    config
}

impl InProcessBridge {
    /// Starts the bridge with `config` (its `listen` should be
    /// `127.0.0.1:0`); `env` stands for the environment the tokens are read
    /// from. Panics when the bridge cannot start: callers are tests and
    /// benchmarks, for which that is the clearest report.
    pub fn start(config: Config, env: impl Fn(&str) -> Option<String>) -> Self {
        let config = Arc::new(config);
        let startup = Startup::from_config(config.clone(), env).expect("the bridge starts");
        let robot = TestRobot::new(&config);
        let robot_port = robot.robot.clone();
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let (port_tx, port_rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let listeners = Listeners::bind(&config).await.expect("binding the listen address");
                port_tx.send(listeners.aicc.local_addr().expect("a bound listener").port()).expect("the starter waits for the port");
                run(startup, listeners, robot_port, async {
                    let _ = shutdown_rx.await;
                })
                .await
                .expect("the bridge runs");
            });
        });
        let port = port_rx.recv().expect("the bridge reports its port");
        InProcessBridge { port, robot, shutdown: Some(shutdown_tx), thread: Some(thread) }
    }
}

impl Drop for InProcessBridge {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

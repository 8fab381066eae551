//! The whole bridge in-process on a robot without ROS (the test robot:
//! sensors the test fills, commands recorded), served on 127.0.0.1:0 over
//! real TCP. No ROS and no simulator: what these tests check is the
//! server, the protocol and their limits.
#![allow(dead_code)]

use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use aicc_bridge::bridge::{run, Listeners, Startup};
use aicc_bridge::config::{Config, DEFAULT_NODE_NAME};
use aicc_bridge::robot::testing::TestRobot;

#[allow(unused_imports)]
pub use aicc_testkit::AiccClient;

/// A bridge running on its own runtime thread; dropping it shuts it down.
pub struct InProcessBridge {
    pub port: u16,
    pub robot: TestRobot,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
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

/// A configuration from the text of a parameter file's `ros__parameters`
/// (each line indented by four spaces), listening on a free port.
pub fn config(parameters: &str) -> Config {
    let mut config = Config::from_params_yaml(&format!("{DEFAULT_NODE_NAME}:\n  ros__parameters:\n    listen: \"127.0.0.1:0\"\n{parameters}"), DEFAULT_NODE_NAME).expect("a valid test configuration");
    config.listen = "127.0.0.1:0".into();
    config
}

/// Starts the bridge with `config`; `env` stands for the environment the
/// tokens are read from.
pub fn start(config: Config, env: &[(&str, &str)]) -> InProcessBridge {
    capture_logs();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let config = Arc::new(config);
    let startup = Startup::from_config(config.clone(), |name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())).expect("the bridge starts");
    let robot = TestRobot::new(&config);
    let robot_port = robot.robot.clone();
    let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
        runtime.block_on(async move {
            let listeners = Listeners::bind(&config).await.expect("binding 127.0.0.1:0");
            port_tx.send(listeners.aicc.local_addr().unwrap().port()).unwrap();
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

/// Everything the bridges of this test process logged.
pub fn logs() -> String {
    String::from_utf8_lossy(&log_buffer().lock().unwrap()).into_owned()
}

/// Whether `text` is logged within 2 s (a connection's task logs its end
/// just after closing the socket the test saw close).
pub fn logged_soon(text: &str) -> bool {
    (0..40).any(|_| logs().contains(text) || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        false
    })
}

fn log_buffer() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(Default::default)
}

/// Sends every log record of this process into [`logs`] (and stderr).
fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let buffer = log_buffer().clone();
        let writer = move || Tee(buffer.clone());
        let _ = tracing_subscriber::fmt().with_ansi(false).with_writer(writer).with_env_filter("debug").try_init();
    });
}

struct Tee(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Tee {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        std::io::stderr().write(bytes)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

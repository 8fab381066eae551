//! The whole bridge in-process on a robot without ROS (the test robot:
//! sensors the test fills, commands recorded), served on 127.0.0.1:0 over
//! real TCP. No ROS and no simulator: what these tests check is the
//! server, the protocol and their limits.
#![allow(dead_code)]

use std::sync::{Arc, Mutex, OnceLock};

use aicc_bridge::Config;
use aicc_testkit::{loopback_config, TestBridge};

#[allow(unused_imports)]
pub use aicc_testkit::AiccClient;

/// A bridge running on its own runtime thread; dropping it shuts it down.
pub type InProcessBridge = TestBridge;

/// A configuration from the text of a parameter file's `ros__parameters`
/// (each line indented by four spaces), listening on a free port.
pub fn config(parameters: &str) -> Config {
    loopback_config(parameters)
}

/// Starts the bridge with `config`; `env` stands for the environment the
/// tokens are read from.
pub fn start(config: Config, env: &[(&str, &str)]) -> InProcessBridge {
    capture_logs();
    TestBridge::start(config, |name| {
        env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    })
}

/// Everything the bridges of this test process logged.
pub fn logs() -> String {
    String::from_utf8_lossy(&log_buffer().lock().unwrap()).into_owned()
}

/// Whether `text` is logged within 2 s (a connection's task logs its end
/// just after closing the socket the test saw close).
pub fn logged_soon(text: &str) -> bool {
    (0..40).any(|_| {
        logs().contains(text) || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            false
        }
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
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(writer)
            .with_env_filter("debug")
            .try_init();
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

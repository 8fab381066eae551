//! Test support for integration tests that run the real bridge beside the
//! simulated robot over real ROS 2 topics. Each test process uses its own
//! ROS_DOMAIN_ID with localhost-only discovery, so parallel runs never see
//! each other.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A binary of the workspace, from the profile directory this test was
/// built in (target/<profile>/). Cargo builds this package's own binary
/// (aicc-ros2) for its tests; the other crates' binaries (aicc, ...) it
/// does not: `cargo build --release --workspace --bins` (what
/// scripts/test.sh does first) builds them. A binary older than one of its
/// sources (cargo's dep-info beside it lists them) is refused: a test of
/// an edited program must not run the program as it was.
pub fn binary(name: &str) -> PathBuf {
    let test_exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/<test>-<hash>
    let profile_dir = test_exe.parent().and_then(Path::parent).expect("target/<profile>/deps");
    let path = profile_dir.join(name);
    assert!(path.exists(), "{} is missing: build the workspace's binaries first (cargo build --release --workspace --bins)", path.display());
    if let Some(source) = newer_source(&path) {
        panic!("{} is older than its source {}: build the workspace's binaries first (cargo build --release --workspace --bins)", path.display(), source.display());
    }
    path
}

/// A source of `binary` modified after it was built, from the dep-info
/// file cargo writes beside it (`<binary>.d`: "<binary>: <source> ...",
/// spaces in paths escaped); None when all are older or there is no file.
fn newer_source(binary: &Path) -> Option<PathBuf> {
    let built = std::fs::metadata(binary).and_then(|m| m.modified()).ok()?;
    let dep_info = std::fs::read_to_string(binary.with_extension("d")).ok()?;
    let (_, sources) = dep_info.lines().next()?.split_once(": ")?;
    let mut paths = Vec::new();
    let mut current = String::new();
    for word in sources.split(' ') {
        if let Some(escaped) = word.strip_suffix('\\') {
            current.push_str(escaped);
            current.push(' ');
        } else {
            current.push_str(word);
            paths.push(PathBuf::from(std::mem::take(&mut current)));
        }
    }
    paths.into_iter().filter(|p| !p.as_os_str().is_empty()).find(|source| {
        std::fs::metadata(source).and_then(|m| m.modified()).is_ok_and(|modified| modified > built)
    })
}

/// A domain id for this test process, within the range Fast DDS handles
/// on Linux (0..=101), claimed with a lock file so that test processes
/// running at once never share one (a stale lock of a dead process is
/// taken over).
pub fn domain_id() -> u32 {
    static DOMAIN: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *DOMAIN.get_or_init(|| {
        let me = std::process::id();
        let start = me % 90;
        for offset in 0..90 {
            let domain = 10 + (start + offset) % 90;
            let lock = std::env::temp_dir().join(format!("aicc-ros2-test-domain-{domain}.lock"));
            let holder =
                std::fs::read_to_string(&lock).ok().and_then(|t| t.trim().parse::<u32>().ok());
            let free = match holder {
                None => true,
                Some(pid) => pid == me || !Path::new(&format!("/proc/{pid}")).exists(),
            };
            if !free {
                continue;
            }
            if holder.is_some() {
                let _ = std::fs::remove_file(&lock);
            }
            let created = std::fs::OpenOptions::new().write(true).create_new(true).open(&lock);
            if let Ok(mut file) = created {
                let _ = write!(file, "{me}");
                return domain;
            }
        }
        panic!("no free ROS domain id in 10..100 for this test process")
    })
}

/// Sets the ROS environment of this process (and so of its children) once.
pub fn ros_environment() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::env::set_var("ROS_DOMAIN_ID", domain_id().to_string());
        std::env::set_var("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST");
        std::env::set_var("RCUTILS_LOGGING_BUFFERED_STREAM", "1");
    });
}

/// One simulated robot at a time in a test process: the tests of a file
/// share its ROS domain, and two simulators there mix their topics (a
/// bridge then reads one robot's joints beside the other's camera, and one
/// test's events arrive in the other's).
static ONE_SIMULATOR: Mutex<()> = Mutex::new(());

/// A child process that is stopped (SIGTERM, then SIGKILL) when dropped.
pub struct ChildGuard {
    pub name: &'static str,
    pub child: Child,
    /// Held while this child is the process's simulator (released after
    /// it is stopped: fields drop after `Drop::drop`).
    _simulator_turn: Option<MutexGuard<'static, ()>>,
}

impl ChildGuard {
    pub fn new(name: &'static str, child: Child) -> Self {
        ChildGuard { name, child, _simulator_turn: None }
    }

    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Reads `stdout` until a line starting with `marker`; returns that line.
/// The rest of the output keeps being drained so the child never blocks.
fn wait_for_marker(
    name: &str,
    stdout: ChildStdout,
    marker: &'static str,
    timeout: Duration,
) -> String {
    wait_for_markers(name, stdout, &[marker], timeout).remove(0)
}

/// Reads `stdout` until a line starting with each marker, in order;
/// returns those lines.
fn wait_for_markers(
    name: &str,
    stdout: ChildStdout,
    markers: &[&'static str],
    timeout: Duration,
) -> Vec<String> {
    let (tx, rx) = mpsc::channel();
    let wanted = markers.to_vec();
    thread::spawn(move || {
        let mut next = 0;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if next < wanted.len() && line.starts_with(wanted[next]) {
                let _ = tx.send(line);
                next += 1;
            }
        }
    });
    let deadline = Instant::now() + timeout;
    markers
        .iter()
        .map(|marker| {
            rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("{name} did not print {marker} within {timeout:?}"))
        })
        .collect()
}

/// Starts the MuJoCo simulated robot with its ground truth for judges
/// without ROS (`--truth-listen 127.0.0.1:0`, sim/truth.py) and the spare
/// low obstacles; returns it and the ground truth's port.
pub fn start_sim_with_truth(extra_args: &[&str]) -> (ChildGuard, u16) {
    let mut args = vec!["--truth-listen", "127.0.0.1:0", "--low-obstacles"];
    args.extend_from_slice(extra_args);
    let (guard, lines) = spawn_sim(&args, &["AICC_SIM_TRUTH ", "AICC_SIM_READY"]);
    let info: Value = serde_json::from_str(lines[0].trim_start_matches("AICC_SIM_TRUTH "))
        .unwrap_or_else(|e| panic!("AICC_SIM_TRUTH carries JSON ({e}): {}", lines[0]));
    (guard, info["port"].as_u64().expect("port") as u16)
}

/// Starts the MuJoCo simulated robot and waits until it publishes.
pub fn start_sim(extra_args: &[&str]) -> ChildGuard {
    spawn_sim(extra_args, &["AICC_SIM_READY"]).0
}

fn spawn_sim(extra_args: &[&str], markers: &[&'static str]) -> (ChildGuard, Vec<String>) {
    ros_environment();
    // A test that panicked with the simulator up poisons the lock; the
    // simulator is stopped all the same.
    let turn = ONE_SIMULATOR.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let root = repo_root();
    let ros_env = root.join("scripts/ros-env");
    assert!(
        root.join(".deps/ros2/bin/python3").exists() || std::env::var("ROS_DISTRO").is_ok(),
        "run scripts/setup.sh first: the ROS 2 prefix .deps/ros2 is missing"
    );
    let mut child = Command::new(ros_env)
        .arg("python3")
        .arg(root.join("sim/aicc_sim.py"))
        .args(["--urdf", root.join("urdf/aicc_bot.urdf").to_str().unwrap()])
        .args(extra_args)
        .current_dir(&root)
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("starting the simulator");
    let stdout = child.stdout.take().unwrap();
    let guard = ChildGuard { name: "simulator", child, _simulator_turn: Some(turn) };
    let lines = wait_for_markers("the simulator", stdout, markers, Duration::from_secs(120));
    (guard, lines)
}

/// Starts the bridge on a free port; returns it and the port.
pub fn start_bridge(extra_args: &[&str]) -> (ChildGuard, u16) {
    let (guard, port, _) = start_bridge_with(extra_args, &[]);
    (guard, port)
}

/// Starts the bridge with extra environment variables; also returns what
/// it writes on stderr (its log), collected as it runs.
pub fn start_bridge_with(
    extra_args: &[&str],
    envs: &[(&str, &str)],
) -> (ChildGuard, u16, Arc<Mutex<String>>) {
    let (guard, ports, log) =
        spawn_bridge(&["--listen", "127.0.0.1:0"], extra_args, envs, &["AICC_READY "]);
    (guard, ports[0], log)
}

/// Starts the bridge listening on `listen` (e.g. another interface's
/// address, port 0); returns it, the port and its log.
pub fn start_bridge_on(
    listen: &str,
    extra_args: &[&str],
    envs: &[(&str, &str)],
) -> (ChildGuard, u16, Arc<Mutex<String>>) {
    let (guard, ports, log) =
        spawn_bridge(&["--listen", listen], extra_args, envs, &["AICC_READY "]);
    (guard, ports[0], log)
}

/// Starts the bridge with the AI-control dialect on a free port as well
/// (`--ai-control-listen 127.0.0.1:0`); returns it, the AICC port, the
/// AI-control port (from its `AI_CONTROL_READY` line) and its log.
pub fn start_bridge_with_ai_control(
    extra_args: &[&str],
    envs: &[(&str, &str)],
) -> (ChildGuard, u16, u16, Arc<Mutex<String>>) {
    let listen = ["--listen", "127.0.0.1:0", "--ai-control-listen", "127.0.0.1:0"];
    let (guard, ports, log) =
        spawn_bridge(&listen, extra_args, envs, &["AICC_READY ", "AI_CONTROL_READY "]);
    (guard, ports[0], ports[1], log)
}

/// Starts the bridge with the operator's console on a free port as well
/// (`--console-listen 127.0.0.1:0`); returns it, the AICC port, the
/// console's port (from its `CONSOLE_READY` line) and its log.
pub fn start_bridge_with_console(
    extra_args: &[&str],
    envs: &[(&str, &str)],
) -> (ChildGuard, u16, u16, Arc<Mutex<String>>) {
    let listen = ["--listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0"];
    let (guard, ports, log) =
        spawn_bridge(&listen, extra_args, envs, &["AICC_READY ", "CONSOLE_READY "]);
    (guard, ports[0], ports[1], log)
}

/// Starts the bridge with every front end on free ports: AICC, the
/// AI-control dialect and the console; returns it, the three ports (from
/// their ready lines) and its log.
pub fn start_bridge_with_every_front_end(
    extra_args: &[&str],
    envs: &[(&str, &str)],
) -> (ChildGuard, [u16; 3], Arc<Mutex<String>>) {
    let listen = [
        "--listen",
        "127.0.0.1:0",
        "--ai-control-listen",
        "127.0.0.1:0",
        "--console-listen",
        "127.0.0.1:0",
    ];
    let (guard, ports, log) = spawn_bridge(
        &listen,
        extra_args,
        envs,
        &["AICC_READY ", "AI_CONTROL_READY ", "CONSOLE_READY "],
    );
    (guard, [ports[0], ports[1], ports[2]], log)
}

/// Spawns the bridge and waits for its ready lines (`MARKER {"host","port"}`
/// on stdout, in order); returns the port of each.
fn spawn_bridge(
    listen: &[&str],
    extra_args: &[&str],
    envs: &[(&str, &str)],
    markers: &[&'static str],
) -> (ChildGuard, Vec<u16>, Arc<Mutex<String>>) {
    ros_environment();
    let mut child = Command::new(binary("aicc-ros2"))
        // Relative paths in tests (e.g. --config config/sim.yaml) are the repository's.
        .current_dir(repo_root())
        .args(listen)
        .args(extra_args)
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("starting the bridge");
    let stdout = child.stdout.take().unwrap();
    let log = collect(child.stderr.take().unwrap());
    let guard = ChildGuard::new("bridge", child);
    let lines = wait_for_markers("the bridge", stdout, markers, Duration::from_secs(30));
    let host = listen[1].rsplit_once(':').map_or("", |(host, _)| host);
    let ports = lines
        .iter()
        .zip(markers)
        .map(|(line, marker)| {
            let info: Value = serde_json::from_str(line.trim_start_matches(marker))
                .unwrap_or_else(|e| panic!("{marker}carries JSON ({e}): {line}"));
            assert_eq!(info["host"], host, "{line}");
            info["port"].as_u64().expect("port") as u16
        })
        .collect();
    (guard, ports, log)
}

/// Collects a pipe's text in the background (echoing it for --nocapture).
pub fn collect(pipe: impl std::io::Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            eprintln!("{line}");
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}

#[allow(unused_imports)]
pub use aicc_testkit::AiccClient;

/// A test's own node spinning on its own thread; dropping it stops the
/// node, and its subscription leaves the ROS graph (a recorder of one test
/// must not stay on a topic whose types a later test's bridge reads).
pub struct Spinning {
    running: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Spinning {
    /// Leaves the node spinning until the test process ends.
    pub fn detach(mut self) {
        self.thread.take();
    }
}

impl Drop for Spinning {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.running.store(false, std::sync::atomic::Ordering::Relaxed);
            let _ = thread.join();
        }
    }
}

/// Subscribes to `topic` on a node of the test's own that spins on its own
/// thread until dropped; `on_message` runs for every message. Returns once
/// subscribed.
pub fn subscribe_in_thread<T>(
    node_name: &'static str,
    topic: &'static str,
    qos: r2r::QosProfile,
    mut on_message: impl FnMut(T) + Send + 'static,
) -> Spinning
where
    T: r2r::WrappedTypesupport + 'static,
{
    use futures::{FutureExt, StreamExt};
    ros_environment();
    let (ready_tx, ready_rx) = mpsc::channel();
    let running = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let still_running = running.clone();
    let spin = thread::spawn(move || {
        let context = r2r::Context::create().expect("ROS context");
        let mut node = r2r::Node::create(context, node_name, "").expect("node");
        let mut stream = node
            .subscribe::<T>(topic, qos)
            .unwrap_or_else(|e| panic!("subscribing to {topic}: {e}"));
        ready_tx.send(()).unwrap();
        while still_running.load(std::sync::atomic::Ordering::Relaxed) {
            node.spin_once(Duration::from_millis(1));
            while let Some(Some(msg)) = stream.next().now_or_never() {
                on_message(msg);
            }
        }
    });
    ready_rx.recv().unwrap();
    Spinning { running, thread: Some(spin) }
}

/// Tells the simulator to pause or resume publishing some of its topics
/// (`{"pause": [...]}` / `{"resume": [...]}` on /sim_control): a sensor
/// gone quiet, as a test needs it. Returns once the simulator has it.
pub fn sim_control(command: Value) {
    ros_environment();
    let root = repo_root();
    let output = Command::new(root.join("scripts/ros-env"))
        .arg("python3")
        .arg(root.join("tests/py/sim_control.py"))
        .arg(command.to_string())
        .output()
        .expect("running the sim_control client");
    assert!(
        output.status.success(),
        "sim_control {command}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The simulator's ground truth, read from its ROS topic by a node of the test's own.
pub struct GroundTruth {
    latest: Arc<Mutex<Option<(f64, f64, f64)>>>,
    _spin: Spinning,
}

impl GroundTruth {
    pub fn subscribe() -> Self {
        ros_environment();
        let latest = Arc::new(Mutex::new(None));
        let sink = latest.clone();
        let spin = subscribe_in_thread::<r2r::nav_msgs::msg::Odometry>(
            "ground_truth_reader",
            "/ground_truth/odom",
            r2r::QosProfile::sensor_data(),
            move |msg| {
                let p = msg.pose.pose.position;
                let q = msg.pose.pose.orientation;
                let yaw =
                    (2.0 * (q.w * q.z + q.x * q.y)).atan2(1.0 - 2.0 * (q.y * q.y + q.z * q.z));
                *sink.lock().unwrap() = Some((p.x, p.y, yaw));
            },
        );
        GroundTruth { latest, _spin: spin }
    }

    /// The latest true (x, y, yaw) of base_footprint in the world frame.
    pub fn pose(&self) -> (f64, f64, f64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(pose) = *self.latest.lock().unwrap() {
                return pose;
            }
            assert!(Instant::now() < deadline, "no ground truth on /ground_truth/odom within 30 s");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The pose once the robot has been still (moved < 1 mm) for 300 ms.
    pub fn settled_pose(&self) -> (f64, f64, f64) {
        let mut last = self.pose();
        let mut still_since = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
            let now = self.pose();
            if (now.0 - last.0).hypot(now.1 - last.1) > 0.001 {
                still_since = Instant::now();
            }
            last = now;
            if still_since.elapsed() > Duration::from_millis(300) {
                break;
            }
        }
        last
    }
}

/// Records every /cmd_vel the bridge publishes, with its arrival time.
pub struct CmdVelRecorder {
    pub samples: Arc<Mutex<Vec<(Instant, f64, f64)>>>,
    _spin: Spinning,
}

impl CmdVelRecorder {
    /// Records /cmd_vel as Twist.
    pub fn subscribe() -> Self {
        Self::recording::<r2r::geometry_msgs::msg::Twist>(|msg| msg)
    }

    /// The same, of TwistStamped: a robot that takes TwistStamped (the
    /// TurtleBots on Jazzy) must see only that type on /cmd_vel.
    pub fn subscribe_stamped() -> Self {
        Self::recording::<r2r::geometry_msgs::msg::TwistStamped>(|msg| msg.twist)
    }

    fn recording<T>(twist: fn(T) -> r2r::geometry_msgs::msg::Twist) -> Self
    where
        T: r2r::WrappedTypesupport + 'static,
    {
        ros_environment();
        let samples = Arc::new(Mutex::new(Vec::new()));
        let sink = samples.clone();
        let spin = subscribe_in_thread::<T>(
            "cmd_vel_recorder",
            "/cmd_vel",
            r2r::QosProfile::default().best_effort(),
            move |msg| {
                let twist = twist(msg);
                sink.lock().unwrap().push((Instant::now(), twist.linear.x, twist.angular.z));
            },
        );
        CmdVelRecorder { samples, _spin: spin }
    }

    /// The first all-zero command received after `since`.
    pub fn first_zero_after(&self, since: Instant) -> Option<Instant> {
        self.samples
            .lock()
            .unwrap()
            .iter()
            .find(|(t, v, w)| *t >= since && *v == 0.0 && *w == 0.0)
            .map(|(t, _, _)| *t)
    }

    /// What arrived after `since`: how many commands, and the last one
    /// (ms after `since`, linear, angular), for a failure's message.
    pub fn summary_after(&self, since: Instant) -> String {
        let samples = self.samples.lock().unwrap();
        let after: Vec<_> = samples.iter().filter(|(t, _, _)| *t >= since).collect();
        match after.last() {
            Some((t, v, w)) => format!(
                "{} commands, the last {:.0} ms after: linear {v} m/s, angular {w} rad/s",
                after.len(),
                (*t - since).as_secs_f64() * 1000.0
            ),
            None => format!("no command at all ({} before)", samples.len()),
        }
    }

    /// The largest forward speed commanded after `since`; None when nothing
    /// was recorded (an empty recording has no maximum to pass a check).
    pub fn max_linear_after(&self, since: Instant) -> Option<f64> {
        self.samples
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _, _)| *t >= since)
            .map(|(_, v, _)| *v)
            .max_by(f64::total_cmp)
    }

    /// The most negative linear speed commanded since `since`; None when
    /// nothing was recorded (so that "reversing" is never read off an
    /// empty recording).
    pub fn fastest_reverse_after(&self, since: Instant) -> Option<f64> {
        self.samples
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _, _)| *t >= since)
            .map(|(_, v, _)| *v)
            .min_by(f64::total_cmp)
    }
}

/// The simulator's world ground truth (/ground_truth/world, JSON at 5 Hz:
/// `sim_time`, `base`, `objects`, `bumper_in_contact`,
/// `camera_center_distance_m`, `joints`, ...), read by a node of the test's own.
pub struct WorldTruth {
    latest: Arc<Mutex<Option<(Instant, Value)>>>,
    _spin: Spinning,
}

impl WorldTruth {
    pub fn subscribe() -> Self {
        ros_environment();
        let latest = Arc::new(Mutex::new(None));
        let sink = latest.clone();
        let spin = subscribe_in_thread::<r2r::std_msgs::msg::String>(
            "world_truth_reader",
            "/ground_truth/world",
            r2r::QosProfile::default().keep_last(2),
            move |msg| {
                if let Ok(value) = serde_json::from_str::<Value>(&msg.data) {
                    *sink.lock().unwrap() = Some((Instant::now(), value));
                }
            },
        );
        WorldTruth { latest, _spin: spin }
    }

    /// The first ground truth received after `instant` (waits up to 30 s).
    pub fn after(&self, instant: Instant) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some((received, value)) = self.latest.lock().unwrap().as_ref() {
                if *received > instant {
                    return value.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "no ground truth on /ground_truth/world within 30 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// A ground truth at least as new as this call.
    pub fn now(&self) -> Value {
        self.after(Instant::now())
    }
}

/// Records every message of a std_msgs/String topic (e.g. /say), with its
/// arrival time.
pub struct StringRecorder {
    pub messages: Arc<Mutex<Vec<(Instant, String)>>>,
    _spin: Spinning,
}

impl StringRecorder {
    pub fn subscribe(topic: &'static str) -> Self {
        ros_environment();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let sink = messages.clone();
        let spin = subscribe_in_thread::<r2r::std_msgs::msg::String>(
            "string_recorder",
            topic,
            r2r::QosProfile::default(),
            move |msg| {
                sink.lock().unwrap().push((Instant::now(), msg.data));
            },
        );
        StringRecorder { messages, _spin: spin }
    }

    /// Waits up to `timeout` for a message equal to `text`.
    pub fn wait_for(&self, text: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.messages.lock().unwrap().iter().any(|(_, m)| m == text) {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

/// Records the simulator's true speed (/ground_truth/odom twist, in
/// base_footprint): (arrival time, linear m/s, angular rad/s).
pub struct TruthSpeed {
    pub samples: Arc<Mutex<Vec<(Instant, f64, f64)>>>,
    _spin: Spinning,
}

impl TruthSpeed {
    pub fn subscribe() -> Self {
        ros_environment();
        let samples = Arc::new(Mutex::new(Vec::new()));
        let sink = samples.clone();
        let spin = subscribe_in_thread::<r2r::nav_msgs::msg::Odometry>(
            "truth_speed_reader",
            "/ground_truth/odom",
            r2r::QosProfile::sensor_data(),
            move |msg| {
                let v = msg.twist.twist.linear;
                sink.lock().unwrap().push((
                    Instant::now(),
                    v.x.hypot(v.y),
                    msg.twist.twist.angular.z,
                ));
            },
        );
        TruthSpeed { samples, _spin: spin }
    }

    /// The latest (linear m/s, angular rad/s).
    pub fn latest(&self) -> Option<(f64, f64)> {
        self.samples.lock().unwrap().last().map(|(_, v, w)| (*v, *w))
    }

    /// The first time after `since` from which every sample (until now)
    /// has |linear| < `linear_mps` and |angular| < `angular_radps`.
    pub fn still_from(
        &self,
        since: Instant,
        linear_mps: f64,
        angular_radps: f64,
    ) -> Option<Instant> {
        let samples = self.samples.lock().unwrap();
        let mut still_since = None;
        for (t, v, w) in samples.iter().filter(|(t, _, _)| *t >= since) {
            if v.abs() < linear_mps && w.abs() < angular_radps {
                still_since.get_or_insert(*t);
            } else {
                still_since = None;
            }
        }
        still_since
    }
}

/// The simulator's clock as a plain subscriber sees it: the latest /clock.
#[derive(Clone)]
pub struct SimClock {
    latest_s: Arc<Mutex<Option<f64>>>,
    _spin: Arc<Spinning>,
}

impl SimClock {
    pub fn subscribe() -> Self {
        ros_environment();
        let latest_s = Arc::new(Mutex::new(None));
        let sink = latest_s.clone();
        let spin = subscribe_in_thread::<r2r::rosgraph_msgs::msg::Clock>(
            "sim_clock_reader",
            "/clock",
            r2r::QosProfile::default(),
            move |msg| {
                *sink.lock().unwrap() =
                    Some(f64::from(msg.clock.sec) + f64::from(msg.clock.nanosec) * 1e-9);
            },
        );
        SimClock { latest_s, _spin: Arc::new(spin) }
    }

    /// The latest /clock time, seconds.
    pub fn now_s(&self) -> Option<f64> {
        *self.latest_s.lock().unwrap()
    }
}

/// A plain reliable subscriber to the camera, as the reference the bridge
/// is measured against: each frame's stamp and how long after its capture
/// it arrived (by the latest /clock: at the clock's 10 ms resolution).
pub struct FrameWatcher {
    pub frames: Arc<Mutex<Vec<(f64, f64)>>>,
    _spin: Spinning,
}

impl FrameWatcher {
    pub fn subscribe(topic: &'static str, clock: SimClock) -> Self {
        ros_environment();
        let frames = Arc::new(Mutex::new(Vec::new()));
        let sink = frames.clone();
        let qos = r2r::QosProfile::default().reliable().keep_last(5);
        let spin = subscribe_in_thread::<r2r::sensor_msgs::msg::Image>(
            "frame_watcher",
            topic,
            qos,
            move |msg| {
                let stamp_s =
                    f64::from(msg.header.stamp.sec) + f64::from(msg.header.stamp.nanosec) * 1e-9;
                if let Some(now_s) = clock.now_s() {
                    sink.lock().unwrap().push((stamp_s, now_s - stamp_s));
                }
            },
        );
        FrameWatcher { frames, _spin: spin }
    }

    /// Frames seen so far.
    pub fn count(&self) -> usize {
        self.frames.lock().unwrap().len()
    }

    /// The median delay from capture to receipt, seconds.
    pub fn median_delay_s(&self) -> Option<f64> {
        let mut delays: Vec<f64> = self.frames.lock().unwrap().iter().map(|(_, d)| *d).collect();
        delays.sort_by(f64::total_cmp);
        delays.get(delays.len() / 2).copied()
    }
}

/// Sends one command on the simulator's ground-truth channel (a test
/// stand-in: `{"place": ...}`, `{"scene": ...}`, `{"odom_jump": ...}`, see
/// sim/README.md) and returns its acknowledgement once the simulation
/// loop has applied it.
pub fn truth_command(truth_port: u16, command: Value) -> Value {
    let stream = std::net::TcpStream::connect(("127.0.0.1", truth_port))
        .expect("the simulator's ground-truth channel");
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut command = command;
    command["id"] = Value::from("test");
    writeln!(writer, "{command}").unwrap();
    for line in BufReader::new(stream).lines() {
        let line = line.expect("the ground-truth channel answers");
        let message: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if message["type"] == "ack" && message["id"] == "test" {
            assert_eq!(message["ok"], true, "the simulator refused {command}: {message}");
            return message;
        }
    }
    panic!("the ground-truth channel closed before acknowledging {command}")
}

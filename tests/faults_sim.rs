//! The fault matrix: what happens to a moving robot when something fails
//! underneath it, measured on the simulator's ground truth and on /cmd_vel as
//! a ROS subscriber sees it. Each case starts a move, injects the fault
//! mid-move and checks that the robot stops (and how soon), that the bridge
//! stays up and that it serves again once the fault is gone:
//! - odometry silent, the depth camera silent (the simulator pauses them);
//! - the agent killed while two threads keep both cores busy (the deadman
//!   under load);
//! - the agent stalled: its socket open, nothing read or sent (dead peer);
//! - a TLS agent in another network namespace whose link is cut;
//! - the simulator killed mid-move, then started again.
//!
//! The bridge's SIGTERM mid-move is in governor_sim.rs. Figures are printed
//! (`--nocapture`); the bounds asserted are the safety promises, with room
//! for a loaded machine, not speed targets.
mod support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{
    sim_control, start_bridge, start_bridge_on, start_bridge_with, start_sim, subscribe_in_thread,
    AiccClient, CmdVelRecorder, GroundTruth, TruthSpeed,
};

/// Dead-peer detection in these tests: 4 heartbeat intervals of 0.5 s.
/// The stalled agent's move must be at speed within the bound: its first
/// centimetres are not crept (the arm hides a band just ahead; a move
/// creeps until it has seen that band clear, which governor_sim tests).
const HEARTBEAT_ARGS: [&str; 9] = [
    "--ros-args",
    "-p",
    "heartbeat_interval_s:=0.5",
    "-p",
    "dead_peer_intervals:=4",
    "-p",
    "safety.unobserved_behind:=allow",
    "-p",
    "safety.unobserved_ahead:=allow",
];
/// These tests reverse toward the room's south wall (the robot spawns
/// facing the red box): nothing on the bundled robot watches low obstacles
/// behind it, so reverse is allowed here explicitly (the default refuses it).
const REVERSE_ALLOWED: [&str; 3] = ["--ros-args", "-p", "safety.unobserved_behind:=allow"];
const DEAD_PEER: Duration = Duration::from_millis(2000);
/// Still: slower than this on the ground truth.
const STILL_MPS: f64 = 0.01;
const STILL_RADPS: f64 = 0.02;

/// The cases share this process's ROS domain (one simulator at a time): one
/// case runs at a time, whatever the test harness's thread count.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn tool_call(call_id: &str, tool: &str, input: Value) -> String {
    json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": call_id, "tool": tool, "input": input }).to_string()
}

/// Proprioception until it answers (sensors flowing), up to 60 s.
fn wait_ready(client: &mut AiccClient, id: &str) {
    let ready = client.call_when_ready(id, "proprioception", json!({}), Duration::from_secs(60));
    assert_eq!(ready["ok"], true, "the bridge never served proprioception: {ready}");
}

/// Waits until the ground truth says the robot moves faster than `mps` (or turns faster than `radps`).
fn wait_moving(speed: &TruthSpeed, mps: f64, radps: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some((v, w)) = speed.latest() {
            if v.abs() > mps || w.abs() > radps {
                return;
            }
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("the robot did not start moving within 10 s");
}

/// Waits up to `timeout` for the robot to stay still for 300 ms; returns
/// when it became still.
fn wait_still(speed: &TruthSpeed, since: Instant, timeout: Duration) -> Option<Instant> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
        if let Some(still) = speed.still_from(since, STILL_MPS, STILL_RADPS) {
            if still.elapsed() >= Duration::from_millis(300) {
                return Some(still);
            }
        }
    }
    None
}

/// The result of call `call_id`: the one already received, or (once the
/// robot is known to be still) after a `cancel` of it, whichever comes.
fn end_call(client: &mut AiccClient, call_id: &str) -> Value {
    let is_it = |m: &Value| m["type"] == "tool_result" && m["call_id"] == call_id;
    if let Some(found) = client.other.iter().position(is_it) {
        return client.other.remove(found);
    }
    client.send_line(&tool_call(
        &format!("cancel-{call_id}"),
        "cancel",
        json!({ "call_id": call_id }),
    ));
    loop {
        let message = client.read_message();
        if is_it(&message) {
            return message;
        }
        client.other.push(message);
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Records when the latest message of a topic arrived.
fn last_arrival<T: r2r::WrappedTypesupport + 'static>(
    node: &'static str,
    topic: &'static str,
) -> Arc<Mutex<Option<Instant>>> {
    let last = Arc::new(Mutex::new(None));
    let sink = last.clone();
    subscribe_in_thread::<T>(node, topic, r2r::QosProfile::sensor_data(), move |_| {
        *sink.lock().unwrap() = Some(Instant::now())
    })
    .detach();
    last
}

/// Keeps both cores busy while alive.
struct CpuLoad {
    running: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl CpuLoad {
    fn start(threads: usize) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let threads = (0..threads)
            .map(|_| {
                let running = running.clone();
                thread::spawn(move || {
                    let mut x = 0u64;
                    while running.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        CpuLoad { running, threads }
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[test]
fn sensor_silence_a_killed_agent_and_a_stalled_agent_stop_the_robot() {
    let _serial = one_at_a_time();
    let _sim = start_sim(&[]);
    let speed = TruthSpeed::subscribe();
    let truth = GroundTruth::subscribe();
    let cmd_vel = CmdVelRecorder::subscribe();
    let last_odom = last_arrival::<r2r::nav_msgs::msg::Odometry>("odom_watch", "/odom");
    let last_depth =
        last_arrival::<r2r::sensor_msgs::msg::Image>("depth_watch", "/camera/depth/image_raw");
    let (bridge, port) = start_bridge(&REVERSE_ALLOWED);
    let (mut client, _) = AiccClient::connect(port);
    wait_ready(&mut client, "ready");

    // 1. Odometry goes silent during a turn: the bridge cannot tell where
    //    the robot is, so it stops it.
    // A slow turn (6 s): a pause that reaches a loaded simulator late still
    // lands mid-turn, where it must end the turn (the bridge waits out 1.5 s
    // of late odometry, stopped, then fails the turn).
    client.send_line(&tool_call("turn", "turn", json!({ "yaw": 180.0, "speed_dps": 30.0 })));
    wait_moving(&speed, 0.3, 0.3);
    sim_control(json!({ "pause": ["odom"] }));
    let paused = Instant::now();
    let still = wait_still(&speed, paused, Duration::from_secs(5))
        .expect("the robot stopped after odometry went silent");
    let last = last_odom.lock().unwrap().expect("odometry was flowing");
    let result = end_call(&mut client, "turn");
    println!("odometry silent: still {:.0} ms after the last /odom ({:.0} ms after the pause); the turn: {}", ms(still - last), ms(still - paused), result["error"]["message"]);
    assert_eq!(result["ok"], false, "the turn did not fail: {result}");
    assert!(
        still - last < Duration::from_millis(1500),
        "still only {:?} after the last /odom",
        still - last
    );
    sim_control(json!({ "resume": ["odom"] }));
    wait_ready(&mut client, "ready-odom");
    // The turn stopped part-way: finish it on the ground truth, so that
    // the robot faces the open south wall (1.8 m away) whatever the pause
    // left, not the pedestal or the box it may now face.
    let (_, _, yaw) = truth.pose();
    let rest_deg =
        (std::f64::consts::PI - yaw).sin().atan2((std::f64::consts::PI - yaw).cos()).to_degrees();
    let finished = client.call("turn-rest", "turn", json!({ "yaw": rest_deg }));
    assert_eq!(finished["ok"], true, "finishing the turn ({rest_deg:.0} deg): {finished}");

    // 2. The depth camera goes silent during a forward move: the way ahead
    //    is no longer known to be clear. (A slow move: the pause, a Python
    //    client's start, can take seconds on a loaded machine.)
    client.send_line(&tool_call("ahead", "move", json!({ "forward": 0.8, "speed_mps": 0.08 })));
    wait_moving(&speed, 0.05, 10.0);
    sim_control(json!({ "pause": ["camera"] }));
    let paused = Instant::now();
    let still = wait_still(&speed, paused, Duration::from_secs(5))
        .expect("the robot stopped after the camera went silent");
    let last = last_depth.lock().unwrap().expect("depth images were flowing");
    let result = end_call(&mut client, "ahead");
    println!("camera silent: still {:.0} ms after the last depth image ({:.0} ms after the pause); the move: {}", ms(still - last), ms(still - paused), result["error"]["message"]);
    assert_eq!(result["ok"], false, "the move went on blind: {result}");
    assert!(
        still - last < Duration::from_millis(2500),
        "still only {:?} after the last depth image",
        still - last
    );
    sim_control(json!({ "resume": ["camera"] }));
    wait_ready(&mut client, "ready-camera");

    // 3. The agent is killed mid-move while both cores are busy: the deadman
    //    brakes at once and reaches zero within its deceleration.
    // (Forward, toward the south wall 1.8 m away: behind the robot now are
    // the pedestal and the box it saw, which stop a reverse.)
    client.send_line(&tool_call("back", "move", json!({ "forward": 1.0 })));
    wait_moving(&speed, 0.15, 10.0);
    let load = CpuLoad::start(2);
    thread::sleep(Duration::from_millis(200));
    let cruising = cmd_vel
        .samples
        .lock()
        .unwrap()
        .last()
        .map(|(_, v, _)| *v)
        .expect("commands during the move");
    let killed = Instant::now();
    drop(client);
    thread::sleep(Duration::from_millis(600));
    drop(load);
    let samples = cmd_vel.samples.lock().unwrap().clone();
    let braking = samples
        .iter()
        .find(|(t, v, _)| *t >= killed && v.abs() < cruising.abs() - 1e-6)
        .map(|(t, _, _)| *t - killed)
        .expect("a braking command after the agent died");
    let zero =
        cmd_vel.first_zero_after(killed).expect("a zero command after the agent died") - killed;
    println!(
        "agent killed under load (2 busy threads): first braking {:.1} ms, first zero {:.1} ms",
        ms(braking),
        ms(zero)
    );
    assert!(zero < Duration::from_millis(250), "zero only after {zero:?}");

    // 4. The agent stalls: connected, nothing read or sent. Its move goes
    //    on until the dead-peer bound, then the deadman stops the robot. (A
    //    bridge with a short bound; the test's own client answers no heartbeats.)
    drop(bridge);
    let (_bridge, port, bridge_log) = start_bridge_with(&HEARTBEAT_ARGS, &[]);
    wait_ready(&mut AiccClient::connect(port).0, "ready-stall");
    let mut stalled = AiccClient::connect_raw(port);
    let _greeting = stalled.read_message();
    // Its last message is the move: the dead-peer bound counts from there,
    // not from when the robot was first seen moving (later under load).
    let went_silent = Instant::now();
    stalled.send_line(&tool_call("stall", "move", json!({ "forward": 1.0, "speed_mps": 0.1 })));
    wait_moving(&speed, 0.05, 10.0);
    let still = wait_still(&speed, Instant::now(), Duration::from_secs(10))
        .expect("the robot stopped once the stalled peer was declared dead");
    println!(
        "agent stalled mid-move: still {:.0} ms after its last message (dead-peer bound {:.0} ms)",
        ms(still - went_silent),
        ms(DEAD_PEER)
    );
    // An early stop names what else stopped the robot: the bridge's warnings.
    let warnings = || {
        let log = bridge_log.lock().unwrap();
        let lines: Vec<&str> =
            log.lines().filter(|line| line.contains("WARN") || line.contains("ERROR")).collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };
    assert!(still - went_silent > DEAD_PEER - Duration::from_millis(500), "stopped {:?} after its last message, before the dead-peer bound; the bridge's warnings and errors:\n{}", still - went_silent, warnings());
    assert!(
        still - went_silent < DEAD_PEER + Duration::from_millis(1500),
        "still only after {:?}",
        still - went_silent
    );
    drop(stalled);

    // The bridge is up, the stalled agent's lease is gone: a new agent moves.
    let moved = AiccClient::connect(port).0.call("after", "move", json!({ "forward": -0.1 }));
    assert_eq!(moved["ok"], true, "a new agent's move after the stalled one: {moved}");
}

#[test]
fn the_simulator_killed_mid_move_and_started_again() {
    let _serial = one_at_a_time();
    let mut sim = start_sim(&[]);
    let cmd_vel = CmdVelRecorder::subscribe();
    let (_bridge, port) = start_bridge(&REVERSE_ALLOWED);
    let (mut client, _) = AiccClient::connect(port);
    wait_ready(&mut client, "ready");
    let sent = Instant::now();
    client.send_line(&tool_call("doomed", "move", json!({ "forward": -1.0 })));
    // Until the recorder sees the robot reversing at speed: in a test process
    // that already holds other tests' nodes, discovery can take seconds, and
    // a recorder that has seen nothing could not see the zero either.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cmd_vel.samples.lock().unwrap().iter().any(|(t, v, _)| *t >= sent && *v < -0.1) {
        assert!(
            Instant::now() < deadline,
            "not reversing at speed 5 s after the move; the recorder got {}",
            cmd_vel.summary_after(sent)
        );
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    sim.child.kill().expect("killing the simulator");
    let _ = sim.child.wait();
    // Gone: the next simulator of this process may start (support: one at a time).
    drop(sim);
    let result = client.read_until("tool_result");
    let ended = killed.elapsed();
    // The zero may be published just after the result: wait for it up to a second.
    let deadline = Instant::now() + Duration::from_secs(1);
    while cmd_vel.first_zero_after(killed).is_none() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let zero = cmd_vel.first_zero_after(killed).map(|t| t - killed);
    println!(
        "simulator killed: the move ended after {:.0} ms: {}; first zero /cmd_vel after {:?} ms",
        ms(ended),
        result["error"]["message"],
        zero.map(ms)
    );
    assert_eq!(result["ok"], false, "{result}");
    assert!(ended < Duration::from_secs(3), "the move took {ended:?} to end");
    assert!(
        zero.is_some(),
        "no zero /cmd_vel after the simulator died; the recorder got {}",
        cmd_vel.summary_after(killed)
    );
    // The bridge stays up and says the data is gone, retryably.
    let gone = client.call("gone", "proprioception", json!({}));
    println!("proprioception without a robot: {}", gone["error"]);
    assert_eq!(gone["ok"], false, "{gone}");
    assert_eq!(gone["error"]["retryable"], true, "{gone}");

    let _sim = start_sim(&[]);
    let back = Instant::now();
    wait_ready(&mut client, "back");
    println!(
        "simulator restarted: proprioception served {:.0} ms after it was ready",
        ms(back.elapsed())
    );
    let speed = TruthSpeed::subscribe();
    let moved = client.call("again", "move", json!({ "forward": 0.3 }));
    assert_eq!(moved["ok"], true, "a move after the restart: {moved}");
    let achieved = moved["output"]["achieved"]["forward_m"].as_f64().unwrap_or(0.0);
    assert!((achieved - 0.3).abs() < 0.05, "achieved {achieved} m");
    assert!(speed.latest().is_some(), "ground truth flows again");
}

/// `ip` (iproute2), through `sudo -n` when this process is not root:
/// network namespaces need root.
fn ip() -> Command {
    let root = std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if root {
        Command::new("ip")
    } else {
        let mut sudo = Command::new("sudo");
        sudo.args(["-n", "ip"]);
        sudo
    }
}

/// Runs `ip ARGS`, panicking with its output when it fails.
fn ip_ok(args: &[&str]) {
    let output = ip().args(args).output().unwrap_or_else(|e| {
        panic!("ip (iproute2, root or sudo -n needed for network namespaces): {e}")
    });
    assert!(
        output.status.success(),
        "ip {args:?} (root or sudo -n needed for network namespaces): {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A network namespace with a veth link to this one; deleted when dropped.
struct Netns {
    name: String,
    host_if: String,
}

impl Netns {
    fn create(host_ip: &str, agent_ip: &str) -> Self {
        let id = std::process::id() % 10_000;
        let (name, host_if, agent_if) =
            (format!("aicc-agent-{id}"), format!("aicch{id}"), format!("aicca{id}"));
        let _ = ip().args(["netns", "del", &name]).output();
        ip_ok(&["netns", "add", &name]);
        let netns = Netns { name: name.clone(), host_if: host_if.clone() };
        ip_ok(&["link", "add", &host_if, "type", "veth", "peer", "name", &agent_if]);
        ip_ok(&["link", "set", &agent_if, "netns", &name]);
        ip_ok(&["addr", "add", &format!("{host_ip}/24"), "dev", &host_if]);
        ip_ok(&["link", "set", &host_if, "up"]);
        ip_ok(&[
            "netns",
            "exec",
            &name,
            "ip",
            "addr",
            "add",
            &format!("{agent_ip}/24"),
            "dev",
            &agent_if,
        ]);
        ip_ok(&["netns", "exec", &name, "ip", "link", "set", &agent_if, "up"]);
        ip_ok(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
        netns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip().args(["link", "del", &self.host_if]).output();
        let _ = ip().args(["netns", "del", &self.name]).output();
    }
}

#[test]
fn a_remote_tls_agent_whose_link_is_cut_mid_move() {
    let _serial = one_at_a_time();
    let id = std::process::id() % 200 + 20;
    let (host_ip, agent_ip) = (format!("10.77.{id}.1"), format!("10.77.{id}.2"));
    let netns = Netns::create(&host_ip, &agent_ip);
    let dir = std::env::temp_dir().join(format!("aicc-faults-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let certified =
        rcgen::generate_simple_self_signed(vec!["robot.test".to_string()]).expect("a certificate");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();

    let _sim = start_sim(&[]);
    let speed = TruthSpeed::subscribe();
    let mut args = HEARTBEAT_ARGS.to_vec();
    let (cert_param, key_param) = (
        format!("security.tls_cert_file:={}", cert.display()),
        format!("security.tls_key_file:={}", key.display()),
    );
    args.extend(["-p", "security.allow_remote:=true", "-p", &cert_param, "-p", &key_param]);
    // The default configuration reads the agent's (actuate) token from AICC_TOKEN.
    let (_bridge, port, _log) =
        start_bridge_on(&format!("{host_ip}:0"), &args, &[("AICC_TOKEN", "faults-secret")]);

    // The project's CLI over TLS with the token, from this side of the link.
    let aicc = support::binary("aicc");
    let port_text = port.to_string();
    let cli_args = [
        "--host",
        host_ip.as_str(),
        "--port",
        port_text.as_str(),
        "--tls",
        "--ca-file",
        cert.to_str().unwrap(),
        "--server-name",
        "robot.test",
    ];
    let local_call = |tool: &str, input: &str| {
        Command::new(&aicc)
            .args(cli_args)
            .args(["call", tool, input])
            .env("AICC_TOKEN", "faults-secret")
            .output()
            .expect("running aicc")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !local_call("proprioception", "{}").status.success() {
        assert!(
            Instant::now() < deadline,
            "the bridge never served proprioception over TLS: {:?}",
            local_call("proprioception", "{}")
        );
        thread::sleep(Duration::from_millis(300));
    }

    // The agent, in its own namespace: a long slow move.
    let mut agent = ip()
        .args(["netns", "exec", &netns.name])
        .arg(&aicc)
        .args(cli_args)
        .args(["call", "move", r#"{"forward": 1.0, "speed_mps": 0.1}"#])
        .env("AICC_TOKEN", "faults-secret")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting the agent in its namespace");
    let agent_output = support::collect(agent.stderr.take().unwrap());
    let started = Instant::now();
    while speed.latest().is_none_or(|(v, _)| v < 0.05) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the agent's move did not start within 10 s; the agent: {}",
            agent_output.lock().unwrap()
        );
        thread::sleep(Duration::from_millis(10));
    }
    let cut = Instant::now();
    ip_ok(&["link", "set", &netns.host_if, "down"]);
    let still = wait_still(&speed, cut, Duration::from_secs(10))
        .expect("the robot stopped after the link was cut");
    println!(
        "TLS agent's link cut: still {:.0} ms after the cut (dead-peer bound {:.0} ms)",
        ms(still - cut),
        ms(DEAD_PEER)
    );
    assert!(
        still - cut < DEAD_PEER + Duration::from_millis(1500),
        "still only after {:?}",
        still - cut
    );
    let _ = agent.kill();
    let _ = agent.wait();
    // The link comes back; the bridge serves again, and the cut agent's
    // lease is gone: an agent on this side of the link moves the robot back.
    ip_ok(&["link", "set", &netns.host_if, "up"]);
    let again = local_call("move", r#"{"forward": -0.1}"#);
    assert!(
        again.status.success(),
        "a move after the cut: {}{}",
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&again.stderr)
    );
    drop(netns);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The base's velocity topic as the Jazzy TurtleBots have it: the
/// simulator subscribes TwistStamped. A bridge told to publish Twist
/// (`cmd_vel_stamped: false`) finds the other type in the graph, says so
/// in its status, and refuses `move` naming the fix; the robot does not
/// move. The same robot with `auto` (the shipped default) is driven in
/// TwistStamped.
#[test]
fn a_cmd_vel_type_the_robot_does_not_take_is_refused_and_auto_takes_the_robots() {
    let _serial = one_at_a_time();
    let _sim = start_sim(&["--cmd-vel-stamped"]);
    let truth = GroundTruth::subscribe();

    let (bridge, port) = start_bridge(&[
        "--config",
        "config/sim.yaml",
        "--ros-args",
        "-p",
        "actuators.cmd_vel_stamped:=false",
    ]);
    let (mut client, _) = AiccClient::connect(port);
    wait_ready(&mut client, "ready");
    let (x0, y0, _) = truth.settled_pose();
    let deadline = Instant::now() + Duration::from_secs(10);
    let refusal = loop {
        let status = client.call("status", "bridge_status", json!({}));
        if let Some(why) = status["output"]["base_output_unavailable"].as_str() {
            break why.to_string();
        }
        assert!(Instant::now() < deadline, "no refusal in bridge_status: {status}");
        thread::sleep(Duration::from_millis(200));
    };
    println!("cmd_vel_stamped false against a TwistStamped robot: {refusal}");
    assert!(
        refusal.contains("geometry_msgs/msg/TwistStamped") && refusal.contains("cmd_vel_stamped"),
        "{refusal}"
    );
    let refused = client.call("m1", "move", json!({ "forward": 0.3 }));
    assert_eq!(refused["error"]["code"], "tool_unavailable", "{refused}");
    assert_eq!(refused["error"]["retryable"], false, "{refused}");
    let (x1, y1, _) = truth.settled_pose();
    assert!((x1 - x0).hypot(y1 - y0) < 0.01, "the robot moved ({x0}, {y0}) -> ({x1}, {y1})");
    drop(client);
    drop(bridge);

    let (_bridge, port) = start_bridge(&["--config", "config/sim.yaml"]);
    let (mut client, _) = AiccClient::connect(port);
    wait_ready(&mut client, "ready");
    let moved =
        client.call_when_ready("m2", "move", json!({ "forward": 0.3 }), Duration::from_secs(10));
    assert_eq!(moved["ok"], true, "auto publishes what the robot takes: {moved}");
    let (x2, y2, _) = truth.settled_pose();
    let moved_m = (x2 - x1).hypot(y2 - y1);
    println!("cmd_vel_stamped auto against a TwistStamped robot: moved {moved_m:.3} m of 0.3");
    assert!((moved_m - 0.3).abs() < 0.05, "ground truth moved {moved_m} m");
}

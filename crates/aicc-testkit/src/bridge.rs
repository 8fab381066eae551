//! The whole bridge on a [`TestRobot`] (no ROS), served on a loopback
//! port by a runtime of its own with two workers, as the node's on this
//! project's two-core machines: what tests and benchmarks start when what
//! they check is the server, the protocol and the tools, not ROS.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use nalgebra::{UnitQuaternion, Vector3};

use aicc_bridge::images::RawImage;
use aicc_bridge::port::SampleStore;
use aicc_bridge::port::TestRobot;
use aicc_bridge::port::{
    CameraFrame, CameraInfo, Contacts, ImuSample, JointStates, OdometrySample, Sensor, Stamped,
};
use aicc_bridge::{run, Listeners, Startup};
use aicc_bridge::{Config, DEFAULT_NODE_NAME};

/// Worker threads of the bridge's runtime.
const WORKERS: usize = 2;
/// Sensor samples per second of [`TestBridge::feed_standing`].
const FEED_HZ: f64 = 30.0;

/// A configuration from the text of a parameter file's `ros__parameters`
/// (each line indented by four spaces), listening on a free loopback port.
pub fn loopback_config(parameters: &str) -> Config {
    let mut config = Config::from_params_yaml(
        &format!(
            "{DEFAULT_NODE_NAME}:\n  ros__parameters:\n    listen: \"127.0.0.1:0\"\n{parameters}"
        ),
        DEFAULT_NODE_NAME,
    )
    .expect("a valid configuration");
    config.listen = "127.0.0.1:0".into();
    config
}

/// A bridge running on its own thread; dropping it shuts it down (and
/// stops its feeder).
pub struct TestBridge {
    pub port: u16,
    /// The AI-control dialect's and the console's ports, when enabled.
    pub ai_control_port: Option<u16>,
    pub console_port: Option<u16>,
    pub robot: TestRobot,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    stop_feeding: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl TestBridge {
    /// Starts the bridge with `config`; `env` stands for the environment
    /// its tokens are read from. Returns once it listens.
    pub fn start(config: Config, env: impl Fn(&str) -> Option<String>) -> Self {
        let config = Arc::new(config);
        let startup = Startup::from_config(config.clone(), env).expect("the bridge starts");
        let robot = TestRobot::new(&config);
        let robot_port = robot.robot.clone();
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let listeners =
                    Listeners::bind(&config).await.expect("binding the loopback listener");
                let port_of = |listener: &tokio::net::TcpListener| {
                    listener.local_addr().expect("bound").port()
                };
                let ports = (
                    port_of(&listeners.aicc),
                    listeners.ai_control.as_ref().map(port_of),
                    listeners.console.as_ref().map(port_of),
                );
                port_tx.send(ports).expect("the starter waits");
                run(startup, listeners, robot_port, async {
                    let _ = shutdown_rx.await;
                })
                .await
                .expect("the bridge runs");
            });
        });
        let (port, ai_control_port, console_port) =
            port_rx.recv().expect("the bridge reports its ports");
        Self {
            port,
            ai_control_port,
            console_port,
            robot,
            shutdown: Some(shutdown_tx),
            stop_feeding: Arc::default(),
            threads: vec![thread],
        }
    }

    /// Feeds the robot's sensors at 30 Hz, as a robot standing still:
    /// odometry, IMU, joint states, an empty bumper and, with `camera`
    /// (width, height), an RGB camera and its info.
    pub fn feed_standing(&mut self, camera: Option<(u32, u32)>) {
        let samples = self.robot.samples.clone();
        let stop = self.stop_feeding.clone();
        self.threads.push(std::thread::spawn(move || feed_standing(&samples, camera, &stop)));
    }
}

impl Drop for TestBridge {
    fn drop(&mut self) {
        self.stop_feeding.store(true, Ordering::Relaxed);
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn stamped<T>(value: T, frame_id: &str, stamp_s: f64, received: Instant) -> Stamped<T> {
    Stamped { value, frame_id: frame_id.into(), stamp_s, received }
}

fn feed_standing(samples: &SampleStore, camera: Option<(u32, u32)>, stop: &AtomicBool) {
    let frame = camera.map(|(width, height)| {
        let data: Vec<u8> = (0..height)
            .flat_map(|y| (0..width).flat_map(move |x| [(x % 256) as u8, (y % 256) as u8, 128]))
            .collect();
        let focal = f64::from(width);
        let info = CameraInfo {
            width,
            height,
            k: [
                focal,
                0.0,
                f64::from(width) / 2.0,
                0.0,
                focal,
                f64::from(height) / 2.0,
                0.0,
                0.0,
                1.0,
            ],
        };
        (
            RawImage {
                width,
                height,
                encoding: "rgb8".into(),
                is_bigendian: false,
                step: width * 3,
                data,
            },
            info,
        )
    });
    let mut delivered = vec![Sensor::Odometry, Sensor::Imu, Sensor::JointStates, Sensor::Bumper];
    if frame.is_some() {
        delivered.extend([Sensor::Camera, Sensor::CameraInfo]);
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_secs_f64(1.0 / FEED_HZ));
        let now = Instant::now();
        let stamp_s = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        {
            let mut latest = samples.lock();
            let orientation = UnitQuaternion::identity();
            latest.odom = Some(OdometrySample {
                frame_id: "odom".into(),
                child_frame_id: "base_footprint".into(),
                position_m: Vector3::zeros(),
                orientation,
                linear_velocity_mps: Vector3::zeros(),
                angular_velocity_radps: Vector3::zeros(),
                stamp_s,
                received: now,
            });
            latest.imu = Some(ImuSample {
                frame_id: "imu_link".into(),
                orientation: Some(orientation),
                angular_velocity_radps: Vector3::zeros(),
                linear_acceleration_mps2: Vector3::new(0.0, 0.0, 9.81),
                stamp_s,
                received: now,
            });
            latest.joint_states = Some(stamped(joints_at_rest(), "", stamp_s, now));
            latest.contacts = Some(stamped(Contacts::default(), "bumper", stamp_s, now));
            if let Some((image, info)) = &frame {
                latest.camera = Some(stamped(
                    CameraFrame::Raw(image.clone()),
                    "camera_optical_frame",
                    stamp_s,
                    now,
                ));
                latest.camera_info =
                    Some(stamped(info.clone(), "camera_optical_frame", stamp_s, now));
            }
        }
        for sensor in &delivered {
            samples.delivered(*sensor, stamp_s);
        }
    }
}

/// The bundled robot's joints at rest: the head looking ahead, the arm
/// stowed (the pose the base drives in), the gripper closed.
pub fn joints_at_rest() -> JointStates {
    let names: Vec<String> = [
        "head_pan_joint",
        "head_tilt_joint",
        "joint1",
        "joint2",
        "joint3",
        "joint4",
        "gripper_left_joint",
        "gripper_right_joint",
    ]
    .map(String::from)
    .to_vec();
    let zeros = vec![0.0; names.len()];
    let stow = aicc_bridge::port::NAMED_POSES
        .iter()
        .find(|(name, _, _)| *name == "stow")
        .map(|(_, joints, _)| *joints)
        .expect("a stow pose");
    let positions = [&[0.0, 0.0][..], &stow[..], &[0.0, 0.0][..]].concat();
    JointStates { names, positions, velocities: zeros.clone(), efforts: zeros }
}

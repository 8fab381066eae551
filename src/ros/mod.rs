//! The r2r adapter: the only module that names ROS types. Subscriptions
//! keep the latest sample per sensor; publishers take governed commands.
//! The node spins on a dedicated thread, never on a tokio worker.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{Stream, StreamExt};
use nalgebra::{Quaternion, UnitQuaternion, Vector3};
use parking_lot::Mutex;
use r2r::{geometry_msgs, nav_msgs, sensor_msgs, QosProfile};

use crate::config::Config;
use crate::governor::BaseVelocity;
use crate::robot::{ImuSample, OdometrySample, RobotPort};

/// How long one spin_once may block; bounds shutdown latency.
const SPIN_TIMEOUT: Duration = Duration::from_millis(5);

enum CmdVelPublisher {
    Plain(r2r::Publisher<geometry_msgs::msg::Twist>),
    Stamped(r2r::Publisher<geometry_msgs::msg::TwistStamped>, Arc<std::sync::Mutex<r2r::Clock>>),
}

/// The robot as seen through ROS topics.
pub struct RosRobot {
    odom: Mutex<Option<OdometrySample>>,
    imu: Mutex<Option<ImuSample>>,
    /// Publishers are Send but not Sync; the mutex makes the port shareable.
    cmd_vel: Mutex<CmdVelPublisher>,
    odom_topic: String,
    imu_topic: String,
}

/// Owns the spin thread; dropping it stops spinning.
pub struct RosAdapter {
    pub robot: Arc<RosRobot>,
    running: Arc<AtomicBool>,
    spin_thread: Option<JoinHandle<()>>,
}

impl Drop for RosAdapter {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(thread) = self.spin_thread.take() {
            let _ = thread.join();
        }
    }
}

/// Creates the node, its subscriptions and publishers, and starts spinning.
/// Must be called inside a tokio runtime (subscriptions are consumed by tasks).
pub fn start(config: &Config, node_name: &str) -> anyhow::Result<RosAdapter> {
    let context = r2r::Context::create().context("initialising ROS 2 (rcl_init)")?;
    let mut node = r2r::Node::create(context, node_name, "").context("creating the ROS 2 node")?;
    let topics = &config.topics;
    let odom_stream = node
        .subscribe::<nav_msgs::msg::Odometry>(&topics.odom, QosProfile::sensor_data())
        .with_context(|| format!("subscribing to {}", topics.odom))?;
    let imu_stream = node
        .subscribe::<sensor_msgs::msg::Imu>(&topics.imu, QosProfile::sensor_data())
        .with_context(|| format!("subscribing to {}", topics.imu))?;
    let qos = QosProfile::default().keep_last(10);
    let cmd_vel = if topics.cmd_vel_stamped {
        let clock = node.get_ros_clock();
        CmdVelPublisher::Stamped(node.create_publisher(&topics.cmd_vel, qos)?, clock)
    } else {
        CmdVelPublisher::Plain(node.create_publisher(&topics.cmd_vel, qos)?)
    };
    let robot = Arc::new(RosRobot {
        odom: Mutex::new(None),
        imu: Mutex::new(None),
        cmd_vel: Mutex::new(cmd_vel),
        odom_topic: topics.odom.clone(),
        imu_topic: topics.imu.clone(),
    });
    keep_latest(odom_stream, robot.clone(), |robot, msg| *robot.odom.lock() = Some(odometry_sample(msg, Instant::now())));
    keep_latest(imu_stream, robot.clone(), |robot, msg| *robot.imu.lock() = Some(imu_sample(msg, Instant::now())));

    let running = Arc::new(AtomicBool::new(true));
    let spin_running = running.clone();
    let spin_thread = std::thread::Builder::new().name("ros-spin".into()).spawn(move || {
        while spin_running.load(Ordering::Relaxed) {
            node.spin_once(SPIN_TIMEOUT);
        }
    })?;
    Ok(RosAdapter { robot, running, spin_thread: Some(spin_thread) })
}

/// Consumes a subscription promptly (r2r drops messages when its small
/// channel is full), storing each message as the latest sample.
fn keep_latest<T: Send + 'static>(
    mut stream: impl Stream<Item = T> + Unpin + Send + 'static,
    robot: Arc<RosRobot>,
    store: impl Fn(&RosRobot, T) + Send + 'static,
) {
    tokio::spawn(async move {
        while let Some(msg) = stream.next().await {
            store(&robot, msg);
        }
    });
}

fn stamp_seconds(stamp: &r2r::builtin_interfaces::msg::Time) -> f64 {
    f64::from(stamp.sec) + f64::from(stamp.nanosec) * 1e-9
}

fn vector(v: &geometry_msgs::msg::Vector3) -> Vector3<f64> {
    Vector3::new(v.x, v.y, v.z)
}

fn quaternion(q: &geometry_msgs::msg::Quaternion) -> UnitQuaternion<f64> {
    UnitQuaternion::from_quaternion(Quaternion::new(q.w, q.x, q.y, q.z))
}

fn odometry_sample(msg: nav_msgs::msg::Odometry, received: Instant) -> OdometrySample {
    let p = &msg.pose.pose.position;
    OdometrySample {
        position_m: Vector3::new(p.x, p.y, p.z),
        orientation: quaternion(&msg.pose.pose.orientation),
        linear_velocity_mps: vector(&msg.twist.twist.linear),
        angular_velocity_radps: vector(&msg.twist.twist.angular),
        stamp_s: stamp_seconds(&msg.header.stamp),
        frame_id: msg.header.frame_id,
        child_frame_id: msg.child_frame_id,
        received,
    }
}

fn imu_sample(msg: sensor_msgs::msg::Imu, received: Instant) -> ImuSample {
    // REP-145: orientation_covariance[0] == -1 means "no orientation".
    let has_orientation = msg.orientation_covariance.first().is_none_or(|c| *c != -1.0);
    ImuSample {
        orientation: has_orientation.then(|| quaternion(&msg.orientation)),
        angular_velocity_radps: vector(&msg.angular_velocity),
        linear_acceleration_mps2: vector(&msg.linear_acceleration),
        stamp_s: stamp_seconds(&msg.header.stamp),
        frame_id: msg.header.frame_id,
        received,
    }
}

impl RobotPort for RosRobot {
    fn odometry(&self) -> Option<OdometrySample> {
        self.odom.lock().clone()
    }

    fn imu(&self) -> Option<ImuSample> {
        self.imu.lock().clone()
    }

    fn odometry_source(&self) -> String {
        self.odom_topic.clone()
    }

    fn imu_source(&self) -> String {
        self.imu_topic.clone()
    }

    fn publish_base_velocity(&self, velocity: BaseVelocity) {
        let twist = geometry_msgs::msg::Twist {
            linear: geometry_msgs::msg::Vector3 { x: velocity.linear_mps, y: 0.0, z: 0.0 },
            angular: geometry_msgs::msg::Vector3 { x: 0.0, y: 0.0, z: velocity.angular_radps },
        };
        let result = match &*self.cmd_vel.lock() {
            CmdVelPublisher::Plain(publisher) => publisher.publish(&twist),
            CmdVelPublisher::Stamped(publisher, clock) => {
                let stamp = clock.lock().ok().and_then(|mut clock| clock.get_now().ok()).map(|t| r2r::Clock::to_builtin_time(&t)).unwrap_or_default();
                let header = r2r::std_msgs::msg::Header { stamp, frame_id: "base_link".into() };
                publisher.publish(&geometry_msgs::msg::TwistStamped { header, twist })
            }
        };
        if let Err(error) = result {
            tracing::error!(%error, "publishing cmd_vel failed");
        }
    }
}

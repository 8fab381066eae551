//! Watches the robot's sensors for what agents and the governor must hear
//! about: bumper contacts (collision and state_change events), a low
//! battery, and what the obstacle sources (depth camera, LiDAR) observe of
//! the zones around the base and the obstacles they see.
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::config::Config;
use crate::governor::coverage::{base_to_odom, Observation, SourceKind};
use crate::governor::laser::{observe_zones, read_scan, LaserPose, ScanView};
use crate::governor::memory::{Remembered, Verdict};
use crate::governor::obstacles::{
    read_depth_frame, sees_past, CameraIntrinsics as ScanIntrinsics, Capsule,
    DepthImage as DepthView, DepthReadSettings, SelfShape,
};
use crate::governor::safety::Pose2D;
use crate::governor::JointLimits;
use crate::live::Live;
use crate::perception::decode_depth;
use crate::robot::base_driver::BaseDriver;
use crate::robot::frames::{Frames, BASE_FRAME};
use crate::robot::{Age, Contacts, JointStates, OdometrySample, Sensor, SensorPort};
use crate::robot_events::{EventSender, RobotEvent};

/// Frames are recorded this far beyond the zones' reach (m): what a frame
/// saw there is the zone once the robot has driven on (0.4 s at 0.5 m/s).
const OBSERVED_BEYOND_THE_ZONES_M: f64 = 0.2;

/// How far around its articulated links (arm, head) the robot's own body
/// reaches, m: a depth return that near is the robot.
const LINK_RADIUS_M: f64 = 0.05;

/// What the monitor remembers between polls.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Watched {
    pub in_contact: bool,
    pub battery_low: bool,
}

/// Events for the change from `before` to the current contacts and
/// battery (pure: unit-tested without ROS).
pub fn contact_and_battery_events(
    before: &Watched,
    contacts: Option<&Contacts>,
    battery_fraction: Option<f64>,
    low_fraction: f64,
) -> (Watched, Vec<(String, Value)>) {
    let mut events = Vec::new();
    let in_contact = contacts.is_some_and(|c| !c.points.is_empty());
    if in_contact && !before.in_contact {
        let contacts = contacts.expect("in contact");
        let first = &contacts.points[0];
        let impulse: Option<f64> =
            contacts.points.iter().filter_map(|p| p.force_n).reduce(f64::max);
        events.push((
            "collision".to_string(),
            json!({
                "part": first.part,
                "other": first.other,
                "normal": { "x": first.normal.x, "y": first.normal.y, "z": first.normal.z },
                "position_m": { "x": first.position_m.x, "y": first.position_m.y, "z": first.position_m.z },
                "force_n": impulse,
                "contacts": contacts.points.len(),
            }),
        ));
        events.push((
            "state_change".to_string(),
            json!({ "entity": "bumper", "change": "contact_began", "other": first.other }),
        ));
    }
    if !in_contact && before.in_contact {
        events.push((
            "state_change".to_string(),
            json!({ "entity": "bumper", "change": "contact_ended" }),
        ));
    }
    let battery_low = battery_fraction.is_some_and(|f| f.is_finite() && f < low_fraction);
    if battery_low && !before.battery_low {
        events.push(("state_change".to_string(), json!({ "entity": "battery", "change": "low", "fraction": battery_fraction, "threshold": low_fraction })));
    }
    if !battery_low && before.battery_low && battery_fraction.is_some() {
        events.push((
            "state_change".to_string(),
            json!({ "entity": "battery", "change": "recovered", "fraction": battery_fraction }),
        ));
    }
    (Watched { in_contact, battery_low }, events)
}

/// Polls contacts and battery at the bumper's rate, raising events.
pub async fn watch_contacts_and_battery(
    robot: Arc<dyn SensorPort>,
    config: Arc<Config>,
    live: Arc<Live>,
    events: EventSender,
) {
    let mut watched = Watched::default();
    let bumper_max_age = Duration::from_secs_f64(config.sensors.bumper.max_age_s);
    let mut interval = tokio::time::interval(Duration::from_millis(20));
    loop {
        interval.tick().await;
        let now = robot.now();
        let contacts = robot.contacts().filter(|c| c.age(now).effective() <= bumper_max_age);
        let battery = robot.battery().map(|b| b.value.fraction);
        let (next, raised) = contact_and_battery_events(
            &watched,
            contacts.as_ref().map(|c| &c.value),
            battery,
            live.battery_low_fraction(),
        );
        watched = next;
        for (topic, payload) in raised {
            if events.try_send(RobotEvent::for_all(topic, payload)).is_err() {
                tracing::warn!("robot event dropped: the event queue is full");
            }
        }
    }
}

/// While the base is at rest, how often a depth frame is measured, as a
/// share of the depth camera's max age: the reading then stays fresh, so
/// a motion starts at once, at a tenth of the cost of measuring every frame.
const AT_REST_MEASURE_SHARE_OF_MAX_AGE: f64 = 0.5;

/// Whether the watcher measures now: every new frame while the base moves
/// (or is asked to), else once `at_rest_period` has passed since the last
/// measurement (pure: unit-tested).
fn measure_now(in_motion: bool, since_last: Option<Duration>, at_rest_period: Duration) -> bool {
    in_motion || since_last.is_none_or(|since| since >= at_rest_period)
}

/// The robot's pose in the odometry frame when something was captured
/// `age_s` ago: the latest odometry, taken back along its own velocities
/// by the time between its capture and that one (pure: unit-tested).
pub fn pose_at(odometry: &OdometrySample, odometry_age_s: f64, age_s: f64) -> Pose2D {
    let back_s = (age_s - odometry_age_s).max(0.0);
    let yaw = odometry.orientation.euler_angles().2;
    let (v, w) = (odometry.linear_velocity_mps.x, odometry.angular_velocity_radps.z);
    let v = if v.is_finite() { v } else { 0.0 };
    let w = if w.is_finite() { w } else { 0.0 };
    let heading = yaw - w * back_s / 2.0;
    Pose2D {
        x_m: odometry.position_m.x - v * back_s * heading.cos(),
        y_m: odometry.position_m.y - v * back_s * heading.sin(),
        yaw_rad: yaw - w * back_s,
    }
}

/// A zone's cells as text, a row a line (left of the robot first), for
/// debugging what a frame observed.
fn zone_map(
    grid: &crate::governor::coverage::ZoneGrid,
    observed: &[bool],
    clear: &[bool],
) -> String {
    let columns = grid.columns();
    observed
        .chunks(columns)
        .zip(clear.chunks(columns))
        .enumerate()
        .map(|(row, (o, c))| {
            let cells: String = o
                .iter()
                .zip(c)
                .rev()
                .map(|(o, c)| {
                    if *c {
                        '.'
                    } else if *o {
                        'o'
                    } else {
                        '-'
                    }
                })
                .collect();
            format!(
                "{:.2} {cells}",
                grid.start_m(crate::governor::coverage::Direction::Ahead)
                    + row as f64 * grid.cell_m
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Since when the joints that move the camera have been still (each
/// moved less than [`STILL_STEP_RAD`] between two looks 20 ms apart).
#[derive(Debug, Default)]
struct StillSince {
    positions: Vec<Option<f64>>,
    since: Option<std::time::Instant>,
}

/// A joint that moved less than this between two looks is still (0.1 rad/s at 20 ms).
const STILL_STEP_RAD: f64 = 0.002;

impl StillSince {
    fn observe(
        &mut self,
        joints: &[String],
        states: Option<&JointStates>,
        now: std::time::Instant,
    ) {
        let positions: Vec<Option<f64>> =
            joints.iter().map(|j| states.and_then(|s| s.position(j))).collect();
        let still = positions.len() == self.positions.len()
            && positions.iter().zip(&self.positions).all(
                |(a, b)| matches!((a, b), (Some(a), Some(b)) if (a - b).abs() < STILL_STEP_RAD),
            );
        if !still {
            self.since = None;
        } else if self.since.is_none() {
            self.since = Some(now);
        }
        self.positions = positions;
    }

    /// Whether the camera was still when a frame was captured at `captured`.
    fn still_at(&self, captured: std::time::Instant) -> bool {
        self.since.is_some_and(|since| captured >= since)
    }
}

/// The robot's own body now: the footprint's prism and capsules along its
/// articulated links (arm, head), placed through TF (or the URDF). A link
/// whose place is unknown is left out: its returns then count as obstacles.
fn own_body(
    frames: &Frames,
    joints: &Option<crate::robot::Stamped<JointStates>>,
    now: crate::robot::Now,
    footprint: crate::governor::footprint::Footprint,
    height_m: f64,
) -> SelfShape {
    let origin = |link: &str| {
        frames
            .lookup(BASE_FRAME, link, joints, now)
            .ok()
            .map(|(pose, _)| nalgebra::Point3::from(pose.translation.vector))
    };
    let capsules = frames
        .urdf
        .articulated_links()
        .iter()
        .filter_map(|(parent, child)| {
            Some(Capsule { a: origin(parent)?, b: origin(child)?, radius_m: LINK_RADIUS_M })
        })
        .collect();
    SelfShape { footprint, height_m, capsules }
}

/// Reads each new depth frame while the base moves (and often enough at
/// rest that it stays fresh) into an observation of the zones, obstacle
/// points for the memory and a verdict on each remembered point, and
/// hands them to the base driver. A frame that gives none (its frame not
/// resolvable, an undecodable image) is noted with the base driver, whose
/// rules then say why; logged when it starts and when it ends, not per frame.
pub async fn watch_obstacles(
    robot: Arc<dyn SensorPort>,
    base: Arc<BaseDriver>,
    frames: Frames,
    config: Arc<Config>,
    joint_limits: Arc<JointLimits>,
) {
    if !config.sensors.depth.is_configured() {
        return;
    }
    // The camera for which the head poses that observe the zones were found.
    let mut covered_for: Option<(String, [f64; 9], u32, u32)> = None;
    // The joints that move the camera or the parts of the robot it sees,
    // and since when they have been still: a frame taken while the camera
    // moved is placed with a pose that is not the one it was taken at (the
    // floor would read as obstacles), and one taken while the arm moved
    // cuts the arm out where it was not.
    let mut camera_joints: Vec<String> = Vec::new();
    let mut camera_still = StillSince::default();
    let at_rest_period =
        Duration::from_secs_f64(config.sensors.depth.max_age_s * AT_REST_MEASURE_SHARE_OF_MAX_AGE);
    let settings = DepthReadSettings {
        min_range_m: config.sensors.depth_min_range_m,
        max_z_m: config.safety.height_m,
        ..DepthReadSettings::DEFAULT
    };
    let zones = config.safety.zone_grid();
    let grid = zones.for_observations(OBSERVED_BEYOND_THE_ZONES_M);
    // The floor band where the zones end (the camera is near the base's
    // origin): the lowest obstacle the camera is sure to see in them.
    let sees_down_to_m = settings.floor_band_at(zones.reach_m + zones.half_width_m);
    let footprint = config.safety.footprint();
    let mut last_stamp = f64::NAN;
    let mut last_measured: Option<tokio::time::Instant> = None;
    let mut interval = tokio::time::interval(Duration::from_millis(20));
    loop {
        interval.tick().await;
        let joints_now = robot.joint_states().map(|j| j.value);
        camera_still.observe(&camera_joints, joints_now.as_ref(), std::time::Instant::now());
        if !measure_now(base.in_motion(), last_measured.map(|at| at.elapsed()), at_rest_period) {
            continue;
        }
        let Some(frame) = robot.depth() else { continue };
        if frame.stamp_s == last_stamp {
            continue;
        }
        last_stamp = frame.stamp_s;
        last_measured = Some(tokio::time::Instant::now());
        let Some(info) = robot.depth_info().or_else(|| robot.camera_info()) else { continue };
        let camera_key =
            (frame.frame_id.clone(), info.value.k, info.value.width, info.value.height);
        if covered_for.as_ref() != Some(&camera_key) {
            covered_for = Some(camera_key);
            // And the joints of the robot's own parts the camera may see (the
            // arm): a frame taken while they move places them by joint states
            // of another moment, so the arm would be remembered as an obstacle.
            camera_joints = frames.urdf.joints_moving(&frame.frame_id);
            for (_, link) in frames.urdf.articulated_links() {
                for joint in frames.urdf.limited_joints_moving(&link) {
                    if !camera_joints.contains(&joint) {
                        camera_joints.push(joint);
                    }
                }
            }
            find_head_covers(&base, &frames, &config, &joint_limits, &frame.frame_id, &info.value)
                .await;
            base.surroundings().mark_covers_searched();
        }
        let joints = robot.joint_states();
        let now = robot.now();
        let frame_age = Age::of(frame.stamp_s, frame.received, now).effective();
        let captured = now.instant.checked_sub(frame_age).unwrap_or(frame.received);
        if !camera_still.still_at(captured) {
            // Not an observation: the camera's pose at capture is not known.
            continue;
        }
        let pose = robot.odometry().map(|o| {
            let odometry_age = o.age(now).effective().as_secs_f64();
            pose_at(&o, odometry_age, frame_age.as_secs_f64())
        });
        let camera = frames.lookup(BASE_FRAME, &frame.frame_id, &joints, now);
        let body = own_body(&frames, &joints, now, footprint, config.safety.height_m);
        let base_for_frame = base.clone();
        let measured = tokio::task::spawn_blocking(move || -> Result<Vec<String>, String> {
            let (camera, _) = camera.map_err(|e| format!("the depth image's frame: {e}"))?;
            let pose = pose.ok_or("no odometry to place the frame by")?;
            let depth = decode_depth(&frame.value).map_err(|e| e.to_string())?;
            let scale_x = f64::from(depth.width) / f64::from(info.value.width.max(1));
            let scale_y = f64::from(depth.height) / f64::from(info.value.height.max(1));
            let k = info.value.k;
            let intrinsics = ScanIntrinsics { fx: k[0] * scale_x, fy: k[4] * scale_y, cx: k[2] * scale_x, cy: k[5] * scale_y };
            let view = DepthView::new(depth.width as usize, depth.height as usize, &depth.metres).map_err(|e| e.to_string())?;
            let reading = read_depth_frame(&view, &intrinsics, &camera, &settings, &grid, &body).map_err(|e| e.to_string())?;
            if reading.counts.valid == 0 {
                return Err(format!("no usable depth in the frame ({} pixels examined: all NaN, zero or nearer than {:.2} m: a covered lens?)", reading.counts.examined, settings.min_range_m));
            }
            if tracing::enabled!(tracing::Level::DEBUG) {
                tracing::debug!("depth frame over the zone ahead (rows from the footprint out; '.' clear, 'o' known, '-' unseen):\n{}", zone_map(&grid, &reading.observed[0], &reading.clear[0]));
            }
            let observation = Observation { source: SourceKind::DepthCamera, sees_down_to_m, pose, grid, captured, observed: reading.observed, clear: reading.clear, unseen: reading.unseen };
            let points: Vec<(f64, f64, f64)> = reading.points.iter().map(|p| {
                let (x, y) = base_to_odom((p.x, p.y), &pose);
                (x, y, p.z)
            }).collect();
            let verdict = |r: &Remembered| {
                let (x, y) = crate::governor::coverage::odom_to_base((r.x_m, r.y_m), &pose);
                match sees_past(&view, &intrinsics, &camera, &nalgebra::Point3::new(x, y, r.z_m), settings.min_range_m) {
                    Some(true) => Verdict::SeenPast,
                    Some(false) => Verdict::Seen,
                    None => Verdict::Unknown,
                }
            };
            Ok(base_for_frame.note_frame(observation, &points, verdict))
        })
        .await;
        match measured {
            Ok(Ok(said)) => {
                for line in said {
                    tracing::info!("{line} ({})", robot.topic(Sensor::Depth));
                }
            }
            Ok(Err(reason)) => {
                if base.note_obstacle_unmeasured(reason.clone()) {
                    tracing::warn!(
                        "obstacle sensing: no observation from {}: {reason}",
                        robot.topic(Sensor::Depth)
                    );
                }
            }
            Err(error) => tracing::warn!(%error, "obstacle measurement failed"),
        }
    }
}

/// Finds, for a robot with a pan-tilt head, the head pose from which the
/// depth camera observes each direction's zone (on the URDF: its chain from
/// the base to the camera's frame), and records it with the base driver: the
/// remedy a refusal names, and where `move` turns the head with
/// `safety.head_for_motion: turn`. Logged once per camera.
async fn find_head_covers(
    base: &Arc<BaseDriver>,
    frames: &Frames,
    config: &Config,
    limits: &JointLimits,
    camera_frame: &str,
    info: &crate::robot::CameraInfo,
) {
    use crate::governor::coverage::{covering_head_pose, CameraView, Direction};
    let [pan_joint, tilt_joint] = config.actuators.head_joints.as_slice() else { return };
    if config.actuators.head_action.is_empty() {
        return;
    }
    let (Some(pan), Some(tilt)) = (limits.get(pan_joint), limits.get(tilt_joint)) else { return };
    let range = |lower: Option<f64>, upper: Option<f64>| {
        (lower.unwrap_or(-std::f64::consts::PI), upper.unwrap_or(std::f64::consts::PI))
    };
    let (pan_range, tilt_range) = (range(pan.lower, pan.upper), range(tilt.lower, tilt.upper));
    let (pan_joint, tilt_joint, camera_frame) =
        (pan_joint.clone(), tilt_joint.clone(), camera_frame.to_string());
    let camera = CameraView {
        fx: info.k[0],
        fy: info.k[4],
        cx: info.k[2],
        cy: info.k[5],
        width: info.width as usize,
        height: info.height as usize,
        min_range_m: config.sensors.depth_min_range_m,
    };
    let (grid, fraction, urdf) =
        (config.safety.zone_grid(), config.safety.max_unobserved_fraction, frames.urdf.clone());
    let covers = tokio::task::spawn_blocking(move || {
        let camera_at = |p: f64, t: f64| {
            let position = |joint: &str| {
                Some(if joint == pan_joint {
                    p
                } else if joint == tilt_joint {
                    t
                } else {
                    0.0
                })
            };
            urdf.transform(BASE_FRAME, &camera_frame, &position).ok()
        };
        Direction::BOTH.map(|d| {
            covering_head_pose(&grid, d, &camera_at, &camera, pan_range, tilt_range, 0.05, fraction)
        })
    })
    .await;
    let Ok(covers) = covers else { return };
    for (direction, cover) in Direction::BOTH.into_iter().zip(covers) {
        match cover {
            Some(cover) => {
                tracing::info!("coverage: {}", cover.remedy(direction));
                base.surroundings().set_cover(direction, cover);
            }
            None => tracing::info!("coverage: the head's camera cannot observe the way {} (its frame is not on the URDF's head chain)", direction.name()),
        }
    }
}

/// Watches the odometry for jumps that the base's motion and the IMU cannot
/// explain (a reset, a driver restart): each ends the motion, re-anchors
/// what is kept in the odometry frame, and is an event (`governor`,
/// kind `odometry_jump`) and a warning.
pub async fn watch_odometry(
    robot: Arc<dyn SensorPort>,
    base: Arc<BaseDriver>,
    config: Arc<Config>,
    events: EventSender,
) {
    use crate::governor::odometry::{check_continuity, ContinuityLimits, OdometryPoint};
    let limits =
        ContinuityLimits::for_base(config.base.max_linear_mps, config.base.max_angular_radps);
    let mut previous: Option<OdometryPoint> = None;
    let mut interval = tokio::time::interval(Duration::from_millis(5));
    loop {
        interval.tick().await;
        let Some(odometry) = robot.odometry() else { continue };
        if previous.is_some_and(|p| p.stamp_s == odometry.stamp_s) {
            continue;
        }
        let imu_yaw_rate_radps = robot.imu().map(|imu| imu.angular_velocity_radps.z);
        let point = OdometryPoint {
            pose: Pose2D {
                x_m: odometry.position_m.x,
                y_m: odometry.position_m.y,
                yaw_rad: odometry.orientation.euler_angles().2,
            },
            stamp_s: odometry.stamp_s,
            imu_yaw_rate_radps,
        };
        if let Some(before) = previous.replace(point) {
            // A stamp that went back is a restarted source: start over.
            if point.stamp_s < before.stamp_s {
                continue;
            }
            if let Some(jump) = check_continuity(&before, &point, &limits) {
                let now = robot.now();
                let jumped_at =
                    now.instant.checked_sub(odometry.age(now).effective()).unwrap_or(now.instant);
                let what = base.note_odometry_jump(&jump, jumped_at);
                tracing::warn!("{what}: motion stopped ({})", robot.topic(Sensor::Odometry));
                let payload = json!({
                    "kind": "odometry_jump",
                    "rule": "odometry_jump",
                    "reason": what,
                    "jump": { "dx_m": jump.dx_m, "dy_m": jump.dy_m, "dyaw_rad": jump.dyaw_rad, "dt_s": jump.dt_s },
                    "explained": { "distance_m": jump.explained_m, "yaw_rad": jump.explained_rad },
                });
                if events.try_send(RobotEvent::for_all("governor", payload)).is_err() {
                    tracing::warn!("robot event dropped: the event queue is full");
                }
            }
        }
    }
}

/// The scan plane may tilt this much (rad) before a scan is refused: a
/// tilted scanner's ranges do not lie on the floor plane the zones are in.
const MAX_SCAN_TILT_RAD: f64 = 0.1;

/// The scanner's planar pose in the base frame from its 3D pose, refused
/// when the scan plane is tilted (pure: unit-tested).
pub fn planar_laser_pose(pose: &nalgebra::Isometry3<f64>) -> Result<LaserPose, String> {
    let (roll, pitch, yaw) = pose.rotation.euler_angles();
    if !(roll.is_finite() && pitch.is_finite()) {
        return Err("the scanner's orientation is not finite".into());
    }
    // A scanner mounted upside down (roll = pi) scans clockwise: refuse it too.
    if roll.abs() > MAX_SCAN_TILT_RAD || pitch.abs() > MAX_SCAN_TILT_RAD {
        return Err(format!("the scan plane is tilted (roll {roll:.2} rad, pitch {pitch:.2} rad; at most {MAX_SCAN_TILT_RAD} rad)"));
    }
    let t = pose.translation.vector;
    Ok(LaserPose { x_m: t.x, y_m: t.y, yaw_rad: yaw })
}

/// Reads each new laser scan against the footprint's zones and hands the
/// reading to the base driver's safety rules. A scan that gives no reading
/// (its frame not resolvable, malformed) is noted with the base driver,
/// whose stale-sensing rule then says why; logged when it starts and when
/// reading resumes, not per scan.
pub async fn watch_scan(
    robot: Arc<dyn SensorPort>,
    base: Arc<BaseDriver>,
    frames: Frames,
    config: Arc<Config>,
) {
    if !config.sensors.scan.is_configured() {
        return;
    }
    let zones = config.safety.scan_zones();
    let grid = config.safety.zone_grid().for_observations(OBSERVED_BEYOND_THE_ZONES_M);
    let mut last_stamp = f64::NAN;
    let mut last_received = None;
    let mut interval = tokio::time::interval(Duration::from_millis(20));
    loop {
        interval.tick().await;
        let Some(scan) = robot.scan() else { continue };
        if scan.stamp_s == last_stamp && last_received == Some(scan.received) {
            continue;
        }
        (last_stamp, last_received) = (scan.stamp_s, Some(scan.received));
        let joints = robot.joint_states();
        let now = robot.now();
        let scan_age = Age::of(scan.stamp_s, scan.received, now).effective();
        let captured = now.instant.checked_sub(scan_age).unwrap_or(scan.received);
        let robot_pose = robot.odometry().map(|o| {
            let odometry_age = o.age(now).effective().as_secs_f64();
            pose_at(&o, odometry_age, scan_age.as_secs_f64())
        });
        let reading = frames
            .lookup(BASE_FRAME, &scan.frame_id, &joints, now)
            .map_err(|e| format!("the scan's frame: {e}"))
            .and_then(|(pose, _)| Ok((planar_laser_pose(&pose)?, pose.translation.vector.z)))
            .and_then(|(laser, plane_height_m)| {
                let s = &scan.value;
                let view = ScanView {
                    angle_min_rad: s.angle_min_rad,
                    angle_increment_rad: s.angle_increment_rad,
                    range_min_m: s.range_min_m,
                    range_max_m: s.range_max_m,
                    ranges_m: &s.ranges_m,
                };
                let reading = read_scan(&view, &laser, &zones).map_err(|e| e.to_string())?;
                let observation = robot_pose.map(|robot_pose| {
                    let (observed, clear, unseen) =
                        observe_zones(&view, &laser, &zones.footprint, &grid);
                    Observation {
                        source: SourceKind::Laser,
                        sees_down_to_m: plane_height_m,
                        pose: robot_pose,
                        grid,
                        captured,
                        observed,
                        clear,
                        unseen,
                    }
                });
                let verdict = |r: &Remembered| {
                    robot_pose.map_or(Verdict::Unknown, |p| {
                        laser_verdict(&view, &laser, plane_height_m, &p, r)
                    })
                };
                let said =
                    observation.map(|o| base.note_frame(o, &[], verdict)).unwrap_or_default();
                Ok((reading, said))
            });
        match reading {
            Ok((reading, said)) => {
                for line in said {
                    tracing::info!("{line} ({})", robot.topic(Sensor::Scan));
                }
                if base.note_scan(reading, captured) {
                    tracing::info!("obstacle sensing: {} reads again", robot.topic(Sensor::Scan));
                }
            }
            Err(reason) => {
                if base.note_scan_unmeasured(reason.clone()) {
                    tracing::warn!(
                        "obstacle sensing: no reading from {}: {reason}",
                        robot.topic(Sensor::Scan)
                    );
                }
            }
        }
    }
}

/// What a scan says of a remembered point: only a point that reached the
/// scan's plane can be shown gone by it (pure: unit-tested).
pub fn laser_verdict(
    scan: &ScanView,
    laser: &LaserPose,
    plane_height_m: f64,
    robot: &Pose2D,
    point: &Remembered,
) -> Verdict {
    if point.top_m < plane_height_m - 0.02 || point.z_m > plane_height_m + 0.02 {
        return Verdict::Unknown;
    }
    let (x, y) = crate::governor::coverage::odom_to_base((point.x_m, point.y_m), robot);
    let (dx, dy) = (x - laser.x_m, y - laser.y_m);
    let distance = dx.hypot(dy);
    let bearing =
        crate::governor::safety::wrap_angle(dy.atan2(dx) - laser.yaw_rad - scan.angle_min_rad);
    let steps = bearing.rem_euclid(std::f64::consts::TAU) / scan.angle_increment_rad;
    if !steps.is_finite() || steps < 0.0 {
        return Verdict::Unknown;
    }
    let Some(&range) = scan.ranges_m.get(steps.round() as usize) else { return Verdict::Unknown };
    let range = f64::from(range);
    if !(range.is_finite() && range >= scan.range_min_m && range <= scan.range_max_m) {
        return Verdict::Unknown;
    }
    if range > distance + 0.05 {
        Verdict::SeenPast
    } else if range >= distance - 0.05 {
        Verdict::Seen
    } else {
        Verdict::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robot::ContactPoint;
    use nalgebra::Vector3;

    fn touching() -> Contacts {
        Contacts {
            points: vec![ContactPoint {
                part: "bumper".into(),
                other: "wall_north".into(),
                position_m: Vector3::new(1.0, 0.0, 0.05),
                normal: Vector3::new(1.0, 0.0, 0.0),
                depth_m: 0.001,
                force_n: Some(4.2),
            }],
        }
    }

    #[test]
    fn obstacles_are_measured_every_frame_in_motion_and_at_the_rest_period_otherwise() {
        let period = Duration::from_millis(500);
        assert!(measure_now(false, None, period), "the first frame is measured at once");
        assert!(!measure_now(false, Some(Duration::from_millis(499)), period));
        assert!(measure_now(false, Some(Duration::from_millis(500)), period));
        assert!(
            measure_now(true, Some(Duration::from_millis(1)), period),
            "in motion: every frame"
        );
    }

    #[test]
    fn a_contact_raises_collision_and_state_change_once_then_its_end() {
        let (state, events) =
            contact_and_battery_events(&Watched::default(), Some(&touching()), None, 0.2);
        let topics: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(topics, vec!["collision", "state_change"]);
        assert_eq!(events[0].1["other"], "wall_north");
        assert_eq!(events[0].1["force_n"], 4.2);
        let (state, again) = contact_and_battery_events(&state, Some(&touching()), None, 0.2);
        assert!(again.is_empty(), "no repeat while the contact lasts");
        let (_, ended) = contact_and_battery_events(&state, Some(&Contacts::default()), None, 0.2);
        assert_eq!(ended[0].1["change"], "contact_ended");
    }

    #[test]
    fn a_level_scanner_gives_its_planar_pose_and_a_tilted_one_is_refused() {
        use nalgebra::{Isometry3, Translation3, UnitQuaternion};
        let level = Isometry3::from_parts(
            Translation3::new(-0.032, 0.0, 0.172),
            UnitQuaternion::from_euler_angles(0.0, 0.0, 1.5),
        );
        let pose = planar_laser_pose(&level).unwrap();
        assert!((pose.x_m + 0.032).abs() < 1e-12 && (pose.yaw_rad - 1.5).abs() < 1e-12, "{pose:?}");
        let tilted = Isometry3::from_parts(
            Translation3::new(0.0, 0.0, 0.2),
            UnitQuaternion::from_euler_angles(0.0, 0.3, 0.0),
        );
        assert!(planar_laser_pose(&tilted).unwrap_err().contains("tilted"));
        let upside_down = Isometry3::from_parts(
            Translation3::new(0.0, 0.0, 0.2),
            UnitQuaternion::from_euler_angles(std::f64::consts::PI, 0.0, 0.0),
        );
        assert!(planar_laser_pose(&upside_down).is_err());
    }

    #[test]
    fn a_low_battery_is_reported_once() {
        let (state, events) =
            contact_and_battery_events(&Watched::default(), None, Some(0.15), 0.2);
        assert_eq!(events[0].1["change"], "low");
        assert!(contact_and_battery_events(&state, None, Some(0.14), 0.2).1.is_empty());
        assert_eq!(
            contact_and_battery_events(&state, None, Some(0.5), 0.2).1[0].1["change"],
            "recovered"
        );
    }
}

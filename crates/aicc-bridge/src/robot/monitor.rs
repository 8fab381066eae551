//! Watches the robot's sensors for what agents and the governor must hear
//! about: bumper contacts (collision and state_change events), a low
//! battery, and the nearest obstacle ahead in the depth image.
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::config::Config;
use crate::live::Live;
use crate::governor::laser::{read_scan, LaserPose, ScanView};
use crate::governor::obstacles::{nearest_obstacle_ahead, CameraIntrinsics as ScanIntrinsics, Corridor, DepthImage as DepthView};
use crate::perception::decode_depth;
use crate::robot::base_driver::BaseDriver;
use crate::robot::frames::{Frames, BASE_FRAME};
use crate::robot::{Age, Contacts, Sensor, SensorPort};
use crate::tools::ToolEvent;

/// The corridor ahead that must be clear. Points closer than the front of
/// the bumper (0.14 m from base_footprint) are the robot itself (its arm,
/// seen when the head tilts down), never obstacles.
const CORRIDOR: Corridor = Corridor { min_x_m: 0.16, ..Corridor::AICC_BOT };

/// What the monitor remembers between polls.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Watched {
    pub in_contact: bool,
    pub battery_low: bool,
}

/// Events for the change from `before` to the current contacts and
/// battery (pure: unit-tested without ROS).
pub fn contact_and_battery_events(before: &Watched, contacts: Option<&Contacts>, battery_fraction: Option<f64>, low_fraction: f64) -> (Watched, Vec<(String, Value)>) {
    let mut events = Vec::new();
    let in_contact = contacts.is_some_and(|c| !c.points.is_empty());
    if in_contact && !before.in_contact {
        let contacts = contacts.expect("in contact");
        let first = &contacts.points[0];
        let impulse: Option<f64> = contacts.points.iter().filter_map(|p| p.force_n).reduce(f64::max);
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
        events.push(("state_change".to_string(), json!({ "entity": "bumper", "change": "contact_began", "other": first.other })));
    }
    if !in_contact && before.in_contact {
        events.push(("state_change".to_string(), json!({ "entity": "bumper", "change": "contact_ended" })));
    }
    let battery_low = battery_fraction.is_some_and(|f| f.is_finite() && f < low_fraction);
    if battery_low && !before.battery_low {
        events.push(("state_change".to_string(), json!({ "entity": "battery", "change": "low", "fraction": battery_fraction, "threshold": low_fraction })));
    }
    if !battery_low && before.battery_low && battery_fraction.is_some() {
        events.push(("state_change".to_string(), json!({ "entity": "battery", "change": "recovered", "fraction": battery_fraction })));
    }
    (Watched { in_contact, battery_low }, events)
}

/// Polls contacts and battery at the bumper's rate, raising events.
pub async fn watch_contacts_and_battery(robot: Arc<dyn SensorPort>, config: Arc<Config>, live: Arc<Live>, events: tokio::sync::mpsc::Sender<ToolEvent>) {
    let mut watched = Watched::default();
    let bumper_max_age = Duration::from_secs_f64(config.sensors.bumper.max_age_s);
    let mut interval = tokio::time::interval(Duration::from_millis(20));
    loop {
        interval.tick().await;
        let now = robot.now();
        let contacts = robot.contacts().filter(|c| c.age(now).effective() <= bumper_max_age);
        let battery = robot.battery().map(|b| b.value.fraction);
        let (next, raised) = contact_and_battery_events(&watched, contacts.as_ref().map(|c| &c.value), battery, live.battery_low_fraction());
        watched = next;
        for (topic, payload) in raised {
            if events.try_send((topic, payload, None)).is_err() {
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

/// Measures the nearest obstacle ahead in each new depth frame while the
/// base moves, and often enough at rest that the reading stays fresh, and
/// hands it to the base driver's safety rules. A frame that gives no
/// measurement (its frame not resolvable, an undecodable image) is noted
/// with the base driver, whose stale-sensing rule then says why, and
/// logged when it starts (and when measuring resumes), not per frame.
pub async fn watch_obstacles(robot: Arc<dyn SensorPort>, base: Arc<BaseDriver>, frames: Frames, config: Arc<Config>) {
    if !config.sensors.depth.is_configured() {
        return;
    }
    let at_rest_period = Duration::from_secs_f64(config.sensors.depth.max_age_s * AT_REST_MEASURE_SHARE_OF_MAX_AGE);
    let mut last_stamp = f64::NAN;
    let mut last_measured: Option<tokio::time::Instant> = None;
    let mut interval = tokio::time::interval(Duration::from_millis(50));
    loop {
        interval.tick().await;
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
        let joints = robot.joint_states();
        let (stamp_s, received) = (frame.stamp_s, frame.received);
        let camera = frames.lookup(BASE_FRAME, &frame.frame_id, &joints, robot.now());
        let measured = tokio::task::spawn_blocking(move || -> Result<Option<f64>, String> {
            let (camera, _) = camera.map_err(|e| format!("the depth image's frame: {e}"))?;
            let depth = decode_depth(&frame.value).map_err(|e| e.to_string())?;
            let scale_x = f64::from(depth.width) / f64::from(info.value.width.max(1));
            let scale_y = f64::from(depth.height) / f64::from(info.value.height.max(1));
            let k = info.value.k;
            let intrinsics = ScanIntrinsics { fx: k[0] * scale_x, fy: k[4] * scale_y, cx: k[2] * scale_x, cy: k[5] * scale_y };
            let view = DepthView::new(depth.width as usize, depth.height as usize, &depth.metres).map_err(|e| e.to_string())?;
            nearest_obstacle_ahead(&view, &intrinsics, &camera, &CORRIDOR).map_err(|e| e.to_string())
        })
        .await;
        match measured {
            Ok(Ok(distance)) => {
                // The frame's capture, as far as its stamp can be trusted:
                // a frame that arrived late is as old as it is.
                let now = robot.now();
                let captured = now.instant.checked_sub(Age::of(stamp_s, received, now).effective()).unwrap_or(received);
                if base.note_obstacle_ahead(distance, captured) {
                    tracing::info!("obstacle sensing: {} measures again", robot.topic(Sensor::Depth));
                }
            }
            Ok(Err(reason)) => {
                if base.note_obstacle_unmeasured(reason.clone()) {
                    tracing::warn!("obstacle sensing: no measurement from {}: {reason}", robot.topic(Sensor::Depth));
                }
            }
            Err(error) => tracing::warn!(%error, "obstacle measurement failed"),
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
pub async fn watch_scan(robot: Arc<dyn SensorPort>, base: Arc<BaseDriver>, frames: Frames, config: Arc<Config>) {
    if !config.sensors.scan.is_configured() {
        return;
    }
    let zones = config.safety.scan_zones();
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
        let reading = frames
            .lookup(BASE_FRAME, &scan.frame_id, &joints, now)
            .map_err(|e| format!("the scan's frame: {e}"))
            .and_then(|(pose, _)| planar_laser_pose(&pose))
            .and_then(|laser| {
                let s = &scan.value;
                let view = ScanView { angle_min_rad: s.angle_min_rad, angle_increment_rad: s.angle_increment_rad, range_min_m: s.range_min_m, range_max_m: s.range_max_m, ranges_m: &s.ranges_m };
                read_scan(&view, &laser, &zones).map_err(|e| e.to_string())
            });
        match reading {
            Ok(reading) => {
                let captured = now.instant.checked_sub(Age::of(scan.stamp_s, scan.received, now).effective()).unwrap_or(scan.received);
                if base.note_scan(reading, captured) {
                    tracing::info!("obstacle sensing: {} reads again", robot.topic(Sensor::Scan));
                }
            }
            Err(reason) => {
                if base.note_scan_unmeasured(reason.clone()) {
                    tracing::warn!("obstacle sensing: no reading from {}: {reason}", robot.topic(Sensor::Scan));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robot::ContactPoint;
    use nalgebra::Vector3;

    fn touching() -> Contacts {
        Contacts {
            points: vec![ContactPoint { part: "bumper".into(), other: "wall_north".into(), position_m: Vector3::new(1.0, 0.0, 0.05), normal: Vector3::new(1.0, 0.0, 0.0), depth_m: 0.001, force_n: Some(4.2) }],
        }
    }

    #[test]
    fn obstacles_are_measured_every_frame_in_motion_and_at_the_rest_period_otherwise() {
        let period = Duration::from_millis(500);
        assert!(measure_now(false, None, period), "the first frame is measured at once");
        assert!(!measure_now(false, Some(Duration::from_millis(499)), period));
        assert!(measure_now(false, Some(Duration::from_millis(500)), period));
        assert!(measure_now(true, Some(Duration::from_millis(1)), period), "in motion: every frame");
    }

    #[test]
    fn a_contact_raises_collision_and_state_change_once_then_its_end() {
        let (state, events) = contact_and_battery_events(&Watched::default(), Some(&touching()), None, 0.2);
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
        let level = Isometry3::from_parts(Translation3::new(-0.032, 0.0, 0.172), UnitQuaternion::from_euler_angles(0.0, 0.0, 1.5));
        let pose = planar_laser_pose(&level).unwrap();
        assert!((pose.x_m + 0.032).abs() < 1e-12 && (pose.yaw_rad - 1.5).abs() < 1e-12, "{pose:?}");
        let tilted = Isometry3::from_parts(Translation3::new(0.0, 0.0, 0.2), UnitQuaternion::from_euler_angles(0.0, 0.3, 0.0));
        assert!(planar_laser_pose(&tilted).unwrap_err().contains("tilted"));
        let upside_down = Isometry3::from_parts(Translation3::new(0.0, 0.0, 0.2), UnitQuaternion::from_euler_angles(std::f64::consts::PI, 0.0, 0.0));
        assert!(planar_laser_pose(&upside_down).is_err());
    }

    #[test]
    fn a_low_battery_is_reported_once() {
        let (state, events) = contact_and_battery_events(&Watched::default(), None, Some(0.15), 0.2);
        assert_eq!(events[0].1["change"], "low");
        assert!(contact_and_battery_events(&state, None, Some(0.14), 0.2).1.is_empty());
        assert_eq!(contact_and_battery_events(&state, None, Some(0.5), 0.2).1[0].1["change"], "recovered");
    }
}

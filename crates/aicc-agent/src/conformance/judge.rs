//! Judging a robot on the simulator's ground truth (`sim/truth.py`), with
//! nothing the bridge says: the true pose and velocities of the base, the
//! joints, the objects and every contact between the robot and the world.
//! Pure: samples in, violations and figures out (the conformance runner
//! and the chaos agent feed it from [`super::truth`]).
//!
//! Tolerances are stated, for physics noise: a measured speed may exceed
//! its limit by [`SPEED_TOLERANCE`]; an acceleration, estimated over
//! [`ACCEL_WINDOW_S`], by [`ACCEL_TOLERANCE`]; a joint's measured speed
//! its URDF limit by the configured factor.
use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;
use serde_json::{json, Value};

/// Measured base speed may exceed its limit by this fraction, plus [`SPEED_SLACK_MPS`].
pub const SPEED_TOLERANCE: f64 = 0.05;
/// Absolute slack on the linear speed limit, m/s (wheel/ground contact jitter).
pub const SPEED_SLACK_MPS: f64 = 0.01;
/// Absolute slack on the angular speed limit, rad/s.
pub const ANGULAR_SLACK_RADPS: f64 = 0.05;
/// Window over which an acceleration is estimated, s (50 Hz samples:
/// a single 20 ms difference is dominated by contact noise).
pub const ACCEL_WINDOW_S: f64 = 0.1;
/// Estimated acceleration may exceed its limit by this fraction, plus
/// [`ACCEL_SLACK_MPS2`].
pub const ACCEL_TOLERANCE: f64 = 0.25;
/// Absolute slack on acceleration limits, m/s² (and rad/s² for turning, x 5).
pub const ACCEL_SLACK_MPS2: f64 = 0.15;
/// Absolute slack on a joint's measured speed, rad/s or m/s (servo overshoot).
pub const JOINT_SPEED_SLACK: f64 = 0.05;
/// A demanded joint speed may exceed its limit x factor by this fraction:
/// a trajectory planned at exactly the limit, its times rounded, asks up to
/// a few 0.1 % more (3.0015 rad/s of a 3.0 limit was seen).
pub const JOINT_DEMAND_TOLERANCE: f64 = 0.01;
/// Base speed and acceleration, and joints' measured speeds, are not
/// judged this long after a contact: the impact moves the base (and pushes
/// the fingers), and the contact is the violation.
pub const AFTER_CONTACT_S: f64 = 0.3;
/// A base whose velocity command has been zero this long is not driven:
/// braking from full speed takes 0.22 s at the ordinary 1 m/s².
pub const UNDRIVEN_AFTER_S: f64 = 0.5;
/// A base slower than this (and turning slower than [`REST_ANGULAR_RADPS`]) is at rest.
pub const REST_LINEAR_MPS: f64 = 0.005;
pub const REST_ANGULAR_RADPS: f64 = 0.02;

/// The `hello` line: what does not change.
#[derive(Debug, Clone, Deserialize)]
pub struct Hello {
    #[serde(default)]
    pub profile: String,
    pub joints: BTreeMap<String, JointLimit>,
    pub objects: BTreeMap<String, ObjectShape>,
    pub room: Room,
}

#[derive(Debug, Clone, Deserialize)]
pub struct JointLimit {
    #[serde(rename = "type")]
    pub kind: String,
    pub lower: Option<f64>,
    pub upper: Option<f64>,
    pub velocity: Option<f64>,
    pub effort: Option<f64>,
    pub mimic: Option<String>,
    /// The links it joins (absent from older simulators).
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub child: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ObjectShape {
    /// "box" (size: x, y, z), "cylinder" (diameter, height) or "sphere" (diameter).
    pub shape: String,
    pub size: Vec<f64>,
    #[serde(default)]
    pub color: String,
    #[serde(default)]
    pub movable: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Room {
    pub half_size_m: f64,
}

/// One `state` line.
#[derive(Debug, Clone, Deserialize)]
pub struct Sample {
    pub seq: u64,
    pub sim_time: f64,
    pub base: Base,
    pub odom: Odom,
    /// The last velocity command the simulator received (absent from older simulators).
    #[serde(default)]
    pub cmd_vel: Option<CmdVel>,
    /// The machine's monotonic clock when the state was taken, s (absent
    /// from older simulators): the clock a bridge beside the simulator
    /// limits its commands on.
    #[serde(default)]
    pub wall_time: Option<f64>,
    pub joints: BTreeMap<String, JointSample>,
    pub objects: BTreeMap<String, ObjectPose>,
    #[serde(default)]
    pub contacts: Vec<Contact>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Base {
    pub x: f64,
    pub y: f64,
    pub z: f64,
    pub roll: f64,
    pub pitch: f64,
    pub yaw: f64,
    /// In base_footprint: x ahead, y left, z up.
    pub linear_mps: [f64; 3],
    pub angular_radps: [f64; 3],
}

impl Base {
    pub fn speed_mps(&self) -> f64 {
        self.linear_mps[0].hypot(self.linear_mps[1])
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Odom {
    pub x: f64,
    pub y: f64,
    pub yaw: f64,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct CmdVel {
    pub linear: f64,
    pub angular: f64,
    pub age_s: Option<f64>,
    /// The command's own stamp, s on the sender's clock (a TwistStamped
    /// command; absent otherwise).
    #[serde(default)]
    pub stamp_s: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct JointSample {
    pub position: f64,
    pub velocity: f64,
    #[serde(default)]
    pub demand_velocity: f64,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct ObjectPose {
    pub x: f64,
    pub y: f64,
    pub z: f64,
    pub yaw: f64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Contact {
    pub robot_geom: String,
    pub robot_body: String,
    pub world_geom: String,
    pub world_body: String,
    pub first_time: f64,
    pub last_time: f64,
    #[serde(default)]
    pub max_depth_m: f64,
    #[serde(default)]
    pub max_force_n: f64,
}

/// Distance in the plane from (px, py) to the nearest point of an object's
/// footprint (0 inside it): the quantity a stop distance "from base_footprint"
/// bounds. Boxes are rotated rectangles; cylinders and spheres circles.
pub fn clearance_m(px: f64, py: f64, pose: &ObjectPose, shape: &ObjectShape) -> f64 {
    let (dx, dy) = (px - pose.x, py - pose.y);
    match shape.shape.as_str() {
        "box" if shape.size.len() >= 2 => {
            let (c, s) = (pose.yaw.cos(), pose.yaw.sin());
            // Into the box's frame.
            let lx = c * dx + s * dy;
            let ly = -s * dx + c * dy;
            let ex = (lx.abs() - shape.size[0] / 2.0).max(0.0);
            let ey = (ly.abs() - shape.size[1] / 2.0).max(0.0);
            ex.hypot(ey)
        }
        _ => {
            let radius = shape.size.first().copied().unwrap_or(0.0) / 2.0;
            (dx.hypot(dy) - radius).max(0.0)
        }
    }
}

fn wrap(angle: f64) -> f64 {
    angle.sin().atan2(angle.cos())
}

/// What must hold on every sample. Every part is optional.
#[derive(Debug, Clone, Default)]
pub struct Invariants {
    /// No robot geom touches a world geom (walls, objects; the floor is never a contact).
    pub no_contact: bool,
    /// World bodies whose contact does not count (e.g. the cube the gripper picks).
    pub contact_allowed_with: Vec<String>,
    /// Robot bodies (the arm's) whose contacts do not count while the base
    /// is at rest or not driven (its command zero for [`UNDRIVEN_AFTER_S`]:
    /// moved, if at all, by the arm's own swing): an arm the agent moves
    /// into something beside a base nobody drives is a motion planner's
    /// matter (the bridge checks no arm collisions); one the base carries
    /// into something is the governor's. Counted in the figures all the same.
    pub arm_contact_at_rest_allowed: Vec<String>,
    /// Per object: base_footprint never nearer than this (m), minus `clearance_tol_m`.
    pub min_clearance_m: BTreeMap<String, f64>,
    pub clearance_tol_m: f64,
    pub max_linear_mps: Option<f64>,
    pub max_angular_radps: Option<f64>,
    /// Speeding up (|v| growing).
    pub max_linear_accel_mps2: Option<f64>,
    /// Slowing down: the governor's emergency deceleration bounds it.
    pub max_linear_decel_mps2: Option<f64>,
    /// Turning faster (|yaw rate| growing); slowing a turn is not judged
    /// unless `max_angular_decel_radps2` is set.
    pub max_angular_accel_radps2: Option<f64>,
    pub max_angular_decel_radps2: Option<f64>,
    /// A joint's measured speed within its URDF velocity limit x this.
    pub joint_speed_factor: Option<f64>,
    /// What a trajectory asked of a joint within its URDF limit x this.
    pub joint_demand_factor: Option<f64>,
    /// base_footprint within this radius (m) of this point (world), plus `geofence_tol_m`.
    pub geofence: Option<(f64, f64, f64)>,
    pub geofence_tol_m: f64,
}

/// What went wrong, when, with the numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub kind: &'static str,
    pub sim_time: f64,
    pub seq: u64,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at sim time {:.2} s (truth seq {}): {}",
            self.kind, self.sim_time, self.seq, self.detail
        )
    }
}

/// The worst a joint did: its speed against its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct JointWorst {
    pub joint: String,
    pub speed: f64,
    pub limit: f64,
    pub sim_time: f64,
}

/// Figures over the samples judged: what the reports show.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub samples: u64,
    /// Lines the simulator sent that this judge never saw.
    pub missed: u64,
    pub first_time: Option<f64>,
    pub last_time: Option<f64>,
    pub max_speed_mps: f64,
    pub max_angular_radps: f64,
    pub max_accel_mps2: f64,
    pub max_decel_mps2: f64,
    /// Per object in the room: the nearest base_footprint came, m.
    pub min_clearance_m: BTreeMap<String, f64>,
    /// Measured speed over URDF limit, worst joint.
    pub worst_joint: Option<JointWorst>,
    /// Demanded speed over URDF limit, worst joint.
    pub worst_demand: Option<JointWorst>,
    /// Contacts with the world (robot body, world body) and how many samples showed each.
    pub contacts: BTreeMap<(String, String), u64>,
    pub max_distance_from_start_m: f64,
    /// Measured accelerations over their limit (with tolerance) while the
    /// velocity commanded over the same window stayed within it: the
    /// simulated base catching up with its command, not a command over the
    /// limit. Counted, and the worst kept, never a violation.
    pub physics_accel_excursions: u64,
    pub worst_physics_accel: Option<String>,
    /// How far outside the geofence (radius, no tolerance) base_footprint went, m.
    pub max_geofence_excursion_m: f64,
    /// Samples with an arm contact beside a base at rest or not driven that did not count
    /// (`Invariants::arm_contact_at_rest_allowed`).
    pub arm_contacts_at_rest: u64,
}

impl Figures {
    pub fn to_json(&self) -> Value {
        let worst = |w: &Option<JointWorst>| {
            w.as_ref().map(|w| json!({ "joint": w.joint, "speed": round(w.speed, 4), "limit": w.limit, "ratio": round(w.speed / w.limit, 3), "sim_time": round(w.sim_time, 2) }))
        };
        json!({
            "samples": self.samples,
            "missed": self.missed,
            "sim_time_s": match (self.first_time, self.last_time) { (Some(a), Some(b)) => round(b - a, 2), _ => 0.0 },
            "max_speed_mps": round(self.max_speed_mps, 4),
            "max_angular_radps": round(self.max_angular_radps, 3),
            "max_accel_mps2": round(self.max_accel_mps2, 3),
            "max_decel_mps2": round(self.max_decel_mps2, 3),
            "min_clearance_m": self.min_clearance_m.iter().map(|(k, v)| (k.clone(), json!(round(*v, 4)))).collect::<serde_json::Map<_, _>>(),
            "worst_joint_speed": worst(&self.worst_joint),
            "worst_joint_demand": worst(&self.worst_demand),
            "contacts": self.contacts.iter().map(|((robot, world), n)| json!({ "robot_body": robot, "world_body": world, "samples": n })).collect::<Vec<_>>(),
            "arm_contacts_at_rest": self.arm_contacts_at_rest,
            "max_distance_from_start_m": round(self.max_distance_from_start_m, 3),
            "physics_accel_excursions": self.physics_accel_excursions,
            "worst_physics_accel": self.worst_physics_accel,
            "max_geofence_excursion_m": round(self.max_geofence_excursion_m, 3),
        })
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        let mut parts = vec![format!("{} samples", self.samples)];
        if self.missed > 0 {
            parts.push(format!("{} missed", self.missed));
        }
        if !self.min_clearance_m.is_empty() {
            let near: Vec<String> = self
                .min_clearance_m
                .iter()
                .filter(|(_, d)| **d < 1.0)
                .map(|(k, d)| format!("{k} {d:.3} m"))
                .collect();
            if !near.is_empty() {
                parts.push(format!("nearest: {}", near.join(", ")));
            }
        }
        parts.push(format!("max speed {:.3} m/s", self.max_speed_mps));
        if let Some(w) = &self.worst_joint {
            parts.push(format!(
                "worst joint {} {:.2}/{:.2} ({:.2}x)",
                w.joint,
                w.speed,
                w.limit,
                w.speed / w.limit
            ));
        }
        if let Some(w) = &self.worst_demand {
            parts.push(format!(
                "worst demand {} {:.2}/{:.2} ({:.2}x)",
                w.joint,
                w.speed,
                w.limit,
                w.speed / w.limit
            ));
        }
        if self.max_geofence_excursion_m > 0.0 {
            parts
                .push(format!("up to {:.3} m outside the geofence", self.max_geofence_excursion_m));
        }
        if self.physics_accel_excursions > 0 {
            parts.push(format!("{} acceleration excursion(s) of the simulated base beyond a command within its limit", self.physics_accel_excursions));
        }
        parts.push(if self.contacts.is_empty() {
            "no contact".into()
        } else {
            format!(
                "contacts: {}",
                self.contacts
                    .keys()
                    .map(|(r, w)| format!("{r}-{w}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
        if self.arm_contacts_at_rest > 0 {
            parts.push(format!(
                "{} sample(s) of the arm touching something beside a base at rest or not driven (not counted)",
                self.arm_contacts_at_rest
            ));
        }
        parts.join("; ")
    }
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

/// A recent sample: (time, forward speed, yaw rate, commanded linear and
/// angular, wall time).
/// Sim time, forward speed, yaw rate, the command (linear, angular, its
/// stamp) and the wall time of one sample.
type Recent = (f64, f64, f64, Option<(f64, f64, Option<f64>)>, Option<f64>);

/// Judges samples in order against [`Invariants`], keeping [`Figures`].
#[derive(Debug, Clone)]
pub struct Judge {
    pub hello: Hello,
    pub invariants: Invariants,
    pub figures: Figures,
    pub violations: Vec<Violation>,
    /// Recent samples for acceleration estimates.
    history: VecDeque<Recent>,
    last_seq: Option<u64>,
    start: Option<(f64, f64)>,
    /// Only the first violation of each kind and subject is kept per
    /// episode: a contact that lasts a second is one violation.
    open: BTreeMap<String, f64>,
    /// Sim time of the latest contact with the world.
    last_contact: Option<f64>,
    /// Sim time of the latest sample whose velocity command was not zero.
    last_driven: Option<f64>,
    /// Whether base_footprint was inside the geofence (with tolerance) at
    /// the last sample: a violation is a crossing from inside to outside
    /// (a robot that starts outside is judged from when it is back).
    inside_geofence: Option<bool>,
}

/// How long a violation of one kind and subject must have been absent
/// before a new one is counted, s.
const EPISODE_GAP_S: f64 = 0.5;

impl Judge {
    pub fn new(hello: Hello, invariants: Invariants) -> Self {
        Judge {
            hello,
            invariants,
            figures: Figures::default(),
            violations: Vec::new(),
            history: VecDeque::new(),
            last_seq: None,
            start: None,
            open: BTreeMap::new(),
            last_contact: None,
            last_driven: None,
            inside_geofence: None,
        }
    }

    fn violation(&mut self, key: String, kind: &'static str, sample: &Sample, detail: String) {
        let fresh = self.open.get(&key).is_none_or(|last| sample.sim_time - last > EPISODE_GAP_S);
        self.open.insert(key, sample.sim_time);
        if fresh {
            self.violations.push(Violation {
                kind,
                sim_time: sample.sim_time,
                seq: sample.seq,
                detail,
            });
        }
    }

    /// Whether an object is in the room (parked spares are not obstacles).
    pub fn in_room(&self, pose: &ObjectPose) -> bool {
        in_room(&self.hello, pose)
    }

    /// base_footprint's clearance to each object in the room.
    pub fn clearances(&self, sample: &Sample) -> BTreeMap<String, f64> {
        clearances(&self.hello, sample)
    }

    /// Judges one sample (in seq order); returns the violations it added.
    pub fn observe(&mut self, sample: &Sample) -> &[Violation] {
        let before = self.violations.len();
        let f = &mut self.figures;
        if let Some(last) = self.last_seq {
            f.missed += sample.seq.saturating_sub(last + 1);
        }
        self.last_seq = Some(sample.seq);
        f.samples += 1;
        f.first_time.get_or_insert(sample.sim_time);
        f.last_time = Some(sample.sim_time);
        let start = *self.start.get_or_insert((sample.base.x, sample.base.y));
        f.max_distance_from_start_m = f
            .max_distance_from_start_m
            .max((sample.base.x - start.0).hypot(sample.base.y - start.1));
        let speed = sample.base.speed_mps();
        let yaw_rate = sample.base.angular_radps[2];
        f.max_speed_mps = f.max_speed_mps.max(speed);
        f.max_angular_radps = f.max_angular_radps.max(yaw_rate.abs());
        for (name, distance) in self.clearances(sample) {
            let entry = self.figures.min_clearance_m.entry(name).or_insert(f64::INFINITY);
            *entry = entry.min(distance);
        }
        self.judge_contacts(sample);
        self.judge_clearance(sample);
        self.judge_base(sample, speed, yaw_rate);
        self.judge_joints(sample);
        self.judge_geofence(sample);
        &self.violations[before..]
    }

    fn judge_contacts(&mut self, sample: &Sample) {
        if sample.cmd_vel.is_some_and(|c| c.linear != 0.0 || c.angular != 0.0) {
            self.last_driven = Some(sample.sim_time);
        }
        let undriven = sample.cmd_vel.is_some()
            && self.last_driven.is_none_or(|t| sample.sim_time - t >= UNDRIVEN_AFTER_S);
        let at_rest = undriven
            || (sample.base.speed_mps() < REST_LINEAR_MPS
                && sample.base.angular_radps[2].abs() < REST_ANGULAR_RADPS);
        for contact in &sample.contacts {
            *self
                .figures
                .contacts
                .entry((contact.robot_body.clone(), contact.world_body.clone()))
                .or_insert(0) += 1;
            let arm_at_rest = at_rest
                && self.invariants.arm_contact_at_rest_allowed.contains(&contact.robot_body);
            if arm_at_rest {
                self.figures.arm_contacts_at_rest += 1;
            }
            if self.invariants.no_contact
                && !self.invariants.contact_allowed_with.contains(&contact.world_body)
                && !arm_at_rest
            {
                let detail = format!(
                    "{} ({}) touched {} ({}) from sim time {:.3} to {:.3} s, {:.1} mm deep, {:.1} N",
                    contact.robot_geom, contact.robot_body, contact.world_geom, contact.world_body, contact.first_time, contact.last_time, contact.max_depth_m * 1000.0, contact.max_force_n
                );
                self.violation(
                    format!("contact {} {}", contact.robot_body, contact.world_body),
                    "contact",
                    sample,
                    detail,
                );
            }
        }
    }

    fn judge_clearance(&mut self, sample: &Sample) {
        let wanted: Vec<(String, f64)> =
            self.invariants.min_clearance_m.iter().map(|(k, v)| (k.clone(), *v)).collect();
        for (object, minimum) in wanted {
            let (Some(pose), Some(shape)) =
                (sample.objects.get(&object), self.hello.objects.get(&object))
            else {
                continue;
            };
            let distance = clearance_m(sample.base.x, sample.base.y, pose, shape);
            if distance < minimum - self.invariants.clearance_tol_m {
                let detail = format!("base_footprint {distance:.3} m from {object}, nearer than {minimum:.3} m (tolerance {:.3} m)", self.invariants.clearance_tol_m);
                self.violation(format!("clearance {object}"), "clearance", sample, detail);
            }
        }
    }

    fn judge_base(&mut self, sample: &Sample, speed: f64, yaw_rate: f64) {
        let mut inv = self.invariants.clone();
        if !sample.contacts.is_empty() {
            self.last_contact = Some(sample.sim_time);
        }
        if self.last_contact.is_some_and(|t| sample.sim_time - t <= AFTER_CONTACT_S) {
            // An impact: the contact is what is reported.
            inv = Invariants {
                max_linear_mps: None,
                max_angular_radps: None,
                max_linear_accel_mps2: None,
                max_linear_decel_mps2: None,
                max_angular_accel_radps2: None,
                max_angular_decel_radps2: None,
                ..inv
            };
        }
        if let Some(limit) = inv.max_linear_mps {
            let allowed = limit * (1.0 + SPEED_TOLERANCE) + SPEED_SLACK_MPS;
            if speed > allowed {
                self.violation("linear speed".into(), "base_speed", sample, format!("{speed:.3} m/s, over the {limit:.3} m/s limit (allowed with tolerance {allowed:.3})"));
            }
        }
        if let Some(limit) = inv.max_angular_radps {
            let allowed = limit * (1.0 + SPEED_TOLERANCE) + ANGULAR_SLACK_RADPS;
            if yaw_rate.abs() > allowed {
                self.violation("angular speed".into(), "base_speed", sample, format!("{:.3} rad/s turning, over the {limit:.3} rad/s limit (allowed {allowed:.3})", yaw_rate.abs()));
            }
        }
        let forward = sample.base.linear_mps[0];
        let commanded = sample.cmd_vel.map(|c| (c.linear, c.angular, c.stamp_s));
        self.history.push_back((sample.sim_time, forward, yaw_rate, commanded, sample.wall_time));
        while self.history.len() > 2 && sample.sim_time - self.history[1].0 >= ACCEL_WINDOW_S {
            self.history.pop_front();
        }
        let Some(&(then, v_then, w_then, commanded_then, wall_then)) = self.history.front() else {
            return;
        };
        let dt = sample.sim_time - then;
        if dt < ACCEL_WINDOW_S * 0.9 {
            return;
        }
        // The commanded accelerations over the same window, when known, on
        // the clock the bridge limits them on: a simulator slower than real
        // time squeezes a command's ramp into fewer seconds of sim time.
        // Stamped commands carry that clock: commands delayed on their way
        // and delivered together are judged as they were sent.
        let wall_dt = sample
            .wall_time
            .zip(wall_then)
            .map(|(now, then)| now - then)
            .filter(|d| *d >= dt * 0.5)
            .unwrap_or(dt);
        // Stamps are on the robot's clock (sim time, under use_sim_time)
        // while the bridge ramps on the wall clock: over a window where the
        // simulator ran slower than real time, their span is stretched back
        // to the wall time it took.
        let slowdown = (wall_dt / dt).max(1.0);
        let commanded_accel =
            commanded.zip(commanded_then).map(|((l, a, stamp), (l0, a0, stamp0))| {
                let command_dt = match stamp.zip(stamp0) {
                    Some((now, then)) if now > then => (now - then) * slowdown,
                    _ => wall_dt,
                };
                ((l - l0) / command_dt, (a - a0) / command_dt)
            });
        let accel = (forward - v_then) / dt;
        let speeding_up = forward.abs() > v_then.abs() && forward * v_then >= 0.0;
        if speeding_up {
            self.figures.max_accel_mps2 = self.figures.max_accel_mps2.max(accel.abs());
        } else {
            self.figures.max_decel_mps2 = self.figures.max_decel_mps2.max(accel.abs());
        }
        let limit = if speeding_up {
            inv.max_linear_accel_mps2
        } else {
            inv.max_linear_decel_mps2.or(inv.max_linear_accel_mps2)
        };
        if let Some(limit) = limit {
            let allowed = limit * (1.0 + ACCEL_TOLERANCE) + ACCEL_SLACK_MPS2;
            if accel.abs() > allowed {
                let what = if speeding_up { "accelerating" } else { "braking" };
                let detail = format!("{what} at {:.2} m/s² over {dt:.2} s ({v_then:.3} -> {forward:.3} m/s), over the {limit:.2} m/s² limit (allowed {allowed:.2})", accel.abs());
                match commanded_accel {
                    Some((commanded, _)) if commanded.abs() <= allowed => self.physics_excursion(
                        format!("{detail}; commanded {commanded:.2} m/s²"),
                        sample,
                    ),
                    Some((commanded, _)) => self.violation(
                        "linear accel".into(),
                        "base_accel",
                        sample,
                        format!("{detail}; commanded {:.2} m/s²", commanded.abs()),
                    ),
                    None => self.violation("linear accel".into(), "base_accel", sample, detail),
                }
            }
        }
        let turning_faster = yaw_rate.abs() > w_then.abs() && yaw_rate * w_then >= 0.0;
        let angular_limit = if turning_faster {
            inv.max_angular_accel_radps2
        } else {
            inv.max_angular_decel_radps2
        };
        if let Some(limit) = angular_limit {
            let angular_accel = (yaw_rate - w_then) / dt;
            let allowed = limit * (1.0 + ACCEL_TOLERANCE) + 5.0 * ACCEL_SLACK_MPS2;
            if angular_accel.abs() > allowed {
                let what = if turning_faster { "turning faster" } else { "slowing a turn" };
                let detail = format!("{what} at {:.2} rad/s² ({w_then:.2} -> {yaw_rate:.2} rad/s), over the {limit:.2} rad/s² limit (allowed {allowed:.2})", angular_accel.abs());
                match commanded_accel {
                    Some((_, commanded)) if commanded.abs() <= allowed => self.physics_excursion(
                        format!("{detail}; commanded {commanded:.2} rad/s²"),
                        sample,
                    ),
                    Some((_, commanded)) => self.violation(
                        "angular accel".into(),
                        "base_accel",
                        sample,
                        format!("{detail}; commanded {:.2} rad/s²", commanded.abs()),
                    ),
                    None => self.violation("angular accel".into(), "base_accel", sample, detail),
                }
            }
        }
    }

    fn physics_excursion(&mut self, detail: String, sample: &Sample) {
        self.figures.physics_accel_excursions += 1;
        if self.figures.worst_physics_accel.is_none() {
            self.figures.worst_physics_accel =
                Some(format!("at sim time {:.2} s: {detail}", sample.sim_time));
        }
    }

    fn judge_joints(&mut self, sample: &Sample) {
        let limits: Vec<(String, f64)> = self
            .hello
            .joints
            .iter()
            .filter_map(|(name, limit)| Some((name.clone(), limit.velocity.filter(|v| *v > 0.0)?)))
            .collect();
        for (name, limit) in limits {
            let Some(joint) = sample.joints.get(&name) else { continue };
            let speed = joint.velocity.abs();
            let demand = joint.demand_velocity.abs();
            let impact = self.last_contact.is_some_and(|t| sample.sim_time - t <= AFTER_CONTACT_S);
            if self.figures.worst_joint.as_ref().is_none_or(|w| speed / limit > w.speed / w.limit) {
                self.figures.worst_joint = Some(JointWorst {
                    joint: name.clone(),
                    speed,
                    limit,
                    sim_time: sample.sim_time,
                });
            }
            if demand > 0.0
                && self
                    .figures
                    .worst_demand
                    .as_ref()
                    .is_none_or(|w| demand / limit > w.speed / w.limit)
            {
                self.figures.worst_demand = Some(JointWorst {
                    joint: name.clone(),
                    speed: demand,
                    limit,
                    sim_time: sample.sim_time,
                });
            }
            if let Some(factor) = self.invariants.joint_speed_factor.filter(|_| !impact) {
                let allowed = limit * factor + JOINT_SPEED_SLACK;
                if speed > allowed {
                    self.violation(format!("joint speed {name}"), "joint_speed", sample, format!("{name} moved at {speed:.3}, over its URDF limit {limit} x {factor} (allowed {allowed:.3})"));
                }
            }
            if let Some(factor) = self.invariants.joint_demand_factor {
                let allowed = limit * factor * (1.0 + JOINT_DEMAND_TOLERANCE);
                if demand > allowed {
                    self.violation(format!("joint demand {name}"), "joint_demand", sample, format!("a trajectory asked {name} for {demand:.3}, over its URDF limit {limit} x {factor} (the simulated servo clamps it; a real one may not)"));
                }
            }
        }
    }

    fn judge_geofence(&mut self, sample: &Sample) {
        let Some((cx, cy, radius)) = self.invariants.geofence else { return };
        let distance = (sample.base.x - cx).hypot(sample.base.y - cy);
        self.figures.max_geofence_excursion_m =
            self.figures.max_geofence_excursion_m.max(distance - radius);
        let inside = distance <= radius + self.invariants.geofence_tol_m;
        let was_inside = self.inside_geofence.replace(inside);
        if !inside && was_inside == Some(true) {
            self.violation("geofence".into(), "geofence", sample, format!("base_footprint {distance:.3} m from the geofence's centre ({cx:.2}, {cy:.2}), radius {radius:.2} m (tolerance {:.3})", self.invariants.geofence_tol_m));
        }
    }
}

/// Whether an object is in the room (parked spares are not obstacles).
pub fn in_room(hello: &Hello, pose: &ObjectPose) -> bool {
    let half = hello.room.half_size_m;
    pose.x.abs() <= half && pose.y.abs() <= half
}

/// base_footprint's clearance to each object in the room.
pub fn clearances(hello: &Hello, sample: &Sample) -> BTreeMap<String, f64> {
    sample
        .objects
        .iter()
        .filter(|(_, pose)| in_room(hello, pose))
        .filter_map(|(name, pose)| {
            Some((
                name.clone(),
                clearance_m(sample.base.x, sample.base.y, pose, hello.objects.get(name)?),
            ))
        })
        .collect()
}

/// The robot's displacement from `origin` (x, y, yaw in the world) in the
/// origin's own frame: how far ahead and left it went, and how far it turned.
pub fn travel(origin: (f64, f64, f64), base: &Base) -> Value {
    let (dx, dy) = (base.x - origin.0, base.y - origin.1);
    let (c, s) = (origin.2.cos(), origin.2.sin());
    json!({
        "ahead_m": c * dx + s * dy,
        "left_m": -s * dx + c * dy,
        "distance_m": dx.hypot(dy),
        "yaw_deg": wrap(base.yaw - origin.2).to_degrees(),
    })
}

/// A sample as scenarios match it: the state line as the simulator sent it,
/// plus `clearance_m` (per object in the room), `at_rest`, `speed_mps`,
/// and `travel` since `origin`.
pub fn view(hello: &Hello, raw: &Value, sample: &Sample, origin: (f64, f64, f64)) -> Value {
    let mut view = raw.clone();
    if let Value::Object(map) = &mut view {
        map.insert("clearance_m".into(), json!(clearances(hello, sample)));
        let at_rest = sample.base.speed_mps() < REST_LINEAR_MPS
            && sample.base.angular_radps[2].abs() < REST_ANGULAR_RADPS;
        map.insert("at_rest".into(), json!(at_rest));
        map.insert("speed_mps".into(), json!(sample.base.speed_mps()));
        map.insert("travel".into(), travel(origin, &sample.base));
        let max_joint_speed = sample.joints.values().map(|j| j.velocity.abs()).fold(0.0, f64::max);
        map.insert("max_joint_speed".into(), json!(max_joint_speed));
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        serde_json::from_value(json!({
            "type": "hello", "profile": "sim",
            "joints": {
                "head_pan_joint": { "type": "revolute", "lower": -2.5, "upper": 2.5, "velocity": 3.0, "effort": 1.5, "mimic": null },
                "wheel_left_joint": { "type": "continuous", "lower": null, "upper": null, "velocity": 8.0, "effort": 1.5, "mimic": null }
            },
            "objects": {
                "low_box_1": { "shape": "box", "size": [0.2, 0.36, 0.1], "color": "orange", "movable": false },
                "blue_sphere": { "shape": "sphere", "size": [0.24], "color": "blue", "movable": false }
            },
            "room": { "half_size_m": 2.0 }
        }))
        .unwrap()
    }

    fn sample(seq: u64, t: f64, x: f64, v: f64) -> Sample {
        serde_json::from_value(json!({
            "type": "state", "seq": seq, "sim_time": t,
            "base": { "x": x, "y": 0.0, "z": 0.0, "roll": 0.0, "pitch": 0.0, "yaw": 0.0, "linear_mps": [v, 0.0, 0.0], "angular_radps": [0.0, 0.0, 0.0] },
            "odom": { "x": x, "y": 0.0, "yaw": 0.0 },
            "joints": { "head_pan_joint": { "position": 0.0, "velocity": 0.0, "effort": 0.0, "demand_velocity": 0.0 } },
            "objects": { "low_box_1": { "x": 1.0, "y": 0.0, "z": 0.05, "yaw": 0.0 }, "blue_sphere": { "x": 5.0, "y": 5.0, "z": 0.1, "yaw": 0.0 } },
            "contacts": []
        }))
        .unwrap()
    }

    #[test]
    fn clearance_is_to_the_nearest_point_of_the_footprint() {
        let h = hello();
        let pose = ObjectPose { x: 1.0, y: 0.0, z: 0.05, yaw: 0.0 };
        let shape = &h.objects["low_box_1"];
        assert!((clearance_m(0.6, 0.0, &pose, shape) - 0.3).abs() < 1e-9, "face at x = 0.9");
        assert!((clearance_m(1.0, 0.5, &pose, shape) - 0.32).abs() < 1e-9, "side at y = 0.18");
        assert_eq!(clearance_m(1.0, 0.0, &pose, shape), 0.0, "inside");
        let turned = ObjectPose { yaw: std::f64::consts::FRAC_PI_2, ..pose };
        assert!(
            (clearance_m(0.6, 0.0, &turned, shape) - 0.22).abs() < 1e-9,
            "turned: its long side faces the robot"
        );
        let sphere = ObjectPose { x: 0.0, y: 0.0, z: 0.1, yaw: 0.0 };
        assert!((clearance_m(1.0, 0.0, &sphere, &h.objects["blue_sphere"]) - 0.88).abs() < 1e-9);
    }

    #[test]
    fn a_contact_is_one_violation_per_episode_and_allowed_bodies_do_not_count() {
        let mut judge = Judge::new(
            hello(),
            Invariants {
                no_contact: true,
                contact_allowed_with: vec!["cube".into()],
                ..Invariants::default()
            },
        );
        let touching = |seq: u64, t: f64, body: &str| {
            let mut s = sample(seq, t, 0.7, 0.0);
            s.contacts.push(Contact {
                robot_geom: "bumper_collision".into(),
                robot_body: "bumper_link".into(),
                world_geom: body.into(),
                world_body: body.into(),
                first_time: t - 0.01,
                last_time: t,
                max_depth_m: 0.002,
                max_force_n: 3.0,
            });
            s
        };
        assert_eq!(judge.observe(&touching(1, 1.00, "low_box_1")).len(), 1);
        assert!(judge.observe(&touching(2, 1.02, "low_box_1")).is_empty(), "the same episode");
        assert!(judge.observe(&touching(3, 1.04, "cube")).is_empty(), "allowed");
        assert!(judge.observe(&sample(4, 1.06, 0.7, 0.0)).is_empty());
        assert_eq!(
            judge.observe(&touching(5, 2.00, "low_box_1")).len(),
            1,
            "a new episode after a gap"
        );
        let v = &judge.violations[0];
        assert_eq!(v.kind, "contact");
        assert!(
            v.detail.contains("bumper_collision")
                && v.detail.contains("low_box_1")
                && v.detail.contains("2.0 mm"),
            "{v}"
        );
        assert_eq!(
            judge.figures.contacts.len(),
            2,
            "the figures count every contact, allowed or not"
        );
    }

    #[test]
    fn clearance_speed_and_geofence_are_judged_with_their_tolerances() {
        let invariants = Invariants {
            min_clearance_m: [("low_box_1".to_string(), 0.2)].into_iter().collect(),
            clearance_tol_m: 0.02,
            max_linear_mps: Some(0.22),
            geofence: Some((0.0, 0.0, 0.75)),
            geofence_tol_m: 0.02,
            ..Invariants::default()
        };
        let mut judge = Judge::new(hello(), invariants);
        assert!(judge.observe(&sample(1, 0.0, 0.0, 0.0)).is_empty());
        assert!(
            judge.observe(&sample(2, 0.02, 0.72, 0.24)).is_empty(),
            "0.18 m is within tolerance; 0.24 m/s too (0.241 allowed)"
        );
        let found = judge.observe(&sample(3, 0.04, 0.75, 0.25)).to_vec();
        let kinds: Vec<&str> = found.iter().map(|v| v.kind).collect();
        assert_eq!(kinds, ["clearance", "base_speed"], "{found:?}");
        let found = judge.observe(&sample(4, 0.06, 0.5, 0.0)).to_vec();
        assert!(found.is_empty(), "{found:?}");
        let mut far = sample(5, 0.08, 0.0, 0.0);
        far.base.y = 0.8;
        assert_eq!(judge.observe(&far)[0].kind, "geofence");
        assert!((judge.figures.max_geofence_excursion_m - 0.05).abs() < 1e-9);
        // A judge that starts outside counts from when the robot is back inside.
        let mut late = Judge::new(
            hello(),
            Invariants {
                geofence: Some((0.0, 0.0, 0.75)),
                geofence_tol_m: 0.02,
                ..Invariants::default()
            },
        );
        assert!(late.observe(&far).is_empty(), "left outside by an earlier run");
        assert!(late.observe(&sample(6, 0.1, 0.0, 0.0)).is_empty());
        far.seq = 7;
        far.sim_time = 1.0;
        assert_eq!(late.observe(&far).len(), 1, "out again");
        assert!((judge.figures.min_clearance_m["low_box_1"] - 0.15).abs() < 1e-9);
        assert!(
            !judge.figures.min_clearance_m.contains_key("blue_sphere"),
            "parked outside the room"
        );
    }

    #[test]
    fn acceleration_is_estimated_over_a_window_and_braking_has_its_own_limit() {
        let invariants = Invariants {
            max_linear_accel_mps2: Some(1.0),
            max_linear_decel_mps2: Some(3.0),
            ..Invariants::default()
        };
        let mut judge = Judge::new(hello(), invariants);
        // 1 m/s² for 0.2 s: fine. One noisy sample does not count on its own.
        let mut t = 0.0;
        let mut seq = 0;
        let mut v = 0.0;
        for i in 0..10 {
            seq += 1;
            t += 0.02;
            v += 0.02;
            let noisy = if i == 5 { v + 0.02 } else { v };
            assert!(judge.observe(&sample(seq, t, 0.0, noisy)).is_empty(), "at {t}");
        }
        // Braking at 2.5 m/s²: within the braking limit.
        for _ in 0..8 {
            seq += 1;
            t += 0.02;
            v = (v - 0.05f64).max(0.0);
            assert!(judge.observe(&sample(seq, t, 0.0, v)).is_empty(), "braking at {t}");
        }
        // Then a jump to 0.2 m/s in 20 ms: 2 m/s² over the window, over 1.4 allowed.
        seq += 1;
        t += 0.02;
        let found = judge.observe(&sample(seq, t, 0.0, 0.2)).to_vec();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].detail.contains("accelerating"), "{}", found[0]);
        assert!(
            judge.figures.max_decel_mps2 > 1.9 && judge.figures.max_decel_mps2 < 3.0,
            "{}",
            judge.figures.max_decel_mps2
        );
    }

    #[test]
    fn an_acceleration_the_command_did_not_ask_is_physics_not_a_violation() {
        let invariants =
            Invariants { max_angular_accel_radps2: Some(3.0), ..Invariants::default() };
        let mut judge = Judge::new(hello(), invariants);
        let turning = |seq: u64, w: f64, commanded: f64| {
            let mut s = sample(seq, seq as f64 * 0.02, 0.0, 0.0);
            s.base.angular_radps[2] = w;
            s.cmd_vel =
                Some(CmdVel { linear: 0.0, angular: commanded, age_s: Some(0.01), stamp_s: None });
            s
        };
        // The base lags its command (3 rad/s²), then catches up at 6 rad/s².
        for i in 0..6 {
            assert!(judge.observe(&turning(i, 0.0, 0.06 * i as f64)).is_empty());
        }
        assert!(judge.observe(&turning(6, 0.6, 0.36)).is_empty(), "a catch-up, counted");
        assert_eq!(judge.figures.physics_accel_excursions, 1);
        // A command that jumps 0.5 rad/s in 20 ms is the bridge's.
        let found = judge.observe(&turning(7, 1.2, 0.9)).to_vec();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].detail.contains("commanded"), "{}", found[0]);
    }

    #[test]
    fn commands_are_judged_on_the_wall_clock_the_bridge_limits_them_on() {
        let invariants =
            Invariants { max_angular_accel_radps2: Some(3.0), ..Invariants::default() };
        // The simulator at half real time: 20 ms of sim time a sample, 40 ms
        // of wall time; stamped commands carry sim time (the robot's clock).
        let turning =
            |seq: u64, w: f64, commanded: f64, wall_s_per_sample: Option<f64>, stamped: bool| {
                let mut s = sample(seq, seq as f64 * 0.02, 0.0, 0.0);
                s.base.angular_radps[2] = w;
                let stamp_s = stamped.then_some(s.sim_time);
                s.cmd_vel =
                    Some(CmdVel { linear: 0.0, angular: commanded, age_s: Some(0.01), stamp_s });
                s.wall_time = wall_s_per_sample.map(|per| 100.0 + seq as f64 * per);
                s
            };
        // A ramp at 3 rad/s² of wall time: 0.12 rad/s a sample, 6 rad/s² of sim time.
        let ramp = |wall_s_per_sample: Option<f64>, stamped: bool| {
            let mut judge = Judge::new(hello(), invariants.clone());
            let mut found = Vec::new();
            for i in 0..10 {
                let w = 0.12 * i as f64;
                found.extend(judge.observe(&turning(i, w, w, wall_s_per_sample, stamped)).to_vec());
            }
            found
        };
        let on_wall = ramp(Some(0.04), false);
        assert!(on_wall.is_empty(), "within the limit on the wall clock: {on_wall:?}");
        let stamped = ramp(Some(0.04), true);
        assert!(stamped.is_empty(), "stamps in sim time, stretched to the wall: {stamped:?}");
        let on_sim = ramp(None, false);
        assert!(
            on_sim.iter().any(|v| v.kind == "base_accel"),
            "without the wall clock, over the limit in sim time"
        );
        let real_time = ramp(Some(0.02), true);
        assert!(
            real_time.iter().any(|v| v.kind == "base_accel"),
            "the same ramp at real time is 6 rad/s² on every clock"
        );
    }

    #[test]
    fn stamped_commands_are_judged_as_sent_not_as_delivered() {
        let invariants =
            Invariants { max_angular_accel_radps2: Some(3.0), ..Invariants::default() };
        // A ramp at 3 rad/s² sent every 20 ms (0.06 rad/s each), delivered
        // late and then together: the simulator saw it rise 0.36 rad/s in
        // 60 ms of its samples, and the base followed.
        let sent = [0.0, 0.06, 0.12, 0.18, 0.24, 0.30, 0.36, 0.42, 0.48];
        let delivered = [0, 0, 0, 0, 6, 7, 8, 8, 8];
        let run = |stamped: bool| {
            let mut judge = Judge::new(hello(), invariants.clone());
            let mut found = Vec::new();
            for (seq, index) in delivered.iter().enumerate() {
                let mut s = sample(seq as u64, seq as f64 * 0.02, 0.0, 0.0);
                let w = sent[*index];
                s.base.angular_radps[2] = w;
                s.wall_time = Some(100.0 + seq as f64 * 0.02);
                let stamp_s = stamped.then_some(50.0 + *index as f64 * 0.02);
                s.cmd_vel = Some(CmdVel { linear: 0.0, angular: w, age_s: Some(0.01), stamp_s });
                found.extend(judge.observe(&s).to_vec());
            }
            (found, judge.figures.physics_accel_excursions)
        };
        let (found, excursions) = run(true);
        assert!(found.is_empty(), "sent at 3 rad/s²: {found:?}");
        assert!(excursions > 0, "the burst the base followed is counted");
        let (found, _) = run(false);
        assert!(
            found.iter().any(|v| v.kind == "base_accel"),
            "unstamped, the burst is the sender's as far as the judge can tell"
        );
    }

    #[test]
    fn an_arm_contact_beside_a_still_base_is_counted_not_judged_one_the_base_carries_is() {
        let invariants = Invariants {
            no_contact: true,
            arm_contact_at_rest_allowed: vec!["gripper_left_link".into()],
            ..Invariants::default()
        };
        let mut judge = Judge::new(hello(), invariants);
        let touching = |seq: u64, v: f64, body: &str| {
            let mut s = sample(seq, seq as f64 * 0.02, 0.0, v);
            s.contacts.push(Contact {
                robot_body: body.into(),
                robot_geom: "g".into(),
                world_body: "red_box".into(),
                world_geom: "w".into(),
                first_time: 0.0,
                last_time: 0.0,
                max_depth_m: 0.001,
                max_force_n: 5.0,
            });
            s
        };
        assert!(
            judge.observe(&touching(1, 0.0, "gripper_left_link")).is_empty(),
            "the arm, the base still"
        );
        assert_eq!(judge.figures.arm_contacts_at_rest, 1);
        assert_eq!(
            judge.observe(&touching(2, 0.1, "gripper_left_link")).len(),
            1,
            "the arm carried by the base"
        );
        assert_eq!(judge.observe(&touching(3, 0.0, "bumper_link")).len(), 1, "not the arm");
        // The base turned by the arm's swing, its command zero since long
        // ago: the swing's, not the governor's.
        let mut judge = Judge::new(hello(), judge.invariants.clone());
        let swung = |seq: u64, commanded: f64| {
            let mut s = touching(seq, 0.0, "gripper_left_link");
            s.base.angular_radps[2] = 0.14;
            s.cmd_vel =
                Some(CmdVel { linear: 0.0, angular: commanded, age_s: Some(0.01), stamp_s: None });
            s
        };
        assert!(judge.observe(&swung(1, 0.0)).is_empty(), "never driven");
        assert_eq!(judge.observe(&swung(100, 0.3)).len(), 1, "driven: the governor's");
        assert_eq!(judge.observe(&swung(110, 0.0)).len(), 0, "the same episode");
        assert_eq!(
            judge.observe(&swung(200, 0.0)).len(),
            0,
            "zero for 1.8 s: not driven, moved by the swing"
        );
        let mut recent = swung(300, 0.0);
        recent.contacts[0].world_body = "low_box_1".into();
        judge.observe(&swung(290, 0.2));
        assert_eq!(judge.observe(&recent).len(), 1, "zero for 0.2 s only: still braking");
    }

    #[test]
    fn an_impact_is_the_contact_not_also_a_speed_or_acceleration() {
        let invariants = Invariants {
            no_contact: true,
            max_linear_mps: Some(0.22),
            max_linear_accel_mps2: Some(1.0),
            max_linear_decel_mps2: Some(3.0),
            ..Invariants::default()
        };
        let mut judge = Judge::new(hello(), invariants);
        for i in 0..10 {
            judge.observe(&sample(i, i as f64 * 0.02, 0.0, 0.2));
        }
        let mut hit = sample(10, 0.2, 0.0, -0.3);
        hit.contacts.push(Contact {
            robot_geom: "b".into(),
            robot_body: "bumper_link".into(),
            world_geom: "w".into(),
            world_body: "low_box_1".into(),
            first_time: 0.2,
            last_time: 0.2,
            max_depth_m: 0.001,
            max_force_n: 50.0,
        });
        let kinds: Vec<&str> = judge.observe(&hit).iter().map(|v| v.kind).collect();
        assert_eq!(kinds, ["contact"]);
        assert!(judge.observe(&sample(11, 0.22, 0.0, -0.3)).is_empty(), "still the impact");
        let later: Vec<&str> =
            judge.observe(&sample(30, 0.6, 0.0, 0.3)).iter().map(|v| v.kind).collect();
        assert_eq!(later, ["base_speed"], "judged again 0.3 s after");
    }

    #[test]
    fn joint_speed_and_demand_against_the_urdf_limits_and_the_worst_is_kept() {
        let mut judge = Judge::new(
            hello(),
            Invariants {
                joint_speed_factor: Some(1.1),
                joint_demand_factor: Some(1.0),
                ..Invariants::default()
            },
        );
        let mut s = sample(1, 0.0, 0.0, 0.0);
        s.joints.get_mut("head_pan_joint").unwrap().velocity = 3.2;
        s.joints.get_mut("head_pan_joint").unwrap().demand_velocity = 3.0;
        assert!(judge.observe(&s).is_empty(), "3.2 <= 3.0 x 1.1 + 0.05");
        s.seq = 2;
        s.sim_time = 0.02;
        s.joints.get_mut("head_pan_joint").unwrap().velocity = -3.5;
        s.joints.get_mut("head_pan_joint").unwrap().demand_velocity = 15.0;
        let kinds: Vec<&str> = judge.observe(&s).iter().map(|v| v.kind).collect();
        assert_eq!(kinds, ["joint_speed", "joint_demand"]);
        let worst = judge.figures.worst_joint.clone().unwrap();
        assert_eq!((worst.joint.as_str(), worst.speed, worst.limit), ("head_pan_joint", 3.5, 3.0));
        assert_eq!(judge.figures.worst_demand.clone().unwrap().speed, 15.0);
    }

    #[test]
    fn missed_lines_are_counted_from_seq() {
        let mut judge = Judge::new(hello(), Invariants::default());
        judge.observe(&sample(10, 0.0, 0.0, 0.0));
        judge.observe(&sample(11, 0.02, 0.0, 0.0));
        judge.observe(&sample(15, 0.1, 0.0, 0.0));
        assert_eq!(judge.figures.missed, 3);
    }

    #[test]
    fn travel_is_in_the_origin_frame() {
        let s = sample(1, 0.0, 1.0, 0.0);
        let t = travel((0.0, 1.0, std::f64::consts::FRAC_PI_2), &s.base);
        // Facing +y from (0, 1): (1, 0) is 1 m to the right and 1 m behind.
        assert!((t["ahead_m"].as_f64().unwrap() + 1.0).abs() < 1e-9, "{t}");
        assert!((t["left_m"].as_f64().unwrap() + 1.0).abs() < 1e-9, "{t}");
        assert!((t["yaw_deg"].as_f64().unwrap() + 90.0).abs() < 1e-9, "{t}");
    }
}

//! The stop and slow-down rules for the mobile base, in the manner of nav2's
//! collision_monitor and twist_mux: each rule narrows the range of velocities
//! the base may be commanded, the most restrictive rule wins (the ranges are
//! intersected), and a source that has gone stale means stop.
//!
//! [`safety_envelope`] turns the current inputs into an [`Envelope`] (the
//! allowed linear and angular ranges plus the [`Restriction`]s that shaped
//! them); [`apply_envelope`] clamps a command to it; [`SafetyState`] holds
//! the one piece of memory the rules need, the bumper-contact latch.
//! Every range always contains zero: stopping is always allowed.
//!
//! Rules (each contributes one restriction while active):
//! - `odometry_stale` / `imu_stale`: the sample is missing, not finite,
//!   negative or older than `max_sensor_age_s` while the base is commanded to
//!   move: linear and angular ranges are both `[0, 0]`.
//! - `contact_latched`: the bumper latch is set: no forward motion
//!   (reverse and turning allowed).
//! - `obstacle_ahead` / `obstacle_behind`: the nearest obstacle is within
//!   `slow_down_distance_m`: the forward (reverse) maximum scales linearly
//!   from the full limit at `slow_down_distance_m` towards zero at
//!   `stop_distance_m`, but not below `min_creep_speed_mps` while the
//!   obstacle is beyond the stop distance (without that floor the robot
//!   would approach the stop distance asymptotically and never arrive);
//!   at the stop distance and nearer it is zero. A NaN distance counts as
//!   an obstacle at 0 (a blind laser zone is reported that way).
//! - `cliff` / `backup_limit` / `hazard_stop` (a Create 3 base's hazard
//!   reports, see [`super::hazards`]): a cliff stops forward motion, the
//!   base's backup limit stops reverse, a wheel drop or a hazard type not
//!   understood stops everything. A bump feeds the contact latch.
//! - `obstacle_turning`: something lies inside the circle a non-round
//!   footprint sweeps turning in place (from the laser scan): no turning
//!   (straight motion is for the obstacle rules to judge).
//! - `geofence`: the robot is at or outside the fence: only motion that does
//!   not increase the distance from the centre (forward only when the
//!   heading points inward, reverse only when it points outward; turning is
//!   always allowed). Inside it, the speed in the direction that leads
//!   outward is held to what the base's ordinary deceleration
//!   (`max_linear_accel_mps2`) stops at the fence ([`fence_approach_limit`]):
//!   without that, the reaction and the braking carried the robot several
//!   centimetres past it.
//! - `position_unknown`: a geofence is configured but there is no pose:
//!   no linear motion (turning in place cannot leave the fence).
//! - `obstacle_sensing_stale` / `contact_sensing_stale` (added by
//!   [`safety_envelope_with_sensing`]): the robot has a depth camera (a
//!   bumper) for obstacle (contact) sensing but no reading of it is within
//!   its max age while the base is commanded to move: no forward motion
//!   (reverse and turning allowed). An absent reading never means "clear":
//!   stop if in doubt. A robot without such a sensor gets no such rule.
//! - `scan_sensing_stale` (added by [`safety_envelope_with_sensing`]): the
//!   robot has a laser scanner guarding its base but no usable scan is
//!   within its max age (none received, too old, its frame not resolvable)
//!   while commanded to move: no linear motion either way, and no turning
//!   where the footprint sweeps new ground when it turns.

use std::f64::consts::PI;

use super::base::{BaseLimits, BaseVelocity};

/// A planar pose in the frame of the geofence (normally `odom`).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Pose2D {
    pub x_m: f64,
    pub y_m: f64,
    /// Heading, rad, counter-clockwise from +x.
    pub yaw_rad: f64,
}

/// A circular area the base must stay within.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Geofence {
    pub centre_x_m: f64,
    pub centre_y_m: f64,
    pub radius_m: f64,
}

/// The thresholds of the rules.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SafetyConfig {
    /// Odometry or IMU older than this while moving stops the base.
    pub max_sensor_age_s: f64,
    /// Obstacles nearer than this scale the speed towards them down...
    pub slow_down_distance_m: f64,
    /// ...to zero at this distance (and below).
    pub stop_distance_m: f64,
    /// Between the two, the speed towards the obstacle is never limited
    /// below this (m/s), so that the robot reaches the stop distance in
    /// finite time. 0 disables the floor.
    pub min_creep_speed_mps: f64,
    /// The area to stay in, if any.
    pub geofence: Option<Geofence>,
    /// How long the bumper must read clear before the contact latch may release.
    pub contact_clear_time_s: f64,
    /// Backing off this far (along the heading the robot had at its last
    /// contact, backwards) is one way to release the contact latch...
    pub contact_release_backoff_m: f64,
    /// ...turning this far away from that heading is the other.
    pub contact_release_turn_rad: f64,
    /// What a motion into a zone no fresh source observes may do, ahead...
    pub unobserved_ahead: UnobservedPolicy,
    /// ...and behind.
    pub unobserved_behind: UnobservedPolicy,
}

/// What a motion into a zone that no fresh source observes may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnobservedPolicy {
    /// Treat the first unobserved row as an obstacle: slow down before
    /// it, stop at the stop distance from it (so a zone unobserved from
    /// the footprint's edge refuses the motion, naming it).
    #[default]
    Refuse,
    /// Creep (`min_creep_speed_mps` at most) into it; remembered and seen
    /// obstacles still stop the robot at the stop distance.
    Creep,
    /// Move blind: no rule (the profile declares it; warned at start).
    Allow,
}

impl UnobservedPolicy {
    pub fn name(self) -> &'static str {
        match self {
            UnobservedPolicy::Refuse => "refuse",
            UnobservedPolicy::Creep => "creep",
            UnobservedPolicy::Allow => "allow",
        }
    }
}

impl SafetyConfig {
    /// Defaults for a TurtleBot3-class base (0.22 m/s): 0.25 s sensor age,
    /// slow down from 0.5 m, stop at 0.2 m (from `base_footprint`; the
    /// bumper is at 0.14 m), creeping at 0.04 m/s at the least (the last
    /// 5 cm in about 1.3 s; braking from it at 3 m/s^2 takes under 1 mm),
    /// contact clear for 0.5 s and 5 cm back or 0.5 rad turned. No geofence.
    pub const DEFAULT: SafetyConfig = SafetyConfig {
        max_sensor_age_s: 0.25,
        slow_down_distance_m: 0.5,
        stop_distance_m: 0.2,
        min_creep_speed_mps: 0.04,
        geofence: None,
        contact_clear_time_s: 0.5,
        contact_release_backoff_m: 0.05,
        contact_release_turn_rad: 0.5,
        unobserved_ahead: UnobservedPolicy::Refuse,
        unobserved_behind: UnobservedPolicy::Refuse,
    };

    /// Checks that every threshold is finite and in its domain; names the
    /// first one that is not.
    pub fn validate(&self) -> Result<(), String> {
        let non_negative = [
            ("max_sensor_age_s", self.max_sensor_age_s),
            ("slow_down_distance_m", self.slow_down_distance_m),
            ("stop_distance_m", self.stop_distance_m),
            ("min_creep_speed_mps", self.min_creep_speed_mps),
            ("contact_clear_time_s", self.contact_clear_time_s),
            ("contact_release_backoff_m", self.contact_release_backoff_m),
            ("contact_release_turn_rad", self.contact_release_turn_rad),
        ];
        for (name, value) in non_negative {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!("{name} = {value}: must be a finite number >= 0"));
            }
        }
        if self.slow_down_distance_m < self.stop_distance_m {
            return Err(format!(
                "slow_down_distance_m = {} is below stop_distance_m = {}",
                self.slow_down_distance_m, self.stop_distance_m
            ));
        }
        if let Some(fence) = self.geofence {
            if !(fence.centre_x_m.is_finite() && fence.centre_y_m.is_finite()) {
                return Err("geofence centre must be finite".into());
            }
            if !(fence.radius_m.is_finite() && fence.radius_m >= 0.0) {
                return Err(format!(
                    "geofence radius_m = {}: must be a finite number >= 0",
                    fence.radius_m
                ));
            }
        }
        Ok(())
    }
}

impl Default for SafetyConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What the rules look at, sampled once per control step.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct SafetyInputs {
    /// Age of the latest odometry, s; `None` if none was ever received.
    pub odometry_age_s: Option<f64>,
    /// Age of the latest IMU sample, s; `None` if none was ever received.
    pub imu_age_s: Option<f64>,
    /// Whether the base is being commanded to move: the last published
    /// command or the current request is non-zero (see [`is_commanded_to_move`]).
    pub commanded_to_move: bool,
    /// The bumper reports contact now.
    pub in_contact: bool,
    /// Distance to the nearest obstacle ahead (along +x from
    /// `base_footprint`), m; `None` if nothing is seen.
    pub obstacle_ahead_m: Option<f64>,
    /// Distance to the nearest obstacle behind (along -x, positive), m.
    pub obstacle_behind_m: Option<f64>,
    /// Distance from the origin to the nearest obstacle inside the circle
    /// the footprint sweeps turning in place, m (NaN: that zone is blind).
    pub obstacle_turning_m: Option<f64>,
    /// A cliff sensor (all in the front half) reports a drop.
    pub cliff_ahead: bool,
    /// The base reports its backup limit reached.
    pub backup_limit: bool,
    /// A hazard that stops everything (a wheel drop, an unknown type).
    pub hazard_stop: bool,
    /// The robot's pose in the geofence frame, if known.
    pub pose: Option<Pose2D>,
    /// Where the arm is for the base's outline (no arm: within).
    pub arm: ArmReach,
}

/// Where the arm is, seen from the base: the zones and the turning circle
/// are the base's outline, so an arm reaching out of it would meet what
/// they do not watch (its gripper 0.37 m ahead, swept round in a turn).
/// A mobile manipulator drives with its arm tucked in.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArmReach {
    /// No arm, or every part of it within the outline.
    #[default]
    Within,
    /// Its farthest part lies this far outside the outline, m.
    Outside { beyond_m: f64, link_at_m: (f64, f64) },
    /// Its pose is not known (joint states stale or missing).
    Unknown,
}

/// Whether the base counts as "commanded to move" for the staleness rules:
/// the last published command or the current request is non-zero (a
/// non-finite request counts as motion).
pub fn is_commanded_to_move(last_command: BaseVelocity, requested: BaseVelocity) -> bool {
    !last_command.is_zero() || !requested.is_zero()
}

/// Which rule a restriction comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    OdometryStale,
    ImuStale,
    ContactLatched,
    ObstacleAhead,
    ObstacleBehind,
    Geofence,
    PositionUnknown,
    ObstacleSensingStale,
    ContactSensingStale,
    ObstacleTurning,
    ScanSensingStale,
    Cliff,
    BackupLimit,
    HazardStop,
    UnobservedAhead,
    UnobservedBehind,
    ArmOutsideOutline,
    ArmPoseUnknown,
}

impl Rule {
    /// Whether it holds the base only because a source's data is late (a
    /// publisher's hiccup, a loaded computer, a lossy link): it ends by
    /// itself when the data comes again.
    pub fn is_late_data(self) -> bool {
        matches!(
            self,
            Rule::OdometryStale
                | Rule::ImuStale
                | Rule::ObstacleSensingStale
                | Rule::ContactSensingStale
                | Rule::ScanSensingStale
                | Rule::ArmPoseUnknown
        )
    }

    /// Whether it holds the base because a direction's zone is not observed.
    pub fn is_unobserved(self) -> bool {
        matches!(self, Rule::UnobservedAhead | Rule::UnobservedBehind)
    }

    /// The machine name, e.g. `"odometry_stale"`.
    pub fn name(self) -> &'static str {
        match self {
            Rule::OdometryStale => "odometry_stale",
            Rule::ImuStale => "imu_stale",
            Rule::ContactLatched => "contact_latched",
            Rule::ObstacleAhead => "obstacle_ahead",
            Rule::ObstacleBehind => "obstacle_behind",
            Rule::Geofence => "geofence",
            Rule::PositionUnknown => "position_unknown",
            Rule::ObstacleSensingStale => "obstacle_sensing_stale",
            Rule::ContactSensingStale => "contact_sensing_stale",
            Rule::ObstacleTurning => "obstacle_turning",
            Rule::ScanSensingStale => "scan_sensing_stale",
            Rule::Cliff => "cliff",
            Rule::BackupLimit => "backup_limit",
            Rule::HazardStop => "hazard_stop",
            Rule::UnobservedAhead => "unobserved_ahead",
            Rule::UnobservedBehind => "unobserved_behind",
            Rule::ArmOutsideOutline => "arm_outside_outline",
            Rule::ArmPoseUnknown => "arm_pose_unknown",
        }
    }
}

/// One active rule: which, why, and what it alone allows.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Restriction {
    pub rule: Rule,
    /// Why, in words an operator can act on, e.g.
    /// "odometry is 0.62 s old (max 0.25 s): stopped".
    pub reason: String,
    /// The cause as a noun phrase that completes "stopped by ...", e.g.
    /// "an obstacle 0.19 m ahead (stop distance 0.20 m)".
    pub cause: String,
    /// The obstacle rules' distance, m (NaN when the depth reading was not
    /// a number); `None` for the other rules.
    pub distance_m: Option<f64>,
    /// The linear range this rule alone allows, m/s (`min <= 0 <= max`).
    pub linear_mps: (f64, f64),
    /// The angular range this rule alone allows, rad/s.
    pub angular_radps: (f64, f64),
}

impl Restriction {
    /// The rule's machine name.
    pub fn name(&self) -> &'static str {
        self.rule.name()
    }

    /// Whether this rule alone forbids motion in the direction of
    /// `velocity` (its linear or its angular part); a zero or non-finite
    /// component asks for no direction.
    pub fn forbids_direction_of(&self, velocity: BaseVelocity) -> bool {
        forbids(velocity.linear_mps, self.linear_mps)
            || forbids(velocity.angular_radps, self.angular_radps)
    }
}

/// Whether the range `(min, max)` leaves no motion in the direction of
/// `value` (a NaN bound allows nothing, as in [`Envelope::linear_range`]).
fn forbids(value: f64, (min, max): (f64, f64)) -> bool {
    (value > 0.0 && sanitize_max(max) <= 0.0) || (value < 0.0 && sanitize_min(min) >= 0.0)
}

/// The velocities the base may be commanded now. The ranges always contain
/// zero (`min <= 0 <= max`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Envelope {
    /// Fastest reverse, m/s (<= 0).
    pub linear_min_mps: f64,
    /// Fastest forward, m/s (>= 0).
    pub linear_max_mps: f64,
    /// Fastest clockwise turn, rad/s (<= 0).
    pub angular_min_radps: f64,
    /// Fastest counter-clockwise turn, rad/s (>= 0).
    pub angular_max_radps: f64,
    /// The rules that narrowed the ranges, in rule order.
    pub restrictions: Vec<Restriction>,
}

impl Envelope {
    /// The full range of `limits`, no restriction.
    pub fn unrestricted(limits: &BaseLimits) -> Envelope {
        let linear = finite_non_negative(limits.max_linear_mps);
        let angular = finite_non_negative(limits.max_angular_radps);
        Envelope {
            linear_min_mps: -linear,
            linear_max_mps: linear,
            angular_min_radps: -angular,
            angular_max_radps: angular,
            restrictions: Vec::new(),
        }
    }

    /// Whether only a standstill is allowed.
    pub fn is_stop(&self) -> bool {
        self.linear_min_mps == 0.0
            && self.linear_max_mps == 0.0
            && self.angular_min_radps == 0.0
            && self.angular_max_radps == 0.0
    }

    /// Whether `velocity` is within the ranges.
    pub fn contains(&self, velocity: BaseVelocity) -> bool {
        velocity.linear_mps >= self.linear_min_mps
            && velocity.linear_mps <= self.linear_max_mps
            && velocity.angular_radps >= self.angular_min_radps
            && velocity.angular_radps <= self.angular_max_radps
    }

    /// Whether a rule is active.
    pub fn has(&self, rule: Rule) -> bool {
        self.restrictions.iter().any(|r| r.rule == rule)
    }

    /// The rules that hold the direction of `velocity` at zero (each one
    /// alone forbids it); empty when that direction is allowed. A velocity
    /// is blocked exactly when the envelope allows no motion its way and
    /// the limits would: see [`Envelope::forbids_direction_of`].
    pub fn blocking(&self, velocity: BaseVelocity) -> Vec<&Restriction> {
        self.restrictions.iter().filter(|r| r.forbids_direction_of(velocity)).collect()
    }

    /// Whether the envelope allows no motion in the direction of `velocity`
    /// (its linear or its angular part).
    pub fn forbids_direction_of(&self, velocity: BaseVelocity) -> bool {
        forbids(velocity.linear_mps, self.linear_range())
            || forbids(velocity.angular_radps, self.angular_range())
    }

    /// The allowed linear range, made well-formed: `min <= 0 <= max`, NaN
    /// bounds read as 0 (an envelope built by hand cannot forbid stopping or
    /// allow what it does not state).
    pub fn linear_range(&self) -> (f64, f64) {
        (sanitize_min(self.linear_min_mps), sanitize_max(self.linear_max_mps))
    }

    /// The allowed angular range, made well-formed as [`Envelope::linear_range`].
    pub fn angular_range(&self) -> (f64, f64) {
        (sanitize_min(self.angular_min_radps), sanitize_max(self.angular_max_radps))
    }

    /// Narrows the ranges (the most restrictive bound wins) and records why.
    fn restrict(&mut self, rule: Rule, why: Why, linear: (f64, f64), angular: (f64, f64)) {
        self.linear_min_mps = self.linear_min_mps.max(linear.0);
        self.linear_max_mps = self.linear_max_mps.min(linear.1);
        self.angular_min_radps = self.angular_min_radps.max(angular.0);
        self.angular_max_radps = self.angular_max_radps.min(angular.1);
        self.restrictions.push(Restriction {
            rule,
            reason: why.reason,
            cause: why.cause,
            distance_m: why.distance_m,
            linear_mps: linear,
            angular_radps: angular,
        });
    }
}

/// The words and figures of one restriction, as its rule builds them.
struct Why {
    reason: String,
    cause: String,
    distance_m: Option<f64>,
}

impl Why {
    fn new(reason: String, cause: String) -> Self {
        Why { reason, cause, distance_m: None }
    }
}

fn finite_non_negative(value: f64) -> f64 {
    if value.is_finite() && value > 0.0 {
        value
    } else {
        0.0
    }
}

fn sanitize_min(value: f64) -> f64 {
    if value.is_nan() {
        0.0
    } else {
        value.min(0.0)
    }
}

fn sanitize_max(value: f64) -> f64 {
    if value.is_nan() {
        0.0
    } else {
        value.max(0.0)
    }
}

/// A change of the contact latch, for events and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LatchChange {
    Latched,
    Released,
}

/// The memory of the safety rules: the bumper-contact latch.
///
/// The latch sets on any step with contact. It releases on the first step
/// at which all of these hold:
/// 1. the bumper reads clear now;
/// 2. it has read clear for at least `contact_clear_time_s`, i.e.
///    `now_s - last_contact_s >= contact_clear_time_s`, where
///    `last_contact_s` is the time of the last step that saw contact;
/// 3. the robot has backed off or turned since that last contact: relative
///    to the pose at the last step that saw contact (the reference), either
///    its displacement projected on the reference heading is
///    `<= -contact_release_backoff_m` (it moved backwards that far), or its
///    heading differs from the reference heading by at least
///    `contact_release_turn_rad` (wrapped to [-pi, pi]).
///
/// Without a pose the latch cannot release. If no pose was known at the
/// contact, the first pose seen afterwards becomes the reference: since
/// forward motion is forbidden while latched, that pose is no further
/// forward than the contact, so this is never more permissive.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct SafetyState {
    latched: bool,
    /// Time of the last step that saw contact.
    last_contact_s: Option<f64>,
    /// Pose at the last step that saw contact (or the first pose after it).
    reference: Option<Pose2D>,
}

impl SafetyState {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether forward motion is currently forbidden by a past contact.
    pub fn contact_latched(&self) -> bool {
        self.latched
    }

    /// Advances the latch to `now_s` (seconds on any monotonic clock) given
    /// the bumper state and pose in `inputs`; reports a change.
    pub fn update(
        &mut self,
        config: &SafetyConfig,
        inputs: &SafetyInputs,
        now_s: f64,
    ) -> Option<LatchChange> {
        let pose =
            inputs.pose.filter(|p| p.x_m.is_finite() && p.y_m.is_finite() && p.yaw_rad.is_finite());
        if inputs.in_contact {
            let change = (!self.latched).then_some(LatchChange::Latched);
            self.latched = true;
            // A non-finite clock reading must not shorten the clear time:
            // keep the previous one, or hold the latch until a finite one.
            if now_s.is_finite() {
                self.last_contact_s = Some(now_s);
            } else {
                self.last_contact_s = None;
            }
            if pose.is_some() {
                self.reference = pose;
            }
            return change;
        }
        if !self.latched {
            return None;
        }
        let pose = pose?;
        let reference = *self.reference.get_or_insert(pose);
        let Some(last_contact_s) = self.last_contact_s else {
            // Contact seen only at a non-finite time: start the clear time now.
            if now_s.is_finite() {
                self.last_contact_s = Some(now_s);
            }
            return None;
        };
        let clear_for_s = now_s - last_contact_s;
        // NaN (a non-finite clock) never releases.
        if clear_for_s.is_nan() || clear_for_s < config.contact_clear_time_s {
            return None;
        }
        let (dx, dy) = (pose.x_m - reference.x_m, pose.y_m - reference.y_m);
        let along = dx * reference.yaw_rad.cos() + dy * reference.yaw_rad.sin();
        let turned = wrap_angle(pose.yaw_rad - reference.yaw_rad).abs();
        if along <= -config.contact_release_backoff_m || turned >= config.contact_release_turn_rad {
            *self = SafetyState::default();
            return Some(LatchChange::Released);
        }
        None
    }

    /// Moves the latch's reference pose by `correction` (a point of the
    /// old odometry frame to the new) turning it by `yaw_change_rad`: after
    /// an odometry jump, so that the jump neither releases the latch nor
    /// holds it longer.
    pub fn reanchor(&mut self, correction: impl Fn(f64, f64) -> (f64, f64), yaw_change_rad: f64) {
        if let Some(reference) = self.reference.as_mut() {
            (reference.x_m, reference.y_m) = correction(reference.x_m, reference.y_m);
            reference.yaw_rad = wrap_angle(reference.yaw_rad + yaw_change_rad);
        }
    }

    /// Clears the latch unconditionally. For a trusted human operator's
    /// reset only, never for an agent.
    pub fn reset_contact_latch(&mut self) {
        *self = SafetyState::default();
    }
}

/// An angle wrapped to (-pi, pi]: the one wrap of the project (the
/// governor's latch release and the motion controller's headings). A
/// non-finite angle is returned as it is, so that NaN stays visible.
pub fn wrap_angle(angle: f64) -> f64 {
    let wrapped = (angle + PI).rem_euclid(2.0 * PI) - PI;
    if !wrapped.is_finite() {
        angle
    } else if wrapped == -PI {
        PI
    } else {
        wrapped
    }
}

/// Combines every rule into the envelope of allowed velocities: the
/// intersection of the full `limits` range with each active rule's range.
pub fn safety_envelope(
    limits: &BaseLimits,
    config: &SafetyConfig,
    state: &SafetyState,
    inputs: &SafetyInputs,
) -> Envelope {
    let mut envelope = Envelope::unrestricted(limits);
    let full_linear = envelope.linear_max_mps;
    let full_angular = envelope.angular_max_radps;
    let any_angular = (-full_angular, full_angular);

    if inputs.commanded_to_move {
        for (rule, what, age) in [
            (Rule::OdometryStale, "odometry", inputs.odometry_age_s),
            (Rule::ImuStale, "IMU", inputs.imu_age_s),
        ] {
            if let Some(reason) = staleness(what, age, config.max_sensor_age_s) {
                let cause = format!("stale {what} data (max age {:.2} s)", config.max_sensor_age_s);
                envelope.restrict(rule, Why::new(reason, cause), (0.0, 0.0), (0.0, 0.0));
            }
        }
    }

    if inputs.commanded_to_move {
        let arm = match inputs.arm {
            ArmReach::Within => None,
            ArmReach::Outside { beyond_m, link_at_m: (x, y) } => Some((
                Rule::ArmOutsideOutline,
                format!("the arm reaches {beyond_m:.2} m outside the base's outline (a part of it at {x:.2} m ahead, {y:+.2} m left): base motion stopped until it is within (interact pose stow)"),
                format!("the arm reaching {beyond_m:.2} m outside the base's outline (stow it first: interact pose stow)"),
            )),
            ArmReach::Unknown => Some((
                Rule::ArmPoseUnknown,
                "the arm's pose is not known (its joint states are stale or missing): base motion stopped".to_string(),
                "an arm whose pose is not known (its joint states are stale or missing)".to_string(),
            )),
        };
        if let Some((rule, reason, cause)) = arm {
            envelope.restrict(rule, Why::new(reason, cause), (0.0, 0.0), (0.0, 0.0));
        }
    }

    if state.contact_latched() {
        let reason = if inputs.in_contact {
            "bumper in contact: forward motion stopped (reverse and turning allowed)".to_string()
        } else {
            format!(
                "bumper contact latched: forward motion stopped until the bumper is clear for {} s and the robot has backed off {} m or turned {} rad",
                config.contact_clear_time_s, config.contact_release_backoff_m, config.contact_release_turn_rad
            )
        };
        let cause = if inputs.in_contact {
            "a bumper contact"
        } else {
            "a bumper contact (latched until clear, backed off or turned)"
        };
        envelope.restrict(
            Rule::ContactLatched,
            Why::new(reason, cause.into()),
            (-full_linear, 0.0),
            any_angular,
        );
    }

    for (rule, direction, distance) in [
        (Rule::ObstacleAhead, "ahead", inputs.obstacle_ahead_m),
        (Rule::ObstacleBehind, "behind", inputs.obstacle_behind_m),
    ] {
        let Some(distance) = distance else { continue };
        let Some(allowed) = obstacle_speed_limit(distance, full_linear, config) else { continue };
        let stop_m = config.stop_distance_m;
        let reason = if allowed == 0.0 {
            format!("obstacle {direction} at {distance:.2} m (stop at {stop_m:.2} m): stopped in that direction")
        } else {
            let creeping = if allowed <= config.min_creep_speed_mps {
                " (the creep speed, to reach the stop distance)"
            } else {
                ""
            };
            format!(
                "obstacle {direction} at {distance:.2} m (slow down from {:.2} m, stop at {stop_m:.2} m): speed {direction} limited to {allowed:.3} m/s{creeping}",
                config.slow_down_distance_m
            )
        };
        let cause = if distance.is_nan() {
            format!("an obstacle {direction} at an unknown distance (no valid reading: a depth that is not a number, or a laser zone whose beams return nothing usable; stop distance {stop_m:.2} m)")
        } else {
            // Three decimals: at the stop, "0.199" says inside where "0.20" would not.
            format!("an obstacle {distance:.3} m {direction} (stop distance {stop_m:.2} m)")
        };
        let linear = if rule == Rule::ObstacleAhead {
            (-full_linear, allowed)
        } else {
            (-allowed, full_linear)
        };
        envelope.restrict(
            rule,
            Why { reason, cause, distance_m: Some(distance) },
            linear,
            any_angular,
        );
    }

    if inputs.cliff_ahead {
        let why = Why::new("cliff sensor reports a drop ahead: forward motion stopped (reverse and turning allowed)".into(), "a cliff ahead (the base's cliff sensors)".into());
        envelope.restrict(Rule::Cliff, why, (-full_linear, 0.0), any_angular);
    }
    if inputs.backup_limit {
        let why = Why::new("the base reports its backup limit reached: reverse stopped (forward and turning allowed)".into(), "the base's backup limit".into());
        envelope.restrict(Rule::BackupLimit, why, (0.0, full_linear), any_angular);
    }
    if inputs.hazard_stop {
        let why = Why::new("the base reports a hazard that stops everything (a wheel drop, or a hazard type not understood): stopped".into(), "a hazard reported by the base (wheel drop or unknown type)".into());
        envelope.restrict(Rule::HazardStop, why, (0.0, 0.0), (0.0, 0.0));
    }

    if let Some(distance) = inputs.obstacle_turning_m {
        let (reason, cause) = if distance.is_nan() {
            (
                "the turning sweep is blind (the laser's beams there return nothing usable): turning stopped (straight motion allowed)".to_string(),
                "a blind turning sweep (no usable laser returns around the robot)".to_string(),
            )
        } else {
            (
                format!("obstacle {distance:.2} m from the centre, inside the circle the footprint sweeps turning in place: turning stopped (straight motion allowed)"),
                format!("an obstacle {distance:.3} m from the centre, inside the turning sweep"),
            )
        };
        envelope.restrict(
            Rule::ObstacleTurning,
            Why { reason, cause, distance_m: Some(distance) },
            (-full_linear, full_linear),
            (0.0, 0.0),
        );
    }

    if let Some(fence) = config.geofence {
        match inputs.pose.filter(|p| p.x_m.is_finite() && p.y_m.is_finite() && p.yaw_rad.is_finite()) {
            None => envelope.restrict(
                Rule::PositionUnknown,
                Why::new("geofence configured but the robot's position is unknown: only turning in place".into(), "an unknown position (a geofence is configured)".into()),
                (0.0, 0.0),
                any_angular,
            ),
            Some(pose) => {
                let (dx, dy) = (pose.x_m - fence.centre_x_m, pose.y_m - fence.centre_y_m);
                let distance = dx.hypot(dy);
                // A NaN distance (non-finite centre) counts as outside.
                if distance.is_nan() || distance >= fence.radius_m {
                    // Positive: the heading points away from the centre.
                    let outward = dx * pose.yaw_rad.cos() + dy * pose.yaw_rad.sin();
                    let linear = (if outward > 0.0 { -full_linear } else { 0.0 }, if outward < 0.0 { full_linear } else { 0.0 });
                    let allowed = match (outward > 0.0, outward < 0.0) {
                        (true, _) => "reverse and turning allowed",
                        (_, true) => "forward and turning allowed",
                        _ => "only turning allowed",
                    };
                    let reason = format!("{distance:.2} m from the geofence centre (radius {:.2} m): {allowed}", fence.radius_m);
                    let cause = format!("the geofence ({distance:.2} m from its centre, radius {:.2} m)", fence.radius_m);
                    envelope.restrict(Rule::Geofence, Why::new(reason, cause), linear, any_angular);
                } else if let Some(allowed) =
                    fence_approach_limit(dx, dy, pose.yaw_rad, fence.radius_m, limits.max_linear_accel_mps2)
                        .filter(|allowed| *allowed < full_linear)
                {
                    // Inside, heading for the fence: slow so that ordinary
                    // braking ends at the fence, not an emergency stop past it.
                    let gap = fence.radius_m - distance;
                    let outward_forward = dx * pose.yaw_rad.cos() + dy * pose.yaw_rad.sin() > 0.0;
                    let (linear, way) = if outward_forward {
                        ((-full_linear, allowed), "forward")
                    } else {
                        ((-allowed, full_linear), "reverse")
                    };
                    let reason = format!(
                        "{gap:.2} m inside the geofence (radius {:.2} m): {way} speed limited to {allowed:.3} m/s, to stop at the fence",
                        fence.radius_m
                    );
                    let cause = format!("the geofence ({gap:.2} m away, radius {:.2} m)", fence.radius_m);
                    envelope.restrict(Rule::Geofence, Why::new(reason, cause), linear, any_angular);
                }
            }
        }
    }
    envelope
}

/// Whether a sensor that forward motion relies on (the depth camera that
/// sees obstacles ahead, the bumper that feels them) is delivering.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum SensorHealth {
    /// The robot has no such sensor: no rule depends on it.
    #[default]
    NotConfigured,
    /// A reading is within its max age.
    Fresh,
    /// The sensor is configured but its latest reading is older than
    /// `max_age_s` (`age_s`), or none was ever received (`age_s: None`).
    Stale { age_s: Option<f64>, max_age_s: f64 },
}

/// The health of the sensors that guard forward motion.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SensingHealth {
    /// The depth camera, as obstacle sensing.
    pub depth: SensorHealth,
    /// The bumper, as contact sensing.
    pub bumper: SensorHealth,
    /// Why the depth camera's frames gave no measurement (its frame not in
    /// TF, an undecodable image), when they did not: said in the reason.
    pub depth_unmeasured: Option<String>,
    /// The laser scanner, as obstacle sensing around the base.
    pub scan: SensorHealth,
    /// Why the scans give no reading (their frame not in TF, a malformed scan).
    pub scan_unmeasured: Option<String>,
    /// Whether the footprint sweeps new ground turning in place (so a stale
    /// scanner stops turning too).
    pub scan_guards_turning: bool,
    /// The zones no fresh source observes (ahead, behind).
    pub unobserved: [Option<UnobservedZone>; 2],
}

/// A zone no fresh source observes down to the required obstacle height.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UnobservedZone {
    /// Where the first unobserved row starts, m from the origin.
    pub from_m: f64,
    /// Each source's part, in words.
    pub why: String,
    /// What would observe it (e.g. a head pose), if anything.
    pub remedy: Option<String>,
    /// Whether fresh frames watch the zone now (see
    /// [`super::coverage::ZoneView::watched`]): only then may a `creep`
    /// policy creep; unwatched, it is refused.
    pub watched: bool,
}

impl SensingHealth {
    /// No sensor configured: the rules of [`safety_envelope`] alone.
    pub const NOT_CONFIGURED: SensingHealth = SensingHealth {
        depth: SensorHealth::NotConfigured,
        bumper: SensorHealth::NotConfigured,
        depth_unmeasured: None,
        scan: SensorHealth::NotConfigured,
        scan_unmeasured: None,
        scan_guards_turning: false,
        unobserved: [None, None],
    };
}

/// [`safety_envelope`] plus the sensing rules: while the base is commanded
/// to move, a configured depth camera (bumper) without a reading within its
/// max age holds forward motion at zero (`obstacle_sensing_stale`,
/// `contact_sensing_stale`); reverse and turning stay allowed.
pub fn safety_envelope_with_sensing(
    limits: &BaseLimits,
    config: &SafetyConfig,
    state: &SafetyState,
    inputs: &SafetyInputs,
    sensing: &SensingHealth,
) -> Envelope {
    let mut envelope = safety_envelope(limits, config, state, inputs);
    if !inputs.commanded_to_move {
        return envelope;
    }
    let full_linear = finite_non_negative(limits.max_linear_mps);
    let full_angular = finite_non_negative(limits.max_angular_radps);
    let sensors = [
        (
            Rule::ObstacleSensingStale,
            "depth camera",
            "obstacle",
            sensing.depth,
            sensing.depth_unmeasured.as_deref(),
        ),
        (Rule::ContactSensingStale, "bumper", "contact", sensing.bumper, None),
    ];
    for (rule, sensor, sensing_what, health, unmeasured) in sensors {
        let SensorHealth::Stale { age_s, max_age_s } = health else { continue };
        let mut age = match age_s {
            Some(age) if age.is_finite() && age >= 0.0 => {
                format!("its last reading is {age:.2} s old (max {max_age_s:.2} s)")
            }
            Some(age) => format!("its reading's age is {age}, not a valid age"),
            None => format!("no reading received (max age {max_age_s:.2} s)"),
        };
        if let Some(why) = unmeasured {
            age = format!("{age}; its frames give no measurement: {why}");
        }
        let reason = format!("{sensor} ({sensing_what} sensing): {age}: forward motion stopped (reverse and turning allowed)");
        let cause = format!("stale {sensing_what} sensing (the {sensor}: {age})");
        envelope.restrict(
            rule,
            Why::new(reason, cause),
            (-full_linear, 0.0),
            (-full_angular, full_angular),
        );
    }
    for (index, (rule, direction, policy)) in [
        (Rule::UnobservedAhead, "ahead", config.unobserved_ahead),
        (Rule::UnobservedBehind, "behind", config.unobserved_behind),
    ]
    .into_iter()
    .enumerate()
    {
        let Some(zone) = &sensing.unobserved[index] else { continue };
        let allowed = match policy {
            UnobservedPolicy::Allow => continue,
            UnobservedPolicy::Refuse => obstacle_speed_limit(zone.from_m, full_linear, config),
            // Nobody watching the way: no creeping into it either.
            UnobservedPolicy::Creep if !zone.watched => {
                obstacle_speed_limit(zone.from_m, full_linear, config)
            }
            UnobservedPolicy::Creep => Some(if config.min_creep_speed_mps.is_finite() {
                config.min_creep_speed_mps.clamp(0.0, full_linear)
            } else {
                0.0
            }),
        };
        let Some(allowed) = allowed else { continue };
        let remedy = zone.remedy.as_deref().map(|r| format!("; {r}")).unwrap_or_default();
        let effect = if allowed == 0.0 {
            format!("motion {direction} stopped")
        } else {
            format!("speed {direction} limited to {allowed:.3} m/s")
        };
        let reason = format!(
            "the way {direction} is not observed from {:.2} m ({}){remedy}: {effect}",
            zone.from_m, zone.why
        );
        let cause = format!(
            "the way {direction} unobserved from {:.2} m ({}){remedy}",
            zone.from_m, zone.why
        );
        let linear = if rule == Rule::UnobservedAhead {
            (-full_linear, allowed)
        } else {
            (-allowed, full_linear)
        };
        envelope.restrict(
            rule,
            Why { reason, cause, distance_m: Some(zone.from_m) },
            linear,
            (-full_angular, full_angular),
        );
    }
    if let SensorHealth::Stale { age_s, max_age_s } = sensing.scan {
        let mut age = match age_s {
            Some(age) if age.is_finite() && age >= 0.0 => {
                format!("its last usable scan is {age:.2} s old (max {max_age_s:.2} s)")
            }
            Some(age) => format!("its scan's age is {age}, not a valid age"),
            None => format!("no usable scan received (max age {max_age_s:.2} s)"),
        };
        if let Some(why) = sensing.scan_unmeasured.as_deref() {
            age = format!("{age}; its scans give no reading: {why}");
        }
        let (angular, allowed) = if sensing.scan_guards_turning {
            ((0.0, 0.0), "stopped")
        } else {
            ((-full_angular, full_angular), "linear motion stopped (turning in place allowed)")
        };
        let reason = format!("laser scanner (obstacle sensing around the base): {age}: {allowed}");
        let cause = format!("stale obstacle sensing (the laser scanner: {age})");
        envelope.restrict(Rule::ScanSensingStale, Why::new(reason, cause), (0.0, 0.0), angular);
    }
    envelope
}

/// The reason a sensor is stale, if it is.
fn staleness(what: &str, age_s: Option<f64>, max_age_s: f64) -> Option<String> {
    match age_s {
        None => Some(format!("no {what} received: stopped")),
        Some(age) if age.is_finite() && age >= 0.0 && age <= max_age_s => None,
        Some(age) if age.is_finite() && age >= 0.0 => {
            Some(format!("{what} is {age:.2} s old (max {max_age_s:.2} s): stopped"))
        }
        Some(age) => Some(format!("{what} age is {age}, not a valid age: stopped")),
    }
}

/// The fastest speed allowed towards an obstacle at `distance` when the
/// base's limit is `full_mps`, or `None` if it is beyond the slow-down
/// distance: the linear ramp from `full_mps` at the slow-down distance to 0
/// at the stop distance, raised to the creep speed (never above
/// `full_mps`) while beyond the stop distance; 0 at the stop distance and
/// nearer. NaN counts as 0 m.
pub fn obstacle_speed_limit(distance: f64, full_mps: f64, config: &SafetyConfig) -> Option<f64> {
    let distance = if distance.is_nan() { 0.0 } else { distance };
    if distance >= config.slow_down_distance_m {
        return None;
    }
    if distance <= config.stop_distance_m {
        return Some(0.0);
    }
    let span = config.slow_down_distance_m - config.stop_distance_m;
    let ramp = full_mps * ((distance - config.stop_distance_m) / span).clamp(0.0, 1.0);
    let creep = if config.min_creep_speed_mps.is_finite() {
        config.min_creep_speed_mps.clamp(0.0, full_mps)
    } else {
        0.0
    };
    Some(ramp.max(creep))
}

/// Inside the geofence, the fastest the base may drive in the direction of
/// travel that leads outward (forward if the heading points away from the
/// centre, else reverse) and still stop at the fence braking at
/// `decel_mps2`: its radial part at most sqrt(2 decel gap). `dx`, `dy`: the
/// robot's offset from the centre. `None` when that direction does not lead
/// outward, or the deceleration is not a positive number (no fence then but
/// the rule at the fence).
pub fn fence_approach_limit(
    dx: f64,
    dy: f64,
    yaw_rad: f64,
    radius_m: f64,
    decel_mps2: f64,
) -> Option<f64> {
    let distance = dx.hypot(dy);
    if !(decel_mps2.is_finite() && decel_mps2 > 0.0 && distance < radius_m) {
        return None;
    }
    if distance == 0.0 {
        return None; // at the centre the fence is a whole radius away, any way
    }
    // The cosine between the heading and the outward radius.
    let outward = ((dx * yaw_rad.cos() + dy * yaw_rad.sin()) / distance).abs();
    if outward < 1e-9 {
        return None;
    }
    Some((2.0 * decel_mps2 * (radius_m - distance)).sqrt() / outward)
}

/// Clamps `requested` into the envelope: the command, and whether it was
/// changed. A non-finite component becomes 0.
pub fn apply_envelope(envelope: &Envelope, requested: BaseVelocity) -> (BaseVelocity, bool) {
    let (linear_min, linear_max) = envelope.linear_range();
    let (angular_min, angular_max) = envelope.angular_range();
    let clamp = |value: f64, min: f64, max: f64| {
        if value.is_finite() {
            value.clamp(min, max)
        } else {
            0.0
        }
    };
    let applied = BaseVelocity {
        linear_mps: clamp(requested.linear_mps, linear_min, linear_max),
        angular_radps: clamp(requested.angular_radps, angular_min, angular_max),
    };
    // Compare bitwise-equivalent values so that NaN counts as changed.
    let clamped = !(applied.linear_mps == requested.linear_mps
        && applied.angular_radps == requested.angular_radps);
    (applied, clamped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: BaseLimits = BaseLimits {
        max_linear_mps: 0.22,
        max_angular_radps: 1.5,
        max_linear_accel_mps2: 1.0,
        max_angular_accel_radps2: 3.0,
    };

    fn fresh() -> SafetyInputs {
        SafetyInputs {
            odometry_age_s: Some(0.02),
            imu_age_s: Some(0.01),
            commanded_to_move: true,
            ..SafetyInputs::default()
        }
    }

    fn envelope(inputs: &SafetyInputs) -> Envelope {
        safety_envelope(&LIMITS, &SafetyConfig::DEFAULT, &SafetyState::new(), inputs)
    }

    #[test]
    fn angles_wrap_into_the_half_open_interval() {
        assert!((wrap_angle(3.0 * PI / 2.0) + PI / 2.0).abs() < 1e-12);
        assert_eq!(wrap_angle(-PI), PI);
        assert_eq!(wrap_angle(PI), PI);
        assert!((wrap_angle(0.1) - 0.1).abs() < 1e-12);
        assert!((wrap_angle(-7.0 * PI) - PI).abs() < 1e-9);
        assert!(wrap_angle(f64::NAN).is_nan(), "NaN stays visible");
        assert_eq!(wrap_angle(f64::INFINITY), f64::INFINITY);
    }

    #[test]
    fn fresh_sensors_and_a_clear_path_restrict_nothing() {
        let e = envelope(&fresh());
        assert_eq!(e, Envelope::unrestricted(&LIMITS));
        assert!(e.restrictions.is_empty());
        assert_eq!(
            (e.linear_min_mps, e.linear_max_mps, e.angular_min_radps, e.angular_max_radps),
            (-0.22, 0.22, -1.5, 1.5)
        );
    }

    #[test]
    fn stale_odometry_while_moving_stops_everything() {
        let e = envelope(&SafetyInputs { odometry_age_s: Some(0.62), ..fresh() });
        assert!(e.is_stop());
        assert_eq!(e.restrictions.len(), 1);
        assert_eq!(e.restrictions[0].name(), "odometry_stale");
        assert_eq!(e.restrictions[0].reason, "odometry is 0.62 s old (max 0.25 s): stopped");
        let e = envelope(&SafetyInputs { imu_age_s: None, ..fresh() });
        assert!(e.is_stop() && e.has(Rule::ImuStale));
        assert_eq!(e.restrictions[0].reason, "no IMU received: stopped");
        for age in [f64::NAN, f64::INFINITY, -0.1] {
            assert!(
                envelope(&SafetyInputs { odometry_age_s: Some(age), ..fresh() }).is_stop(),
                "{age}"
            );
        }
        // At the threshold is still fresh.
        assert!(!envelope(&SafetyInputs { odometry_age_s: Some(0.25), ..fresh() })
            .has(Rule::OdometryStale));
    }

    #[test]
    fn stale_sensors_do_not_raise_restrictions_while_parked() {
        let e = envelope(&SafetyInputs {
            odometry_age_s: None,
            imu_age_s: Some(9.0),
            commanded_to_move: false,
            ..fresh()
        });
        assert!(e.restrictions.is_empty(), "{e:?}");
        // ...but the moment motion is requested, it is a stop.
        assert!(is_commanded_to_move(
            BaseVelocity::ZERO,
            BaseVelocity { linear_mps: 0.1, angular_radps: 0.0 }
        ));
        assert!(is_commanded_to_move(
            BaseVelocity { linear_mps: 0.0, angular_radps: 0.1 },
            BaseVelocity::ZERO
        ));
        assert!(is_commanded_to_move(
            BaseVelocity::ZERO,
            BaseVelocity { linear_mps: f64::NAN, angular_radps: 0.0 }
        ));
        assert!(!is_commanded_to_move(BaseVelocity::ZERO, BaseVelocity::ZERO));
    }

    #[test]
    fn obstacles_scale_the_speed_towards_them_linearly() {
        let ahead = |d: f64| envelope(&SafetyInputs { obstacle_ahead_m: Some(d), ..fresh() });
        assert!(ahead(0.5).restrictions.is_empty(), "at the slow-down distance: full speed");
        let e = ahead(0.35);
        assert!((e.linear_max_mps - 0.11).abs() < 1e-12, "half way: half speed, {e:?}");
        assert_eq!(
            (e.linear_min_mps, e.angular_min_radps, e.angular_max_radps),
            (-0.22, -1.5, 1.5),
            "reverse and turning unaffected"
        );
        assert_eq!(e.restrictions[0].name(), "obstacle_ahead");
        assert!(e.restrictions[0].reason.contains("0.35 m"), "{}", e.restrictions[0].reason);
        assert_eq!(ahead(0.2).linear_max_mps, 0.0);
        assert_eq!(ahead(0.05).linear_max_mps, 0.0);
        assert_eq!(ahead(f64::NAN).linear_max_mps, 0.0, "a NaN distance is an obstacle");
        assert!(ahead(f64::INFINITY).restrictions.is_empty());
        let e = envelope(&SafetyInputs { obstacle_behind_m: Some(0.35), ..fresh() });
        assert!((e.linear_min_mps + 0.11).abs() < 1e-12 && e.linear_max_mps == 0.22, "{e:?}");
    }

    #[test]
    fn near_the_stop_distance_the_robot_may_still_creep_up_to_it() {
        let ahead = |d: f64| envelope(&SafetyInputs { obstacle_ahead_m: Some(d), ..fresh() });
        // The ramp alone would allow 0.22 * 0.01 / 0.3 = 0.0073 m/s at 0.21 m: the floor raises it.
        let e = ahead(0.21);
        assert_eq!(e.linear_max_mps, 0.04, "{e:?}");
        assert!(
            e.restrictions[0].reason.contains("0.040 m/s (the creep speed"),
            "{}",
            e.restrictions[0].reason
        );
        assert_eq!(ahead(0.2 + 1e-9).linear_max_mps, 0.04, "just beyond the stop distance");
        assert_eq!(ahead(0.2).linear_max_mps, 0.0, "at the stop distance: stopped");
        // Where the ramp is above the floor, the ramp applies: 0.04 m/s is reached at 0.2545 m.
        assert!((ahead(0.3).linear_max_mps - 0.22 / 3.0).abs() < 1e-12);
        let e = envelope(&SafetyInputs { obstacle_behind_m: Some(0.21), ..fresh() });
        assert_eq!((e.linear_min_mps, e.linear_max_mps), (-0.04, 0.22), "the same behind");
        // No floor configured: the old linear ramp.
        let no_floor = SafetyConfig { min_creep_speed_mps: 0.0, ..SafetyConfig::DEFAULT };
        let e = safety_envelope(
            &LIMITS,
            &no_floor,
            &SafetyState::new(),
            &SafetyInputs { obstacle_ahead_m: Some(0.21), ..fresh() },
        );
        assert!((e.linear_max_mps - 0.22 / 30.0).abs() < 1e-12, "{e:?}");
        // A floor above the base's limit is capped at the limit.
        assert_eq!(
            obstacle_speed_limit(
                0.21,
                0.22,
                &SafetyConfig { min_creep_speed_mps: 5.0, ..SafetyConfig::DEFAULT }
            ),
            Some(0.22)
        );
        assert_eq!(obstacle_speed_limit(0.21, 0.22, &SafetyConfig::DEFAULT), Some(0.04));
        assert_eq!(obstacle_speed_limit(0.6, 0.22, &SafetyConfig::DEFAULT), None);
    }

    #[test]
    fn the_rules_that_hold_a_direction_at_zero_are_named_with_their_cause() {
        let e = envelope(&SafetyInputs { obstacle_ahead_m: Some(0.19), ..fresh() });
        let forward = BaseVelocity { linear_mps: 0.1, angular_radps: 0.0 };
        let blocking = e.blocking(forward);
        assert_eq!(blocking.len(), 1);
        assert_eq!(blocking[0].rule, Rule::ObstacleAhead);
        assert_eq!(blocking[0].cause, "an obstacle 0.190 m ahead (stop distance 0.20 m)");
        assert_eq!(blocking[0].distance_m, Some(0.19));
        assert!(e.forbids_direction_of(forward));
        for free in [
            BaseVelocity { linear_mps: -0.1, angular_radps: 0.0 },
            BaseVelocity { linear_mps: 0.0, angular_radps: 0.5 },
            BaseVelocity::ZERO,
        ] {
            assert!(e.blocking(free).is_empty() && !e.forbids_direction_of(free), "{free:?}");
        }
        // Slowed down is not blocked.
        assert!(envelope(&SafetyInputs { obstacle_ahead_m: Some(0.21), ..fresh() })
            .blocking(forward)
            .is_empty());
        let e = envelope(&SafetyInputs { obstacle_ahead_m: Some(f64::NAN), ..fresh() });
        assert!(e.blocking(forward)[0].cause.contains("unknown distance"), "{:?}", e.restrictions);
        // Only the rules that forbid the direction are named: the obstacle ahead, not the slow-down behind.
        let mut state = SafetyState::new();
        let inputs = SafetyInputs {
            in_contact: true,
            obstacle_ahead_m: Some(0.1),
            obstacle_behind_m: Some(0.3),
            ..fresh()
        };
        state.update(&SafetyConfig::DEFAULT, &inputs, 0.0);
        let e = safety_envelope(&LIMITS, &SafetyConfig::DEFAULT, &state, &inputs);
        let names: Vec<_> = e.blocking(forward).iter().map(|r| r.name()).collect();
        assert_eq!(names, ["contact_latched", "obstacle_ahead"]);
        assert_eq!(e.blocking(forward)[0].cause, "a bumper contact");
        // Stale sensors hold turning too.
        let e = envelope(&SafetyInputs { imu_age_s: Some(1.0), ..fresh() });
        assert_eq!(
            e.blocking(BaseVelocity { linear_mps: 0.0, angular_radps: -0.5 })[0].rule,
            Rule::ImuStale
        );
    }

    #[test]
    fn the_most_restrictive_rule_wins_and_all_are_reported() {
        let mut state = SafetyState::new();
        let inputs = SafetyInputs {
            in_contact: true,
            obstacle_ahead_m: Some(0.4),
            obstacle_behind_m: Some(0.3),
            ..fresh()
        };
        assert_eq!(state.update(&SafetyConfig::DEFAULT, &inputs, 0.0), Some(LatchChange::Latched));
        let e = safety_envelope(&LIMITS, &SafetyConfig::DEFAULT, &state, &inputs);
        assert_eq!(e.linear_max_mps, 0.0, "contact beats the slow-down");
        assert!(
            (e.linear_min_mps + 0.22 / 3.0).abs() < 1e-12,
            "the obstacle behind limits reverse: {e:?}"
        );
        let names: Vec<_> = e.restrictions.iter().map(|r| r.name()).collect();
        assert_eq!(names, ["contact_latched", "obstacle_ahead", "obstacle_behind"]);
        let e = safety_envelope(
            &LIMITS,
            &SafetyConfig::DEFAULT,
            &state,
            &SafetyInputs { odometry_age_s: None, ..inputs },
        );
        assert!(e.is_stop() && e.restrictions.len() == 4);
    }

    fn fenced() -> SafetyConfig {
        SafetyConfig {
            geofence: Some(Geofence { centre_x_m: 1.0, centre_y_m: 2.0, radius_m: 3.0 }),
            ..SafetyConfig::DEFAULT
        }
    }

    /// The envelope inside `fenced()` at a pose, with fresh sensors.
    fn at(x_m: f64, y_m: f64, yaw_rad: f64) -> Envelope {
        safety_envelope(
            &LIMITS,
            &fenced(),
            &SafetyState::new(),
            &SafetyInputs { pose: Some(Pose2D { x_m, y_m, yaw_rad }), ..fresh() },
        )
    }

    #[test]
    fn outside_the_geofence_only_motion_towards_the_centre_is_allowed() {
        assert!(at(1.0, 2.0, 0.0).restrictions.is_empty());
        assert!(at(3.9, 2.0, 0.0).restrictions.is_empty(), "inside");
        // On the fence (x = 4), facing outwards: reverse only.
        let e = at(4.0, 2.0, 0.0);
        assert_eq!(
            (e.linear_min_mps, e.linear_max_mps, e.angular_min_radps, e.angular_max_radps),
            (-0.22, 0.0, -1.5, 1.5)
        );
        assert_eq!(e.restrictions[0].name(), "geofence");
        // Outside, facing the centre: forward only.
        let e = at(5.0, 2.0, PI);
        assert_eq!((e.linear_min_mps, e.linear_max_mps), (0.0, 0.22));
        // Outside, facing along the fence: only turning.
        let e = at(1.0, 5.5, 0.0);
        assert_eq!((e.linear_min_mps, e.linear_max_mps, e.angular_max_radps), (0.0, 0.0, 1.5));
        // No pose: no linear motion.
        let e = safety_envelope(&LIMITS, &fenced(), &SafetyState::new(), &fresh());
        assert!(
            e.has(Rule::PositionUnknown)
                && e.linear_max_mps == 0.0
                && e.linear_min_mps == 0.0
                && e.angular_max_radps == 1.5
        );
    }

    #[test]
    fn inside_the_geofence_the_way_out_slows_so_that_braking_ends_at_the_fence() {
        // 8 mm inside (x = 4 is the fence), facing out: sqrt(2 x 1 x 0.008) = 0.126 m/s.
        let e = at(3.992, 2.0, 0.0);
        assert!((e.linear_max_mps - 0.126_491).abs() < 1e-5, "{e:?}");
        assert_eq!((e.linear_min_mps, e.angular_max_radps), (-0.22, 1.5));
        assert!(e.restrictions[0].reason.contains("forward speed limited to 0.126"), "{e:?}");
        // Backing out: the reverse is limited instead.
        let e = at(3.992, 2.0, PI);
        assert!((e.linear_min_mps + 0.126_491).abs() < 1e-5 && e.linear_max_mps == 0.22, "{e:?}");
        // At 60 degrees to the radius the radial part is half: twice the speed, within the limit.
        let e = at(3.992, 2.0, PI / 3.0);
        assert!(e.restrictions.is_empty(), "{e:?}");
        // Along the fence: nothing leads out.
        assert!(at(3.992, 2.0, PI / 2.0).restrictions.is_empty());
        assert_eq!(fence_approach_limit(0.0, 0.0, 0.0, 3.0, 1.0), None, "at the centre");
        assert_eq!(fence_approach_limit(1.0, 0.0, 0.0, 3.0, 0.0), None, "no deceleration");
        assert_eq!(
            fence_approach_limit(3.0, 0.0, 0.0, 3.0, 1.0),
            None,
            "on the fence: the rule there"
        );
    }

    fn pose(x_m: f64, yaw_rad: f64) -> Option<Pose2D> {
        Some(Pose2D { x_m, y_m: 0.0, yaw_rad })
    }

    #[test]
    fn the_contact_latch_needs_clear_time_and_backing_off_or_turning() {
        let config = SafetyConfig::DEFAULT;
        let mut s = SafetyState::new();
        let step = |s: &mut SafetyState, in_contact: bool, pose: Option<Pose2D>, now_s: f64| {
            s.update(&config, &SafetyInputs { in_contact, pose, ..fresh() }, now_s)
        };
        assert_eq!(step(&mut s, false, pose(0.0, 0.0), 0.0), None);
        assert_eq!(step(&mut s, true, pose(1.0, 0.0), 1.0), Some(LatchChange::Latched));
        assert_eq!(
            step(&mut s, true, pose(1.01, 0.0), 1.1),
            None,
            "still latched, reference moves with the contact"
        );
        assert!(s.contact_latched());
        // Backed off 10 cm at once, but not yet clear for 0.5 s.
        assert_eq!(step(&mut s, false, pose(0.91, 0.0), 1.2), None);
        assert_eq!(step(&mut s, false, pose(0.91, 0.0), 1.59), None);
        assert_eq!(
            step(&mut s, false, pose(0.91, 0.0), 1.6),
            Some(LatchChange::Released),
            "clear for 0.5 s and 10 cm back"
        );
        assert!(!s.contact_latched());

        // Clear for long, but not backed off: stays latched.
        let mut s = SafetyState::new();
        step(&mut s, true, pose(1.0, 0.0), 0.0);
        assert_eq!(step(&mut s, false, pose(0.97, 0.0), 5.0), None, "3 cm back is not enough");
        assert_eq!(step(&mut s, false, None, 6.0), None, "no pose, no release");
        // Turning 0.5 rad releases.
        assert_eq!(step(&mut s, false, pose(0.97, -0.5), 6.1), Some(LatchChange::Released));

        // Contact again during the clear time restarts it.
        let mut s = SafetyState::new();
        step(&mut s, true, pose(1.0, 0.0), 0.0);
        step(&mut s, true, pose(1.0, 0.0), 0.4);
        assert_eq!(step(&mut s, false, pose(0.9, 0.0), 0.8), None, "clear for only 0.4 s");
        assert_eq!(step(&mut s, false, pose(0.9, 0.0), 0.9), Some(LatchChange::Released));

        // Backing off is measured along the heading at contact (here +y).
        let mut s = SafetyState::new();
        let p = |x_m: f64, y_m: f64| Some(Pose2D { x_m, y_m, yaw_rad: PI / 2.0 });
        step(&mut s, true, p(0.0, 0.0), 0.0);
        assert_eq!(step(&mut s, false, p(-0.2, 0.0), 1.0), None, "sideways is not backing off");
        assert_eq!(step(&mut s, false, p(-0.2, -0.06), 1.1), Some(LatchChange::Released));

        // Heading wraps: from 3.1 rad to -3.1 rad is a 0.08 rad turn.
        let mut s = SafetyState::new();
        step(&mut s, true, pose(0.0, 3.1), 0.0);
        assert_eq!(step(&mut s, false, pose(0.0, -3.1), 1.0), None);
    }

    #[test]
    fn the_latch_is_conservative_without_a_pose_at_contact() {
        let config = SafetyConfig::DEFAULT;
        let mut s = SafetyState::new();
        s.update(&config, &SafetyInputs { in_contact: true, pose: None, ..fresh() }, 0.0);
        // First pose after contact becomes the reference; must back off from there.
        assert_eq!(s.update(&config, &SafetyInputs { pose: pose(2.0, 0.0), ..fresh() }, 1.0), None);
        assert_eq!(
            s.update(&config, &SafetyInputs { pose: pose(1.96, 0.0), ..fresh() }, 1.1),
            None
        );
        assert_eq!(
            s.update(&config, &SafetyInputs { pose: pose(1.95, 0.0), ..fresh() }, 1.2),
            Some(LatchChange::Released)
        );
        // A non-finite clock never releases.
        let mut s = SafetyState::new();
        s.update(&config, &SafetyInputs { in_contact: true, pose: pose(0.0, 0.0), ..fresh() }, 0.0);
        assert_eq!(
            s.update(&config, &SafetyInputs { pose: pose(-1.0, 0.0), ..fresh() }, f64::NAN),
            None
        );
        assert!(s.contact_latched());
    }

    #[test]
    fn apply_envelope_clamps_each_component() {
        let mut state = SafetyState::new();
        let inputs = SafetyInputs { in_contact: true, ..fresh() };
        state.update(&SafetyConfig::DEFAULT, &inputs, 0.0);
        let e = safety_envelope(&LIMITS, &SafetyConfig::DEFAULT, &state, &inputs);
        assert_eq!(
            apply_envelope(&e, BaseVelocity { linear_mps: 0.1, angular_radps: 0.5 }),
            (BaseVelocity { linear_mps: 0.0, angular_radps: 0.5 }, true)
        );
        assert_eq!(
            apply_envelope(&e, BaseVelocity { linear_mps: -0.1, angular_radps: -0.5 }),
            (BaseVelocity { linear_mps: -0.1, angular_radps: -0.5 }, false)
        );
        assert_eq!(
            apply_envelope(&e, BaseVelocity { linear_mps: -1.0, angular_radps: 9.0 }),
            (BaseVelocity { linear_mps: -0.22, angular_radps: 1.5 }, true)
        );
        assert_eq!(
            apply_envelope(&e, BaseVelocity { linear_mps: f64::NAN, angular_radps: 0.0 }),
            (BaseVelocity::ZERO, true)
        );
        // A malformed, hand-built envelope still allows stopping and nothing it does not state.
        let odd = Envelope {
            linear_min_mps: 0.1,
            linear_max_mps: f64::NAN,
            angular_min_radps: f64::NAN,
            angular_max_radps: -1.0,
            restrictions: vec![],
        };
        assert_eq!(
            apply_envelope(&odd, BaseVelocity { linear_mps: 0.2, angular_radps: -0.3 }).0,
            BaseVelocity::ZERO
        );
    }

    #[test]
    fn the_default_config_is_valid_and_bad_ones_are_named() {
        assert_eq!(SafetyConfig::DEFAULT.validate(), Ok(()));
        assert!(SafetyConfig { stop_distance_m: 0.6, ..SafetyConfig::DEFAULT }
            .validate()
            .unwrap_err()
            .contains("slow_down_distance_m"));
        assert!(SafetyConfig { max_sensor_age_s: f64::NAN, ..SafetyConfig::DEFAULT }
            .validate()
            .unwrap_err()
            .contains("max_sensor_age_s"));
        for creep in [-0.01, f64::NAN, f64::INFINITY] {
            assert!(
                SafetyConfig { min_creep_speed_mps: creep, ..SafetyConfig::DEFAULT }
                    .validate()
                    .unwrap_err()
                    .contains("min_creep_speed_mps"),
                "{creep}"
            );
        }
        assert_eq!(
            SafetyConfig { min_creep_speed_mps: 0.0, ..SafetyConfig::DEFAULT }.validate(),
            Ok(()),
            "0: no floor"
        );
        assert!(fenced().validate().is_ok());
        let bad_fence = SafetyConfig {
            geofence: Some(Geofence { centre_x_m: 0.0, centre_y_m: 0.0, radius_m: -1.0 }),
            ..SafetyConfig::DEFAULT
        };
        assert!(bad_fence.validate().unwrap_err().contains("radius"));
    }

    const STALE_DEPTH: SensingHealth = SensingHealth {
        depth: SensorHealth::Stale { age_s: Some(0.62), max_age_s: 0.5 },
        bumper: SensorHealth::Fresh,
        ..SensingHealth::NOT_CONFIGURED
    };

    fn with_sensing(inputs: &SafetyInputs, sensing: &SensingHealth) -> Envelope {
        safety_envelope_with_sensing(
            &LIMITS,
            &SafetyConfig::DEFAULT,
            &SafetyState::new(),
            inputs,
            sensing,
        )
    }

    #[test]
    fn stale_obstacle_sensing_holds_forward_but_allows_turning_and_reverse() {
        let e = with_sensing(&fresh(), &STALE_DEPTH);
        assert_eq!(
            (e.linear_min_mps, e.linear_max_mps, e.angular_min_radps, e.angular_max_radps),
            (-0.22, 0.0, -1.5, 1.5)
        );
        assert_eq!(
            e.restrictions.iter().map(|r| r.name()).collect::<Vec<_>>(),
            ["obstacle_sensing_stale"]
        );
        let r = &e.restrictions[0];
        assert!(
            r.reason.contains("depth camera")
                && r.reason.contains("0.62 s old")
                && r.reason.contains("max 0.50 s"),
            "{}",
            r.reason
        );
        assert_eq!(r.cause, "stale obstacle sensing (the depth camera: its last reading is 0.62 s old (max 0.50 s))");
        assert!(e.forbids_direction_of(BaseVelocity { linear_mps: 0.1, angular_radps: 0.0 }));
        assert!(!e.forbids_direction_of(BaseVelocity { linear_mps: -0.1, angular_radps: 0.5 }));
        // Never received: named as such.
        let never = SensingHealth {
            depth: SensorHealth::Stale { age_s: None, max_age_s: 1.0 },
            ..SensingHealth::NOT_CONFIGURED
        };
        let e = with_sensing(&fresh(), &never);
        assert!(e.restrictions[0].reason.contains("no reading received"), "{:?}", e.restrictions);
        // A stale bumper: its own rule.
        let bumper = SensingHealth {
            bumper: SensorHealth::Stale { age_s: Some(2.0), max_age_s: 0.5 },
            depth: SensorHealth::Fresh,
            ..SensingHealth::NOT_CONFIGURED
        };
        let e = with_sensing(&fresh(), &bumper);
        assert_eq!(
            e.restrictions.iter().map(|r| r.name()).collect::<Vec<_>>(),
            ["contact_sensing_stale"]
        );
        assert!(
            e.restrictions[0]
                .reason
                .starts_with("bumper (contact sensing): its last reading is 2.00 s old"),
            "{}",
            e.restrictions[0].reason
        );
        assert_eq!(e.linear_max_mps, 0.0);
        // At rest nothing is reported (as for stale odometry); motion is refused once asked for.
        assert!(with_sensing(&SafetyInputs { commanded_to_move: false, ..fresh() }, &STALE_DEPTH)
            .restrictions
            .is_empty());
        // Frames arrive but give no measurement: the reason says why.
        let unresolved = SensingHealth {
            depth_unmeasured: Some("frame 'oakd_optical' is not in the TF tree".into()),
            ..STALE_DEPTH
        };
        let e = with_sensing(&fresh(), &unresolved);
        assert!(
            e.restrictions[0].cause.contains(
                "its frames give no measurement: frame 'oakd_optical' is not in the TF tree"
            ),
            "{}",
            e.restrictions[0].cause
        );
    }

    #[test]
    fn fresh_or_unconfigured_sensing_adds_no_rule() {
        let fresh_sensing = SensingHealth {
            depth: SensorHealth::Fresh,
            bumper: SensorHealth::Fresh,
            ..SensingHealth::NOT_CONFIGURED
        };
        for sensing in [fresh_sensing, SensingHealth::NOT_CONFIGURED] {
            let e = with_sensing(&fresh(), &sensing);
            assert_eq!(e, Envelope::unrestricted(&LIMITS), "{sensing:?}");
            let (applied, clamped) =
                apply_envelope(&e, BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 });
            assert_eq!(
                (applied.linear_mps, clamped),
                (0.2, false),
                "a forward command goes through: {sensing:?}"
            );
        }
    }

    fn sensor_health() -> impl Strategy<Value = SensorHealth> {
        prop_oneof![
            Just(SensorHealth::NotConfigured),
            Just(SensorHealth::Fresh),
            (
                proptest::option::of(prop_oneof![0.0..5.0f64, Just(f64::NAN), Just(-1.0)]),
                0.01..2.0f64
            )
                .prop_map(|(age_s, max_age_s)| SensorHealth::Stale { age_s, max_age_s }),
        ]
    }

    fn option_age() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![
            Just(None),
            (0.0..1.0f64).prop_map(Some),
            Just(Some(f64::NAN)),
            Just(Some(-0.5))
        ]
    }

    fn option_distance() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![
            Just(None),
            (-0.1..1.0f64).prop_map(Some),
            Just(Some(f64::NAN)),
            Just(Some(f64::INFINITY))
        ]
    }

    prop_compose! {
        fn inputs()(odometry_age_s in option_age(), imu_age_s in option_age(), commanded_to_move in any::<bool>(), in_contact in any::<bool>(),
                    obstacle_ahead_m in option_distance(), obstacle_behind_m in option_distance(),
                    pose in proptest::option::of((-6.0..6.0f64, -6.0..6.0f64, -4.0..4.0f64)), arm in arm_reach()) -> SafetyInputs {
            SafetyInputs { odometry_age_s, imu_age_s, commanded_to_move, in_contact, obstacle_ahead_m, obstacle_behind_m, obstacle_turning_m: None,
                           cliff_ahead: false, backup_limit: false, hazard_stop: false,
                           pose: pose.map(|(x_m, y_m, yaw_rad)| Pose2D { x_m, y_m, yaw_rad }), arm }
        }
    }

    fn arm_reach() -> impl Strategy<Value = ArmReach> {
        prop_oneof![3 => Just(ArmReach::Within), 1 => (0.0..0.5f64, -0.5..0.5f64).prop_map(|(beyond_m, y)| ArmReach::Outside { beyond_m, link_at_m: (0.3, y) }), 1 => Just(ArmReach::Unknown)]
    }

    proptest! {
        #[test]
        fn envelopes_always_allow_stopping_and_stay_within_the_limits(inputs in inputs(), latched in any::<bool>(),
                                                                     request in (-1.0..1.0f64, -3.0..3.0f64)) {
            let mut state = SafetyState::new();
            if latched {
                state.update(&fenced(), &SafetyInputs { in_contact: true, ..inputs }, 0.0);
            }
            let e = safety_envelope(&LIMITS, &fenced(), &state, &inputs);
            prop_assert!(e.contains(BaseVelocity::ZERO));
            prop_assert!(e.linear_min_mps >= -0.22 && e.linear_max_mps <= 0.22 && e.angular_min_radps >= -1.5 && e.angular_max_radps <= 1.5);
            prop_assert_eq!(e.linear_range(), (e.linear_min_mps, e.linear_max_mps));
            let (applied, clamped) = apply_envelope(&e, BaseVelocity { linear_mps: request.0, angular_radps: request.1 });
            prop_assert!(e.contains(applied));
            prop_assert_eq!(clamped, applied != BaseVelocity { linear_mps: request.0, angular_radps: request.1 });
            if state.contact_latched() {
                prop_assert!(e.linear_max_mps == 0.0 && e.has(Rule::ContactLatched));
            }
            if inputs.commanded_to_move && !matches!(inputs.odometry_age_s, Some(a) if (0.0..=0.25).contains(&a)) {
                prop_assert!(e.is_stop());
            }
            // An arm outside the outline, or where it is unknown: no base motion at all.
            if inputs.commanded_to_move && inputs.arm != ArmReach::Within {
                prop_assert!(e.is_stop() && (e.has(Rule::ArmOutsideOutline) || e.has(Rule::ArmPoseUnknown)), "{:?}", e);
            }
            // The geofence: allowed motion never increases the distance from the centre.
            if let (Some(p), Some(f)) = (inputs.pose, fenced().geofence) {
                let (dx, dy) = (p.x_m - f.centre_x_m, p.y_m - f.centre_y_m);
                if dx.hypot(dy) >= f.radius_m {
                    let outward = dx * p.yaw_rad.cos() + dy * p.yaw_rad.sin();
                    prop_assert!(e.linear_max_mps * outward <= 0.0 && e.linear_min_mps * outward <= 0.0, "{:?} {}", e, outward);
                }
            }
            if e.restrictions.is_empty() {
                prop_assert_eq!(&e, &Envelope::unrestricted(&LIMITS));
            }
            // Each restriction's own ranges contain zero, and the envelope is their intersection with the limits.
            for r in &e.restrictions {
                prop_assert!(r.linear_mps.0 <= 0.0 && r.linear_mps.1 >= 0.0 && r.angular_radps.0 <= 0.0 && r.angular_radps.1 >= 0.0, "{:?}", r);
                prop_assert!(e.linear_max_mps <= r.linear_mps.1 && e.linear_min_mps >= r.linear_mps.0, "{:?} {:?}", e, r);
            }
            // A direction is blocked exactly when some rule alone blocks it.
            let velocity = BaseVelocity { linear_mps: request.0, angular_radps: request.1 };
            prop_assert_eq!(e.forbids_direction_of(velocity), !e.blocking(velocity).is_empty());
        }

        /// Stop if in doubt: whatever else holds, stale depth or bumper data
        /// never lets a forward command through; sensing that is fresh or
        /// not configured changes nothing; reverse is never narrowed by it.
        #[test]
        fn stale_sensing_never_lets_a_forward_command_through(inputs in inputs(), depth in sensor_health(), bumper in sensor_health(),
                                                               request in (0.001..1.0f64, -3.0..3.0f64)) {
            let inputs = SafetyInputs { commanded_to_move: true, ..inputs };
            let sensing = SensingHealth { depth, bumper, ..SensingHealth::NOT_CONFIGURED };
            let state = SafetyState::new();
            let e = safety_envelope_with_sensing(&LIMITS, &fenced(), &state, &inputs, &sensing);
            let without = safety_envelope(&LIMITS, &fenced(), &state, &inputs);
            let stale = |h: SensorHealth| matches!(h, SensorHealth::Stale { .. });
            let (applied, _) = apply_envelope(&e, BaseVelocity { linear_mps: request.0, angular_radps: request.1 });
            if stale(depth) || stale(bumper) {
                prop_assert_eq!(applied.linear_mps, 0.0);
                prop_assert!(e.linear_max_mps == 0.0);
                prop_assert_eq!(e.has(Rule::ObstacleSensingStale), stale(depth));
                prop_assert_eq!(e.has(Rule::ContactSensingStale), stale(bumper));
                prop_assert!(!e.blocking(BaseVelocity { linear_mps: request.0, angular_radps: 0.0 }).is_empty(), "forward reported as blocked");
            } else {
                // (Compared by rule and range: a NaN distance is never equal to itself.)
                let rules = |e: &Envelope| e.restrictions.iter().map(|r| r.rule).collect::<Vec<_>>();
                prop_assert_eq!(rules(&e), rules(&without));
                prop_assert_eq!((e.linear_range(), e.angular_range()), (without.linear_range(), without.angular_range()));
            }
            prop_assert_eq!((e.linear_min_mps, e.angular_min_radps, e.angular_max_radps), (without.linear_min_mps, without.angular_min_radps, without.angular_max_radps));
        }

        /// The creep floor: between the stop and the slow-down distance the
        /// speed towards the obstacle is at least the creep speed (so the
        /// stop distance is reached in finite time), never more than the
        /// base's limit, never more than the command asked for, and never
        /// anything at or inside the stop distance or when the distance is NaN.
        #[test]
        fn the_creep_floor_reaches_the_stop_distance_and_no_further(
            distance in prop_oneof![8 => -0.1..0.8f64, 1 => Just(0.2), 1 => Just(f64::NAN)],
            creep in 0.0..0.2f64, slow in 0.2..1.0f64, stop in 0.0..0.3f64,
            behind in any::<bool>(), request in -1.0..1.0f64,
        ) {
            let config = SafetyConfig { min_creep_speed_mps: creep, slow_down_distance_m: slow.max(stop), stop_distance_m: stop, ..SafetyConfig::DEFAULT };
            let inputs = if behind { SafetyInputs { obstacle_behind_m: Some(distance), ..fresh() } } else { SafetyInputs { obstacle_ahead_m: Some(distance), ..fresh() } };
            let e = safety_envelope(&LIMITS, &config, &SafetyState::new(), &inputs);
            // The speed allowed towards the obstacle.
            let towards = if behind { -e.linear_min_mps } else { e.linear_max_mps };
            let away = if behind { e.linear_max_mps } else { -e.linear_min_mps };
            prop_assert_eq!(away, 0.22, "away from the obstacle is never restricted");
            prop_assert!(towards <= 0.22);
            if distance.is_nan() || distance <= config.stop_distance_m {
                prop_assert_eq!(towards, 0.0, "at {} m (stop {})", distance, config.stop_distance_m);
            } else if distance < config.slow_down_distance_m {
                prop_assert!(towards >= creep.min(0.22), "{} m: {} below the floor {}", distance, towards, creep);
                let ramp = 0.22 * (distance - config.stop_distance_m) / (config.slow_down_distance_m - config.stop_distance_m);
                prop_assert!(towards <= ramp.max(creep) + 1e-12, "the floor raises the ramp, nothing else");
            } else {
                prop_assert!(e.restrictions.is_empty());
            }
            // Never above the unrestricted command: same sign, no larger.
            let velocity = BaseVelocity { linear_mps: request, angular_radps: 0.0 };
            let (free, _) = apply_envelope(&Envelope::unrestricted(&LIMITS), velocity);
            let (governed, _) = apply_envelope(&e, velocity);
            prop_assert!(governed.linear_mps * free.linear_mps >= 0.0 && governed.linear_mps.abs() <= free.linear_mps.abs(), "{:?} vs {:?}", governed, free);
            // Farther is never slower.
            if distance.is_finite() {
                let nearer = obstacle_speed_limit(distance - 0.01, 0.22, &config).unwrap_or(0.22);
                let here = obstacle_speed_limit(distance, 0.22, &config).unwrap_or(0.22);
                prop_assert!(nearer <= here, "{} at {} m, {} at 1 cm nearer", here, distance, nearer);
            }
        }
    }
}

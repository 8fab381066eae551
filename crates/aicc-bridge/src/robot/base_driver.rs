//! The one place cmd_vel comes from: a fixed-rate loop that takes the
//! current setpoint (or zero when it has expired: the deadman), asks the
//! governor what the safety rules allow (stale sensors, contact latch,
//! obstacles, geofence), limits velocity and acceleration, and publishes
//! the result. An explicit stop brakes at the emergency deceleration.
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::age::Now;
use super::halt::Halts;
use super::port::{ActuatorPort, Endpoint, PortError, SensorPort};
use super::surroundings::{SourceConfig, Surroundings};
use crate::config::SensorConfig;
use crate::governor::coverage::{Observation, SourceKind, ZoneGrid};
use crate::governor::footprint::Footprint;
use crate::governor::hazards::{hazard_state, HazardFlags};
use crate::governor::laser::{most_restrictive, ScanReading};
use crate::governor::memory::{Remembered, Verdict};
use crate::governor::safety::{
    is_commanded_to_move, safety_envelope_with_sensing, ArmReach, Geofence, Pose2D, Rule,
    SensingHealth, SensorHealth, UnobservedZone,
};
use crate::governor::{
    govern_base_step, BaseLimits, BaseVelocity, EmergencyLimits, Envelope, Restriction,
    SafetyConfig, SafetyInputs, SafetyState,
};

/// Zero commands published on coming to rest, so that a lost message
/// cannot leave the robot moving; then the driver goes quiet so that other
/// cmd_vel sources (teleop) are not drowned out.
const ZERO_REPEATS_AT_REST: u32 = 5;

#[derive(Debug, Clone, Copy)]
struct Setpoint {
    velocity: BaseVelocity,
    expires: Instant,
}

/// What the depth camera says about the way ahead: its health, and the
/// nearest obstacle it has seen there (remembered while out of view).
/// "Nothing seen" and "nothing known" are different answers: only a fresh
/// frame clears, and only where it observes (see the coverage rule).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum ObstacleAhead {
    /// The robot has no depth camera for obstacle sensing.
    #[default]
    NotSensed,
    /// A fresh frame, and nothing seen or remembered in the corridor ahead.
    Clear,
    /// A fresh frame; the nearest obstacle seen or remembered ahead.
    At { distance_m: f64 },
    /// No frame within `max_age_s` (`age_s: None`: none yet).
    Unknown { age_s: Option<f64>, max_age_s: f64 },
}

/// What the bumper says.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum BumperContact {
    /// The robot has no bumper.
    #[default]
    NotSensed,
    /// A fresh reading with no contact.
    Clear,
    /// A fresh reading with contact.
    Touching,
    /// No reading within `max_age_s` (`age_s: None`: none yet).
    Unknown { age_s: Option<f64>, max_age_s: f64 },
}

/// What the laser scanner says around the base.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum ScanGuard {
    /// The robot has no laser scanner for obstacle sensing.
    #[default]
    NotSensed,
    /// A usable scan within its max age.
    Fresh(ScanReading),
    /// No usable scan within `max_age_s` (`age_s: None`: none yet).
    Unknown { age_s: Option<f64>, max_age_s: f64 },
}

impl ScanGuard {
    fn zones(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        match self {
            ScanGuard::Fresh(r) => (
                r.ahead.obstacle_m(),
                r.behind.obstacle_m(),
                r.turning.and_then(|z| z.obstacle_m()),
            ),
            ScanGuard::NotSensed | ScanGuard::Unknown { .. } => (None, None, None),
        }
    }
}

/// What the sensors say, as the loop gathered it.
#[derive(Debug, Clone, Default)]
pub struct SensorSnapshot {
    pub odometry_age_s: Option<f64>,
    pub imu_age_s: Option<f64>,
    pub bumper: BumperContact,
    pub obstacle_ahead: ObstacleAhead,
    /// The nearest remembered obstacle behind (m along -x) and in the
    /// turning sweep (m from the origin).
    pub remembered_behind_m: Option<f64>,
    pub remembered_turning_m: Option<f64>,
    /// The zones no fresh source observes (ahead, behind).
    pub unobserved: [Option<UnobservedZone>; 2],
    pub scan: ScanGuard,
    /// What the base's hazard reports ask (None: no fresh report, or none configured).
    pub hazards: Option<HazardFlags>,
    /// Pose in the odometry frame.
    pub pose: Option<Pose2D>,
}

impl SensorSnapshot {
    /// The health of the sensors guarding forward motion, for the sensing rules.
    pub fn sensing_health(&self) -> SensingHealth {
        let depth = match self.obstacle_ahead {
            ObstacleAhead::NotSensed => SensorHealth::NotConfigured,
            ObstacleAhead::Clear | ObstacleAhead::At { .. } => SensorHealth::Fresh,
            ObstacleAhead::Unknown { age_s, max_age_s } => SensorHealth::Stale { age_s, max_age_s },
        };
        let bumper = match self.bumper {
            BumperContact::NotSensed => SensorHealth::NotConfigured,
            BumperContact::Clear | BumperContact::Touching => SensorHealth::Fresh,
            BumperContact::Unknown { age_s, max_age_s } => SensorHealth::Stale { age_s, max_age_s },
        };
        let scan = match self.scan {
            ScanGuard::NotSensed => SensorHealth::NotConfigured,
            ScanGuard::Fresh(_) => SensorHealth::Fresh,
            ScanGuard::Unknown { age_s, max_age_s } => SensorHealth::Stale { age_s, max_age_s },
        };
        SensingHealth {
            depth,
            bumper,
            scan,
            unobserved: self.unobserved.clone(),
            ..SensingHealth::NOT_CONFIGURED
        }
    }
}

/// The sensors that guard forward motion and the age past which their
/// readings are not trusted; `None` when the robot has no such sensor.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GuardSensors {
    pub depth_max_age: Option<Duration>,
    pub bumper_max_age: Option<Duration>,
    pub scan_max_age: Option<Duration>,
    pub hazards_max_age: Option<Duration>,
    /// Odometry older than this gives no pose to place observations by.
    pub pose_max_age: Duration,
}

impl GuardSensors {
    /// As configured: a sensor with an empty topic is not configured.
    pub fn from_config(sensors: &SensorConfig) -> Self {
        let max_age = |s: &crate::config::SensorTopic| {
            s.is_configured().then(|| Duration::from_secs_f64(s.max_age_s))
        };
        Self {
            depth_max_age: max_age(&sensors.depth),
            bumper_max_age: max_age(&sensors.bumper),
            scan_max_age: max_age(&sensors.scan),
            hazards_max_age: max_age(&sensors.hazards),
            pose_max_age: Duration::from_secs_f64(sensors.odom.max_age_s),
        }
    }
}

/// The age of a reading received at `received`, as seen at `now`.
fn age_s(now: Instant, received: Instant) -> f64 {
    now.saturating_duration_since(received).as_secs_f64()
}

#[derive(Debug)]
struct DriverState {
    setpoint: Option<Setpoint>,
    last_command: BaseVelocity,
    last_step: Option<Instant>,
    zeros_left: u32,
    /// An explicit stop: brake at the emergency rate until at rest.
    braking: bool,
    safety: SafetyState,
    /// The geofence, centred on the first pose seen (the start pose).
    geofence: Option<Geofence>,
    envelope: Option<Envelope>,
    /// Rules active at the last step, to report changes.
    active_rules: Vec<Rule>,
    started: Instant,
}

/// A change in what the governor enforces, for events and diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub struct GovernorChange {
    pub began: Vec<Restriction>,
    pub ended: Vec<Rule>,
}

/// Owns the base's velocity command: the only holder of the actuator port's
/// velocity publisher.
pub struct BaseDriver {
    actuators: Arc<dyn ActuatorPort>,
    limits: BaseLimits,
    emergency: EmergencyLimits,
    safety: SafetyConfig,
    geofence_radius_m: Option<f64>,
    setpoint_timeout: Duration,
    period: Duration,
    state: Mutex<DriverState>,
    /// What the obstacle sources observed of the zones, and what they saw
    /// (the obstacle memory).
    surroundings: Mutex<Surroundings>,
    /// The circle the footprint sweeps turning in place plus the margin,
    /// where it sweeps new ground (a rectangle); None for a round robot.
    sweep_radius_m: Option<f64>,
    /// The latest usable laser scan's reading, and when it was captured.
    scan: Mutex<Option<(ScanReading, Instant)>>,
    /// Why the latest scans gave no reading (cleared by one that does).
    scan_unmeasured: Mutex<Option<String>>,
    /// Whether the footprint sweeps new ground turning in place.
    scan_guards_turning: bool,
    /// Wakes the loop when motion starts or stops, so that the first
    /// governed command goes out at once rather than at the next period.
    wake: tokio::sync::Notify,
    /// Raised by every `halt`: a motion begun before it may no longer set
    /// the base (or the joints) moving; shared with the joint driver.
    halts: Arc<Halts>,
    /// The last odometry jump, and the halt generation it began: the
    /// motions it ended say why.
    last_jump: Mutex<Option<(u64, String)>>,
    /// Where the arm is for the outline, and when that was worked out
    /// (None: no arm is watched).
    arm: Mutex<Option<(ArmReach, Instant)>>,
}

/// An arm reach older than this is not known: whatever watches it stopped.
const ARM_REACH_MAX_AGE: Duration = Duration::from_millis(500);

/// How the base driver is set up (from `base` and `safety` in the config).
#[derive(Debug, Clone, Copy)]
pub struct BaseSettings {
    pub limits: BaseLimits,
    pub emergency: EmergencyLimits,
    pub safety: SafetyConfig,
    pub geofence_radius_m: Option<f64>,
    pub setpoint_timeout: Duration,
    pub control_rate_hz: f64,
    /// Whether the footprint sweeps new ground turning in place (a stale
    /// laser scanner then stops turning too).
    pub scan_guards_turning: bool,
    /// The zones, the sources that observe them, and what must be seen.
    pub coverage: CoverageSettings,
}

/// How the zones are observed (from `safety` and `sensors` in the config).
#[derive(Debug, Clone, Copy)]
pub struct CoverageSettings {
    pub grid: ZoneGrid,
    pub footprint: Footprint,
    /// The lowest obstacle a source must see to watch a zone, m.
    pub required_height_m: f64,
    pub max_unobserved_fraction: f64,
    /// How long a place seen clear counts as observed while the way is watched.
    pub observed_memory: Duration,
    /// The depth camera's and the LiDAR's max age; None when not configured.
    pub depth_max_age: Option<Duration>,
    pub scan_max_age: Option<Duration>,
    /// Beside the footprint, m (for the turning sweep).
    pub margin_m: f64,
}

impl CoverageSettings {
    pub fn from_config(config: &crate::config::Config) -> Self {
        let max_age = |s: &crate::config::SensorTopic| {
            s.is_configured().then(|| Duration::from_secs_f64(s.max_age_s))
        };
        CoverageSettings {
            grid: config.safety.zone_grid(),
            footprint: config.safety.footprint(),
            required_height_m: config.safety.min_obstacle_height_m,
            max_unobserved_fraction: config.safety.max_unobserved_fraction,
            observed_memory: Duration::from_secs_f64(config.safety.observed_memory_s),
            depth_max_age: max_age(&config.sensors.depth),
            scan_max_age: max_age(&config.sensors.scan),
            margin_m: config.safety.scan_margin_m,
        }
    }
}

impl BaseSettings {
    /// From `base` and `safety` in the configuration.
    pub fn from_config(config: &crate::config::Config) -> Self {
        let base = &config.base;
        Self {
            limits: BaseLimits {
                max_linear_mps: base.max_linear_mps,
                max_angular_radps: base.max_angular_radps,
                max_linear_accel_mps2: base.max_linear_accel_mps2,
                max_angular_accel_radps2: base.max_angular_accel_radps2,
            },
            emergency: config.safety.emergency(),
            safety: config.safety.rules(),
            geofence_radius_m: config.safety.geofence_radius(),
            setpoint_timeout: Duration::from_secs_f64(base.setpoint_timeout_s),
            control_rate_hz: base.control_rate_hz,
            scan_guards_turning: config.safety.footprint().sweeps_when_turning(),
            coverage: CoverageSettings::from_config(config),
        }
    }
}

/// Zero commands published at exit, a few milliseconds apart: one message
/// may be lost before the publisher's peers drain it.
const EXIT_ZEROS: u32 = 3;

impl BaseDriver {
    pub fn new(
        settings: BaseSettings,
        actuators: Arc<dyn ActuatorPort>,
        halts: Arc<Halts>,
    ) -> Self {
        let BaseSettings {
            limits,
            emergency,
            safety,
            geofence_radius_m,
            setpoint_timeout,
            control_rate_hz,
            scan_guards_turning,
            coverage,
        } = settings;
        let source =
            |kind, max_age: Option<Duration>| max_age.map(|max_age| SourceConfig { kind, max_age });
        let surroundings = Surroundings::new(
            coverage.grid,
            coverage.footprint,
            coverage.required_height_m,
            coverage.max_unobserved_fraction,
            coverage.observed_memory,
            source(SourceKind::DepthCamera, coverage.depth_max_age),
            source(SourceKind::Laser, coverage.scan_max_age),
        );
        let sweep_radius_m = coverage
            .footprint
            .sweeps_when_turning()
            .then(|| coverage.footprint.swept_radius_m() + coverage.margin_m);
        Self {
            actuators,
            limits,
            emergency,
            safety,
            geofence_radius_m,
            setpoint_timeout,
            period: Duration::from_secs_f64(1.0 / control_rate_hz),
            state: Mutex::new(DriverState {
                setpoint: None,
                last_command: BaseVelocity::ZERO,
                last_step: None,
                zeros_left: 0,
                braking: false,
                safety: SafetyState::new(),
                geofence: None,
                envelope: None,
                active_rules: Vec::new(),
                started: Instant::now(),
            }),
            surroundings: Mutex::new(surroundings),
            sweep_radius_m,
            scan: Mutex::new(None),
            scan_unmeasured: Mutex::new(None),
            scan_guards_turning,
            wake: tokio::sync::Notify::new(),
            halts,
            last_jump: Mutex::new(None),
            arm: Mutex::new(None),
        }
    }

    /// The topic the governed commands go to, for messages.
    pub fn endpoint(&self) -> String {
        self.actuators.endpoint(Endpoint::CmdVel)
    }

    /// Why governed commands cannot reach the base now (the port's word):
    /// a motion is refused with it rather than driven into nothing.
    pub fn output_unavailable(&self) -> Option<PortError> {
        self.actuators.base_output_unavailable()
    }

    /// At exit: stops, and publishes zero whatever the loop was doing.
    pub async fn shutdown(&self) {
        self.stop();
        for _ in 0..EXIT_ZEROS {
            self.actuators.publish_base_velocity(BaseVelocity::ZERO);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn limits(&self) -> &BaseLimits {
        &self.limits
    }

    pub fn emergency(&self) -> &EmergencyLimits {
        &self.emergency
    }

    /// The motion generation to pass to [`BaseDriver::request`]: taken when
    /// a motion begins, it goes stale at the next [`BaseDriver::halt`].
    pub fn begin_motion(&self) -> u64 {
        self.halts.current()
    }

    /// Whether a halt came after the motion `generation` began.
    pub fn halted_since(&self, generation: u64) -> bool {
        self.begin_motion() != generation
    }

    /// Stops now (as [`BaseDriver::stop`]) and refuses every setpoint of
    /// motions begun before: what the `stop` tool does.
    pub fn halt(&self) {
        self.halts.raise();
        self.stop();
    }

    /// An odometry jump: stops everything (the motions begun before end,
    /// as at a `stop`), and re-anchors what is kept in the odometry frame
    /// (the geofence's centre, the contact latch's reference, what the
    /// obstacle sources saw) so that it stays where it is in the world.
    /// `jumped_at` is the jumped sample's capture. Returns what was
    /// re-anchored, in words, for the event.
    pub fn note_odometry_jump(
        &self,
        jump: &crate::governor::odometry::Jump,
        jumped_at: Instant,
    ) -> String {
        let correction = jump.correction();
        let yaw_change =
            crate::governor::safety::wrap_angle(jump.after.yaw_rad - jump.before.yaw_rad);
        let mut state = self.state.lock();
        let fence = state.geofence.as_mut().map(|fence| {
            let before = (fence.centre_x_m, fence.centre_y_m);
            (fence.centre_x_m, fence.centre_y_m) = correction(fence.centre_x_m, fence.centre_y_m);
            format!(
                "the geofence's centre from ({:.2}, {:.2}) to ({:.2}, {:.2})",
                before.0, before.1, fence.centre_x_m, fence.centre_y_m
            )
        });
        let latched = state.safety.contact_latched();
        state.safety.reanchor(correction, yaw_change);
        drop(state);
        let forgotten = self.surroundings.lock().forget_after_jump(correction, jumped_at);
        let mut parts: Vec<String> = fence.into_iter().collect();
        if latched {
            parts.push("the contact latch's reference pose".into());
        }
        let anchored = if parts.is_empty() {
            String::new()
        } else {
            format!("; re-anchored: {}", parts.join(", "))
        };
        let what = format!("{}{anchored}; forgot {forgotten} remembered obstacle points (where they lie now is unknown)", jump.describe());
        *self.last_jump.lock() = Some((self.halts.current() + 1, what.clone()));
        self.halt();
        what
    }

    /// Why a motion begun in `generation` was ended by an odometry jump, if it was.
    pub fn jump_since(&self, generation: u64) -> Option<String> {
        self.last_jump
            .lock()
            .as_ref()
            .filter(|(at, _)| *at > generation && self.halted_since(generation))
            .map(|(_, what)| what.clone())
    }

    /// Asks for `velocity` until `setpoint_timeout` from `now`, for the
    /// motion begun as `generation`; callers refresh it while they want
    /// motion. Returns false, and changes nothing, when the motion was
    /// halted since.
    pub fn request(&self, generation: u64, velocity: BaseVelocity, now: Instant) -> bool {
        if self.halted_since(generation) {
            return false;
        }
        let mut state = self.state.lock();
        let starting = state.setpoint.is_none() && state.last_command.is_zero();
        state.setpoint = Some(Setpoint { velocity, expires: now + self.setpoint_timeout });
        state.braking = false;
        drop(state);
        if starting {
            self.wake.notify_one();
        }
        true
    }

    /// Ends a motion that reached its goal: the loop ramps down within the
    /// normal acceleration limit.
    pub fn finish(&self) {
        self.state.lock().setpoint = None;
    }

    /// Stops now: the setpoint is dropped and the loop brakes at the
    /// emergency deceleration (agent gone, lease lost, `stop`, an error).
    pub fn stop(&self) {
        let mut state = self.state.lock();
        state.setpoint = None;
        state.braking = !state.last_command.is_zero();
        drop(state);
        self.wake.notify_one();
    }

    /// Whether a motion is asked for or the base is still coming to rest
    /// (the obstacle watcher then measures every depth frame).
    pub fn in_motion(&self) -> bool {
        let state = self.state.lock();
        state.setpoint.is_some() || !state.last_command.is_zero()
    }

    /// The command most recently published.
    pub fn last_command(&self) -> BaseVelocity {
        self.state.lock().last_command
    }

    /// Takes an obstacle source's frame (see [`Surroundings::note`]):
    /// its observation, the obstacle points it saw (odometry frame) and
    /// its verdict on each remembered one. Returns the lines to log.
    ///
    /// The remembered points (up to tens of thousands) are judged on a copy,
    /// outside the lock: the base loop reads the surroundings every period,
    /// and judging them under the lock held it for tens of milliseconds on a
    /// loaded machine, while the base kept its last command (a move ended
    /// 3 to 7 cm past its goal).
    pub fn note_frame(
        &self,
        observation: Observation,
        points: &[(f64, f64, f64)],
        mut verdict: impl FnMut(&Remembered) -> Verdict,
    ) -> Vec<String> {
        let remembered: Vec<Remembered> =
            self.surroundings.lock().memory().points().copied().collect();
        let verdicts: std::collections::HashMap<(u64, u64), Verdict> =
            remembered.iter().map(|r| ((r.x_m.to_bits(), r.y_m.to_bits()), verdict(r))).collect();
        // A point remembered since the copy was taken has no verdict: unknown.
        self.surroundings.lock().note(observation, points, |r| {
            verdicts.get(&(r.x_m.to_bits(), r.y_m.to_bits())).copied().unwrap_or(Verdict::Unknown)
        })
    }

    /// Records why a depth frame gave no measurement; the stale-sensing
    /// rule's reason says it, so a hold is never unexplained. Returns
    /// whether the frame before did give one (for logging once, not per frame).
    pub fn note_obstacle_unmeasured(&self, reason: String) -> bool {
        self.surroundings.lock().note_unmeasured(SourceKind::DepthCamera, reason)
    }

    /// Why the depth camera's frames give no measurement, if they do not.
    pub fn obstacle_unmeasured(&self) -> Option<String> {
        self.surroundings.lock().unmeasured(SourceKind::DepthCamera)
    }

    /// The surroundings, to read or correct (the odometry monitor's
    /// re-anchoring, the remedies).
    pub fn surroundings(&self) -> parking_lot::MutexGuard<'_, Surroundings> {
        self.surroundings.lock()
    }

    /// What the depth camera says at `now`: unknown without a frame within
    /// `max_age` (`None`: no depth camera), else the nearest obstacle it
    /// has seen (and remembers) ahead of `pose`, or clear.
    pub fn obstacle_ahead(
        &self,
        now: Instant,
        max_age: Option<Duration>,
        remembered_ahead_m: Option<f64>,
    ) -> ObstacleAhead {
        let Some(max_age) = max_age else { return ObstacleAhead::NotSensed };
        let last = self.surroundings.lock().latest_capture(SourceKind::DepthCamera);
        match last {
            Some(at) if now.saturating_duration_since(at) <= max_age => match remembered_ahead_m {
                Some(distance_m) => ObstacleAhead::At { distance_m },
                None => ObstacleAhead::Clear,
            },
            last => ObstacleAhead::Unknown {
                age_s: last.map(|at| age_s(now, at)),
                max_age_s: max_age.as_secs_f64(),
            },
        }
    }

    /// Records a usable laser scan's reading, captured at `measured`.
    /// Returns whether the scans before gave no reading (for logging the recovery).
    pub fn note_scan(&self, reading: ScanReading, measured: Instant) -> bool {
        *self.scan.lock() = Some((reading, measured));
        self.scan_unmeasured.lock().take().is_some()
    }

    /// Records why a scan gave no reading; returns whether the one before did.
    pub fn note_scan_unmeasured(&self, reason: String) -> bool {
        self.scan_unmeasured.lock().replace(reason).is_none()
    }

    /// What the laser scanner says at `now` (`max_age` None: no scanner).
    pub fn scan_guard(&self, now: Instant, max_age: Option<Duration>) -> ScanGuard {
        let Some(max_age) = max_age else { return ScanGuard::NotSensed };
        match *self.scan.lock() {
            Some((reading, at)) if now.saturating_duration_since(at) <= max_age => {
                ScanGuard::Fresh(reading)
            }
            last => ScanGuard::Unknown {
                age_s: last.map(|(_, at)| age_s(now, at)),
                max_age_s: max_age.as_secs_f64(),
            },
        }
    }

    /// The safety rules that hold the direction of `velocity` at zero at
    /// the last step; empty when that direction is allowed (so that a tool
    /// can give up, saying why, rather than wait for a timeout). An
    /// explicit stop's braking is not a rule and is not reported here.
    pub fn blocked_by(&self, velocity: BaseVelocity) -> Vec<Restriction> {
        let state = self.state.lock();
        let Some(envelope) = state.envelope.as_ref() else { return Vec::new() };
        envelope.blocking(velocity).into_iter().cloned().collect()
    }

    /// The restrictions in force at the last step.
    pub fn restrictions(&self) -> Vec<Restriction> {
        self.state.lock().envelope.as_ref().map(|e| e.restrictions.clone()).unwrap_or_default()
    }

    /// One control step at `now`: the command to publish, if any, and any
    /// change in the restrictions in force.
    pub fn step(
        &self,
        now: Instant,
        sensors: SensorSnapshot,
    ) -> (Option<BaseVelocity>, Option<GovernorChange>) {
        let mut state = self.state.lock();
        let requested = match state.setpoint {
            Some(setpoint) if now < setpoint.expires => setpoint.velocity,
            _ => {
                state.setpoint = None;
                BaseVelocity::ZERO
            }
        };
        let dt_s = state.last_step.map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64());
        state.last_step = Some(now);
        if state.geofence.is_none() {
            if let (Some(radius_m), Some(pose)) = (self.geofence_radius_m, sensors.pose) {
                state.geofence =
                    Some(Geofence { centre_x_m: pose.x_m, centre_y_m: pose.y_m, radius_m });
            }
        }
        let depth_ahead = match sensors.obstacle_ahead {
            ObstacleAhead::At { distance_m } => Some(distance_m),
            ObstacleAhead::NotSensed | ObstacleAhead::Clear | ObstacleAhead::Unknown { .. } => None,
        };
        // What is seen and remembered, and the laser's zones: the most restrictive wins.
        let (scan_ahead, scan_behind, scan_turning) = sensors.scan.zones();
        let scan_behind = most_restrictive(sensors.remembered_behind_m, scan_behind);
        let scan_turning = most_restrictive(sensors.remembered_turning_m, scan_turning);
        let inputs = SafetyInputs {
            odometry_age_s: sensors.odometry_age_s,
            imu_age_s: sensors.imu_age_s,
            commanded_to_move: is_commanded_to_move(state.last_command, requested),
            in_contact: sensors.bumper == BumperContact::Touching
                || sensors.hazards.is_some_and(|h| h.contact),
            obstacle_ahead_m: most_restrictive(depth_ahead, scan_ahead),
            obstacle_behind_m: scan_behind,
            obstacle_turning_m: scan_turning,
            cliff_ahead: sensors.hazards.is_some_and(|h| h.cliff),
            backup_limit: sensors.hazards.is_some_and(|h| h.backup_limit),
            hazard_stop: sensors.hazards.is_some_and(|h| h.stop),
            pose: sensors.pose,
            arm: self.arm_reach(now),
        };
        let config = SafetyConfig { geofence: state.geofence, ..self.safety };
        let now_s = now.saturating_duration_since(state.started).as_secs_f64();
        state.safety.update(&config, &inputs, now_s);
        let mut envelope = safety_envelope_with_sensing(
            &self.limits,
            &config,
            &state.safety,
            &inputs,
            &SensingHealth {
                depth_unmeasured: self.obstacle_unmeasured(),
                scan_unmeasured: self.scan_unmeasured.lock().clone(),
                scan_guards_turning: self.scan_guards_turning,
                ..sensors.sensing_health()
            },
        );
        if state.braking {
            // An explicit stop: a zero envelope makes the governor brake at
            // the emergency rate.
            envelope.linear_min_mps = 0.0;
            envelope.linear_max_mps = 0.0;
            envelope.angular_min_radps = 0.0;
            envelope.angular_max_radps = 0.0;
        }
        // Acceleration over at most one and a half periods: a tick the
        // loop missed is not caught up in one jump (braking is).
        let max_accel_step_s = self.period.as_secs_f64() * 1.5;
        let governed = govern_base_step(
            &self.limits,
            &self.emergency,
            state.last_command,
            requested,
            &envelope,
            dt_s,
            max_accel_step_s,
        );
        let rules: Vec<Rule> = envelope.restrictions.iter().map(|r| r.rule).collect();
        let change = (rules != state.active_rules).then(|| GovernorChange {
            began: envelope
                .restrictions
                .iter()
                .filter(|r| !state.active_rules.contains(&r.rule))
                .cloned()
                .collect(),
            ended: state.active_rules.iter().filter(|r| !rules.contains(r)).copied().collect(),
        });
        state.active_rules = rules;
        state.envelope = Some(envelope);
        let command = governed.command;
        let was_moving = !state.last_command.is_zero();
        state.last_command = command;
        if command.is_zero() {
            state.braking = false;
        }
        if !command.is_zero() || state.setpoint.is_some() {
            state.zeros_left = ZERO_REPEATS_AT_REST;
            return (Some(command), change);
        }
        if was_moving || state.zeros_left > 0 {
            state.zeros_left = state.zeros_left.saturating_sub(1);
            return (Some(BaseVelocity::ZERO), change);
        }
        (None, change)
    }

    /// What the sensors say now, for the safety rules. Ages count from
    /// capture where a sample's stamp can be trusted ([`crate::robot::Age`]).
    pub fn snapshot(
        &self,
        robot: &dyn SensorPort,
        now: Now,
        guards: GuardSensors,
    ) -> SensorSnapshot {
        let odometry = robot.odometry();
        // A Create 3's hazard reports stand in for the bumper: stale = not clear.
        let (hazards, hazards_health) = match guards.hazards_max_age {
            None => (None, None),
            Some(max_age) => match robot.hazards() {
                Some(h) if h.age(now).effective() <= max_age => {
                    (Some(hazard_state(&h.value).flags()), None)
                }
                last => (
                    None,
                    Some(BumperContact::Unknown {
                        age_s: last.map(|h| h.age(now).effective().as_secs_f64()),
                        max_age_s: max_age.as_secs_f64(),
                    }),
                ),
            },
        };
        let bumper = match guards.bumper_max_age {
            None => BumperContact::NotSensed,
            Some(max_age) => match robot.contacts() {
                Some(c) if c.age(now).effective() <= max_age => {
                    if c.value.points.is_empty() {
                        BumperContact::Clear
                    } else {
                        BumperContact::Touching
                    }
                }
                last => BumperContact::Unknown {
                    age_s: last.map(|c| c.age(now).effective().as_secs_f64()),
                    max_age_s: max_age.as_secs_f64(),
                },
            },
        };
        let bumper = match (bumper, hazards_health) {
            (BumperContact::NotSensed, Some(stale)) => stale,
            (BumperContact::NotSensed, None) if hazards.is_some() => BumperContact::Clear,
            (bumper, _) => bumper,
        };
        // A pose too old to stand for the robot's place observes nothing
        // (the odometry rule stops a moving base on it anyway).
        let pose =
            odometry.as_ref().filter(|o| o.age(now).effective() <= guards.pose_max_age).map(|o| {
                Pose2D {
                    x_m: o.position_m.x,
                    y_m: o.position_m.y,
                    yaw_rad: o.orientation.euler_angles().2,
                }
            });
        let around = self.surroundings.lock().reading(pose, now.instant, self.sweep_radius_m);
        SensorSnapshot {
            hazards,
            odometry_age_s: odometry.as_ref().map(|o| o.age(now).effective().as_secs_f64()),
            imu_age_s: robot.imu().map(|i| i.age(now).effective().as_secs_f64()),
            bumper,
            obstacle_ahead: self.obstacle_ahead(now.instant, guards.depth_max_age, around.ahead_m),
            remembered_behind_m: around.behind_m,
            remembered_turning_m: around.turning_m,
            unobserved: around.unobserved,
            scan: self.scan_guard(now.instant, guards.scan_max_age),
            pose,
        }
    }

    /// Runs the control loop until the task is dropped; `on_change` hears
    /// every change in the restrictions in force.
    /// Notes where the arm is for the outline (from its joint states).
    pub fn set_arm_reach(&self, reach: ArmReach, at: Instant) {
        *self.arm.lock() = Some((reach, at));
    }

    /// Where the arm is now: unknown when no one has said for a while.
    fn arm_reach(&self, now: Instant) -> ArmReach {
        match *self.arm.lock() {
            None => ArmReach::Within,
            Some((_, at)) if now.saturating_duration_since(at) > ARM_REACH_MAX_AGE => {
                ArmReach::Unknown
            }
            Some((reach, _)) => reach,
        }
    }

    /// For each obstacle rule that began: the remembered point it stops for.
    fn log_what_obstacle_rules_stop_for(
        &self,
        change: &GovernorChange,
        pose: Option<Pose2D>,
        now: Instant,
    ) {
        use crate::governor::coverage::Direction;
        let Some(pose) = pose else { return };
        for restriction in &change.began {
            let direction = match restriction.rule {
                Rule::ObstacleAhead => Direction::Ahead,
                Rule::ObstacleBehind => Direction::Behind,
                _ => continue,
            };
            if let Some(point) = self.surroundings().describe_nearest(direction, &pose, now) {
                tracing::info!(rule = ?restriction.rule, "the nearest remembered obstacle point: {point}");
            }
        }
    }

    pub async fn run(
        self: Arc<Self>,
        sensors: Arc<dyn SensorPort>,
        guards: GuardSensors,
        on_change: impl Fn(GovernorChange) + Send + 'static,
    ) {
        let mut interval = tokio::time::interval(self.period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = interval.tick() => {}
                () = self.wake.notified() => {}
            }
            let now = sensors.now();
            let snapshot = self.snapshot(sensors.as_ref(), now, guards);
            let pose = snapshot.pose;
            let (command, change) = self.step(now.instant, snapshot);
            if let Some(command) = command {
                self.actuators.publish_base_velocity(command);
            }
            if let Some(change) = change {
                self.log_what_obstacle_rules_stop_for(&change, pose, now.instant);
                on_change(change);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governor::laser::Zone;

    fn driver() -> BaseDriver {
        let limits = BaseLimits {
            max_linear_mps: 0.2,
            max_angular_radps: 1.0,
            max_linear_accel_mps2: 2.0,
            max_angular_accel_radps2: 2.0,
        };
        let settings = BaseSettings {
            limits,
            emergency: EmergencyLimits::DEFAULT,
            safety: SafetyConfig::DEFAULT,
            geofence_radius_m: None,
            setpoint_timeout: Duration::from_millis(200),
            control_rate_hz: 50.0,
            scan_guards_turning: true,
            coverage: coverage(Some(Duration::from_millis(500))),
        };
        BaseDriver::new(
            settings,
            Arc::new(crate::robot::testing::RecordingActuators::default()),
            Arc::new(Halts::default()),
        )
    }

    const FOOTPRINT: Footprint =
        Footprint::Rectangle { front_m: 0.14, rear_m: 0.12, half_width_m: 0.14 };

    fn coverage(depth_max_age: Option<Duration>) -> CoverageSettings {
        CoverageSettings {
            grid: ZoneGrid::new(FOOTPRINT, 0.03, 0.5, crate::governor::coverage::DEFAULT_CELL_M),
            footprint: FOOTPRINT,
            required_height_m: 0.05,
            max_unobserved_fraction: 0.1,
            observed_memory: Duration::from_secs(10),
            depth_max_age,
            scan_max_age: None,
            margin_m: 0.03,
        }
    }

    fn fresh() -> SensorSnapshot {
        SensorSnapshot {
            odometry_age_s: Some(0.01),
            imu_age_s: Some(0.01),
            bumper: BumperContact::Clear,
            obstacle_ahead: ObstacleAhead::Clear,
            remembered_behind_m: None,
            remembered_turning_m: None,
            unobserved: [None, None],
            scan: ScanGuard::NotSensed,
            hazards: None,
            pose: Some(Pose2D { x_m: 0.0, y_m: 0.0, yaw_rad: 0.0 }),
        }
    }

    #[test]
    fn an_expired_setpoint_decelerates_to_zero_and_then_goes_quiet() {
        let d = driver();
        let t0 = Instant::now();
        let step = Duration::from_millis(20);
        assert_eq!(d.step(t0, fresh()).0, None, "idle driver publishes nothing");
        d.request(d.begin_motion(), BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 }, t0);
        let mut t = t0;
        for _ in 0..5 {
            t += step;
            d.step(t, fresh());
        }
        assert!(d.last_command().linear_mps > 0.19, "{:?}", d.last_command());
        let mut published = Vec::new();
        for _ in 0..30 {
            t += step;
            published.push(d.step(t, fresh()).0);
        }
        let zero_at =
            published.iter().position(|c| c.is_some_and(|v| v.is_zero())).expect("reaches zero");
        assert!(step * (5 + zero_at as u32 + 1) <= Duration::from_millis(320), "stopped by 320 ms");
        assert!(published.last().unwrap().is_none(), "quiet at rest: {published:?}");
        let zeros = published.iter().filter(|c| c.is_some_and(|v| v.is_zero())).count();
        assert_eq!(zeros as u32, ZERO_REPEATS_AT_REST);
    }

    #[test]
    fn in_motion_from_the_request_until_the_base_is_back_at_zero() {
        let d = driver();
        let t0 = Instant::now();
        assert!(!d.in_motion(), "a new driver is at rest");
        d.request(d.begin_motion(), BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 }, t0);
        assert!(d.in_motion(), "asked to move, before the first step");
        let mut t = t0;
        for _ in 0..5 {
            t += Duration::from_millis(20);
            d.step(t, fresh());
        }
        d.finish();
        assert!(d.in_motion(), "finished but still ramping down: {:?}", d.last_command());
        for _ in 0..50 {
            t += Duration::from_millis(20);
            d.step(t, fresh());
        }
        assert!(!d.in_motion(), "back at zero: {:?}", d.last_command());
    }

    #[test]
    fn stop_brakes_at_the_emergency_rate_within_about_75_ms() {
        let d = driver();
        let t0 = Instant::now();
        let step = Duration::from_millis(20);
        d.request(d.begin_motion(), BaseVelocity { linear_mps: 0.2, angular_radps: 0.5 }, t0);
        let mut t = t0;
        for _ in 0..20 {
            t += step;
            d.request(d.begin_motion(), BaseVelocity { linear_mps: 0.2, angular_radps: 0.5 }, t);
            d.step(t, fresh());
        }
        assert!((d.last_command().linear_mps - 0.2).abs() < 1e-9);
        d.stop();
        let mut elapsed = Duration::ZERO;
        while !d.last_command().is_zero() {
            t += step;
            elapsed += step;
            d.step(t, fresh());
            assert!(
                elapsed <= Duration::from_millis(100),
                "still moving after {elapsed:?}: {:?}",
                d.last_command()
            );
        }
        assert!(elapsed <= Duration::from_millis(80), "{elapsed:?}");
    }

    #[test]
    fn a_halt_refuses_the_setpoints_of_motions_begun_before_it() {
        let d = driver();
        let t0 = Instant::now();
        let motion = d.begin_motion();
        assert!(d.request(motion, BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 }, t0));
        d.halt();
        assert!(
            !d.request(motion, BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 }, t0),
            "a halted motion cannot restart the base"
        );
        assert!(d.step(t0 + Duration::from_millis(20), fresh()).0.is_none_or(|c| c.is_zero()));
        assert!(
            d.request(d.begin_motion(), BaseVelocity { linear_mps: 0.1, angular_radps: 0.0 }, t0),
            "a new motion may"
        );
    }

    #[test]
    fn stale_odometry_while_moving_stops_and_a_contact_refuses_forward_motion() {
        let d = driver();
        let mut t = Instant::now();
        let step = Duration::from_millis(20);
        let forward = BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 };
        for _ in 0..20 {
            t += step;
            d.request(d.begin_motion(), forward, t);
            d.step(t, fresh());
        }
        let stale = SensorSnapshot { odometry_age_s: Some(1.0), ..fresh() };
        let mut change_seen = false;
        for _ in 0..10 {
            t += step;
            d.request(d.begin_motion(), forward, t);
            let (_, change) = d.step(t, stale.clone());
            change_seen |=
                change.is_some_and(|c| c.began.iter().any(|r| r.rule == Rule::OdometryStale));
        }
        assert!(d.last_command().is_zero() && change_seen);
        let touching = SensorSnapshot { bumper: BumperContact::Touching, ..fresh() };
        for _ in 0..10 {
            t += step;
            d.request(d.begin_motion(), forward, t);
            d.step(t, touching.clone());
        }
        assert_eq!(d.last_command().linear_mps, 0.0);
        let blocking = d.blocked_by(forward);
        assert_eq!(
            blocking.iter().map(|r| r.rule).collect::<Vec<_>>(),
            [Rule::ContactLatched],
            "{blocking:?}"
        );
        assert!(blocking[0].cause.contains("contact"), "{blocking:?}");
        assert!(
            d.blocked_by(BaseVelocity { linear_mps: -0.1, angular_radps: 0.0 }).is_empty(),
            "reverse stays allowed"
        );
        assert!(
            d.blocked_by(BaseVelocity { linear_mps: 0.0, angular_radps: 0.5 }).is_empty(),
            "turning stays allowed"
        );
    }

    #[test]
    fn near_an_obstacle_the_base_creeps_up_to_the_stop_distance_then_is_held_there() {
        let d = driver();
        let mut t = Instant::now();
        let step = Duration::from_millis(20);
        let forward = BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 };
        // 1 cm beyond the stop distance: the ramp alone would allow 0.0067 m/s; the floor allows 0.04.
        let near =
            SensorSnapshot { obstacle_ahead: ObstacleAhead::At { distance_m: 0.21 }, ..fresh() };
        for _ in 0..10 {
            t += step;
            d.request(d.begin_motion(), forward, t);
            d.step(t, near.clone());
        }
        assert_eq!(d.last_command().linear_mps, 0.04, "{:?}", d.last_command());
        assert!(d.blocked_by(forward).is_empty(), "slowed, not blocked");
        // At the stop distance: held at zero, and the rule says why.
        let at_stop =
            SensorSnapshot { obstacle_ahead: ObstacleAhead::At { distance_m: 0.2 }, ..fresh() };
        for _ in 0..3 {
            t += step;
            d.request(d.begin_motion(), forward, t);
            d.step(t, at_stop.clone());
        }
        assert_eq!(d.last_command().linear_mps, 0.0);
        let blocking = d.blocked_by(forward);
        assert_eq!(blocking.len(), 1, "{blocking:?}");
        assert_eq!((blocking[0].rule, blocking[0].distance_m), (Rule::ObstacleAhead, Some(0.2)));
        assert!(
            d.blocked_by(BaseVelocity { linear_mps: -0.1, angular_radps: 0.0 }).is_empty(),
            "backing away stays allowed"
        );
    }

    #[test]
    fn a_depth_reading_counts_only_while_fresh_and_its_absence_is_unknown_not_clear() {
        let d = driver();
        let t0 = Instant::now();
        let max_age = Some(Duration::from_millis(500));
        assert_eq!(
            d.obstacle_ahead(t0, None, None),
            ObstacleAhead::NotSensed,
            "no depth camera configured"
        );
        assert_eq!(
            d.obstacle_ahead(t0, max_age, None),
            ObstacleAhead::Unknown { age_s: None, max_age_s: 0.5 },
            "none received yet"
        );
        assert!(
            d.note_obstacle_unmeasured("frame 'x' is not in the TF tree".into()),
            "the first failure is news"
        );
        assert!(
            !d.note_obstacle_unmeasured("frame 'x' is not in the TF tree (again)".into()),
            "the next ones are not"
        );
        assert_eq!(
            d.obstacle_unmeasured().as_deref(),
            Some("frame 'x' is not in the TF tree (again)")
        );
        let origin = Pose2D { x_m: 0.0, y_m: 0.0, yaw_rad: 0.0 };
        let frame =
            Observation::empty(SourceKind::DepthCamera, 0.02, origin, t0, d.surroundings().grid());
        let said = d.note_frame(frame.clone(), &[], |_| Verdict::Unknown);
        assert!(
            said.iter().any(|l| l.contains("observes again")),
            "a measurement after failures: a recovery: {said:?}"
        );
        assert_eq!(d.obstacle_unmeasured(), None);
        assert_eq!(
            d.obstacle_ahead(t0 + Duration::from_millis(100), max_age, None),
            ObstacleAhead::Clear
        );
        d.note_frame(frame, &[(0.3, 0.0, 0.1), (0.3, 0.0, 0.12)], |_| Verdict::Unknown);
        let remembered = d.surroundings().reading(Some(origin), t0, None).ahead_m;
        assert_eq!(remembered, Some(0.3));
        assert_eq!(
            d.obstacle_ahead(t0 + Duration::from_millis(500), max_age, remembered),
            ObstacleAhead::At { distance_m: 0.3 }
        );
        assert_eq!(
            d.obstacle_ahead(t0 + Duration::from_millis(750), max_age, remembered),
            ObstacleAhead::Unknown { age_s: Some(0.75), max_age_s: 0.5 }
        );
        assert_eq!(
            d.obstacle_ahead(t0 + Duration::from_secs(9), None, remembered),
            ObstacleAhead::NotSensed
        );
    }

    #[test]
    fn the_configured_sensors_guard_forward_motion_and_unconfigured_ones_do_not() {
        let mut sensors = crate::config::SensorConfig::default();
        sensors.depth.topic = "camera/depth/image_raw".into();
        sensors.depth.max_age_s = 0.4;
        sensors.bumper.topic = String::new();
        assert_eq!(
            GuardSensors::from_config(&sensors),
            GuardSensors {
                depth_max_age: Some(Duration::from_millis(400)),
                bumper_max_age: None,
                scan_max_age: None,
                hazards_max_age: None,
                pose_max_age: Duration::from_millis(500)
            }
        );
    }

    #[test]
    fn a_stale_depth_camera_holds_forward_motion_and_the_move_hears_why() {
        let d = driver();
        let mut t = Instant::now();
        let step = Duration::from_millis(20);
        let forward = BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 };
        let stale = SensorSnapshot {
            obstacle_ahead: ObstacleAhead::Unknown { age_s: Some(1.7), max_age_s: 1.0 },
            ..fresh()
        };
        let mut began = Vec::new();
        for _ in 0..20 {
            t += step;
            d.request(d.begin_motion(), forward, t);
            let (command, change) = d.step(t, stale.clone());
            assert!(
                command.is_none_or(|c| c.linear_mps == 0.0),
                "forward let through: {command:?}"
            );
            began.extend(change.into_iter().flat_map(|c| c.began).map(|r| r.rule));
        }
        assert_eq!(began, [Rule::ObstacleSensingStale]);
        let blocking = d.blocked_by(forward);
        assert_eq!(
            blocking.iter().map(|r| r.rule).collect::<Vec<_>>(),
            [Rule::ObstacleSensingStale],
            "{blocking:?}"
        );
        assert!(
            blocking[0].cause.contains("depth camera") && blocking[0].cause.contains("1.70 s old"),
            "{blocking:?}"
        );
        assert!(
            d.blocked_by(BaseVelocity { linear_mps: -0.1, angular_radps: 0.0 }).is_empty(),
            "reverse stays allowed"
        );
        assert!(
            d.blocked_by(BaseVelocity { linear_mps: 0.0, angular_radps: 0.5 }).is_empty(),
            "turning stays allowed"
        );
        // Turning in place is published as asked.
        let turn = BaseVelocity { linear_mps: 0.0, angular_radps: 0.5 };
        for _ in 0..20 {
            t += step;
            d.request(d.begin_motion(), turn, t);
            d.step(t, stale.clone());
        }
        assert_eq!(d.last_command(), turn);
        // A stale bumper: its own rule; a fresh, clear depth reading lets forward through.
        let no_bumper = SensorSnapshot {
            bumper: BumperContact::Unknown { age_s: None, max_age_s: 0.5 },
            ..fresh()
        };
        for _ in 0..5 {
            t += step;
            d.request(d.begin_motion(), forward, t);
            d.step(t, no_bumper.clone());
        }
        assert_eq!(d.last_command().linear_mps, 0.0);
        assert_eq!(
            d.blocked_by(forward).iter().map(|r| r.rule).collect::<Vec<_>>(),
            [Rule::ContactSensingStale]
        );
        for _ in 0..20 {
            t += step;
            d.request(d.begin_motion(), forward, t);
            d.step(t, fresh());
        }
        assert_eq!(d.last_command().linear_mps, 0.2, "fresh and clear: full speed");
        assert!(d.restrictions().is_empty());
        // Without a depth camera or bumper configured no such rule exists.
        let unsensed = SensorSnapshot {
            obstacle_ahead: ObstacleAhead::NotSensed,
            bumper: BumperContact::NotSensed,
            ..fresh()
        };
        d.step(t + step, unsensed.clone());
        assert!(d.restrictions().is_empty());
    }

    fn scan_reading(ahead: Zone, behind: Zone, turning: Option<Zone>) -> ScanReading {
        ScanReading { ahead, behind, turning, beams: 360, valid: 360, self_hits: 0 }
    }

    #[test]
    fn the_laser_checks_reverse_moves_and_a_stale_or_blind_scanner_is_not_clear() {
        let d = driver();
        let mut t = Instant::now();
        let step = Duration::from_millis(20);
        let back = BaseVelocity { linear_mps: -0.2, angular_radps: 0.0 };
        let forward = BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 };
        let turn = BaseVelocity { linear_mps: 0.0, angular_radps: 0.5 };
        let with = |guard: ScanGuard| SensorSnapshot { scan: guard, ..fresh() };
        // An obstacle 0.2 m behind (the stop distance): reverse held at zero, forward free.
        let behind = with(ScanGuard::Fresh(scan_reading(
            Zone::Clear,
            Zone::At { distance_m: 0.2 },
            Some(Zone::Clear),
        )));
        for _ in 0..10 {
            t += step;
            d.request(d.begin_motion(), back, t);
            d.step(t, behind.clone());
        }
        assert_eq!(d.last_command().linear_mps, 0.0);
        assert_eq!(
            d.blocked_by(back).iter().map(|r| r.rule).collect::<Vec<_>>(),
            [Rule::ObstacleBehind]
        );
        assert!(d.blocked_by(forward).is_empty() && d.blocked_by(turn).is_empty());
        // Nearer than the slow-down distance: reverse limited, never below the creep floor.
        let near = with(ScanGuard::Fresh(scan_reading(
            Zone::Clear,
            Zone::At { distance_m: 0.21 },
            Some(Zone::Clear),
        )));
        for _ in 0..10 {
            t += step;
            d.request(d.begin_motion(), back, t);
            d.step(t, near.clone());
        }
        assert_eq!(d.last_command().linear_mps, -0.04, "{:?}", d.last_command());
        // The laser ahead and the depth camera: the nearer wins.
        let both = SensorSnapshot {
            obstacle_ahead: ObstacleAhead::At { distance_m: 0.45 },
            ..with(ScanGuard::Fresh(scan_reading(
                Zone::At { distance_m: 0.19 },
                Zone::Clear,
                Some(Zone::Clear),
            )))
        };
        for _ in 0..5 {
            t += step;
            d.request(d.begin_motion(), forward, t);
            d.step(t, both.clone());
        }
        assert_eq!(d.blocked_by(forward).first().and_then(|r| r.distance_m), Some(0.19));
        // Something in the turning sweep: turning held, straight motion allowed.
        let beside = with(ScanGuard::Fresh(scan_reading(
            Zone::Clear,
            Zone::Clear,
            Some(Zone::At { distance_m: 0.16 }),
        )));
        for _ in 0..5 {
            t += step;
            d.request(d.begin_motion(), turn, t);
            d.step(t, beside.clone());
        }
        assert_eq!(d.last_command().angular_radps, 0.0);
        assert_eq!(
            d.blocked_by(turn).iter().map(|r| r.rule).collect::<Vec<_>>(),
            [Rule::ObstacleTurning]
        );
        // A blind zone behind reads as an obstacle at an unknown distance.
        let blind = with(ScanGuard::Fresh(scan_reading(
            Zone::Clear,
            Zone::Blind { unknown: 50, beams: 60 },
            Some(Zone::Clear),
        )));
        for _ in 0..5 {
            t += step;
            d.request(d.begin_motion(), back, t);
            d.step(t, blind.clone());
        }
        assert_eq!(d.last_command().linear_mps, 0.0);
        assert!(d.blocked_by(back)[0].distance_m.is_some_and(f64::is_nan));
        // No scan at all: nothing moves (this footprint sweeps when turning), and the reason says why.
        d.note_scan_unmeasured("frame 'base_scan' is not in the TF tree".into());
        let stale = with(d.scan_guard(t, Some(Duration::from_millis(500))));
        assert_eq!(stale.scan, ScanGuard::Unknown { age_s: None, max_age_s: 0.5 });
        for velocity in [back, forward, turn] {
            for _ in 0..5 {
                t += step;
                d.request(d.begin_motion(), velocity, t);
                d.step(t, stale.clone());
            }
            assert!(d.last_command().is_zero(), "{velocity:?} let through: {:?}", d.last_command());
            let blocking = d.blocked_by(velocity);
            assert_eq!(
                blocking.iter().map(|r| r.rule).collect::<Vec<_>>(),
                [Rule::ScanSensingStale],
                "{blocking:?}"
            );
            assert!(blocking[0].cause.contains("base_scan"), "{blocking:?}");
        }
        // A fresh reading counts only while fresh.
        assert!(
            d.note_scan(scan_reading(Zone::Clear, Zone::Clear, Some(Zone::Clear)), t),
            "a recovery"
        );
        assert!(matches!(
            d.scan_guard(t + Duration::from_millis(400), Some(Duration::from_millis(500))),
            ScanGuard::Fresh(_)
        ));
        assert!(matches!(
            d.scan_guard(t + Duration::from_millis(600), Some(Duration::from_millis(500))),
            ScanGuard::Unknown { age_s: Some(_), .. }
        ));
        assert_eq!(d.scan_guard(t, None), ScanGuard::NotSensed);
    }

    #[test]
    fn create3_hazards_bump_latches_cliff_stops_forward_backup_limit_stops_reverse() {
        let d = driver();
        let mut t = Instant::now();
        let step = Duration::from_millis(20);
        let forward = BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 };
        let back = BaseVelocity { linear_mps: -0.2, angular_radps: 0.0 };
        let with = |flags: HazardFlags| SensorSnapshot { hazards: Some(flags), ..fresh() };
        let run = |velocity: BaseVelocity, snapshot: SensorSnapshot, t: &mut Instant| {
            for _ in 0..10 {
                *t += step;
                d.request(d.begin_motion(), velocity, *t);
                d.step(*t, snapshot.clone());
            }
            d.last_command()
        };
        assert_eq!(
            run(forward, with(HazardFlags { contact: true, ..HazardFlags::default() }), &mut t)
                .linear_mps,
            0.0,
            "a bump stops forward"
        );
        assert_eq!(
            d.blocked_by(forward).iter().map(|r| r.rule).collect::<Vec<_>>(),
            [Rule::ContactLatched]
        );
        assert!(d.blocked_by(back).is_empty(), "reverse is the escape");
        assert_eq!(
            run(forward, with(HazardFlags::default()), &mut t).linear_mps,
            0.0,
            "the bump stays latched when clear"
        );
        assert!(run(back, with(HazardFlags::default()), &mut t).linear_mps < 0.0);
        let cliff = with(HazardFlags { cliff: true, ..HazardFlags::default() });
        run(forward, cliff, &mut t);
        assert!(d.blocked_by(forward).iter().any(|r| r.rule == Rule::Cliff));
        assert!(!d.blocked_by(back).iter().any(|r| r.rule == Rule::Cliff));
        let limit = with(HazardFlags { backup_limit: true, ..HazardFlags::default() });
        assert_eq!(run(back, limit, &mut t).linear_mps, 0.0, "the backup limit stops reverse");
        assert_eq!(
            d.blocked_by(back).iter().map(|r| r.rule).collect::<Vec<_>>(),
            [Rule::BackupLimit]
        );
        let stop = with(HazardFlags { stop: true, ..HazardFlags::default() });
        run(BaseVelocity { linear_mps: 0.0, angular_radps: 0.5 }, stop, &mut t);
        assert!(d.last_command().is_zero());
    }
}

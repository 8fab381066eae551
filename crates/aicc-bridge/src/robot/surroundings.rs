//! What the obstacle sources have observed around the base: their latest
//! observations of the zones, the obstacle memory, and what would observe
//! a zone that is not. The monitors fill it frame by frame; the base
//! driver reads it at every control step. No I/O and no clock: instants
//! come from the callers.
use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::governor::coverage::base_to_odom;
use crate::governor::coverage::{
    zone_view, Direction, HeadCover, Observation, SourceKind, SourceState, ZoneGrid, ZoneView,
};
use crate::governor::footprint::Footprint;
use crate::governor::memory::{FreeSpaceMemory, ObstacleMemory, Remembered, Verdict};
use crate::governor::safety::{Pose2D, UnobservedZone};

/// Points farther than this from the robot are forgotten (they will be
/// seen again on the way there), m.
const FORGET_BEYOND_M: f64 = 3.0;
/// Remembered points at most (a wall in view within 2 m is a few hundred).
const MEMORY_CAPACITY: usize = 20_000;
/// The memory's cell: one point kept per cell, so distances are within
/// this of the nearest point seen, m.
const MEMORY_CELL_M: f64 = 0.01;
/// Places seen clear kept at most (a 3 m disc of 2 cm cells is 70k).
const FREE_SPACE_CAPACITY: usize = 60_000;

/// A source as configured: whether the robot has it and how old its frames may be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SourceConfig {
    pub kind: SourceKind,
    pub max_age: Duration,
}

/// The latest of one source.
#[derive(Debug, Clone, Default)]
struct SourceSlot {
    observation: Option<Observation>,
    /// Why its latest frames gave no observation, if they did not.
    unmeasured: Option<String>,
}

/// The sources' observations, the memory, and the remedies.
#[derive(Debug)]
pub struct Surroundings {
    grid: ZoneGrid,
    footprint: Footprint,
    required_height_m: f64,
    max_unobserved_fraction: f64,
    depth: Option<(SourceConfig, SourceSlot)>,
    laser: Option<(SourceConfig, SourceSlot)>,
    memory: ObstacleMemory,
    /// Where the floor was seen clear, and for how long that counts.
    free: FreeSpaceMemory,
    observed_memory: Duration,
    /// What would observe each direction's zone when it is not, e.g. "look_at
    /// pan 0°, tilt 46° observes it", per direction (ahead, behind).
    remedies: [Option<String>; 2],
    /// The head pose that observes each direction's zone best, if the robot has a head.
    covers: [Option<HeadCover>; 2],
    /// The head poses have been searched for (from the first depth frame):
    /// `covers` then says what there is.
    covers_searched: bool,
    /// What each source was found to watch, said once (source, direction).
    announced: HashSet<(SourceKind, Direction)>,
    /// When the last odometry jump happened (the jumped sample's capture):
    /// a frame captured before it and taken after it (measured meanwhile)
    /// was placed by the pose after the jump, so its points are not
    /// remembered.
    jumped_at: Option<Instant>,
}

/// What the governor reads at a control step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SurroundingsReading {
    /// The nearest remembered obstacle ahead, behind (m from the origin
    /// along the direction) and in the turning sweep (m from the origin).
    pub ahead_m: Option<f64>,
    pub behind_m: Option<f64>,
    pub turning_m: Option<f64>,
    /// The zones no fresh source observes (ahead, behind).
    pub unobserved: [Option<UnobservedZone>; 2],
}

impl Surroundings {
    pub fn new(
        grid: ZoneGrid,
        footprint: Footprint,
        required_height_m: f64,
        max_unobserved_fraction: f64,
        observed_memory: Duration,
        depth: Option<SourceConfig>,
        laser: Option<SourceConfig>,
    ) -> Self {
        Surroundings {
            grid,
            footprint,
            required_height_m,
            max_unobserved_fraction,
            depth: depth.map(|c| (c, SourceSlot::default())),
            laser: laser.map(|c| (c, SourceSlot::default())),
            memory: ObstacleMemory::new(MEMORY_CELL_M, MEMORY_CAPACITY),
            free: FreeSpaceMemory::new(
                crate::governor::coverage::DEFAULT_CELL_M,
                FREE_SPACE_CAPACITY,
            ),
            observed_memory,
            remedies: [None, None],
            covers: [None, None],
            covers_searched: false,
            announced: HashSet::new(),
            jumped_at: None,
        }
    }

    pub fn grid(&self) -> &ZoneGrid {
        &self.grid
    }

    pub fn memory(&self) -> &ObstacleMemory {
        &self.memory
    }

    fn slot(&mut self, kind: SourceKind) -> Option<&mut SourceSlot> {
        match kind {
            SourceKind::DepthCamera => self.depth.as_mut().map(|(_, s)| s),
            SourceKind::Laser => self.laser.as_mut().map(|(_, s)| s),
        }
    }

    /// Takes a source's frame: its observation of the zones, the obstacle
    /// points it saw (odometry frame; only the depth camera's are
    /// remembered), and its verdict on each remembered point. Returns the
    /// lines to log: what the source was found to watch, the first time,
    /// and whether it measures again after frames that did not.
    pub fn note(
        &mut self,
        observation: Observation,
        points: &[(f64, f64, f64)],
        verdict: impl FnMut(&Remembered) -> Verdict,
    ) -> Vec<String> {
        let mut said = Vec::new();
        let kind = observation.source;
        let (seen, pose) = (observation.captured, observation.pose);
        if self.jumped_at.is_some_and(|jumped| seen < jumped) {
            // Of the moment before an odometry jump: what it saw has no
            // known place now (a pedestal left behind by a kidnapped robot
            // would be remembered in its way, where it cannot be seen again).
            return said;
        }
        self.memory.review(verdict);
        if kind == SourceKind::DepthCamera {
            self.memory.remember(points.iter().copied(), seen, (pose.x_m, pose.y_m));
        }
        self.memory.forget_beyond((pose.x_m, pose.y_m), FORGET_BEYOND_M);
        // Only a source that sees low enough may say a place is clear.
        if observation.sees_down_to_m <= self.required_height_m + 1e-9 {
            let places: Vec<(f64, f64)> =
                observation.clear_centres().map(|c| base_to_odom(c, &pose)).collect();
            self.free.mark(places, seen);
        }
        self.free.unmark(points.iter().map(|(x, y, _)| (*x, *y)));
        self.free.forget_older(seen, self.observed_memory);
        for direction in Direction::BOTH {
            if self.announced.insert((kind, direction)) {
                said.push(self.describe_watch(&observation, direction));
            }
        }
        let Some(slot) = self.slot(kind) else { return said };
        if slot.unmeasured.take().is_some() {
            said.push(format!("obstacle sensing: {} observes again", kind.name()));
        }
        slot.observation = Some(observation);
        said
    }

    /// What one frame showed a source to watch in a direction, in words.
    fn describe_watch(&self, observation: &Observation, direction: Direction) -> String {
        let (start, end) = (self.grid.start_m(direction), self.grid.end_m(direction));
        let fraction = 100.0 * observation.fraction(direction);
        let height = observation.sees_down_to_m;
        let enough = if height <= self.required_height_m + 1e-9 {
            format!(
                "it sees obstacles down to {height:.2} m (required: {:.2} m)",
                self.required_height_m
            )
        } else {
            format!("it sees nothing lower than {height:.2} m, and obstacles down to {:.2} m must be seen (safety.min_obstacle_height_m): it does not watch this zone", self.required_height_m)
        };
        format!("coverage: {} observed {fraction:.0} % of the zone {} ({start:.2}-{end:.2} m) in its first frame; {enough}", observation.source.name(), direction.name())
    }

    /// Records why a source's frames give no observation; returns whether
    /// the frame before did give one (to log once, not per frame).
    pub fn note_unmeasured(&mut self, kind: SourceKind, why: String) -> bool {
        match self.slot(kind) {
            Some(slot) => slot.unmeasured.replace(why).is_none(),
            None => false,
        }
    }

    /// Why a source's frames give no observation, if they do not.
    pub fn unmeasured(&self, kind: SourceKind) -> Option<String> {
        match kind {
            SourceKind::DepthCamera => self.depth.as_ref().and_then(|(_, s)| s.unmeasured.clone()),
            SourceKind::Laser => self.laser.as_ref().and_then(|(_, s)| s.unmeasured.clone()),
        }
    }

    /// When a source's latest observation was captured, if it gave one.
    pub fn latest_capture(&self, kind: SourceKind) -> Option<Instant> {
        let slot = match kind {
            SourceKind::DepthCamera => self.depth.as_ref(),
            SourceKind::Laser => self.laser.as_ref(),
        };
        slot.and_then(|(_, s)| s.observation.as_ref()).map(|o| o.captured)
    }

    /// Sets what would observe a direction's zone (e.g. a head pose).
    pub fn set_remedy(&mut self, direction: Direction, remedy: Option<String>) {
        self.remedies[usize::from(direction == Direction::Behind)] = remedy;
    }

    /// Sets the head pose that observes a direction's zone best, and the
    /// remedy it gives.
    pub fn set_cover(&mut self, direction: Direction, cover: HeadCover) {
        self.set_remedy(direction, Some(cover.remedy(direction)));
        self.covers[usize::from(direction == Direction::Behind)] = Some(cover);
    }

    /// The search for head poses is over (whatever it found).
    pub fn mark_covers_searched(&mut self) {
        self.covers_searched = true;
    }

    /// Whether [`Self::cover`] says all there is to know (the search ran).
    pub fn covers_known(&self) -> bool {
        self.covers_searched
    }

    /// The head pose that observes a direction's zone best, if known.
    pub fn cover(&self, direction: Direction) -> Option<HeadCover> {
        self.covers[usize::from(direction == Direction::Behind)]
    }

    /// After an odometry jump: the remembered obstacles and free space are
    /// forgotten (whether the robot itself moved, a kidnapped robot, or
    /// only its odometry frame, a driver's restart, cannot be told apart,
    /// so where they lie now is unknown: what the sources do not observe
    /// again is unobserved, which the coverage rule treats as unknown);
    /// the sources' latest frames, of the moment before, are moved by
    /// `correction` with the robot. Frames captured before `jumped_at` (the
    /// jumped sample's capture) and taken later are not remembered. Returns
    /// how many points were forgotten.
    pub fn forget_after_jump(
        &mut self,
        correction: impl Fn(f64, f64) -> (f64, f64) + Copy,
        jumped_at: Instant,
    ) -> usize {
        self.jumped_at = Some(self.jumped_at.map_or(jumped_at, |t| t.max(jumped_at)));
        let forgotten = self.memory.len();
        self.memory.clear();
        self.free.clear();
        let move_pose = |pose: &mut Pose2D, yaw_change: f64| {
            (pose.x_m, pose.y_m) = correction(pose.x_m, pose.y_m);
            pose.yaw_rad += yaw_change;
        };
        // The yaw change of the correction, from two points.
        let (ax, ay) = correction(0.0, 0.0);
        let (bx, by) = correction(1.0, 0.0);
        let yaw_change = (by - ay).atan2(bx - ax);
        for slot in [self.depth.as_mut(), self.laser.as_mut()].into_iter().flatten() {
            if let Some(o) = slot.1.observation.as_mut() {
                move_pose(&mut o.pose, yaw_change);
            }
        }
        forgotten
    }

    /// The sources' states at `now`, for [`zone_view`].
    fn states(&self, now: Instant) -> Vec<SourceState<'_>> {
        [self.depth.as_ref(), self.laser.as_ref()]
            .into_iter()
            .flatten()
            .map(|(config, slot)| match (&slot.observation, &slot.unmeasured) {
                (Some(o), _) if now.saturating_duration_since(o.captured) <= config.max_age => {
                    SourceState::Fresh(o)
                }
                (_, Some(why)) => SourceState::Unmeasured { source: config.kind, why },
                (last, None) => SourceState::Stale {
                    source: config.kind,
                    age_s: last
                        .as_ref()
                        .map(|o| now.saturating_duration_since(o.captured).as_secs_f64()),
                    max_age_s: config.max_age.as_secs_f64(),
                },
            })
            .collect()
    }

    /// A direction's zone as the fresh sources observe it at `pose`.
    pub fn view(&self, direction: Direction, pose: Option<Pose2D>, now: Instant) -> ZoneView {
        let remembered = |x: f64, y: f64| self.free.is_clear(x, y, now, self.observed_memory);
        zone_view(
            &self.grid,
            direction,
            &self.states(now),
            pose,
            self.required_height_m,
            self.max_unobserved_fraction,
            &remembered,
        )
    }

    /// What the governor reads now.
    /// The nearest remembered point in `direction`'s corridor, in words
    /// (where in base_footprint, how high, how long ago it was seen): what
    /// an obstacle rule stops for, so that a log tells a real box from a
    /// phantom (a part of the robot, a frame placed with the wrong pose).
    pub fn describe_nearest(
        &self,
        direction: Direction,
        pose: &Pose2D,
        now: Instant,
    ) -> Option<String> {
        let nearest = self.memory.nearest(direction, pose, &self.grid, &self.footprint)?;
        let point = nearest.point;
        let (dx, dy) = (point.x_m - pose.x_m, point.y_m - pose.y_m);
        let left_m = -pose.yaw_rad.sin() * dx + pose.yaw_rad.cos() * dy;
        Some(format!(
            "{:.2} m {}, {left_m:+.2} m left, {:.2} m up (its cell's top {:.2} m), last seen {:.1} s ago; {} points remembered",
            nearest.distance_m,
            direction.name(),
            point.z_m,
            point.top_m,
            now.saturating_duration_since(point.seen).as_secs_f64(),
            self.memory.len()
        ))
    }

    pub fn reading(
        &self,
        pose: Option<Pose2D>,
        now: Instant,
        sweep_radius_m: Option<f64>,
    ) -> SurroundingsReading {
        let nearest = |direction| {
            pose.and_then(|p| self.memory.nearest(direction, &p, &self.grid, &self.footprint))
                .map(|n| n.distance_m)
        };
        let unobserved = Direction::BOTH.map(|direction| {
            let view = self.view(direction, pose, now);
            view.first_unobserved_m.map(|from_m| UnobservedZone {
                from_m,
                why: view.why,
                remedy: self.remedies[usize::from(direction == Direction::Behind)].clone(),
                watched: view.watched,
            })
        });
        SurroundingsReading {
            ahead_m: nearest(Direction::Ahead),
            behind_m: nearest(Direction::Behind),
            turning_m: sweep_radius_m.and_then(|radius| {
                pose.and_then(|p| self.memory.nearest_in_sweep(&p, &self.footprint, radius))
            }),
            unobserved,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governor::coverage::DEFAULT_CELL_M;

    const FOOTPRINT: Footprint =
        Footprint::Rectangle { front_m: 0.14, rear_m: 0.12, half_width_m: 0.14 };
    const ORIGIN: Pose2D = Pose2D { x_m: 0.0, y_m: 0.0, yaw_rad: 0.0 };

    fn surroundings() -> Surroundings {
        let grid = ZoneGrid::new(FOOTPRINT, 0.03, 0.5, DEFAULT_CELL_M);
        let depth =
            SourceConfig { kind: SourceKind::DepthCamera, max_age: Duration::from_millis(200) };
        let laser = SourceConfig { kind: SourceKind::Laser, max_age: Duration::from_millis(200) };
        Surroundings::new(
            grid,
            FOOTPRINT,
            0.05,
            0.1,
            Duration::from_secs(10),
            Some(depth),
            Some(laser),
        )
    }

    fn seeing_all_ahead(s: &Surroundings, at: Instant) -> Observation {
        let mut o = Observation::empty(SourceKind::DepthCamera, 0.02, ORIGIN, at, s.grid());
        for cell in 0..s.grid().cells(Direction::Ahead) {
            o.mark(Direction::Ahead, cell);
        }
        o
    }

    #[test]
    fn a_fresh_frame_observes_until_it_ages_and_the_memory_outlives_it() {
        let mut s = surroundings();
        let t0 = Instant::now();
        let first = s.note(seeing_all_ahead(&s, t0), &[(0.4, 0.0, 0.1), (0.4, 0.0, 0.12)], |_| {
            Verdict::Unknown
        });
        assert!(
            first
                .iter()
                .any(|line| line.contains("the depth camera observed 100 % of the zone ahead")),
            "{first:?}"
        );
        let now = s.reading(Some(ORIGIN), t0 + Duration::from_millis(100), None);
        assert_eq!(now.unobserved[0], None, "fresh: the way ahead is observed");
        assert!(
            now.unobserved[1].as_ref().is_some_and(|z| z.from_m == 0.12),
            "behind: nothing observes it"
        );
        assert_eq!(now.ahead_m, Some(0.4));
        let later = s.reading(Some(ORIGIN), t0 + Duration::from_millis(300), None);
        let stale = later.unobserved[0].as_ref().expect("the frame aged: unobserved");
        assert!(stale.why.contains("0.30 s old"), "{}", stale.why);
        assert_eq!(later.ahead_m, Some(0.4), "what was seen is remembered");
        // A frame that gives none says why; the next that does recovers.
        assert!(s.note_unmeasured(
            SourceKind::DepthCamera,
            "frame 'camera' is not in the TF tree".into()
        ));
        let unmeasured = s.reading(Some(ORIGIN), t0 + Duration::from_millis(300), None);
        assert!(unmeasured.unobserved[0].as_ref().unwrap().why.contains("not in the TF tree"));
        let again = s
            .note(seeing_all_ahead(&s, t0 + Duration::from_millis(300)), &[], |_| Verdict::Unknown);
        assert!(again.iter().any(|l| l.contains("observes again")), "{again:?}");
        // A remedy is named in the unobserved zone.
        s.set_remedy(Direction::Behind, Some("nothing on this robot observes it".into()));
        let reading = s.reading(Some(ORIGIN), t0 + Duration::from_millis(350), None);
        assert_eq!(
            reading.unobserved[1].as_ref().unwrap().remedy.as_deref(),
            Some("nothing on this robot observes it")
        );
    }

    #[test]
    fn the_nearest_remembered_point_is_described_where_the_robot_sees_it() {
        let mut s = surroundings();
        let t0 = Instant::now();
        assert_eq!(s.describe_nearest(Direction::Ahead, &ORIGIN, t0), None, "nothing remembered");
        s.note(seeing_all_ahead(&s, t0), &[(0.4, 0.05, 0.1), (0.4, 0.05, 0.12)], |_| {
            Verdict::Unknown
        });
        // The robot turned left by 90 degrees and moved 0.1 m: the point is now to its right.
        let turned = Pose2D { x_m: 0.0, y_m: 0.0, yaw_rad: std::f64::consts::FRAC_PI_2 };
        assert_eq!(
            s.describe_nearest(Direction::Ahead, &turned, t0),
            None,
            "not in the corridor ahead any more"
        );
        let text = s
            .describe_nearest(Direction::Ahead, &ORIGIN, t0 + Duration::from_millis(1500))
            .unwrap();
        assert!(text.starts_with("0.40 m ahead, +0.05 m left, 0.10 m up (its cell's top 0.12 m), last seen 1.5 s ago"), "{text}");
    }

    #[test]
    fn an_odometry_jump_forgets_what_was_remembered_and_moves_the_latest_frame_with_the_robot() {
        let mut s = surroundings();
        let t0 = Instant::now();
        s.note(seeing_all_ahead(&s, t0), &[(0.4, 0.0, 0.1), (0.4, 0.0, 0.1)], |_| Verdict::Unknown);
        let before = s.reading(Some(ORIGIN), t0 + Duration::from_millis(50), None);
        assert_eq!(before.ahead_m.map(|d| (d * 1000.0).round() / 1000.0), Some(0.4));
        // The odometry frame jumped: the robot is now reported at x = 1.0
        // where it was at 0.0. What it remembered no longer has a place.
        assert!(s.forget_after_jump(|x, y| (x + 1.0, y), t0 + Duration::from_millis(40)) > 0);
        let moved = Pose2D { x_m: 1.0, ..ORIGIN };
        let reading = s.reading(Some(moved), t0 + Duration::from_millis(50), None);
        assert_eq!(reading.ahead_m, None, "{reading:?}");
        assert_eq!(
            reading.unobserved[0], None,
            "the latest frame still observes the way, moved with the robot"
        );
    }

    #[test]
    fn a_frame_captured_before_an_odometry_jump_and_taken_after_it_is_not_remembered() {
        let mut s = surroundings();
        let t0 = Instant::now();
        let jumped_at = t0 + Duration::from_millis(30);
        s.forget_after_jump(|x, y| (x + 1.0, y), jumped_at);
        // Measured while the jump was noticed: captured 10 ms before it,
        // placed by the pose after it.
        let moved = Pose2D { x_m: 1.0, ..ORIGIN };
        let mut late = seeing_all_ahead(&s, jumped_at - Duration::from_millis(10));
        late.pose = moved;
        s.note(late, &[(1.4, 0.0, 0.1), (1.4, 0.0, 0.1)], |_| Verdict::Unknown);
        let now = jumped_at + Duration::from_millis(20);
        assert_eq!(s.reading(Some(moved), now, None).ahead_m, None);
        // A frame captured after the jump is remembered as ever.
        let mut next = seeing_all_ahead(&s, jumped_at + Duration::from_millis(5));
        next.pose = moved;
        s.note(next, &[(1.4, 0.0, 0.1), (1.4, 0.0, 0.1)], |_| Verdict::Unknown);
        let ahead = s.reading(Some(moved), now, None).ahead_m;
        assert_eq!(ahead.map(|d| (d * 1000.0).round() / 1000.0), Some(0.4));
    }
}

//! Obstacle memory: what a source saw stays, in the odometry frame, until
//! a source that observes that place again shows it gone. A low box that
//! leaves the camera's view as the robot approaches (or turns) still
//! stops the robot at the stop distance. Pure: no ROS, no clock.
//!
//! Obstacle points are kept one per cell of a grid in the odometry frame
//! (the first point of a cell is kept, its top raised as more are seen).
//! Forgetting is the caller's judgement, frame by frame: it tells
//! [`ObstacleMemory::review`] for each remembered point whether its frame
//! saw past it (gone), saw it, or could not tell. A point is forgotten
//! after [`MISSES_TO_FORGET`] frames in a row saw past it, so that one
//! pixel beside a thin edge cannot erase it.
use std::collections::HashMap;
use std::time::Instant;

use super::coverage::{odom_to_base, Direction, ZoneGrid};
use super::footprint::Footprint;
use super::safety::Pose2D;

/// Frames in a row that must see past a point before it is forgotten.
pub const MISSES_TO_FORGET: u8 = 2;

/// One remembered obstacle point, in the odometry frame.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Remembered {
    pub x_m: f64,
    pub y_m: f64,
    /// Its height above the floor where it was seen, m (for clearing: a
    /// source that sees only above this cannot show it gone).
    pub z_m: f64,
    /// The highest point seen in its cell, m.
    pub top_m: f64,
    /// The last frame that saw it.
    #[serde(skip)]
    pub seen: Instant,
    /// Frames in a row that saw past it.
    pub misses: u8,
}

/// What a frame says of one remembered point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The frame saw beyond it: nothing is there now.
    SeenPast,
    /// The frame saw it (or something nearer in front of it).
    Seen,
    /// The frame cannot tell (out of view, no return).
    Unknown,
}

/// The nearest remembered obstacle in a direction.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Nearest {
    /// Along the direction, from the origin of `base_footprint`, m.
    pub distance_m: f64,
    pub point: Remembered,
}

/// The memory.
#[derive(Debug, Clone)]
pub struct ObstacleMemory {
    cells: HashMap<(i64, i64), Remembered>,
    cell_m: f64,
    capacity: usize,
    /// Points dropped because the memory was full (the farthest go first).
    dropped: u64,
}

impl ObstacleMemory {
    /// A memory of cells `cell_m` wide holding at most `capacity` points.
    pub fn new(cell_m: f64, capacity: usize) -> Self {
        ObstacleMemory { cells: HashMap::new(), cell_m, capacity, dropped: 0 }
    }

    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    pub fn points(&self) -> impl Iterator<Item = &Remembered> {
        self.cells.values()
    }

    fn key(&self, x: f64, y: f64) -> (i64, i64) {
        ((x / self.cell_m).floor() as i64, (y / self.cell_m).floor() as i64)
    }

    /// Remembers obstacle points seen at `seen` (odometry frame, m). A
    /// non-finite point is skipped. When full, the points farthest from
    /// `near` are forgotten first (and counted).
    pub fn remember(
        &mut self,
        points: impl IntoIterator<Item = (f64, f64, f64)>,
        seen: Instant,
        near: (f64, f64),
    ) {
        for (x, y, z) in points {
            if !(x.is_finite() && y.is_finite() && z.is_finite()) {
                continue;
            }
            let key = self.key(x, y);
            self.cells
                .entry(key)
                .and_modify(|r| {
                    r.top_m = r.top_m.max(z);
                    r.z_m = r.z_m.min(z);
                    r.seen = seen;
                    r.misses = 0;
                })
                .or_insert(Remembered { x_m: x, y_m: y, z_m: z, top_m: z, seen, misses: 0 });
        }
        if self.cells.len() > self.capacity {
            let mut by_distance: Vec<((i64, i64), f64)> = self
                .cells
                .iter()
                .map(|(k, r)| (*k, (r.x_m - near.0).hypot(r.y_m - near.1)))
                .collect();
            by_distance.sort_by(|a, b| b.1.total_cmp(&a.1));
            let excess = self.cells.len() - self.capacity;
            for (key, _) in by_distance.into_iter().take(excess) {
                self.cells.remove(&key);
                self.dropped += 1;
            }
        }
    }

    /// Lets a frame judge every remembered point; a point seen past in
    /// [`MISSES_TO_FORGET`] frames in a row is forgotten. Returns how many were.
    pub fn review(&mut self, mut verdict: impl FnMut(&Remembered) -> Verdict) -> usize {
        let before = self.cells.len();
        self.cells.retain(|_, r| match verdict(r) {
            Verdict::SeenPast => {
                r.misses = r.misses.saturating_add(1);
                r.misses < MISSES_TO_FORGET
            }
            Verdict::Seen => {
                r.misses = 0;
                true
            }
            Verdict::Unknown => true,
        });
        before - self.cells.len()
    }

    /// Forgets the points farther than `radius_m` from `centre` (they
    /// cannot matter before the robot has driven there, and will be seen
    /// again on the way). Returns how many.
    pub fn forget_beyond(&mut self, centre: (f64, f64), radius_m: f64) -> usize {
        let before = self.cells.len();
        self.cells.retain(|_, r| (r.x_m - centre.0).hypot(r.y_m - centre.1) <= radius_m);
        before - self.cells.len()
    }

    /// Forgets everything (after an odometry jump: where it lies is unknown).
    pub fn clear(&mut self) {
        self.cells.clear();
    }

    /// The nearest remembered obstacle in `direction`'s corridor at `pose`:
    /// beyond the origin along the direction, within the zone's half width,
    /// outside the footprint (a point inside it is the robot itself, or
    /// already touching: the bumper's business).
    pub fn nearest(
        &self,
        direction: Direction,
        pose: &Pose2D,
        grid: &ZoneGrid,
        footprint: &Footprint,
    ) -> Option<Nearest> {
        self.cells
            .values()
            .filter_map(|r| {
                let (x, y) = odom_to_base((r.x_m, r.y_m), pose);
                let along = direction.sign() * x;
                (along > 0.0 && y.abs() <= grid.half_width_m && !footprint.contains(x, y))
                    .then_some(Nearest { distance_m: along, point: *r })
            })
            .min_by(|a, b| a.distance_m.total_cmp(&b.distance_m))
    }

    /// The nearest remembered obstacle inside the circle of `radius_m` the
    /// footprint sweeps turning in place (outside the footprint), m from the origin.
    pub fn nearest_in_sweep(
        &self,
        pose: &Pose2D,
        footprint: &Footprint,
        radius_m: f64,
    ) -> Option<f64> {
        self.cells
            .values()
            .filter_map(|r| {
                let (x, y) = odom_to_base((r.x_m, r.y_m), pose);
                let distance = x.hypot(y);
                (distance <= radius_m && !footprint.contains(x, y)).then_some(distance)
            })
            .min_by(f64::total_cmp)
    }
}

/// Free-space memory: where the floor was seen clear lately, in the
/// odometry frame. A camera that cannot see the floor right in front of
/// the robot (its own arm's base in the way) saw it a moment earlier, a
/// little farther ahead; while the way is watched (see
/// [`super::coverage::zone_view`]) such a cell counts as observed for a
/// bounded time, after which it is unknown again.
#[derive(Debug, Clone)]
pub struct FreeSpaceMemory {
    cells: HashMap<(i64, i64), Instant>,
    cell_m: f64,
    capacity: usize,
}

impl FreeSpaceMemory {
    pub fn new(cell_m: f64, capacity: usize) -> Self {
        FreeSpaceMemory { cells: HashMap::new(), cell_m, capacity }
    }

    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    fn key(&self, x: f64, y: f64) -> (i64, i64) {
        ((x / self.cell_m).floor() as i64, (y / self.cell_m).floor() as i64)
    }

    /// Notes places (odometry frame) seen clear at `seen`; when full, the
    /// oldest are forgotten first.
    pub fn mark(&mut self, places: impl IntoIterator<Item = (f64, f64)>, seen: Instant) {
        for (x, y) in places {
            if x.is_finite() && y.is_finite() {
                let key = self.key(x, y);
                self.cells.insert(key, seen);
            }
        }
        if self.cells.len() > self.capacity {
            let mut by_age: Vec<((i64, i64), Instant)> =
                self.cells.iter().map(|(k, t)| (*k, *t)).collect();
            by_age.sort_by_key(|(_, t)| *t);
            for (key, _) in by_age.into_iter().take(self.cells.len() - self.capacity) {
                self.cells.remove(&key);
            }
        }
    }

    /// A place an obstacle was seen at again is no longer known clear.
    pub fn unmark(&mut self, places: impl IntoIterator<Item = (f64, f64)>) {
        for (x, y) in places {
            let key = self.key(x, y);
            self.cells.remove(&key);
        }
    }

    /// Whether the place was seen clear within `max_age` of `now`.
    pub fn is_clear(&self, x: f64, y: f64, now: Instant, max_age: std::time::Duration) -> bool {
        self.cells
            .get(&self.key(x, y))
            .is_some_and(|seen| now.saturating_duration_since(*seen) <= max_age)
    }

    /// Forgets what is older than `max_age`.
    pub fn forget_older(&mut self, now: Instant, max_age: std::time::Duration) {
        self.cells.retain(|_, seen| now.saturating_duration_since(*seen) <= max_age);
    }

    /// Forgets everything: after an odometry jump the places no longer match.
    pub fn clear(&mut self) {
        self.cells.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FOOTPRINT: Footprint =
        Footprint::Rectangle { front_m: 0.14, rear_m: 0.12, half_width_m: 0.14 };

    fn grid() -> ZoneGrid {
        ZoneGrid::new(FOOTPRINT, 0.03, 0.5, 0.02)
    }

    fn at(x: f64, y: f64, yaw: f64) -> Pose2D {
        Pose2D { x_m: x, y_m: y, yaw_rad: yaw }
    }

    #[test]
    fn a_box_seen_ahead_stays_as_the_robot_approaches_and_its_distance_follows_the_pose() {
        let mut memory = ObstacleMemory::new(0.02, 1000);
        let t0 = Instant::now();
        // The front face of a box 1.5 m ahead, seen from the origin.
        memory.remember((0..10).map(|i| (1.4, -0.09 + 0.02 * i as f64, 0.05)), t0, (0.0, 0.0));
        let near =
            memory.nearest(Direction::Ahead, &at(0.0, 0.0, 0.0), &grid(), &FOOTPRINT).unwrap();
        assert!((near.distance_m - 1.4).abs() < 1e-9, "{near:?}");
        // 1.15 m on: 0.25 m ahead, although no frame has seen it since.
        let near =
            memory.nearest(Direction::Ahead, &at(1.15, 0.0, 0.0), &grid(), &FOOTPRINT).unwrap();
        assert!((near.distance_m - 0.25).abs() < 1e-9, "{near:?}");
        assert!(memory
            .nearest(Direction::Behind, &at(1.15, 0.0, 0.0), &grid(), &FOOTPRINT)
            .is_none());
        // Turned left by 90 degrees: it is beside the robot, not ahead.
        assert!(memory
            .nearest(
                Direction::Ahead,
                &at(1.15, 0.0, std::f64::consts::FRAC_PI_2),
                &grid(),
                &FOOTPRINT
            )
            .is_none());
        // Turned round: behind.
        let behind = memory
            .nearest(Direction::Behind, &at(1.15, 0.0, std::f64::consts::PI), &grid(), &FOOTPRINT)
            .unwrap();
        assert!((behind.distance_m - 0.25).abs() < 1e-9);
        // Past it and turned back: inside the footprint is not an obstacle ahead.
        assert!(memory
            .nearest(Direction::Ahead, &at(1.35, 0.0, 0.0), &grid(), &FOOTPRINT)
            .is_none());
    }

    #[test]
    fn a_point_is_forgotten_only_after_frames_in_a_row_see_past_it() {
        let mut memory = ObstacleMemory::new(0.02, 1000);
        let t0 = Instant::now();
        memory.remember([(0.5, 0.0, 0.05), (0.7, 0.0, 0.05)], t0, (0.0, 0.0));
        assert_eq!(
            memory.review(|r| if r.x_m < 0.6 { Verdict::SeenPast } else { Verdict::Unknown }),
            0,
            "one miss is not enough"
        );
        assert_eq!(memory.review(|_| Verdict::Seen), 0);
        assert_eq!(
            memory.review(|r| if r.x_m < 0.6 { Verdict::SeenPast } else { Verdict::Unknown }),
            0,
            "the count restarted"
        );
        assert_eq!(
            memory.review(|r| if r.x_m < 0.6 { Verdict::SeenPast } else { Verdict::Unknown }),
            1
        );
        assert_eq!(memory.len(), 1);
        // Seeing it again resets the count.
        memory.review(|_| Verdict::SeenPast);
        memory.remember([(0.7, 0.0, 0.1)], t0, (0.0, 0.0));
        memory.review(|_| Verdict::SeenPast);
        assert_eq!(memory.len(), 1);
        assert_eq!(memory.points().next().unwrap().top_m, 0.1);
    }

    #[test]
    fn a_full_memory_forgets_the_farthest_first_and_a_jump_forgets_everything() {
        let mut memory = ObstacleMemory::new(0.02, 3);
        let t0 = Instant::now();
        memory.remember(
            [
                (0.3, 0.0, 0.05),
                (2.0, 0.0, 0.05),
                (0.5, 0.0, 0.05),
                (0.4, 0.0, 0.05),
                (f64::NAN, 0.0, 0.0),
            ],
            t0,
            (0.0, 0.0),
        );
        assert_eq!((memory.len(), memory.dropped()), (3, 1));
        assert!(memory.points().all(|r| r.x_m < 1.0));
        assert_eq!(memory.forget_beyond((0.0, 0.0), 0.45), 1);
        let near =
            memory.nearest(Direction::Ahead, &at(0.0, 0.0, 0.0), &grid(), &FOOTPRINT).unwrap();
        assert!((near.distance_m - 0.3).abs() < 1e-9);
        memory.clear();
        assert_eq!(memory.len(), 0);
        assert!(memory
            .nearest(Direction::Ahead, &at(0.0, 0.0, 0.0), &grid(), &FOOTPRINT)
            .is_none());
    }

    #[test]
    fn free_space_is_remembered_for_a_while_and_an_obstacle_unmarks_it() {
        let mut free = FreeSpaceMemory::new(0.02, 3);
        let t0 = Instant::now();
        let ten = std::time::Duration::from_secs(10);
        free.mark([(0.30, 0.0), (0.32, 0.0), (f64::NAN, 0.0)], t0);
        assert!(free.is_clear(0.305, 0.005, t0 + std::time::Duration::from_secs(9), ten));
        assert!(
            !free.is_clear(0.305, 0.005, t0 + std::time::Duration::from_secs(11), ten),
            "too old"
        );
        assert!(!free.is_clear(0.5, 0.0, t0, ten), "never seen");
        free.unmark([(0.31, 0.01)]);
        assert!(!free.is_clear(0.30, 0.0, t0, ten));
        free.mark([(1.0, 0.0), (1.1, 0.0), (1.2, 0.0)], t0 + std::time::Duration::from_secs(1));
        assert_eq!(free.len(), 3, "the oldest forgotten first when full");
        assert!(!free.is_clear(0.32, 0.0, t0 + std::time::Duration::from_secs(1), ten));
        free.forget_older(t0 + std::time::Duration::from_secs(20), ten);
        assert!(free.is_empty());
    }

    #[test]
    fn the_turning_sweep_sees_what_is_beside_the_robot() {
        let mut memory = ObstacleMemory::new(0.02, 100);
        memory.remember([(0.05, 0.17, 0.05)], Instant::now(), (0.0, 0.0));
        let d = memory.nearest_in_sweep(&at(0.0, 0.0, 0.0), &FOOTPRINT, 0.228).unwrap();
        assert!((d - 0.05f64.hypot(0.17)).abs() < 1e-9);
        assert!(
            memory
                .nearest(Direction::Ahead, &at(0.0, 0.0, 0.0), &grid(), &FOOTPRINT)
                .unwrap()
                .distance_m
                < 0.06,
            "in the margin beside the front: ahead"
        );
    }

    proptest! {
        /// Distances are the same whatever the odometry frame: a point and
        /// a pose moved together give the same answer.
        #[test]
        fn distances_do_not_depend_on_where_the_odometry_frame_is(px in -1.0..1.0f64, py in -0.2..0.2f64, x in -3.0..3.0f64, y in -3.0..3.0f64, yaw in -3.2..3.2f64) {
            let mut local = ObstacleMemory::new(0.02, 100);
            local.remember([(px, py, 0.05)], Instant::now(), (0.0, 0.0));
            let mut moved = ObstacleMemory::new(0.02, 100);
            let pose = at(x, y, yaw);
            let (sin, cos) = yaw.sin_cos();
            moved.remember([(x + cos * px - sin * py, y + sin * px + cos * py, 0.05)], Instant::now(), (x, y));
            for d in Direction::BOTH {
                let a = local.nearest(d, &at(0.0, 0.0, 0.0), &grid(), &FOOTPRINT).map(|n| n.distance_m);
                let b = moved.nearest(d, &pose, &grid(), &FOOTPRINT).map(|n| n.distance_m);
                prop_assert_eq!(a.is_some(), b.is_some());
                if let (Some(a), Some(b)) = (a, b) {
                    prop_assert!((a - b).abs() < 1e-9);
                }
            }
        }
    }
}

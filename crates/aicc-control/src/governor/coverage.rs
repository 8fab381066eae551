//! What the robot's sensors actually observe of the ground a straight
//! motion will cross: coverage, not absence. Pure geometry and counting,
//! no ROS, no clock.
//!
//! Each direction of linear motion has a zone in `base_footprint`: from
//! the footprint's edge in that direction out to the slow-down distance,
//! as wide as the footprint plus the margin, cut into square cells. Each
//! frame of an obstacle source (the depth camera at the head's current
//! pose, the planar LiDAR) is turned into an [`Observation`]: which cells
//! it saw (floor or an obstacle, either way known), which it did not and
//! why (out of view, no return, the robot's own arm in the way, ...), and
//! the lowest obstacle it would have seen (a LiDAR sees nothing below its
//! plane). [`zone_view`] combines the fresh observations at the robot's
//! current pose (each observation is placed by the odometry pose it was
//! taken at, so the robot's motion since is accounted for) and answers
//! where the first row of the zone lies that no fresh source observes down
//! to the required obstacle height. Unknown is not clear: the governor
//! treats that row as an obstacle (or, as configured, creeps).
use std::time::Instant;

use super::footprint::Footprint;
use super::safety::Pose2D;

/// A direction of straight motion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Ahead,
    Behind,
}

impl Direction {
    pub const BOTH: [Direction; 2] = [Direction::Ahead, Direction::Behind];

    pub fn name(self) -> &'static str {
        match self {
            Direction::Ahead => "ahead",
            Direction::Behind => "behind",
        }
    }

    /// +1 ahead (+x), -1 behind.
    pub fn sign(self) -> f64 {
        match self {
            Direction::Ahead => 1.0,
            Direction::Behind => -1.0,
        }
    }

    fn index(self) -> usize {
        match self {
            Direction::Ahead => 0,
            Direction::Behind => 1,
        }
    }

    /// The direction a linear velocity drives in (None: not moving straight).
    pub fn of_linear(linear_mps: f64) -> Option<Direction> {
        if linear_mps > 0.0 {
            Some(Direction::Ahead)
        } else if linear_mps < 0.0 {
            Some(Direction::Behind)
        } else {
            None
        }
    }
}

/// The two zones, in `base_footprint` (REP-103: x forward, y left).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ZoneGrid {
    /// Where the footprint ends ahead of the origin, m.
    pub front_m: f64,
    /// ...and behind it, m (positive).
    pub rear_m: f64,
    /// Half the zone's width: the footprint's half width plus the margin, m.
    pub half_width_m: f64,
    /// How far from the origin each zone reaches (the slow-down distance), m.
    pub reach_m: f64,
    /// The side of a cell, m.
    pub cell_m: f64,
}

/// The cell size: fine enough for a 0.2 m stop distance, coarse enough
/// that a 320x240 depth frame has several pixels per cell at 1 m.
pub const DEFAULT_CELL_M: f64 = 0.02;

impl ZoneGrid {
    pub fn new(footprint: Footprint, margin_m: f64, reach_m: f64, cell_m: f64) -> Self {
        let (front_m, rear_m, half_width_m) = match footprint {
            Footprint::Rectangle { front_m, rear_m, half_width_m } => {
                (front_m, rear_m, half_width_m)
            }
            Footprint::Circle { radius_m } => (radius_m, radius_m, radius_m),
        };
        ZoneGrid { front_m, rear_m, half_width_m: half_width_m + margin_m, reach_m, cell_m }
    }

    /// Where the zone starts: the footprint's edge in that direction, m from the origin.
    pub fn start_m(&self, direction: Direction) -> f64 {
        match direction {
            Direction::Ahead => self.front_m,
            Direction::Behind => self.rear_m,
        }
    }

    /// Where it ends: the reach, or one cell beyond the footprint at least.
    pub fn end_m(&self, direction: Direction) -> f64 {
        self.reach_m.max(self.start_m(direction) + self.cell_m)
    }

    pub fn rows(&self, direction: Direction) -> usize {
        (((self.end_m(direction) - self.start_m(direction)) / self.cell_m).ceil() as usize).max(1)
    }

    pub fn columns(&self) -> usize {
        ((2.0 * self.half_width_m / self.cell_m).ceil() as usize).max(1)
    }

    pub fn cells(&self, direction: Direction) -> usize {
        self.rows(direction) * self.columns()
    }

    /// The distance from the origin of a row's near edge.
    pub fn row_start_m(&self, direction: Direction, row: usize) -> f64 {
        self.start_m(direction) + row as f64 * self.cell_m
    }

    /// A cell's centre in the base frame.
    pub fn centre(&self, direction: Direction, cell: usize) -> (f64, f64) {
        let (row, column) = (cell / self.columns(), cell % self.columns());
        let along = self.start_m(direction) + (row as f64 + 0.5) * self.cell_m;
        let y = -self.half_width_m + (column as f64 + 0.5) * self.cell_m;
        (direction.sign() * along, y)
    }

    /// The cell of a point of the base frame, if it lies in that direction's zone.
    pub fn cell_at(&self, direction: Direction, x: f64, y: f64) -> Option<usize> {
        let along = direction.sign() * x;
        let (start, end) = (self.start_m(direction), self.end_m(direction));
        // NaN fails every comparison.
        if !(along >= start && along < end && y >= -self.half_width_m && y < self.half_width_m) {
            return None;
        }
        let row = (((along - start) / self.cell_m) as usize).min(self.rows(direction) - 1);
        let column = (((y + self.half_width_m) / self.cell_m) as usize).min(self.columns() - 1);
        Some(row * self.columns() + column)
    }

    /// The zone and cell of a point of the base frame, in either zone.
    pub fn locate(&self, x: f64, y: f64) -> Option<(Direction, usize)> {
        Direction::BOTH.into_iter().find_map(|d| self.cell_at(d, x, y).map(|cell| (d, cell)))
    }

    /// The grid frames are recorded on: the zones reaching `extra_m`
    /// farther, what the robot can drive while a frame is still fresh.
    pub fn for_observations(&self, extra_m: f64) -> ZoneGrid {
        ZoneGrid { reach_m: self.reach_m + extra_m.max(0.0), ..*self }
    }

    /// Checks that every size is finite and positive where it must be.
    pub fn validate(&self) -> Result<(), String> {
        let ok = [self.front_m, self.rear_m, self.half_width_m, self.reach_m]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0)
            && self.cell_m.is_finite()
            && self.cell_m > 0.0;
        ok.then_some(()).ok_or_else(|| format!("the zones are not usable: {self:?}"))
    }
}

/// Which kind of source observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    DepthCamera,
    Laser,
}

impl SourceKind {
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::DepthCamera => "the depth camera",
            SourceKind::Laser => "the LiDAR",
        }
    }
}

/// Why cells of a zone were not observed by one frame, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Unseen {
    /// Outside the camera's frustum (the head looks elsewhere) or crossed
    /// by no beam.
    pub out_of_view: usize,
    /// The pixel or beam gave no usable value (NaN, zero, closer than the
    /// sensor's minimum range, a covered lens).
    pub no_return: usize,
    /// The robot itself (its arm) is in the way.
    pub self_occluded: usize,
    /// The floor is farther than it should be (a drop, or a bad reading).
    pub floor_missing: usize,
    /// Something above the robot's height hides the floor (an overhang).
    pub hidden_above: usize,
}

impl Unseen {
    pub fn total(&self) -> usize {
        self.out_of_view
            + self.no_return
            + self.self_occluded
            + self.floor_missing
            + self.hidden_above
    }

    /// The counts in words, largest first, e.g. "30 out of view, 6 with
    /// no return" (empty when nothing is unseen).
    pub fn describe(&self) -> String {
        let mut parts = [
            (self.out_of_view, "out of view"),
            (self.no_return, "with no return (NaN, zero or too close)"),
            (self.self_occluded, "hidden by the robot itself (its arm)"),
            (self.floor_missing, "where the floor reads farther than it is (a drop?)"),
            (self.hidden_above, "hidden by something above the robot"),
        ];
        parts.sort_by_key(|part| std::cmp::Reverse(part.0));
        parts
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What one frame of one source observed of both zones.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub source: SourceKind,
    /// The lowest obstacle this frame would have shown, m (a depth
    /// camera: its floor band; a LiDAR: the height of its plane).
    pub sees_down_to_m: f64,
    /// The robot's pose in the odometry frame when the frame was captured.
    pub pose: Pose2D,
    /// The cells' grid: the zones', reaching farther (see
    /// [`ZoneGrid::for_observations`]) so that what a frame saw beyond the
    /// zone still counts once the robot has driven on.
    pub grid: ZoneGrid,
    /// When the frame was captured.
    pub captured: Instant,
    /// The cells observed, per direction (ahead, behind), row-major as
    /// [`ZoneGrid::centre`] numbers them: known, floor seen or an obstacle
    /// seen in front of it (which the obstacle rules then weigh).
    pub observed: [Vec<bool>; 2],
    /// Of those, the cells whose floor was seen, nothing in front of it:
    /// what the free-space memory may keep.
    pub clear: [Vec<bool>; 2],
    /// Why the others were not, per direction.
    pub unseen: [Unseen; 2],
}

impl Observation {
    /// An observation of nothing yet, for `grid`.
    pub fn empty(
        source: SourceKind,
        sees_down_to_m: f64,
        pose: Pose2D,
        captured: Instant,
        grid: &ZoneGrid,
    ) -> Self {
        Observation {
            source,
            sees_down_to_m,
            pose,
            grid: *grid,
            captured,
            observed: [
                vec![false; grid.cells(Direction::Ahead)],
                vec![false; grid.cells(Direction::Behind)],
            ],
            clear: [
                vec![false; grid.cells(Direction::Ahead)],
                vec![false; grid.cells(Direction::Behind)],
            ],
            unseen: [Unseen::default(); 2],
        }
    }

    /// Marks a cell observed clear (its floor seen).
    pub fn mark_clear(&mut self, direction: Direction, cell: usize) {
        self.mark(direction, cell);
        if let Some(clear) = self.clear[direction.index()].get_mut(cell) {
            *clear = true;
        }
    }

    /// The centres (base frame at capture) of the cells observed clear.
    pub fn clear_centres(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        Direction::BOTH.into_iter().flat_map(move |d| {
            self.clear[d.index()]
                .iter()
                .enumerate()
                .filter(|(_, c)| **c)
                .map(move |(cell, _)| self.grid.centre(d, cell))
        })
    }

    pub fn observed(&self, direction: Direction) -> &[bool] {
        &self.observed[direction.index()]
    }

    pub fn mark(&mut self, direction: Direction, cell: usize) {
        if let Some(seen) = self.observed[direction.index()].get_mut(cell) {
            *seen = true;
        }
    }

    pub fn unseen_mut(&mut self, direction: Direction) -> &mut Unseen {
        &mut self.unseen[direction.index()]
    }

    pub fn unseen(&self, direction: Direction) -> &Unseen {
        &self.unseen[direction.index()]
    }

    /// Whether the point (in the base frame at capture) lies in a cell this frame observed.
    fn saw(&self, x: f64, y: f64) -> bool {
        self.grid
            .locate(x, y)
            .is_some_and(|(direction, cell)| self.observed[direction.index()][cell])
    }

    /// The fraction of a direction's cells observed.
    pub fn fraction(&self, direction: Direction) -> f64 {
        let cells = self.observed(direction);
        cells.iter().filter(|c| **c).count() as f64 / cells.len().max(1) as f64
    }
}

/// A point of the base frame at `pose` in the odometry frame.
pub fn base_to_odom(point: (f64, f64), pose: &Pose2D) -> (f64, f64) {
    let (sin, cos) = pose.yaw_rad.sin_cos();
    (pose.x_m + cos * point.0 - sin * point.1, pose.y_m + sin * point.0 + cos * point.1)
}

/// A point of the odometry frame in the base frame at `pose`.
pub fn odom_to_base(point: (f64, f64), pose: &Pose2D) -> (f64, f64) {
    let (dx, dy) = (point.0 - pose.x_m, point.1 - pose.y_m);
    let (sin, cos) = pose.yaw_rad.sin_cos();
    (cos * dx + sin * dy, -sin * dx + cos * dy)
}

/// A point of the base frame at `from` expressed in the base frame at `to`
/// (both poses in the odometry frame).
pub fn rebase(point: (f64, f64), from: &Pose2D, to: &Pose2D) -> (f64, f64) {
    odom_to_base(base_to_odom(point, from), to)
}

/// What the fresh observations say about a direction's zone now.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ZoneView {
    pub direction: Direction,
    /// The near edge of the first row that no fresh source observes down
    /// to the required height, m from the origin; None when every row is
    /// observed (within the tolerated fraction).
    pub first_unobserved_m: Option<f64>,
    /// The fraction of the zone's cells observed.
    pub observed_fraction: f64,
    /// Whether a fresh frame observes a good part of the zone now
    /// ([`MIN_WATCHED_FRACTION`]): the way is being watched, so cells seen
    /// clear a moment ago (the free-space memory) count, and a `creep`
    /// policy may creep. Unwatched, nothing but fresh frames counts.
    pub watched: bool,
    /// Why, per source, in words (for messages), e.g. "the depth camera:
    /// 36 out of view".
    pub why: String,
}

/// A source's frame, fresh or not, for [`zone_view`] to weigh.
#[derive(Debug, Clone, Copy)]
pub enum SourceState<'a> {
    /// A frame within the source's max age.
    Fresh(&'a Observation),
    /// The source's latest frame is too old, or none came (`age_s: None`).
    Stale { source: SourceKind, age_s: Option<f64>, max_age_s: f64 },
    /// Frames come but give no observation (their frame not in TF, ...).
    Unmeasured { source: SourceKind, why: &'a str },
}

/// The part of a zone fresh frames must observe for the way to count as
/// watched (a camera turned away, covered or stale observes none of it).
pub const MIN_WATCHED_FRACTION: f64 = 0.25;

/// The coverage of `direction`'s zone at `pose_now` from `sources`:
/// a cell counts as observed when some fresh observation that sees
/// obstacles down to `required_height_m` observed the place it lies on, or,
/// while fresh frames watch the zone, when `remembered_clear` says its
/// place (odometry frame) was seen clear lately; a row is observed when no
/// more than `max_unobserved_fraction` of its cells are not. A missing
/// pose observes nothing.
pub fn zone_view(
    grid: &ZoneGrid,
    direction: Direction,
    sources: &[SourceState],
    pose_now: Option<Pose2D>,
    required_height_m: f64,
    max_unobserved_fraction: f64,
    remembered_clear: &dyn Fn(f64, f64) -> bool,
) -> ZoneView {
    let usable: Vec<&Observation> = sources
        .iter()
        .filter_map(|s| match s {
            SourceState::Fresh(o) if o.sees_down_to_m <= required_height_m + 1e-9 => Some(*o),
            _ => None,
        })
        .collect();
    let rows = grid.rows(direction);
    let columns = grid.columns();
    let fresh: Vec<bool> = (0..rows * columns)
        .map(|cell| {
            let centre = grid.centre(direction, cell);
            pose_now.is_some_and(|now| {
                usable.iter().any(|o| {
                    let (x, y) = rebase(centre, &now, &o.pose);
                    o.saw(x, y)
                })
            })
        })
        .collect();
    let watched =
        fresh.iter().filter(|f| **f).count() as f64 >= MIN_WATCHED_FRACTION * fresh.len() as f64;
    let mut observed_cells = 0;
    let mut first_unobserved_m = None;
    for row in 0..rows {
        let mut observed_in_row = 0;
        for column in 0..columns {
            let cell = row * columns + column;
            let seen = fresh[cell]
                || (watched
                    && pose_now.is_some_and(|now| {
                        let (x, y) = base_to_odom(grid.centre(direction, cell), &now);
                        remembered_clear(x, y)
                    }));
            observed_in_row += usize::from(seen);
        }
        observed_cells += observed_in_row;
        let unobserved = (columns - observed_in_row) as f64 / columns as f64;
        // NaN-safe: a comparison that fails is unobserved.
        if first_unobserved_m.is_none() && !(unobserved <= max_unobserved_fraction) {
            first_unobserved_m = Some(grid.row_start_m(direction, row));
        }
    }
    let observed_fraction = observed_cells as f64 / (rows * columns) as f64;
    let why = if first_unobserved_m.is_none() {
        String::new()
    } else {
        explain(direction, sources, pose_now.is_some(), required_height_m)
    };
    ZoneView { direction, first_unobserved_m, observed_fraction, watched, why }
}

/// Each source's part in a zone left unobserved, in words.
fn explain(
    direction: Direction,
    sources: &[SourceState],
    pose_known: bool,
    required_height_m: f64,
) -> String {
    if !pose_known {
        return "the robot's pose is unknown (no fresh odometry)".into();
    }
    if sources.is_empty() {
        return format!("no obstacle source is configured that watches {}", direction.name());
    }
    let parts: Vec<String> = sources
        .iter()
        .map(|s| match s {
            SourceState::Fresh(o) if o.sees_down_to_m > required_height_m + 1e-9 => {
                format!("{} sees nothing lower than {:.2} m (its plane), and obstacles down to {required_height_m:.2} m must be seen", o.source.name(), o.sees_down_to_m)
            }
            SourceState::Fresh(o) => {
                let unseen = o.unseen(direction).describe();
                let seen = format!("{:.0} % of the zone observed", 100.0 * o.fraction(direction));
                if unseen.is_empty() { format!("{}: {seen}", o.source.name()) } else { format!("{}: {seen}; cells {unseen}", o.source.name()) }
            }
            SourceState::Stale { source, age_s: Some(age), max_age_s } => format!("{}: its last frame is {age:.2} s old (max {max_age_s:.2} s)", source.name()),
            SourceState::Stale { source, age_s: None, .. } => format!("{}: no frame received", source.name()),
            SourceState::Unmeasured { source, why } => format!("{}: its frames give no observation: {why}", source.name()),
        })
        .collect();
    parts.join("; ")
}

/// A head pose, and how much of a zone its camera would observe of a
/// flat, empty floor from there.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct HeadCover {
    pub pan_rad: f64,
    pub tilt_rad: f64,
    /// The fraction of the zone's cells in view.
    pub fraction: f64,
    /// Every row in view (within the tolerated fraction).
    pub complete: bool,
}

impl HeadCover {
    /// What to tell an agent (or operator) whose motion this zone blocks.
    pub fn remedy(&self, direction: Direction) -> String {
        let (pan, tilt) = (self.pan_rad.to_degrees(), self.tilt_rad.to_degrees());
        if self.complete {
            format!("look_at pan {pan:.0}°, tilt {tilt:.0}° observes the way {}", direction.name())
        } else {
            format!("the head's camera observes at most {:.0} % of the way {} (pan {pan:.0}°, tilt {tilt:.0}°): nothing on this robot observes the rest", 100.0 * self.fraction, direction.name())
        }
    }
}

/// The camera's view for [`covering_head_pose`]: its image and minimum range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CameraView {
    pub fx: f64,
    pub fy: f64,
    pub cx: f64,
    pub cy: f64,
    pub width: usize,
    pub height: usize,
    pub min_range_m: f64,
}

/// The head pose from which the camera observes `direction`'s zone of a
/// flat, empty floor: every row in view if some pose does so (then the
/// least tilted of those: it sees farthest; among equals the pan nearest
/// the direction), else the pose that observes the most. `camera_at`
/// gives the optical frame's pose in the base frame at (pan, tilt); the
/// ranges are the joints' limits. Searched on a grid of `step_rad`.
#[allow(
    clippy::too_many_arguments,
    reason = "the geometry of the search: zone, camera, joint ranges and grid step"
)]
pub fn covering_head_pose(
    grid: &ZoneGrid,
    direction: Direction,
    camera_at: &dyn Fn(f64, f64) -> Option<nalgebra::Isometry3<f64>>,
    camera: &CameraView,
    pan_range: (f64, f64),
    tilt_range: (f64, f64),
    step_rad: f64,
    max_unobserved_fraction: f64,
) -> Option<HeadCover> {
    if !(step_rad > 0.0 && pan_range.0 <= pan_range.1 && tilt_range.0 <= tilt_range.1) {
        return None;
    }
    let facing = if direction == Direction::Ahead { 0.0 } else { std::f64::consts::PI };
    let steps = |(lo, hi): (f64, f64)| ((hi - lo) / step_rad).floor() as usize + 1;
    let rows = grid.rows(direction);
    let columns = grid.columns();
    let mut best: Option<HeadCover> = None;
    for i in 0..steps(pan_range) {
        let pan = pan_range.0 + i as f64 * step_rad;
        for j in 0..steps(tilt_range) {
            let tilt = tilt_range.0 + j as f64 * step_rad;
            let Some(pose) = camera_at(pan, tilt) else { continue };
            let to_camera = pose.inverse();
            let mut in_view = 0;
            let mut complete = true;
            for row in 0..rows {
                let mut in_row = 0;
                for column in 0..columns {
                    let (x, y) = grid.centre(direction, row * columns + column);
                    let p = to_camera * nalgebra::Point3::new(x, y, 0.0);
                    if p.z >= camera.min_range_m.max(1e-3) {
                        let u = camera.fx * p.x / p.z + camera.cx;
                        let v = camera.fy * p.y / p.z + camera.cy;
                        if u >= 0.0
                            && v >= 0.0
                            && u < camera.width as f64
                            && v < camera.height as f64
                        {
                            in_row += 1;
                        }
                    }
                }
                in_view += in_row;
                complete &= (columns - in_row) as f64 / columns as f64 <= max_unobserved_fraction;
            }
            let candidate = HeadCover {
                pan_rad: pan,
                tilt_rad: tilt,
                fraction: in_view as f64 / (rows * columns) as f64,
                complete,
            };
            let off = |c: &HeadCover| crate::governor::safety::wrap_angle(c.pan_rad - facing).abs();
            let better = match &best {
                None => true,
                Some(b) if candidate.complete != b.complete => candidate.complete,
                Some(b) if candidate.complete => {
                    (candidate.tilt_rad.abs(), off(&candidate)) < (b.tilt_rad.abs(), off(b))
                }
                Some(b) => candidate.fraction > b.fraction + 1e-9,
            };
            if better {
                best = Some(candidate);
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn grid() -> ZoneGrid {
        ZoneGrid::new(
            Footprint::Rectangle { front_m: 0.14, rear_m: 0.12, half_width_m: 0.14 },
            0.03,
            0.5,
            0.02,
        )
    }

    const ORIGIN: Pose2D = Pose2D { x_m: 0.0, y_m: 0.0, yaw_rad: 0.0 };

    fn nothing_remembered(_: f64, _: f64) -> bool {
        false
    }
    const NOTHING: fn(f64, f64) -> bool = nothing_remembered;

    fn full(source: SourceKind, sees_down_to_m: f64, pose: Pose2D) -> Observation {
        let g = grid();
        let mut o = Observation::empty(source, sees_down_to_m, pose, Instant::now(), &g);
        for d in Direction::BOTH {
            for cell in 0..g.cells(d) {
                o.mark(d, cell);
            }
        }
        o
    }

    #[test]
    fn the_zones_start_at_the_footprint_and_reach_the_slow_down_distance() {
        let g = grid();
        assert_eq!(
            (g.rows(Direction::Ahead), g.rows(Direction::Behind), g.columns()),
            (18, 19, 17)
        );
        let (x, y) = g.centre(Direction::Ahead, 0);
        assert!((x - 0.15).abs() < 1e-9 && (y + 0.16).abs() < 1e-9, "{x} {y}");
        let (x, y) = g.centre(Direction::Behind, g.cells(Direction::Behind) - 1);
        assert!((x + 0.49).abs() < 1e-9 && (y - 0.16).abs() < 1e-9, "{x} {y}");
        assert_eq!(g.cell_at(Direction::Ahead, 0.139, 0.0), None, "inside the footprint");
        assert_eq!(g.cell_at(Direction::Ahead, 0.5, 0.0), None, "beyond the reach");
        assert_eq!(g.cell_at(Direction::Ahead, 0.3, 0.2), None, "beside the corridor");
        assert_eq!(g.cell_at(Direction::Ahead, f64::NAN, 0.0), None);
        for d in Direction::BOTH {
            for cell in 0..g.cells(d) {
                let (x, y) = g.centre(d, cell);
                assert_eq!(g.cell_at(d, x, y), Some(cell));
                assert_eq!(g.locate(x, y), Some((d, cell)));
            }
        }
        // A round footprint: the zone starts at its radius.
        let round = ZoneGrid::new(Footprint::Circle { radius_m: 0.175 }, 0.03, 0.6, 0.02);
        assert_eq!(
            (round.start_m(Direction::Ahead), round.start_m(Direction::Behind), round.half_width_m),
            (0.175, 0.175, 0.205)
        );
    }

    #[test]
    fn a_fully_observed_zone_has_no_unobserved_row_and_nothing_observes_without_a_pose() {
        let g = grid();
        let depth = full(SourceKind::DepthCamera, 0.02, ORIGIN);
        let view = zone_view(
            &g,
            Direction::Ahead,
            &[SourceState::Fresh(&depth)],
            Some(ORIGIN),
            0.05,
            0.1,
            &NOTHING,
        );
        assert_eq!((view.first_unobserved_m, view.observed_fraction), (None, 1.0));
        assert!(view.why.is_empty());
        let blind = zone_view(
            &g,
            Direction::Ahead,
            &[SourceState::Fresh(&depth)],
            None,
            0.05,
            0.1,
            &NOTHING,
        );
        assert_eq!(blind.first_unobserved_m, Some(0.14));
        assert!(blind.why.contains("pose is unknown"), "{}", blind.why);
        let nothing = zone_view(&g, Direction::Behind, &[], Some(ORIGIN), 0.05, 0.1, &NOTHING);
        assert_eq!(nothing.first_unobserved_m, Some(0.12));
        assert!(nothing.why.contains("no obstacle source"), "{}", nothing.why);
    }

    #[test]
    fn a_lidar_above_the_required_height_observes_nothing_and_says_why() {
        let g = grid();
        let laser = full(SourceKind::Laser, 0.25, ORIGIN);
        let view = zone_view(
            &g,
            Direction::Behind,
            &[SourceState::Fresh(&laser)],
            Some(ORIGIN),
            0.05,
            0.1,
            &NOTHING,
        );
        assert_eq!(view.first_unobserved_m, Some(0.12));
        assert!(view.why.contains("the LiDAR sees nothing lower than 0.25 m"), "{}", view.why);
        // Asked only for obstacles of 0.25 m and taller, it observes all.
        assert_eq!(
            zone_view(
                &g,
                Direction::Behind,
                &[SourceState::Fresh(&laser)],
                Some(ORIGIN),
                0.25,
                0.1,
                &NOTHING
            )
            .first_unobserved_m,
            None
        );
    }

    #[test]
    fn the_first_unobserved_row_is_where_the_view_ends() {
        let g = grid();
        // A level camera: it sees the floor only from 0.30 m on.
        let mut depth =
            Observation::empty(SourceKind::DepthCamera, 0.02, ORIGIN, Instant::now(), &g);
        for cell in 0..g.cells(Direction::Ahead) {
            let (x, _) = g.centre(Direction::Ahead, cell);
            if x > 0.30 {
                depth.mark(Direction::Ahead, cell);
            } else {
                depth.unseen_mut(Direction::Ahead).out_of_view += 1;
            }
        }
        let view = zone_view(
            &g,
            Direction::Ahead,
            &[SourceState::Fresh(&depth)],
            Some(ORIGIN),
            0.05,
            0.1,
            &NOTHING,
        );
        assert_eq!(view.first_unobserved_m, Some(0.14));
        assert!(view.why.contains("cells 136 out of view"), "{}", view.why);
        // Driven 0.16 m on, the rows it saw are now the first ones: the
        // observation was placed where it was taken.
        let moved = Pose2D { x_m: 0.16, ..ORIGIN };
        let view = zone_view(
            &g,
            Direction::Ahead,
            &[SourceState::Fresh(&depth)],
            Some(moved),
            0.05,
            0.1,
            &NOTHING,
        );
        let first = view.first_unobserved_m.expect("the far end, never seen");
        assert!((first - 0.34).abs() < 1e-9, "{first}");
        // A stale or unmeasured source observes nothing, and says why.
        let stale = zone_view(
            &g,
            Direction::Ahead,
            &[SourceState::Stale {
                source: SourceKind::DepthCamera,
                age_s: Some(0.7),
                max_age_s: 0.2,
            }],
            Some(ORIGIN),
            0.05,
            0.1,
            &NOTHING,
        );
        assert_eq!(stale.first_unobserved_m, Some(0.14));
        assert!(stale.why.contains("0.70 s old (max 0.20 s)"), "{}", stale.why);
        let unmeasured = zone_view(
            &g,
            Direction::Ahead,
            &[SourceState::Unmeasured {
                source: SourceKind::DepthCamera,
                why: "frame 'x' is not in the TF tree",
            }],
            Some(ORIGIN),
            0.05,
            0.1,
            &NOTHING,
        );
        assert!(unmeasured.why.contains("not in the TF tree"), "{}", unmeasured.why);
    }

    #[test]
    fn cells_seen_clear_lately_count_only_while_the_way_is_watched() {
        let g = grid();
        // The camera sees the zone from 0.28 m on (the robot's own arm hides
        // the rest); the free-space memory has the near band seen clear.
        let mut depth =
            Observation::empty(SourceKind::DepthCamera, 0.02, ORIGIN, Instant::now(), &g);
        for cell in 0..g.cells(Direction::Ahead) {
            if g.centre(Direction::Ahead, cell).0 > 0.28 {
                depth.mark_clear(Direction::Ahead, cell);
            }
        }
        let near_band = |x: f64, _: f64| x < 0.3;
        let view = zone_view(
            &g,
            Direction::Ahead,
            &[SourceState::Fresh(&depth)],
            Some(ORIGIN),
            0.05,
            0.1,
            &near_band,
        );
        assert!(view.watched && view.first_unobserved_m.is_none(), "{view:?}");
        let forgotten = zone_view(
            &g,
            Direction::Ahead,
            &[SourceState::Fresh(&depth)],
            Some(ORIGIN),
            0.05,
            0.1,
            &NOTHING,
        );
        assert!(forgotten.watched && forgotten.first_unobserved_m == Some(0.14), "{forgotten:?}");
        // The camera turned away: the memory does not count.
        let away = Observation::empty(SourceKind::DepthCamera, 0.02, ORIGIN, Instant::now(), &g);
        let unwatched = zone_view(
            &g,
            Direction::Ahead,
            &[SourceState::Fresh(&away)],
            Some(ORIGIN),
            0.05,
            0.1,
            &|_, _| true,
        );
        assert!(!unwatched.watched && unwatched.first_unobserved_m == Some(0.14), "{unwatched:?}");
        assert_eq!(
            depth.clear_centres().count(),
            depth.observed(Direction::Ahead).iter().filter(|o| **o).count()
        );
    }

    #[test]
    fn a_few_unobserved_cells_per_row_are_tolerated_but_not_more() {
        let g = grid();
        let mut depth = full(SourceKind::DepthCamera, 0.02, ORIGIN);
        // Row 3: one cell of 17 lost (5.9 %); row 5: two (11.8 %).
        let columns = g.columns();
        depth.observed[0][3 * columns + 4] = false;
        depth.observed[0][5 * columns + 4] = false;
        depth.observed[0][5 * columns + 9] = false;
        let view = zone_view(
            &g,
            Direction::Ahead,
            &[SourceState::Fresh(&depth)],
            Some(ORIGIN),
            0.05,
            0.1,
            &NOTHING,
        );
        assert!((view.first_unobserved_m.unwrap() - 0.24).abs() < 1e-9, "{view:?}");
    }

    #[test]
    fn turned_half_round_the_zone_behind_is_what_was_seen_ahead() {
        let g = grid();
        let mut depth =
            Observation::empty(SourceKind::DepthCamera, 0.02, ORIGIN, Instant::now(), &g);
        for cell in 0..g.cells(Direction::Ahead) {
            depth.mark(Direction::Ahead, cell);
        }
        // Turned in place by pi, shifted 2 cm back (the zones differ in start: 0.14 ahead, 0.12 behind).
        let turned = Pose2D { x_m: 0.02, y_m: 0.0, yaw_rad: std::f64::consts::PI };
        let view = zone_view(
            &g,
            Direction::Behind,
            &[SourceState::Fresh(&depth)],
            Some(turned),
            0.05,
            0.1,
            &NOTHING,
        );
        // Behind now starts at 0.12 m; the old ahead zone covers from 0.12 m (0.14 - 0.02) to 0.48 m.
        assert!(view.first_unobserved_m.is_some_and(|m| m >= 0.47), "{view:?}");
    }

    /// The bundled robot's camera: pan about z at (-0.10, 0, 0.583), tilt
    /// about y 0.045 m above, the optical frame 0.025 m ahead of the tilt axis.
    fn aicc_bot_camera(pan: f64, tilt: f64) -> Option<nalgebra::Isometry3<f64>> {
        use nalgebra::{Isometry3, Translation3, UnitQuaternion, Vector3};
        let pan = Isometry3::from_parts(
            Translation3::new(-0.10, 0.0, 0.583),
            UnitQuaternion::from_axis_angle(&Vector3::z_axis(), pan),
        );
        let tilt = Isometry3::from_parts(
            Translation3::new(0.0, 0.0, 0.045),
            UnitQuaternion::from_axis_angle(&Vector3::y_axis(), tilt),
        );
        let optical = Isometry3::from_parts(
            Translation3::new(0.025, 0.0, 0.0),
            UnitQuaternion::from_euler_angles(
                -std::f64::consts::FRAC_PI_2,
                0.0,
                -std::f64::consts::FRAC_PI_2,
            ),
        );
        Some(pan * tilt * optical)
    }

    #[test]
    fn the_head_observes_the_way_ahead_tilted_down_and_never_the_way_behind() {
        let g = grid();
        // 320x240, 62.2 degrees horizontal.
        let f = 160.0 / (1.085595f64 / 2.0).tan();
        let camera = CameraView {
            fx: f,
            fy: f,
            cx: 159.5,
            cy: 119.5,
            width: 320,
            height: 240,
            min_range_m: 0.1,
        };
        let ahead = covering_head_pose(
            &g,
            Direction::Ahead,
            &aicc_bot_camera,
            &camera,
            (-2.5, 2.5),
            (-0.6, 1.2),
            0.05,
            0.1,
        )
        .unwrap();
        assert!(ahead.complete && ahead.pan_rad.abs() < 0.051, "{ahead:?}");
        assert!((0.5..1.0).contains(&ahead.tilt_rad), "tilted down: {ahead:?}");
        assert!(
            ahead.remedy(Direction::Ahead).starts_with("look_at pan 0°, tilt "),
            "{}",
            ahead.remedy(Direction::Ahead)
        );
        // Level, it sees none of the zone (the floor is in view from ~0.9 m).
        let level = covering_head_pose(
            &g,
            Direction::Ahead,
            &aicc_bot_camera,
            &camera,
            (0.0, 0.0),
            (0.0, 0.0),
            0.05,
            0.1,
        )
        .unwrap();
        assert_eq!((level.fraction, level.complete), (0.0, false));
        // Behind: the pan stops at 2.5 rad; at best part of it.
        let behind = covering_head_pose(
            &g,
            Direction::Behind,
            &aicc_bot_camera,
            &camera,
            (-2.5, 2.5),
            (-0.6, 1.2),
            0.05,
            0.1,
        )
        .unwrap();
        assert!(!behind.complete && behind.fraction < 0.95, "{behind:?}");
        assert!(behind
            .remedy(Direction::Behind)
            .contains("nothing on this robot observes the rest"));
    }

    proptest! {
        /// More sources never make a zone less observed, and a zone is
        /// never "observed" where no fresh usable source marked anything.
        #[test]
        fn coverage_is_monotone_in_the_sources(marks in proptest::collection::vec(any::<bool>(), 18 * 17), x in -0.3..0.3f64, yaw in -3.2..3.2f64, fraction in 0.0..0.5f64) {
            let g = grid();
            let mut a = Observation::empty(SourceKind::DepthCamera, 0.02, ORIGIN, Instant::now(), &g);
            for (cell, mark) in marks.iter().enumerate() {
                if *mark {
                    a.mark(Direction::Ahead, cell);
                }
            }
            let now = Pose2D { x_m: x, y_m: 0.0, yaw_rad: yaw };
            // A LiDAR frame taken here, now.
            let b = full(SourceKind::Laser, 0.25, now);
            let one = zone_view(&g, Direction::Ahead, &[SourceState::Fresh(&a)], Some(now), 0.05, fraction, &NOTHING);
            let two = zone_view(&g, Direction::Ahead, &[SourceState::Fresh(&a), SourceState::Fresh(&b)], Some(now), 0.05, fraction, &NOTHING);
            prop_assert_eq!(one.first_unobserved_m, two.first_unobserved_m, "a LiDAR above the required height adds nothing");
            let tall = zone_view(&g, Direction::Ahead, &[SourceState::Fresh(&a), SourceState::Fresh(&b)], Some(now), 0.25, fraction, &NOTHING);
            prop_assert!(tall.first_unobserved_m.is_none(), "the LiDAR observes all when its height is enough");
            prop_assert!(tall.observed_fraction >= one.observed_fraction);
            let none = zone_view(&g, Direction::Ahead, &[], Some(now), 0.05, fraction, &NOTHING);
            prop_assert_eq!(none.first_unobserved_m, Some(0.14));
            prop_assert_eq!(none.observed_fraction, 0.0);
            if let Some(first) = one.first_unobserved_m {
                prop_assert!((0.14..0.5).contains(&first));
            }
        }

        #[test]
        fn rebasing_there_and_back_is_the_identity(px in -1.0..1.0f64, py in -1.0..1.0f64, ax in -2.0..2.0f64, ay in -2.0..2.0f64, ayaw in -4.0..4.0f64, bx in -2.0..2.0f64, by in -2.0..2.0f64, byaw in -4.0..4.0f64) {
            let a = Pose2D { x_m: ax, y_m: ay, yaw_rad: ayaw };
            let b = Pose2D { x_m: bx, y_m: by, yaw_rad: byaw };
            let there = rebase((px, py), &a, &b);
            let back = rebase(there, &b, &a);
            prop_assert!((back.0 - px).abs() < 1e-9 && (back.1 - py).abs() < 1e-9);
            // Distances from the frame's origin... the point's distance to each pose's origin is kept.
            let (ox, oy) = rebase((0.0, 0.0), &a, &b);
            prop_assert!((((there.0 - ox).powi(2) + (there.1 - oy).powi(2)).sqrt() - px.hypot(py)).abs() < 1e-9);
        }
    }
}

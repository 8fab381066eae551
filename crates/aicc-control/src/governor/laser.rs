//! Obstacles around the base from a planar laser scan (sensor_msgs/LaserScan):
//! pure geometry, no ROS, no clock.
//!
//! The footprint (a rectangle or a circle about `base_footprint`'s origin)
//! gives three zones, reaching out to `reach_m` (the slow-down distance):
//! - ahead: `x > 0` outside the footprint, `|y| <= half width + margin`;
//!   its distance is the point's `x` (from the origin, as the depth camera's
//!   and the stop distances are measured);
//! - behind: the same with `x < 0`; its distance is `-x`;
//! - turning (rectangular footprints only): the ring between the footprint
//!   and the circle its corners sweep turning in place (plus the margin).
//!   A round robot sweeps nothing new, so it has no such zone.
//!
//! Fail-safe rules: a beam with no usable range (NaN, +inf or -inf, below
//! `range_min` or above `range_max`) tells nothing, so it never clears the
//! zones its ray crosses: it is counted as unknown there. A zone is
//! [`Zone::Blind`] when more than `max_unknown_fraction` of the beams
//! through it are unknown, or when no beam crosses it at all (the scanner's
//! field of view misses it). A return inside the footprint is the robot
//! itself: it tells nothing about what lies beyond along that beam, so the
//! zones that beam would have crossed count it as unknown too.

use thiserror::Error;

use super::coverage::{Direction, Unseen, ZoneGrid};
use super::footprint::Footprint;

/// A scan as received: the fields of sensor_msgs/LaserScan the rules use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScanView<'a> {
    pub angle_min_rad: f64,
    pub angle_increment_rad: f64,
    pub range_min_m: f64,
    pub range_max_m: f64,
    pub ranges_m: &'a [f32],
}

/// The zones the scan must keep clear, and how much blindness is tolerated.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ScanZones {
    pub footprint: Footprint,
    /// Extra clearance beside the footprint (and around its swept circle), m.
    pub margin_m: f64,
    /// How far ahead and behind the zones reach (the slow-down distance), m.
    pub reach_m: f64,
    /// A zone with more than this fraction of unknown beams is blind (0..1).
    pub max_unknown_fraction: f64,
}

/// Why a scan cannot be read. Never "clear": the caller holds motion.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ScanError {
    /// The angles are not finite, or the increment is zero.
    #[error("scan angles are not usable (angle_min {angle_min_rad}, angle_increment {angle_increment_rad})")]
    BadAngles { angle_min_rad: f64, angle_increment_rad: f64 },
    /// The scan has no beams.
    #[error("scan has no ranges")]
    Empty,
    /// The scanner's pose in the base frame is not finite.
    #[error("laser pose in the base frame is not finite")]
    BadPose,
    /// Footprint, margin, reach or fraction not finite or negative.
    #[error("scan zones are not usable: {0:?}")]
    BadZones(ScanZones),
}

/// What the scan says about one zone.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Zone {
    /// Every beam through it (but a tolerated few) returned beyond it.
    Clear,
    /// The nearest return inside it, m (see the module doc for how measured).
    At { distance_m: f64 },
    /// Too many of its beams have no usable return (or none crosses it).
    Blind { unknown: usize, beams: usize },
}

impl Zone {
    /// What the governor's obstacle rule should see: `None` when clear,
    /// the distance when an obstacle is seen, NaN (an obstacle at an
    /// unknown distance: stopped) when blind.
    pub fn obstacle_m(&self) -> Option<f64> {
        match *self {
            Zone::Clear => None,
            Zone::At { distance_m } => Some(distance_m),
            Zone::Blind { .. } => Some(f64::NAN),
        }
    }
}

/// The result of reading one scan.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ScanReading {
    pub ahead: Zone,
    pub behind: Zone,
    /// `None` for a round footprint (turning sweeps nothing new).
    pub turning: Option<Zone>,
    /// Beams in the scan.
    pub beams: usize,
    /// Beams with a usable range.
    pub valid: usize,
    /// Beams returning inside the footprint (the robot itself).
    pub self_hits: usize,
}

/// The scanner's planar pose in the base frame (from TF: its translation
/// and yaw; the caller checks that the scan plane is level).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LaserPose {
    pub x_m: f64,
    pub y_m: f64,
    pub yaw_rad: f64,
}

/// Per-zone tallies while reading.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    beams: usize,
    unknown: usize,
    nearest: f64,
}

impl Tally {
    fn new() -> Self {
        Tally { beams: 0, unknown: 0, nearest: f64::INFINITY }
    }

    fn zone(&self, max_unknown_fraction: f64) -> Zone {
        if self.nearest.is_finite() {
            return Zone::At { distance_m: self.nearest };
        }
        // NaN-safe: a comparison that fails is blind.
        let tolerated =
            self.beams > 0 && (self.unknown as f64) <= max_unknown_fraction * self.beams as f64;
        if tolerated {
            Zone::Clear
        } else {
            Zone::Blind { unknown: self.unknown, beams: self.beams }
        }
    }
}

/// An axis-aligned box in the base frame.
#[derive(Debug, Clone, Copy)]
struct Aabb {
    min_x: f64,
    max_x: f64,
    min_y: f64,
    max_y: f64,
}

impl Aabb {
    /// The parameters where the ray (t >= 0) enters and leaves the box.
    fn span(&self, ox: f64, oy: f64, dx: f64, dy: f64) -> Option<(f64, f64)> {
        let (mut near, mut far) = (0.0f64, f64::INFINITY);
        for (o, d, lo, hi) in [(ox, dx, self.min_x, self.max_x), (oy, dy, self.min_y, self.max_y)] {
            if d.abs() < 1e-12 {
                if o < lo || o > hi {
                    return None;
                }
            } else {
                let (t1, t2) = ((lo - o) / d, (hi - o) / d);
                near = near.max(t1.min(t2));
                far = far.min(t1.max(t2));
            }
        }
        (near <= far).then_some((near, far))
    }

    fn contains(&self, x: f64, y: f64) -> bool {
        x >= self.min_x && x <= self.max_x && y >= self.min_y && y <= self.max_y
    }
}

/// Where the ray `o + t d` enters and leaves the disc of radius `r` about the origin (t >= 0).
fn disc_span(ox: f64, oy: f64, dx: f64, dy: f64, r: f64) -> Option<(f64, f64)> {
    // |o + t d|^2 = r^2 with |d| = 1.
    let b = ox * dx + oy * dy;
    let c = ox * ox + oy * oy - r * r;
    let disc = b * b - c;
    if disc < 0.0 {
        return None;
    }
    let far = -b + disc.sqrt();
    (far >= 0.0).then(|| ((-b - disc.sqrt()).max(0.0), far))
}

impl Footprint {
    /// Where a ray from inside the footprint leaves it (0 when it starts outside).
    fn exit(&self, ox: f64, oy: f64, dx: f64, dy: f64) -> f64 {
        if !self.contains(ox, oy) {
            return 0.0;
        }
        let span = match *self {
            Footprint::Rectangle { front_m, rear_m, half_width_m } => {
                Aabb { min_x: -rear_m, max_x: front_m, min_y: -half_width_m, max_y: half_width_m }
                    .span(ox, oy, dx, dy)
            }
            Footprint::Circle { radius_m } => disc_span(ox, oy, dx, dy, radius_m),
        };
        span.map_or(0.0, |(_, far)| far)
    }
}

impl ScanZones {
    fn validate(&self) -> Result<(), ScanError> {
        let (front, rear, half_width) = self.footprint.extent();
        let ok = [front, rear, half_width, self.margin_m, self.reach_m]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0)
            && (0.0..=1.0).contains(&self.max_unknown_fraction);
        ok.then_some(()).ok_or(ScanError::BadZones(*self))
    }
}

/// Reads a scan taken from `laser` (its pose in the base frame) against `zones`.
pub fn read_scan(
    scan: &ScanView,
    laser: &LaserPose,
    zones: &ScanZones,
) -> Result<ScanReading, ScanError> {
    zones.validate()?;
    if !(scan.angle_min_rad.is_finite()
        && scan.angle_increment_rad.is_finite()
        && scan.angle_increment_rad != 0.0)
    {
        return Err(ScanError::BadAngles {
            angle_min_rad: scan.angle_min_rad,
            angle_increment_rad: scan.angle_increment_rad,
        });
    }
    if scan.ranges_m.is_empty() {
        return Err(ScanError::Empty);
    }
    if !(laser.x_m.is_finite() && laser.y_m.is_finite() && laser.yaw_rad.is_finite()) {
        return Err(ScanError::BadPose);
    }
    let (front, rear, half_width) = zones.footprint.extent();
    let side = half_width + zones.margin_m;
    let ahead_box = Aabb { min_x: 0.0, max_x: zones.reach_m.max(front), min_y: -side, max_y: side };
    let behind_box =
        Aabb { min_x: -zones.reach_m.max(rear), max_x: 0.0, min_y: -side, max_y: side };
    let turn_radius = zones
        .footprint
        .sweeps_when_turning()
        .then(|| zones.footprint.swept_radius_m() + zones.margin_m);
    // A usable range: finite and within [range_min, range_max] (NaN fails every comparison).
    let (range_min, range_max) = (scan.range_min_m, scan.range_max_m);
    let mut ahead = Tally::new();
    let mut behind = Tally::new();
    let mut turning = Tally::new();
    let mut reading = ScanReading {
        ahead: Zone::Clear,
        behind: Zone::Clear,
        turning: None,
        beams: scan.ranges_m.len(),
        valid: 0,
        self_hits: 0,
    };
    let (ox, oy) = (laser.x_m, laser.y_m);
    for (i, &range) in scan.ranges_m.iter().enumerate() {
        let angle = laser.yaw_rad + scan.angle_min_rad + scan.angle_increment_rad * i as f64;
        let (dx, dy) = (angle.cos(), angle.sin());
        let range = f64::from(range);
        let usable = range.is_finite() && range >= range_min && range <= range_max && range >= 0.0;
        let hit = usable.then_some((ox + range * dx, oy + range * dy));
        let self_hit = hit.is_some_and(|(x, y)| zones.footprint.contains(x, y));
        if usable {
            reading.valid += 1;
        }
        if self_hit {
            reading.self_hits += 1;
        }
        // The beam's evidence for each zone it crosses (outside the footprint).
        let leaves_footprint = zones.footprint.exit(ox, oy, dx, dy);
        let known = usable && !self_hit;
        for (aabb, tally, behind_side) in
            [(&ahead_box, &mut ahead, false), (&behind_box, &mut behind, true)]
        {
            let Some((near, far)) = aabb.span(ox, oy, dx, dy) else { continue };
            let entry = near.max(leaves_footprint);
            if entry >= far {
                continue; // crosses the box only inside the robot
            }
            tally.beams += 1;
            match hit {
                Some((x, y)) if known && range >= entry => {
                    if aabb.contains(x, y) {
                        let distance = if behind_side { -x } else { x };
                        tally.nearest = tally.nearest.min(distance.max(0.0));
                    }
                }
                // Unusable, the robot itself, or stopped before the zone: unseen.
                _ => tally.unknown += 1,
            }
        }
        if let Some(radius) = turn_radius {
            if let Some((near, far)) = disc_span(ox, oy, dx, dy, radius) {
                let entry = near.max(leaves_footprint);
                if entry < far {
                    turning.beams += 1;
                    match hit {
                        Some((x, y)) if known && range >= entry => {
                            let r = x.hypot(y);
                            if r <= radius {
                                turning.nearest = turning.nearest.min(r);
                            }
                        }
                        _ => turning.unknown += 1,
                    }
                }
            }
        }
    }
    reading.ahead = ahead.zone(zones.max_unknown_fraction);
    reading.behind = behind.zone(zones.max_unknown_fraction);
    reading.turning = turn_radius.map(|_| turning.zone(zones.max_unknown_fraction));
    Ok(reading)
}

/// Which cells of the zones a scan observed, in its plane: those its
/// beams crossed up to their return (a beam with no usable return, or one
/// returning from inside the footprint, observes nothing), and how many
/// it did not, per direction (ahead, behind).
pub fn observe_zones(
    scan: &ScanView,
    laser: &LaserPose,
    footprint: &Footprint,
    grid: &ZoneGrid,
) -> ([Vec<bool>; 2], [Vec<bool>; 2], [Unseen; 2]) {
    let mut observed =
        [vec![false; grid.cells(Direction::Ahead)], vec![false; grid.cells(Direction::Behind)]];
    let mut clear = observed.clone();
    let mut hit = observed.clone();
    let mut no_return =
        [vec![false; grid.cells(Direction::Ahead)], vec![false; grid.cells(Direction::Behind)]];
    let reach = grid.reach_m.max(grid.front_m).max(grid.rear_m) + grid.half_width_m;
    let step = grid.cell_m / 2.0;
    let (ox, oy) = (laser.x_m, laser.y_m);
    for (i, &range) in scan.ranges_m.iter().enumerate() {
        let angle = laser.yaw_rad + scan.angle_min_rad + scan.angle_increment_rad * i as f64;
        if !angle.is_finite() {
            continue;
        }
        let (dx, dy) = (angle.cos(), angle.sin());
        let range = f64::from(range);
        let usable = range.is_finite()
            && range >= scan.range_min_m
            && range <= scan.range_max_m
            && range >= 0.0;
        let hit_inside_robot = usable && footprint.contains(ox + range * dx, oy + range * dy);
        let leaves = footprint.exit(ox, oy, dx, dy);
        // How far along the beam the scan tells something: to the return.
        let returned = usable && !hit_inside_robot;
        let until = if returned { range.min(reach + ox.hypot(oy)) } else { reach + ox.hypot(oy) };
        if returned {
            if let Some((direction, cell)) = grid.locate(ox + range * dx, oy + range * dy) {
                hit[usize::from(direction == Direction::Behind)][cell] = true;
            }
        }
        let mut t = leaves;
        while t <= until {
            if let Some((direction, cell)) = grid.locate(ox + t * dx, oy + t * dy) {
                let index = usize::from(direction == Direction::Behind);
                if returned {
                    observed[index][cell] = true;
                    // Short of the return (by half a cell): seen clear at the plane.
                    if t < range - step {
                        clear[index][cell] = true;
                    }
                } else {
                    no_return[index][cell] = true;
                }
            }
            t += step;
        }
    }
    // A cell a beam returned from is not clear, whatever other beams crossed it.
    for index in 0..2 {
        for (clear, hit) in clear[index].iter_mut().zip(&hit[index]) {
            *clear &= !hit;
        }
    }
    let mut unseen = [Unseen::default(); 2];
    for index in 0..2 {
        for (cell, seen) in observed[index].iter().enumerate() {
            if !seen {
                if no_return[index][cell] {
                    unseen[index].no_return += 1;
                } else {
                    unseen[index].out_of_view += 1;
                }
            }
        }
    }
    (observed, clear, unseen)
}

/// The most restrictive of two readings of the same direction's nearest
/// obstacle (`None` = nothing seen): the nearer wins, and NaN (an obstacle
/// at an unknown distance) wins over everything.
pub fn most_restrictive(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) if a.is_nan() || b.is_nan() => Some(f64::NAN),
        (Some(a), Some(b)) => Some(a.min(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::f64::consts::PI;

    /// A TurtleBot 3 burger-like outline: axle at the origin, body from
    /// 0.10 m behind to 0.05 m ahead, 0.09 m each side.
    const BURGER: Footprint =
        Footprint::Rectangle { front_m: 0.05, rear_m: 0.10, half_width_m: 0.09 };
    const CREATE3: Footprint = Footprint::Circle { radius_m: 0.17 };
    const BEAMS: usize = 360;

    fn zones(footprint: Footprint) -> ScanZones {
        ScanZones { footprint, margin_m: 0.03, reach_m: 0.5, max_unknown_fraction: 0.1 }
    }

    fn at_origin() -> LaserPose {
        LaserPose { x_m: 0.0, y_m: 0.0, yaw_rad: 0.0 }
    }

    /// Ray-casts a 360-beam scan from `laser` (in the base frame) against
    /// axis-aligned boxes `(min_x, max_x, min_y, max_y)` inside a square
    /// room of half size 2 m about the origin; range max 3.5 m.
    fn render(laser: &LaserPose, boxes: &[(f64, f64, f64, f64)]) -> Vec<f32> {
        (0..BEAMS)
            .map(|i| {
                let angle = laser.yaw_rad - PI + 2.0 * PI * i as f64 / BEAMS as f64;
                let (dx, dy) = (angle.cos(), angle.sin());
                let mut best = f64::INFINITY;
                let walls = [
                    (2.0, 2.1, -2.1, 2.1),
                    (-2.1, -2.0, -2.1, 2.1),
                    (-2.1, 2.1, 2.0, 2.1),
                    (-2.1, 2.1, -2.1, -2.0),
                ];
                for &(min_x, max_x, min_y, max_y) in boxes.iter().chain(walls.iter()) {
                    if let Some((t, _)) =
                        (Aabb { min_x, max_x, min_y, max_y }).span(laser.x_m, laser.y_m, dx, dy)
                    {
                        if t > 0.0 {
                            best = best.min(t);
                        }
                    }
                }
                if best <= 3.5 {
                    best as f32
                } else {
                    f32::INFINITY
                }
            })
            .collect()
    }

    fn view(ranges: &[f32]) -> ScanView<'_> {
        ScanView {
            angle_min_rad: -PI,
            angle_increment_rad: 2.0 * PI / BEAMS as f64,
            range_min_m: 0.12,
            range_max_m: 3.5,
            ranges_m: ranges,
        }
    }

    fn read(
        laser: &LaserPose,
        boxes: &[(f64, f64, f64, f64)],
        footprint: Footprint,
    ) -> ScanReading {
        let ranges = render(laser, boxes);
        read_scan(&view(&ranges), laser, &zones(footprint)).unwrap()
    }

    fn distance(zone: Zone) -> f64 {
        match zone {
            Zone::At { distance_m } => distance_m,
            other => panic!("expected an obstacle, got {other:?}"),
        }
    }

    #[test]
    fn an_empty_room_is_clear_all_round() {
        let r = read(&at_origin(), &[], BURGER);
        assert_eq!(
            (r.ahead, r.behind, r.turning),
            (Zone::Clear, Zone::Clear, Some(Zone::Clear)),
            "{r:?}"
        );
        assert_eq!((r.beams, r.valid, r.self_hits), (BEAMS, BEAMS, 0));
        let r = read(&at_origin(), &[], CREATE3);
        assert_eq!(r.turning, None, "a round robot has no turning zone");
    }

    #[test]
    fn an_obstacle_behind_is_measured_from_the_origin_along_minus_x() {
        let r = read(&at_origin(), &[(-0.40, -0.30, -0.1, 0.1)], BURGER);
        assert!((distance(r.behind) - 0.30).abs() < 1e-5, "{r:?}");
        assert_eq!(r.ahead, Zone::Clear);
        // The same from a laser mounted 3 cm behind the axle, turned 90 degrees.
        let laser = LaserPose { x_m: -0.03, y_m: 0.0, yaw_rad: PI / 2.0 };
        let r = read(&laser, &[(-0.40, -0.30, -0.1, 0.1)], BURGER);
        assert!((distance(r.behind) - 0.30).abs() < 1e-5, "{r:?}");
        let r = read(&at_origin(), &[(0.25, 0.35, -0.05, 0.05)], BURGER);
        assert!((distance(r.ahead) - 0.25).abs() < 1e-5, "{r:?}");
        assert_eq!(r.behind, Zone::Clear);
    }

    #[test]
    fn beside_the_corridor_is_not_ahead_but_is_in_the_turning_sweep_of_a_rectangle() {
        // A post 0.15 m to the left of the axle: outside the corridor
        // (0.09 + 0.03) but inside the swept circle (0.135 + 0.03).
        let post = (-0.02, 0.02, 0.14, 0.18);
        let r = read(&at_origin(), &[post], BURGER);
        assert_eq!((r.ahead, r.behind), (Zone::Clear, Zone::Clear), "{r:?}");
        assert!((distance(r.turning.unwrap()) - 0.14).abs() < 1e-5, "{r:?}");
        // Beside a round robot, beyond the margin: nothing to guard.
        let r = read(&at_origin(), &[(-0.02, 0.02, 0.22, 0.26)], CREATE3);
        assert_eq!((r.ahead, r.behind, r.turning), (Zone::Clear, Zone::Clear, None));
    }

    #[test]
    fn invalid_ranges_never_clear_a_zone() {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, 0.05, 99.0, -1.0] {
            let ranges = vec![bad; BEAMS];
            let r = read_scan(&view(&ranges), &at_origin(), &zones(BURGER)).unwrap();
            assert!(
                matches!(r.ahead, Zone::Blind { .. }) && matches!(r.behind, Zone::Blind { .. }),
                "{bad}: {r:?}"
            );
            assert!(matches!(r.turning, Some(Zone::Blind { .. })), "{bad}: {r:?}");
            assert_eq!(r.valid, 0, "{bad}");
            assert!(
                r.behind.obstacle_m().is_some_and(f64::is_nan),
                "blind reads as an obstacle at an unknown distance"
            );
        }
    }

    #[test]
    fn a_few_dropouts_are_tolerated_and_many_are_not() {
        let mut ranges = render(&at_origin(), &[]);
        // Every 20th beam lost: 5 %, under the 10 % tolerated.
        for i in (0..BEAMS).step_by(20) {
            ranges[i] = f32::NAN;
        }
        let r = read_scan(&view(&ranges), &at_origin(), &zones(BURGER)).unwrap();
        assert_eq!((r.ahead, r.behind), (Zone::Clear, Zone::Clear), "{r:?}");
        // The whole rear half lost.
        for (i, range) in ranges.iter_mut().enumerate() {
            if !(BEAMS / 4..3 * BEAMS / 4).contains(&i) {
                *range = f32::INFINITY;
            }
        }
        let r = read_scan(&view(&ranges), &at_origin(), &zones(BURGER)).unwrap();
        assert!(matches!(r.behind, Zone::Blind { .. }), "{r:?}");
        assert_eq!(r.ahead, Zone::Clear, "{r:?}");
    }

    #[test]
    fn a_scanner_that_does_not_look_behind_leaves_behind_blind() {
        // A 180-degree scanner facing forward.
        let ranges = vec![3.0f32; 180];
        let front_only = ScanView {
            angle_min_rad: -PI / 2.0 + 0.01,
            angle_increment_rad: (PI - 0.02) / 180.0,
            range_min_m: 0.1,
            range_max_m: 3.5,
            ranges_m: &ranges,
        };
        let r = read_scan(&front_only, &at_origin(), &zones(CREATE3)).unwrap();
        assert_eq!(r.ahead, Zone::Clear);
        assert_eq!(
            r.behind,
            Zone::Blind { unknown: 0, beams: 0 },
            "no beam crosses it: not sensed, not clear"
        );
    }

    #[test]
    fn returns_inside_the_footprint_are_the_robot_and_clear_nothing() {
        let ranges = vec![0.04f32; BEAMS];
        let scan = ScanView { range_min_m: 0.01, ..view(&ranges) };
        let r = read_scan(&scan, &at_origin(), &zones(BURGER)).unwrap();
        assert_eq!(r.self_hits, BEAMS);
        assert!(
            matches!(r.ahead, Zone::Blind { .. }) && matches!(r.behind, Zone::Blind { .. }),
            "{r:?}"
        );
    }

    #[test]
    fn unusable_scans_are_errors() {
        let ranges = vec![1.0f32; 10];
        assert!(matches!(
            read_scan(
                &ScanView { angle_increment_rad: 0.0, ..view(&ranges) },
                &at_origin(),
                &zones(BURGER)
            ),
            Err(ScanError::BadAngles { .. })
        ));
        assert!(matches!(
            read_scan(
                &ScanView { angle_min_rad: f64::NAN, ..view(&ranges) },
                &at_origin(),
                &zones(BURGER)
            ),
            Err(ScanError::BadAngles { .. })
        ));
        assert_eq!(read_scan(&view(&[]), &at_origin(), &zones(BURGER)), Err(ScanError::Empty));
        assert_eq!(
            read_scan(&view(&ranges), &LaserPose { x_m: f64::NAN, ..at_origin() }, &zones(BURGER)),
            Err(ScanError::BadPose)
        );
        let bad = ScanZones { max_unknown_fraction: 1.5, ..zones(BURGER) };
        assert!(matches!(
            read_scan(&view(&ranges), &at_origin(), &bad),
            Err(ScanError::BadZones(_))
        ));
    }

    #[test]
    fn the_most_restrictive_reading_wins() {
        assert_eq!(most_restrictive(None, None), None);
        assert_eq!(most_restrictive(Some(0.4), None), Some(0.4));
        assert_eq!(most_restrictive(None, Some(0.3)), Some(0.3));
        assert_eq!(most_restrictive(Some(0.4), Some(0.3)), Some(0.3));
        assert!(most_restrictive(Some(0.4), Some(f64::NAN)).unwrap().is_nan());
        assert!(most_restrictive(Some(f64::NAN), None).unwrap().is_nan());
    }

    proptest! {
        /// Whatever the ranges, a zone reads clear only if at most the
        /// tolerated fraction of its beams is unusable, and an obstacle's
        /// distance is finite and non-negative.
        #[test]
        fn garbage_never_reads_clear(ranges in proptest::collection::vec(prop_oneof![
            Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY), -5.0f32..0.0, 0.0f32..5.0,
        ], 1..400), yaw in -PI..PI) {
            let laser = LaserPose { x_m: 0.0, y_m: 0.0, yaw_rad: yaw };
            let scan = ScanView { angle_min_rad: -PI, angle_increment_rad: 2.0 * PI / ranges.len() as f64, range_min_m: 0.12, range_max_m: 3.5, ranges_m: &ranges };
            let r = read_scan(&scan, &laser, &zones(BURGER)).unwrap();
            let usable = ranges.iter().filter(|v| v.is_finite() && (0.12..=3.5).contains(&f64::from(**v))).count();
            prop_assert_eq!(r.valid, usable);
            for zone in [r.ahead, r.behind, r.turning.unwrap()] {
                match zone {
                    Zone::At { distance_m } => prop_assert!(distance_m.is_finite() && distance_m >= 0.0),
                    Zone::Blind { unknown, beams } => prop_assert!(beams == 0 || unknown as f64 > 0.1 * beams as f64),
                    Zone::Clear => prop_assert!(usable > 0, "clear with no usable beam"),
                }
            }
        }

        /// An obstacle placed behind within reach is always seen (at its
        /// face's distance) or, if the beams miss it, never read as clear
        /// nearer than it.
        #[test]
        fn a_box_behind_is_seen_at_its_face(face in 0.13f64..0.49, half in 0.03f64..0.2) {
            let r = read(&at_origin(), &[(-face - 0.1, -face, -half, half)], BURGER);
            let d = distance(r.behind);
            prop_assert!((d - face).abs() < 1e-5, "face {} read {}", face, d);
        }
    }
}

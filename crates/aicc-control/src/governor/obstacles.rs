//! The nearest obstacle ahead of the base, from a depth image: pure
//! geometry, no ROS, no clock.
//!
//! Each (subsampled) pixel is back-projected with the pinhole model into the
//! camera's optical frame (REP-103: z forward, x right, y down; the depth
//! value is the z coordinate, as REP-118 depth images store it), moved into
//! the base frame with the camera pose the caller passes (the head pans and
//! tilts, so it changes), and kept if it lies in the corridor the robot will
//! sweep: `x > min_x_m`, `|y| <= half_width_m + margin_m`, and `min_z_m <=
//! z <= max_z_m`. With the pose given in `base_footprint` (z = 0 on the
//! floor), the height band excludes the floor. The answer is the smallest
//! `x` kept: the distance ahead along +x from the base frame's origin (not
//! from the bumper: compare it with stop distances measured the same way).
//!
//! NaN, infinite, zero and negative depths are skipped (REP-117: +inf is
//! "nothing in range", -inf "too close", NaN "no return"); [`DepthScan`]
//! counts them so that a caller can tell "clear" from "blind".

use nalgebra::{Isometry3, Point3, Translation3, UnitQuaternion, Vector3};
use thiserror::Error;

use super::coverage::{Direction, Unseen, ZoneGrid};
use super::footprint::Footprint;

/// Pinhole intrinsics in pixels (from sensor_msgs/CameraInfo `K`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CameraIntrinsics {
    pub fx: f64,
    pub fy: f64,
    pub cx: f64,
    pub cy: f64,
}

impl CameraIntrinsics {
    /// Square pixels, principal point at the image centre, from the
    /// horizontal field of view (rad) and the image size: what Gazebo-style
    /// simulated cameras produce.
    pub fn from_horizontal_fov(
        horizontal_fov_rad: f64,
        width: usize,
        height: usize,
    ) -> CameraIntrinsics {
        let f = width as f64 / 2.0 / (horizontal_fov_rad / 2.0).tan();
        CameraIntrinsics {
            fx: f,
            fy: f,
            cx: (width as f64 - 1.0) / 2.0,
            cy: (height as f64 - 1.0) / 2.0,
        }
    }
}

/// A depth image: `width * height` depths in metres, row-major.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DepthImage<'a> {
    width: usize,
    height: usize,
    data: &'a [f32],
}

impl<'a> DepthImage<'a> {
    /// Checks that `data` holds exactly `width * height` samples.
    pub fn new(width: usize, height: usize, data: &'a [f32]) -> Result<Self, ObstacleError> {
        if width.checked_mul(height) != Some(data.len()) {
            return Err(ObstacleError::BufferSize { width, height, len: data.len() });
        }
        Ok(DepthImage { width, height, data })
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn height(&self) -> usize {
        self.height
    }

    /// The depth at column `u`, row `v`.
    pub fn depth(&self, u: usize, v: usize) -> Option<f32> {
        (u < self.width && v < self.height).then(|| self.data[v * self.width + u])
    }
}

/// The corridor the robot sweeps, and how finely to sample.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Corridor {
    /// Half the robot's width, m.
    pub half_width_m: f64,
    /// Extra clearance on each side, m.
    pub margin_m: f64,
    /// Points at or below this height (the floor, with its noise) are ignored, m.
    pub min_z_m: f64,
    /// Points above this height (overhangs the robot passes under) are ignored, m.
    pub max_z_m: f64,
    /// Points at or behind this x are ignored (0 for "ahead of the origin").
    pub min_x_m: f64,
    /// Use every `stride`-th pixel of every `stride`-th row (>= 1).
    pub stride: usize,
}

impl Corridor {
    /// For the aicc_bot base: 0.22 m wide body (half 0.11, wheels at 0.13 +
    /// 9 mm), 3 cm margin, floor band up to 2 cm, up to 0.45 m (camera head
    /// height plus margin), every second pixel.
    pub const AICC_BOT: Corridor = Corridor {
        half_width_m: 0.14,
        margin_m: 0.03,
        min_z_m: 0.02,
        max_z_m: 0.45,
        min_x_m: 0.0,
        stride: 2,
    };

    fn validate(&self) -> Result<(), ObstacleError> {
        let finite = [self.half_width_m, self.margin_m, self.min_z_m, self.max_z_m, self.min_x_m]
            .iter()
            .all(|v| v.is_finite());
        if !finite
            || self.half_width_m < 0.0
            || self.margin_m < 0.0
            || self.min_z_m > self.max_z_m
            || self.stride == 0
        {
            return Err(ObstacleError::BadCorridor(*self));
        }
        Ok(())
    }
}

/// Why a scan could not be made. A scan that cannot be made must not read
/// as "no obstacle", so these are errors, not `None`.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ObstacleError {
    /// The buffer does not hold `width * height` samples.
    #[error("depth buffer has {len} samples, expected {width} x {height}")]
    BufferSize { width: usize, height: usize, len: usize },
    /// Focal lengths not positive and finite, or a non-finite principal point.
    #[error("camera intrinsics are not usable: {0:?}")]
    BadIntrinsics(CameraIntrinsics),
    /// The camera pose contains NaN or infinite values.
    #[error("camera pose is not finite")]
    BadPose,
    /// Non-finite or inverted corridor bounds, or a zero stride.
    #[error("corridor is not usable: {0:?}")]
    BadCorridor(Corridor),
}

/// The result of one scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct DepthScan {
    /// The nearest obstacle ahead in the corridor, m (its base-frame x).
    pub nearest_ahead_m: Option<f64>,
    /// Pixels examined (after subsampling).
    pub examined: usize,
    /// Pixels with a usable (finite, positive) depth.
    pub valid: usize,
    /// Pixels reading "too close" (-inf, zero or negative).
    pub too_close: usize,
    /// Valid points inside the corridor.
    pub in_corridor: usize,
}

/// The rotation from the camera's optical frame to its body frame
/// (`camera_link`, x forward): the URDF's `rpy="-pi/2 0 -pi/2"`. Compose a
/// body pose with it to get the optical pose: `body * optical_rotation()`.
pub fn optical_rotation() -> UnitQuaternion<f64> {
    UnitQuaternion::from_euler_angles(
        -std::f64::consts::FRAC_PI_2,
        0.0,
        -std::f64::consts::FRAC_PI_2,
    )
}

/// The optical frame's pose in the base frame, given the pose of the
/// camera's body frame (x forward, y left, z up) there.
pub fn optical_pose_from_body(body_in_base: &Isometry3<f64>) -> Isometry3<f64> {
    body_in_base * Isometry3::from_parts(Translation3::identity(), optical_rotation())
}

/// The nearest obstacle ahead in `corridor` from a depth image, m; `None`
/// when no valid point lies in the corridor. `camera_in_base` is the pose of
/// the camera's optical frame in the base frame.
pub fn nearest_obstacle_ahead(
    image: &DepthImage,
    intrinsics: &CameraIntrinsics,
    camera_in_base: &Isometry3<f64>,
    corridor: &Corridor,
) -> Result<Option<f64>, ObstacleError> {
    Ok(scan_depth_image(image, intrinsics, camera_in_base, corridor)?.nearest_ahead_m)
}

/// [`nearest_obstacle_ahead`] with the sample counts.
pub fn scan_depth_image(
    image: &DepthImage,
    intrinsics: &CameraIntrinsics,
    camera_in_base: &Isometry3<f64>,
    corridor: &Corridor,
) -> Result<DepthScan, ObstacleError> {
    let projector = Projector::new(intrinsics, camera_in_base, corridor)?;
    let stride = corridor.stride;
    // Column ray factors, computed once per column.
    let columns: Vec<(usize, f64)> = (0..image.width)
        .step_by(stride)
        .map(|u| (u, (u as f64 - intrinsics.cx) / intrinsics.fx))
        .collect();
    let mut scan = DepthScan::default();
    let mut nearest = f64::INFINITY;
    for v in (0..image.height).step_by(stride) {
        let row_ray = projector.row_ray(v as f64);
        let row = &image.data[v * image.width..(v + 1) * image.width];
        for &(u, a) in &columns {
            projector.accumulate(row[u] as f64, a, &row_ray, corridor, &mut nearest, &mut scan);
        }
    }
    scan.nearest_ahead_m = nearest.is_finite().then_some(nearest);
    Ok(scan)
}

/// The same for sparse samples `(u, v, depth_m)` (pixel coordinates may be
/// fractional); every sample is used.
pub fn scan_depth_samples(
    samples: impl IntoIterator<Item = (f64, f64, f64)>,
    intrinsics: &CameraIntrinsics,
    camera_in_base: &Isometry3<f64>,
    corridor: &Corridor,
) -> Result<DepthScan, ObstacleError> {
    let projector = Projector::new(intrinsics, camera_in_base, corridor)?;
    let mut scan = DepthScan::default();
    let mut nearest = f64::INFINITY;
    for (u, v, depth) in samples {
        if !(u.is_finite() && v.is_finite()) {
            scan.examined += 1;
            continue;
        }
        let row_ray = projector.row_ray(v);
        projector.accumulate(
            depth,
            (u - intrinsics.cx) / intrinsics.fx,
            &row_ray,
            corridor,
            &mut nearest,
            &mut scan,
        );
    }
    scan.nearest_ahead_m = nearest.is_finite().then_some(nearest);
    Ok(scan)
}

/// Back-projection folded into the base frame: a pixel with ray factors
/// `(a, b)` at depth `d` lands at `origin + d * (a * col0 + b * col1 + col2)`
/// where `colN` are the columns of the camera's rotation.
struct Projector {
    col0: Vector3<f64>,
    col1: Vector3<f64>,
    col2: Vector3<f64>,
    origin: Point3<f64>,
    fy: f64,
    cy: f64,
    half_width: f64,
}

impl Projector {
    fn new(
        intrinsics: &CameraIntrinsics,
        camera_in_base: &Isometry3<f64>,
        corridor: &Corridor,
    ) -> Result<Self, ObstacleError> {
        let i = intrinsics;
        if !(i.fx.is_finite()
            && i.fy.is_finite()
            && i.fx > 0.0
            && i.fy > 0.0
            && i.cx.is_finite()
            && i.cy.is_finite())
        {
            return Err(ObstacleError::BadIntrinsics(*intrinsics));
        }
        corridor.validate()?;
        let rotation = camera_in_base.rotation.to_rotation_matrix();
        let m = rotation.matrix();
        let origin = Point3::from(camera_in_base.translation.vector);
        if !(m.iter().all(|v| v.is_finite()) && origin.iter().all(|v| v.is_finite())) {
            return Err(ObstacleError::BadPose);
        }
        Ok(Projector {
            col0: m.column(0).into_owned(),
            col1: m.column(1).into_owned(),
            col2: m.column(2).into_owned(),
            origin,
            fy: i.fy,
            cy: i.cy,
            half_width: corridor.half_width_m + corridor.margin_m,
        })
    }

    fn row_ray(&self, v: f64) -> Vector3<f64> {
        self.col1 * ((v - self.cy) / self.fy) + self.col2
    }

    #[inline]
    fn accumulate(
        &self,
        depth: f64,
        a: f64,
        row_ray: &Vector3<f64>,
        corridor: &Corridor,
        nearest: &mut f64,
        scan: &mut DepthScan,
    ) {
        scan.examined += 1;
        if depth.is_nan() || depth == f64::INFINITY {
            return;
        }
        if depth <= 0.0 {
            scan.too_close += 1;
            return;
        }
        scan.valid += 1;
        let ray = self.col0 * a + row_ray;
        let x = self.origin.x + depth * ray.x;
        // NaN never passes.
        if x.is_nan() || x <= corridor.min_x_m {
            return;
        }
        let y = self.origin.y + depth * ray.y;
        let z = self.origin.z + depth * ray.z;
        if y.abs() <= self.half_width && z > corridor.min_z_m && z <= corridor.max_z_m {
            scan.in_corridor += 1;
            if x < *nearest {
                *nearest = x;
            }
        }
    }
}

/// The robot's own body, as its depth camera may see it: a prism over the
/// footprint up to `height_m`, and capsules around its articulated links
/// (the arm, the head). A return inside it is the robot, never an obstacle,
/// and what it hides is not observed.
#[derive(Debug, Clone, PartialEq)]
pub struct SelfShape {
    pub footprint: Footprint,
    pub height_m: f64,
    pub capsules: Vec<Capsule>,
}

/// The points within `radius_m` of the segment `a`-`b` (base frame).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capsule {
    pub a: Point3<f64>,
    pub b: Point3<f64>,
    pub radius_m: f64,
}

impl Capsule {
    pub fn contains(&self, p: &Point3<f64>) -> bool {
        let ab = self.b - self.a;
        let length2 = ab.norm_squared();
        let t = if length2 > 0.0 { ((p - self.a).dot(&ab) / length2).clamp(0.0, 1.0) } else { 0.0 };
        (self.a + ab * t - p).norm() <= self.radius_m
    }
}

impl SelfShape {
    pub fn contains(&self, p: &Point3<f64>) -> bool {
        (p.z <= self.height_m && self.footprint.contains(p.x, p.y))
            || self.capsules.iter().any(|c| c.contains(p))
    }
}

/// How a depth frame is read for the governor.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct DepthReadSettings {
    /// Points at or below this height are the floor (with its noise), m,
    /// near the camera...
    pub floor_band_m: f64,
    /// ...and the band grows by this much a metre of horizontal distance
    /// from the camera (depth noise and the robot's pitch grow with it).
    pub floor_band_per_m: f64,
    /// Points above this height are overhangs the robot passes under, m.
    pub max_z_m: f64,
    /// Points farther than this (horizontally, from the base's origin) are
    /// not kept, m.
    pub window_m: f64,
    /// Depths below this are no return (the sensor's minimum range), m.
    pub min_range_m: f64,
    /// Every `stride`-th pixel of every `stride`-th row is back-projected.
    pub stride: usize,
    /// A cell of this size must hold at least `min_points` returns for its
    /// points to count (a lone speckle is noise), m.
    pub noise_cell_m: f64,
    pub min_points: usize,
}

impl DepthReadSettings {
    pub const DEFAULT: DepthReadSettings = DepthReadSettings {
        floor_band_m: 0.02,
        floor_band_per_m: 0.02,
        max_z_m: 0.45,
        window_m: 2.0,
        min_range_m: 0.1,
        stride: 2,
        noise_cell_m: 0.02,
        min_points: 2,
    };

    /// The floor band at `distance_m` (horizontal) from the camera.
    pub fn floor_band_at(&self, distance_m: f64) -> f64 {
        self.floor_band_m + self.floor_band_per_m * distance_m.max(0.0)
    }
}

/// What one depth frame tells the governor.
#[derive(Debug, Clone, PartialEq)]
pub struct DepthFrameReading {
    /// Obstacle points (base frame): in the height band, not the robot,
    /// within the window, in cells with enough returns.
    pub points: Vec<Point3<f64>>,
    /// The pixels examined and why kept or not; `nearest_ahead_m` is the
    /// nearest kept point in the corridor ahead (its x), for messages.
    pub counts: DepthScan,
    /// The zone cells the frame observed, and why not the others, per
    /// direction (ahead, behind), as [`Observation`] holds them.
    pub observed: [Vec<bool>; 2],
    /// Of those, the cells whose floor was seen (nothing in front of it).
    pub clear: [Vec<bool>; 2],
    pub unseen: [Unseen; 2],
}

/// Reads a depth frame: its obstacle points and what it observed of the
/// zones. `camera_in_base` is the optical frame's pose in the base frame.
pub fn read_depth_frame(
    image: &DepthImage,
    intrinsics: &CameraIntrinsics,
    camera_in_base: &Isometry3<f64>,
    settings: &DepthReadSettings,
    grid: &ZoneGrid,
    body: &SelfShape,
) -> Result<DepthFrameReading, ObstacleError> {
    let corridor = Corridor {
        half_width_m: grid.half_width_m,
        margin_m: 0.0,
        min_z_m: settings.floor_band_m,
        max_z_m: settings.max_z_m,
        min_x_m: grid.front_m,
        stride: settings.stride.max(1),
    };
    let projector = Projector::new(intrinsics, camera_in_base, &corridor)?;
    let stride = corridor.stride;
    let mut counts = DepthScan::default();
    let mut by_cell: std::collections::HashMap<(i64, i64), Vec<Point3<f64>>> =
        std::collections::HashMap::new();
    let columns: Vec<(usize, f64)> = (0..image.width)
        .step_by(stride)
        .map(|u| (u, (u as f64 - intrinsics.cx) / intrinsics.fx))
        .collect();
    for v in (0..image.height).step_by(stride) {
        let row_ray = projector.row_ray(v as f64);
        let row = &image.data[v * image.width..(v + 1) * image.width];
        for &(u, a) in &columns {
            counts.examined += 1;
            let depth = f64::from(row[u]);
            if depth.is_nan() || depth == f64::INFINITY {
                continue;
            }
            if !(depth >= settings.min_range_m) {
                counts.too_close += 1;
                continue;
            }
            counts.valid += 1;
            let p = projector.origin + (projector.col0 * a + row_ray) * depth;
            let band =
                settings.floor_band_at((p.x - projector.origin.x).hypot(p.y - projector.origin.y));
            if !(p.z > band && p.z <= settings.max_z_m)
                || p.x.hypot(p.y) > settings.window_m
                || body.contains(&p)
            {
                continue;
            }
            if p.x > corridor.min_x_m && p.y.abs() <= corridor.half_width_m {
                counts.in_corridor += 1;
            }
            let key = (
                (p.x / settings.noise_cell_m).floor() as i64,
                (p.y / settings.noise_cell_m).floor() as i64,
            );
            by_cell.entry(key).or_default().push(p);
        }
    }
    let points: Vec<Point3<f64>> =
        by_cell.into_values().filter(|cell| cell.len() >= settings.min_points).flatten().collect();
    counts.nearest_ahead_m = points
        .iter()
        .filter(|p| p.x > corridor.min_x_m && p.y.abs() <= corridor.half_width_m)
        .map(|p| p.x)
        .min_by(f64::total_cmp);
    let mut observed =
        [vec![false; grid.cells(Direction::Ahead)], vec![false; grid.cells(Direction::Behind)]];
    let mut clear = observed.clone();
    let mut unseen = [Unseen::default(); 2];
    let to_camera = camera_in_base.inverse();
    for (index, direction) in Direction::BOTH.into_iter().enumerate() {
        for cell in 0..grid.cells(direction) {
            let (x, y) = grid.centre(direction, cell);
            match observe_floor_point(
                image,
                intrinsics,
                &to_camera,
                &projector,
                &Point3::new(x, y, 0.0),
                settings,
                body,
            ) {
                CellSight::Clear => {
                    observed[index][cell] = true;
                    clear[index][cell] = true;
                }
                CellSight::Blocked => observed[index][cell] = true,
                CellSight::OutOfView => unseen[index].out_of_view += 1,
                CellSight::NoReturn => unseen[index].no_return += 1,
                CellSight::SelfOccluded => unseen[index].self_occluded += 1,
                CellSight::FloorMissing => unseen[index].floor_missing += 1,
                CellSight::HiddenAbove => unseen[index].hidden_above += 1,
            }
        }
    }
    Ok(DepthFrameReading { points, counts, observed, clear, unseen })
}

/// What the frame says of one floor point.
enum CellSight {
    /// The floor seen where it should be.
    Clear,
    /// Something seen in front of it (an obstacle, or a floor bump).
    Blocked,
    OutOfView,
    NoReturn,
    SelfOccluded,
    FloorMissing,
    HiddenAbove,
}

/// The floor point's pixel and expected depth, if it is in the frame.
fn pixel_of(
    image: &DepthImage,
    intrinsics: &CameraIntrinsics,
    to_camera: &Isometry3<f64>,
    point: &Point3<f64>,
) -> Option<(usize, usize, f64)> {
    let p = to_camera * point;
    if !(p.z > 1e-3) {
        return None;
    }
    let u = (intrinsics.fx * p.x / p.z + intrinsics.cx).round();
    let v = (intrinsics.fy * p.y / p.z + intrinsics.cy).round();
    (u >= 0.0 && v >= 0.0 && u < image.width as f64 && v < image.height as f64)
        .then_some((u as usize, v as usize, p.z))
}

/// Whether a pixel's depth saw `point` (or past it) for [`super::memory`]:
/// `Some(true)` seen past it by a clear margin, or its ray reaching the
/// floor behind it; `Some(false)` seen at or before it; `None` not in the
/// frame or no usable return.
pub fn sees_past(
    image: &DepthImage,
    intrinsics: &CameraIntrinsics,
    camera_in_base: &Isometry3<f64>,
    point: &Point3<f64>,
    min_range_m: f64,
) -> Option<bool> {
    let (u, v, expected) = pixel_of(image, intrinsics, &camera_in_base.inverse(), point)?;
    let measured = f64::from(image.depth(u, v)?);
    if measured.is_nan() || !(measured >= min_range_m) {
        return None;
    }
    // +inf is "nothing in range": past it, if the point is in range at all.
    if measured > expected + 0.05 + 0.05 * expected {
        return Some(true);
    }
    // A low point has the floor just behind it along the ray (5 cm for a
    // point 5 cm up, 0.6 m away), less than the margin above: the floor
    // seen where it lies, farther than the point by more than its noise,
    // is the point gone. (Depth scales along a ray from the camera, so the
    // floor's depth there is the point's, stretched to the floor.)
    let height = camera_in_base.translation.vector.z;
    if point.z > 0.0 && point.z < height {
        let floor = expected * height / (height - point.z);
        let noise = 0.02 + 0.03 * floor;
        if floor - expected > noise && measured >= floor - noise {
            return Some(true);
        }
    }
    Some(false)
}

fn observe_floor_point(
    image: &DepthImage,
    intrinsics: &CameraIntrinsics,
    to_camera: &Isometry3<f64>,
    projector: &Projector,
    point: &Point3<f64>,
    settings: &DepthReadSettings,
    body: &SelfShape,
) -> CellSight {
    let Some((u, v, expected)) = pixel_of(image, intrinsics, to_camera, point) else {
        return CellSight::OutOfView;
    };
    let measured = image.depth(u, v).map_or(f64::NAN, f64::from);
    if measured.is_nan() || !(measured >= settings.min_range_m) {
        return CellSight::NoReturn;
    }
    // Nearer than the floor by more than the noise: something in the way.
    if measured < expected - (0.02 + 0.03 * expected) {
        let a = (u as f64 - intrinsics.cx) / intrinsics.fx;
        let hit = projector.origin + (projector.col0 * a + projector.row_ray(v as f64)) * measured;
        if body.contains(&hit) {
            return CellSight::SelfOccluded;
        }
        if hit.z > settings.max_z_m {
            return CellSight::HiddenAbove;
        }
        // An obstacle (its points are the obstacle rule's) or a floor bump:
        // either way the place is known, not seen clear.
        return CellSight::Blocked;
    }
    // Farther than the floor by more than the noise: no floor where it should be.
    if measured > expected + (0.05 + 0.1 * expected) {
        return CellSight::FloorMissing;
    }
    CellSight::Clear
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIDTH: usize = 320;
    const HEIGHT: usize = 240;
    /// The URDF's camera: 62.2 degrees horizontal, 320 x 240, far clip 10 m.
    const HFOV: f64 = 1.085595;

    fn intrinsics() -> CameraIntrinsics {
        CameraIntrinsics::from_horizontal_fov(HFOV, WIDTH, HEIGHT)
    }

    /// The optical frame's pose in base_footprint for head pan/tilt angles,
    /// from the URDF chain: base_joint (z 0.033), head_pan_joint (x -0.10,
    /// z 0.550, about z), head_tilt_joint (z 0.045, about y; positive
    /// pitches down), camera_joint (x 0.025).
    fn camera_pose(pan: f64, tilt: f64) -> Isometry3<f64> {
        let base = Isometry3::translation(0.0, 0.0, 0.033);
        let pan = Isometry3::from_parts(
            Translation3::new(-0.10, 0.0, 0.550),
            UnitQuaternion::from_axis_angle(&Vector3::z_axis(), pan),
        );
        let tilt = Isometry3::from_parts(
            Translation3::new(0.0, 0.0, 0.045),
            UnitQuaternion::from_axis_angle(&Vector3::y_axis(), tilt),
        );
        let camera = Isometry3::translation(0.025, 0.0, 0.0);
        optical_pose_from_body(&(base * pan * tilt * camera))
    }

    /// Something the synthetic camera can see.
    enum Surface {
        /// The plane `normal . p = offset`.
        Plane { normal: Vector3<f64>, offset: f64 },
        /// An axis-aligned box.
        Box { min: Vector3<f64>, max: Vector3<f64> },
    }

    /// Ray-casts a depth image: the depth of the nearest surface along each
    /// pixel's ray (the ray parameter of `origin + d * R (a, b, 1)` is the
    /// optical z, i.e. the depth), +inf beyond 10 m.
    fn render(pose: &Isometry3<f64>, surfaces: &[Surface]) -> Vec<f32> {
        let k = intrinsics();
        let origin = pose.translation.vector;
        let mut image = vec![f32::INFINITY; WIDTH * HEIGHT];
        for v in 0..HEIGHT {
            for u in 0..WIDTH {
                let dir = pose.rotation
                    * Vector3::new((u as f64 - k.cx) / k.fx, (v as f64 - k.cy) / k.fy, 1.0);
                let mut best = f64::INFINITY;
                for s in surfaces {
                    let hit = match s {
                        Surface::Plane { normal, offset } => {
                            let denominator = normal.dot(&dir);
                            if denominator.abs() < 1e-12 {
                                f64::INFINITY
                            } else {
                                (offset - normal.dot(&origin)) / denominator
                            }
                        }
                        Surface::Box { min, max } => {
                            let (mut near, mut far) = (f64::NEG_INFINITY, f64::INFINITY);
                            for axis in 0..3 {
                                let (t1, t2) = (
                                    (min[axis] - origin[axis]) / dir[axis],
                                    (max[axis] - origin[axis]) / dir[axis],
                                );
                                near = near.max(t1.min(t2));
                                far = far.min(t1.max(t2));
                            }
                            if near <= far && near > 0.0 {
                                near
                            } else {
                                f64::INFINITY
                            }
                        }
                    };
                    if hit > 0.0 && hit < best {
                        best = hit;
                    }
                }
                if best <= 10.0 {
                    image[v * WIDTH + u] = best as f32;
                }
            }
        }
        image
    }

    fn floor() -> Surface {
        Surface::Plane { normal: Vector3::z(), offset: 0.0 }
    }

    fn wall(x: f64) -> Surface {
        Surface::Plane { normal: Vector3::x(), offset: x }
    }

    fn nearest(pose: &Isometry3<f64>, surfaces: &[Surface], corridor: &Corridor) -> Option<f64> {
        let data = render(pose, surfaces);
        let image = DepthImage::new(WIDTH, HEIGHT, &data).unwrap();
        nearest_obstacle_ahead(&image, &intrinsics(), pose, corridor).unwrap()
    }

    #[test]
    fn the_optical_frame_looks_along_the_body_x_axis() {
        let pose = camera_pose(0.0, 0.0);
        let forward = pose.rotation * Vector3::z();
        let right = pose.rotation * Vector3::x();
        let down = pose.rotation * Vector3::y();
        assert!(
            (forward - Vector3::x()).norm() < 1e-6
                && (right + Vector3::y()).norm() < 1e-6
                && (down + Vector3::z()).norm() < 1e-6
        );
        assert!(
            (pose.translation.vector - Vector3::new(-0.075, 0.0, 0.628)).norm() < 1e-12,
            "camera 0.628 m above the ground"
        );
        // Positive tilt pitches the view down.
        assert!((camera_pose(0.0, 0.5).rotation * Vector3::z()).z < -0.4);
    }

    #[test]
    fn a_low_point_is_seen_gone_when_the_floor_behind_it_shows_and_kept_while_it_stands() {
        let pose = camera_pose(0.0, 0.8);
        let k = intrinsics();
        let point = Point3::new(0.35, 0.0, 0.05);
        let with_box = render(
            &pose,
            &[
                floor(),
                Surface::Box {
                    min: Vector3::new(0.35, -0.1, 0.0),
                    max: Vector3::new(0.45, 0.1, 0.10),
                },
            ],
        );
        let without = render(&pose, &[floor()]);
        let see = |data: &[f32]| {
            sees_past(&DepthImage::new(WIDTH, HEIGHT, data).unwrap(), &k, &pose, &point, 0.1)
        };
        assert_eq!(see(&with_box), Some(false), "the box's face is still there");
        assert_eq!(see(&without), Some(true), "the floor where the box stood");
    }

    #[test]
    fn a_wall_one_metre_ahead_of_a_level_camera() {
        let d = nearest(&camera_pose(0.0, 0.0), &[floor(), wall(1.0)], &Corridor::AICC_BOT)
            .expect("sees the wall");
        assert!((d - 1.0).abs() <= 0.01, "{d}");
    }

    #[test]
    fn the_floor_alone_is_not_an_obstacle() {
        assert_eq!(nearest(&camera_pose(0.0, 0.0), &[floor()], &Corridor::AICC_BOT), None);
        assert_eq!(
            nearest(&camera_pose(0.0, 0.8), &[floor()], &Corridor::AICC_BOT),
            None,
            "tilted down at the floor"
        );
        assert_eq!(
            nearest(&camera_pose(0.0, 0.0), &[], &Corridor::AICC_BOT),
            None,
            "nothing in range (+inf)"
        );
    }

    #[test]
    fn obstacles_outside_the_corridor_are_ignored() {
        let beside =
            Surface::Box { min: Vector3::new(0.6, 0.25, 0.0), max: Vector3::new(0.8, 0.4, 0.3) };
        assert_eq!(nearest(&camera_pose(0.0, 0.0), &[floor(), beside], &Corridor::AICC_BOT), None);
        // The same box in the corridor is seen at its front face.
        let ahead =
            Surface::Box { min: Vector3::new(0.6, -0.05, 0.0), max: Vector3::new(0.8, 0.1, 0.3) };
        let d = nearest(&camera_pose(0.0, 0.3), &[floor(), ahead], &Corridor::AICC_BOT).unwrap();
        assert!((d - 0.6).abs() <= 0.01, "{d}");
        // Above the height band (a table top at 0.8 m) is ignored.
        let overhang =
            Surface::Box { min: Vector3::new(0.5, -1.0, 0.8), max: Vector3::new(1.5, 1.0, 0.85) };
        assert_eq!(
            nearest(&camera_pose(0.0, -0.3), &[floor(), overhang], &Corridor::AICC_BOT),
            None
        );
    }

    #[test]
    fn a_tilted_or_panned_camera_still_measures_the_wall() {
        for (pan, tilt) in [(0.0, 0.3), (0.0, 0.6), (0.0, -0.1), (0.3, 0.3), (-0.4, 0.2)] {
            let d = nearest(&camera_pose(pan, tilt), &[floor(), wall(1.0)], &Corridor::AICC_BOT);
            assert!(d.is_some_and(|d| (d - 1.0).abs() <= 0.01), "pan {pan}, tilt {tilt}: {d:?}");
        }
        // A low obstacle close ahead, seen with the head tilted down.
        let low =
            Surface::Box { min: Vector3::new(0.45, -0.1, 0.0), max: Vector3::new(0.55, 0.1, 0.05) };
        let d = nearest(&camera_pose(0.0, 0.7), &[floor(), low], &Corridor::AICC_BOT).unwrap();
        assert!((d - 0.45).abs() <= 0.01, "{d}");
    }

    #[test]
    fn invalid_depths_are_skipped_and_counted() {
        let pose = camera_pose(0.0, 0.0);
        let mut data = render(&pose, &[floor(), wall(1.0)]);
        for (i, value) in data.iter_mut().enumerate() {
            *value = match i % 4 {
                0 => f32::NAN,
                1 => f32::NEG_INFINITY,
                2 => 0.0,
                _ => *value,
            };
        }
        let image = DepthImage::new(WIDTH, HEIGHT, &data).unwrap();
        let corridor = Corridor { stride: 1, ..Corridor::AICC_BOT };
        let scan = scan_depth_image(&image, &intrinsics(), &pose, &corridor).unwrap();
        assert_eq!(scan.examined, WIDTH * HEIGHT);
        assert_eq!(scan.too_close, WIDTH * HEIGHT / 2);
        assert_eq!(scan.valid, WIDTH * HEIGHT / 4);
        assert!(scan.nearest_ahead_m.is_some_and(|d| (d - 1.0).abs() <= 0.01), "{scan:?}");
        let blind = vec![f32::NAN; WIDTH * HEIGHT];
        let scan = scan_depth_image(
            &DepthImage::new(WIDTH, HEIGHT, &blind).unwrap(),
            &intrinsics(),
            &pose,
            &corridor,
        )
        .unwrap();
        assert_eq!(
            (scan.nearest_ahead_m, scan.valid),
            (None, 0),
            "blind: no answer, and the counts say so"
        );
    }

    #[test]
    fn sparse_samples_give_the_same_answer() {
        let pose = camera_pose(0.0, 0.3);
        let data = render(&pose, &[floor(), wall(1.2)]);
        let samples = (0..HEIGHT)
            .flat_map(|v| (0..WIDTH).map(move |u| (u, v)))
            .map(|(u, v)| (u as f64, v as f64, data[v * WIDTH + u] as f64));
        let sparse =
            scan_depth_samples(samples, &intrinsics(), &pose, &Corridor::AICC_BOT).unwrap();
        let dense = scan_depth_image(
            &DepthImage::new(WIDTH, HEIGHT, &data).unwrap(),
            &intrinsics(),
            &pose,
            &Corridor { stride: 1, ..Corridor::AICC_BOT },
        )
        .unwrap();
        assert_eq!(sparse.nearest_ahead_m, dense.nearest_ahead_m);
        assert!(sparse.nearest_ahead_m.is_some_and(|d| (d - 1.2).abs() <= 0.01));
        let odd = scan_depth_samples(
            [(f64::NAN, 1.0, 1.0), (10.0, 10.0, -1.0)],
            &intrinsics(),
            &pose,
            &Corridor::AICC_BOT,
        )
        .unwrap();
        assert_eq!((odd.examined, odd.valid, odd.too_close, odd.nearest_ahead_m), (2, 0, 1, None));
    }

    #[test]
    fn unusable_inputs_are_errors_not_a_clear_path() {
        let data = vec![1.0f32; 10];
        assert!(matches!(DepthImage::new(4, 3, &data), Err(ObstacleError::BufferSize { .. })));
        let image = DepthImage::new(5, 2, &data).unwrap();
        let pose = camera_pose(0.0, 0.0);
        let bad_k = CameraIntrinsics { fx: 0.0, ..intrinsics() };
        assert!(matches!(
            nearest_obstacle_ahead(&image, &bad_k, &pose, &Corridor::AICC_BOT),
            Err(ObstacleError::BadIntrinsics(_))
        ));
        let bad_corridor = Corridor { stride: 0, ..Corridor::AICC_BOT };
        assert!(matches!(
            nearest_obstacle_ahead(&image, &intrinsics(), &pose, &bad_corridor),
            Err(ObstacleError::BadCorridor(_))
        ));
        let bad_pose = Isometry3::translation(f64::NAN, 0.0, 0.0);
        assert!(matches!(
            nearest_obstacle_ahead(&image, &intrinsics(), &bad_pose, &Corridor::AICC_BOT),
            Err(ObstacleError::BadPose)
        ));
    }
}

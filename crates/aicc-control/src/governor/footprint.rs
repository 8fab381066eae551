//! The robot's outline, which every zone and rule is measured from.

/// The robot's outline in the base frame (REP-103: x forward, y left).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum Footprint {
    /// A rectangle from `-rear_m` to `front_m` along x, `±half_width_m` along y.
    Rectangle { front_m: f64, rear_m: f64, half_width_m: f64 },
    /// A circle about the origin (a Create 3 base).
    Circle { radius_m: f64 },
}

impl Footprint {
    /// (front, rear, half width) of the footprint's bounding box.
    pub(crate) fn extent(&self) -> (f64, f64, f64) {
        match *self {
            Footprint::Rectangle { front_m, rear_m, half_width_m } => {
                (front_m, rear_m, half_width_m)
            }
            Footprint::Circle { radius_m } => (radius_m, radius_m, radius_m),
        }
    }

    /// How far (x, y) lies outside the outline, m (0 inside).
    pub fn distance_outside(&self, x: f64, y: f64) -> f64 {
        match *self {
            Footprint::Rectangle { front_m, rear_m, half_width_m } => {
                (x - front_m).max(-rear_m - x).max(0.0).hypot((y.abs() - half_width_m).max(0.0))
            }
            Footprint::Circle { radius_m } => (x.hypot(y) - radius_m).max(0.0),
        }
    }

    /// Whether the point lies on or inside the outline.
    pub fn contains(&self, x: f64, y: f64) -> bool {
        match *self {
            Footprint::Rectangle { front_m, rear_m, half_width_m } => {
                x <= front_m && x >= -rear_m && y.abs() <= half_width_m
            }
            Footprint::Circle { radius_m } => x.hypot(y) <= radius_m,
        }
    }

    /// Whether turning in place sweeps ground outside the footprint.
    pub fn sweeps_when_turning(&self) -> bool {
        matches!(self, Footprint::Rectangle { .. })
    }

    /// The radius of the circle the footprint sweeps turning in place.
    pub fn swept_radius_m(&self) -> f64 {
        let (front, rear, half_width) = self.extent();
        front.max(rear).hypot(half_width)
    }
}

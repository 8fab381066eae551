//! A running total of rotation from successive yaw readings.
use crate::governor::wrap_angle;

/// Keeps a running total of rotation from successive yaw readings, each in
/// (-pi, pi]: the change between two readings is taken the short way round,
/// so turns of any size (and across +-180 degrees) add up. Readings must
/// come often enough that the base turns less than half a turn between them.
#[derive(Debug, Clone, Copy)]
pub struct YawUnwrapper {
    last_rad: f64,
    total_rad: f64,
}

impl YawUnwrapper {
    pub fn new(yaw_rad: f64) -> Self {
        Self { last_rad: yaw_rad, total_rad: 0.0 }
    }

    /// Adds a reading; returns the rotation since the first one.
    pub fn update(&mut self, yaw_rad: f64) -> f64 {
        self.total_rad += wrap_angle(yaw_rad - self.last_rad);
        self.last_rad = yaw_rad;
        self.total_rad
    }

    pub fn total(&self) -> f64 {
        self.total_rad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaw_readings_unwrap_across_the_half_turn_and_beyond() {
        // Counter-clockwise from 170 deg through 180 to -170 (i.e. 190) and on, 1.5 turns.
        let mut unwrapper = YawUnwrapper::new(170f64.to_radians());
        let mut total = 0.0;
        for step in 1..=540 {
            let yaw = wrap_angle((170.0 + step as f64).to_radians());
            total = unwrapper.update(yaw);
        }
        assert!((total.to_degrees() - 540.0).abs() < 1e-9, "{}", total.to_degrees());
        // And clockwise back.
        let mut back = YawUnwrapper::new(0.0);
        for step in 1..=400 {
            back.update(wrap_angle((-(step as f64)).to_radians()));
        }
        assert!((back.total().to_degrees() + 400.0).abs() < 1e-9);
    }
}

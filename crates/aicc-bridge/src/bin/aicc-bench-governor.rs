//! The cost of one governor step (safety envelope + velocity/acceleration
//! limits), printed as figures; it asserts nothing.
use std::hint::black_box;
use std::time::Instant;

use aicc_bridge::governor::safety::Pose2D;
use aicc_bridge::governor::{govern_base_with_envelope, safety_envelope, BaseLimits, BaseVelocity, EmergencyLimits, SafetyConfig, SafetyInputs, SafetyState};

fn main() {
    let limits = BaseLimits { max_linear_mps: 0.22, max_angular_radps: 1.5, max_linear_accel_mps2: 1.0, max_angular_accel_radps2: 3.0 };
    let emergency = EmergencyLimits::DEFAULT;
    let config = SafetyConfig::DEFAULT;
    let mut state = SafetyState::new();
    let mut previous = BaseVelocity::ZERO;
    let steps = 2_000_000u32;
    let started = Instant::now();
    for i in 0..steps {
        let phase = f64::from(i % 1000) / 1000.0;
        let inputs = SafetyInputs {
            odometry_age_s: Some(0.01),
            imu_age_s: Some(0.01),
            commanded_to_move: true,
            in_contact: i % 5000 == 0,
            obstacle_ahead_m: Some(0.3 + phase),
            obstacle_behind_m: None,
            pose: Some(Pose2D { x_m: phase, y_m: 0.0, yaw_rad: 0.0 }),
        };
        state.update(&config, &inputs, f64::from(i) * 0.02);
        let envelope = safety_envelope(&limits, &config, &state, &inputs);
        let requested = BaseVelocity { linear_mps: 0.3 * (phase - 0.3), angular_radps: phase };
        previous = govern_base_with_envelope(&limits, &emergency, previous, black_box(requested), &envelope, 0.02).command;
    }
    let per_step = started.elapsed().as_secs_f64() / f64::from(steps);
    println!("governor step (latch update + envelope + limits): {:.0} ns per step over {steps} steps (last command {:?})", per_step * 1e9, previous);
}

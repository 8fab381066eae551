//! The cost of one governor step (safety envelope + velocity/acceleration
//! limits) and of one obstacle scan of a depth frame, printed as figures;
//! it asserts nothing.
use std::hint::black_box;
use std::time::Instant;

use nalgebra::Isometry3;

use aicc_control::governor::obstacles::optical_pose_from_body;
use aicc_control::governor::safety::Pose2D;
use aicc_control::governor::{
    govern_base_with_envelope, nearest_obstacle_ahead, safety_envelope, BaseLimits, BaseVelocity,
    CameraIntrinsics, Corridor, DepthImage, EmergencyLimits, SafetyConfig, SafetyInputs,
    SafetyState,
};

fn main() {
    let limits = BaseLimits {
        max_linear_mps: 0.22,
        max_angular_radps: 1.5,
        max_linear_accel_mps2: 1.0,
        max_angular_accel_radps2: 3.0,
    };
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
            obstacle_turning_m: None,
            cliff_ahead: false,
            backup_limit: false,
            hazard_stop: false,
            pose: Some(Pose2D { x_m: phase, y_m: 0.0, yaw_rad: 0.0 }),
            arm: Default::default(),
        };
        state.update(&config, &inputs, f64::from(i) * 0.02);
        let envelope = safety_envelope(&limits, &config, &state, &inputs);
        let requested = BaseVelocity { linear_mps: 0.3 * (phase - 0.3), angular_radps: phase };
        previous = govern_base_with_envelope(
            &limits,
            &emergency,
            previous,
            black_box(requested),
            &envelope,
            0.02,
        )
        .command;
    }
    let per_step = started.elapsed().as_secs_f64() / f64::from(steps);
    println!("governor step (latch update + envelope + limits): {:.0} ns per step over {steps} steps (last command {:?})", per_step * 1e9, previous);
    obstacle_scan();
}

/// A wall 1 m ahead filling a 320x240 frame, seen from the head's height.
fn obstacle_scan() {
    let (width, height) = (320usize, 240usize);
    let data = vec![1.0f32; width * height];
    let image = DepthImage::new(width, height, &data).expect("a full buffer");
    let intrinsics = CameraIntrinsics::from_horizontal_fov(1.047, width, height);
    let camera = optical_pose_from_body(&Isometry3::translation(0.0, 0.0, 0.628));
    for stride in [1, 2] {
        let corridor = Corridor { stride, ..Corridor::AICC_BOT };
        let mut times: Vec<f64> = (0..200)
            .map(|_| {
                let started = Instant::now();
                black_box(
                    nearest_obstacle_ahead(&image, &intrinsics, &camera, &corridor)
                        .expect("a valid scan"),
                );
                started.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        println!("obstacle scan of a 320x240 depth frame, stride {stride}: p50 {:.3} ms, p99 {:.3} ms over 200 scans", times[100] * 1e3, times[198] * 1e3);
    }
}

//! Helpers for tests of what the governor and the motion controller
//! decide, here and in the crates above (feature `testing`, which only
//! dev-dependencies enable): built from the real rules, never a stand-in.
use crate::governor::{BaseVelocity, Restriction};

/// The restrictions the real governor raises for these inputs, holding forward motion at zero.
pub fn blocking_forward(
    inputs: crate::governor::SafetyInputs,
    in_contact_before: bool,
) -> Vec<Restriction> {
    use crate::governor::{safety_envelope, BaseLimits, SafetyConfig, SafetyState};
    let limits = BaseLimits {
        max_linear_mps: 0.22,
        max_angular_radps: 1.5,
        max_linear_accel_mps2: 1.0,
        max_angular_accel_radps2: 3.0,
    };
    let mut state = SafetyState::new();
    state.update(
        &SafetyConfig::DEFAULT,
        &crate::governor::SafetyInputs { in_contact: in_contact_before, ..inputs },
        0.0,
    );
    let envelope = safety_envelope(&limits, &SafetyConfig::DEFAULT, &state, &inputs);
    envelope
        .blocking(BaseVelocity { linear_mps: 0.1, angular_radps: 0.0 })
        .into_iter()
        .cloned()
        .collect()
}

pub fn fresh_inputs() -> crate::governor::SafetyInputs {
    crate::governor::SafetyInputs {
        odometry_age_s: Some(0.01),
        imu_age_s: Some(0.01),
        commanded_to_move: true,
        ..Default::default()
    }
}

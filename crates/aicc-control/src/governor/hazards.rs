//! What a Create 3 base's hazard reports (irobot_create_msgs/
//! HazardDetectionVector on `hazard_detection`) mean for the safety rules:
//! pure, no ROS.
//!
//! - `BUMP`: a contact, fed to the bumper latch (forward stopped until the
//!   bumper is clear and the robot has backed off or turned);
//! - `CLIFF`: a drop ahead (every Create 3 cliff sensor sits in the front
//!   half): forward stopped while it is reported;
//! - `BACKUP_LIMIT`: the base's own reverse limit is reached: reverse
//!   stopped while it is reported (the base would refuse it anyway);
//! - `WHEEL_DROP`: the robot is lifted or a wheel hangs: everything stopped;
//! - `STALL`: the wheels push against something: like a bump;
//! - `OBJECT_PROXIMITY`: informational (the IR proximity sensors); the laser
//!   and the camera guard obstacles;
//! - any other type: not understood, so not clear: everything stopped, and
//!   the reason names the type.

/// One reported hazard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hazard {
    /// The message's `type`.
    pub kind: u8,
    /// The sensor that detected it (`header.frame_id`), e.g. `bump_front_left`.
    pub frame_id: String,
}

/// The types of irobot_create_msgs/HazardDetection.
pub mod kind {
    pub const BACKUP_LIMIT: u8 = 0;
    pub const BUMP: u8 = 1;
    pub const CLIFF: u8 = 2;
    pub const STALL: u8 = 3;
    pub const WHEEL_DROP: u8 = 4;
    pub const OBJECT_PROXIMITY: u8 = 5;
}

/// What the hazards in force ask of the governor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HazardState {
    /// A bump or a stall: the contact latch's input.
    pub contact: Option<String>,
    /// A cliff: no forward motion; the sensors that see it.
    pub cliff: Option<String>,
    /// The base's backup limit: no reverse motion.
    pub backup_limit: bool,
    /// Stop everything: a wheel drop or a hazard type not understood.
    pub stop: Option<String>,
}

/// [`HazardState`] without its words, for the control loop (Copy).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HazardFlags {
    pub contact: bool,
    pub cliff: bool,
    pub backup_limit: bool,
    pub stop: bool,
}

impl HazardState {
    pub fn flags(&self) -> HazardFlags {
        HazardFlags {
            contact: self.contact.is_some(),
            cliff: self.cliff.is_some(),
            backup_limit: self.backup_limit,
            stop: self.stop.is_some(),
        }
    }
}

/// Folds one HazardDetectionVector into what the rules need.
pub fn hazard_state(hazards: &[Hazard]) -> HazardState {
    let mut state = HazardState::default();
    let join = |slot: &mut Option<String>, what: String| {
        *slot = Some(match slot.take() {
            Some(before) => format!("{before}, {what}"),
            None => what,
        });
    };
    for hazard in hazards {
        let at = if hazard.frame_id.is_empty() {
            "an unnamed sensor".to_string()
        } else {
            hazard.frame_id.clone()
        };
        match hazard.kind {
            kind::BUMP => join(&mut state.contact, format!("bump at {at}")),
            kind::STALL => join(&mut state.contact, format!("wheel stall ({at})")),
            kind::CLIFF => join(&mut state.cliff, format!("cliff at {at}")),
            kind::BACKUP_LIMIT => state.backup_limit = true,
            kind::WHEEL_DROP => join(&mut state.stop, format!("wheel drop at {at}")),
            kind::OBJECT_PROXIMITY => {}
            other => join(&mut state.stop, format!("hazard of unknown type {other} at {at}")),
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hazard(kind: u8, frame_id: &str) -> Hazard {
        Hazard { kind, frame_id: frame_id.into() }
    }

    #[test]
    fn each_hazard_type_asks_for_its_rule() {
        assert_eq!(hazard_state(&[]), HazardState::default(), "no hazard, no rule");
        let bump = hazard_state(&[
            hazard(kind::BUMP, "bump_front_left"),
            hazard(kind::BUMP, "bump_front_right"),
        ]);
        assert_eq!(
            bump.contact.as_deref(),
            Some("bump at bump_front_left, bump at bump_front_right")
        );
        assert_eq!((bump.cliff, bump.backup_limit, bump.stop), (None, false, None));
        let cliff = hazard_state(&[hazard(kind::CLIFF, "cliff_front_left")]);
        assert_eq!(cliff.cliff.as_deref(), Some("cliff at cliff_front_left"));
        assert!(hazard_state(&[hazard(kind::BACKUP_LIMIT, "base_link")]).backup_limit);
        assert!(hazard_state(&[hazard(kind::WHEEL_DROP, "wheel_drop_left")]).stop.is_some());
        assert!(hazard_state(&[hazard(kind::STALL, "base_link")]).contact.is_some());
        assert_eq!(
            hazard_state(&[hazard(kind::OBJECT_PROXIMITY, "ir_intensity_front_center_left")]),
            HazardState::default()
        );
    }

    #[test]
    fn an_unknown_hazard_type_stops_and_is_named() {
        let state = hazard_state(&[hazard(9, "")]);
        assert_eq!(state.stop.as_deref(), Some("hazard of unknown type 9 at an unnamed sensor"));
    }
}

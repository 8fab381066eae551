//! The dialect's observation snapshot, free of I/O: schema version,
//! readiness with its reasons, the actions usable now and how their
//! fields map, the tick, and the robot's proprioception.
use serde_json::{json, Value};

use super::session::SessionView;

/// The observation's own schema version (project-owned, per the contract).
pub const SCHEMA_VERSION: u64 = 1;
/// Actuators that need the motion lease (they move the robot).
const LEASED_ACTIONS: [&str; 4] = ["move", "turn", "look_at", "interact"];

/// What a snapshot is made of.
pub struct Inputs<'a> {
    pub session: &'a SessionView,
    /// Every actuator of the manifest, usable or not.
    pub actuators: &'a [String],
    /// [`super::actions::describe`]: each action's fields and units.
    pub actions: &'a Value,
    /// The proprioception output and its tick, or why it is missing.
    pub robot: Result<(Value, Option<u64>), String>,
}

/// Builds a snapshot: ready when no reason says otherwise.
pub fn snapshot(inputs: Inputs<'_>) -> Value {
    let session = inputs.session;
    let mut reasons: Vec<String> = Vec::new();
    if !session.open {
        reasons.push(format!(
            "the bridge session is not open{}",
            session.last_error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()
        ));
    }
    let (robot, tick) = match inputs.robot {
        Ok((robot, tick)) => (robot, tick),
        Err(reason) => {
            reasons.push(format!("the robot's state is unavailable: {reason}"));
            (Value::Null, None)
        }
    };
    let available: Vec<&String> = inputs
        .actuators
        .iter()
        .filter(|a| session.open && session.usable_actuators.contains(a))
        .collect();
    if session.open {
        for actuator in inputs.actuators.iter().filter(|a| !session.usable_actuators.contains(a)) {
            let why = session
                .unavailable
                .get(actuator)
                .map_or("its data source is missing", String::as_str);
            reasons.push(format!("'{actuator}' is unavailable now: {why}"));
        }
    }
    if let Some(holder) = &session.lease_elsewhere {
        reasons.push(format!(
            "the motion lease is held by another session ({holder}): {} fail until it is released",
            LEASED_ACTIONS.join(", ")
        ));
    }
    let ready = reasons.is_empty();
    json!({
        "schemaVersion": SCHEMA_VERSION,
        "ready": ready,
        "readiness": { "ready": ready, "reasons": reasons },
        "availableActions": available,
        "actions": inputs.actions,
        "tick": tick,
        "robot": robot,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_session() -> SessionView {
        SessionView {
            open: true,
            session: Some("ab12cd34".into()),
            usable_actuators: vec!["move".into(), "stop".into()],
            ..SessionView::default()
        }
    }

    fn actuators() -> Vec<String> {
        vec!["move".into(), "stop".into()]
    }

    #[test]
    fn ready_with_the_robot_state_and_every_action_usable() {
        let session = open_session();
        let actuators = actuators();
        let observation = snapshot(Inputs {
            session: &session,
            actuators: &actuators,
            actions: &json!({"move": {}}),
            robot: Ok((json!({"position_m": {"x": 1.0}}), Some(42))),
        });
        assert_eq!(observation["schemaVersion"], 1);
        assert_eq!(
            (observation["ready"].clone(), observation["readiness"]["ready"].clone()),
            (json!(true), json!(true))
        );
        assert_eq!(observation["readiness"]["reasons"], json!([]));
        assert_eq!(observation["availableActions"], json!(["move", "stop"]));
        assert_eq!(observation["tick"], 42);
        assert_eq!(observation["robot"]["position_m"]["x"], 1.0);
    }

    #[test]
    fn each_obstacle_to_acting_is_a_reason() {
        let mut session = open_session();
        session.usable_actuators = vec!["stop".into()];
        session.unavailable.insert("move".into(), "no odometry for 2.0 s".into());
        session.lease_elsewhere = Some("99ff00aa".into());
        let actuators = actuators();
        let observation = snapshot(Inputs {
            session: &session,
            actuators: &actuators,
            actions: &json!({}),
            robot: Err("no odometry received yet on /odom".into()),
        });
        assert_eq!(observation["ready"], false);
        let reasons = observation["readiness"]["reasons"].to_string();
        for needle in [
            "robot's state is unavailable: no odometry",
            "'move' is unavailable now: no odometry for 2.0 s",
            "lease is held by another session (99ff00aa)",
        ] {
            assert!(reasons.contains(needle), "{needle}: {reasons}");
        }
        assert_eq!(observation["availableActions"], json!(["stop"]));
        assert_eq!(observation["robot"], Value::Null);
    }

    #[test]
    fn a_closed_session_offers_no_action() {
        let session = SessionView {
            last_error: Some("the bridge closed the session's connection".into()),
            ..SessionView::default()
        };
        let actuators = actuators();
        let observation = snapshot(Inputs {
            session: &session,
            actuators: &actuators,
            actions: &json!({}),
            robot: Err("not asked".into()),
        });
        assert_eq!(observation["availableActions"], json!([]));
        assert!(observation["readiness"]["reasons"][0]
            .as_str()
            .unwrap()
            .contains("not open (the bridge closed"));
    }
}

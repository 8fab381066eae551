//! `place_object`: a generator (AICC section 4) that moves an object of a
//! simulated world, for setting a scene (a wall ahead, the target of a
//! task). It needs `can_modify_world` (admin scope) and a world command
//! topic, which only the simulated robot's profile configures: on a real
//! robot the tool is absent from the manifest. Rate limited. The request
//! is published as JSON (`{"place": {...}}`, sim/aicc_sim.py); the
//! simulator applies it at its next step and logs a name it does not know.
use std::time::Instant;

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::{optional_number, reject_unknown_fields};
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;

/// Calls per minute one session may make.
pub const CALLS_PER_MINUTE: u32 = 20;
/// Farthest an object may be placed from the world's origin, per axis, m
/// (the simulated room is 4 x 4 m).
pub const MAX_COORDINATE_M: f64 = 10.0;
/// Longest object name.
const MAX_NAME_CHARS: usize = 64;

pub struct PlaceObject;

/// The world command for `input`, or an error naming the field.
pub fn place_command(input: &Map<String, Value>) -> Result<Value, AiccError> {
    let name = match input.get("object") {
        Some(Value::String(name)) if !name.is_empty() && name.chars().count() <= MAX_NAME_CHARS && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => name.clone(),
        Some(Value::String(_)) => return Err(AiccError::invalid_input(format!("input.object must be an object name of 1 to {MAX_NAME_CHARS} letters, digits or underscores"))),
        Some(_) => return Err(AiccError::invalid_input("input.object must be a string")),
        None => return Err(AiccError::invalid_input("input.object is required")),
    };
    let coordinate = |key: &str| -> Result<f64, AiccError> {
        optional_number(input, key, -MAX_COORDINATE_M, MAX_COORDINATE_M)?.ok_or_else(|| {
            AiccError::invalid_input(format!("input.{key} is required (metres, world frame)"))
        })
    };
    let (x_m, y_m) = (coordinate("x_m")?, coordinate("y_m")?);
    let z_m = optional_number(input, "z_m", 0.0, MAX_COORDINATE_M)?;
    let yaw_rad = optional_number(input, "yaw_deg", -360.0, 360.0)?.map(f64::to_radians);
    Ok(
        json!({ "place": { "object": name, "x_m": x_m, "y_m": y_m, "z_m": z_m, "yaw_rad": yaw_rad } }),
    )
}

impl Tool for PlaceObject {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "place_object",
            class: ToolClass::Generator,
            description: "Simulated worlds only: move an object of the world (by name, e.g. red_cube, green_cube, obstacle_0, red_cube_pedestal) to (x_m, y_m) in the world frame (the room's centre is the origin, x ahead of the robot's spawn pose, y left), optionally at height z_m (centre, m; a movable object then falls) and heading yaw_deg. A movable object arrives at rest. Applied by the simulator at its next step; a name it does not know is logged there and changes nothing. At most 20 calls per minute.",
            capability: "can_modify_world",
            strict_input: true,
            calls_per_minute: Some(CALLS_PER_MINUTE),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "object": { "type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS, "pattern": "^[A-Za-z0-9_]+$" },
                    "x_m": { "type": "number", "minimum": -MAX_COORDINATE_M, "maximum": MAX_COORDINATE_M },
                    "y_m": { "type": "number", "minimum": -MAX_COORDINATE_M, "maximum": MAX_COORDINATE_M },
                    "z_m": { "type": "number", "minimum": 0, "maximum": MAX_COORDINATE_M },
                    "yaw_deg": { "type": "number", "minimum": -360, "maximum": 360 }
                },
                "required": ["object", "x_m", "y_m"],
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": { "requested": { "type": "object" }, "topic": { "type": "string" } },
                "required": ["requested", "topic"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, _now: Instant) -> Option<String> {
        ctx.config.actuators.world_topic.is_empty().then(|| "this robot's world cannot be modified (actuators.world_topic is not configured: only a simulator has one)".to_string())
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            reject_unknown_fields(&input, &["object", "x_m", "y_m", "z_m", "yaw_deg"])?;
            let command = place_command(&input)?;
            let topic = ctx.signals.world_topic();
            ctx.signals.world_command(&command.to_string()).map_err(|e| {
                AiccError::execution_failed(true, format!("publishing on {topic}: {e}"))
            })?;
            Ok(ToolSuccess {
                output: json!({ "requested": command["place"], "topic": topic }),
                source: topic,
            })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::input::input_map;

    #[test]
    fn a_placement_is_checked_and_named() {
        let command = place_command(&input_map(
            json!({"object": "red_cube", "x_m": 1.0, "y_m": -0.5, "yaw_deg": 90}),
        ))
        .unwrap();
        assert_eq!(command["place"]["object"], "red_cube");
        assert!(
            (command["place"]["yaw_rad"].as_f64().unwrap() - std::f64::consts::FRAC_PI_2).abs()
                < 1e-9
        );
        assert_eq!(command["place"]["z_m"], Value::Null);
        let error = |input: Value| place_command(&input_map(input)).unwrap_err().message;
        assert!(error(json!({"x_m": 1, "y_m": 0})).contains("input.object is required"));
        assert!(error(json!({"object": "a b", "x_m": 1, "y_m": 0})).contains("input.object"));
        assert!(error(json!({"object": "cube", "y_m": 0})).contains("input.x_m is required"));
        assert!(error(json!({"object": "cube", "x_m": 11, "y_m": 0})).contains("input.x_m"));
        assert!(
            error(json!({"object": "cube", "x_m": 1, "y_m": 0, "z_m": -1})).contains("input.z_m")
        );
    }

    #[tokio::test]
    async fn absent_without_a_world_topic_as_on_every_real_robot() {
        use crate::tools::testing::{context, context_with, FakeRobot};
        let robot = std::sync::Arc::new(FakeRobot::default());
        let reason = PlaceObject
            .unavailable_reason(&context(robot.clone()), Instant::now())
            .expect("unavailable by default");
        assert!(reason.contains("actuators.world_topic"), "{reason}");
        let ctx = context_with(robot.clone(), |c| c.actuators.world_topic = "/sim_world".into());
        assert_eq!(PlaceObject.unavailable_reason(&ctx, Instant::now()), None);
        // The port has no world publisher here: a clear error, nothing published.
        let error = PlaceObject
            .call(input_map(json!({"object": "red_cube", "x_m": 1, "y_m": 0})), ctx)
            .await
            .unwrap_err();
        assert!(error.message.contains("world topic"), "{}", error.message);
        assert!(robot.signals.world_commands().is_empty());
        for profile in [
            include_str!("../../../../config/turtlebot3.yaml"),
            include_str!("../../../../config/turtlebot4.yaml"),
            include_str!("../../../../config/default.yaml"),
        ] {
            let config =
                crate::config::Config::from_params_yaml(profile, crate::config::DEFAULT_NODE_NAME)
                    .unwrap();
            assert_eq!(
                config.actuators.world_topic, "",
                "a real robot's profile names a world topic"
            );
        }
        let sim = crate::config::Config::from_params_yaml(
            include_str!("../../../../config/sim.yaml"),
            crate::config::DEFAULT_NODE_NAME,
        )
        .unwrap();
        assert_eq!(sim.actuators.world_topic, "/sim_world");
    }
}

//! Observing the way before a straight motion: when only the head's
//! camera can observe a motion's zone and it looks elsewhere, and the
//! configuration says so (`safety.head_for_motion: turn`), the head is
//! turned there first and the motion waits for a fresh frame that
//! observes it. Otherwise nothing is done here: the governor refuses the
//! motion, naming the zone and the head pose that would observe it.
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::fresh::fresh_odometry;
use super::head::{plan_head, run_head};
use super::joints::deg;
use crate::config::HeadForMotion;
use crate::governor::coverage::Direction;
use crate::governor::safety::Pose2D;
use crate::protocol::AiccError;
use crate::tools::ToolContext;

/// How long a motion waits, after turning the head, for a frame that
/// observes its zone (several frames of a 15 Hz camera); then the
/// governor decides.
const OBSERVED_WAIT: Duration = Duration::from_millis(1500);

/// How long a motion asked for right after start waits for the head poses
/// that observe the zones: found from the first depth frame by a search
/// over the head's range, which took over 1.5 s on a loaded machine (a move
/// then failed, "look_at ... observes the way ahead", without the head
/// having turned).
const COVERS_WAIT: Duration = Duration::from_millis(6000);

/// Whether `direction`'s zone is observed now.
fn observed(ctx: &ToolContext, direction: Direction) -> bool {
    let pose = fresh_odometry(ctx).ok().map(|o| Pose2D {
        x_m: o.position_m.x,
        y_m: o.position_m.y,
        yaw_rad: o.orientation.euler_angles().2,
    });
    ctx.base.surroundings().view(direction, pose, Instant::now()).first_unobserved_m.is_none()
}

/// Turns the head to observe `direction`'s zone if the configuration asks
/// for it, the zone is not observed now and a head pose observes all of
/// it; then waits for a frame that does. Returns what was done, for the
/// motion's result (None: nothing was needed or possible: the governor
/// then decides, and says why).
pub async fn observe_way(
    ctx: &ToolContext,
    direction: Direction,
    generation: u64,
) -> Result<Option<Value>, AiccError> {
    if ctx.config.safety.head_for_motion != HeadForMotion::Turn
        || ctx.config.actuators.head_action.is_empty()
        || observed(ctx, direction)
    {
        return Ok(None);
    }
    // The head poses that observe the zones are found from the first depth
    // frame: a motion asked for before it came waits for them a moment.
    let asked = Instant::now();
    while ctx.config.sensors.depth.is_configured()
        && !ctx.base.surroundings().covers_known()
        && asked.elapsed() < COVERS_WAIT
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let Some(cover) = ctx.base.surroundings().cover(direction).filter(|c| c.complete) else {
        return Ok(None);
    };
    let states = ctx.sensors.joint_states().map(|j| j.value).unwrap_or_default();
    let plan =
        plan_head(ctx, &states, Some(cover.pan_rad), Some(cover.tilt_rad), None).map_err(|e| {
            AiccError::execution_failed(
                e.retryable,
                format!(
                    "could not turn the head to observe the way {}: {}",
                    direction.name(),
                    e.message
                ),
            )
        })?;
    let turned = run_head(ctx, &plan, generation).await.map_err(|e| {
        AiccError::execution_failed(
            e.retryable,
            format!("turning the head to observe the way {}: {}", direction.name(), e.message),
        )
    })?;
    let arrived = Instant::now();
    while !observed(ctx, direction) && arrived.elapsed() < OBSERVED_WAIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let grid = *ctx.base.surroundings().grid();
    let done = json!({
        "why": format!("turned to observe the way {} ({:.2}-{:.2} m) before moving (safety.head_for_motion: turn)", direction.name(), grid.start_m(direction), grid.end_m(direction)),
        "from": { "pan_deg": deg(plan.from[0]), "tilt_deg": deg(plan.from[1]) },
        "to": { "pan_deg": deg(cover.pan_rad), "tilt_deg": deg(cover.tilt_rad) },
        "observed": observed(ctx, direction),
        "head": turned,
    });
    // Said at once (the motion may still fail): agents see why the head moved.
    ctx.event_for_session(
        "command",
        json!({ "call_id": ctx.call_id, "tool": "move", "state": "progress", "head_turned": done }),
    );
    Ok(Some(done))
}

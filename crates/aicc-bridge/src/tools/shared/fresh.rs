//! Reading the robot's sensors for a tool: a sample older than its
//! topic's maximum age is an error naming the topic and the age, never
//! served silently; a sensor silent for long takes its tools out of the
//! manifest.
use std::time::{Duration, Instant};

use nalgebra::{UnitQuaternion, Vector3};
use serde_json::{json, Value};

use crate::config::SensorTopic;
use crate::protocol::AiccError;
use crate::robot::{Age, JointStates, Now, OdometrySample, Sensor, Stamped};
use crate::tools::ToolContext;

/// Data older than its maximum age is an error, never served silently.
pub fn check_fresh(topic: &str, age: Duration, max_age: Duration) -> Result<(), AiccError> {
    if age > max_age {
        return Err(AiccError::execution_failed(
            true,
            format!(
                "data on {topic} is {:.0} ms old (maximum {:.0} ms): is the publisher running?",
                millis(age),
                millis(max_age)
            ),
        ));
    }
    Ok(())
}

pub(crate) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// The maximum age of a sensor's data.
pub fn max_age(sensor: &SensorTopic) -> Duration {
    Duration::from_secs_f64(sensor.max_age_s)
}

/// Why a tool fed by `topic` cannot serve now, or None: the topic is not
/// configured (`""`), nothing has arrived on it, or it has been silent for
/// longer than `silent_after`. `received` is when its latest sample arrived.
pub fn silence_reason(
    what: &str,
    topic: &str,
    received: Option<Instant>,
    silent_after: Duration,
    now: Instant,
) -> Option<String> {
    if topic.is_empty() {
        return Some(format!("no {what} topic is configured"));
    }
    match received {
        None => Some(format!("no {what} received on {topic}")),
        Some(received) if now.saturating_duration_since(received) > silent_after => Some(format!(
            "no {what} on {topic} for {:.1} s",
            now.saturating_duration_since(received).as_secs_f64()
        )),
        Some(_) => None,
    }
}

/// [`silence_reason`] for `sensor`.
pub fn sensor_missing(
    ctx: &ToolContext,
    what: &str,
    sensor: Sensor,
    now: Instant,
) -> Option<String> {
    let topic = if ctx.config.sensors.topic(sensor).is_configured() {
        ctx.sensors.topic(sensor)
    } else {
        String::new()
    };
    silence_reason(what, &topic, ctx.sensors.received(sensor), ctx.live.unavailable_after(), now)
}

/// The sample and its age if it exists and is no older than `max_age`;
/// otherwise a retryable error naming the topic (and the age and maximum).
/// The age is the capture age where the stamp is valid ([`Age::effective`]).
pub fn fresh_sample<T>(
    sample: Option<Stamped<T>>,
    what: &str,
    topic: &str,
    max_age: Duration,
    now: Now,
) -> Result<(Stamped<T>, Age), AiccError> {
    let sample = sample.ok_or_else(|| {
        AiccError::execution_failed(true, format!("no {what} received yet on {topic}"))
    })?;
    let age = sample.age(now);
    check_fresh(topic, age.effective(), max_age)?;
    Ok((sample, age))
}

pub fn vector_json(v: &Vector3<f64>) -> Value {
    json!({ "x": v.x, "y": v.y, "z": v.z })
}

pub fn quaternion_json(q: &UnitQuaternion<f64>) -> Value {
    json!({ "x": q.i, "y": q.j, "z": q.k, "w": q.w })
}

/// The latest odometry, if fresh enough.
pub fn fresh_odometry(ctx: &ToolContext) -> Result<OdometrySample, AiccError> {
    let source = ctx.sensors.topic(Sensor::Odometry);
    let odom = ctx.sensors.odometry().ok_or_else(|| {
        AiccError::execution_failed(true, format!("no odometry received yet on {source}"))
    })?;
    check_fresh(&source, odom.age(ctx.sensors.now()).effective(), ctx.odom_max_age())?;
    Ok(odom)
}

pub fn yaw_of(sample: &OdometrySample) -> f64 {
    sample.orientation.euler_angles().2
}

/// The latest joint states, if fresh enough.
pub fn fresh_joint_states(ctx: &ToolContext) -> Result<JointStates, AiccError> {
    let source = ctx.sensors.topic(Sensor::JointStates);
    let states = ctx.sensors.joint_states().ok_or_else(|| {
        AiccError::execution_failed(true, format!("no joint states received yet on {source}"))
    })?;
    check_fresh(
        &source,
        states.age(ctx.sensors.now()).effective(),
        Duration::from_secs_f64(ctx.config.sensors.joint_states.max_age_s),
    )?;
    Ok(states.value)
}

/// The measured position of `joint`, or an error naming the topic.
pub fn measured(ctx: &ToolContext, states: &JointStates, joint: &str) -> Result<f64, AiccError> {
    states.position(joint).filter(|p| p.is_finite()).ok_or_else(|| {
        AiccError::execution_failed(
            true,
            format!("joint {joint} is not reported on {}", ctx.sensors.topic(Sensor::JointStates)),
        )
    })
}

/// Why odometry-based tools cannot serve now (no copy of the sample is taken).
pub fn odometry_missing(ctx: &ToolContext, now: Instant) -> Option<String> {
    sensor_missing(ctx, "odometry", Sensor::Odometry, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;
    use crate::tools::testing::stamped;

    #[test]
    fn stale_data_is_an_error_that_states_its_age() {
        let err = check_fresh("/odom", Duration::from_millis(900), Duration::from_millis(500))
            .unwrap_err();
        assert!(err.retryable);
        assert!(err.message.contains("/odom is 900 ms old (maximum 500 ms)"), "{}", err.message);
        assert!(
            check_fresh("/odom", Duration::from_millis(100), Duration::from_millis(500)).is_ok()
        );
    }

    #[test]
    fn silence_names_the_topic_and_how_long() {
        let now = Instant::now();
        let silent_after = Duration::from_secs(2);
        assert_eq!(
            silence_reason("camera frame", "", Some(now), silent_after, now).unwrap(),
            "no camera frame topic is configured"
        );
        assert_eq!(
            silence_reason("camera frame", "/cam", None, silent_after, now).unwrap(),
            "no camera frame received on /cam"
        );
        let old = now - Duration::from_millis(3500);
        assert_eq!(
            silence_reason("camera frame", "/cam", Some(old), silent_after, now).unwrap(),
            "no camera frame on /cam for 3.5 s"
        );
        assert_eq!(
            silence_reason(
                "camera frame",
                "/cam",
                Some(now - Duration::from_millis(1900)),
                silent_after,
                now
            ),
            None
        );
    }

    #[test]
    fn fresh_samples_pass_and_stale_or_missing_ones_are_retryable_errors() {
        let sample = stamped(7, "f", Duration::from_millis(100));
        // No node clock: ages count from receipt.
        let now = Now { instant: Instant::now(), clock_s: None };
        let (sample, age) =
            fresh_sample(Some(sample), "thing", "/t", Duration::from_millis(500), now).unwrap();
        assert_eq!(sample.value, 7);
        assert!(
            age.effective() >= Duration::from_millis(100)
                && age.effective() < Duration::from_millis(200),
            "{age:?}"
        );
        let err = fresh_sample(
            Some(stamped(7, "f", Duration::from_millis(800))),
            "thing",
            "/t",
            Duration::from_millis(500),
            now,
        )
        .unwrap_err();
        assert_eq!((err.code, err.retryable), (ErrorCode::ExecutionFailed, true));
        assert!(
            err.message.contains("/t is 8") && err.message.contains("(maximum 500 ms)"),
            "{}",
            err.message
        );
        let err =
            fresh_sample::<i32>(None, "thing", "/t", Duration::from_millis(500), now).unwrap_err();
        assert_eq!(err.message, "no thing received yet on /t");
    }

    #[test]
    fn a_sample_that_arrived_late_is_as_old_as_its_capture() {
        // Received 10 ms ago, captured 900 ms ago (stamp 99.1 against a clock at 100.0).
        let late = Stamped { stamp_s: 99.1, ..stamped(7, "f", Duration::from_millis(10)) };
        let now = Now { instant: Instant::now(), clock_s: Some(100.0) };
        let err = fresh_sample(Some(late.clone()), "thing", "/t", Duration::from_millis(500), now)
            .unwrap_err();
        assert!(err.message.contains("/t is 900 ms old"), "{}", err.message);
        let (_, age) =
            fresh_sample(Some(late), "thing", "/t", Duration::from_secs(1), now).unwrap();
        assert_eq!(age.fields()["age_from"], "stamp");
    }
}

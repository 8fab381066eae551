//! The bridge's state for `/diagnostics`, once a second (a diagnostic
//! aggregator marks a silent source stale): the bridge itself, each
//! configured sensor's freshness, the governor's restrictions and the
//! motion lease, in the diagnostic_updater convention (`<node>: <task>`,
//! OK / WARN / ERROR, key-value details). Pure: built from what the core,
//! the sensors and the base driver report.
use std::time::Duration;

use serde_json::Value;

use crate::config::Config;
use crate::governor::Restriction;
use crate::robot::frames::{FrameSource, FrameSummary};
use crate::robot::port::SensorStatistics;
use crate::robot::{Diagnostic, Sensor, StampStatus};

pub const OK: u8 = 0;
pub const WARN: u8 = 1;
pub const ERROR: u8 = 2;

/// What the report is made of.
pub struct Inputs<'a> {
    /// The node's name, the first part of every diagnostic's name.
    pub node: &'a str,
    pub config: &'a Config,
    /// `Core::status`.
    pub status: &'a Value,
    pub sensors: &'a [SensorStatistics],
    /// How long ago each sensor's latest message arrived (None: never).
    pub silence: &'a dyn Fn(Sensor) -> Option<Duration>,
    pub restrictions: &'a [Restriction],
    /// A sensor silent this long has left the manifest (a live setting).
    pub unavailable_after: Duration,
    pub frames: FramesReport,
}

/// The state of coordinate frames: where they come from, and whether each
/// sensor frame the bridge needs resolves to the base frame.
#[derive(Debug, Clone, PartialEq)]
pub struct FramesReport {
    pub source: FrameSource,
    pub tree: FrameSummary,
    /// For each sensor whose frame the bridge uses: its frame and whether
    /// it resolves (the error's text when not).
    pub checks: Vec<FrameCheck>,
    /// Why the depth frames give no obstacle measurement, if they do not.
    pub obstacle_unmeasured: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FrameCheck {
    pub sensor: &'static str,
    pub frame: String,
    pub resolved: Result<(), String>,
}

fn diagnostic(
    node: &str,
    task: &str,
    level: u8,
    message: impl Into<String>,
    values: Vec<(&str, String)>,
) -> Diagnostic {
    Diagnostic {
        level,
        name: format!("{node}: {task}"),
        message: message.into(),
        values: values.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

/// The whole report.
pub fn report(inputs: &Inputs<'_>) -> Vec<Diagnostic> {
    let mut out =
        vec![bridge(inputs), governor(inputs), lease(inputs), frames(inputs.node, &inputs.frames)];
    out.extend(inputs.sensors.iter().map(|s| sensor(inputs, s)));
    out
}

fn bridge(inputs: &Inputs<'_>) -> Diagnostic {
    let status = inputs.status;
    let text =
        |key: &str| status[key].as_u64().map_or_else(|| status[key].to_string(), |n| n.to_string());
    let sessions = status["sessions"].as_array().map_or(0, Vec::len);
    let (level, message) = match status["last_error"].as_str() {
        Some(error) => (WARN, format!("serving; last error: {error}")),
        None => (OK, "serving".to_string()),
    };
    diagnostic(
        inputs.node,
        "bridge",
        level,
        message,
        vec![
            ("listener", status["listener"].as_str().unwrap_or("").to_string()),
            ("connections", text("connections")),
            ("connections_max", text("connections_max")),
            ("sessions", sessions.to_string()),
            ("tool_calls", text("tool_calls")),
            ("tool_errors", text("tool_errors")),
            ("auth_required", status["auth_required"].to_string()),
        ],
    )
}

fn governor(inputs: &Inputs<'_>) -> Diagnostic {
    if inputs.restrictions.is_empty() {
        return diagnostic(inputs.node, "governor", OK, "no restriction in force", Vec::new());
    }
    let rules: Vec<&str> = inputs.restrictions.iter().map(|r| r.name()).collect();
    let values = inputs.restrictions.iter().map(|r| (r.name(), r.reason.clone())).collect();
    diagnostic(
        inputs.node,
        "governor",
        WARN,
        format!("restricting motion: {}", rules.join(", ")),
        values,
    )
}

fn frames(node: &str, report: &FramesReport) -> Diagnostic {
    let tree = &report.tree;
    let mut values = vec![
        (
            "source",
            match report.source {
                FrameSource::Tf => "tf",
                FrameSource::Urdf => "urdf",
            }
            .to_string(),
        ),
        ("frames", tree.frames.to_string()),
        ("static_transforms", tree.static_edges.to_string()),
        ("dynamic_transforms", tree.dynamic_edges.to_string()),
        ("transforms_received", tree.received.to_string()),
        ("transforms_refused", tree.refused.to_string()),
    ];
    for check in &report.checks {
        values.push((
            check.sensor,
            format!(
                "{}: {}",
                check.frame,
                check.resolved.as_ref().err().map_or("resolved", String::as_str)
            ),
        ));
    }
    if let Some((check, error)) =
        report.checks.iter().find_map(|c| c.resolved.as_ref().err().map(|e| (c, e)))
    {
        return diagnostic(
            node,
            "frames",
            ERROR,
            format!("{} frame unresolved: {error}", check.sensor),
            values,
        );
    }
    if let Some(why) = &report.obstacle_unmeasured {
        return diagnostic(
            node,
            "frames",
            ERROR,
            format!("no obstacle measurement: {why}"),
            values,
        );
    }
    if let Some(refusal) = &tree.last_refusal {
        return diagnostic(
            node,
            "frames",
            WARN,
            format!("{} transform(s) refused, the last: {refusal}", tree.refused),
            values,
        );
    }
    let message = match report.source {
        FrameSource::Tf => format!("from TF ({} frames)", tree.frames),
        FrameSource::Urdf => "no TF received: frames from the URDF and joint states".to_string(),
    };
    diagnostic(node, "frames", OK, message, values)
}

fn lease(inputs: &Inputs<'_>) -> Diagnostic {
    match inputs.status["lease_holder"].as_str() {
        Some(holder) => diagnostic(
            inputs.node,
            "motion lease",
            OK,
            format!("held by session {holder}"),
            vec![("holder", holder.to_string())],
        ),
        None => diagnostic(inputs.node, "motion lease", OK, "free", Vec::new()),
    }
}

fn sensor(inputs: &Inputs<'_>, stats: &SensorStatistics) -> Diagnostic {
    let which = Sensor::ALL.iter().copied().find(|s| s.key() == stats.sensor);
    let max_age = which.map(|s| Duration::from_secs_f64(inputs.config.sensors.topic(s).max_age_s));
    let silence = which.and_then(|s| (inputs.silence)(s));
    let mut values = vec![
        ("topic", stats.topic.clone()),
        ("received", stats.received.to_string()),
        ("distinct_stamps", stats.distinct_stamps.to_string()),
    ];
    if let Some(delay) = stats.last_receipt_delay_ms {
        values.push(("receipt_delay_ms", format!("{delay:.1}")));
    }
    if let Some(silence) = silence {
        values.push(("since_last_ms", format!("{:.0}", silence.as_secs_f64() * 1e3)));
    }
    let task = format!("sensor {}", stats.sensor);
    if let Some(note) = &stats.qos_note {
        return diagnostic(inputs.node, &task, ERROR, note.clone(), values);
    }
    let (level, message) = match (silence, max_age) {
        (None, _) => (ERROR, format!("nothing received on {}", stats.topic)),
        (Some(silence), _) if silence > inputs.unavailable_after => (
            ERROR,
            format!("silent for {:.1} s: its tools are out of the manifest", silence.as_secs_f64()),
        ),
        (Some(silence), Some(max_age)) if silence > max_age => (
            WARN,
            format!(
                "stale: last message {:.0} ms ago (max {:.0} ms)",
                silence.as_secs_f64() * 1e3,
                max_age.as_secs_f64() * 1e3
            ),
        ),
        _ => match stats.last_stamp_status.and_then(|s| s.note()) {
            // Fresh, but its age cannot count from capture: say why.
            Some(note) if stats.last_stamp_status != Some(StampStatus::Valid) => (WARN, note),
            _ => (OK, "fresh".to_string()),
        },
    };
    diagnostic(inputs.node, &task, level, message, values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governor::Rule;
    use serde_json::json;

    fn stats(
        sensor: &'static str,
        stamp: Option<StampStatus>,
        qos_note: Option<String>,
    ) -> SensorStatistics {
        SensorStatistics {
            sensor,
            topic: format!("/{sensor}"),
            received: 10,
            distinct_stamps: 10,
            last_stamp_s: Some(1.0),
            last_receipt_delay_ms: Some(3.0),
            last_stamp_status: stamp,
            qos_note,
        }
    }

    #[test]
    fn every_part_reports_and_each_sensor_says_how_fresh_it_is() {
        let config = Config::default();
        let status = json!({ "listener": "tcp://127.0.0.1:43010", "connections": 2, "connections_max": 256, "sessions": [{}, {}], "tool_calls": 7, "tool_errors": 1, "auth_required": false, "lease_holder": "5b0c1234", "last_error": null });
        let sensors = [
            stats("odom", Some(StampStatus::Valid), None),
            stats("imu", Some(StampStatus::Missing), None),
            stats(
                "camera",
                Some(StampStatus::Valid),
                Some("/camera is subscribed reliable but ...".into()),
            ),
            stats("joint_states", Some(StampStatus::Valid), None),
            stats("bumper", None, None),
        ];
        let silence = |sensor: Sensor| match sensor {
            Sensor::Odometry | Sensor::Imu | Sensor::Camera => Some(Duration::from_millis(20)),
            Sensor::JointStates => Some(Duration::from_millis(900)),
            _ => None,
        };
        let restrictions = [Restriction {
            rule: Rule::ObstacleAhead,
            reason: "an obstacle 0.3 m ahead: slowed".into(),
            cause: String::new(),
            distance_m: Some(0.3),
            linear_mps: (-0.22, 0.1),
            angular_radps: (-1.5, 1.5),
        }];
        let all = report(&Inputs {
            node: "aicc_bridge",
            config: &config,
            status: &status,
            sensors: &sensors,
            silence: &silence,
            restrictions: &restrictions,
            unavailable_after: Duration::from_secs(2),
            frames: tf_report(Ok(())),
        });
        let by_name = |name: &str| {
            all.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("{name} in {all:?}"))
        };
        assert_eq!(by_name("aicc_bridge: bridge").level, OK);
        assert!(by_name("aicc_bridge: bridge")
            .values
            .contains(&("connections".into(), "2".into())));
        assert_eq!(
            (
                by_name("aicc_bridge: governor").level,
                by_name("aicc_bridge: governor").message.as_str()
            ),
            (WARN, "restricting motion: obstacle_ahead")
        );
        assert_eq!(by_name("aicc_bridge: motion lease").message, "held by session 5b0c1234");
        assert_eq!(by_name("aicc_bridge: sensor odom").level, OK);
        assert_eq!(by_name("aicc_bridge: sensor imu").level, WARN, "no stamp: said");
        assert!(by_name("aicc_bridge: sensor imu").message.contains("no stamp"));
        assert_eq!(
            by_name("aicc_bridge: sensor camera").level,
            ERROR,
            "a QoS mismatch receives nothing"
        );
        assert_eq!(
            by_name("aicc_bridge: sensor joint_states").level,
            WARN,
            "900 ms against a 500 ms maximum"
        );
        assert_eq!(
            (
                by_name("aicc_bridge: sensor bumper").level,
                by_name("aicc_bridge: sensor bumper").message.as_str()
            ),
            (ERROR, "nothing received on /bumper")
        );
        assert_eq!(
            (by_name("aicc_bridge: frames").level, by_name("aicc_bridge: frames").message.as_str()),
            (OK, "from TF (7 frames)")
        );
        let quiet = report(&Inputs {
            node: "n",
            config: &config,
            status: &json!({ "last_error": "boom", "lease_holder": null }),
            sensors: &[],
            silence: &silence,
            restrictions: &[],
            unavailable_after: Duration::from_secs(2),
            frames: tf_report(Ok(())),
        });
        assert_eq!(
            quiet.iter().map(|d| (d.name.as_str(), d.level)).collect::<Vec<_>>(),
            [("n: bridge", WARN), ("n: governor", OK), ("n: motion lease", OK), ("n: frames", OK)]
        );
    }

    fn tf_report(depth: Result<(), String>) -> FramesReport {
        FramesReport {
            source: FrameSource::Tf,
            tree: FrameSummary {
                frames: 7,
                static_edges: 4,
                dynamic_edges: 3,
                received: 900,
                refused: 0,
                last_refusal: None,
            },
            checks: vec![FrameCheck {
                sensor: "depth",
                frame: "camera_optical_frame".into(),
                resolved: depth,
            }],
            obstacle_unmeasured: None,
        }
    }

    #[test]
    fn an_unresolved_frame_is_an_error_naming_it() {
        let unresolved = tf_report(Err("frame 'camera_optical_frame' is not in the TF tree (frames known: base_footprint, odom)".into()));
        let d = frames("n", &unresolved);
        assert_eq!(d.level, ERROR);
        assert_eq!(d.message, "depth frame unresolved: frame 'camera_optical_frame' is not in the TF tree (frames known: base_footprint, odom)");
        assert!(
            d.values.iter().any(|(k, v)| k == "depth"
                && v.starts_with("camera_optical_frame: frame 'camera_optical_frame' is not")),
            "{:?}",
            d.values
        );
        let urdf = FramesReport { source: FrameSource::Urdf, ..tf_report(Ok(())) };
        assert_eq!(
            (frames("n", &urdf).level, frames("n", &urdf).message.as_str()),
            (OK, "no TF received: frames from the URDF and joint states")
        );
        let unmeasured = FramesReport {
            obstacle_unmeasured: Some("depth image: unsupported encoding rgb8".into()),
            ..tf_report(Ok(()))
        };
        assert_eq!(frames("n", &unmeasured).level, ERROR);
        let mut refused = tf_report(Ok(()));
        refused.tree.refused = 2;
        refused.tree.last_refusal = Some("a transform from frame 'a' to itself".into());
        assert_eq!(
            (frames("n", &refused).level, frames("n", &refused).message.as_str()),
            (WARN, "2 transform(s) refused, the last: a transform from frame 'a' to itself")
        );
    }
}

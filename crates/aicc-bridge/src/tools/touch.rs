//! `touch`: what the robot's bumper touches now, from its contact sensor,
//! and how long the current state (touching or not) has lasted. The
//! contact sensor is the bumper topic (ros_gz_interfaces/Contacts) when the
//! profile has one, else a Create 3 base's hazard reports (TurtleBot 4:
//! `hazard_detection`), whose BUMP hazards are the contacts: each names the
//! bump sensor (its frame, e.g. `bump_front_left`) but not what it hit, its
//! position, normal, depth or force.
use std::time::{Duration, Instant};

use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};

use super::shared::fresh::{fresh_sample, max_age, sensor_missing, vector_json};
use super::{Tool, ToolContext, ToolFuture};
use crate::config::SensorTopic;
use crate::governor::hazards::{kind, Hazard};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::robot::{ContactPoint, Contacts, Sensor, Stamped};
use nalgebra::Vector3;

/// What a Create 3 bump report says it touched (it cannot tell).
pub const HAZARD_OTHER: &str = "unknown (a Create 3 bump sensor)";

/// The contacts in a Create 3 hazard report: one per BUMP hazard, at its
/// sensor's frame origin (part: the sensor's frame), with no normal,
/// depth or force known.
pub fn bump_contacts(hazards: &[Hazard]) -> Contacts {
    let points = hazards
        .iter()
        .filter(|hazard| hazard.kind == kind::BUMP)
        .map(|hazard| ContactPoint {
            part: if hazard.frame_id.is_empty() {
                "bump".to_string()
            } else {
                hazard.frame_id.clone()
            },
            other: HAZARD_OTHER.to_string(),
            position_m: Vector3::zeros(),
            normal: Vector3::zeros(),
            depth_m: 0.0,
            force_n: None,
        })
        .collect();
    Contacts { points }
}

/// Where `touch` reads contacts on this profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Bumper,
    Hazards,
}

impl Source {
    fn of(ctx: &ToolContext) -> Self {
        let sensors = &ctx.config.sensors;
        if !sensors.bumper.is_configured() && sensors.hazards.is_configured() {
            Source::Hazards
        } else {
            Source::Bumper
        }
    }

    fn sensor(self) -> Sensor {
        match self {
            Source::Bumper => Sensor::Bumper,
            Source::Hazards => Sensor::Hazards,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Source::Bumper => "bumper contacts",
            Source::Hazards => "hazard reports (bumps)",
        }
    }

    fn topic_config(self, ctx: &ToolContext) -> &SensorTopic {
        match self {
            Source::Bumper => &ctx.config.sensors.bumper,
            Source::Hazards => &ctx.config.sensors.hazards,
        }
    }

    /// The latest contacts from this source.
    fn sample(self, ctx: &ToolContext) -> Option<Stamped<Contacts>> {
        match self {
            Source::Bumper => ctx.sensors.contacts(),
            Source::Hazards => ctx.sensors.hazards().map(|s| Stamped {
                value: bump_contacts(&s.value),
                frame_id: s.frame_id,
                stamp_s: s.stamp_s,
                received: s.received,
            }),
        }
    }
}

/// Contact points listed in one reply at most (a wall contact may have many).
pub const MAX_LISTED_CONTACTS: usize = 20;

/// How long the contact state has held, from the samples the bridge has
/// looked at (each call, and the availability poll every 250 ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContactTracker {
    in_contact: bool,
    /// When the current state was first seen.
    since: Instant,
    /// The state has not changed since the bridge first looked, so it may
    /// have begun earlier: `since` is a lower bound on its duration.
    since_first_look: bool,
    /// The latest sample looked at (older samples are ignored).
    last_received: Instant,
}

impl ContactTracker {
    pub fn new(in_contact: bool, received: Instant) -> Self {
        ContactTracker {
            in_contact,
            since: received,
            since_first_look: true,
            last_received: received,
        }
    }

    /// Takes a sample received at `received`.
    pub fn observe(&mut self, in_contact: bool, received: Instant) {
        if received < self.last_received {
            return;
        }
        self.last_received = received;
        if in_contact != self.in_contact {
            *self = ContactTracker {
                in_contact,
                since: received,
                since_first_look: false,
                last_received: received,
            };
        }
    }

    /// How long the current state has lasted at `now`, and whether that is
    /// only a lower bound.
    pub fn duration(&self, now: Instant) -> (Duration, bool) {
        (now.saturating_duration_since(self.since), self.since_first_look)
    }
}

pub struct Touch {
    tracker: Mutex<Option<ContactTracker>>,
}

impl Touch {
    pub fn new() -> Self {
        Touch { tracker: Mutex::new(None) }
    }

    fn observe(
        tracker: &Mutex<Option<ContactTracker>>,
        contacts: &Contacts,
        received: Instant,
    ) -> ContactTracker {
        let in_contact = !contacts.points.is_empty();
        let mut tracker = tracker.lock();
        match tracker.as_mut() {
            Some(known) => known.observe(in_contact, received),
            None => *tracker = Some(ContactTracker::new(in_contact, received)),
        }
        tracker.expect("set above")
    }
}

impl Default for Touch {
    fn default() -> Self {
        Self::new()
    }
}

/// The robot parts in contact, each once, in order of first appearance.
pub fn parts_in_contact(contacts: &Contacts) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    for point in &contacts.points {
        if !parts.contains(&point.part) {
            parts.push(point.part.clone());
        }
    }
    parts
}

impl Tool for Touch {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "touch",
            class: ToolClass::Sensor,
            description: "What the bumper touches now (the bumper's contact sensor, or a Create 3 base's bump sensors: then each contact's part is the bump sensor and what it touched, its position, normal, depth and force are not known): in_contact, the robot parts touching, and each contact (what is touched, position in frame_id, normal from the robot's part towards the other, penetration depth, force in N when known). since_s is how long the current state has lasted (a lower bound when since_s_is_lower_bound: the state has not changed since the bridge started watching).",
            capability: "can_observe_world",
            strict_input: false,
            calls_per_minute: None,
            input_schema: json!({ "type": "object", "properties": {} }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "in_contact": { "type": "boolean" },
                    "parts": { "type": "array", "items": { "type": "string" } },
                    "contacts": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "part": { "type": "string" },
                                "other": { "type": "string" },
                                "position_m": { "type": "object" },
                                "normal": { "type": "object" },
                                "depth_m": { "type": "number" },
                                "force_n": { "type": ["number", "null"] }
                            }
                        }
                    },
                    "contacts_total": { "type": "integer", "description": "all contact points; at most 20 are listed" },
                    "since_s": { "type": "number" },
                    "since_s_is_lower_bound": { "type": "boolean" },
                    "frame_id": { "type": "string" },
                    "stamp_s": { "type": "number" },
                    "age_ms": { "type": "number" }
                },
                "required": ["in_contact", "parts", "contacts", "contacts_total", "since_s", "since_s_is_lower_bound", "frame_id", "stamp_s", "age_ms"]
            }),
        }
    }

    /// Also keeps `since_s` accurate between calls: this runs every 250 ms.
    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        let source = Source::of(ctx);
        let sample = source.sample(ctx);
        if let Some(sample) = &sample {
            if sample.age(ctx.sensors.now()).effective() <= max_age(source.topic_config(ctx)) {
                Self::observe(&self.tracker, &sample.value, sample.received);
            }
        }
        sensor_missing(ctx, source.what(), source.sensor(), now)
    }

    fn call(&self, _input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        let source = Source::of(&ctx);
        let topic = ctx.sensors.topic(source.sensor());
        let now = ctx.sensors.now();
        let sample = fresh_sample(
            source.sample(&ctx),
            source.what(),
            &topic,
            max_age(source.topic_config(&ctx)),
            now,
        );
        let result = sample.map(|(sample, age)| {
            let tracker = Self::observe(&self.tracker, &sample.value, sample.received);
            (sample, age, tracker)
        });
        async move {
            let (sample, age, tracker) = result?;
            let contacts = &sample.value;
            let (since, lower_bound) = tracker.duration(now.instant);
            let listed: Vec<Value> = contacts
                .points
                .iter()
                .take(MAX_LISTED_CONTACTS)
                .map(|point| {
                    json!({
                        "part": point.part,
                        "other": point.other,
                        "position_m": vector_json(&point.position_m),
                        "normal": vector_json(&point.normal),
                        "depth_m": point.depth_m,
                        "force_n": point.force_n,
                    })
                })
                .collect();
            let mut output = json!({
                "in_contact": !contacts.points.is_empty(),
                "parts": parts_in_contact(contacts),
                "contacts": listed,
                "contacts_total": contacts.points.len(),
                "since_s": (since.as_secs_f64() * 1e3).round() / 1e3,
                "since_s_is_lower_bound": lower_bound,
                "frame_id": sample.frame_id,
                "stamp_s": sample.stamp_s,
            });
            output.as_object_mut().expect("built as an object").extend(age.fields());
            Ok::<_, AiccError>(ToolSuccess { output, source: topic })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use nalgebra::Vector3;

    use super::*;
    use crate::robot::ContactPoint;
    use crate::tools::testing::*;

    #[test]
    fn the_tracker_times_the_current_state() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut tracker = ContactTracker::new(false, t0);
        tracker.observe(false, at(250));
        assert_eq!(
            tracker.duration(at(500)),
            (Duration::from_millis(500), true),
            "unchanged since the first look: a lower bound"
        );
        tracker.observe(true, at(750));
        assert_eq!(tracker.duration(at(1000)), (Duration::from_millis(250), false));
        tracker.observe(false, at(600));
        assert_eq!(
            tracker.duration(at(1000)),
            (Duration::from_millis(250), false),
            "an older sample changes nothing"
        );
        tracker.observe(true, at(1250));
        assert_eq!(tracker.duration(at(1500)), (Duration::from_millis(750), false));
        tracker.observe(false, at(1500));
        assert_eq!(tracker.duration(at(1600)), (Duration::from_millis(100), false));
    }

    fn point(part: &str, other: &str) -> ContactPoint {
        ContactPoint {
            part: part.into(),
            other: other.into(),
            position_m: Vector3::new(1.0, 0.0, 0.05),
            normal: Vector3::x(),
            depth_m: 0.001,
            force_n: Some(3.5),
        }
    }

    #[tokio::test]
    async fn contacts_are_listed_with_their_parts_and_the_state_is_timed() {
        let robot = Arc::new(FakeRobot::default());
        let ctx = context(robot.clone());
        let touch = Touch::new();
        let err = touch.call(Map::new(), ctx.clone()).await.unwrap_err();
        assert_eq!(err.message, "no bumper contacts received yet on bumper");
        assert_eq!(
            touch.unavailable_reason(&ctx, Instant::now()).unwrap(),
            "no bumper contacts received on bumper"
        );

        // Samples arrive in order: this one 400 ms ago, the contact 300 ms ago.
        robot.samples.lock().contacts =
            Some(stamped(Contacts::default(), "world", Duration::from_millis(400)));
        let out = touch.call(Map::new(), ctx.clone()).await.unwrap().output;
        assert_eq!(
            (
                out["in_contact"].as_bool(),
                out["contacts_total"].as_u64(),
                out["since_s_is_lower_bound"].as_bool()
            ),
            (Some(false), Some(0), Some(true))
        );

        let bumper = "aicc_bot::bumper_link::bumper_collision";
        let contacts = Contacts {
            points: vec![point(bumper, "red_box::red_box"), point(bumper, "wall_east::wall_east")],
        };
        robot.samples.lock().contacts =
            Some(stamped(contacts, "world", Duration::from_millis(300)));
        assert_eq!(
            touch.unavailable_reason(&ctx, Instant::now()),
            None,
            "the poll sees the change"
        );
        robot.samples.lock().contacts.as_mut().unwrap().received = Instant::now();
        let out = touch.call(Map::new(), ctx).await.unwrap().output;
        assert_eq!(
            (out["in_contact"].as_bool(), out["contacts_total"].as_u64()),
            (Some(true), Some(2))
        );
        assert_eq!(out["parts"], json!([bumper]));
        assert_eq!(out["contacts"][1]["other"], "wall_east::wall_east");
        assert_eq!(
            (out["contacts"][0]["force_n"].as_f64(), out["contacts"][0]["normal"]["x"].as_f64()),
            (Some(3.5), Some(1.0))
        );
        let since = out["since_s"].as_f64().unwrap();
        assert!(
            (0.3..0.5).contains(&since) && out["since_s_is_lower_bound"] == false,
            "timed from the poll's sample: {since}"
        );
    }

    #[tokio::test]
    async fn without_a_bumper_the_create3_bump_reports_are_the_contacts() {
        let robot = Arc::new(FakeRobot::default());
        let ctx = context_with(robot.clone(), |config| {
            config.sensors.bumper.topic = String::new();
            config.sensors.hazards.topic = "hazard_detection".into();
        });
        let touch = Touch::new();
        assert!(
            touch.unavailable_reason(&ctx, Instant::now()).unwrap().contains("hazard reports"),
            "waits for the hazards, not the bumper"
        );
        let hazard = |kind: u8, frame: &str| Hazard { kind, frame_id: frame.into() };
        // A cliff and a proximity report are no contact.
        robot.samples.lock().hazards = Some(stamped(
            vec![
                hazard(kind::CLIFF, "cliff_front_left"),
                hazard(kind::OBJECT_PROXIMITY, "ir_intensity_front_center_left"),
            ],
            "base_link",
            Duration::from_millis(50),
        ));
        let out = touch.call(Map::new(), ctx.clone()).await.unwrap().output;
        assert_eq!(
            (out["in_contact"].as_bool(), out["contacts_total"].as_u64()),
            (Some(false), Some(0))
        );
        robot.samples.lock().hazards = Some(stamped(
            vec![hazard(kind::BUMP, "bump_front_left"), hazard(kind::BUMP, "bump_front_center")],
            "base_link",
            Duration::from_millis(10),
        ));
        let out = touch.call(Map::new(), ctx).await.unwrap().output;
        assert_eq!(
            (out["in_contact"].as_bool(), out["contacts_total"].as_u64()),
            (Some(true), Some(2))
        );
        assert_eq!(out["parts"], json!(["bump_front_left", "bump_front_center"]));
        assert_eq!(
            (out["contacts"][0]["other"].as_str(), out["contacts"][0]["force_n"].is_null()),
            (Some(HAZARD_OTHER), true)
        );
        assert_eq!(out["frame_id"], "base_link");
    }

    #[tokio::test]
    async fn stale_contacts_are_an_error() {
        let robot = Arc::new(FakeRobot::default());
        robot.samples.lock().contacts =
            Some(stamped(Contacts::default(), "world", Duration::from_secs(1)));
        let err = Touch::new().call(Map::new(), context(robot)).await.unwrap_err();
        assert!(
            err.retryable
                && err.message.contains("bumper is 10")
                && err.message.contains("(maximum 500 ms)"),
            "{}",
            err.message
        );
    }
}

//! What the endpoint's profile offers, and the scenarios it cannot serve.
//! A robot profile without a head, an arm or a bumper still passes the
//! scenarios it can serve: a scenario needing a tool the profile does not
//! have is skipped with that reason, never run (it would fail for a reason
//! that is not the bridge's fault) and never counted as passed.
//!
//! A tool is lacking when the manifest does not list it, or when the
//! bridge's status tool says it is not configured on this robot (e.g.
//! `look_at`: "no controller is configured for it"). A tool that is
//! configured but silent (its data not flowing yet) is not lacking: the
//! scenario runs, and fails if the tool stays unavailable.
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::matcher;
use super::vars::Variables;

/// The tools of one endpoint, as surveyed before the first scenario.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offered {
    /// Every tool id the manifest lists; None when the survey could not
    /// read a manifest (then nothing is skipped).
    pub tools: Option<BTreeSet<String>>,
    /// Listed tools the robot has not configured, with the bridge's reason.
    pub not_configured: BTreeMap<String, String>,
    /// The manifest surveyed (for `needs_manifest`); None as for `tools`.
    pub manifest: Option<Value>,
}

/// Whether a reason for a tool's unavailability says it is not configured
/// on this robot (as opposed to data that has not arrived yet). The
/// bridge's wording: "no controller is configured for it", "no bumper
/// contacts topic is configured", "... (not configured)".
pub fn says_not_configured(reason: &str) -> bool {
    let reason = reason.to_lowercase();
    reason.contains("not configured")
        || (reason.starts_with("no ") && reason.contains(" is configured"))
}

impl Offered {
    /// From a session_init and the status tool's reasons per unavailable
    /// tool (empty when it has none).
    pub fn from_manifest(manifest: &Value, reasons: &Map<String, Value>) -> Self {
        let tools: Option<BTreeSet<String>> =
            manifest.get("tools").and_then(Value::as_array).map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t.get("id").and_then(Value::as_str).map(str::to_string))
                    .collect()
            });
        let not_configured = reasons
            .iter()
            .filter_map(|(tool, reason)| {
                reason
                    .as_str()
                    .filter(|r| says_not_configured(r))
                    .map(|r| (tool.clone(), r.to_string()))
            })
            .filter(|(tool, _)| tools.as_ref().is_some_and(|t| t.contains(tool)))
            .collect();
        Self { tools, not_configured, manifest: Some(manifest.clone()) }
    }

    /// Why a scenario whose manifest must match `needs` cannot run here;
    /// None when it can, or when no manifest was surveyed.
    pub fn manifest_skip_reason(&self, needs: &Value) -> Option<String> {
        let manifest = self.manifest.as_ref()?;
        let differs = matcher::matches(needs, manifest, &Variables::default()).err()?;
        Some(format!(
            "needs a manifest where {} (needs_manifest); this profile's: {}",
            matcher::show(needs),
            differs
        ))
    }

    /// Why a scenario needing `needed` cannot run here; None when it can.
    /// Names the first lacking tool, then any others.
    pub fn skip_reason(&self, needed: &BTreeSet<String>) -> Option<String> {
        let tools = self.tools.as_ref()?;
        let lacking: Vec<String> = needed
            .iter()
            .filter_map(|tool| {
                if !tools.contains(tool) {
                    Some(format!("{tool} (not in the manifest)"))
                } else {
                    self.not_configured.get(tool).map(|reason| format!("{tool} ({reason})"))
                }
            })
            .collect();
        match lacking.as_slice() {
            [] => None,
            [one] => Some(format!("needs tool {one}, which this profile does not offer")),
            many => {
                Some(format!("needs tools {}, which this profile does not offer", many.join(", ")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn needed(tools: &[&str]) -> BTreeSet<String> {
        tools.iter().map(|t| t.to_string()).collect()
    }

    fn manifest() -> Value {
        json!({ "tools": [{ "id": "move" }, { "id": "look_at" }, { "id": "touch" }, { "id": "vision" }] })
    }

    #[test]
    fn a_manifest_that_does_not_match_needs_manifest_skips_naming_what_differs() {
        let low = json!({ "limits": { "safety": { "min_obstacle_height_m": 0.05 } }, "tools": [] });
        let high = json!({ "limits": { "safety": { "min_obstacle_height_m": 0.2 } }, "tools": [] });
        let needs =
            json!({ "limits": { "safety": { "min_obstacle_height_m": { "$lte": 0.10 } } } });
        assert_eq!(Offered::from_manifest(&low, &Map::new()).manifest_skip_reason(&needs), None);
        let reason =
            Offered::from_manifest(&high, &Map::new()).manifest_skip_reason(&needs).unwrap();
        assert!(
            reason.contains("limits.safety.min_obstacle_height_m") && reason.contains("0.2"),
            "{reason}"
        );
        assert_eq!(
            Offered::default().manifest_skip_reason(&needs),
            None,
            "no survey, nothing skipped"
        );
    }

    #[test]
    fn reasons_that_say_not_configured_are_told_from_silence() {
        assert!(says_not_configured("no controller is configured for it"));
        assert!(says_not_configured("no bumper contacts topic is configured"));
        assert!(says_not_configured("no joint states received on joint_states (not configured)"));
        assert!(says_not_configured("this robot's world cannot be modified (actuators.world_topic is not configured: only a simulator has one)"));
        assert!(!says_not_configured("no camera frame received on /camera/image_raw"));
        assert!(!says_not_configured("no odometry on /odom for 3.0 s"));
    }

    #[test]
    fn a_scenario_needing_a_tool_the_profile_lacks_is_skipped_naming_it() {
        let reasons = json!({ "look_at": "no controller is configured for it", "vision": "no camera frame received on camera/image_raw" });
        let offered = Offered::from_manifest(&manifest(), reasons.as_object().unwrap());
        assert_eq!(
            offered.skip_reason(&needed(&["move", "vision"])),
            None,
            "silent is not lacking"
        );
        assert_eq!(offered.skip_reason(&needed(&["look_at", "move"])).unwrap(), "needs tool look_at (no controller is configured for it), which this profile does not offer");
        assert_eq!(
            offered.skip_reason(&needed(&["interact"])).unwrap(),
            "needs tool interact (not in the manifest), which this profile does not offer"
        );
        assert_eq!(offered.skip_reason(&needed(&["look_at", "interact"])).unwrap(), "needs tools interact (not in the manifest), look_at (no controller is configured for it), which this profile does not offer");
        assert_eq!(offered.skip_reason(&needed(&[])), None);
    }

    #[test]
    fn without_a_manifest_nothing_is_skipped() {
        let offered = Offered::default();
        assert_eq!(offered.skip_reason(&needed(&["look_at"])), None);
        // A reason for a tool the manifest does not list is ignored.
        let reasons = json!({ "ghost": "not configured" });
        assert!(Offered::from_manifest(&manifest(), reasons.as_object().unwrap())
            .not_configured
            .is_empty());
    }
}

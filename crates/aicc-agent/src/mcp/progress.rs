//! A call's `command` events as MCP progress: `accepted` at zero, each
//! progress report as how far the action got of how far it goes (metres,
//! degrees or seconds), never going backwards as MCP requires.
use serde_json::{Map, Value};

/// One progress notification's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: String,
}

/// Turns one call's command events into progress, keeping the last value
/// sent so that progress only increases.
#[derive(Debug, Default)]
pub struct ProgressTracker {
    last: Option<f64>,
}

impl ProgressTracker {
    /// A call waiting for an operator's approval, said once, at zero, before
    /// anything else (the wait comes before the call is accepted).
    pub fn on_awaiting(&mut self, message: String) -> Option<Progress> {
        if self.last.is_some() {
            return None;
        }
        self.last = Some(0.0);
        Some(Progress { progress: 0.0, total: None, message })
    }

    /// The progress a `command` event's payload reports; `None` for a state
    /// that is not progress (`completed`: the result follows) or a repeat.
    pub fn on_command_event(&mut self, payload: &Map<String, Value>) -> Option<Progress> {
        let state = payload.get("state").and_then(Value::as_str)?;
        let number = |key: &str| payload.get(key).and_then(Value::as_f64).filter(|v| v.is_finite());
        let progress = match state {
            "accepted" => Progress { progress: 0.0, total: None, message: "accepted".into() },
            "progress" => {
                let (done, remaining, unit) = if let Some(done) = number("done_m") {
                    (done, number("remaining_m"), "m")
                } else if let Some(done) = number("done_deg") {
                    (done, number("remaining_deg"), "°")
                } else {
                    (number("done_s")?, None, "s")
                };
                let (done, remaining) = (done.abs(), remaining.map(f64::abs));
                let total = remaining.map(|remaining| done + remaining);
                let mut message = match total {
                    Some(total) => format!("{done:.2} of {total:.2} {unit}"),
                    None => format!("{done:.2} {unit}"),
                };
                if let Some(blocked) =
                    payload.get("blocked_by").and_then(Value::as_array).filter(|b| !b.is_empty())
                {
                    let rules: Vec<&str> = blocked.iter().filter_map(Value::as_str).collect();
                    message.push_str(&format!("; held by {}", rules.join(", ")));
                }
                Progress { progress: done, total, message }
            }
            _ => return None,
        };
        let progress =
            Progress { progress: progress.progress.max(self.last.unwrap_or(f64::MIN)), ..progress };
        // `accepted` after a wait for approval is nothing new either.
        if self.last.is_some_and(|last| last >= progress.progress) {
            // Nothing new; MCP progress must increase.
            return None;
        }
        self.last = Some(progress.progress);
        Some(progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payload(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_move_reports_metres_done_of_the_whole_distance_and_only_forwards() {
        let mut tracker = ProgressTracker::default();
        assert_eq!(
            tracker.on_command_event(&payload(json!({ "state": "accepted" }))).unwrap().progress,
            0.0
        );
        let first = tracker
            .on_command_event(&payload(
                json!({ "state": "progress", "done_m": 0.1, "remaining_m": 0.2 }),
            ))
            .unwrap();
        assert_eq!((first.progress, first.total), (0.1, Some(0.30000000000000004)));
        assert_eq!(first.message, "0.10 of 0.30 m");
        assert_eq!(
            tracker.on_command_event(&payload(
                json!({ "state": "progress", "done_m": 0.09, "remaining_m": 0.21 })
            )),
            None,
            "no step back"
        );
        let later = tracker.on_command_event(&payload(json!({ "state": "progress", "done_m": 0.25, "remaining_m": 0.05, "blocked_by": ["obstacle_ahead"] }))).unwrap();
        assert_eq!(later.progress, 0.25);
        assert!(later.message.ends_with("held by obstacle_ahead"), "{}", later.message);
        assert_eq!(
            tracker.on_command_event(&payload(json!({ "state": "completed", "ok": true }))),
            None
        );
    }

    #[test]
    fn a_wait_for_approval_is_said_once_at_zero_and_the_acceptance_after_it_adds_nothing() {
        let mut tracker = ProgressTracker::default();
        let waiting = tracker.on_awaiting("awaiting an operator's approval".into()).unwrap();
        assert_eq!(
            (waiting.progress, waiting.message.as_str()),
            (0.0, "awaiting an operator's approval")
        );
        assert_eq!(tracker.on_awaiting("again".into()), None);
        assert_eq!(
            tracker.on_command_event(&payload(json!({ "state": "accepted", "approved_by": "op" }))),
            None,
            "progress must increase"
        );
        assert_eq!(
            tracker
                .on_command_event(&payload(
                    json!({ "state": "progress", "done_m": 0.05, "remaining_m": 0.25 })
                ))
                .unwrap()
                .progress,
            0.05
        );
    }

    #[test]
    fn a_backwards_move_a_turn_and_a_timed_move_count_their_own_units() {
        let backwards = ProgressTracker::default()
            .on_command_event(&payload(
                json!({ "state": "progress", "done_m": -0.2, "remaining_m": -0.1 }),
            ))
            .unwrap();
        assert_eq!(backwards.progress, 0.2);
        let turn = ProgressTracker::default()
            .on_command_event(&payload(
                json!({ "state": "progress", "done_deg": 30.0, "remaining_deg": 60.0 }),
            ))
            .unwrap();
        assert_eq!(
            (turn.progress, turn.total, turn.message.as_str()),
            (30.0, Some(90.0), "30.00 of 90.00 °")
        );
        let timed = ProgressTracker::default()
            .on_command_event(&payload(
                json!({ "state": "progress", "done_m": null, "done_s": 1.5 }),
            ))
            .unwrap();
        assert_eq!((timed.progress, timed.total), (1.5, None));
        assert_eq!(
            ProgressTracker::default().on_command_event(&payload(json!({ "state": "progress" }))),
            None,
            "nothing to report"
        );
    }
}

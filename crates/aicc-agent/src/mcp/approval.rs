//! What the adapter does when one of its host's calls waits for an
//! operator's approval (docs/approvals.md): ask the host's user through an
//! MCP elicitation when the host can show a form and an operator token is
//! configured, else nothing (another operator decides). Pure: the command
//! payload, the host's capability and the configuration in, a plan out; the
//! user's answer in, the decision to carry out out. `operator` does the I/O.
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use serde_json::{Map, Value};

/// The elicitation form's boolean: approve the call?
pub const APPROVE_FIELD: &str = "approve";
/// The elicitation form's optional free text, passed on as the reason.
pub const REASON_FIELD: &str = "reason";
/// The bridge's `approve` / `deny` take a reason of at most this many characters.
const REASON_MAX_CHARS: usize = 200;
/// The tool's input is quoted in the question up to this many characters.
const INPUT_MAX_CHARS: usize = 400;

/// A call waiting for approval, as its `awaiting_approval` event says.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub approval_id: String,
    /// The bridge's reason for holding it (the rule that matched).
    pub reason: String,
    /// How long the bridge waits for a decision.
    pub expires_in_s: Option<f64>,
}

/// What the adapter knows of its host and its configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Asking {
    /// The host declared the elicitation capability in form mode.
    pub host_elicits_forms: bool,
    /// `--operator-token-env` named a variable holding a token.
    pub operator_token: bool,
}

/// What to do about a call that waits.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Ask the host's user, and carry out the answer on an operator session.
    AskHost(Waiting),
    /// Send nothing: another operator (the console, `aicc approvals`)
    /// decides, or the bridge's timeout ends the call.
    AwaitOperator { waiting: Option<Waiting>, why: &'static str },
}

impl Plan {
    /// The progress message the host is sent while the call waits.
    pub fn progress_message(&self) -> String {
        match self {
            Plan::AskHost(waiting) => {
                format!("awaiting approval ({}): the MCP host's user is asked", waiting.reason)
            }
            Plan::AwaitOperator { waiting: Some(waiting), .. } => {
                format!("awaiting an operator's approval ({}): approval_id {}, e.g. `aicc approvals approve {}`", waiting.reason, waiting.approval_id, waiting.approval_id)
            }
            Plan::AwaitOperator { waiting: None, .. } => {
                "awaiting an operator's approval".to_string()
            }
        }
    }
}

/// The plan for a `command` event's payload; `None` when the event is not
/// a call starting to wait.
pub fn plan(payload: &Map<String, Value>, asking: Asking) -> Option<Plan> {
    if payload.get("state").and_then(Value::as_str) != Some("awaiting_approval") {
        return None;
    }
    let approval_id =
        payload.get("approval_id").and_then(Value::as_str).filter(|id| !id.is_empty());
    let Some(approval_id) = approval_id else {
        return Some(Plan::AwaitOperator { waiting: None, why: "the bridge named no approval_id" });
    };
    let waiting = Waiting {
        approval_id: approval_id.to_string(),
        reason: payload
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("the bridge's approval rules")
            .to_string(),
        expires_in_s: payload
            .get("expires_in_s")
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && *s > 0.0),
    };
    Some(match (asking.host_elicits_forms, asking.operator_token) {
        (true, true) => Plan::AskHost(waiting),
        (false, _) => Plan::AwaitOperator {
            waiting: Some(waiting),
            why: "the MCP host did not declare the elicitation capability (form mode)",
        },
        (true, false) => Plan::AwaitOperator {
            waiting: Some(waiting),
            why: "no operator token is configured (--operator-token-env)",
        },
    })
}

/// The question to the host's user: the tool, its input and the bridge's
/// reason; a form of one required boolean and an optional reason.
pub fn elicitation(tool: &str, input: &Value, waiting: &Waiting) -> ElicitRequestParams {
    let input = cut(&input.to_string(), INPUT_MAX_CHARS);
    let expires = waiting
        .expires_in_s
        .map(|s| format!(" Undecided, it ends in {s:.0} s."))
        .unwrap_or_default();
    let message = format!("The robot's `{tool}` call with input {input} waits for your approval: {}. Approve it?{expires}", waiting.reason);
    let requested_schema = ElicitationSchema::builder()
        .required_bool_with(APPROVE_FIELD, |b| {
            b.title("Approve").description(format!(
                "true: the robot runs `{tool}`; false: it is denied and nothing moves"
            ))
        })
        .optional_string_with(REASON_FIELD, |s| {
            s.title("Reason").description("optional; recorded with the decision")
        })
        .build()
        .expect("the form's required field is one of its properties");
    ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema }
}

/// The decision to carry out on the operator session.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// `approve`, with this reason.
    Approve { reason: String },
    /// `deny`, with this reason.
    Deny { reason: String },
}

impl Decision {
    /// The bridge tool that carries it out.
    pub fn tool(&self) -> &'static str {
        match self {
            Decision::Approve { .. } => "approve",
            Decision::Deny { .. } => "deny",
        }
    }

    /// That tool's input.
    pub fn input(&self, approval_id: &str) -> Value {
        let (Decision::Approve { reason } | Decision::Deny { reason }) = self;
        serde_json::json!({ "approval_id": approval_id, "reason": reason })
    }
}

/// The user's answer as a decision: only an accepted form with
/// `approve: true` approves; anything else (false, missing, not a boolean,
/// declined, cancelled) denies.
pub fn decision(answer: &ElicitResult) -> Decision {
    let content = answer.content.as_ref().and_then(Value::as_object);
    let said = content
        .and_then(|c| c.get(REASON_FIELD))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|r| !r.is_empty());
    let with = |base: &str| {
        cut(
            &match said {
                Some(said) => format!("{base}: {said}"),
                None => base.to_string(),
            },
            REASON_MAX_CHARS,
        )
    };
    match answer.action {
        ElicitationAction::Accept
            if content.and_then(|c| c.get(APPROVE_FIELD)) == Some(&Value::Bool(true)) =>
        {
            Decision::Approve { reason: with("approved by the MCP host's user") }
        }
        ElicitationAction::Accept => {
            Decision::Deny { reason: with("the MCP host's user declined") }
        }
        ElicitationAction::Decline => {
            Decision::Deny { reason: with("the MCP host's user declined") }
        }
        ElicitationAction::Cancel => {
            Decision::Deny { reason: with("the MCP host's user declined (dismissed the question)") }
        }
        // An action of a later MCP revision is no approval.
        _ => Decision::Deny {
            reason: with("the MCP host's user declined (an answer this adapter does not know)"),
        },
    }
}

/// `text` cut to `max` characters, marked with an ellipsis.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payload(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    fn waiting_payload() -> Map<String, Value> {
        payload(
            json!({ "call_id": "c1", "tool": "move", "state": "awaiting_approval", "reason": "a move of 0.50 m (approvals.move_longer_than_m 0.10)", "approval_id": "ap-7", "expires_in_s": 30.0 }),
        )
    }

    const BOTH: Asking = Asking { host_elicits_forms: true, operator_token: true };

    #[test]
    fn a_waiting_call_is_asked_of_the_host_only_with_the_capability_and_an_operator_token() {
        let waiting = Waiting {
            approval_id: "ap-7".into(),
            reason: "a move of 0.50 m (approvals.move_longer_than_m 0.10)".into(),
            expires_in_s: Some(30.0),
        };
        assert_eq!(plan(&waiting_payload(), BOTH), Some(Plan::AskHost(waiting.clone())));
        let no_capability =
            plan(&waiting_payload(), Asking { host_elicits_forms: false, operator_token: true })
                .unwrap();
        assert!(
            matches!(&no_capability, Plan::AwaitOperator { waiting: Some(w), why } if *w == waiting && why.contains("elicitation")),
            "{no_capability:?}"
        );
        let no_token =
            plan(&waiting_payload(), Asking { host_elicits_forms: true, operator_token: false })
                .unwrap();
        assert!(
            matches!(&no_token, Plan::AwaitOperator { why, .. } if why.contains("--operator-token-env")),
            "{no_token:?}"
        );
        let neither =
            plan(&waiting_payload(), Asking { host_elicits_forms: false, operator_token: false })
                .unwrap();
        assert!(matches!(neither, Plan::AwaitOperator { .. }));
    }

    #[test]
    fn other_states_are_no_approval_and_a_wait_without_an_id_asks_no_one() {
        for state in ["accepted", "progress", "completed"] {
            assert_eq!(
                plan(&payload(json!({ "call_id": "c1", "state": state })), BOTH),
                None,
                "{state}"
            );
        }
        assert_eq!(plan(&payload(json!({ "call_id": "c1" })), BOTH), None);
        let no_id = plan(
            &payload(json!({ "state": "awaiting_approval", "approval_id": null, "reason": "r" })),
            BOTH,
        )
        .unwrap();
        assert!(matches!(no_id, Plan::AwaitOperator { waiting: None, .. }), "{no_id:?}");
        let empty_id =
            plan(&payload(json!({ "state": "awaiting_approval", "approval_id": "" })), BOTH)
                .unwrap();
        assert!(matches!(empty_id, Plan::AwaitOperator { waiting: None, .. }), "{empty_id:?}");
    }

    #[test]
    fn the_progress_message_says_who_is_asked() {
        let asked = plan(&waiting_payload(), BOTH).unwrap().progress_message();
        assert!(asked.contains("host's user") && asked.contains("0.50 m"), "{asked}");
        let other =
            plan(&waiting_payload(), Asking { host_elicits_forms: false, operator_token: true })
                .unwrap()
                .progress_message();
        assert!(
            other.starts_with("awaiting an operator's approval") && other.contains("ap-7"),
            "{other}"
        );
    }

    #[test]
    fn the_question_names_the_tool_its_input_and_the_reason_with_a_boolean_and_a_reason_field() {
        let Plan::AskHost(waiting) = plan(&waiting_payload(), BOTH).unwrap() else { panic!() };
        let request =
            serde_json::to_value(elicitation("move", &json!({ "forward": 0.5 }), &waiting))
                .unwrap();
        assert_eq!(request["mode"], "form", "{request}");
        let message = request["message"].as_str().unwrap();
        for part in ["`move`", r#"{"forward":0.5}"#, "approvals.move_longer_than_m", "30 s"] {
            assert!(message.contains(part), "{part} is not in {message}");
        }
        let schema = &request["requestedSchema"];
        assert_eq!(
            (
                schema["type"].as_str(),
                schema["properties"]["approve"]["type"].as_str(),
                schema["properties"]["reason"]["type"].as_str()
            ),
            (Some("object"), Some("boolean"), Some("string")),
            "{schema}"
        );
        assert_eq!(schema["required"], json!(["approve"]), "{schema}");
        let long = elicitation("say", &json!({ "text": "a".repeat(2000) }), &waiting);
        let ElicitRequestParams::FormElicitationParams { message, .. } = long else { panic!() };
        assert!(
            message.chars().count() < 800 && message.contains('…'),
            "a long input is cut: {} chars",
            message.chars().count()
        );
    }

    fn answer(action: ElicitationAction, content: Option<Value>) -> ElicitResult {
        let mut result = ElicitResult::new(action);
        result.content = content;
        result
    }

    #[test]
    fn only_an_accepted_form_saying_approve_true_approves() {
        let approved =
            decision(&answer(ElicitationAction::Accept, Some(json!({ "approve": true }))));
        assert_eq!(
            approved,
            Decision::Approve { reason: "approved by the MCP host's user".into() }
        );
        assert_eq!(approved.tool(), "approve");
        assert_eq!(
            approved.input("ap-7"),
            json!({ "approval_id": "ap-7", "reason": "approved by the MCP host's user" })
        );
        let with_reason = decision(&answer(
            ElicitationAction::Accept,
            Some(json!({ "approve": true, "reason": " path is clear " })),
        ));
        assert_eq!(
            with_reason,
            Decision::Approve { reason: "approved by the MCP host's user: path is clear".into() }
        );
        for content in [
            Some(json!({ "approve": false })),
            Some(json!({ "approve": "true" })),
            Some(json!({})),
            None,
            Some(json!([true])),
        ] {
            let denied = decision(&answer(ElicitationAction::Accept, content.clone()));
            assert!(
                matches!(&denied, Decision::Deny { reason } if reason.contains("declined")),
                "{content:?}: {denied:?}"
            );
            assert_eq!(denied.tool(), "deny");
        }
        assert_eq!(
            decision(&answer(ElicitationAction::Decline, None)),
            Decision::Deny { reason: "the MCP host's user declined".into() }
        );
        let cancelled =
            decision(&answer(ElicitationAction::Cancel, Some(json!({ "approve": true }))));
        assert!(
            matches!(&cancelled, Decision::Deny { reason } if reason.contains("declined")),
            "a cancel never approves: {cancelled:?}"
        );
    }

    #[test]
    fn the_reason_fits_the_bridges_limit() {
        let long = decision(&answer(
            ElicitationAction::Accept,
            Some(json!({ "approve": false, "reason": "x".repeat(500) })),
        ));
        let Decision::Deny { reason } = long else { panic!() };
        assert_eq!(reason.chars().count(), REASON_MAX_CHARS);
        assert!(reason.starts_with("the MCP host's user declined: x"));
    }
}

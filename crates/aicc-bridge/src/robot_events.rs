//! Events raised beside the protocol core, for agents: by tools (a long
//! action's progress), by the robot's watchers (contacts, the governor's
//! restrictions, a low battery) and by the recorder. They travel through
//! one bounded queue to the server, which hands them to the core. This
//! module is below all of them (it imports nothing of the bridge), so that
//! none of them depends on another for the type.
use serde_json::Value;

/// An event for agents: its topic, its payload, and whom it is for.
#[derive(Debug, Clone, PartialEq)]
pub struct RobotEvent {
    pub topic: String,
    pub payload: Value,
    /// The session it is for; None: every session.
    pub session: Option<String>,
}

impl RobotEvent {
    /// An event for every session.
    pub fn for_all(topic: impl Into<String>, payload: Value) -> Self {
        Self { topic: topic.into(), payload, session: None }
    }

    /// An event for one session.
    pub fn for_session(
        topic: impl Into<String>,
        payload: Value,
        session: impl Into<String>,
    ) -> Self {
        Self { topic: topic.into(), payload, session: Some(session.into()) }
    }
}

/// Where events are raised: bounded; a full queue drops the event (with a
/// warning at the sender) rather than block a tool or a watcher.
pub type EventSender = tokio::sync::mpsc::Sender<RobotEvent>;

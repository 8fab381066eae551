//! Call correlation (AICC section 5, conformance rule 2): every call gets a
//! unique id, and a result is taken only for a call that is waiting for one.
use std::collections::{HashMap, HashSet, VecDeque};

/// How many answered call ids are remembered to recognise a repeated answer.
const ANSWERED_REMEMBERED: usize = 1024;
/// How many abandoned calls are remembered to recognise a late answer.
const ABANDONED_REMEMBERED: usize = 64;

/// A call sent and not yet answered.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    pub tool: String,
    /// The `message_id` of the tool_call, which a top-level `error` may
    /// name in `in_reply_to`.
    pub message_id: String,
}

/// What a result's `call_id` turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Correlation {
    /// The answer to this pending call (now answered).
    Answers(PendingCall),
    /// A call that was answered before: a repeated answer, not to be taken.
    AlreadyAnswered,
    /// A call given up on (no answer in time): its late answer, not taken
    /// and not a violation. A second answer to it is a repeat.
    Abandoned(PendingCall),
    /// No call of this client has this id.
    Unknown,
}

/// The calls of one connection.
#[derive(Debug)]
pub struct CallTracker {
    /// Distinguishes this client's ids from another process's.
    prefix: String,
    next_number: u64,
    pending: HashMap<String, PendingCall>,
    answered: VecDeque<String>,
    answered_set: HashSet<String>,
    /// Oldest first; a late answer moves its call to `answered`.
    abandoned: VecDeque<(String, PendingCall)>,
}

impl Default for CallTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl CallTracker {
    pub fn new() -> Self {
        let prefix = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        Self {
            prefix,
            next_number: 1,
            pending: HashMap::new(),
            answered: VecDeque::new(),
            answered_set: HashSet::new(),
            abandoned: VecDeque::new(),
        }
    }

    /// Registers a new call and returns its id, never used before here.
    pub fn begin(&mut self, tool: &str, message_id: &str) -> String {
        let call_id = format!("c{}-{}", self.next_number, self.prefix);
        self.next_number += 1;
        self.pending.insert(
            call_id.clone(),
            PendingCall { tool: tool.into(), message_id: message_id.into() },
        );
        call_id
    }

    /// Classifies a `tool_result`'s call_id, marking its call answered.
    pub fn resolve(&mut self, call_id: &str) -> Correlation {
        if let Some(call) = self.pending.remove(call_id) {
            self.remember_answered(call_id);
            return Correlation::Answers(call);
        }
        if let Some(call) = self.take_abandoned(|id, _| id == call_id) {
            return Correlation::Abandoned(call);
        }
        if self.answered_set.contains(call_id) {
            Correlation::AlreadyAnswered
        } else {
            Correlation::Unknown
        }
    }

    /// The pending call a top-level `error` is about: named by `call_id`, or
    /// by `in_reply_to` the call's message id.
    pub fn resolve_error(
        &mut self,
        in_reply_to: Option<&str>,
        call_id: Option<&str>,
    ) -> Option<(String, PendingCall)> {
        let id = call_id.filter(|id| self.pending.contains_key(*id)).map(str::to_owned).or_else(
            || {
                let message_id = in_reply_to?;
                self.pending
                    .iter()
                    .find(|(_, call)| call.message_id == message_id)
                    .map(|(id, _)| id.clone())
            },
        )?;
        let call = self.pending.remove(&id)?;
        self.remember_answered(&id);
        Some((id, call))
    }

    /// The abandoned call a top-level `error` is about (its late answer),
    /// named as in `resolve_error`.
    pub fn resolve_abandoned_error(
        &mut self,
        in_reply_to: Option<&str>,
        call_id: Option<&str>,
    ) -> Option<(String, PendingCall)> {
        let mut found = None;
        let call = self.take_abandoned(|id, call| {
            let named = call_id == Some(id) || in_reply_to == Some(call.message_id.as_str());
            if named {
                found = Some(id.to_owned());
            }
            named
        })?;
        Some((found?, call))
    }

    /// Gives up on a call (no answer in time, or the connection failed
    /// while waiting): a late answer is then recognised as such, not taken.
    /// A call no longer pending is left as it is.
    pub fn abandon(&mut self, call_id: &str) {
        if let Some(call) = self.pending.remove(call_id) {
            if self.abandoned.len() >= ABANDONED_REMEMBERED {
                if let Some((oldest, _)) = self.abandoned.pop_front() {
                    self.remember_answered(&oldest);
                }
            }
            self.abandoned.push_back((call_id.to_owned(), call));
        }
    }

    /// Removes the first abandoned call `matches`, remembering it answered.
    fn take_abandoned(
        &mut self,
        mut matches: impl FnMut(&str, &PendingCall) -> bool,
    ) -> Option<PendingCall> {
        let index = self.abandoned.iter().position(|(id, call)| matches(id, call))?;
        let (id, call) = self.abandoned.remove(index)?;
        self.remember_answered(&id);
        Some(call)
    }

    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    fn remember_answered(&mut self, call_id: &str) {
        self.answered.push_back(call_id.to_owned());
        self.answered_set.insert(call_id.to_owned());
        while self.answered.len() > ANSWERED_REMEMBERED {
            if let Some(old) = self.answered.pop_front() {
                self.answered_set.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_are_unique_and_non_empty_within_and_across_trackers() {
        let (mut one, mut two) = (CallTracker::new(), CallTracker::new());
        let mut seen = HashSet::new();
        for i in 0..5000 {
            for tracker in [&mut one, &mut two] {
                let id = tracker.begin("probe", &format!("m{i}"));
                assert!(!id.is_empty());
                assert!(seen.insert(id.clone()), "id {id} was handed out twice");
            }
        }
    }

    #[test]
    fn a_result_answers_its_call_once_and_then_is_a_repeat() {
        let mut calls = CallTracker::new();
        let id = calls.begin("probe", "m1");
        assert_eq!(calls.resolve("someone-else"), Correlation::Unknown);
        assert_eq!(calls.pending_count(), 1, "a foreign id must not consume the pending call");
        assert_eq!(
            calls.resolve(&id),
            Correlation::Answers(PendingCall { tool: "probe".into(), message_id: "m1".into() })
        );
        assert_eq!(calls.resolve(&id), Correlation::AlreadyAnswered);
    }

    #[test]
    fn an_error_is_matched_by_call_id_or_by_the_calls_message_id() {
        let mut calls = CallTracker::new();
        let first = calls.begin("probe", "m1");
        let second = calls.begin("drive", "m2");
        assert_eq!(calls.resolve_error(Some("m2"), None).map(|(id, _)| id), Some(second));
        assert_eq!(calls.resolve_error(None, Some("nobody")), None);
        assert_eq!(
            calls.resolve_error(Some("m-other"), Some(&first)).map(|(id, c)| (id, c.tool)),
            Some((first.clone(), "probe".to_string()))
        );
        assert_eq!(calls.resolve(&first), Correlation::AlreadyAnswered);
    }

    #[test]
    fn an_abandoned_calls_late_answer_is_recognised_once_then_a_repeat() {
        let mut calls = CallTracker::new();
        let id = calls.begin("probe", "m1");
        calls.abandon(&id);
        assert_eq!(calls.pending_count(), 0);
        assert_eq!(
            calls.resolve(&id),
            Correlation::Abandoned(PendingCall { tool: "probe".into(), message_id: "m1".into() })
        );
        assert_eq!(calls.resolve(&id), Correlation::AlreadyAnswered);
        let other = calls.begin("probe", "m2");
        calls.abandon(&other);
        assert_eq!(
            calls.resolve_abandoned_error(Some("m2"), None).map(|(id, _)| id),
            Some(other.clone())
        );
        assert_eq!(calls.resolve_abandoned_error(Some("m2"), None), None, "answered once");
    }

    #[test]
    fn the_memory_of_abandoned_calls_is_bounded_and_the_oldest_become_repeats() {
        let mut calls = CallTracker::new();
        let ids: Vec<String> =
            (0..=ABANDONED_REMEMBERED).map(|i| calls.begin("probe", &format!("m{i}"))).collect();
        for id in &ids {
            calls.abandon(id);
        }
        assert_eq!(calls.abandoned.len(), ABANDONED_REMEMBERED);
        assert_eq!(calls.resolve(&ids[0]), Correlation::AlreadyAnswered);
        assert!(matches!(calls.resolve(&ids[1]), Correlation::Abandoned(_)));
    }

    #[test]
    fn the_memory_of_answered_calls_is_bounded() {
        let mut calls = CallTracker::new();
        let first = calls.begin("probe", "m0");
        calls.resolve(&first);
        for i in 0..ANSWERED_REMEMBERED {
            let id = calls.begin("probe", &format!("m{i}"));
            calls.resolve(&id);
        }
        assert_eq!(calls.answered.len(), ANSWERED_REMEMBERED);
        assert_eq!(
            calls.resolve(&first),
            Correlation::Unknown,
            "the oldest answered id was forgotten"
        );
    }
}

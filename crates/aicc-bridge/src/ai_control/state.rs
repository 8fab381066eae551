//! The dialect's bridge-wide state, free of I/O: the bounded command
//! queue with its replace/append rules, the bounded event history with
//! its cursor, and the observation sequence.
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::actions::{Action, Command};
use crate::history::SequencedRing;
use crate::protocol::auth::Credential;

/// Largest retained event, bytes of JSON: bigger parts (a tool's output)
/// are replaced by their size, so that a page of events stays bounded.
pub const MAX_EVENT_BYTES: usize = 16 * 1024;
/// Parts of an event that may be summarised, in this order.
const SHRINKABLE_PARTS: [&str; 3] = ["output", "payload", "error"];

/// Retained events with sequence numbers (bridge-wide: a cursor
/// survives reconnects).
#[derive(Debug)]
pub struct EventHistory {
    events: SequencedRing<Retained>,
}

/// An event as retained, with the length of its JSON (measured once, when
/// it is bounded, rather than at every page).
#[derive(Debug)]
struct Retained {
    event: Value,
    json_bytes: usize,
}

/// Bytes of a page entry `{"event":E,"seq":N}` and its line end, besides
/// the event's JSON and the digits of its seq.
const ENTRY_OVERHEAD_BYTES: usize = r#"{"event":,"seq":}"#.len() + 1;

fn entry_bytes(seq: u64, retained: &Retained) -> usize {
    retained.json_bytes + seq.to_string().len() + ENTRY_OVERHEAD_BYTES
}

impl EventHistory {
    pub fn new(capacity: usize) -> Self {
        Self { events: SequencedRing::new(capacity) }
    }

    /// Appends an event (the oldest goes when full); returns its seq.
    pub fn push(&mut self, event: Value) -> u64 {
        let (event, json_bytes) = bounded(event);
        self.events.push(Retained { event, json_bytes })
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn capacity(&self) -> usize {
        self.events.capacity()
    }

    pub fn latest_seq(&self) -> u64 {
        self.events.last_seq()
    }

    /// `{latestSeq, events: [{seq, event}]}`: events with seq > `after_seq`,
    /// ascending, at most `limit`, and no more than fit in `byte_budget`
    /// (at least one: each is bounded by [`MAX_EVENT_BYTES`]); the caller
    /// pages on with the last seq returned.
    pub fn after(&self, after_seq: u64, limit: usize, byte_budget: usize) -> Value {
        let page = self.events.page_after(after_seq, limit, byte_budget, entry_bytes);
        let events: Vec<Value> = page
            .items
            .into_iter()
            .map(|(seq, retained)| json!({ "seq": seq, "event": retained.event }))
            .collect();
        json!({ "latestSeq": self.latest_seq(), "events": events })
    }
}

/// An event cut down to [`MAX_EVENT_BYTES`] if need be, and the length of
/// its JSON.
fn bounded(mut event: Value) -> (Value, usize) {
    let mut size = event.to_string().len();
    for part in SHRINKABLE_PARTS {
        if size <= MAX_EVENT_BYTES {
            break;
        }
        if let Some(slot) = event.get_mut(part) {
            let part_bytes = slot.to_string().len();
            *slot = json!({ "omitted": format!("{part_bytes} bytes of JSON, over the {MAX_EVENT_BYTES}-byte bound of a retained event") });
            size = event.to_string().len();
        }
    }
    (event, size)
}

/// Who a command is from: the credential its client authenticated with
/// (every client without a token is one). A replacing command cancels only
/// its own owner's commands, and the lease is kept per owner.
pub type Owner = Credential;

/// A command waiting its turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub seq: u64,
    pub command: Command,
    pub owner: Owner,
    /// The stop generation it was accepted in: a stop from any front end
    /// after it drops it (see robot::halt).
    pub generation: u64,
}

impl Queued {
    /// The AICC tool it calls, if it is an action.
    pub fn tool(&self) -> Option<&str> {
        match &self.command.action {
            Action::Tool { tool, .. } => Some(tool),
            Action::Unknown => None,
        }
    }
}

/// The command being carried out.
#[derive(Debug, Clone, PartialEq)]
pub struct Running {
    pub seq: u64,
    pub owner: Owner,
    pub generation: u64,
    /// Whether it is a `stop` (its own halt moves the generation).
    pub is_stop: bool,
    /// Its AICC call, once sent.
    pub call_id: Option<String>,
    /// Set when a later command replaced it.
    pub replaced_by: Option<u64>,
    /// Set when something else ended it (a stop, its lease): why.
    pub ended_by: Option<String>,
}

/// What accepting a command changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub seq: u64,
    /// Waiting commands it replaced (each completes as replaced).
    pub dropped: Vec<Queued>,
    /// The running call it replaced: cancel it (the robot stops it).
    pub cancel_call: Option<String>,
}

/// The queue has no room for an appended command.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueFull {
    pub capacity: usize,
}

/// Commands run one at a time, in order; at most `capacity` wait.
#[derive(Debug)]
pub struct CommandQueue {
    waiting: VecDeque<Queued>,
    capacity: usize,
    last_seq: u64,
    running: Option<Running>,
}

impl CommandQueue {
    pub fn new(capacity: usize) -> Self {
        Self { waiting: VecDeque::new(), capacity: capacity.max(1), last_seq: 0, running: None }
    }

    /// Whether accepting `command` from `owner` replaces the running one.
    pub fn replaces_running(&self, command: &Command, owner: Owner) -> bool {
        let replaces = !command.append || command.is_stop();
        replaces && self.running.as_ref().is_some_and(|r| command.is_stop() || r.owner == owner)
    }

    /// Accepts a command from `owner` in stop generation `generation`:
    /// `append` queues it behind the others (refused when full); otherwise
    /// it replaces its owner's waiting and running commands (another
    /// client's stay: they are not its to cancel). A `stop` always
    /// replaces everything, whoever sent it and whatever `append` says: it
    /// must never wait behind queued moves (nor be refused for a full queue).
    pub fn enqueue(
        &mut self,
        command: Command,
        owner: Owner,
        generation: u64,
    ) -> Result<Accepted, QueueFull> {
        let stop = command.is_stop();
        let replaces = !command.append || stop;
        let ours = |o: &Owner| stop || *o == owner;
        let room_after = self.waiting.len()
            - if replaces { self.waiting.iter().filter(|q| ours(&q.owner)).count() } else { 0 };
        if !stop && room_after >= self.capacity {
            return Err(QueueFull { capacity: self.capacity });
        }
        self.last_seq += 1;
        let seq = self.last_seq;
        let mut accepted = Accepted { seq, dropped: Vec::new(), cancel_call: None };
        if replaces {
            let (dropped, kept): (VecDeque<Queued>, VecDeque<Queued>) =
                self.waiting.drain(..).partition(|q| ours(&q.owner));
            accepted.dropped = dropped.into();
            self.waiting = kept;
            if let Some(running) = self.running.as_mut().filter(|r| ours(&r.owner)) {
                running.replaced_by = Some(seq);
                accepted.cancel_call = running.call_id.clone();
            }
        }
        let queued = Queued { seq, command, owner, generation };
        if stop {
            // Ahead of any other client's commands: nothing runs before it.
            self.waiting.push_front(queued);
        } else {
            self.waiting.push_back(queued);
        }
        Ok(accepted)
    }

    /// The next command to run, now the running one; None when idle or
    /// one is still running.
    pub fn start_next(&mut self) -> Option<Queued> {
        if self.running.is_some() {
            return None;
        }
        let next = self.waiting.pop_front()?;
        self.running = Some(Running {
            seq: next.seq,
            owner: next.owner,
            generation: next.generation,
            is_stop: next.command.is_stop(),
            call_id: None,
            replaced_by: None,
            ended_by: None,
        });
        Some(next)
    }

    /// Records the AICC call of the running command.
    pub fn set_call(&mut self, seq: u64, call_id: String) {
        if let Some(running) = self.running.as_mut().filter(|r| r.seq == seq) {
            running.call_id = Some(call_id);
        }
    }

    /// Marks the running command as ended by something else than its own
    /// outcome (a stop, its lease); returns its call to cancel, if any.
    /// The first reason stays.
    pub fn end_running(&mut self, why: String) -> Option<String> {
        let running = self.running.as_mut()?;
        if running.ended_by.is_none() && running.replaced_by.is_none() {
            running.ended_by = Some(why);
        }
        running.call_id.clone()
    }

    /// The running command is over; returns what replaced or ended it.
    pub fn finish(&mut self, seq: u64) -> Option<Running> {
        match self.running.take() {
            Some(running) if running.seq == seq => Some(running),
            other => {
                self.running = other;
                None
            }
        }
    }

    /// Takes out the waiting commands `drop` says to drop.
    pub fn drop_waiting(&mut self, drop: impl Fn(&Queued) -> bool) -> Vec<Queued> {
        let (dropped, kept): (VecDeque<Queued>, VecDeque<Queued>) =
            self.waiting.drain(..).partition(|q| drop(q));
        self.waiting = kept;
        dropped.into()
    }

    /// After the dialect's own `stop` (seq `stop_seq`) ran: the commands
    /// accepted after it, in the generation before it, are of the new one
    /// (they came after that stop, not before).
    pub fn restamp_after(&mut self, stop_seq: u64, before: u64, after: u64) {
        for queued in self.waiting.iter_mut().filter(|q| q.seq > stop_seq && q.generation == before)
        {
            queued.generation = after;
        }
    }

    /// The owners of the running and waiting commands.
    pub fn owners(&self) -> Vec<Owner> {
        let mut owners: Vec<Owner> = self
            .running
            .iter()
            .map(|r| r.owner)
            .chain(self.waiting.iter().map(|q| q.owner))
            .collect();
        owners.sort();
        owners.dedup();
        owners
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn running(&self) -> Option<&Running> {
        self.running.as_ref()
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub success: bool,
    pub message: String,
    pub output: Option<Value>,
    /// The AICC error object (code, message, retryable), on failure.
    pub error: Option<Value>,
    pub tick: Option<u64>,
}

impl Completion {
    /// A failure the dialect itself reports; `retryable`: the same command
    /// may succeed later unchanged (e.g. the session is reopening).
    pub fn failed(message: impl Into<String>, code: &str, retryable: bool) -> Self {
        let message = message.into();
        Self {
            success: false,
            error: Some(json!({ "code": code, "message": message, "retryable": retryable })),
            message,
            output: None,
            tick: None,
        }
    }
}

/// The one `command_completed` event of an accepted command.
pub fn command_completed(
    seq: u64,
    command_type: &str,
    tool: Option<&str>,
    completion: Completion,
) -> Value {
    let mut event = json!({
        "type": "command_completed",
        "commandSeq": seq,
        "commandType": command_type,
        "tool": tool,
        "success": completion.success,
        "message": completion.message,
        "tick": completion.tick,
    });
    match (completion.output, completion.error) {
        (_, Some(error)) => event["error"] = error,
        (Some(output), None) => event["output"] = output,
        (None, None) => {}
    }
    event
}

/// The observation sequence: it moves only when the snapshot changes
/// (ignoring the tick and data ages, which change with every read).
#[derive(Debug, Default)]
pub struct ObservationTracker {
    seq: u64,
    fingerprint: Option<Value>,
}

impl ObservationTracker {
    /// Records a fresh snapshot; returns its sequence number.
    pub fn update(&mut self, snapshot: &Value) -> u64 {
        let fingerprint = without_volatile(snapshot);
        if self.fingerprint.as_ref() != Some(&fingerprint) {
            self.seq += 1;
            self.fingerprint = Some(fingerprint);
        }
        self.seq
    }

    /// 0 until the first observation.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

fn without_volatile(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| {
                    !(key.as_str() == "tick"
                        || key.as_str() == "stamp_s"
                        || key.ends_with("age_ms")
                        || key.ends_with("age_s"))
                })
                .map(|(key, value)| (key.clone(), without_volatile(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_volatile).collect()),
        other => other.clone(),
    }
}

/// Everything the dialect keeps, under one lock.
#[derive(Debug)]
pub struct DialectState {
    pub queue: CommandQueue,
    pub history: EventHistory,
    pub observation: ObservationTracker,
    /// The last error the dialect met ("" when none), for `status`.
    pub last_error: String,
    /// When each owner was last heard from (any request): the lease.
    /// Bounded by the configured tokens, plus one for clients without.
    heard: HashMap<Owner, Instant>,
    /// Connections closed for HTTP, and for too many undecodable lines.
    pub closed_for_http: u64,
    pub closed_for_undecodable: u64,
}

/// Why a waiting command is dropped before it runs.
const STALE: &str = "dropped: a stop (from any front end: AICC, MCP, the console or this dialect) came after this command was accepted; send it again to run it";

impl DialectState {
    pub fn new(max_queued_commands: usize, max_events: usize) -> Self {
        Self {
            queue: CommandQueue::new(max_queued_commands),
            history: EventHistory::new(max_events),
            observation: ObservationTracker::default(),
            last_error: String::new(),
            heard: HashMap::new(),
            closed_for_http: 0,
            closed_for_undecodable: 0,
        }
    }

    /// Records a command's completion event (and a failure as the last error).
    pub fn complete(
        &mut self,
        seq: u64,
        command_type: &str,
        tool: Option<&str>,
        completion: Completion,
    ) -> u64 {
        if !completion.success {
            self.last_error = format!("command {seq} ({command_type}): {}", completion.message);
        }
        self.history.push(command_completed(seq, command_type, tool, completion))
    }

    /// `owner` was heard from (a request): its lease runs from `now`.
    pub fn heard(&mut self, owner: Owner, now: Instant) {
        self.heard.insert(owner, now);
    }

    /// Why `owner`'s lease has expired at `now`, if it has: nothing heard
    /// from it for longer than `timeout`.
    pub fn lease_expired(&self, owner: Owner, now: Instant, timeout: Duration) -> Option<String> {
        let silent =
            self.heard.get(&owner).map_or(Duration::MAX, |at| now.saturating_duration_since(*at));
        (silent > timeout).then(|| {
            let silent = if silent == Duration::MAX { "ever".to_string() } else { format!("{:.1} s", silent.as_secs_f64()) };
            format!("the AI-control lease expired: no request from its client ({}) for {silent}, more than ai_control.lease_timeout_s = {} s; the robot was stopped", owner.describe(), timeout.as_secs_f64())
        })
    }

    /// The lease of each owner with commands: (owner, silent for).
    pub fn leases(&self, now: Instant) -> Vec<(Owner, Option<Duration>)> {
        self.queue
            .owners()
            .into_iter()
            .map(|owner| {
                (owner, self.heard.get(&owner).map(|at| now.saturating_duration_since(*at)))
            })
            .collect()
    }

    /// Drops the waiting commands a stop came after (`generation` is the
    /// current one) and those whose owner's lease has expired, each with
    /// its failed completion. Returns how many were dropped.
    pub fn sweep(&mut self, generation: u64, now: Instant, lease: Duration) -> usize {
        let expired: HashMap<Owner, String> = self
            .queue
            .owners()
            .into_iter()
            .filter_map(|o| self.lease_expired(o, now, lease).map(|why| (o, why)))
            .collect();
        let dropped = self
            .queue
            .drop_waiting(|q| q.generation != generation || expired.contains_key(&q.owner));
        let count = dropped.len();
        for queued in dropped {
            let completion = match expired.get(&queued.owner) {
                Some(why) => Completion::failed(format!("dropped: {why}"), "lease_expired", false),
                None => Completion::failed(STALE, "stopped", false),
            };
            self.complete(queued.seq, &queued.command.command_type, queued.tool(), completion);
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn command(append: bool) -> Command {
        Command {
            command_type: "move".into(),
            append,
            action: Action::Tool { tool: "move".into(), input: Map::new() },
        }
    }

    fn stop(append: bool) -> Command {
        Command {
            command_type: "stop".into(),
            append,
            action: Action::Tool { tool: "stop".into(), input: Map::new() },
        }
    }

    const A: Owner = Credential::Token(1);
    const B: Owner = Credential::Token(2);

    #[test]
    fn a_stop_replaces_everything_even_when_sent_with_append_on_a_full_queue() {
        let mut queue = CommandQueue::new(2);
        queue.enqueue(command(true), A, 0).unwrap();
        let running = queue.start_next().unwrap();
        queue.set_call(running.seq, "ai-control-1".into());
        queue.enqueue(command(true), A, 0).unwrap();
        queue.enqueue(command(true), B, 0).unwrap();
        assert_eq!(queue.enqueue(command(true), A, 0), Err(QueueFull { capacity: 2 }));
        let accepted =
            queue.enqueue(stop(true), B, 0).expect("a stop is never refused for a full queue");
        assert_eq!(
            accepted.dropped.iter().map(|q| q.seq).collect::<Vec<_>>(),
            vec![2, 3],
            "the queued moves go, whoever sent them"
        );
        assert_eq!(
            accepted.cancel_call.as_deref(),
            Some("ai-control-1"),
            "the running move is cancelled, though another client's"
        );
        assert_eq!(queue.finish(1).unwrap().replaced_by, Some(accepted.seq));
        assert_eq!(queue.start_next().unwrap().seq, accepted.seq, "the stop runs next");
    }

    #[test]
    fn append_queues_in_order_until_full_and_never_overwrites() {
        let mut queue = CommandQueue::new(2);
        assert_eq!(queue.enqueue(command(true), A, 0).unwrap().seq, 1);
        assert_eq!(queue.enqueue(command(true), A, 0).unwrap().seq, 2);
        assert_eq!(queue.enqueue(command(true), A, 0), Err(QueueFull { capacity: 2 }));
        assert_eq!(queue.waiting(), 2);
        assert_eq!(queue.start_next().unwrap().seq, 1);
        assert_eq!(queue.start_next(), None, "one at a time");
        assert_eq!(queue.enqueue(command(true), A, 0).unwrap().seq, 3, "room again once one runs");
        assert_eq!(queue.finish(1).unwrap().replaced_by, None);
        assert_eq!(queue.start_next().unwrap().seq, 2);
        assert_eq!(queue.last_seq(), 3);
    }

    #[test]
    fn a_replacing_command_drops_the_waiting_and_cancels_the_running_call() {
        let mut queue = CommandQueue::new(4);
        queue.enqueue(command(false), A, 0).unwrap();
        let running = queue.start_next().unwrap();
        queue.set_call(running.seq, "ai-control-1".into());
        queue.enqueue(command(true), A, 0).unwrap();
        queue.enqueue(command(true), A, 0).unwrap();
        let accepted = queue.enqueue(command(false), A, 0).unwrap();
        assert_eq!(accepted.seq, 4);
        assert_eq!(accepted.dropped.iter().map(|q| q.seq).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(accepted.cancel_call.as_deref(), Some("ai-control-1"));
        assert_eq!(
            queue.finish(1).unwrap().replaced_by,
            Some(4),
            "the running one learns what replaced it"
        );
        assert_eq!(queue.start_next().unwrap().seq, 4);
    }

    #[test]
    fn another_clients_replacing_command_leaves_the_first_clients_commands_alone() {
        let mut queue = CommandQueue::new(4);
        queue.enqueue(command(false), A, 0).unwrap();
        let running = queue.start_next().unwrap().seq;
        queue.set_call(running, "ai-control-1".into());
        queue.enqueue(command(true), A, 0).unwrap();
        assert!(!queue.replaces_running(&command(false), B));
        let accepted = queue.enqueue(command(false), B, 0).unwrap();
        assert_eq!(
            (accepted.dropped.len(), accepted.cancel_call),
            (0, None),
            "A's running and waiting commands are not B's to cancel"
        );
        assert_eq!(queue.running().unwrap().replaced_by, None);
        assert!(queue.replaces_running(&command(false), A));
        let again = queue.enqueue(command(false), A, 0).unwrap();
        assert_eq!(
            (again.dropped.iter().map(|q| q.seq).collect::<Vec<_>>(), again.cancel_call.as_deref()),
            (vec![2], Some("ai-control-1")),
            "A replaces its own, B's stays"
        );
        assert_eq!(queue.owners(), vec![A, B]);
    }

    #[test]
    fn replacing_a_command_not_yet_sent_cancels_no_call() {
        let mut queue = CommandQueue::new(4);
        queue.enqueue(command(false), A, 0).unwrap();
        queue.start_next().unwrap();
        let accepted = queue.enqueue(command(false), A, 0).unwrap();
        assert_eq!(accepted.cancel_call, None);
        assert_eq!(queue.running().unwrap().replaced_by, Some(2));
        assert_eq!(queue.finish(7), None, "finishing another seq changes nothing");
        assert!(queue.running().is_some());
    }

    #[test]
    fn commands_accepted_before_a_stop_are_dropped_and_those_after_it_run() {
        let mut state = DialectState::new(8, 32);
        let t0 = Instant::now();
        state.heard(A, t0);
        for _ in 0..3 {
            state.queue.enqueue(command(true), A, 5).unwrap();
        }
        assert_eq!(state.sweep(5, t0, Duration::from_secs(2)), 0, "no stop since");
        let after = state.queue.enqueue(command(true), A, 6).unwrap().seq;
        assert_eq!(
            state.sweep(6, t0, Duration::from_secs(2)),
            3,
            "a stop came (generation 6): the three before it go"
        );
        assert_eq!(
            state.queue.start_next().unwrap().seq,
            after,
            "the one accepted after the stop runs"
        );
        let events = state.history.after(0, 10, usize::MAX);
        let dropped = &events["events"][0]["event"];
        assert_eq!(
            (dropped["success"].clone(), dropped["error"]["code"].clone()),
            (json!(false), json!("stopped"))
        );
        assert!(dropped["message"].as_str().unwrap().contains("a stop"), "{dropped}");
    }

    #[test]
    fn the_dialects_own_stop_restamps_what_came_after_it() {
        let mut queue = CommandQueue::new(8);
        let stop_seq = queue.enqueue(stop(false), A, 3).unwrap().seq;
        let later = queue.enqueue(command(true), A, 3).unwrap().seq;
        queue.start_next().unwrap();
        queue.restamp_after(stop_seq, 3, 4);
        assert_eq!(
            queue.drop_waiting(|q| q.generation != 4).len(),
            0,
            "command {later} came after the stop: it is of the new generation"
        );
    }

    #[test]
    fn a_silent_owners_lease_expires_and_drops_its_commands_only() {
        let mut state = DialectState::new(8, 32);
        let t0 = Instant::now();
        let lease = Duration::from_secs(2);
        state.heard(A, t0);
        state.heard(B, t0);
        state.queue.enqueue(command(true), A, 0).unwrap();
        state.queue.enqueue(command(true), B, 0).unwrap();
        assert_eq!(
            state.lease_expired(A, t0 + lease, lease),
            None,
            "exactly the timeout is not yet past it"
        );
        state.heard(B, t0 + Duration::from_secs(2));
        let why = state.lease_expired(A, t0 + Duration::from_millis(2100), lease).unwrap();
        assert!(
            why.contains("lease expired") && why.contains("token #1") && why.contains("2.1 s"),
            "{why}"
        );
        assert_eq!(
            state.sweep(0, t0 + Duration::from_millis(2100), lease),
            1,
            "A's command goes, B's stays"
        );
        assert_eq!(state.queue.owners(), vec![B]);
        let dropped = &state.history.after(0, 10, usize::MAX)["events"][0]["event"];
        assert_eq!(dropped["error"]["code"], "lease_expired", "{dropped}");
        assert!(
            state
                .lease_expired(Credential::Unauthenticated, t0, lease)
                .unwrap()
                .contains("for ever"),
            "never heard from"
        );
    }

    #[test]
    fn history_is_bounded_ascending_and_clamped_by_cursor_limit_and_bytes() {
        let mut history = EventHistory::new(3);
        for n in 0..5 {
            history.push(json!({ "type": "t", "n": n }));
        }
        assert_eq!((history.len(), history.latest_seq()), (3, 5));
        let page = history.after(0, 500, usize::MAX);
        let seqs: Vec<u64> =
            page["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, vec![3, 4, 5], "the oldest went first");
        assert_eq!(page["latestSeq"], 5);
        assert_eq!(history.after(3, 1, usize::MAX)["events"][0]["seq"], 4);
        assert_eq!(history.after(5, 10, usize::MAX)["events"], json!([]));
        let one = history.after(0, 500, 10);
        assert_eq!(one["events"].as_array().unwrap().len(), 1, "a tiny budget still returns one");
    }

    #[test]
    fn a_page_entry_is_measured_as_it_is_sent() {
        for (seq, event) in [
            (1, json!({})),
            (42, json!({ "type": "t", "n": [1, 2.5, "é"] })),
            (123_456, json!({ "message": "a \"quoted\" line\n" })),
        ] {
            let (event, json_bytes) = bounded(event);
            let sent = json!({ "seq": seq, "event": event }).to_string().len() + 1;
            assert_eq!(entry_bytes(seq, &Retained { event, json_bytes }), sent);
        }
    }

    #[test]
    fn a_huge_event_is_retained_with_its_output_summarised() {
        let mut history = EventHistory::new(2);
        let big = "x".repeat(MAX_EVENT_BYTES * 2);
        history.push(
            json!({ "type": "command_completed", "success": true, "output": { "blob": big } }),
        );
        let kept = &history.after(0, 1, usize::MAX)["events"][0]["event"];
        assert!(kept.to_string().len() <= MAX_EVENT_BYTES);
        assert_eq!(kept["success"], true);
        assert!(kept["output"]["omitted"].as_str().unwrap().contains("bytes"));
    }

    #[test]
    fn completion_events_carry_output_or_error_and_failures_are_the_last_error() {
        let mut state = DialectState::new(2, 8);
        state.complete(
            1,
            "move",
            Some("move"),
            Completion {
                success: true,
                message: "completed".into(),
                output: Some(json!({"ok": 1})),
                error: None,
                tick: Some(4),
            },
        );
        assert_eq!(state.last_error, "");
        state.complete(
            2,
            "jump",
            None,
            Completion::failed("unknown action 'jump'", "unknown_action", false),
        );
        state.complete(
            3,
            "move",
            Some("move"),
            Completion::failed("the bridge session is not open", "tool_unavailable", true),
        );
        let events = state.history.after(0, 10, usize::MAX);
        assert_eq!(
            events["events"][0]["event"],
            json!({"type": "command_completed", "commandSeq": 1, "commandType": "move", "tool": "move", "success": true, "message": "completed", "tick": 4, "output": {"ok": 1}})
        );
        let failed = &events["events"][1]["event"];
        assert_eq!(
            (failed["success"].clone(), failed["error"]["code"].clone(), failed["tool"].clone()),
            (json!(false), json!("unknown_action"), Value::Null)
        );
        assert!(failed.get("output").is_none());
        assert_eq!(failed["error"]["retryable"], false);
        assert_eq!(
            events["events"][2]["event"]["error"]["retryable"], true,
            "a transient failure says so"
        );
        assert!(state.last_error.contains("command 3 (move)"));
    }

    #[test]
    fn the_observation_sequence_moves_only_when_content_changes() {
        let mut tracker = ObservationTracker::default();
        assert_eq!(tracker.seq(), 0);
        let a = json!({ "tick": 1, "robot": { "position_m": { "x": 0.0 }, "odom_age_ms": 3.0, "stamp_s": 1.0 } });
        assert_eq!(tracker.update(&a), 1);
        let same = json!({ "tick": 9, "robot": { "position_m": { "x": 0.0 }, "odom_age_ms": 7.5, "stamp_s": 2.0 } });
        assert_eq!(tracker.update(&same), 1, "only the tick and ages changed");
        let moved =
            json!({ "tick": 9, "robot": { "position_m": { "x": 0.1 }, "odom_age_ms": 7.5 } });
        assert_eq!(tracker.update(&moved), 2);
    }
}

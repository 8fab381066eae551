//! The protocol core fed arbitrary lines on three connections, with timers
//! and tool outcomes between them: no input makes it panic, and every
//! message it sends is a JSON object in the AICC envelope.
#![no_main]
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use aicc_bridge::protocol_core::{Scope, Tokens};
use aicc_bridge::protocol_core::Catalog;
use aicc_bridge::protocol_core::{ApprovalRules, Core, CoreConfig, Output, TickMode, ToolSuccess};
use aicc_bridge::protocol_core::SequentialIds;
use libfuzzer_sys::fuzz_target;

fn catalog() -> Arc<Catalog> {
    static CATALOG: OnceLock<Arc<Catalog>> = OnceLock::new();
    CATALOG
        .get_or_init(|| {
            let config = aicc_bridge::Config::default();
            Arc::new(
                aicc_bridge::protocol_core::Registry::new(&config).catalog().expect("the bundled catalog"),
            )
        })
        .clone()
}

fn config() -> CoreConfig {
    let mut tokens = Tokens::default();
    tokens.add("observe-token", Scope::Observe).unwrap();
    tokens.add("drive-token", Scope::Actuate).unwrap();
    CoreConfig {
        tick_rate_hz: 10.0,
        tick_mode: TickMode::Hybrid,
        world_name: "fuzz".into(),
        max_calls_in_flight: 4,
        event_ring_capacity: 8,
        resume_window: Duration::from_secs(5),
        max_detached_sessions: 4,
        heartbeat_interval: Duration::from_secs(1),
        dead_peer_intervals: 3,
        lease_timeout: Duration::from_secs(2),
        tokens,
        unauthenticated_scope: Scope::Admin,
        agents_may_modify_world: true,
        max_undecodable_lines: 8,
        max_auth_failures: 3,
        handshake_timeout: Duration::from_secs(2),
        limits: serde_json::json!({}),
        // Some calls wait for approval, so that approve, deny, cancel and
        // the timeout are reached too.
        approvals: ApprovalRules {
            tools: vec!["say".into()],
            move_longer_than_m: Some(1.0),
            approval_mode: false,
            timeout: Duration::from_secs(2),
        },
    }
}

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let mut core = Core::with_ids(config(), catalog(), t0, SequentialIds::new("fuzz"));
    let mut now = t0;
    let mut running: Vec<(String, String)> = Vec::new();
    let check = |outputs: Vec<Output>, running: &mut Vec<(String, String)>| {
        for output in outputs {
            match output {
                Output::Send { message, .. } => {
                    assert!(message.is_object(), "{message}");
                    assert_eq!(message["protocol"], "aicc/0.1", "{message}");
                }
                Output::Execute { session, call_id, .. } => running.push((session, call_id)),
                _ => {}
            }
        }
    };
    for conn in 1..=3 {
        check(core.on_connect(conn, now), &mut running);
    }
    // Each line starts with a control byte: which connection, how much time
    // passes, and whether a running call finishes first.
    for line in data.split(|&b| b == b'\n') {
        let Some((&control, line)) = line.split_first() else { continue };
        let conn = u64::from(control % 3) + 1;
        now += Duration::from_millis(u64::from(control >> 2) * 40);
        if control & 0x80 != 0 {
            check(core.on_timer(now), &mut running);
        }
        if control & 0x40 != 0 {
            if let Some((session, call_id)) = running.pop() {
                let outcome = Ok(ToolSuccess {
                    output: serde_json::json!({ "done": true }),
                    source: "fuzz".into(),
                });
                check(core.on_tool_finished(&session, &call_id, outcome, now), &mut running);
            }
        }
        if control & 0x20 != 0 && control & 0x10 != 0 {
            check(core.on_disconnect(conn, now), &mut running);
            check(core.on_connect(conn, now), &mut running);
            continue;
        }
        check(core.on_line(conn, line, now), &mut running);
    }
    check(core.on_timer(now + Duration::from_secs(10)), &mut running);
});

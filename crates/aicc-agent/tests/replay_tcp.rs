//! Replay end to end, no ROS: a session on the in-process bridge (its
//! moving test robot: odometry, a camera) recorded, then `aicc replay
//! --check` re-runs its calls against the recording and finds no
//! difference; a recording with one result's field rewritten is reported
//! by call and field; `--against` the live bridge compares with time
//! ignored; truncated, corrupt and newer-format files are refused with
//! the offset or the version.
mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aicc_testkit::AiccClient;
use serde_json::{json, Value};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("aicc-replay-tcp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn aicc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aicc")).args(args).output().expect("running aicc")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Records a session (proprioception, vision, a short move, stop) and
/// returns the finished file.
fn record_session(dir: &Path) -> PathBuf {
    let mut config = support::config(2.0);
    config.record.mode = aicc_bridge::RecordMode::Always;
    config.record.dir = dir.display().to_string();
    let bridge = support::start(config);
    let (mut client, _) = AiccClient::connect(bridge.port);
    let pose = client.call_when_ready(
        "p1",
        "proprioception",
        json!({}),
        std::time::Duration::from_secs(5),
    );
    assert_eq!(pose["ok"], true, "{pose}");
    let seen = client.call_when_ready("v1", "vision", json!({}), std::time::Duration::from_secs(5));
    assert_eq!(seen["ok"], true, "{seen}");
    let moved = client.call("m1", "move", json!({ "forward": 0.05 }));
    assert_eq!(moved["ok"], true, "{moved}");
    let pose = client.call("p2", "proprioception", json!({}));
    assert_eq!(pose["ok"], true, "{pose}");
    let halted = client.call("s1", "stop", json!({ "reason": "replay test" }));
    assert_eq!(halted["ok"], true, "{halted}");
    client.send_line(
        &json!({ "protocol": "aicc/0.1", "type": "session_close", "message_id": "bye" })
            .to_string(),
    );
    let _ = client.read_until("session_close");
    drop(client);
    drop(bridge); // the file finished: summary and footer
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "mcap"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

/// The recording rewritten message by message (as a tool that edits a
/// file would), `edit` applied to each JSON message, `version` in its metadata.
fn rewrite(bytes: &[u8], version: &str, edit: impl Fn(&str, &mut Value)) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut writer =
        mcap::WriteOptions::new().profile("aicc").compression(None).create(&mut out).unwrap();
    writer
        .write_metadata(&mcap::records::Metadata {
            name: "aicc_recording".into(),
            metadata: BTreeMap::from([("format_version".to_string(), version.to_string())]),
        })
        .unwrap();
    let mut channels: HashMap<String, u16> = HashMap::new();
    for message in mcap::MessageStream::new(bytes).unwrap() {
        let message = message.unwrap();
        let topic = message.channel.topic.clone();
        let id = match channels.get(&topic) {
            Some(id) => *id,
            None => {
                let schema =
                    writer.add_schema("aicc.Any", "jsonschema", br#"{"type":"object"}"#).unwrap();
                let id = writer.add_channel(schema, &topic, "json", &BTreeMap::new()).unwrap();
                channels.insert(topic.clone(), id);
                id
            }
        };
        let mut data: Value = serde_json::from_slice(&message.data).unwrap();
        edit(&topic, &mut data);
        let header = mcap::records::MessageHeader {
            channel_id: id,
            sequence: message.sequence,
            log_time: message.log_time,
            publish_time: message.publish_time,
        };
        writer.write_to_known_channel(&header, &serde_json::to_vec(&data).unwrap()).unwrap();
    }
    writer.finish().unwrap();
    drop(writer);
    out.into_inner()
}

#[test]
fn a_recorded_session_replays_without_difference_and_a_tampered_one_is_reported() {
    let dir = temp_dir("session");
    let file = record_session(&dir);
    let path = file.to_str().unwrap();

    let check = aicc(&["replay", path, "--check"]);
    assert!(check.status.success(), "{}", text(&check));
    assert!(
        text(&check).contains("replay: 5 call(s) compared, 0 with differences"),
        "{}",
        text(&check)
    );

    // One field of the second proprioception result changed.
    let original = std::fs::read(&file).unwrap();
    let tampered = rewrite(&original, "1", |topic, data| {
        if topic == "/aicc/out"
            && data["message"]["type"] == "tool_result"
            && data["message"]["call_id"] == "p2"
        {
            data["message"]["output"]["position_m"]["x"] = json!(42.5);
        }
    });
    let tampered_file = dir.join("tampered.mcap");
    std::fs::write(&tampered_file, &tampered).unwrap();
    // --check serves a file against its own results, so a rewritten file
    // still checks clean; a change shows when the original's calls run
    // against a replay of the rewritten one (as against any bridge).
    let check = aicc(&["replay", tampered_file.to_str().unwrap(), "--check"]);
    assert!(check.status.success(), "{}", text(&check));
    let served =
        aicc_wire::recording::load(&tampered_file).expect("the tampered file is still a recording");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        aicc_wire::recording::serve::serve(
            listener,
            std::sync::Arc::new(std::sync::Mutex::new(served)),
            Default::default(),
        )
        .await;
    });
    let against = aicc(&["replay", path, "--against", &format!("127.0.0.1:{port}")]);
    assert_eq!(against.status.code(), Some(5), "{}", text(&against));
    let report = text(&against);
    assert!(report.contains("1 with differences"), "{report}");
    let line = report
        .lines()
        .find(|l| l.starts_with("call p2 "))
        .unwrap_or_else(|| panic!("the report names the call: {report}"));
    assert!(
        line.contains("(proprioception, recorded at byte ")
            && line.contains("output.position_m.x: recorded ")
            && line.ends_with("replayed 42.5"),
        "{line}"
    );
    drop(runtime);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn truncated_corrupt_and_newer_recordings_are_refused_by_offset_or_version() {
    let dir = temp_dir("refused");
    let file = record_session(&dir);
    let bytes = std::fs::read(&file).unwrap();

    let truncated = dir.join("truncated.mcap");
    std::fs::write(&truncated, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let out = aicc(&["replay", truncated.to_str().unwrap(), "--check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{}: at byte ", truncated.display()))
            && text(&out).contains("the file is truncated"),
        "{}",
        text(&out)
    );

    // One byte of a recorded result changed in place: its chunk's CRC fails.
    let corrupt = dir.join("corrupt.mcap");
    let at = bytes.windows(8).position(|w| w == b"\"ok\":tru").expect("a result in the file") + 6;
    let mut bad = bytes.clone();
    bad[at] = b'T';
    std::fs::write(&corrupt, &bad).unwrap();
    let out = aicc(&["replay", corrupt.to_str().unwrap(), "--check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("at byte ")
            && text(&out).contains("the file is corrupt")
            && text(&out).contains("CRC"),
        "{}",
        text(&out)
    );

    let newer = dir.join("newer.mcap");
    std::fs::write(&newer, rewrite(&bytes, "2", |_, _| {})).unwrap();
    let out = aicc(&["replay", newer.to_str().unwrap(), "--check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("format_version 2 is newer than this reader's 1"),
        "{}",
        text(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A session of the operator's (its token) that switched approval mode on.
fn record_operator_session(dir: &Path, token: &'static str) -> PathBuf {
    let mut config = support::config(2.0);
    config.record.mode = aicc_bridge::RecordMode::Always;
    config.record.dir = dir.display().to_string();
    let bridge = support::start_with_tokens(config, &[("AICC_OPERATOR_TOKEN", token)]);
    let mut client = AiccClient::connect_raw(bridge.port);
    client.send_line(&json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": "open", "auth": { "token": token } }).to_string());
    client.read_until("session_init");
    assert_eq!(client.call("on", "approval_mode", json!({ "on": true }))["ok"], true);
    assert_eq!(client.call("st", "bridge_status", json!({}))["ok"], true);
    drop(client);
    drop(bridge);
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "mcap"))
        .expect("a recording")
}

#[test]
fn a_replay_against_a_live_bridge_skips_the_operators_calls_unless_asked() {
    const OPERATOR: &str = "replay-operator-token-3e8b";
    let dir = temp_dir("operator");
    let file = record_operator_session(&dir, OPERATOR);
    let live =
        support::start_with_tokens(support::config(2.0), &[("AICC_OPERATOR_TOKEN", OPERATOR)]);
    let approval_mode = || {
        let mut client = AiccClient::connect_raw(live.port);
        client.send_line(&json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": "open", "auth": { "token": OPERATOR } }).to_string());
        client.read_until("session_init");
        client.call("l", "approvals_list", json!({}))["output"]["approval_mode"].as_bool().unwrap()
    };
    let replay = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_aicc"))
            .args([
                "--token-env",
                "REPLAY_TEST_TOKEN",
                "replay",
                file.to_str().unwrap(),
                "--against",
                &format!("127.0.0.1:{}", live.port),
            ])
            .args(extra)
            .env("REPLAY_TEST_TOKEN", OPERATOR)
            .output()
            .unwrap()
    };
    let skipped = replay(&[]);
    let report = text(&skipped);
    assert!(
        report.contains("call on (approval_mode, recorded at byte")
            && report.contains("an operator's call, not re-sent"),
        "{report}"
    );
    assert!(!approval_mode(), "the recorded approval_mode call was not re-sent");
    let included = replay(&["--include-operator-calls"]);
    assert!(!text(&included).contains("not re-sent"), "{}", text(&included));
    assert!(approval_mode(), "asked for: re-sent");
    let _ = std::fs::remove_dir_all(&dir);
}

//! The flight recorder beside the simulated robot (docs/recording.md): a
//! session of moves, vision, depth and an emergency stop recorded by the
//! real node (`--record DIR`), read back with a reader the project did not
//! write (the MCAP Python library with mcap-ros2-support, installed by
//! scripts/setup-mcp.sh in .deps/mcap-venv). The sensor samples the tools
//! read are on their ROS topics as CDR with ros2msg schemas, and the camera
//! Image decoded from the file is, pixel for pixel, the frame the vision
//! tool served. The bridge's events reach ROS on /aicc/events.
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};
use support::{repo_root, start_bridge, start_sim, AiccClient, StringRecorder};

fn decode_b64(value: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str().expect("a base64 string"))
        .expect("valid base64")
}

fn call_ok(client: &mut AiccClient, id: &str, tool: &str, input: Value) -> Value {
    let result = client.call(id, tool, input);
    assert_eq!(result["ok"], true, "{tool}: {result}");
    result
}

/// The file read with the MCAP Python library (tests/py/read_recording.py).
fn read_with_python(file: &Path) -> Value {
    let python = repo_root().join(".deps/mcap-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup-mcp.sh (it installs the MCAP readers)",
        python.display()
    );
    let output = std::process::Command::new(&python)
        .arg(repo_root().join("tests/py/read_recording.py"))
        .arg(file)
        .output()
        .expect("running the MCAP reader");
    assert!(
        output.status.success(),
        "the MCAP reader failed on {}: {}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the reader prints JSON")
}

fn recordings(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "mcap"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn a_recorded_session_holds_the_sensor_samples_the_tools_read_as_ros_messages_and_events_reach_ros()
{
    let dir = std::env::temp_dir().join(format!("aicc-recording-sim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _sim = start_sim(&[]);
    let events = StringRecorder::subscribe("/aicc/events");
    let (mut bridge, port) = start_bridge(&["--record", dir.to_str().unwrap()]);
    let (mut client, _) = AiccClient::connect(port);

    let first = client.call_when_ready(
        "warm",
        "vision",
        json!({ "format": "png" }),
        Duration::from_secs(60),
    );
    assert_eq!(first["ok"], true, "{first}");
    // /aicc/events is volatile: what the bridge published before this
    // test's subscription matched its publisher never arrives. Calls until
    // one of them is seen there.
    let matched = (0..100).any(|attempt| {
        let id = format!("sync{attempt}");
        let _ = call_ok(&mut client, &id, "proprioception", json!({}));
        let deadline = Instant::now() + Duration::from_millis(200);
        while Instant::now() < deadline {
            if events.messages.lock().unwrap().iter().any(|(_, text)| {
                serde_json::from_str::<Value>(text)
                    .is_ok_and(|l| l["kind"] == "tool_result" && l["call_id"] == id.as_str())
            }) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    });
    assert!(matched, "no tool result of this session reached /aicc/events in 100 calls");
    let vision = call_ok(&mut client, "v1", "vision", json!({ "format": "png" }));
    // The same sample read again: recorded once.
    let _ = call_ok(&mut client, "p1", "proprioception", json!({}));
    let _ = call_ok(&mut client, "p2", "proprioception", json!({}));
    let depth = call_ok(&mut client, "d1", "depth", json!({ "include_image": false }));
    let moved = call_ok(&mut client, "m1", "move", json!({ "forward": 0.2 }));
    let stop = call_ok(&mut client, "s1", "stop", json!({ "reason": "recording test" }));
    let _ = call_ok(&mut client, "p3", "proprioception", json!({}));
    println!(
        "vision {}x{} stamp {}, depth {}, move {}, stop {}",
        vision["output"]["width"],
        vision["output"]["height"],
        vision["output"]["stamp_s"],
        depth["output"]["width"],
        moved["output"],
        stop["output"]
    );
    client.send_line(
        &json!({ "protocol": "aicc/0.1", "type": "session_close", "message_id": "bye" })
            .to_string(),
    );

    // /aicc/events on ROS: the stop's call, its result and the governor's event.
    let deadline = Instant::now() + Duration::from_secs(20);
    let lines = loop {
        let lines: Vec<Value> = events
            .messages
            .lock()
            .unwrap()
            .iter()
            .map(|(_, text)| {
                serde_json::from_str(text)
                    .unwrap_or_else(|e| panic!("/aicc/events carries JSON ({e}): {text}"))
            })
            .collect();
        let has = |kind: &str, key: &str, value: &str| {
            lines.iter().any(|l| l["kind"] == kind && l[key] == value)
        };
        if (has("tool_call", "call_id", "s1")
            && has("tool_result", "call_id", "v1")
            && has("event", "topic", "governor"))
            || Instant::now() > deadline
        {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let find = |kind: &str, key: &str, value: &str| {
        lines
            .iter()
            .find(|l| l["kind"] == kind && l[key] == value)
            .unwrap_or_else(|| {
                panic!(
                    "no {kind} with {key} {value} on /aicc/events in {} lines: {lines:?}",
                    lines.len()
                )
            })
            .clone()
    };
    let call = find("tool_call", "call_id", "s1");
    assert_eq!(
        (&call["tool"], &call["input"]["reason"]),
        (&json!("stop"), &json!("recording test")),
        "{call}"
    );
    let result = find("tool_result", "call_id", "v1");
    assert_eq!(
        (&result["tool"], &result["ok"], &result["output"]["width"]),
        (&json!("vision"), &json!(true), &vision["output"]["width"]),
        "{result}"
    );
    let png_left_out = result["output"]["png_b64"].as_str().unwrap_or("");
    assert!(
        png_left_out.ends_with("bytes left out>"),
        "the image is not on /aicc/events: {png_left_out:.80}"
    );
    let governor = find("event", "topic", "governor");
    println!("/aicc/events: {} lines; governor: {governor}", lines.len());

    // The recording: finished on SIGTERM.
    let status = bridge.terminate().expect("the bridge exited");
    assert!(status.success(), "the bridge exited with {status}");
    let files = recordings(&dir);
    assert_eq!(files.len(), 1, "one recording file: {files:?}");
    let bytes = std::fs::metadata(&files[0]).unwrap().len();
    let read = read_with_python(&files[0]);
    let channels = read["channels"].as_object().expect("channels");
    for (topic, channel) in channels {
        println!(
            "{topic}: {} x {} ({} / {})",
            channel["count"],
            channel["schema"],
            channel["message_encoding"],
            channel["schema_encoding"]
        );
    }
    println!("{}: {bytes} bytes", files[0].display());
    let channel = |topic: &str| {
        channels.get(topic).unwrap_or_else(|| {
            panic!("no channel {topic} in {:?}", channels.keys().collect::<Vec<_>>())
        })
    };
    // The sensor samples the tools read, as ROS messages on their topics.
    for (topic, schema) in [
        ("/camera/image_raw", "sensor_msgs/msg/Image"),
        ("/odom", "nav_msgs/msg/Odometry"),
        ("/camera/depth/image_raw", "sensor_msgs/msg/Image"),
        ("/camera/depth/camera_info", "sensor_msgs/msg/CameraInfo"),
    ] {
        let c = channel(topic);
        assert_eq!(
            (c["schema"].as_str(), c["schema_encoding"].as_str(), c["message_encoding"].as_str()),
            (Some(schema), Some("ros2msg"), Some("cdr")),
            "{topic}: {c}"
        );
        assert_eq!(read["decoded"][topic], c["count"], "every {topic} message decodes");
    }
    // Samples are written when a tool reads them (each once: the recorder's unit tests), not at the sensors' rates.
    let odom = channel("/odom")["count"].as_u64().unwrap();
    let camera = channel("/camera/image_raw")["count"].as_u64().unwrap();
    assert!(odom >= 1 && camera >= 1, "/odom {odom}, /camera/image_raw {camera}");
    // The AICC channels are there too, with the stop.
    assert!(channel("/aicc/in")["count"].as_u64().unwrap() >= 8);
    assert!(channel("/aicc/governor")["count"].as_u64().unwrap() >= 1);
    let stops = read["json"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["topic"] == "/aicc/in" && m["data"]["message"]["tool"] == "stop")
        .count();
    assert_eq!(stops, 1);

    // The frame vision served is the Image decoded from the file.
    let output = &vision["output"];
    let stamp_s = output["stamp_s"].as_f64().expect("the frame's stamp");
    let images = read["images"].as_array().unwrap();
    let image = images
        .iter()
        .find(|i| {
            i["topic"] == "/camera/image_raw"
                && (i["stamp_s"].as_f64().unwrap() - stamp_s).abs() < 1e-6
        })
        .unwrap_or_else(|| {
            panic!(
                "no recorded camera Image stamped {stamp_s}: {:?}",
                images.iter().map(|i| (&i["topic"], &i["stamp_s"])).collect::<Vec<_>>()
            )
        });
    let served = image::load_from_memory_with_format(
        &decode_b64(&output["png_b64"]),
        image::ImageFormat::Png,
    )
    .expect("a PNG")
    .into_rgb8();
    let (width, height) = served.dimensions();
    assert_eq!(
        (image["width"].as_u64(), image["height"].as_u64()),
        (Some(u64::from(width)), Some(u64::from(height)))
    );
    assert_eq!(image["frame_id"], output["frame_id"]);
    let data = decode_b64(&image["data_b64"]);
    let step = image["step"].as_u64().unwrap() as usize;
    let encoding = image["encoding"].as_str().unwrap();
    let order: [usize; 3] = match encoding {
        "rgb8" => [0, 1, 2],
        "bgr8" => [2, 1, 0],
        other => panic!("the simulator's camera encoding {other} is not compared here"),
    };
    let mut differing = 0;
    for y in 0..height {
        for x in 0..width {
            let at = y as usize * step + x as usize * 3;
            let recorded = [data[at + order[0]], data[at + order[1]], data[at + order[2]]];
            if recorded != served.get_pixel(x, y).0 {
                differing += 1;
            }
        }
    }
    assert_eq!(
        differing,
        0,
        "{differing} of {} pixels differ between the served PNG and the recorded Image",
        width * height
    );
    println!("camera Image from the file ({width}x{height} {encoding}, stamp {stamp_s}) equals the PNG vision served");
    // The first frame served too: recording from the start, the bridge keeps
    // the wire form of messages that came before its recorder existed.
    let first_stamp_s = first["output"]["stamp_s"].as_f64().expect("the first frame's stamp");
    assert!(
        images.iter().any(|i| i["topic"] == "/camera/image_raw"
            && (i["stamp_s"].as_f64().unwrap() - first_stamp_s).abs() < 1e-6),
        "the first frame vision served (stamp {first_stamp_s}) is in the recording"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Deliveries of `sensor` so far, as `bridge_status` reports them (the
/// statistics of the robot's store: no sample read, none recorded).
fn delivered(client: &mut AiccClient, sensor: &str) -> u64 {
    let status = call_ok(client, "status", "bridge_status", json!({}));
    status["output"]["sensors"]
        .as_array()
        .and_then(|sensors| sensors.iter().find(|s| s["sensor"] == sensor))
        .and_then(|s| s["received"].as_u64())
        .unwrap_or(0)
}

/// Waits up to `patience` for a recording in `dir`.
fn wait_for_recording(dir: &Path, patience: Duration) -> Vec<PathBuf> {
    let deadline = Instant::now() + patience;
    loop {
        let files = recordings(dir);
        if !files.is_empty() || Instant::now() > deadline {
            return files;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn odometry_is_recorded_at_its_rate_without_a_tool_and_a_fault_file_holds_the_samples_the_agent_saw(
) {
    let dir = std::env::temp_dir().join(format!("aicc-recording-rates-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (always, on_fault) = (dir.join("always"), dir.join("on_fault"));
    let _sim = start_sim(&[]);

    // A recording with odometry at 5 Hz (the simulator publishes 50 Hz) and no tool reading it.
    let (mut bridge, port) = start_bridge(&[
        "--record",
        always.to_str().unwrap(),
        "--ros-args",
        "-p",
        "record.sample_rates_hz.odom:=5.0",
    ]);
    let (mut client, _) = AiccClient::connect(port);
    let deadline = Instant::now() + Duration::from_secs(60);
    while delivered(&mut client, "odom") == 0 {
        assert!(Instant::now() < deadline, "no odometry from the simulator within 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(2500));
    let status = bridge.terminate().expect("the bridge exited");
    assert!(status.success(), "the bridge exited with {status}");
    let files = recordings(&always);
    assert_eq!(files.len(), 1, "one recording file: {files:?}");
    let read = read_with_python(&files[0]);
    let channels = read["channels"].as_object().expect("channels");
    let odom = channels
        .get("/odom")
        .unwrap_or_else(|| panic!("no /odom in {:?}", channels.keys().collect::<Vec<_>>()));
    assert_eq!(
        (odom["schema"].as_str(), odom["message_encoding"].as_str()),
        (Some("nav_msgs/msg/Odometry"), Some("cdr")),
        "{odom}"
    );
    let times: Vec<u64> = read["log_times"]["/odom"]
        .as_array()
        .expect("decoded /odom messages")
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect();
    assert_eq!(times.len() as u64, odom["count"].as_u64().unwrap(), "every /odom message decodes");
    let span_s = (times.iter().max().unwrap() - times.iter().min().unwrap()) as f64 * 1e-9;
    let expected = 5.0 * span_s;
    println!(
        "/odom at 5 Hz, no tool reading it: {} samples over {span_s:.2} s ({} bytes)",
        times.len(),
        std::fs::metadata(&files[0]).unwrap().len()
    );
    assert!(span_s >= 1.5, "the odometry of at least 1.5 s: {span_s:.2} s");
    // At most the rate (one per period, the first at once); at least most
    // periods (slack for a simulator running slow on a loaded machine).
    assert!(
        (times.len() as f64) <= expected + 2.0 && (times.len() as f64) >= 0.6 * expected,
        "{} samples over {span_s:.2} s at 5 Hz",
        times.len()
    );
    let mut distinct = times.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), times.len(), "each sample once: {times:?}");
    assert!(!channels.contains_key("/camera/image_raw"), "no rate, no tool: no camera frame");

    // on_fault: what the agent read (a frame, odometry) and the odometry
    // at its rate, in the file a `stop` writes.
    let args = [
        "--ros-args",
        "-p",
        "record.mode:=on_fault",
        "-p",
        &format!("record.dir:={}", on_fault.display()),
        "-p",
        "record.sample_rates_hz.odom:=5.0",
    ];
    let (mut bridge, port) = start_bridge(&args);
    let (mut client, _) = AiccClient::connect(port);
    let vision = client.call_when_ready(
        "warm",
        "vision",
        json!({ "format": "png" }),
        Duration::from_secs(60),
    );
    assert_eq!(vision["ok"], true, "{vision}");
    let _ = call_ok(&mut client, "p1", "proprioception", json!({}));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(recordings(&on_fault).is_empty(), "nothing written before a fault");
    let _ = call_ok(&mut client, "s1", "stop", json!({ "reason": "recording test" }));
    let files = wait_for_recording(&on_fault, Duration::from_secs(10));
    let status = bridge.terminate().expect("the bridge exited");
    assert!(status.success(), "the bridge exited with {status}");
    assert_eq!(files.len(), 1, "one flight recording: {files:?}");
    let read = read_with_python(&files[0]);
    let channels = read["channels"].as_object().expect("channels");
    for (topic, count) in channels.iter().map(|(topic, c)| (topic, &c["count"])) {
        println!("on_fault {topic}: {count}");
    }
    println!("{}: {} bytes", files[0].display(), std::fs::metadata(&files[0]).unwrap().len());
    let channel = |topic: &str| {
        channels.get(topic).unwrap_or_else(|| {
            panic!("no channel {topic} in {:?}", channels.keys().collect::<Vec<_>>())
        })
    };
    for (topic, schema) in [
        ("/camera/image_raw", "sensor_msgs/msg/Image"),
        ("/odom", "nav_msgs/msg/Odometry"),
        ("/imu", "sensor_msgs/msg/Imu"),
    ] {
        let c = channel(topic);
        assert_eq!(
            (c["schema"].as_str(), c["schema_encoding"].as_str(), c["message_encoding"].as_str()),
            (Some(schema), Some("ros2msg"), Some("cdr")),
            "{topic}: {c}"
        );
        assert_eq!(read["decoded"][topic], c["count"], "every {topic} message decodes");
    }
    // 1.5 s at 5 Hz besides the one proprioception read.
    assert!(channel("/odom")["count"].as_u64().unwrap() >= 5, "{}", channel("/odom"));
    let stamp_s = vision["output"]["stamp_s"].as_f64().expect("the frame's stamp");
    let images = read["images"].as_array().unwrap();
    assert!(
        images.iter().any(|i| i["topic"] == "/camera/image_raw"
            && (i["stamp_s"].as_f64().unwrap() - stamp_s).abs() < 1e-6),
        "the frame vision served (stamp {stamp_s}) is in the fault's file"
    );
    let stops = read["json"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["topic"] == "/aicc/in" && m["data"]["message"]["tool"] == "stop")
        .count();
    assert_eq!(stops, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

//! Perception freshness beside the simulated robot (640x480 camera at
//! 15 Hz, the simulation profile): the bridge receives (nearly) every frame
//! the simulator publishes, and the frame a `vision` call serves is as
//! fresh as the camera allows, its age counted from the capture stamp in
//! the simulator's clock.
mod support;

use std::thread;
use std::time::Duration;

use serde_json::{json, Value};
use support::{start_bridge, start_sim, AiccClient, FrameWatcher, SimClock, WorldTruth};

const CAMERA_PERIOD_S: f64 = 1.0 / 15.0;

/// The bridge's delivery counts of every sensor (from bridge_status).
fn deliveries(client: &mut AiccClient, call_id: &str) -> Vec<Value> {
    let status = client.call(call_id, "bridge_status", json!({}));
    assert_eq!(status["ok"], true, "{status}");
    status["output"]["sensors"]
        .as_array()
        .unwrap_or_else(|| panic!("sensors in the status: {status}"))
        .clone()
}

fn delivery<'a>(sensors: &'a [Value], sensor: &str) -> &'a Value {
    sensors
        .iter()
        .find(|s| s["sensor"] == sensor)
        .unwrap_or_else(|| panic!("{sensor} is reported: {sensors:?}"))
}

/// The simulator's publishing rates (sim/aicc_sim.py, the URDF's sensors), per second of sim time.
const RATES_HZ: [(&str, f64); 5] =
    [("odom", 50.0), ("imu", 100.0), ("joint_states", 50.0), ("bumper", 50.0), ("depth", 15.0)];

#[test]
fn every_published_frame_is_received_and_served_frames_are_as_fresh_as_the_camera_allows() {
    let _sim = start_sim(&["--width", "640", "--height", "480"]);
    let (_bridge, port) = start_bridge(&["--config", "config/sim.yaml"]);
    let world = WorldTruth::subscribe();
    let clock = SimClock::subscribe();
    let reference = FrameWatcher::subscribe("/camera/image_raw", clock.clone());
    let (mut client, _) = AiccClient::connect(port);
    let first = client.call_when_ready(
        "warm",
        "vision",
        json!({ "max_width": 64 }),
        Duration::from_secs(60),
    );
    assert_eq!(first["ok"], true, "{first}");

    // 1. Frames received against frames published, over 10 s.
    let world_before = world.now();
    let published_before =
        world_before["camera_frames_published"].as_u64().expect("the simulator counts its frames");
    let before = deliveries(&mut client, "s0");
    let received_before = delivery(&before, "camera")["distinct_stamps"].as_u64().unwrap();
    let reference_before = reference.count();
    thread::sleep(Duration::from_secs(10));
    let world_after = world.now();
    let published = world_after["camera_frames_published"].as_u64().unwrap() - published_before;
    let after = deliveries(&mut client, "s1");
    let camera = delivery(&after, "camera").clone();
    let received = camera["distinct_stamps"].as_u64().unwrap() - received_before;
    let seen_by_plain_subscriber = reference.count() - reference_before;
    println!("frames over 10 s: published {published}, received by the bridge {received}, by a plain reliable subscriber {seen_by_plain_subscriber}");
    assert!(published > 60, "the simulator published {published} frames in 10 s");
    // The two counts are read 200 ms apart at most (the world truth comes at 5 Hz): allow one frame either way.
    assert!(
        (received + 1) as f64 >= 0.95 * published as f64,
        "the bridge received {received} of {published} frames"
    );
    assert_eq!(
        camera["last_stamp_status"], "valid",
        "the camera's stamps are in the bridge's clock: {camera}"
    );
    assert!(camera["qos_note"].is_null(), "{camera}");
    // Every other sensor at its rate too, counted in sim time.
    let sim_elapsed_s =
        world_after["sim_time"].as_f64().unwrap() - world_before["sim_time"].as_f64().unwrap();
    for (sensor, rate_hz) in RATES_HZ {
        let got = delivery(&after, sensor)["distinct_stamps"].as_u64().unwrap()
            - delivery(&before, sensor)["distinct_stamps"].as_u64().unwrap();
        let expected = sim_elapsed_s * rate_hz;
        println!("{sensor}: {got} distinct messages in {sim_elapsed_s:.2} s of sim time at {rate_hz} Hz ({:.1} %)", 100.0 * got as f64 / expected);
        // The two sim times are read up to 200 ms from the counts (the world truth at 5 Hz).
        assert!(
            got as f64 >= 0.95 * (expected - 0.2 * rate_hz),
            "{sensor}: {got} of about {expected:.0}"
        );
    }

    // 2. The age of served frames, checked against the simulator's clock.
    let plain_delay_s =
        reference.median_delay_s().expect("the plain subscriber measured its receipt delay");
    let mut served_ages_s = Vec::new();
    let mut disagreements_s = Vec::new();
    for n in 0..20 {
        let result = client.call(&format!("v{n}"), "vision", json!({ "max_width": 160 }));
        let clock_at_reply = clock.now_s().expect("the simulator's clock");
        assert_eq!(result["ok"], true, "{result}");
        let output = &result["output"];
        assert_eq!(output["age_from"], "stamp", "{output}");
        let served_age_s = clock_at_reply - output["stamp_s"].as_f64().unwrap();
        let reported_s = output["age_ms"].as_f64().unwrap() / 1e3;
        assert!(output["receipt_age_ms"].as_f64().unwrap() / 1e3 <= reported_s + 1e-9, "{output}");
        disagreements_s.push((reported_s - served_age_s).abs());
        served_ages_s.push(served_age_s);
        thread::sleep(Duration::from_millis(37));
    }
    served_ages_s.sort_by(f64::total_cmp);
    disagreements_s.sort_by(f64::total_cmp);
    // The bridge's own figure agrees with the simulator's clock, to the
    // clock's 10 ms steps and the reply's transit; an age counted from
    // receipt would be off by the whole receipt delay.
    let disagreement_s = disagreements_s[disagreements_s.len() / 2];
    assert!(
        disagreement_s < 0.02,
        "age_ms differs from the sim clock's age by {:.1} ms (p50)",
        disagreement_s * 1e3
    );
    let median_s = served_ages_s[served_ages_s.len() / 2];
    println!(
        "served frame age: p50 {:.1} ms, max {:.1} ms; plain subscriber's receipt delay p50 {:.1} ms; camera period {:.1} ms",
        median_s * 1e3,
        served_ages_s.last().unwrap() * 1e3,
        plain_delay_s * 1e3,
        CAMERA_PERIOD_S * 1e3
    );
    // At most one camera period plus what any subscriber waits for a frame,
    // plus the /clock's 10 ms resolution.
    assert!(
        median_s <= CAMERA_PERIOD_S + plain_delay_s + 0.01,
        "served frames are {:.1} ms old (p50)",
        median_s * 1e3
    );
}

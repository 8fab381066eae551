//! The sensor tools (vision, depth, inspect, touch, proprioception) against
//! the simulated robot, checked against the simulator's ground truth. One
//! test function, so that one simulator runs.
mod support;

use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};
use support::{start_bridge, start_sim, AiccClient, GroundTruth, WorldTruth};

/// The head starts tilted down so that the optical axis meets the red box's
/// near face (x = 1.4 m) about 0.1 m above the floor: the tilt pivot is at
/// x = -0.10 m, z = 0.628 m, so tan(tilt) = (0.628 - 0.1) / 1.5.
const HEAD_TILT_RAD: f64 = 0.339;

fn decode_b64(value: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str().expect("a base64 string"))
        .expect("valid base64")
}

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("not a number: {value}"))
}

/// Calls a tool, checks it succeeded, and returns its output and the
/// bridge's own latency (`meta.latency_ms`: the round trip seen by this
/// client adds ~40 ms of Nagle/delayed-ACK because the test client writes a
/// request in two parts).
fn call_ok(client: &mut AiccClient, id: &str, tool: &str, input: Value) -> (Value, Duration) {
    let result = client.call(id, tool, input);
    assert_eq!(result["ok"], true, "{tool}: {result}");
    let latency =
        Duration::from_secs_f64(result["meta"]["latency_ms"].as_f64().unwrap_or(f64::NAN) / 1e3);
    (result["output"].clone(), latency)
}

fn angle_difference(a: f64, b: f64) -> f64 {
    let d = (a - b).rem_euclid(std::f64::consts::TAU);
    d.min(std::f64::consts::TAU - d)
}

#[test]
fn sensor_tools_match_the_simulators_ground_truth() {
    let tilt = format!("head_tilt_joint={HEAD_TILT_RAD}");
    let _sim = start_sim(&["--joint", &tilt]);
    let truth = GroundTruth::subscribe();
    let world = WorldTruth::subscribe();
    // It backs away (below): allowed here, though nothing watches low
    // obstacles behind the bundled robot (the default refuses reverse).
    let (_bridge, port) = start_bridge(&["--ros-args", "-p", "safety.unobserved_behind:=allow"]);
    let (mut client, init) = AiccClient::connect(port);
    let tools: Vec<&str> =
        init["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    for tool in ["vision", "depth", "inspect", "touch", "proprioception"] {
        assert!(tools.contains(&tool), "{tool} missing from the manifest: {tools:?}");
    }

    // Sensor data reaches the bridge a moment after the simulator is ready.
    let first = client.call_when_ready(
        "warmup",
        "vision",
        json!({ "format": "png" }),
        Duration::from_secs(30),
    );
    assert_eq!(first["ok"], true, "{first}");
    assert_eq!(first["meta"]["source"], "camera/image_raw", "{}", first["meta"]);

    // (a) vision: PNG decodes, and the centre of the frame is the red box.
    let (png, png_latency) = call_ok(&mut client, "v-png", "vision", json!({ "format": "png" }));
    assert_eq!(
        (png["format"].as_str(), png["mime_type"].as_str()),
        (Some("png"), Some("image/png"))
    );
    assert!(png.get("jpeg_b64").is_none(), "the picture is sent once");
    let picture =
        image::load_from_memory_with_format(&decode_b64(&png["png_b64"]), image::ImageFormat::Png)
            .expect("a PNG")
            .into_rgb8();
    let (width, height) = picture.dimensions();
    assert_eq!(
        (u64::from(width), u64::from(height)),
        (png["width"].as_u64().unwrap(), png["height"].as_u64().unwrap())
    );
    assert_eq!(
        (width, height),
        (
            png["source_width"].as_u64().unwrap() as u32,
            png["source_height"].as_u64().unwrap() as u32
        ),
        "no reduction by default"
    );
    assert!(number(&png["age_ms"]) < 1000.0, "{}", png["age_ms"]);
    assert_eq!(png["frame_id"], "camera_optical_frame");
    let mut sums = [0u64; 3];
    for y in height / 2 - 4..=height / 2 + 4 {
        for x in width / 2 - 4..=width / 2 + 4 {
            (0..3).for_each(|c| sums[c] += u64::from(picture.get_pixel(x, y).0[c]));
        }
    }
    let centre = sums.map(|s| s as f64 / 81.0);
    println!("vision png: {width}x{height}, {} bytes, centre 9x9 mean RGB ({:.0}, {:.0}, {:.0}), {:.1} ms", png["bytes"], centre[0], centre[1], centre[2], png_latency.as_secs_f64() * 1e3);
    assert!(
        centre[0] > 120.0 && centre[1] < 60.0 && centre[2] < 60.0,
        "the centre is not red: {centre:?}"
    );

    let (jpeg, jpeg_latency) =
        call_ok(&mut client, "v-jpeg", "vision", json!({ "max_bytes": 20000 }));
    let jpeg_bytes = decode_b64(&jpeg["jpeg_b64"]);
    assert_eq!((jpeg["format"].as_str(), jpeg.get("png_b64")), (Some("jpeg"), None));
    assert!(
        jpeg_bytes.len() <= 20000 && jpeg["bytes"].as_u64() == Some(jpeg_bytes.len() as u64),
        "{} bytes",
        jpeg_bytes.len()
    );
    let jpeg_picture =
        image::load_from_memory_with_format(&jpeg_bytes, image::ImageFormat::Jpeg).expect("a JPEG");
    println!(
        "vision jpeg (max_bytes 20000): {}x{}, {} bytes, quality {}, reduced {}, {:.1} ms",
        jpeg_picture.width(),
        jpeg_picture.height(),
        jpeg_bytes.len(),
        jpeg["jpeg_quality"],
        jpeg["reduced"],
        jpeg_latency.as_secs_f64() * 1e3
    );
    let (small, _) =
        call_ok(&mut client, "v-small", "vision", json!({ "max_width": 160, "quality": 50 }));
    assert_eq!(
        (small["width"].as_u64(), small["reduced"].clone()),
        (Some(160), json!(["max_size"]))
    );
    // A budget below what the default quality gives is met by giving something up, and says so.
    let (tight, _) = call_ok(&mut client, "v-tight", "vision", json!({ "max_bytes": 2000 }));
    let tight_bytes = decode_b64(&tight["jpeg_b64"]).len();
    println!(
        "vision jpeg (max_bytes 2000): {}x{}, {tight_bytes} bytes, quality {}, reduced {}",
        tight["width"], tight["height"], tight["jpeg_quality"], tight["reduced"]
    );
    assert!(
        tight_bytes <= 2000 && !tight["reduced"].as_array().unwrap().is_empty(),
        "{tight_bytes} bytes, reduced {}",
        tight["reduced"]
    );

    // (b) depth: the centre distance matches the simulator's ray along the optical axis.
    let (depth, depth_latency) = call_ok(&mut client, "d1", "depth", json!({}));
    let world_now = world.now();
    let true_distance = number(&world_now["camera_center_distance_m"]);
    let centre_m = number(&depth["centre_m"]);
    println!(
        "depth: centre {centre_m:.4} m, ground truth {true_distance:.4} m, error {:+.1} mm; min {} median {} max {} valid {}; {}x{} ({}), {} PNG bytes, {:.1} ms",
        (centre_m - true_distance) * 1e3,
        depth["min_m"],
        depth["median_m"],
        depth["max_m"],
        depth["valid_fraction"],
        depth["width"],
        depth["height"],
        depth["alignment"],
        depth["png_bytes"],
        depth_latency.as_secs_f64() * 1e3
    );
    assert!(
        (centre_m - true_distance).abs() < 0.05,
        "depth centre {centre_m} m, ground truth {true_distance} m"
    );
    assert_eq!(
        (depth["width"].as_u64(), depth["height"].as_u64()),
        (Some(u64::from(width)), Some(u64::from(height))),
        "aligned to vision"
    );
    assert_eq!(
        (depth["scale"].as_str(), depth["invalid_value"].as_u64()),
        (Some("1 unit = 1 mm"), Some(0))
    );
    let depth_png = image::load_from_memory_with_format(
        &decode_b64(&depth["png16_mm_b64"]),
        image::ImageFormat::Png,
    )
    .expect("a PNG")
    .into_luma16();
    let centre_mm = f64::from(depth_png.get_pixel(width / 2, height / 2).0[0]);
    println!("depth PNG centre pixel: {centre_mm} mm");
    assert!(
        (centre_mm - centre_m * 1e3).abs() <= 0.01 * centre_m * 1e3,
        "PNG centre {centre_mm} mm, centre_m {centre_m}"
    );
    let (stats, stats_latency) =
        call_ok(&mut client, "d2", "depth", json!({ "include_image": false, "max_width": 160 }));
    assert!(stats.get("png16_mm_b64").is_none() && stats["width"].as_u64() == Some(160));
    assert!((number(&stats["centre_m"]) - centre_m).abs() < 0.01);
    println!("depth stats only: {:.1} ms", stats_latency.as_secs_f64() * 1e3);

    // (d) inspect: the centre pixel is red and lies on the box's near face.
    let (pre, _) = call_ok(&mut client, "p0", "proprioception", json!({}));
    println!(
        "head before inspect: pan {} tilt {} (joint states {} ms old)",
        pre["joints"]["head_pan_joint"]["position"],
        pre["joints"]["head_tilt_joint"]["position"],
        pre["joints_age_ms"]
    );
    let (seen, inspect_latency) =
        call_ok(&mut client, "i1", "inspect", json!({ "u": width / 2, "v": height / 2 }));
    let boxed = &world_now["objects"]["red_box"];
    let base = &world_now["base"];
    // The box is axis-aligned; the robot has not moved (yaw ~0): its near face is
    // at the box centre minus half its size, relative to base_footprint.
    let near_face_m = number(&boxed["x"]) - number(&boxed["size"][0]) / 2.0 - number(&base["x"]);
    let point = &seen["point_base_m"];
    println!(
        "inspect centre: {} rgb ({}, {}, {}), depth {} m, camera point {}, base point {}, near face at x = {near_face_m:.3} m, notes {}, {:.1} ms",
        seen["colour_name"],
        seen["rgb"]["r"],
        seen["rgb"]["g"],
        seen["rgb"]["b"],
        seen["depth_m"],
        seen["point_camera_m"],
        point,
        seen["notes"],
        inspect_latency.as_secs_f64() * 1e3
    );
    assert_eq!(seen["colour_name"], "red", "{seen}");
    assert!(
        (number(&point["x"]) - near_face_m).abs() < 0.05,
        "base-frame x {} vs near face {near_face_m}",
        point["x"]
    );
    assert!(
        number(&point["y"]).abs() < 0.05 && (0.0..0.2).contains(&number(&point["z"])),
        "{point}"
    );
    let (wall, _) =
        call_ok(&mut client, "i2", "inspect", json!({ "u": 5, "v": 5, "width": 3, "height": 3 }));
    println!(
        "inspect (5, 5): {} rgb ({}, {}, {}), depth {} m, base point {}",
        wall["colour_name"],
        wall["rgb"]["r"],
        wall["rgb"]["g"],
        wall["rgb"]["b"],
        wall["depth_m"],
        wall["point_base_m"]
    );
    assert_ne!(wall["colour_name"], "red");

    // (e) touch: nothing touches the bumper at the start.
    let (touch, touch_latency) = call_ok(&mut client, "t1", "touch", json!({}));
    println!(
        "touch: in_contact {}, since {} s (lower bound {}), {:.1} ms",
        touch["in_contact"],
        touch["since_s"],
        touch["since_s_is_lower_bound"],
        touch_latency.as_secs_f64() * 1e3
    );
    assert_eq!(
        (touch["in_contact"].as_bool(), touch["contacts"].as_array().map(Vec::len)),
        (Some(false), Some(0))
    );
    assert_eq!(world.now()["bumper_in_contact"], false);

    // (f) bad input is refused, naming the field.
    for (input, field) in
        [(json!({ "quality": 0 }), "input.quality"), (json!({ "format": "gif" }), "input.format")]
    {
        let refused = client.call("bad", "vision", input);
        assert_eq!(
            (refused["ok"].as_bool(), refused["error"]["code"].as_str()),
            (Some(false), Some("invalid_input")),
            "{refused}"
        );
        assert!(refused["error"]["message"].as_str().unwrap().contains(field), "{refused}");
    }
    let refused = client.call("bad-u", "inspect", json!({ "u": 100000, "v": 0 }));
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    println!("inspect u = 100000: {message}");
    assert_eq!(refused["error"]["code"], "invalid_input", "{refused}");
    assert!(
        message.contains("input.u") && message.contains(&format!("{width}x{height}")),
        "{refused}"
    );

    // (c) proprioception: the odometry pose is the ground truth relative to the
    // spawn pose (the origin, yaw 0), before and after a move; joints are there.
    let (x0, y0, yaw0) = truth.settled_pose();
    let (sense, sense_latency) = call_ok(&mut client, "p1", "proprioception", json!({}));
    let pose = |output: &Value| {
        (
            number(&output["position_m"]["x"]),
            number(&output["position_m"]["y"]),
            number(&output["rpy_rad"]["yaw"]),
        )
    };
    let (ox, oy, oyaw) = pose(&sense);
    println!(
        "proprioception at start: odom ({ox:.4}, {oy:.4}, {:.2} deg), ground truth ({x0:.4}, {y0:.4}, {:.2} deg), {:.1} ms",
        oyaw.to_degrees(),
        yaw0.to_degrees(),
        sense_latency.as_secs_f64() * 1e3
    );
    assert!((ox - x0).hypot(oy - y0) < 0.02 && angle_difference(oyaw, yaw0) < 2f64.to_radians());
    let joints = &sense["joints"];
    for joint in [
        "head_pan_joint",
        "head_tilt_joint",
        "joint1",
        "joint2",
        "joint3",
        "joint4",
        "gripper_left_joint",
    ] {
        assert!(joints[joint]["position"].is_number(), "{joint} missing: {joints}");
    }
    assert_eq!(
        (joints["head_tilt_joint"]["unit"].as_str(), joints["gripper_left_joint"]["unit"].as_str()),
        (Some("rad"), Some("m"))
    );
    let tilt_measured = number(&joints["head_tilt_joint"]["position"]);
    let tilt_truth = number(&world.now()["joints"]["head_tilt_joint"]);
    println!("head tilt: proprioception {tilt_measured:.4} rad, ground truth {tilt_truth:.4} rad, joints age {} ms", sense["joints_age_ms"]);
    assert!(
        (tilt_measured - tilt_truth).abs() < 0.01 && (tilt_measured - HEAD_TILT_RAD).abs() < 0.05
    );
    assert_eq!(sense["health"], Value::Null, "no battery topic in the default config");

    // Backwards (the pedestal stands ahead-left).
    let moved = client.call("m1", "move", json!({ "forward": -0.3 }));
    assert_eq!(moved["ok"], true, "{moved}");
    let (x1, y1, yaw1) = truth.settled_pose();
    let (after, _) = call_ok(&mut client, "p2", "proprioception", json!({}));
    let (ox1, oy1, oyaw1) = pose(&after);
    let position_error = (ox1 - x1).hypot(oy1 - y1);
    println!(
        "proprioception after move -0.3 m: odom ({ox1:.4}, {oy1:.4}, {:.2} deg), ground truth ({x1:.4}, {y1:.4}, {:.2} deg): error {:.1} mm, {:.2} deg",
        oyaw1.to_degrees(),
        yaw1.to_degrees(),
        position_error * 1e3,
        angle_difference(oyaw1, yaw1).to_degrees()
    );
    assert!((x1 - x0 + 0.3).abs() < 0.05, "the robot moved {} m", x1 - x0);
    assert!(position_error < 0.02 && angle_difference(oyaw1, yaw1) < 2f64.to_radians());

    // Farther from the box, depth and inspect follow the ground truth too.
    let (depth, _) = call_ok(&mut client, "d3", "depth", json!({ "include_image": false }));
    let world_now = world.now();
    let true_distance = number(&world_now["camera_center_distance_m"]);
    println!(
        "depth after the move: centre {} m, ground truth {true_distance:.4} m",
        depth["centre_m"]
    );
    assert!((number(&depth["centre_m"]) - true_distance).abs() < 0.05);
    let (seen, _) =
        call_ok(&mut client, "i3", "inspect", json!({ "u": width / 2, "v": height / 2 }));
    let near_face_m =
        number(&world_now["objects"]["red_box"]["x"]) - 0.1 - number(&world_now["base"]["x"]);
    println!(
        "inspect after the move: base point {}, near face at x = {near_face_m:.3} m",
        seen["point_base_m"]
    );
    assert!((number(&seen["point_base_m"]["x"]) - near_face_m).abs() < 0.05);
}

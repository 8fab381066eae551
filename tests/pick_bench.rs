//! The pick-the-red-cube benchmark: the reference policy (`aicc agent
//! --backend reference`) in seeded worlds (sim/world.py seeded_objects),
//! each beside its own simulator and bridge. Success is judged by the
//! simulator's ground truth (the red cube lifted off its pedestal, at the
//! gripper), not by what the agent claims. Prints a table and writes
//! target/bench/pick.json. Asserted: the count of successes it reports
//! (at least AICC_PICK_MIN_SUCCESSES, default every seed), and that the
//! agent's own claim agrees with the ground truth in every run; the times,
//! calls and bytes are figures only.
//!
//! Seeds: AICC_PICK_SEEDS (comma-separated; default "1,2", what CI runs);
//! the README's table is `AICC_PICK_SEEDS=1,2,3,4,5,6,7,8,9,10`.
mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{binary, repo_root, start_bridge, start_sim, AiccClient, WorldTruth};

/// Centre of a cube resting on its pedestal (0.10 m + half of 0.035 m).
const RESTING_Z_M: f64 = 0.118;
/// Lifted: this much above resting.
const LIFTED_BY_M: f64 = 0.03;
/// At the gripper: within this of the end effector.
const AT_GRIPPER_M: f64 = 0.08;

fn seeds() -> Vec<u64> {
    std::env::var("AICC_PICK_SEEDS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .map(|s| {
            s.trim().parse().unwrap_or_else(|_| panic!("AICC_PICK_SEEDS: '{s}' is not a seed"))
        })
        .collect()
}

/// How many runs must pick the cube: AICC_PICK_MIN_SUCCESSES, or all of them.
fn min_successes(runs: usize) -> usize {
    std::env::var("AICC_PICK_MIN_SUCCESSES").map_or(runs, |n| {
        n.trim().parse().unwrap_or_else(|_| panic!("AICC_PICK_MIN_SUCCESSES: '{n}' is not a count"))
    })
}

fn number(value: &Value, pointer: &str) -> f64 {
    value.pointer(pointer).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// One seeded world: the agent's report and the ground truth's verdict.
fn run_seed(seed: u64) -> Value {
    let seed_arg = seed.to_string();
    let _sim = start_sim(&["--world-seed", &seed_arg]);
    let world = WorldTruth::subscribe();
    let (_bridge, port) = start_bridge(&["--config", "config/sim.yaml"]);
    // The bridge serves once its sensors have spoken.
    let (mut client, _) = AiccClient::connect(port);
    for tool in ["proprioception", "vision", "depth"] {
        let ready = client.call_when_ready(tool, tool, json!({}), Duration::from_secs(60));
        assert_eq!(ready["ok"], true, "{tool} never ready: {ready}");
    }
    drop(client);
    let before = world.now();
    let report_path = repo_root().join(format!("target/bench/pick-seed-{seed}.json"));
    let started = Instant::now();
    let output = Command::new(binary("aicc"))
        .args([
            "--port",
            &port.to_string(),
            "agent",
            "--backend",
            "reference",
            "--max-calls",
            "200",
            "--run-timeout-s",
            "180",
            "--report",
        ])
        .arg(&report_path)
        .stdin(Stdio::null())
        .output()
        .expect("running aicc agent");
    let wall_s = started.elapsed().as_secs_f64();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "aicc agent printed no report ({e}); stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(
        report["calls"].is_u64() && report["ending"].is_string(),
        "a malformed report: {report}"
    );
    let after = world.after(Instant::now() + Duration::from_millis(300));
    let cube = &after["objects"]["red_cube"];
    let (cx, cy, cz) = (number(cube, "/x"), number(cube, "/y"), number(cube, "/z"));
    let ee = &after["end_effector"];
    let to_gripper = ((cx - number(ee, "/x")).powi(2)
        + (cy - number(ee, "/y")).powi(2)
        + (cz - number(ee, "/z")).powi(2))
    .sqrt();
    let lifted = cz > RESTING_Z_M + LIFTED_BY_M;
    let success = lifted && to_gripper < AT_GRIPPER_M;
    let start_cube = &before["objects"]["red_cube"];
    json!({
        "seed": seed,
        "success": success,
        "agent_says": report["success"],
        "ending": report["ending"],
        "time_s": report["elapsed_s"],
        "wall_s": (wall_s * 10.0).round() / 10.0,
        "calls": report["calls"],
        "errors": report["errors"],
        "image_bytes": report["image_bytes"],
        "governor_events": report["governor_events"],
        "contact_events": report["contact_events"],
        "cube_start": [number(start_cube, "/x"), number(start_cube, "/y")],
        "cube_end_z_m": cz,
        "cube_to_gripper_m": to_gripper,
        "summary": report["summary"],
    })
}

#[test]
fn pick_the_red_cube_in_seeded_worlds() {
    std::fs::create_dir_all(repo_root().join("target/bench")).unwrap();
    let runs: Vec<Value> = seeds().into_iter().map(run_seed).collect();
    println!(
        "\n| seed | success | time s | calls | image kB | governor events | contacts | ending |"
    );
    println!("| ---: | :---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for r in &runs {
        println!(
            "| {} | {} | {:.1} | {} | {:.0} | {} | {} | {} |",
            r["seed"],
            if r["success"] == true { "yes" } else { "no" },
            r["time_s"].as_f64().unwrap_or(f64::NAN),
            r["calls"],
            r["image_bytes"].as_f64().unwrap_or(0.0) / 1000.0,
            r["governor_events"],
            r["contact_events"],
            r["ending"].as_str().unwrap_or("?")
        );
    }
    let successes: Vec<&Value> = runs.iter().filter(|r| r["success"] == true).collect();
    let mean = |key: &str, of: &[&Value]| {
        if of.is_empty() {
            f64::NAN
        } else {
            of.iter().map(|r| r[key].as_f64().unwrap_or(f64::NAN)).sum::<f64>() / of.len() as f64
        }
    };
    let times: Vec<f64> =
        successes.iter().map(|r| r["time_s"].as_f64().unwrap_or(f64::NAN)).collect();
    let summary = json!({
        "seeds": runs.len(),
        "successes": successes.len(),
        "success_rate": successes.len() as f64 / runs.len().max(1) as f64,
        "time_to_success_s": { "min": times.iter().copied().min_by(f64::total_cmp), "mean": mean("time_s", &successes), "max": times.iter().copied().max_by(f64::total_cmp) },
        "mean_calls": mean("calls", &runs.iter().collect::<Vec<_>>()),
        "mean_image_bytes": mean("image_bytes", &runs.iter().collect::<Vec<_>>()),
        "runs": runs,
    });
    println!(
        "success {}/{}; time to success min/mean/max {:.1}/{:.1}/{:.1} s; mean calls {:.1}",
        summary["successes"],
        summary["seeds"],
        summary["time_to_success_s"]["min"].as_f64().unwrap_or(f64::NAN),
        summary["time_to_success_s"]["mean"].as_f64().unwrap_or(f64::NAN),
        summary["time_to_success_s"]["max"].as_f64().unwrap_or(f64::NAN),
        summary["mean_calls"].as_f64().unwrap_or(f64::NAN)
    );
    for r in summary["runs"].as_array().unwrap().iter().filter(|r| r["success"] != true) {
        println!("seed {} failed ({}): {}", r["seed"], r["ending"], r["summary"]);
    }
    let path = repo_root().join("target/bench/pick.json");
    std::fs::write(&path, serde_json::to_string_pretty(&summary).unwrap()).unwrap();
    println!("report: {}", path.display());
    let claims_wrong: Vec<String> = runs.iter().filter(|r| (r["agent_says"] == true) != (r["success"] == true)).map(|r| format!("seed {}: the agent says {}, the ground truth {} (cube {:.3} m high, {:.3} m from the gripper)", r["seed"], r["agent_says"], r["success"], number(r, "/cube_end_z_m"), number(r, "/cube_to_gripper_m"))).collect();
    assert!(
        claims_wrong.is_empty(),
        "the agent's claim disagrees with the ground truth: {}",
        claims_wrong.join("; ")
    );
    let required = min_successes(runs.len());
    assert!(successes.len() >= required, "picked the cube in {} of {} worlds, at least {required} required (AICC_PICK_MIN_SUCCESSES); report: {}", successes.len(), runs.len(), path.display());
}

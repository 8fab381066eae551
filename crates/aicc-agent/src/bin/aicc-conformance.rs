//! `aicc-conformance`: runs the AICC conformance scenarios against a bridge
//! (this one beside the simulated robot, or any other endpoint) and
//! reports. Exit status: 0 when every selected scenario passed, 1 when any
//! failed (or a scenario file is malformed, or none was selected), 2 on
//! usage errors.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use aicc_agent::conformance::connection::{tls_client, Endpoint, SYSTEM_CA_BUNDLE};
use aicc_agent::conformance::offered::Offered;
use aicc_agent::conformance::progress::Progress;
use aicc_agent::conformance::readiness::{survey, wait_until_ready};
use aicc_agent::conformance::report::{self, Failure, RunReport, ScenarioResult, Status};
use aicc_agent::conformance::runner::{
    run_or_skip, RunnerOptions, TokenSource, DEFAULT_CLOSE_WAIT,
};
use aicc_agent::conformance::scenario::{load_all, Loaded, RobotNeed, AREAS, MAX_SECONDS};
use clap::Parser;

/// Default line limit: the bridge's 1 MiB plus slack for the envelope.
const DEFAULT_MAX_LINE_BYTES: usize = (1 << 20) + 1024;

#[derive(Parser, Debug)]
#[command(
    name = "aicc-conformance",
    about = "Run the AICC conformance scenarios against a bridge and report"
)]
struct Args {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 43010)]
    port: u16,
    /// Speak TLS (the bridge's security.tls_cert_file).
    #[arg(long)]
    tls: bool,
    /// PEM certificates to trust (with --tls; default: the system bundle).
    #[arg(long, value_name = "PEM")]
    ca_file: Option<PathBuf>,
    /// The name the server certificate must carry (with --tls; default: --host).
    #[arg(long, value_name = "NAME")]
    server_name: Option<String>,
    /// Environment variable with the runner's own (admin: the operator's) token.
    #[arg(long, default_value = "AICC_OPERATOR_TOKEN", value_name = "NAME")]
    token_env: String,
    /// Environment variable with an agent's (actuate) token.
    #[arg(long, default_value = "AICC_TOKEN", value_name = "NAME")]
    actuate_token_env: String,
    #[arg(long, default_value = "AICC_OBSERVE_TOKEN", value_name = "NAME")]
    observe_token_env: String,
    /// Directory with one sub-directory per area.
    #[arg(long, default_value = "conformance/scenarios", value_name = "DIR")]
    scenarios: PathBuf,
    /// Run only this area (repeatable): protocol, sensors, actuators, governor, appendix_a, adversarial.
    #[arg(long = "area", value_name = "AREA")]
    areas: Vec<String>,
    /// Run only scenarios needing these of the robot (comma list of none, moves, needs_wall_ahead; default all).
    #[arg(long, value_delimiter = ',', value_name = "NEEDS")]
    robot: Vec<String>,
    /// Run only this scenario (repeatable).
    #[arg(long = "only", value_name = "NAME")]
    only: Vec<String>,
    /// Write conformance-report.json and conformance-junit.xml here.
    #[arg(long, value_name = "DIR")]
    report_dir: Option<PathBuf>,
    /// Longest line accepted from the bridge, bytes (before the LF).
    #[arg(long, default_value_t = DEFAULT_MAX_LINE_BYTES, value_name = "N")]
    max_line_bytes: usize,
    /// Before the first scenario, wait up to N seconds for every tool of
    /// the manifest to be available (a bridge started a moment ago may still
    /// wait for its robot's data); 0: do not wait.
    #[arg(long, default_value_t = 0.0, value_name = "N", overrides_with = "wait_ready_s")]
    wait_ready_s: f64,
    /// The robot profile under test (e.g. turtlebot3), named in the
    /// reports; what it offers is read from the bridge's manifest.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// The simulator's ground truth (`sim/aicc_sim.py --truth-listen`,
    /// HOST:PORT): scenarios judged on it run; without it they are
    /// skipped, named. A test stand-in: a real robot has none.
    #[arg(long, value_name = "HOST:PORT")]
    truth: Option<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(code) => code,
        Err(usage) => {
            eprintln!("aicc-conformance: {usage}");
            ExitCode::from(2)
        }
    }
}

/// Scenario selection from --area, --robot and --only.
struct Selection {
    areas: Vec<String>,
    robots: Vec<RobotNeed>,
    only: Vec<String>,
}

impl Selection {
    fn from_args(args: &Args, loaded: &[Loaded]) -> Result<Self, String> {
        for area in &args.areas {
            if !AREAS.contains(&area.as_str()) {
                return Err(format!("--area {area}: not an area ({})", AREAS.join(", ")));
            }
        }
        let robots = if args.robot.is_empty() {
            RobotNeed::ALL.to_vec()
        } else {
            args.robot
                .iter()
                .map(|r| {
                    RobotNeed::parse(r.trim()).ok_or_else(|| {
                        format!("--robot {r}: not one of none, moves, needs_wall_ahead")
                    })
                })
                .collect::<Result<_, _>>()?
        };
        for name in &args.only {
            let known = loaded
                .iter()
                .any(|l| matches!(l, Loaded::Ok { scenario, .. } if &scenario.name == name));
            if !known {
                return Err(format!("--only {name}: no scenario has this name (see --list)"));
            }
        }
        Ok(Self { areas: args.areas.clone(), robots, only: args.only.clone() })
    }

    fn selects(&self, scenario: &aicc_agent::conformance::scenario::Scenario) -> bool {
        (self.areas.is_empty() || self.areas.contains(&scenario.area))
            && self.robots.contains(&scenario.robot)
            && (self.only.is_empty() || self.only.contains(&scenario.name))
    }
}

fn endpoint(args: &Args) -> Result<Endpoint, String> {
    if !args.tls && (args.ca_file.is_some() || args.server_name.is_some()) {
        return Err("--ca-file and --server-name go with --tls".into());
    }
    let tls = if args.tls {
        let ca_file = args.ca_file.clone().unwrap_or_else(|| PathBuf::from(SYSTEM_CA_BUNDLE));
        Some(
            tls_client(&ca_file, args.server_name.as_deref().unwrap_or(&args.host))
                .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    Ok(Endpoint { host: args.host.clone(), port: args.port, tls })
}

/// `--wait-ready-s`: None for 0 (no wait).
fn wait_ready(seconds: f64) -> Result<Option<Duration>, String> {
    if !(0.0..=MAX_SECONDS).contains(&seconds) {
        return Err(format!("--wait-ready-s {seconds}: must be a non-negative number of seconds up to {MAX_SECONDS}"));
    }
    Ok((seconds > 0.0).then(|| Duration::from_secs_f64(seconds)))
}

fn malformed_result(file: &std::path::Path, area: &str, error: &str) -> ScenarioResult {
    ScenarioResult {
        name: file
            .file_stem()
            .map_or_else(|| file.display().to_string(), |s| s.to_string_lossy().to_string()),
        area: area.to_string(),
        file: file.display().to_string(),
        robot: None,
        checks: String::new(),
        status: Status::Failed,
        duration_s: 0.0,
        failure: Some(Failure {
            step: None,
            label: Some("loading the file".into()),
            reason: error.to_string(),
        }),
        skip_reason: None,
        transcript: Vec::new(),
        truth: None,
    }
}

fn list(loaded: &[Loaded]) -> ExitCode {
    let mut malformed = false;
    for entry in loaded {
        match entry {
            Loaded::Ok { file, scenario } => {
                let needs: Vec<String> = scenario.needed_tools().into_iter().collect();
                println!(
                    "{:<12} {:<60} robot: {:<17} tools: {}  {}  ({})",
                    scenario.area,
                    scenario.name,
                    scenario.robot.as_str(),
                    if needs.is_empty() { "-".to_string() } else { needs.join(",") },
                    scenario.checks,
                    file.display()
                )
            }
            Loaded::Malformed { error, .. } => {
                malformed = true;
                println!("MALFORMED    {error}");
            }
        }
    }
    if malformed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn run(args: Args) -> Result<ExitCode, String> {
    if args.max_line_bytes == 0 {
        return Err("--max-line-bytes must be positive".into());
    }
    let wait_ready = wait_ready(args.wait_ready_s)?;
    let loaded = load_all(&args.scenarios).map_err(|e| e.to_string())?;
    if args.list {
        return Ok(list(&loaded));
    }
    let selection = Selection::from_args(&args, &loaded)?;
    let endpoint = endpoint(&args)?;
    let options = RunnerOptions {
        endpoint: endpoint.clone(),
        max_line_bytes: args.max_line_bytes,
        admin: TokenSource::from_env(&args.token_env),
        actuate: TokenSource::from_env(&args.actuate_token_env),
        observe: TokenSource::from_env(&args.observe_token_env),
        close_wait: DEFAULT_CLOSE_WAIT,
        truth: args.truth.clone(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;

    let started_at = SystemTime::now();
    let started = Instant::now();
    let to_run = loaded
        .iter()
        .filter(|l| matches!(l, Loaded::Ok { scenario, .. } if selection.selects(scenario)))
        .count();
    // What the profile offers: scenarios needing a tool it lacks are skipped.
    let mut offered = Offered::default();
    if let Some(within) = wait_ready.filter(|_| to_run > 0) {
        eprintln!("[aicc-conformance] waiting up to {:.0} s for every tool of {}'s manifest to be available", within.as_secs_f64(), endpoint.describe());
        match runtime.block_on(wait_until_ready(&options, within)) {
            Ok(ready) => {
                let available = ready.tools.saturating_sub(ready.offered.not_configured.len());
                eprintln!("[aicc-conformance] ready after {:.1} s: {available} of {} tools available (the others: not configured on this robot)", ready.waited_s, ready.tools);
                offered = ready.offered;
            }
            Err(reason) => {
                eprintln!(
                    "aicc-conformance: the bridge is not ready (--wait-ready-s {}): {reason}",
                    args.wait_ready_s
                );
                return Ok(ExitCode::from(1));
            }
        }
    } else if to_run > 0 {
        match runtime.block_on(survey(&options)) {
            Ok(survey) => offered = survey,
            Err(reason) => eprintln!("[aicc-conformance] could not read the manifest before the first scenario ({reason}): no scenario is skipped for what the profile lacks"),
        }
    }
    for (tool, reason) in &offered.not_configured {
        eprintln!("[aicc-conformance] not configured on this robot: {tool} ({reason})");
    }
    let mut progress = Progress::stderr(to_run);
    let mut results = Vec::with_capacity(loaded.len());
    for entry in &loaded {
        match entry {
            Loaded::Malformed { file, area, error } => {
                results.push(malformed_result(file, area, &error.to_string()))
            }
            Loaded::Ok { file, scenario } if selection.selects(scenario) => {
                let label = format!("{}/{}", scenario.area, scenario.name);
                progress.start(&label);
                let result = runtime.block_on(run_or_skip(scenario, file, &options, &offered));
                let reason = result
                    .failure
                    .as_ref()
                    .map(|f| f.describe(&scenario.name))
                    .or_else(|| result.skip_reason.clone());
                progress.finish(&label, result.status, result.duration_s, reason.as_deref());
                results.push(result);
            }
            Loaded::Ok { file, scenario } => results.push(ScenarioResult {
                name: scenario.name.clone(),
                area: scenario.area.clone(),
                file: file.display().to_string(),
                robot: Some(scenario.robot),
                checks: scenario.checks.clone(),
                status: Status::NotSelected,
                duration_s: 0.0,
                failure: None,
                skip_reason: None,
                transcript: Vec::new(),
                truth: None,
            }),
        }
    }
    progress.end();
    let run_report = RunReport {
        endpoint: endpoint.describe(),
        profile: args.profile.clone(),
        started_at,
        duration_s: started.elapsed().as_secs_f64(),
        results,
    };
    print!("{}", report::summary_table(&run_report));
    if let Some(dir) = &args.report_dir {
        match report::write_reports(&run_report, dir) {
            Ok((json, junit)) => println!("Reports: {} and {}", json.display(), junit.display()),
            Err(error) => {
                eprintln!("aicc-conformance: writing reports to {}: {error}", dir.display());
                return Ok(ExitCode::from(1));
            }
        }
    }
    Ok(if run_report.all_passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aicc_agent::conformance::scenario::parse;

    fn loaded(name: &str, area: &str, robot: &str) -> Loaded {
        let text = format!("name: {name}\narea: {area}\nchecks: c\ndescription: d\nrobot: {robot}\nsteps:\n  - wait_s: 0\n");
        let file = PathBuf::from(format!("{area}/01_{name}.yaml"));
        Loaded::Ok { scenario: parse(&file, &text).unwrap(), file }
    }

    fn selection(args: &[&str], loaded: &[Loaded]) -> Result<Selection, String> {
        let args =
            Args::try_parse_from(std::iter::once("aicc-conformance").chain(args.iter().copied()))
                .unwrap();
        Selection::from_args(&args, loaded)
    }

    fn selected(selection: &Selection, loaded: &[Loaded]) -> Vec<String> {
        loaded
            .iter()
            .filter_map(|l| match l {
                Loaded::Ok { scenario, .. } if selection.selects(scenario) => {
                    Some(scenario.name.clone())
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn area_robot_and_only_narrow_the_selection() {
        let all = [
            loaded("calm", "protocol", "none"),
            loaded("drive", "actuators", "moves"),
            loaded("bump", "governor", "needs_wall_ahead"),
        ];
        assert_eq!(selected(&selection(&[], &all).unwrap(), &all), ["calm", "drive", "bump"]);
        assert_eq!(
            selected(&selection(&["--robot", "none,moves"], &all).unwrap(), &all),
            ["calm", "drive"]
        );
        assert_eq!(
            selected(
                &selection(&["--area", "governor", "--area", "protocol"], &all).unwrap(),
                &all
            ),
            ["calm", "bump"]
        );
        assert_eq!(selected(&selection(&["--only", "drive"], &all).unwrap(), &all), ["drive"]);
        assert_eq!(
            selected(&selection(&["--only", "drive", "--robot", "none"], &all).unwrap(), &all),
            Vec::<String>::new()
        );
    }

    #[test]
    fn unknown_areas_robots_names_and_stray_tls_options_are_usage_errors() {
        let all = [loaded("calm", "protocol", "none")];
        assert!(selection(&["--area", "sensor"], &all)
            .err()
            .unwrap()
            .contains("--area sensor: not an area"));
        assert!(selection(&["--robot", "flies"], &all).err().unwrap().contains("--robot flies"));
        assert!(selection(&["--only", "nope"], &all)
            .err()
            .unwrap()
            .contains("--only nope: no scenario"));
        let args = Args::try_parse_from(["aicc-conformance", "--ca-file", "x.pem"]).unwrap();
        assert!(endpoint(&args).err().unwrap().contains("go with --tls"));
        let args =
            Args::try_parse_from(["aicc-conformance", "--tls", "--ca-file", "/nonexistent/ca.pem"])
                .unwrap();
        assert!(endpoint(&args).err().unwrap().contains("/nonexistent/ca.pem"));
    }

    #[test]
    fn wait_ready_is_off_by_default_and_the_last_one_given_counts() {
        let parsed = |args: &[&str]| {
            Args::try_parse_from(std::iter::once("aicc-conformance").chain(args.iter().copied()))
                .unwrap()
                .wait_ready_s
        };
        assert_eq!(wait_ready(parsed(&[])).unwrap(), None);
        // conformance.sh passes one; a user's own comes after it and wins.
        assert_eq!(
            wait_ready(parsed(&["--wait-ready-s", "60", "--wait-ready-s", "5"])).unwrap(),
            Some(Duration::from_secs(5))
        );
        assert!(wait_ready(-1.0).unwrap_err().contains("--wait-ready-s -1"));
        assert!(wait_ready(f64::NAN).unwrap_err().contains("non-negative"));
        assert!(wait_ready(1e20).unwrap_err().contains("up to 86400"), "would overflow a Duration");
    }
}

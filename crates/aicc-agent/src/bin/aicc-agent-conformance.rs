//! Runs the agent-conformance checks against a client command:
//! `aicc-agent-conformance --client "PATH/aicc --port {port}" [--report-dir DIR]`.
//! Exit 0 when every check passed, 1 when one failed, 2 on bad usage.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use aicc_agent::agent_conformance::{report, run_all, ClientCommand};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Plays a scripted AICC bridge for a client under test and checks that it behaves as a conformant agent"
)]
struct Args {
    /// Shell command line of the client, with {port} where the fake
    /// bridge's port goes; driver arguments are appended.
    #[arg(long)]
    client: String,
    /// Where to write agent-conformance.json.
    #[arg(long)]
    report_dir: Option<PathBuf>,
    /// Seconds a client run may take before it is killed (and fails).
    #[arg(long, default_value_t = 20.0)]
    client_timeout_s: f64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let client = match ClientCommand::new(&args.client) {
        Ok(client) => client,
        Err(problem) => {
            eprintln!("aicc-agent-conformance: {problem}");
            return ExitCode::from(2);
        }
    };
    if !(args.client_timeout_s.is_finite()
        && args.client_timeout_s > 0.0
        && args.client_timeout_s <= 3600.0)
    {
        eprintln!("aicc-agent-conformance: --client-timeout-s must be a positive number of seconds (at most 3600)");
        return ExitCode::from(2);
    }
    let outcomes = run_all(&client, Duration::from_secs_f64(args.client_timeout_s));
    print!("{}", report::summary_table(&outcomes));
    if let Some(dir) = &args.report_dir {
        let path = dir.join("agent-conformance.json");
        let text = serde_json::to_string_pretty(&report::json_report(client.template(), &outcomes))
            .unwrap_or_default();
        if let Err(error) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, text)) {
            eprintln!("aicc-agent-conformance: cannot write {}: {error}", path.display());
            return ExitCode::from(2);
        }
        println!("report: {}", path.display());
    }
    if outcomes.iter().all(|o| o.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

//! `aicc-chaos`: the chaos agent (`aicc_agent::chaos`) against a bridge
//! beside the simulated robot, judged on the simulator's ground truth.
//! Exit status: 0 when no seed found a violation, 1 when one did (or the
//! run could not go on), 2 on usage errors.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use aicc_agent::chaos::{self, ChaosOptions};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "aicc-chaos",
    about = "Seeded random sequences of every tool against a bridge, judged on the simulator's ground truth"
)]
struct Args {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 43010)]
    port: u16,
    /// Environment variable with the token (admin or actuate scope).
    #[arg(long, default_value = "AICC_TOKEN", value_name = "NAME")]
    token_env: String,
    /// The simulator's ground truth (sim/aicc_sim.py --truth-listen), HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    truth: String,
    /// Seeds, one run each (comma list, or a range A..B, end excluded).
    #[arg(long, default_value = "1", value_name = "SEEDS")]
    seeds: String,
    /// Wall time per seed.
    #[arg(long, default_value_t = 60.0, value_name = "S")]
    seconds_per_seed: f64,
    /// Spare low obstacles the scene places (the simulator's --low-obstacles has 3).
    #[arg(long, default_value_t = 3)]
    obstacles: usize,
    /// Write the figures as JSON here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Print every call as it is sent.
    #[arg(long)]
    verbose: bool,
}

fn parse_seeds(text: &str) -> Result<Vec<u64>, String> {
    if let Some((a, b)) = text.split_once("..") {
        let (a, b): (u64, u64) = (
            a.trim().parse().map_err(|e| format!("--seeds {text}: {e}"))?,
            b.trim().parse().map_err(|e| format!("--seeds {text}: {e}"))?,
        );
        if a >= b {
            return Err(format!("--seeds {text}: an empty range"));
        }
        return Ok((a..b).collect());
    }
    text.split(',')
        .map(|s| s.trim().parse::<u64>().map_err(|e| format!("--seeds {text}: {e}")))
        .collect()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let seeds = match parse_seeds(&args.seeds) {
        Ok(seeds) => seeds,
        Err(usage) => {
            eprintln!("aicc-chaos: {usage}");
            return ExitCode::from(2);
        }
    };
    if !(args.seconds_per_seed > 0.0 && args.seconds_per_seed <= 86_400.0) {
        eprintln!("aicc-chaos: --seconds-per-seed must be positive, at most a day");
        return ExitCode::from(2);
    }
    let options = ChaosOptions {
        host: args.host,
        port: args.port,
        token: std::env::var(&args.token_env).ok().filter(|t| !t.is_empty()),
        truth: args.truth,
        seeds,
        per_seed: Duration::from_secs_f64(args.seconds_per_seed),
        obstacles: args.obstacles,
        verbose: args.verbose,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("aicc-chaos: starting the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let reports = match runtime.block_on(chaos::run(&options)) {
        Ok(reports) => reports,
        Err(e) => {
            eprintln!("aicc-chaos: {e}");
            return ExitCode::from(1);
        }
    };
    print!("{}", chaos::render(&reports));
    if let Some(path) = &args.report {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        let text = serde_json::to_string_pretty(&chaos::to_json(&reports, &options))
            .expect("JSON values serialize");
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("aicc-chaos: writing {}: {e}", path.display());
            return ExitCode::from(1);
        }
        println!("Report: {}", path.display());
    }
    let violations: usize = reports.iter().map(|r| r.found.len()).sum();
    if violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_a_list_or_a_range() {
        assert_eq!(parse_seeds("3").unwrap(), [3]);
        assert_eq!(parse_seeds("1, 5,9").unwrap(), [1, 5, 9]);
        assert_eq!(parse_seeds("2..5").unwrap(), [2, 3, 4]);
        assert!(parse_seeds("5..5").unwrap_err().contains("empty"));
        assert!(parse_seeds("x").is_err());
    }
}

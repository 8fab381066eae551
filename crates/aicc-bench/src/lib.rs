//! What the benchmarks share: a process as /proc tells it (resident
//! memory, threads, open file descriptors), read the same way by each.
use std::io;

/// A process's figures from /proc.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ProcessFigures {
    pub rss_mib: f64,
    pub threads: u64,
    pub fds: u64,
}

/// The figures of process `pid` (`None`: this process).
pub fn process_figures(pid: Option<u32>) -> io::Result<ProcessFigures> {
    let dir = pid.map_or_else(|| "/proc/self".to_string(), |pid| format!("/proc/{pid}"));
    let status = std::fs::read_to_string(format!("{dir}/status"))?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    let missing = |name: &str| io::Error::other(format!("no {name} in {dir}/status"));
    Ok(ProcessFigures {
        rss_mib: field("VmRSS:").ok_or_else(|| missing("VmRSS"))? as f64 / 1024.0,
        threads: field("Threads:").ok_or_else(|| missing("Threads"))?,
        fds: std::fs::read_dir(format!("{dir}/fd"))?.count() as u64,
    })
}

/// Resident memory of process `pid` (`None`: this process), MiB; NaN when
/// /proc cannot tell (a benchmark prints it rather than stop).
pub fn rss_mib(pid: Option<u32>) -> f64 {
    process_figures(pid).map_or(f64::NAN, |figures| figures.rss_mib)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_a_thread_and_open_files() {
        let figures = process_figures(None).unwrap();
        assert!(figures.rss_mib > 0.1, "{figures:?}");
        assert!(figures.threads >= 1 && figures.fds >= 3, "{figures:?}");
        assert!(process_figures(Some(u32::MAX)).is_err(), "no such process");
        assert!(rss_mib(Some(u32::MAX)).is_nan());
    }
}

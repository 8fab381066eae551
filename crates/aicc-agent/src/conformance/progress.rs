//! Progress on stderr: one bar redrawn in place on a terminal, one line
//! per scenario otherwise (CI logs).
use std::io::Write;

use super::report::Status;

const BAR_WIDTH: usize = 24;

pub struct Progress {
    total: usize,
    done: usize,
    passed: usize,
    failed: usize,
    terminal: bool,
    out: Box<dyn Write + Send>,
}

/// The bar line: `[ 3/29] [######..........] 2 passed, 1 failed  protocol/name`.
pub fn bar_line(done: usize, total: usize, passed: usize, failed: usize, current: &str) -> String {
    let filled = (done * BAR_WIDTH).checked_div(total).unwrap_or(BAR_WIDTH).min(BAR_WIDTH);
    let width = total.to_string().len();
    format!(
        "[{done:>width$}/{total}] [{}{}] {passed} passed, {failed} failed  {current}",
        "#".repeat(filled),
        ".".repeat(BAR_WIDTH - filled)
    )
}

/// The line for a finished scenario (not on a terminal, and failures on one).
pub fn result_line(
    index: usize,
    total: usize,
    scenario: &str,
    status: Status,
    duration_s: f64,
    reason: Option<&str>,
) -> String {
    let width = total.to_string().len();
    let word = match status {
        Status::Passed => "pass",
        Status::Failed => "FAIL",
        Status::Skipped => "SKIP",
        Status::NotSelected => "skip",
    };
    match reason {
        Some(reason) => {
            format!("[{index:>width$}/{total}] {word} {scenario} ({duration_s:.1} s): {reason}")
        }
        None => format!("[{index:>width$}/{total}] {word} {scenario} ({duration_s:.1} s)"),
    }
}

impl Progress {
    pub fn new(total: usize, terminal: bool, out: Box<dyn Write + Send>) -> Self {
        Self { total, done: 0, passed: 0, failed: 0, terminal, out }
    }

    /// For stderr, redrawing when it is a terminal.
    pub fn stderr(total: usize) -> Self {
        use std::io::IsTerminal;
        Self::new(total, std::io::stderr().is_terminal(), Box::new(std::io::stderr()))
    }

    pub fn start(&mut self, scenario: &str) {
        if self.terminal {
            let line = bar_line(
                self.done,
                self.total,
                self.passed,
                self.failed,
                &format!("running {scenario}"),
            );
            let _ = write!(self.out, "\r\x1b[2K{line}");
            let _ = self.out.flush();
        }
    }

    pub fn finish(
        &mut self,
        scenario: &str,
        status: Status,
        duration_s: f64,
        reason: Option<&str>,
    ) {
        self.done += 1;
        match status {
            Status::Passed => self.passed += 1,
            Status::Failed => self.failed += 1,
            Status::Skipped | Status::NotSelected => {}
        }
        let line = result_line(self.done, self.total, scenario, status, duration_s, reason);
        if self.terminal {
            // Failures stay on screen above the bar.
            if status == Status::Failed {
                let _ = writeln!(self.out, "\r\x1b[2K{line}");
            }
            let bar = bar_line(self.done, self.total, self.passed, self.failed, scenario);
            let _ = write!(self.out, "\r\x1b[2K{bar}");
        } else {
            let _ = writeln!(self.out, "{line}");
        }
        let _ = self.out.flush();
    }

    /// Ends the bar's line.
    pub fn end(&mut self) {
        if self.terminal {
            let _ = writeln!(self.out);
            let _ = self.out.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_show_counts_and_outcome() {
        assert_eq!(
            bar_line(1, 4, 1, 0, "protocol/x"),
            "[1/4] [######..................] 1 passed, 0 failed  protocol/x"
        );
        assert_eq!(
            result_line(3, 12, "protocol/y", Status::Failed, 1.25, Some("step 2: boom")),
            "[ 3/12] FAIL protocol/y (1.2 s): step 2: boom"
        );
    }

    #[test]
    fn a_log_gets_one_line_per_scenario_and_a_terminal_a_redrawn_bar() {
        let sink = Sink::default();
        let mut log = Progress::new(2, false, Box::new(sink.clone()));
        log.start("protocol/a");
        log.finish("protocol/a", Status::Passed, 0.1, None);
        log.finish("protocol/b", Status::Failed, 0.2, Some("why"));
        log.end();
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "[1/2] pass protocol/a (0.1 s)\n[2/2] FAIL protocol/b (0.2 s): why\n");

        let sink = Sink::default();
        let mut bar = Progress::new(2, true, Box::new(sink.clone()));
        bar.start("protocol/a");
        bar.finish("protocol/a", Status::Failed, 0.1, Some("why"));
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.starts_with("\r\x1b[2K[0/2]")
                && text.contains("FAIL protocol/a (0.1 s): why\n")
                && text.ends_with("0 passed, 1 failed  protocol/a"),
            "{text:?}"
        );
    }
}

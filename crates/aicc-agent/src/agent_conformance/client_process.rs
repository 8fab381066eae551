//! The client under test, run as a subprocess from a command template
//! (`"PATH/aicc --port {port}"`), its output captured as it comes.
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Output kept per stream at most; the rest is counted, not stored.
const OUTPUT_CAPACITY_BYTES: usize = 1 << 20;

/// A shell command line with `{port}` where the fake bridge's port goes.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientCommand {
    template: String,
}

/// A client command without `{port}`: it could not reach the fake bridge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the client command must contain {{port}} where the port goes, got '{template}'")]
pub struct NoPortPlaceholder {
    pub template: String,
}

impl ClientCommand {
    pub fn new(template: &str) -> Result<Self, NoPortPlaceholder> {
        if !template.contains("{port}") {
            return Err(NoPortPlaceholder { template: template.to_string() });
        }
        Ok(Self { template: template.to_string() })
    }

    pub fn template(&self) -> &str {
        &self.template
    }

    /// The line `sh` runs: the template with the port, then the driver
    /// arguments passed through unchanged as "$@".
    fn shell_line(&self, port: u16) -> String {
        format!("{} \"$@\"", self.template.replace("{port}", &port.to_string()))
    }
}

/// One output stream, watched as it grows.
#[derive(Default)]
pub struct OutputWatch {
    state: Mutex<Captured>,
    grown: Condvar,
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped_bytes: usize,
}

impl OutputWatch {
    fn push(&self, chunk: &[u8]) {
        let Ok(mut state) = self.state.lock() else { return };
        let room = OUTPUT_CAPACITY_BYTES.saturating_sub(state.bytes.len());
        let kept = chunk.len().min(room);
        state.bytes.extend_from_slice(&chunk[..kept]);
        state.dropped_bytes += chunk.len() - kept;
        self.grown.notify_all();
    }

    /// Everything so far, as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        self.state
            .lock()
            .map(|s| String::from_utf8_lossy(&s.bytes).into_owned())
            .unwrap_or_default()
    }

    fn complete_lines(bytes: &[u8]) -> usize {
        bytes.iter().filter(|&&b| b == b'\n').count()
    }

    /// Waits until `count` complete lines were written, or `timeout`.
    pub fn wait_for_lines(&self, count: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let Ok(mut state) = self.state.lock() else { return false };
        loop {
            if Self::complete_lines(&state.bytes) >= count {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = match self.grown.wait_timeout(state, deadline - now) {
                Ok((state, _)) => state,
                Err(_) => return false,
            };
        }
    }
}

/// How the client ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Still running at the time limit: it was killed.
    TimedOut,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exit {code}"),
            Exit::Signal(signal) => write!(f, "killed by signal {signal}"),
            Exit::TimedOut => write!(f, "timed out"),
        }
    }
}

/// A finished run of the client.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientRun {
    pub args: Vec<String>,
    pub exit: Exit,
    pub stdout: String,
    pub stderr: String,
}

/// A client process that is running.
pub struct RunningClient {
    child: Child,
    args: Vec<String>,
    stdout: Arc<OutputWatch>,
    stderr: Arc<OutputWatch>,
    readers: Vec<JoinHandle<()>>,
}

impl RunningClient {
    /// Starts `command` for `port` with the driver arguments, in its own
    /// process group (so that a time-out kills all of it).
    pub fn start(command: &ClientCommand, port: u16, args: &[String]) -> std::io::Result<Self> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command.shell_line(port))
            .arg("aicc-client")
            .args(args)
            .env_remove("AICC_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let (stdout, stderr) = (Arc::new(OutputWatch::default()), Arc::new(OutputWatch::default()));
        let mut readers = Vec::new();
        if let Some(pipe) = child.stdout.take() {
            readers.push(pump(pipe, stdout.clone()));
        }
        if let Some(pipe) = child.stderr.take() {
            readers.push(pump(pipe, stderr.clone()));
        }
        Ok(Self { child, args: args.to_vec(), stdout, stderr, readers })
    }

    /// The client's standard output, as it grows.
    pub fn stdout(&self) -> Arc<OutputWatch> {
        self.stdout.clone()
    }

    /// Waits for the client to end, killing it after `timeout`. The group
    /// is signalled only while its leader is unreaped (running, or exited
    /// and not yet waited for), so its id cannot belong to anyone else.
    pub fn finish(mut self, timeout: Duration) -> ClientRun {
        let deadline = Instant::now() + timeout;
        let timed_out = loop {
            if leader_has_exited(self.child.id()) {
                break false;
            }
            if Instant::now() >= deadline {
                break true;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // The whole group goes, so that no grandchild holds the pipes open;
        // only then is the leader reaped.
        self.kill_group();
        let exit = match self.child.wait() {
            _ if timed_out => Exit::TimedOut,
            Ok(status) => {
                status.code().map_or_else(|| Exit::Signal(status.signal().unwrap_or(0)), Exit::Code)
            }
            Err(_) => Exit::TimedOut,
        };
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        ClientRun {
            args: self.args.clone(),
            exit,
            stdout: self.stdout.text(),
            stderr: self.stderr.text(),
        }
    }

    /// Must only be called before `child.wait()` reaped the leader.
    fn kill_group(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
    }
}

/// Whether the (unreaped) child `pid` has exited: a zombie, seen in
/// `/proc/PID/stat` without reaping it. Unreadable is taken as running, so
/// the client is then ended by the time limit, never by a guess.
fn leader_has_exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| stat_says_exited(&stat))
}

/// The state field follows the command name, which is in parentheses and
/// may itself hold spaces and parentheses: it is read after the last ')'.
fn stat_says_exited(stat: &str) -> bool {
    let state = stat.rfind(')').and_then(|end| stat[end + 1..].split_whitespace().next());
    matches!(state, Some("Z" | "X"))
}

fn pump(mut pipe: impl Read + Send + 'static, watch: Arc<OutputWatch>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        while let Ok(count) = pipe.read(&mut buffer) {
            if count == 0 {
                break;
            }
            watch.push(&buffer[..count]);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_client(template: &str, args: &[&str], timeout: Duration) -> ClientRun {
        let command = ClientCommand::new(template).unwrap();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        RunningClient::start(&command, 4321, &args).unwrap().finish(timeout)
    }

    #[test]
    fn the_template_needs_a_port_placeholder() {
        assert!(ClientCommand::new("aicc --port 1").unwrap_err().to_string().contains("{port}"));
    }

    #[test]
    fn arguments_pass_through_unchanged_and_output_and_exit_are_captured() {
        let run = run_client(
            "printf '%s|' --port {port}",
            &["call", "move", r#"{"forward": 0.3}"#],
            Duration::from_secs(10),
        );
        assert_eq!(run.exit, Exit::Code(0));
        assert_eq!(run.stdout, r#"--port|4321|call|move|{"forward": 0.3}|"#);
        let failing =
            run_client("sh -c 'echo oops >&2; exit 3' {port}", &[], Duration::from_secs(10));
        assert_eq!((failing.exit, failing.stderr.as_str()), (Exit::Code(3), "oops\n"));
    }

    #[test]
    fn a_client_that_does_not_end_is_killed_and_reported() {
        let run = run_client("sleep 30 # {port}", &[], Duration::from_millis(300));
        assert_eq!(run.exit, Exit::TimedOut);
    }

    #[test]
    fn an_exited_leader_is_recognised_from_its_stat_line_whatever_its_name() {
        assert!(stat_says_exited("4242 (sh) Z 1 4242 4242 0 -1"));
        assert!(stat_says_exited("4242 (a) b) (c) Z 1 4242"));
        assert!(!stat_says_exited("4242 (sh) S 1 4242 4242 0 -1"));
        assert!(!stat_says_exited("4242 (Z) R 1"), "the name is not the state");
        assert!(!stat_says_exited(""));
    }

    #[test]
    fn an_exited_client_is_seen_as_exited_before_it_is_reaped() {
        let command = ClientCommand::new("true {port}").unwrap();
        let client = RunningClient::start(&command, 1, &[]).unwrap();
        let pid = client.child.id();
        // Still a zombie (nobody reaped it): its pid, and so its group id, stay reserved.
        while !leader_has_exited(pid) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "the leader was reaped early"
        );
        assert_eq!(client.finish(Duration::from_secs(10)).exit, Exit::Code(0));
    }

    #[test]
    fn a_grandchild_holding_the_output_open_is_ended_with_its_group() {
        let run =
            run_client("sh -c 'sleep 30 & echo started' {port}", &[], Duration::from_secs(10));
        assert_eq!((run.exit, run.stdout.as_str()), (Exit::Code(0), "started\n"));
    }

    #[test]
    fn lines_can_be_waited_for_as_they_are_written() {
        let command = ClientCommand::new("sh -c 'echo one; echo two; sleep 30' {port}").unwrap();
        let client = RunningClient::start(&command, 1, &[]).unwrap();
        assert!(client.stdout().wait_for_lines(2, Duration::from_secs(10)));
        assert!(!client.stdout().wait_for_lines(3, Duration::from_millis(100)));
        let run = client.finish(Duration::from_millis(10));
        assert_eq!((run.exit, run.stdout.as_str()), (Exit::TimedOut, "one\ntwo\n"));
    }
}

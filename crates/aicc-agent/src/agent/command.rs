//! A backend that is any program speaking JSON lines on stdio, for agents
//! written in other languages. First line to the program: `{"type":
//! "start", "goal", "tools": [manifest descriptors]}`; then, at each wake,
//! an observation (see [`super::observation_json`]). The program answers
//! each line with one decision line: `{"calls": [{"tool", "input"}]}`,
//! `{"wait": true}` or `{"done": true, "success": bool, "summary": "..."}`.
//! A line that is not JSON is answered as a malformed call (the loop goes
//! on); a program that exits is a failed backend; one that does not answer
//! in time is timed out by the loop (and killed when dropped).
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{
    decision_from_json, observation_json, Backend, Decision, Observation, Request, ToolSpec,
};

/// Longest decision line, bytes.
const MAX_LINE_BYTES: usize = 1 << 20;
/// Lines queued to or from the program.
const QUEUE: usize = 4;

/// The program, its stdin and stdout served by a thread each (blocking
/// pipes stay off the runtime); killed when dropped.
pub struct CommandBackend {
    program: String,
    goal: String,
    child: Child,
    to_program: mpsc::Sender<String>,
    from_program: mpsc::Receiver<Result<String, String>>,
    started: bool,
}

impl CommandBackend {
    /// Starts `argv` (program and arguments), its stderr inherited.
    pub fn spawn(argv: &[String], goal: &str) -> Result<Self, String> {
        let (program, args) =
            argv.split_first().ok_or("the command backend needs a program (after --)")?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (to_program, mut lines_out) = mpsc::channel::<String>(QUEUE);
        let (lines_in, from_program) = mpsc::channel(QUEUE);
        std::thread::spawn(move || {
            while let Some(line) = lines_out.blocking_recv() {
                if stdin.write_all(line.as_bytes()).and_then(|()| stdin.flush()).is_err() {
                    break;
                }
            }
        });
        let name = program.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                let outcome = match (&mut reader).take(MAX_LINE_BYTES as u64).read_line(&mut line) {
                    Ok(0) => Err(format!("{name} closed its output (exited?)")),
                    Ok(_) if !line.ends_with('\n') && line.len() >= MAX_LINE_BYTES => {
                        Err(format!("{name} wrote a line longer than {MAX_LINE_BYTES} bytes"))
                    }
                    Ok(_) => Ok(line),
                    Err(e) => Err(format!("reading from {name}: {e}")),
                };
                let last = outcome.is_err();
                if lines_in.blocking_send(outcome).is_err() || last {
                    break;
                }
            }
        });
        Ok(Self {
            program: program.clone(),
            goal: goal.into(),
            child,
            to_program,
            from_program,
            started: false,
        })
    }

    async fn send(&mut self, value: &Value) -> Result<(), String> {
        self.to_program
            .send(format!("{value}\n"))
            .await
            .map_err(|_| format!("{} no longer reads its input", self.program))
    }
}

use std::io::Read as _;

impl Drop for CommandBackend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Backend for CommandBackend {
    fn name(&self) -> String {
        format!("command {}", self.program)
    }

    fn decide<'a>(
        &'a mut self,
        tools: &'a [ToolSpec],
        observation: &'a Observation,
    ) -> BoxFuture<'a, Result<Decision, String>> {
        async move {
            if !self.started {
                self.started = true;
                let start = json!({ "type": "start", "goal": self.goal, "tools": tools.iter().map(|t| t.descriptor.clone()).collect::<Vec<_>>() });
                self.send(&start).await?;
            }
            self.send(&observation_json(observation)).await?;
            let line = self.from_program.recv().await.ok_or_else(|| format!("{} is gone", self.program))??;
            match serde_json::from_str::<Value>(line.trim()) {
                Ok(value) => decision_from_json(&value),
                Err(e) => Ok(Decision::Call(vec![Request { tool: String::new(), input: Err(format!("the decision line is not JSON ({e}): {}", line.trim())), id: None }])),
            }
        }
        .boxed()
    }
}

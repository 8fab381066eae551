//! The interactive shell: one line per command (`call move {"forward":0.3}`,
//! `events 5`, `manifest`, ...), with persistent history and completion of
//! commands and tool names. The connection is served (heartbeats answered,
//! events kept in order) while the user types.
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};

use super::commands::{events_command, parse_input, run, Command};
use super::error::ClientError;
use super::session::Session;

/// The shell's words, for completion and `help`.
pub const SHELL_COMMANDS: [&str; 8] =
    ["call", "events", "vision", "manifest", "tools", "help", "quit", "exit"];
/// An `events` in the shell without a count or duration stops after this.
pub const SHELL_EVENTS_DEFAULT_S: f64 = 10.0;
const HISTORY_ENTRIES: usize = 1000;

pub const HELP: &str = "\
commands:
  call TOOL [JSON]                 call a tool, e.g. call move {\"forward\":0.3}
  events [N] [--count N] [--for-s S] [--topic T]...
                                   events in tick order (at most 10 s unless bounded)
  vision [--out FILE] [JSON]       the camera picture, written as PNG (frame.png)
  manifest                         the session manifest
  tools                            the tools and whether this session may call them
  help                             this text
  quit                             leave (also exit, Ctrl-D)";

/// A line typed in the shell.
#[derive(Debug, Clone, PartialEq)]
pub enum ShellLine {
    Empty,
    Help,
    Quit,
    Run(Command),
}

/// Parses one shell line; `Err` is a usage error naming what was wrong.
pub fn parse_shell_line(line: &str) -> Result<ShellLine, ClientError> {
    let line = line.trim();
    let (word, rest) =
        line.split_once(char::is_whitespace).map_or((line, ""), |(w, r)| (w, r.trim()));
    let usage = |m: String| ClientError::Usage(m);
    match word {
        "" => Ok(ShellLine::Empty),
        "help" | "?" => Ok(ShellLine::Help),
        "quit" | "exit" => Ok(ShellLine::Quit),
        "manifest" => Ok(ShellLine::Run(Command::Manifest)),
        "tools" => Ok(ShellLine::Run(Command::Tools)),
        "call" => {
            let (tool, input) =
                rest.split_once(char::is_whitespace).map_or((rest, ""), |(t, i)| (t, i));
            if tool.is_empty() {
                return Err(usage("call needs a tool name: call TOOL [JSON]".into()));
            }
            Ok(ShellLine::Run(Command::Call {
                tool: tool.into(),
                input: parse_input(tool, Some(input))?,
            }))
        }
        "events" => {
            let (mut count, mut for_s, mut topics) = (None, None, Vec::new());
            let mut words = rest.split_whitespace();
            while let Some(word) = words.next() {
                let mut value =
                    |flag: &str| words.next().ok_or_else(|| usage(format!("{flag} needs a value")));
                match word {
                    "--count" if count.is_some() => return Err(usage("events: the count is given twice (events [N] or --count N, once)".into())),
                    "--count" => count = Some(parse_number::<usize>("--count", value("--count")?)?),
                    "--for-s" => for_s = Some(parse_number::<f64>("--for-s", value("--for-s")?)?),
                    "--topic" => topics.push(value("--topic")?.to_string()),
                    number if number.parse::<usize>().is_ok() && count.is_some() => {
                        return Err(usage(format!("events: the count is given twice ('{number}'; events [N] or --count N, once)")))
                    }
                    number if number.parse::<usize>().is_ok() => count = Some(parse_number("count", number)?),
                    other => return Err(usage(format!("events: unexpected '{other}' (events [N] [--count N] [--for-s S] [--topic T]...)"))),
                }
            }
            if count.is_none() && for_s.is_none() {
                for_s = Some(SHELL_EVENTS_DEFAULT_S);
            }
            Ok(ShellLine::Run(events_command(count, for_s, topics)?))
        }
        "vision" => {
            // `--out` only as a whole word: `--outX.png` is not `--out X.png`.
            let out_flag = rest
                .strip_prefix("--out")
                .filter(|after| after.is_empty() || after.starts_with(char::is_whitespace));
            let (out, input) = match out_flag {
                Some(after) => {
                    let after = after.trim_start();
                    let (path, input) =
                        after.split_once(char::is_whitespace).map_or((after, ""), |(p, i)| (p, i));
                    if path.is_empty() {
                        return Err(usage("--out needs a file name".into()));
                    }
                    (PathBuf::from(path), input)
                }
                None => (PathBuf::from("frame.png"), rest),
            };
            Ok(ShellLine::Run(Command::Vision { out, input: parse_input("vision", Some(input))? }))
        }
        other => Err(usage(format!("unknown command '{other}' (try help)"))),
    }
}

fn parse_number<T: std::str::FromStr>(what: &str, text: &str) -> Result<T, ClientError> {
    text.parse().map_err(|_| ClientError::Usage(format!("{what} must be a number, got '{text}'")))
}

/// Completion of command words, then tool names after `call`.
#[derive(Clone, Default)]
pub struct ShellCompleter {
    pub tool_ids: Arc<Mutex<Vec<String>>>,
}

impl ShellCompleter {
    /// Where the completed word starts, and its candidates.
    pub fn candidates(&self, line: &str, pos: usize) -> (usize, Vec<String>) {
        let before = &line[..pos];
        // After the last whitespace, which may be several bytes long (a
        // no-break space): a byte past its start would split the character.
        let start = before
            .char_indices()
            .rfind(|(_, c)| c.is_whitespace())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let partial = &before[start..];
        let earlier: Vec<&str> = before[..start].split_whitespace().collect();
        let pool: Vec<String> = match earlier.as_slice() {
            [] => SHELL_COMMANDS.iter().map(|c| c.to_string()).collect(),
            ["call"] => self.tool_ids.lock().map(|ids| ids.clone()).unwrap_or_default(),
            _ => Vec::new(),
        };
        let mut matches: Vec<String> =
            pool.into_iter().filter(|c| c.starts_with(partial)).collect();
        matches.sort();
        (start, matches)
    }
}

impl Completer for ShellCompleter {
    type Candidate = Pair;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, words) = self.candidates(line, pos);
        Ok((
            start,
            words
                .into_iter()
                .map(|w| Pair { display: w.clone(), replacement: format!("{w} ") })
                .collect(),
        ))
    }
}
impl Hinter for ShellCompleter {
    type Hint = String;
}
impl Highlighter for ShellCompleter {}
impl Validator for ShellCompleter {}
impl Helper for ShellCompleter {}

/// What the shell does after a command.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterCommand {
    /// Prompt again, having printed the command's error if any.
    GoOn(Option<ClientError>),
    /// Leave with this error (its exit code is the shell's).
    End(ClientError),
}

/// A session that ended (e.g. `session_expired`, the connection closed)
/// ends the shell with why; so does a broken connection or protocol. A
/// refusal, a usage error or an AICC error about one call does not.
pub fn after_command(
    result: Result<(), ClientError>,
    session_ended: Option<&ClientError>,
) -> AfterCommand {
    if let Some(ended) = session_ended {
        return AfterCommand::End(ended.clone());
    }
    match result {
        Ok(()) => AfterCommand::GoOn(None),
        Err(error @ (ClientError::Transport(_) | ClientError::Protocol(_))) => {
            AfterCommand::End(error)
        }
        Err(error) => AfterCommand::GoOn(Some(error)),
    }
}

/// `$AICC_HISTORY`, else `~/.aicc_history`; `None` without either.
pub fn history_path() -> Option<PathBuf> {
    history_path_from(std::env::var_os("AICC_HISTORY"), std::env::var_os("HOME"))
}

fn history_path_from(aicc_history: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    match aicc_history {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => home.filter(|h| !h.is_empty()).map(|home| PathBuf::from(home).join(".aicc_history")),
    }
}

/// Runs the shell until `quit`, end of input, or a broken connection
/// (returned: the bridge failed or broke the protocol).
pub async fn run_shell(mut session: Session) -> Result<(), ClientError> {
    let completer = ShellCompleter::default();
    *completer
        .tool_ids
        .lock()
        .map_err(|_| ClientError::Usage("completion state poisoned".into()))? =
        session.manifest().tool_ids();
    let config = rustyline::Config::builder()
        .max_history_size(HISTORY_ENTRIES)
        .map_err(|e| ClientError::Usage(format!("history: {e}")))?
        .auto_add_history(false)
        .build();
    let mut editor: Editor<ShellCompleter, DefaultHistory> = Editor::with_config(config)
        .map_err(|e| ClientError::Usage(format!("the terminal cannot be edited: {e}")))?;
    editor.set_helper(Some(completer.clone()));
    let history = history_path();
    if let Some(path) = &history {
        let _ = editor.load_history(path); // none yet is fine
    }
    println!(
        "connected, session {}. Type help for commands.",
        session.session_id().unwrap_or("(unnamed)")
    );

    // rustyline blocks; it runs on its own thread and hands lines over, one
    // at a time, waiting until each has run before prompting again.
    let (line_tx, line_rx) = sync_channel::<Option<String>>(1);
    let (done_tx, done_rx) = sync_channel::<()>(1);
    let reader = std::thread::spawn(move || loop {
        match editor.readline("aicc> ") {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                    if let Some(path) = &history {
                        if let Err(error) = editor.append_history(path) {
                            eprintln!("warning: history not saved to {}: {error}", path.display());
                        }
                    }
                }
                if line_tx.send(Some(line)).is_err() || done_rx.recv().is_err() {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => {}
            Err(_) => {
                let _ = line_tx.send(None);
                break;
            }
        }
    });

    let outcome = loop {
        let line = match line_rx.try_recv() {
            Ok(Some(line)) => line,
            Ok(None) | Err(TryRecvError::Disconnected) => break Ok(()),
            Err(TryRecvError::Empty) => {
                if let Err(error) = session.idle(Duration::from_millis(100)).await {
                    // The reader sits in readline with the terminal in raw
                    // mode: let it finish so that the terminal is restored.
                    eprintln!("\n{error}\nthe session is over: press Enter to leave");
                    drop(line_rx);
                    let _ = reader.join();
                    return Err(error);
                }
                continue;
            }
        };
        let command = match parse_shell_line(&line) {
            Ok(ShellLine::Empty) => None,
            Ok(ShellLine::Help) => {
                println!("{HELP}");
                None
            }
            Ok(ShellLine::Quit) => break Ok(()),
            Ok(ShellLine::Run(command)) => Some(command),
            Err(error) => {
                eprintln!("{error}");
                None
            }
        };
        if let Some(command) = command {
            let mut stdout = std::io::stdout();
            let result =
                run(&mut session, &command, &mut stdout, &mut |w| eprintln!("warning: {w}")).await;
            let _ = stdout.flush();
            if let Ok(mut ids) = completer.tool_ids.lock() {
                *ids = session.manifest().tool_ids();
            }
            match after_command(result, session.ended()) {
                AfterCommand::GoOn(None) => {}
                AfterCommand::GoOn(Some(error)) => eprintln!("{error}"),
                AfterCommand::End(error) => break Err(error),
            }
        }
        if done_tx.send(()).is_err() {
            break Ok(());
        }
    };
    // The reader waits for "done" (or has ended): it stops now.
    drop(done_tx);
    drop(line_rx);
    let _ = reader.join();
    if outcome.is_ok() {
        let _ = session.close().await;
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shell_lines_become_commands() {
        assert_eq!(parse_shell_line("  ").unwrap(), ShellLine::Empty);
        assert_eq!(parse_shell_line("quit").unwrap(), ShellLine::Quit);
        assert_eq!(parse_shell_line("manifest").unwrap(), ShellLine::Run(Command::Manifest));
        assert_eq!(
            parse_shell_line(r#"call move {"forward": 0.3, "left": 0}"#).unwrap(),
            ShellLine::Run(Command::Call {
                tool: "move".into(),
                input: json!({ "forward": 0.3, "left": 0 })
            })
        );
        assert_eq!(
            parse_shell_line("call proprioception").unwrap(),
            ShellLine::Run(Command::Call { tool: "proprioception".into(), input: json!({}) })
        );
        assert_eq!(
            parse_shell_line("events 5").unwrap(),
            ShellLine::Run(Command::Events { count: Some(5), for_s: None, topics: vec![] })
        );
        assert_eq!(
            parse_shell_line("events --for-s 2.5 --topic collision --topic governor").unwrap(),
            ShellLine::Run(Command::Events {
                count: None,
                for_s: Some(2.5),
                topics: vec!["collision".into(), "governor".into()]
            })
        );
        assert_eq!(
            parse_shell_line("events").unwrap(),
            ShellLine::Run(Command::Events {
                count: None,
                for_s: Some(SHELL_EVENTS_DEFAULT_S),
                topics: vec![]
            })
        );
        assert_eq!(
            parse_shell_line(r#"vision --out /tmp/a.png {"format":"png"}"#).unwrap(),
            ShellLine::Run(Command::Vision {
                out: "/tmp/a.png".into(),
                input: json!({ "format": "png" })
            })
        );
        assert_eq!(
            parse_shell_line("vision").unwrap(),
            ShellLine::Run(Command::Vision { out: "frame.png".into(), input: json!({}) })
        );
    }

    #[test]
    fn bad_shell_lines_say_what_is_wrong() {
        for (line, expected) in [
            ("teleport", "unknown command 'teleport'"),
            ("call", "needs a tool name"),
            ("call move {forward}", "not valid JSON"),
            ("events --count", "--count needs a value"),
            ("events --count many", "--count must be a number"),
            ("events 0", "at least 1"),
            ("events soon", "unexpected 'soon'"),
            ("vision --out", "--out needs a file name"),
            ("vision --out   ", "--out needs a file name"),
            ("vision --outX.png", "not valid JSON"),
            ("events 5 --count 3", "count is given twice"),
            ("events --count 3 5", "count is given twice"),
            ("events --count 3 --count 4", "count is given twice"),
        ] {
            let error = parse_shell_line(line).unwrap_err();
            assert!(
                matches!(&error, ClientError::Usage(m) if m.contains(expected)),
                "{line} -> {error}"
            );
        }
    }

    #[test]
    fn a_session_that_ended_ends_the_shell_with_its_exit_code() {
        let expired = ClientError::Remote(super::super::error::RemoteError {
            code: "session_expired".into(),
            message: "lease gone".into(),
            retryable: false,
        });
        assert_eq!(
            after_command(Err(expired.clone()), Some(&expired)),
            AfterCommand::End(expired.clone())
        );
        assert_eq!(after_command(Ok(()), Some(&expired)), AfterCommand::End(expired.clone()));
        assert_eq!(
            AfterCommand::End(expired.clone()),
            after_command(Err(ClientError::Refused("x".into())), Some(&expired))
        );
        assert_eq!(expired.exit_code(), 3);
        let call_failed = ClientError::Remote(super::super::error::RemoteError {
            code: "execution_failed".into(),
            message: "m".into(),
            retryable: false,
        });
        assert_eq!(
            after_command(Err(call_failed.clone()), None),
            AfterCommand::GoOn(Some(call_failed))
        );
        assert_eq!(after_command(Ok(()), None), AfterCommand::GoOn(None));
        let broken = ClientError::Protocol("bad line".into());
        assert_eq!(after_command(Err(broken.clone()), None), AfterCommand::End(broken));
    }

    #[test]
    fn completion_offers_commands_then_tool_names() {
        let completer = ShellCompleter::default();
        *completer.tool_ids.lock().unwrap() =
            vec!["move".into(), "memory_query".into(), "vision".into()];
        assert_eq!(completer.candidates("ev", 2), (0, vec!["events".to_string()]));
        assert_eq!(
            completer.candidates("call m", 6),
            (5, vec!["memory_query".to_string(), "move".to_string()])
        );
        assert_eq!(completer.candidates("call ", 5).1.len(), 3);
        assert!(
            completer.candidates("call move {", 11).1.is_empty(),
            "no completion inside the input"
        );
        let no_break = "call\u{a0}m";
        assert_eq!(
            completer.candidates(no_break, no_break.len()),
            (6, vec!["memory_query".to_string(), "move".to_string()]),
            "a multi-byte space"
        );
    }

    #[test]
    fn the_history_file_is_aicc_history_else_in_home() {
        let some = |s: &str| Some(OsString::from(s));
        assert_eq!(
            history_path_from(some("/tmp/h"), some("/home/u")),
            Some(PathBuf::from("/tmp/h"))
        );
        assert_eq!(
            history_path_from(some(""), some("/home/u")),
            Some(PathBuf::from("/home/u/.aicc_history"))
        );
        assert_eq!(history_path_from(None, None), None);
    }
}

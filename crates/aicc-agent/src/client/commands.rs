//! The client's commands, shared by the command line and the shell: each
//! runs against an open session and writes what it shows to `out`.
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::error::ClientError;
use super::ordering::OrderedEvent;
use super::picture;
use super::session::Session;
use super::table::tools_table;

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// The manifest, pretty JSON.
    Manifest,
    /// The tools table.
    Tools,
    /// One tool call; prints the output as JSON.
    Call { tool: String, input: Value },
    /// Events as JSON lines in tick order, until `count` or `for_s`.
    Events { count: Option<usize>, for_s: Option<f64>, topics: Vec<String> },
    /// Calls `vision` and writes the picture as a PNG file.
    Vision { out: PathBuf, input: Value },
}

/// Parses a tool input given as text; nothing means `{}`.
pub fn parse_input(tool: &str, text: Option<&str>) -> Result<Value, ClientError> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(Value::Object(Default::default()));
    };
    let value: Value = serde_json::from_str(text).map_err(|e| {
        ClientError::Usage(format!("the input to '{tool}' is not valid JSON ({e}): {text}"))
    })?;
    if !value.is_object() {
        return Err(ClientError::Usage(format!(
            "the input to '{tool}' must be a JSON object, got {value}"
        )));
    }
    Ok(value)
}

/// Checks an `events` command's bounds.
pub fn events_command(
    count: Option<usize>,
    for_s: Option<f64>,
    topics: Vec<String>,
) -> Result<Command, ClientError> {
    if count == Some(0) {
        return Err(ClientError::Usage("--count must be at least 1".into()));
    }
    if let Some(seconds) = for_s {
        if !(seconds.is_finite() && seconds > 0.0 && seconds <= 1e6) {
            return Err(ClientError::Usage(format!(
                "--for-s must be a positive number of seconds, got {seconds}"
            )));
        }
    }
    Ok(Command::Events { count, for_s, topics })
}

/// Runs one command. Warnings go to `warn` as they arise.
pub async fn run(
    session: &mut Session,
    command: &Command,
    out: &mut dyn Write,
    warn: &mut dyn FnMut(&str),
) -> Result<(), ClientError> {
    let result = match command {
        Command::Manifest => {
            let text =
                serde_json::to_string_pretty(&Value::Object(session.manifest().raw().clone()))
                    .unwrap_or_default();
            write_line(out, &text)
        }
        Command::Tools => {
            out.write_all(tools_table(session.manifest()).as_bytes()).map_err(output_error)
        }
        Command::Call { tool, input } => {
            let result = session.call(tool, input).await;
            report_warnings(session, warn);
            let success = result?;
            write_line(out, &serde_json::to_string(&success.output).unwrap_or_default())
        }
        Command::Events { count, for_s, topics } => {
            stream_events(session, *count, *for_s, topics, out, warn).await
        }
        Command::Vision { out: path, input } => {
            let result = session.call("vision", input).await;
            report_warnings(session, warn);
            let success = result?;
            let picture = picture::picture_from_output(&success.output)
                .map_err(|e| ClientError::Protocol(format!("vision: {e}")))?;
            std::fs::write(path, &picture.png)
                .map_err(|e| ClientError::Usage(format!("cannot write {}: {e}", path.display())))?;
            write_line(out, &picture::summary(&success.output, path).to_string())
        }
    };
    report_warnings(session, warn);
    result
}

async fn stream_events(
    session: &mut Session,
    count: Option<usize>,
    for_s: Option<f64>,
    topics: &[String],
    out: &mut dyn Write,
    warn: &mut dyn FnMut(&str),
) -> Result<(), ClientError> {
    if !topics.is_empty() && !subscribed_to_all(session, topics) {
        session.refresh_manifest(Some(topics.to_vec())).await?;
    }
    let until = for_s.map(|seconds| Instant::now() + Duration::from_secs_f64(seconds));
    let wanted = |event: &OrderedEvent| topics.is_empty() || topics.contains(&event.topic);
    let mut shown = 0;
    while count.is_none_or(|count| shown < count) {
        let next = session.next_event(until).await;
        report_warnings(session, warn);
        let Some(event) = next? else { break };
        if wanted(&event) {
            write_line(out, &event.to_json().to_string())?;
            shown += 1;
        }
    }
    if count.is_none_or(|count| shown < count) {
        // Time is up: what is still held for reordering is shown too, in order.
        for event in session.flush_events().into_iter().filter(wanted) {
            write_line(out, &event.to_json().to_string())?;
        }
    }
    Ok(())
}

fn subscribed_to_all(session: &Session, topics: &[String]) -> bool {
    let subscribed = session
        .manifest()
        .raw()
        .get("events")
        .and_then(|e| e.get("subscribed"))
        .and_then(Value::as_array);
    subscribed.is_some_and(|list| {
        topics.iter().all(|topic| list.iter().any(|s| s.as_str() == Some(topic.as_str())))
    })
}

fn report_warnings(session: &mut Session, warn: &mut dyn FnMut(&str)) {
    for warning in session.take_warnings() {
        warn(&warning);
    }
}

/// One line, flushed at once (a reader may act on each line as it comes).
fn write_line(out: &mut dyn Write, line: &str) -> Result<(), ClientError> {
    writeln!(out, "{line}").and_then(|_| out.flush()).map_err(output_error)
}

fn output_error(error: std::io::Error) -> ClientError {
    ClientError::Transport(format!("writing the output: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_json_objects_and_default_to_empty() {
        assert_eq!(parse_input("move", None).unwrap(), serde_json::json!({}));
        assert_eq!(parse_input("move", Some(r#" {"forward":0.3} "#)).unwrap()["forward"], 0.3);
        let error = parse_input("move", Some("{forward:0.3}")).unwrap_err();
        assert!(
            matches!(&error, ClientError::Usage(m) if m.contains("'move' is not valid JSON")),
            "{error}"
        );
        assert!(parse_input("move", Some("[1]"))
            .unwrap_err()
            .to_string()
            .contains("must be a JSON object"));
    }

    #[test]
    fn event_bounds_are_checked() {
        assert!(events_command(Some(0), None, vec![]).is_err());
        assert!(events_command(None, Some(-1.0), vec![]).is_err());
        assert!(events_command(None, Some(f64::NAN), vec![]).is_err());
        assert_eq!(
            events_command(Some(3), Some(1.5), vec![]).unwrap(),
            Command::Events { count: Some(3), for_s: Some(1.5), topics: vec![] }
        );
    }
}

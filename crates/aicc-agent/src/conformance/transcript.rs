//! The last lines a scenario sent and received, for failure reports:
//! bounded, long lines cut, tokens never shown.
use std::collections::VecDeque;

/// Lines kept per scenario.
pub const TRANSCRIPT_LINES: usize = 20;
/// Longest line kept, in characters.
pub const TRANSCRIPT_LINE_CHARS: usize = 400;

#[derive(Debug, Clone, Default)]
pub struct Transcript {
    lines: VecDeque<String>,
    /// Secrets replaced by `<token>` in every line.
    secrets: Vec<String>,
}

/// Which way a line went.
#[derive(Debug, Clone, Copy)]
pub enum Direction {
    Sent,
    Received,
}

impl Transcript {
    pub fn new(secrets: Vec<String>) -> Self {
        Self {
            lines: VecDeque::new(),
            secrets: secrets.into_iter().filter(|s| !s.is_empty()).collect(),
        }
    }

    /// Adds a secret (e.g. a literal token of a scenario) to redact.
    pub fn add_secret(&mut self, secret: &str) {
        if !secret.is_empty() && !self.secrets.iter().any(|s| s == secret) {
            self.secrets.push(secret.to_string());
        }
    }

    /// Records a line (`bytes` without LF) on connection `conn`.
    pub fn record(&mut self, conn: &str, direction: Direction, bytes: &[u8]) {
        let arrow = match direction {
            Direction::Sent => ">",
            Direction::Received => "<",
        };
        // Only the head is decoded: lines may be megabytes long.
        let head = &bytes[..bytes.len().min(TRANSCRIPT_LINE_CHARS * 4 + 256)];
        let mut text = String::from_utf8_lossy(head).into_owned();
        for secret in &self.secrets {
            text = text.replace(secret.as_str(), "<token>");
        }
        let shown: String = text.chars().take(TRANSCRIPT_LINE_CHARS).collect();
        let line = if shown.len() < text.len() || head.len() < bytes.len() {
            format!("{conn}{arrow} {shown}… ({} bytes)", bytes.len())
        } else {
            format!("{conn}{arrow} {shown}")
        };
        self.note(line);
    }

    /// Records a remark (connection opened, closed, ...).
    pub fn note(&mut self, line: String) {
        if self.lines.len() == TRANSCRIPT_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_cut_and_redacted() {
        let mut transcript = Transcript::new(vec!["s3cret".into(), String::new()]);
        transcript.record("main", Direction::Sent, br#"{"auth":{"token":"s3cret"}}"#);
        assert_eq!(transcript.lines(), vec![r#"main> {"auth":{"token":"<token>"}}"#.to_string()]);
        let long = vec![b'x'; 5000];
        transcript.record("main", Direction::Received, &long);
        let last = transcript.lines().pop().unwrap();
        assert!(
            last.starts_with("main< xxx")
                && last.ends_with("… (5000 bytes)")
                && last.chars().count() < TRANSCRIPT_LINE_CHARS + 40,
            "{last}"
        );
        for i in 0..30 {
            transcript.note(format!("n{i}"));
        }
        let lines = transcript.lines();
        assert_eq!(
            (lines.len(), lines[0].as_str(), lines[19].as_str()),
            (TRANSCRIPT_LINES, "n10", "n29")
        );
    }
}

//! Lines that are no AICC at all. A line that looks like HTTP closes the
//! connection at once: a web page can make a browser send a request (a
//! form post, a fetch) to a loopback port, and its body could otherwise be
//! read as AICC, a cross-protocol request (as Redis closes on `POST` and
//! `Host:`). Lines that are not JSON are answered, but a connection that
//! sends `max_undecodable_lines` of them is closed: it is not an agent.
use std::time::Instant;

use super::{ConnId, Core, Output};
use crate::protocol::error::AiccError;
use crate::protocol::message::Correlation;

/// HTTP methods a request line may start with (RFC 9110, and WebDAV's
/// commonest, which browsers' fetch can send).
const HTTP_METHODS: [&str; 11] = [
    "GET", "POST", "PUT", "HEAD", "OPTIONS", "DELETE", "PATCH", "CONNECT", "TRACE", "PROPFIND",
    "MKCOL",
];
/// Header names that start an HTTP header line whatever its order.
const HTTP_HEADERS: [&str; 4] = ["host:", "user-agent:", "origin:", "content-type:"];

/// Whether `line` is an HTTP request line (`METHOD target HTTP/x`) or one of
/// the headers every browser request carries. No JSON message starts so.
pub fn looks_like_http(line: &[u8]) -> bool {
    let line = line.trim_ascii_start();
    let Some(head) = line.get(..line.len().min(64)) else { return false };
    let lower = head.to_ascii_lowercase();
    if HTTP_HEADERS.iter().any(|h| lower.starts_with(h.as_bytes())) {
        return true;
    }
    HTTP_METHODS.iter().any(|method| {
        head.strip_prefix(method.as_bytes()).is_some_and(|rest| rest.first() == Some(&b' '))
    }) && line.windows(6).any(|w| w == b" HTTP/")
}

/// The start of `line` as text for a message (never a whole secret-bearing line).
fn shown(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(&line[..line.len().min(40)]);
    text.chars().filter(|c| !c.is_control()).collect()
}

impl Core {
    /// An HTTP line: one error line, then the connection is closed.
    pub(super) fn refuse_cross_protocol(
        &mut self,
        conn: ConnId,
        line: &[u8],
        now: Instant,
    ) -> Option<Vec<Output>> {
        if !looks_like_http(line) {
            return None;
        }
        self.counters.closed_http += 1;
        tracing::warn!(
            conn,
            line = shown(line),
            "closing a connection that sent HTTP to the AICC listener"
        );
        let error = AiccError::invalid_input(format!("this is an AICC endpoint (newline-delimited JSON), not HTTP: the line '{}' looks like an HTTP request; closing the connection", shown(line)));
        Some(vec![
            self.error_message(conn, error, &Correlation::default(), now),
            Output::Close { conn },
        ])
    }

    /// Counts a line that failed to decode; when it was not JSON at all and
    /// the connection has sent its allowance of such lines, the answer
    /// closes it.
    pub(super) fn count_undecodable(
        &mut self,
        conn: ConnId,
        line: &[u8],
        error: &AiccError,
        now: Instant,
    ) -> Option<Vec<Output>> {
        let not_json =
            serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(line).is_err();
        if !not_json {
            return None;
        }
        let limit = self.config.max_undecodable_lines;
        let state = self.connections.get_mut(&conn)?;
        state.undecodable += 1;
        if state.undecodable < limit {
            return None;
        }
        self.counters.closed_undecodable += 1;
        tracing::warn!(conn, limit, "closing a connection after {limit} lines that were not JSON");
        let error = AiccError::invalid_input(format!("{} ({limit} lines that were not JSON objects on this connection: the limit, security.max_undecodable_lines); closing the connection", error.message));
        Some(vec![
            self.error_message(conn, error, &Correlation::default(), now),
            Output::Close { conn },
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_request_lines_and_browser_headers_are_recognised_and_json_is_not() {
        for http in [
            "POST / HTTP/1.1",
            "GET /favicon.ico HTTP/1.1\r",
            "  OPTIONS * HTTP/1.1",
            "Host: 127.0.0.1:43010",
            "HOST:x",
            "User-Agent: curl/8",
            "Origin: http://evil.example",
            "content-type: text/plain",
        ] {
            assert!(looks_like_http(http.as_bytes()), "{http}");
        }
        for not_http in [
            r#"{"protocol":"aicc/0.1","type":"heartbeat"}"#,
            "GET",
            "POST /x",
            "POSTAL HTTP/1.1",
            "",
            "hello HTTP/1.1",
            r#"{"Host: x"}"#,
        ] {
            assert!(!looks_like_http(not_http.as_bytes()), "{not_http}");
        }
    }
}

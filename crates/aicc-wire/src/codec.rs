//! NDJSON framing with a hard line limit, free of I/O: bytes in, lines out.
//!
//! A line longer than the limit is an error the caller answers and then
//! closes on: reading on after an oversized line could not tell where the
//! next message starts without buffering without bound.

/// What the framer found in the bytes pushed so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// One complete line, without its `\n` (and without a trailing `\r`).
    Line(Vec<u8>),
    /// The current line exceeded the limit; the framer is now poisoned.
    Oversized { limit_bytes: usize },
}

/// Splits a byte stream into lines of at most `max_line_bytes`.
#[derive(Debug)]
pub struct LineFramer {
    buffer: Vec<u8>,
    max_line_bytes: usize,
    /// Set after an oversized line: nothing more is framed.
    poisoned: bool,
}

impl LineFramer {
    pub fn new(max_line_bytes: usize) -> Self {
        Self { buffer: Vec::new(), max_line_bytes, poisoned: false }
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if !self.poisoned {
            self.buffer.extend_from_slice(bytes);
        }
    }

    /// Returns the next complete line, an oversize error, or None when more
    /// bytes are needed.
    pub fn next_frame(&mut self) -> Option<Frame> {
        if self.poisoned {
            return None;
        }
        match self.buffer.iter().position(|&b| b == b'\n') {
            Some(end) if end <= self.max_line_bytes => {
                let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Some(Frame::Line(line))
            }
            Some(_) => self.poison(),
            None if self.buffer.len() > self.max_line_bytes => self.poison(),
            None => None,
        }
    }

    fn poison(&mut self) -> Option<Frame> {
        self.poisoned = true;
        self.buffer = Vec::new();
        Some(Frame::Oversized { limit_bytes: self.max_line_bytes })
    }

    /// Bytes of an incomplete line held back (for status reporting).
    pub fn pending_bytes(&self) -> usize {
        self.buffer.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(framer: &mut LineFramer) -> Vec<Frame> {
        std::iter::from_fn(|| framer.next_frame()).collect()
    }

    #[test]
    fn splits_lines_across_pushes_and_strips_crlf() {
        let mut framer = LineFramer::new(64);
        framer.push(b"{\"a\":1}\r\n{\"b\"");
        assert_eq!(lines(&mut framer), vec![Frame::Line(b"{\"a\":1}".to_vec())]);
        framer.push(b":2}\n");
        assert_eq!(lines(&mut framer), vec![Frame::Line(b"{\"b\":2}".to_vec())]);
        assert_eq!(framer.pending_bytes(), 0);
    }

    #[test]
    fn a_line_of_exactly_the_limit_passes_one_more_byte_fails() {
        let mut framer = LineFramer::new(4);
        framer.push(b"abcd\n");
        assert_eq!(framer.next_frame(), Some(Frame::Line(b"abcd".to_vec())));
        framer.push(b"abcde\n");
        assert_eq!(framer.next_frame(), Some(Frame::Oversized { limit_bytes: 4 }));
        framer.push(b"ok\n");
        assert_eq!(framer.next_frame(), None, "poisoned framer must not frame again");
    }

    #[test]
    fn oversize_is_detected_before_the_newline_arrives() {
        let mut framer = LineFramer::new(8);
        framer.push(&[b'x'; 9]);
        assert_eq!(framer.next_frame(), Some(Frame::Oversized { limit_bytes: 8 }));
        assert_eq!(framer.pending_bytes(), 0, "the oversized bytes are released");
    }
}

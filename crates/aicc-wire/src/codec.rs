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

/// Capacity a framer keeps once its buffer is drained: a connection that
/// once received a long line does not hold its size while idle.
const RETAINED_CAPACITY: usize = 16 * 1024;

/// Splits a byte stream into lines of at most `max_line_bytes`.
#[derive(Debug)]
pub struct LineFramer {
    buffer: Vec<u8>,
    /// Bytes of `buffer` already handed out as lines.
    start: usize,
    /// Bytes of `buffer` known to hold no newline: each byte is scanned once.
    scanned: usize,
    /// Where the next line ends, once found.
    newline: Option<usize>,
    max_line_bytes: usize,
    /// Set after an oversized line: nothing more is framed.
    poisoned: bool,
}

impl LineFramer {
    pub fn new(max_line_bytes: usize) -> Self {
        Self {
            buffer: Vec::new(),
            start: 0,
            scanned: 0,
            newline: None,
            max_line_bytes,
            poisoned: false,
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.poisoned {
            return;
        }
        if self.start > 0 {
            // Drop the lines handed out before growing the buffer.
            self.buffer.drain(..self.start);
            self.scanned -= self.start;
            self.newline = self.newline.map(|at| at - self.start);
            self.start = 0;
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// Whether [`Self::next_frame`] would return a frame now.
    pub fn has_frame(&mut self) -> bool {
        if self.poisoned {
            return false;
        }
        if self.newline.is_none() {
            match self.buffer[self.scanned..].iter().position(|&b| b == b'\n') {
                Some(offset) => self.newline = Some(self.scanned + offset),
                None => self.scanned = self.buffer.len(),
            }
        }
        match self.newline {
            Some(_) => true,
            None => self.buffer.len() - self.start > self.max_line_bytes,
        }
    }

    /// Returns the next complete line, an oversize error, or None when more
    /// bytes are needed.
    pub fn next_frame(&mut self) -> Option<Frame> {
        if !self.has_frame() {
            self.release_if_drained();
            return None;
        }
        let Some(end) = self.newline.take() else { return self.poison() };
        if end - self.start > self.max_line_bytes {
            return self.poison();
        }
        let mut line = self.buffer[self.start..end].to_vec();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        self.start = end + 1;
        self.scanned = self.start;
        self.release_if_drained();
        Some(Frame::Line(line))
    }

    fn release_if_drained(&mut self) {
        if self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
            self.scanned = 0;
            if self.buffer.capacity() > RETAINED_CAPACITY {
                self.buffer.shrink_to(RETAINED_CAPACITY);
            }
        }
    }

    fn poison(&mut self) -> Option<Frame> {
        self.poisoned = true;
        self.buffer = Vec::new();
        self.start = 0;
        self.scanned = 0;
        self.newline = None;
        Some(Frame::Oversized { limit_bytes: self.max_line_bytes })
    }

    /// Bytes of an incomplete line held back (for status reporting).
    pub fn pending_bytes(&self) -> usize {
        self.buffer.len() - self.start
    }

    /// Bytes the framer holds allocated (its cost, for tests and status).
    pub fn capacity_bytes(&self) -> usize {
        self.buffer.capacity()
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

    #[test]
    fn a_drained_framer_gives_back_the_room_of_a_long_line() {
        let mut framer = LineFramer::new(1 << 20);
        let mut long = vec![b'x'; 512 * 1024];
        long.push(b'\n');
        framer.push(&long);
        assert!(framer.capacity_bytes() >= 512 * 1024);
        assert!(matches!(framer.next_frame(), Some(Frame::Line(line)) if line.len() == 512 * 1024));
        assert!(
            framer.capacity_bytes() <= RETAINED_CAPACITY,
            "{} bytes kept",
            framer.capacity_bytes()
        );
    }

    #[test]
    fn lines_are_handed_out_one_at_a_time_and_the_rest_waits() {
        let mut framer = LineFramer::new(16);
        framer.push(b"a\nbb\nccc");
        assert!(framer.has_frame());
        assert_eq!(framer.next_frame(), Some(Frame::Line(b"a".to_vec())));
        assert_eq!(framer.pending_bytes(), 6, "bb, its newline and ccc wait");
        framer.push(b"\n");
        assert_eq!(
            lines(&mut framer),
            vec![Frame::Line(b"bb".to_vec()), Frame::Line(b"ccc".to_vec())]
        );
        assert!(!framer.has_frame());
    }
}

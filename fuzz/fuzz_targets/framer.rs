//! The NDJSON framer against a model of it: whatever the bytes and however
//! they are split into reads, it hands out the same lines a plain split on
//! `\n` gives (without a trailing `\r`), never one over the limit, and an
//! oversize error exactly when a line (or an unfinished tail) is over it.
#![no_main]
use aicc_wire::codec::{Frame, LineFramer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    // First byte: the line limit; second: the read size; the rest: the stream.
    let limit = usize::from(data[0] % 64) + 1;
    let chunk = usize::from(data[1] % 32) + 1;
    let stream = &data[2..];

    let mut framer = LineFramer::new(limit);
    let mut framed = Vec::new();
    for piece in stream.chunks(chunk) {
        framer.push(piece);
        while let Some(frame) = framer.next_frame() {
            framed.push(frame);
        }
    }

    let mut expected = Vec::new();
    let mut rest = stream;
    loop {
        match rest.iter().position(|&b| b == b'\n') {
            Some(end) if end <= limit => {
                let mut line = rest[..end].to_vec();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                expected.push(Frame::Line(line));
                rest = &rest[end + 1..];
            }
            Some(_) => {
                expected.push(Frame::Oversized { limit_bytes: limit });
                break;
            }
            None if rest.len() > limit => {
                expected.push(Frame::Oversized { limit_bytes: limit });
                break;
            }
            None => {
                assert_eq!(
                    framer.pending_bytes(),
                    rest.len(),
                    "an unfinished line is held back whole"
                );
                break;
            }
        }
    }
    assert_eq!(framed, expected);
});

//! Reading a recording back, strictly: every record's framing is checked
//! against the file's length, every chunk's CRC and the data section's
//! CRC against its bytes, so that a truncated or corrupt file is refused
//! with the byte offset where it goes wrong and what was wrong there
//! (the MCAP library's own reader says neither). A file of a newer
//! format version than [`FORMAT_VERSION`] is refused by name.
//!
//! Only what the bridge's recorder writes is accepted: uncompressed
//! chunks (the recorder never compresses) and the `aicc` profile.
use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// The recording format's version, in the file's `aicc_recording`
/// metadata record. A reader refuses a file whose version is newer.
pub const FORMAT_VERSION: u64 = 1;
/// The MCAP profile of the file's header.
pub const PROFILE: &str = "aicc";
/// The name of the metadata record that describes the recording.
pub const METADATA_NAME: &str = "aicc_recording";

/// The eight bytes an MCAP file begins and ends with.
pub const MAGIC: &[u8; 8] = b"\x89MCAP0\r\n";

const OP_HEADER: u8 = 0x01;
const OP_FOOTER: u8 = 0x02;
const OP_SCHEMA: u8 = 0x03;
const OP_CHANNEL: u8 = 0x04;
const OP_MESSAGE: u8 = 0x05;
const OP_CHUNK: u8 = 0x06;
const OP_METADATA: u8 = 0x0C;
const OP_DATA_END: u8 = 0x0F;

/// Why a recording was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadError {
    Truncated { offset: u64, what: String },
    Corrupt { offset: u64, what: String },
    NewerFormat { found: u64, known: u64 },
    NotAicc(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Truncated { offset, what } => write!(f, "at byte {offset}: the file is truncated: {what}"),
            ReadError::Corrupt { offset, what } => write!(f, "at byte {offset}: the file is corrupt: {what}"),
            ReadError::NewerFormat { found, known } => write!(f, "recording format_version {found} is newer than this reader's {known}: read it with a newer aicc"),
            ReadError::NotAicc(why) => write!(f, "not an AICC recording: {why}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// One JSON message of the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub topic: String,
    /// The bridge's wall clock when the core handled it, ns since the epoch.
    pub log_time_ns: u64,
    /// Where the message record begins in the file (for reports).
    pub offset: u64,
    pub data: Value,
}

/// A recording, read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// The `aicc_recording` metadata (format_version, part, reason, ...).
    pub metadata: BTreeMap<String, String>,
    /// The JSON messages in log-time order (records of other encodings,
    /// such as sensor samples, are not needed for replay and are skipped).
    pub messages: Vec<Recorded>,
}

impl Recording {
    /// The messages on `topic`, in order.
    pub fn on<'a>(&'a self, topic: &'a str) -> impl Iterator<Item = &'a Recorded> + 'a {
        self.messages.iter().filter(move |m| m.topic == topic)
    }
}

/// The file's bytes from `at`, with bounds named in errors.
struct Cursor<'a> {
    bytes: &'a [u8],
    /// Offset of `bytes[0]` in the file.
    base: u64,
    at: usize,
    /// What is being read, for errors ("the header record").
    what: &'static str,
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.base + self.at as u64
    }

    /// A field that runs past its record is corruption (the record's own
    /// length was checked against the file before).
    fn take(&mut self, count: usize) -> Result<&'a [u8], ReadError> {
        if self.bytes.len() - self.at < count {
            return Err(ReadError::Corrupt {
                offset: self.offset(),
                what: format!("a field of {count} bytes runs past the end of {}", self.what),
            });
        }
        let out = &self.bytes[self.at..self.at + count];
        self.at += count;
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, ReadError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("two bytes")))
    }

    fn u32(&mut self) -> Result<u32, ReadError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("four bytes")))
    }

    fn u64(&mut self) -> Result<u64, ReadError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("eight bytes")))
    }

    fn string(&mut self) -> Result<String, ReadError> {
        let at = self.offset();
        let length = self.u32()? as usize;
        let bytes = self.take(length)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| ReadError::Corrupt {
            offset: at + 4 + e.utf8_error().valid_up_to() as u64,
            what: format!("a string in {} is not UTF-8", self.what),
        })
    }

    fn map(&mut self) -> Result<BTreeMap<String, String>, ReadError> {
        let length = self.u32()? as usize;
        let bytes = self.take(length)?;
        let mut inner =
            Cursor { bytes, base: self.offset() - length as u64, at: 0, what: self.what };
        let mut map = BTreeMap::new();
        while inner.at < bytes.len() {
            let key = inner.string()?;
            let value = inner.string()?;
            map.insert(key, value);
        }
        Ok(map)
    }

    fn rest(&mut self) -> &'a [u8] {
        let out = &self.bytes[self.at..];
        self.at = self.bytes.len();
        out
    }
}

/// One record's frame: opcode, where its content begins, the content.
struct Frame<'a> {
    opcode: u8,
    start: u64,
    content: &'a [u8],
    content_offset: u64,
}

/// The record at `at` in `bytes` (whose first byte is at file offset `base`).
fn frame<'a>(bytes: &'a [u8], at: usize, base: u64, inside: &str) -> Result<Frame<'a>, ReadError> {
    let start = base + at as u64;
    let left = bytes.len() - at;
    if left < 9 {
        return Err(ReadError::Truncated {
            offset: start,
            what: format!(
                "{left} bytes where a record's opcode and length (9 bytes) should be{inside}"
            ),
        });
    }
    let opcode = bytes[at];
    let length = u64::from_le_bytes(bytes[at + 1..at + 9].try_into().expect("eight bytes"));
    if length > (left - 9) as u64 {
        return Err(ReadError::Truncated { offset: start, what: format!("a record (opcode 0x{opcode:02x}) of {length} bytes, but only {} bytes follow{inside}", left - 9) });
    }
    let content = &bytes[at + 9..at + 9 + length as usize];
    Ok(Frame { opcode, start, content, content_offset: start + 9 })
}

/// CRC-32 (IEEE 802.3, reflected), as MCAP's CRC fields are.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[derive(Default)]
struct State {
    profile: Option<String>,
    channels: HashMap<u16, (String, String)>,
    metadata: Option<BTreeMap<String, String>>,
    messages: Vec<Recorded>,
}

impl State {
    /// A record of the data section (or inside a chunk).
    fn record(&mut self, frame: &Frame<'_>) -> Result<(), ReadError> {
        let what = match frame.opcode {
            OP_HEADER => "the header record",
            OP_CHANNEL => "a channel record",
            OP_MESSAGE => "a message record",
            OP_METADATA => "a metadata record",
            OP_SCHEMA => "a schema record",
            OP_CHUNK => "a chunk record",
            _ => return Ok(()),
        };
        let mut cursor = Cursor { bytes: frame.content, base: frame.content_offset, at: 0, what };
        match frame.opcode {
            OP_HEADER => {
                self.profile = Some(cursor.string()?);
            }
            OP_CHANNEL => {
                let id = cursor.u16()?;
                let _schema = cursor.u16()?;
                let topic = cursor.string()?;
                let encoding = cursor.string()?;
                self.channels.insert(id, (topic, encoding));
            }
            OP_MESSAGE => {
                let channel = cursor.u16()?;
                let _sequence = cursor.u32()?;
                let log_time_ns = cursor.u64()?;
                let _publish_time = cursor.u64()?;
                let data_offset = cursor.offset();
                let data = cursor.rest();
                let Some((topic, encoding)) = self.channels.get(&channel) else {
                    return Err(ReadError::Corrupt { offset: frame.start, what: format!("a message on channel {channel}, which no channel record declared before it") });
                };
                if encoding == "json" {
                    let data: Value =
                        serde_json::from_slice(data).map_err(|e| ReadError::Corrupt {
                            offset: data_offset,
                            what: format!("a message on {topic} is not JSON ({e})"),
                        })?;
                    self.messages.push(Recorded {
                        topic: topic.clone(),
                        log_time_ns,
                        offset: frame.start,
                        data,
                    });
                }
            }
            OP_METADATA => {
                let name = cursor.string()?;
                let map = cursor.map()?;
                if name == METADATA_NAME {
                    self.metadata = Some(map);
                }
            }
            OP_CHUNK => {
                let _start = cursor.u64()?;
                let _end = cursor.u64()?;
                let size = cursor.u64()?;
                let crc = cursor.u32()?;
                let compression = cursor.string()?;
                let length = cursor.u64()? as usize;
                let records_offset = cursor.offset();
                let records = cursor.take(length)?;
                if !compression.is_empty() {
                    return Err(ReadError::NotAicc(format!("the chunk at byte {} is compressed ({compression}); the bridge's recorder never compresses", frame.start)));
                }
                if size != length as u64 {
                    return Err(ReadError::Corrupt {
                        offset: frame.start,
                        what: format!(
                            "the chunk says it holds {size} bytes of records but carries {length}"
                        ),
                    });
                }
                if crc != 0 && crc32(records) != crc {
                    return Err(ReadError::Corrupt { offset: frame.start, what: format!("the chunk's CRC does not match its {length} bytes of records (bytes {records_offset}..{})", records_offset + length as u64) });
                }
                let mut at = 0;
                while at < records.len() {
                    let inner = frame_in_chunk(records, at, records_offset)?;
                    at += 9 + inner.content.len();
                    self.record(&inner)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// A record inside a chunk whose CRC matched (or was not written): one
/// running past the chunk is corruption, not truncation.
fn frame_in_chunk(records: &[u8], at: usize, base: u64) -> Result<Frame<'_>, ReadError> {
    frame(records, at, base, " in the chunk").map_err(|e| match e {
        ReadError::Truncated { offset, what } => ReadError::Corrupt { offset, what },
        other => other,
    })
}

/// Reads a whole recording from its bytes.
pub fn read(bytes: &[u8]) -> Result<Recording, ReadError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return match bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
            true => Err(ReadError::Truncated {
                offset: bytes.len() as u64,
                what: "the file ends inside the MCAP magic".into(),
            }),
            false => Err(ReadError::NotAicc(
                "not an MCAP file (its first eight bytes are not the MCAP magic)".into(),
            )),
        };
    }
    let mut state = State::default();
    let mut at = MAGIC.len();
    let mut in_data = true;
    loop {
        if at == bytes.len() {
            let what = match in_data {
                true => "the file ends before its data end record (the recording was not finished)",
                false => "the file ends before its footer",
            };
            return Err(ReadError::Truncated { offset: at as u64, what: what.into() });
        }
        let frame = frame(bytes, at, 0, "")?;
        at += 9 + frame.content.len();
        if frame.opcode == OP_FOOTER {
            break;
        }
        if frame.opcode == OP_DATA_END && in_data {
            in_data = false;
            let crc = Cursor {
                bytes: frame.content,
                base: frame.content_offset,
                at: 0,
                what: "the data end record",
            }
            .u32()?;
            if crc != 0 && crc32(&bytes[..frame.start as usize]) != crc {
                return Err(ReadError::Corrupt {
                    offset: frame.start,
                    what: format!(
                        "the data section's CRC (bytes 0..{}) does not match",
                        frame.start
                    ),
                });
            }
            continue;
        }
        if in_data {
            state.record(&frame)?;
        }
    }
    let tail = &bytes[at..];
    if tail.len() < MAGIC.len() {
        return Err(ReadError::Truncated {
            offset: at as u64,
            what: "the file ends before its closing MCAP magic".into(),
        });
    }
    if &tail[..MAGIC.len()] != MAGIC {
        return Err(ReadError::Corrupt {
            offset: at as u64,
            what: "the closing MCAP magic is wrong".into(),
        });
    }
    match state.profile.as_deref() {
        Some(PROFILE) => {}
        Some(other) => {
            return Err(ReadError::NotAicc(format!(
                "its MCAP profile is '{other}', not '{PROFILE}'"
            )))
        }
        None => {
            return Err(ReadError::Corrupt {
                offset: MAGIC.len() as u64,
                what: "the file has no header record".into(),
            })
        }
    }
    let metadata = state.metadata.ok_or_else(|| {
        ReadError::NotAicc(format!("it has no '{METADATA_NAME}' metadata record"))
    })?;
    let version = metadata.get("format_version").ok_or_else(|| {
        ReadError::NotAicc(format!("its '{METADATA_NAME}' metadata has no format_version"))
    })?;
    let found: u64 = version.parse().map_err(|_| {
        ReadError::NotAicc(format!("its format_version '{version}' is not a number"))
    })?;
    if found > FORMAT_VERSION {
        return Err(ReadError::NewerFormat { found, known: FORMAT_VERSION });
    }
    let mut messages = state.messages;
    // Chunks are in order; a stable sort keeps equal times in file order.
    messages.sort_by_key(|m| m.log_time_ns);
    Ok(Recording { metadata, messages })
}

/// Reads the file at `path`; errors name it.
pub fn read_file(path: &std::path::Path) -> Result<Recording, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    read(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A small recording as the recorder's sink writes it.
    pub(crate) fn sample(version: &str) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        let mut writer =
            mcap::WriteOptions::new().profile(PROFILE).compression(None).create(&mut out).unwrap();
        let schema =
            writer.add_schema("aicc.Inbound", "jsonschema", br#"{"type":"object"}"#).unwrap();
        let id = writer.add_channel(schema, "/aicc/in", "json", &BTreeMap::new()).unwrap();
        let metadata = mcap::records::Metadata {
            name: METADATA_NAME.into(),
            metadata: BTreeMap::from([("format_version".to_string(), version.to_string())]),
        };
        writer.write_metadata(&metadata).unwrap();
        for (i, call) in ["a", "b"].iter().enumerate() {
            let data = json!({ "conn": 1, "message": { "type": "tool_call", "call_id": call } })
                .to_string();
            let header = mcap::records::MessageHeader {
                channel_id: id,
                sequence: i as u32,
                log_time: 10 + i as u64,
                publish_time: 10 + i as u64,
            };
            writer.write_to_known_channel(&header, data.as_bytes()).unwrap();
        }
        writer.finish().unwrap();
        drop(writer);
        out.into_inner()
    }

    #[test]
    fn a_whole_file_reads_back_in_order() {
        let recording = read(&sample("1")).unwrap();
        assert_eq!(recording.metadata["format_version"], "1");
        let calls: Vec<&Value> =
            recording.on("/aicc/in").map(|m| &m.data["message"]["call_id"]).collect();
        assert_eq!(calls, [&json!("a"), &json!("b")]);
        assert!(recording.messages.iter().all(|m| m.offset > 8));
    }

    #[test]
    fn every_truncation_is_refused_with_an_offset_within_the_file() {
        let bytes = sample("1");
        for cut in (0..bytes.len()).step_by(7).chain([bytes.len() - 1]) {
            match read(&bytes[..cut]) {
                Err(ReadError::Truncated { offset, .. }) => {
                    assert!(offset <= cut as u64, "cut {cut}: offset {offset}")
                }
                Err(ReadError::NotAicc(_)) if cut == 0 => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_flipped_byte_in_a_message_is_corruption_named_at_its_chunk() {
        let bytes = sample("1");
        let at = bytes.windows(4).position(|w| w == b"\"b\",").expect("the second call's id") + 1;
        let mut bad = bytes.clone();
        bad[at] = b'c';
        let error = read(&bad).unwrap_err();
        let ReadError::Corrupt { offset, what } = &error else { panic!("{error:?}") };
        assert!(*offset < at as u64 && what.contains("CRC"), "{error}");
        assert!(
            error.to_string().starts_with(&format!("at byte {offset}: the file is corrupt")),
            "{error}"
        );
    }

    #[test]
    fn a_newer_format_version_is_refused_by_name() {
        let error = read(&sample("2")).unwrap_err();
        assert_eq!(error, ReadError::NewerFormat { found: 2, known: FORMAT_VERSION });
        assert!(error.to_string().contains("format_version 2 is newer"), "{error}");
        assert!(read(&sample("1")).is_ok());
    }

    #[test]
    fn other_files_are_not_recordings() {
        assert!(matches!(read(b"PK\x03\x04 not mcap at all"), Err(ReadError::NotAicc(_))));
        assert!(matches!(read(&MAGIC[..3]), Err(ReadError::Truncated { offset: 3, .. })));
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}

//! Recording files: MCAP written through a byte count, rotated by size.
//! Each part is a complete MCAP file of its own (header, schemas,
//! channels, the `aicc_recording` metadata, summary), named
//! `aicc-<UTC start>-<part>.mcap` in the recording directory.
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use super::layout::{Channel, FORMAT_VERSION, METADATA_NAME, PROFILE};
use crate::robot::wire::WireSample;

/// A failure of the recording, with the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("cannot create the recording directory {dir}: {source}")]
    Directory { dir: PathBuf, source: io::Error },
    #[error("cannot create the recording file {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error("cannot write the recording file {path}: {reason}")]
    Write { path: PathBuf, reason: String },
}

/// The file's position, shared with the sink while the MCAP writer owns
/// the file: bytes reached so far.
struct Counted {
    inner: BufWriter<File>,
    position: u64,
    reached: Arc<AtomicU64>,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.position += written as u64;
        self.reached.fetch_max(self.position, Ordering::Relaxed);
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()?;
        // Data on disk, not in the page cache: a full disk shows here.
        self.inner.get_ref().sync_data()
    }
}

impl Seek for Counted {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.position = self.inner.seek(to)?;
        Ok(self.position)
    }
}

struct Part {
    writer: mcap::Writer<Counted>,
    path: PathBuf,
    channels: HashMap<Channel, u16>,
    /// The sensor topics (CDR channels) added to this part so far.
    samples: HashMap<Arc<str>, u16>,
    bytes: Arc<AtomicU64>,
    sequence: u32,
}

/// What a recording was started for (in its metadata).
#[derive(Debug, Clone)]
pub struct Origin {
    /// always | on_fault | request.
    pub reason: String,
    /// Free text: the trigger of a flight-recorder dump, who asked.
    pub detail: String,
}

/// One recording: its parts, written one after the other.
pub struct Sink {
    dir: PathBuf,
    stem: String,
    max_file_bytes: u64,
    origin: Origin,
    part: Option<Part>,
    next_part: u32,
    finished: Vec<PathBuf>,
    /// Tests: write this existing file (a device) instead of new files.
    fixed: Option<PathBuf>,
}

fn describe(error: mcap::McapError) -> String {
    match error {
        mcap::McapError::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}

impl Sink {
    /// Creates the directory and the first part. Nothing is left behind on error.
    pub fn create(
        dir: &Path,
        max_file_bytes: u64,
        origin: Origin,
        now: SystemTime,
    ) -> Result<Self, SinkError> {
        std::fs::create_dir_all(dir)
            .map_err(|source| SinkError::Directory { dir: dir.to_path_buf(), source })?;
        let mut sink = Self {
            dir: dir.to_path_buf(),
            stem: format!("aicc-{}", utc_stamp(now)),
            max_file_bytes,
            origin,
            part: None,
            next_part: 0,
            finished: Vec::new(),
            fixed: None,
        };
        sink.open_part()?;
        Ok(sink)
    }

    /// The file being written now.
    pub fn path(&self) -> Option<&Path> {
        self.part.as_ref().map(|p| p.path.as_path())
    }

    /// Every part so far, finished or not, in order.
    pub fn parts(&self) -> Vec<PathBuf> {
        self.finished.iter().cloned().chain(self.part.as_ref().map(|p| p.path.clone())).collect()
    }

    /// A sink writing the existing file `path` (tests: /dev/full).
    #[cfg(test)]
    pub fn on_file(path: PathBuf, max_file_bytes: u64) -> Result<Self, SinkError> {
        let mut sink = Self {
            dir: PathBuf::new(),
            stem: String::new(),
            max_file_bytes,
            origin: Origin { reason: "test".into(), detail: String::new() },
            part: None,
            next_part: 0,
            finished: Vec::new(),
            fixed: Some(path),
        };
        sink.open_part()?;
        Ok(sink)
    }

    fn open_part(&mut self) -> Result<(), SinkError> {
        let path = if let Some(fixed) = &self.fixed {
            self.next_part += 1;
            fixed.clone()
        } else {
            loop {
                let candidate = self.dir.join(format!("{}-{:03}.mcap", self.stem, self.next_part));
                self.next_part += 1;
                if !candidate.exists() {
                    break candidate;
                }
            }
        };
        let file = File::options()
            .write(true)
            .create_new(self.fixed.is_none())
            .open(&path)
            .map_err(|source| SinkError::Create { path: path.clone(), source })?;
        let bytes = Arc::new(AtomicU64::new(0));
        let counted = Counted {
            inner: BufWriter::with_capacity(64 * 1024, file),
            position: 0,
            reached: bytes.clone(),
        };
        let chunk = (self.max_file_bytes / 4).clamp(4 * 1024, 1 << 20);
        let write_error = |e| SinkError::Write { path: path.clone(), reason: describe(e) };
        let mut writer = mcap::WriteOptions::new()
            .compression(None)
            .profile(PROFILE)
            .library(concat!("aicc-bridge ", env!("CARGO_PKG_VERSION")))
            .chunk_size(Some(chunk))
            .create(counted)
            .map_err(write_error)?;
        let mut channels = HashMap::new();
        for channel in Channel::ALL {
            let schema = serde_json::to_vec(&channel.schema()).expect("a schema serialises");
            let schema_id = writer
                .add_schema(channel.schema_name(), "jsonschema", &schema)
                .map_err(write_error)?;
            let id = writer
                .add_channel(schema_id, channel.topic(), "json", &BTreeMap::new())
                .map_err(write_error)?;
            channels.insert(channel, id);
        }
        let metadata = BTreeMap::from([
            ("format_version".to_string(), FORMAT_VERSION.to_string()),
            ("bridge_version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
            ("part".to_string(), (self.next_part - 1).to_string()),
            ("reason".to_string(), self.origin.reason.clone()),
            ("detail".to_string(), self.origin.detail.clone()),
        ]);
        writer
            .write_metadata(&mcap::records::Metadata { name: METADATA_NAME.into(), metadata })
            .map_err(write_error)?;
        self.part =
            Some(Part { writer, path, channels, samples: HashMap::new(), bytes, sequence: 0 });
        Ok(())
    }

    /// Writes one message; starts the next part first when this one has
    /// reached the size limit.
    pub fn write(
        &mut self,
        channel: Channel,
        log_time_ns: u64,
        data: &[u8],
    ) -> Result<(), SinkError> {
        self.write_on(|part| Ok(part.channels[&channel]), log_time_ns, data)
    }

    /// Writes a sensor sample on its topic's channel (message encoding
    /// `cdr`, schema `ros2msg` named after its type), added to the part on
    /// its first sample.
    pub fn write_sample(&mut self, sample: &WireSample, log_time_ns: u64) -> Result<(), SinkError> {
        self.write_on(
            |part| {
                if let Some(id) = part.samples.get(&sample.topic) {
                    return Ok(*id);
                }
                let schema_id = part.writer.add_schema(
                    &sample.type_name,
                    "ros2msg",
                    sample.schema.as_bytes(),
                )?;
                let id =
                    part.writer.add_channel(schema_id, &sample.topic, "cdr", &BTreeMap::new())?;
                part.samples.insert(sample.topic.clone(), id);
                Ok(id)
            },
            log_time_ns,
            &sample.data,
        )
    }

    fn write_on(
        &mut self,
        channel: impl FnOnce(&mut Part) -> Result<u16, mcap::McapError>,
        log_time_ns: u64,
        data: &[u8],
    ) -> Result<(), SinkError> {
        if self.part.as_ref().is_some_and(|p| {
            p.bytes.load(Ordering::Relaxed) + data.len() as u64 > self.max_file_bytes
                && p.sequence > 0
        }) {
            self.finish_part()?;
            self.open_part()?;
        }
        let Some(part) = self.part.as_mut() else { return Ok(()) };
        let channel_id = channel(part)
            .map_err(|e| SinkError::Write { path: part.path.clone(), reason: describe(e) })?;
        part.sequence += 1;
        let header = mcap::records::MessageHeader {
            channel_id,
            sequence: part.sequence,
            log_time: log_time_ns,
            publish_time: log_time_ns,
        };
        part.writer
            .write_to_known_channel(&header, data)
            .map_err(|e| SinkError::Write { path: part.path.clone(), reason: describe(e) })
    }

    /// Puts what is buffered on disk (a reader can stream the file up to here).
    pub fn flush(&mut self) -> Result<(), SinkError> {
        match self.part.as_mut() {
            Some(part) => part
                .writer
                .flush()
                .map_err(|e| SinkError::Write { path: part.path.clone(), reason: describe(e) }),
            None => Ok(()),
        }
    }

    fn finish_part(&mut self) -> Result<(), SinkError> {
        if let Some(mut part) = self.part.take() {
            self.finished.push(part.path.clone());
            part.writer
                .finish()
                .map_err(|e| SinkError::Write { path: part.path.clone(), reason: describe(e) })?;
            let mut counted = part.writer.into_inner();
            counted
                .flush()
                .map_err(|e| SinkError::Write { path: part.path.clone(), reason: e.to_string() })?;
        }
        Ok(())
    }

    /// Ends the recording (summary and footer written); returns its parts.
    pub fn finish(mut self) -> Result<Vec<PathBuf>, SinkError> {
        self.finish_part()?;
        Ok(std::mem::take(&mut self.finished))
    }
}

/// `20261203T061500Z`-style UTC time (with milliseconds, so that two
/// recordings started in the same second have distinct names).
pub fn utc_stamp(at: SystemTime) -> String {
    let since = at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs();
    let (days, rest) = ((seconds / 86_400) as i64, seconds % 86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn origin() -> Origin {
        Origin { reason: "always".into(), detail: String::new() }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("aicc-sink-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn utc_stamps_are_civil_dates() {
        assert_eq!(utc_stamp(SystemTime::UNIX_EPOCH), "19700101T000000.000Z");
        assert_eq!(
            utc_stamp(SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_278_500_250)),
            "20261203T061500.250Z"
        );
        assert_eq!(
            utc_stamp(SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "20000229T000000.000Z"
        );
    }

    #[test]
    fn a_recording_reads_back_with_its_channels_schemas_and_metadata() {
        let dir = temp_dir("read");
        let mut sink = Sink::create(&dir, 1 << 20, origin(), SystemTime::now()).unwrap();
        for i in 0..10u64 {
            sink.write(
                Channel::Inbound,
                1_000 + i,
                format!("{{\"conn\":1,\"message\":{i}}}").as_bytes(),
            )
            .unwrap();
        }
        sink.write(Channel::Lease, 2_000, br#"{"kind":"released"}"#).unwrap();
        let parts = sink.finish().unwrap();
        assert_eq!(parts.len(), 1);
        let bytes = std::fs::read(&parts[0]).unwrap();
        let messages: Vec<_> =
            mcap::MessageStream::new(&bytes).unwrap().map(|m| m.unwrap()).collect();
        assert_eq!(messages.len(), 11);
        assert_eq!(messages[0].channel.topic, "/aicc/in");
        assert_eq!(messages[0].channel.message_encoding, "json");
        let schema = messages[0].channel.schema.as_ref().unwrap();
        assert_eq!(
            (schema.name.as_str(), schema.encoding.as_str()),
            ("aicc.Inbound", "jsonschema")
        );
        assert_eq!(&messages[3].data[..], br#"{"conn":1,"message":3}"#);
        assert_eq!(messages[10].channel.topic, "/aicc/lease");
        let summary = mcap::Summary::read(&bytes).unwrap().unwrap();
        let index = summary.metadata_indexes.iter().find(|m| m.name == METADATA_NAME).unwrap();
        let metadata = mcap::read::metadata(&bytes, index).unwrap();
        assert_eq!(metadata.metadata["format_version"], FORMAT_VERSION.to_string());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sensor_samples_get_a_cdr_channel_per_topic_with_their_schema_in_every_part() {
        let dir = temp_dir("samples");
        let mut sink = Sink::create(&dir, 64 * 1024, origin(), SystemTime::now()).unwrap();
        let sample = |topic: &str, byte: u8| WireSample {
            topic: topic.into(),
            type_name: "sensor_msgs/msg/BatteryState".into(),
            schema: "float32 voltage\n".into(),
            data: Arc::from(vec![byte; 20_000]),
            received: std::time::Instant::now(),
            received_wall: SystemTime::now(),
        };
        for i in 0..8u8 {
            sink.write_sample(
                &sample(if i % 2 == 0 { "/battery" } else { "/battery2" }, i),
                1_000 + u64::from(i),
            )
            .unwrap();
        }
        let parts = sink.finish().unwrap();
        assert!(parts.len() >= 2, "{} parts", parts.len());
        let mut seen = Vec::new();
        for part in &parts {
            let bytes = std::fs::read(part).unwrap();
            for message in mcap::MessageStream::new(&bytes).unwrap() {
                let message = message.unwrap();
                assert_eq!(message.channel.message_encoding, "cdr");
                let schema = message.channel.schema.as_ref().unwrap();
                assert_eq!(
                    (schema.name.as_str(), schema.encoding.as_str(), &schema.data[..]),
                    ("sensor_msgs/msg/BatteryState", "ros2msg", &b"float32 voltage\n"[..])
                );
                seen.push((message.channel.topic.clone(), message.data[0]));
            }
        }
        let expected: Vec<(String, u8)> = (0..8u8)
            .map(|i| (if i % 2 == 0 { "/battery" } else { "/battery2" }.to_string(), i))
            .collect();
        assert_eq!(seen, expected);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn files_rotate_by_size_each_part_complete() {
        let dir = temp_dir("rotate");
        let mut sink = Sink::create(&dir, 16 * 1024, origin(), SystemTime::now()).unwrap();
        let payload = vec![b'x'; 1000];
        for i in 0..100 {
            sink.write(Channel::Outbound, i, &payload).unwrap();
        }
        let parts = sink.finish().unwrap();
        assert!(parts.len() >= 5, "{} parts", parts.len());
        let mut total = 0;
        for part in &parts {
            let bytes = std::fs::read(part).unwrap();
            assert!(
                bytes.len() as u64 <= 16 * 1024 + 8 * 1024,
                "{} is {} bytes",
                part.display(),
                bytes.len()
            );
            total += mcap::MessageStream::new(&bytes).unwrap().count();
        }
        assert_eq!(total, 100, "every message in exactly one part");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unwritable_directory_is_an_error_naming_it() {
        let file = temp_dir("blocker");
        std::fs::write(&file, b"a file, not a directory").unwrap();
        let error =
            Sink::create(&file.join("sub"), 1 << 20, origin(), SystemTime::now()).err().unwrap();
        assert!(error.to_string().contains("aicc-sink-"), "{error}");
        assert!(matches!(error, SinkError::Directory { .. }), "{error}");
        let _ = std::fs::remove_file(&file);
    }
}

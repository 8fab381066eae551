//! Latency of the perception pipeline on a synthetic 640x480 frame
//! (`perception::synthetic`), each figure beside its floor from the same
//! run; prints p50/p99 and output sizes, asserts nothing.
//! - Floors: the codec crates called directly on the decoded frame (no
//!   project code around them).
//! - Pipeline: what the `vision` and `depth` tools do off the async
//!   workers: decode the raw frame, encode (within the options), base64.
//! - End to end: `vision` and `depth` calls, call to result in hand, on an
//!   in-process bridge over loopback TCP (the test robot, no ROS).
//!
//! Floor and pipeline runs alternate, so the machine's noise falls on both.
//!
//!   aicc-bench-vision [RUNS]
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use aicc_bridge::images::MAX_MAX_BYTES;
use aicc_bridge::images::{
    decode_depth, decode_rgb, encode, synthetic, to_base64, to_png_mm, EncodeOptions, OutputFormat,
    RawImage,
};
use aicc_bridge::port::SampleStore;
use aicc_bridge::port::{CameraFrame, CameraInfo, Sensor, Stamped};
use aicc_testkit::AiccClient;
use aicc_testkit::{loopback_config, TestBridge};
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ImageBuffer, Luma, RgbImage};
use jpeg_encoder::{ChromaSubsamplingMethod, SamplingFactor};
use serde_json::{json, Value};

const WIDTH: u32 = 640;
const HEIGHT: u32 = 480;
const BUDGET_BYTES: usize = 20_000;

/// Times of one kind of work, and the size of its last output.
struct Series {
    times_ms: Vec<f64>,
    bytes: usize,
}

impl Series {
    fn new(runs: usize) -> Self {
        Series { times_ms: Vec::with_capacity(runs), bytes: 0 }
    }

    fn time(&mut self, work: &mut impl FnMut() -> usize) {
        let start = Instant::now();
        self.bytes = work();
        self.times_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }

    fn percentile(&mut self, p: f64) -> f64 {
        self.times_ms.sort_by(f64::total_cmp);
        self.times_ms[((self.times_ms.len() - 1) as f64 * p).round() as usize]
    }

    fn line(&mut self, label: &str) -> String {
        format!(
            "{label:<36} p50 {:>6.2} ms  p99 {:>6.2} ms  {:>7} bytes",
            self.percentile(0.5),
            self.percentile(0.99),
            self.bytes
        )
    }
}

fn measure(label: &str, runs: usize, work: impl FnMut() -> usize) {
    println!("{}", measure_quietly(runs, work).line(label));
}

fn measure_quietly(runs: usize, mut work: impl FnMut() -> usize) -> Series {
    let mut series = Series::new(runs);
    for _ in 0..runs {
        series.time(&mut work);
    }
    series
}

/// Runs `floor` and `pipeline` alternately and prints both and the ratio
/// of their medians.
fn against_floor(
    label: &str,
    runs: usize,
    mut floor: impl FnMut() -> usize,
    mut pipeline: impl FnMut() -> usize,
) {
    let (mut floors, mut pipelines) = (Series::new(runs), Series::new(runs));
    for _ in 0..runs {
        floors.time(&mut floor);
        pipelines.time(&mut pipeline);
    }
    let ratio = pipelines.percentile(0.5) / floors.percentile(0.5);
    println!("{}", pipelines.line(label));
    println!("{}  = {ratio:.2}x the floor", floors.line("  floor: the bare encoder"));
}

/// A JPEG of `rgb` by `jpeg-encoder` with the given chroma handling.
fn jpeg_encoder_with(
    rgb: &RgbImage,
    quality: u8,
    sampling: SamplingFactor,
    method: ChromaSubsamplingMethod,
) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut encoder = jpeg_encoder::Encoder::new(&mut bytes, quality);
    encoder.set_sampling_factor(sampling);
    encoder.set_chroma_subsampling_method(method);
    encoder
        .encode(rgb.as_raw(), rgb.width() as u16, rgb.height() as u16, jpeg_encoder::ColorType::Rgb)
        .expect("the bare JPEG encoder");
    bytes
}

/// The JPEG floor: the codec crate on the decoded frame with the
/// pipeline's settings (4:2:0, averaged chroma below quality 90), nothing around it.
fn bare_jpeg(rgb: &RgbImage, quality: u8) -> usize {
    jpeg_encoder_with(rgb, quality, SamplingFactor::R_4_2_0, ChromaSubsamplingMethod::Average).len()
}

/// `image`'s own JPEG encoder (4:4:4), which the pipeline used before.
fn image_crate_jpeg(rgb: &RgbImage, quality: u8) -> Vec<u8> {
    let mut bytes = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, quality)
        .encode_image(rgb)
        .expect("image's JPEG encoder");
    bytes
}

/// Peak signal-to-noise ratio of a JPEG against the frame it encodes, in dB.
fn psnr(jpeg: &[u8], original: &RgbImage) -> f64 {
    let decoded = image::load_from_memory_with_format(jpeg, image::ImageFormat::Jpeg)
        .expect("a readable JPEG")
        .into_rgb8();
    let squared: f64 = decoded
        .as_raw()
        .iter()
        .zip(original.as_raw())
        .map(|(&a, &b)| (f64::from(a) - f64::from(b)).powi(2))
        .sum();
    let mse = squared / original.as_raw().len() as f64;
    10.0 * (255.0f64 * 255.0 / mse).log10()
}

/// Size, fidelity and time of the JPEG choices on this frame at quality 80.
fn jpeg_choices(rgb: &RgbImage, runs: usize) {
    println!("JPEG q80 choices on this frame (bytes, PSNR against the frame):");
    type Choice = Box<dyn Fn(&RgbImage) -> Vec<u8>>;
    let choices: [(&str, Choice); 4] = [
        ("  image crate, 4:4:4 (before)", Box::new(|rgb| image_crate_jpeg(rgb, 80))),
        (
            "  jpeg-encoder 4:4:4",
            Box::new(|rgb| {
                jpeg_encoder_with(
                    rgb,
                    80,
                    SamplingFactor::R_4_4_4,
                    ChromaSubsamplingMethod::Average,
                )
            }),
        ),
        (
            "  jpeg-encoder 4:2:0 top-left",
            Box::new(|rgb| {
                jpeg_encoder_with(
                    rgb,
                    80,
                    SamplingFactor::R_4_2_0,
                    ChromaSubsamplingMethod::Nearest,
                )
            }),
        ),
        (
            "  jpeg-encoder 4:2:0 averaged (used)",
            Box::new(|rgb| {
                jpeg_encoder_with(
                    rgb,
                    80,
                    SamplingFactor::R_4_2_0,
                    ChromaSubsamplingMethod::Average,
                )
            }),
        ),
    ];
    for (label, choice) in choices {
        let mut series = measure_quietly(runs, || choice(rgb).len());
        println!("{}  {:.2} dB", series.line(label), psnr(&choice(rgb), rgb));
    }
}

/// The PNG floor, at the pipeline's settings.
fn bare_png<P: image::PixelWithColorType>(image: &ImageBuffer<P, Vec<P::Subpixel>>) -> usize
where
    [P::Subpixel]: image::EncodableLayout,
{
    png_with(image, FilterType::Adaptive).len()
}

/// A PNG by the image crate with fast deflate and the given row filter.
fn png_with<P: image::PixelWithColorType>(
    image: &ImageBuffer<P, Vec<P::Subpixel>>,
    filter: FilterType,
) -> Vec<u8>
where
    [P::Subpixel]: image::EncodableLayout,
{
    let mut bytes = Vec::new();
    image
        .write_with_encoder(PngEncoder::new_with_quality(&mut bytes, CompressionType::Fast, filter))
        .expect("the bare PNG encoder");
    bytes
}

/// PNG row filters on the colour frame and the 16-bit depth frame: the
/// adaptive filter (used) tries every filter on every row.
fn png_choices(rgb: &RgbImage, depth_mm: &ImageBuffer<Luma<u16>, Vec<u16>>, runs: usize) {
    println!("PNG row filters on these frames (fast deflate; bytes):");
    let filters = [
        ("none", FilterType::NoFilter),
        ("sub", FilterType::Sub),
        ("up", FilterType::Up),
        ("paeth", FilterType::Paeth),
        ("adaptive (used)", FilterType::Adaptive),
    ];
    for (name, filter) in filters {
        measure(&format!("  colour, {name}"), runs, || png_with(rgb, filter).len());
        measure(&format!("  depth mm, {name}"), runs, || png_with(depth_mm, filter).len());
    }
}

/// What `vision` does with a raw frame: decode, encode, base64.
fn vision_pipeline(colour: &RawImage, options: &EncodeOptions) -> usize {
    let encoded = encode(&decode_rgb(colour).expect("a valid frame"), options).expect("encodable");
    to_base64(&encoded.bytes);
    encoded.bytes.len()
}

/// What `depth` does with a raw frame of the colour frame's size: decode,
/// statistics, 16-bit PNG in millimetres, base64.
fn depth_pipeline(depth: &RawImage) -> usize {
    let image = decode_depth(depth).expect("a valid depth frame");
    std::hint::black_box(image.stats());
    let png = to_png_mm(&image).expect("encodable");
    to_base64(&png);
    png.len()
}

fn stamped<T>(value: T, stamp_s: f64, received: Instant) -> Stamped<T> {
    Stamped { value, frame_id: "camera_optical_frame".into(), stamp_s, received }
}

fn refresh<T>(sample: &mut Option<Stamped<T>>, stamp_s: f64, now: Instant) {
    if let Some(sample) = sample {
        (sample.stamp_s, sample.received) = (stamp_s, now);
    }
}

/// Keeps the frames fresh at 30 Hz: the samples stay in place, only their
/// stamps move, so feeding costs the bridge nothing to copy.
fn keep_fresh(samples: &SampleStore, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let stamp_s = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        let now = Instant::now();
        {
            let mut latest = samples.lock();
            refresh(&mut latest.camera, stamp_s, now);
            refresh(&mut latest.camera_info, stamp_s, now);
            refresh(&mut latest.depth, stamp_s, now);
            refresh(&mut latest.depth_info, stamp_s, now);
        }
        for sensor in [Sensor::Camera, Sensor::CameraInfo, Sensor::Depth, Sensor::DepthInfo] {
            samples.delivered(sensor, stamp_s);
        }
        std::thread::sleep(Duration::from_millis(33));
    }
}

/// `vision` and `depth` calls on an in-process bridge whose camera and
/// depth camera hold `colour` and `depth`.
fn end_to_end(runs: usize, colour: RawImage, depth: RawImage) {
    let mut config = loopback_config("");
    // Generous ages: under callgrind the whole process runs ~50x slower.
    config.sensors.camera.max_age_s = 30.0;
    config.sensors.depth.max_age_s = 30.0;
    config.sensors.unavailable_after_s = 30.0;
    let bridge = TestBridge::start(config, |_| None);
    {
        let now = Instant::now();
        let focal = f64::from(WIDTH);
        let info = CameraInfo {
            width: WIDTH,
            height: HEIGHT,
            k: [
                focal,
                0.0,
                f64::from(WIDTH) / 2.0,
                0.0,
                focal,
                f64::from(HEIGHT) / 2.0,
                0.0,
                0.0,
                1.0,
            ],
        };
        let mut latest = bridge.robot.samples.lock();
        latest.camera = Some(stamped(CameraFrame::Raw(colour), 0.0, now));
        latest.depth = Some(stamped(depth, 0.0, now));
        latest.camera_info = Some(stamped(info.clone(), 0.0, now));
        latest.depth_info = Some(stamped(info, 0.0, now));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (samples, stop) = (bridge.robot.samples.clone(), stop.clone());
        std::thread::spawn(move || keep_fresh(&samples, &stop))
    };
    let (mut client, _) = AiccClient::connect(bridge.port);
    // PNG twice: the whole frame (the largest budget), and within the
    // default 200 kB budget, which a 640x480 PNG exceeds: shrunk to fit.
    let calls: [(&str, &str, Value); 5] = [
        ("vision jpeg q80", "vision", json!({})),
        ("vision jpeg, 20 kB budget", "vision", json!({ "max_bytes": BUDGET_BYTES })),
        (
            "vision png, whole frame",
            "vision",
            json!({ "format": "png", "max_bytes": MAX_MAX_BYTES }),
        ),
        ("vision png, 200 kB default budget", "vision", json!({ "format": "png" })),
        ("depth (16-bit PNG)", "depth", json!({})),
    ];
    for (_, tool, input) in &calls {
        let result =
            client.call_when_ready("warm-up", tool, input.clone(), Duration::from_secs(20));
        assert_eq!(result["ok"], true, "{result}");
    }
    println!(
        "end to end, call to result in hand (in-process bridge, loopback TCP, {runs} calls each):"
    );
    let mut next = 0u64;
    for (label, tool, input) in calls {
        measure(&format!("  {label}"), runs, || {
            next += 1;
            let result = client.call(&format!("c{next}"), tool, input.clone());
            assert_eq!(result["ok"], true, "{result}");
            let output = &result["output"];
            output["bytes"].as_u64().or(output["png_bytes"].as_u64()).unwrap_or_default() as usize
        });
    }
    drop(client);
    stop.store(true, Ordering::Relaxed);
    let _ = feeder.join();
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn main() {
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200).max(1);
    let colour = synthetic::colour_frame(WIDTH, HEIGHT);
    let depth = synthetic::depth_frame(WIDTH, HEIGHT);
    let rgb = decode_rgb(&colour).expect("a valid frame");
    println!("{WIDTH}x{HEIGHT}, {runs} runs each, load average {}", load_average());
    println!("stages:");
    measure("  decode rgb8", runs, || decode_rgb(&colour).expect("a valid frame").len());
    let q80 = encode(&rgb, &EncodeOptions::default()).expect("encodable");
    measure("  base64 of the q80 JPEG", runs, || to_base64(&q80.bytes).len());
    measure("  decode 16UC1", runs, || {
        decode_depth(&depth).expect("a valid depth frame").metres.len()
    });
    let depth_image = decode_depth(&depth).expect("a valid depth frame");
    measure("  depth stats", runs, || {
        std::hint::black_box(depth_image.stats()).valid_fraction as usize
    });
    measure("  depth to_png_mm", runs, || to_png_mm(&depth_image).expect("encodable").len());

    jpeg_choices(&rgb, runs.min(50));

    println!("pipeline (decode + encode + base64) against its floor:");
    let jpeg = EncodeOptions::default();
    against_floor("jpeg q80", runs, || bare_jpeg(&rgb, 80), || vision_pipeline(&colour, &jpeg));
    let budget = EncodeOptions { max_bytes: Some(BUDGET_BYTES), ..EncodeOptions::default() };
    against_floor(
        "jpeg, 20 kB budget",
        runs,
        || bare_jpeg(&rgb, 80),
        || vision_pipeline(&colour, &budget),
    );
    let fitted = encode(&rgb, &budget).expect("encodable");
    println!(
        "  budget result: {}x{} at quality {:?}, reduced: {:?}, {} encodes",
        fitted.width,
        fitted.height,
        fitted.jpeg_quality,
        fitted.reductions.reasons(),
        fitted.encodes
    );
    let png = EncodeOptions { format: OutputFormat::Png, ..EncodeOptions::default() };
    against_floor("png", runs, || bare_png(&rgb), || vision_pipeline(&colour, &png));
    let millimetres: Vec<u16> =
        depth.data.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
    let depth_u16: ImageBuffer<Luma<u16>, Vec<u16>> =
        ImageBuffer::from_raw(WIDTH, HEIGHT, millimetres).expect("sized");
    png_choices(&rgb, &depth_u16, runs.min(50));
    against_floor(
        "depth: decode, stats, png mm",
        runs,
        || bare_png(&depth_u16),
        || depth_pipeline(&depth),
    );
    println!("depth stats: {:?}", depth_image.stats());

    end_to_end(runs.min(100), colour, depth);
}

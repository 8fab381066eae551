//! Latency of the perception pipeline on a synthetic 640x480 frame:
//! decode(rgb8) + encode to PNG and to JPEG, and 16UC1 depth decode +
//! PNG (mm) + stats. Prints p50/p99 and output sizes; asserts nothing.
//!
//!   cargo run --release --bin aicc-bench-vision [-- RUNS]
use std::time::Instant;

use aicc_bridge::perception::{decode_depth, decode_rgb, encode, to_png_mm, EncodeOptions, OutputFormat, RawImage};

const WIDTH: u32 = 640;
const HEIGHT: u32 = 480;

/// Deterministic xorshift noise, so runs are comparable.
struct Noise(u64);

impl Noise {
    fn next(&mut self, amplitude: i32) -> i32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % (2 * amplitude as u64 + 1)) as i32 - amplitude
    }
}

/// Sky-to-floor gradients, a dark box and a bright disc, with sensor noise.
fn colour_frame() -> RawImage {
    let mut noise = Noise(0x9E37_79B9_7F4A_7C15);
    let mut data = Vec::with_capacity((WIDTH * HEIGHT * 3) as usize);
    for y in 0..HEIGHT as i32 {
        for x in 0..WIDTH as i32 {
            let in_box = (80..240).contains(&x) && (200..400).contains(&y);
            let in_disc = (x - 460).pow(2) + (y - 260).pow(2) < 70 * 70;
            let base = match (in_box, in_disc) {
                (true, _) => [60, 40, 30],
                (_, true) => [230, 200, 40],
                _ => [120 + x / 8, 140 + y / 6 - x / 16, 200 - y / 3],
            };
            data.extend(base.map(|c| (c + noise.next(6)).clamp(0, 255) as u8));
        }
    }
    RawImage { width: WIDTH, height: HEIGHT, encoding: "rgb8".into(), is_bigendian: false, step: WIDTH * 3, data }
}

/// A floor plane receding to 6 m, a box at 1.5 m, ±1% noise and holes.
fn depth_frame() -> RawImage {
    let mut noise = Noise(0xD1B5_4A32_D192_ED03);
    let mut data = Vec::with_capacity((WIDTH * HEIGHT * 2) as usize);
    for y in 0..HEIGHT as i32 {
        for x in 0..WIDTH as i32 {
            let metres = if (200..380).contains(&x) && (150..350).contains(&y) { 1.5 } else { 6.0 - 4.5 * y as f64 / HEIGHT as f64 };
            let hole = noise.next(50) == 0;
            let mm = if hole { 0 } else { (metres * 1000.0 * (1.0 + noise.next(100) as f64 / 10_000.0)) as u16 };
            data.extend(mm.to_le_bytes());
        }
    }
    RawImage { width: WIDTH, height: HEIGHT, encoding: "16UC1".into(), is_bigendian: false, step: WIDTH * 2, data }
}

/// Runs `work` `runs` times; prints p50/p99 in ms and the last output size.
fn measure(label: &str, runs: usize, mut work: impl FnMut() -> usize) {
    let mut times_ms = Vec::with_capacity(runs);
    let mut bytes = 0;
    for _ in 0..runs {
        let start = Instant::now();
        bytes = work();
        times_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times_ms.sort_by(f64::total_cmp);
    let percentile = |p: f64| times_ms[((runs - 1) as f64 * p).round() as usize];
    println!("{label:<34} p50 {:>6.2} ms  p99 {:>6.2} ms  {bytes:>7} bytes", percentile(0.50), percentile(0.99));
}

fn main() {
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200).max(1);
    let colour = colour_frame();
    let depth = depth_frame();
    println!("{WIDTH}x{HEIGHT}, {runs} runs each");
    measure("decode rgb8", runs, || decode_rgb(&colour).unwrap().len());
    for (label, format) in [("decode rgb8 + encode png", OutputFormat::Png), ("decode rgb8 + encode jpeg q80", OutputFormat::Jpeg)] {
        let options = EncodeOptions { format, ..EncodeOptions::default() };
        measure(label, runs, || encode(&decode_rgb(&colour).unwrap(), &options).unwrap().bytes.len());
    }
    let budget = EncodeOptions { max_bytes: Some(20_000), ..EncodeOptions::default() };
    measure("decode rgb8 + jpeg, 20 kB budget", runs, || encode(&decode_rgb(&colour).unwrap(), &budget).unwrap().bytes.len());
    let fitted = encode(&decode_rgb(&colour).unwrap(), &budget).unwrap();
    println!("  budget result: {}x{} at quality {:?}, reduced: {:?}", fitted.width, fitted.height, fitted.jpeg_quality, fitted.reductions.reasons());
    measure("decode 16UC1 + to_png_mm + stats", runs, || {
        let image = decode_depth(&depth).unwrap();
        std::hint::black_box(image.stats());
        to_png_mm(&image).unwrap().len()
    });
    let stats = decode_depth(&depth).unwrap().stats();
    println!("depth stats: {stats:?}");
}

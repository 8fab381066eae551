//! Deterministic synthetic frames shaped like a camera's, for benchmarks
//! and tests: the same pixels every run, so sizes and timings compare
//! across runs and machines.
use super::raw::RawImage;

/// Deterministic xorshift noise.
struct Noise(u64);

impl Noise {
    /// A value in `-amplitude..=amplitude`.
    fn next(&mut self, amplitude: i32) -> i32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % (2 * amplitude as u64 + 1)) as i32 - amplitude
    }
}

/// An `rgb8` scene: sky-to-floor gradients, a dark box and a bright disc,
/// with sensor noise of ±6 levels per channel (what makes a camera frame
/// costly to compress). Shapes are placed for 640x480 and clipped by
/// other sizes.
pub fn colour_frame(width: u32, height: u32) -> RawImage {
    let mut noise = Noise(0x9E37_79B9_7F4A_7C15);
    let mut data = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height as i32 {
        for x in 0..width as i32 {
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
    RawImage { width, height, encoding: "rgb8".into(), is_bigendian: false, step: width * 3, data }
}

/// A `16UC1` depth frame (millimetres): a floor plane receding to 6 m, a
/// box at 1.5 m, ±1 % noise and about 1 % holes (0 = no reading).
pub fn depth_frame(width: u32, height: u32) -> RawImage {
    let mut noise = Noise(0xD1B5_4A32_D192_ED03);
    let mut data = Vec::with_capacity(width as usize * height as usize * 2);
    for y in 0..height as i32 {
        for x in 0..width as i32 {
            let metres = if (200..380).contains(&x) && (150..350).contains(&y) {
                1.5
            } else {
                6.0 - 4.5 * f64::from(y) / f64::from(height)
            };
            let hole = noise.next(50) == 0;
            let mm = if hole {
                0
            } else {
                (metres * 1000.0 * (1.0 + f64::from(noise.next(100)) / 10_000.0)) as u16
            };
            data.extend(mm.to_le_bytes());
        }
    }
    RawImage { width, height, encoding: "16UC1".into(), is_bigendian: false, step: width * 2, data }
}

//! Where a pixel of the colour image falls in the depth image (`depth`
//! serves depth on the colour grid; `inspect` reads both at one pixel).
use super::fresh::max_age;
use super::images::frame_size;
use crate::perception::{CameraIntrinsics, DepthImage};
use crate::robot::{CameraInfo, Now, Stamped};
use crate::tools::ToolContext;

/// Where a pixel of one image falls in another image of the same scene,
/// per axis: `u' = su * u + ou`, `v' = sv * v + ov` (pixel centres at
/// integer coordinates, as in camera_info).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PixelMap {
    pub su: f64,
    pub ou: f64,
    pub sv: f64,
    pub ov: f64,
}

impl PixelMap {
    /// From one camera's pixels to another's that shares its optical
    /// centre and orientation: the ray through (u, v) of `from` meets `to`
    /// at `fx_to (u - cx_from) / fx_from + cx_to`.
    pub fn between(from: &CameraIntrinsics, to: &CameraIntrinsics) -> Self {
        let su = to.fx / from.fx;
        let sv = to.fy / from.fy;
        PixelMap { su, ou: to.cx - su * from.cx, sv, ov: to.cy - sv * from.cy }
    }

    /// By size alone, for two images of the same field of view: pixel
    /// edges map to pixel edges (`u' = s (u + 0.5) - 0.5`).
    pub fn proportional(from: (u32, u32), to: (u32, u32)) -> Self {
        let su = f64::from(to.0) / f64::from(from.0);
        let sv = f64::from(to.1) / f64::from(from.1);
        PixelMap { su, ou: 0.5 * su - 0.5, sv, ov: 0.5 * sv - 0.5 }
    }

    pub fn apply(&self, u: f64, v: f64) -> (f64, f64) {
        (self.su * u + self.ou, self.sv * v + self.ov)
    }

    /// The pixel of a `width` x `height` target nearest to where (u, v)
    /// lands, or None when it lands outside.
    pub fn nearest(&self, u: u32, v: u32, width: u32, height: u32) -> Option<(u32, u32)> {
        let (x, y) = self.apply(f64::from(u), f64::from(v));
        let (x, y) = ((x + 0.5).floor(), (y + 0.5).floor());
        let inside = x >= 0.0 && y >= 0.0 && x < f64::from(width) && y < f64::from(height);
        inside.then_some((x as u32, y as u32))
    }

    fn is_identity(&self) -> bool {
        const EPS: f64 = 1e-9;
        (self.su - 1.0).abs() < EPS
            && (self.sv - 1.0).abs() < EPS
            && self.ou.abs() < EPS
            && self.ov.abs() < EPS
    }
}

/// The depth seen through a `width` x `height` colour pixel grid: each
/// colour pixel copies the depth pixel `map` sends it to (nearest
/// neighbour, so edges never blend foreground and background); NaN where
/// the depth image does not reach.
pub fn align_depth(depth: &DepthImage, map: &PixelMap, width: u32, height: u32) -> DepthImage {
    if (width, height) == (depth.width, depth.height) && map.is_identity() {
        return depth.clone();
    }
    let mut metres = Vec::with_capacity(width as usize * height as usize);
    for v in 0..height {
        for u in 0..width {
            let value =
                map.nearest(u, v, depth.width, depth.height).and_then(|(x, y)| depth.at(x, y));
            metres.push(value.unwrap_or(f32::NAN));
        }
    }
    DepthImage { width, height, metres }
}

/// How colour pixels map into the depth image, and how that was decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Alignment {
    pub map: PixelMap,
    /// "intrinsics" or "proportional".
    pub method: &'static str,
}

/// Intrinsics from a camera_info, scaled to the image it describes when
/// that image has another size (a binned or resized stream).
pub(crate) fn intrinsics_for(info: &CameraInfo, size: (u32, u32)) -> Option<CameraIntrinsics> {
    let intrinsics = CameraIntrinsics::from_k(&info.k, info.width, info.height).ok()?;
    if (info.width, info.height) == size {
        return Some(intrinsics);
    }
    intrinsics.scaled_to(size.0, size.1).ok()
}

/// The map from the colour image (`colour_size`) into the depth image
/// (`depth_size`): by the two intrinsics when both are known and valid,
/// otherwise proportional.
pub fn colour_to_depth(
    colour_info: Option<&CameraInfo>,
    depth_info: Option<&CameraInfo>,
    colour_size: (u32, u32),
    depth_size: (u32, u32),
) -> Alignment {
    let colour = colour_info.and_then(|info| intrinsics_for(info, colour_size));
    let depth = depth_info.and_then(|info| intrinsics_for(info, depth_size));
    match (colour, depth) {
        (Some(colour), Some(depth)) => {
            Alignment { map: PixelMap::between(&colour, &depth), method: "intrinsics" }
        }
        _ => Alignment {
            map: PixelMap::proportional(colour_size, depth_size),
            method: "proportional",
        },
    }
}

/// What the tool needs besides the depth frame: the latest colour frame's
/// size and both camera_infos, each only if fresh.
pub(crate) struct AlignmentInputs {
    pub colour_size: Option<(u32, u32)>,
    pub colour_info: Option<CameraInfo>,
    pub depth_info: Option<CameraInfo>,
}

impl AlignmentInputs {
    pub fn gather(ctx: &ToolContext, now: Now) -> Self {
        let sensors = &ctx.config.sensors;
        let info = |sample: Option<Stamped<CameraInfo>>, max| {
            sample.filter(|s| s.age(now).effective() <= max).map(|s| s.value)
        };
        let colour_info = info(ctx.sensors.camera_info(), max_age(&sensors.camera_info));
        // The frame's size, from the frame itself (what `vision` returns), else its camera_info.
        let colour_size = ctx
            .sensors
            .camera()
            .and_then(|frame| frame_size(&frame.value))
            .or(colour_info.as_ref().map(|i| (i.width, i.height)));
        AlignmentInputs {
            colour_size,
            colour_info,
            depth_info: info(ctx.sensors.depth_info(), max_age(&sensors.depth_info)),
        }
    }

    /// The colour grid size and the map into a depth image of `depth_size`
    /// (the depth image's own grid when there is no colour camera).
    pub fn alignment(&self, depth_size: (u32, u32)) -> ((u32, u32), Alignment) {
        match self.colour_size {
            Some(colour_size) => (
                colour_size,
                colour_to_depth(
                    self.colour_info.as_ref(),
                    self.depth_info.as_ref(),
                    colour_size,
                    depth_size,
                ),
            ),
            None => (
                depth_size,
                Alignment {
                    map: PixelMap::proportional(depth_size, depth_size),
                    method: "none (no colour camera frame)",
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: [f64; 9] = [525.0, 0.0, 319.5, 0.0, 525.0, 239.5, 0.0, 0.0, 1.0];

    fn info(k: [f64; 9], width: u32, height: u32) -> CameraInfo {
        CameraInfo { width, height, k }
    }

    #[test]
    fn proportional_maps_agree_with_resize_nearest() {
        let depth = DepthImage { width: 5, height: 3, metres: (0..15).map(|i| i as f32).collect() };
        for (width, height) in [(10, 6), (3, 2), (7, 5), (5, 3)] {
            let aligned = align_depth(
                &depth,
                &PixelMap::proportional((width, height), (5, 3)),
                width,
                height,
            );
            assert_eq!(aligned, depth.resize_nearest(width, height), "{width}x{height}");
        }
    }

    #[test]
    fn intrinsic_maps_follow_rays_between_cameras() {
        let colour = CameraIntrinsics::from_k(&K, 640, 480).unwrap();
        // Same camera at half resolution: the same map as by size.
        let half = colour.scaled_to(320, 240).unwrap();
        let map = PixelMap::between(&colour, &half);
        let proportional = PixelMap::proportional((640, 480), (320, 240));
        for (u, v) in [(0.0, 0.0), (639.0, 479.0), (123.0, 45.0)] {
            let (a, b) = (map.apply(u, v), proportional.apply(u, v));
            assert!((a.0 - b.0).abs() < 1e-9 && (a.1 - b.1).abs() < 1e-9, "{a:?} {b:?}");
        }
        // A narrower depth camera (longer focal length) sees the centre
        // region: the colour centre maps to the depth centre, the colour
        // corners fall outside.
        let narrow = CameraIntrinsics {
            fx: 1050.0,
            fy: 1050.0,
            cx: 319.5,
            cy: 239.5,
            width: 640,
            height: 480,
        };
        let map = PixelMap::between(&colour, &narrow);
        assert_eq!(map.apply(319.5, 239.5), (319.5, 239.5));
        assert_eq!(map.nearest(300, 200, 640, 480), Some((281, 161)));
        assert_eq!(
            map.apply(419.5, 239.5),
            (519.5, 239.5),
            "100 px right of the centre is 200 px at twice the focal length"
        );
        assert_eq!(map.nearest(0, 0, 640, 480), None);
        // A known ray: the point (0.1, -0.05, 2) lands on both cameras' pixels.
        let point = nalgebra::Vector3::new(0.1, -0.05, 2.0);
        let (uc, vc) = colour.project(&point).unwrap();
        let (ud, vd) = narrow.project(&point).unwrap();
        let (u, v) = map.apply(uc, vc);
        assert!((u - ud).abs() < 1e-9 && (v - vd).abs() < 1e-9);
    }

    #[test]
    fn alignment_uses_intrinsics_only_when_both_are_known() {
        let colour = info(K, 640, 480);
        let depth = info([262.5, 0.0, 159.5, 0.0, 262.5, 119.5, 0.0, 0.0, 1.0], 320, 240);
        assert_eq!(
            colour_to_depth(Some(&colour), Some(&depth), (640, 480), (320, 240)).method,
            "intrinsics"
        );
        assert_eq!(
            colour_to_depth(None, Some(&depth), (640, 480), (320, 240)).method,
            "proportional"
        );
        let uncalibrated = info([0.0; 9], 640, 480);
        assert_eq!(
            colour_to_depth(Some(&uncalibrated), Some(&depth), (640, 480), (320, 240)).method,
            "proportional"
        );
        // A camera_info for 640x480 describing a 320x240 stream is scaled to it.
        let aligned = colour_to_depth(Some(&colour), Some(&colour), (320, 240), (640, 480));
        assert_eq!(aligned.method, "intrinsics");
        assert_eq!(aligned.map.nearest(160, 120, 640, 480), Some((321, 241)));
    }
}

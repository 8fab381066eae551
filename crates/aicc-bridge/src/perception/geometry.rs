//! Pixels and rays: the pinhole model from `camera_info`, and region
//! colour means.

use image::RgbImage;
use nalgebra::Vector3;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GeometryError {
    /// Focal lengths must be finite and positive, the centre finite.
    #[error("invalid camera intrinsics: {reason}")]
    InvalidIntrinsics { reason: String },
    /// An image size of zero pixels.
    #[error("image size must be at least 1x1, got {width}x{height}")]
    ZeroSize { width: u32, height: u32 },
    /// A region of no pixels has no mean.
    #[error("region is empty: {width}x{height}")]
    EmptyRegion { width: u32, height: u32 },
    /// A region not wholly inside the image.
    #[error(
        "region {width}x{height} at ({x}, {y}) is outside the {image_width}x{image_height} image"
    )]
    RegionOutOfBounds {
        x: u32,
        y: u32,
        width: u32,
        height: u32,
        image_width: u32,
        image_height: u32,
    },
}

/// Pinhole intrinsics for one image size, in pixels. Pixel centres are at
/// integer coordinates, as in `sensor_msgs/CameraInfo`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CameraIntrinsics {
    pub fx: f64,
    pub fy: f64,
    pub cx: f64,
    pub cy: f64,
    pub width: u32,
    pub height: u32,
}

impl CameraIntrinsics {
    /// Reads `camera_info.k` (row-major 3x3: fx 0 cx / 0 fy cy / 0 0 1).
    pub fn from_k(k: &[f64; 9], width: u32, height: u32) -> Result<Self, GeometryError> {
        let intrinsics = CameraIntrinsics { fx: k[0], fy: k[4], cx: k[2], cy: k[5], width, height };
        intrinsics.validate()?;
        Ok(intrinsics)
    }

    fn validate(&self) -> Result<(), GeometryError> {
        if self.width == 0 || self.height == 0 {
            return Err(GeometryError::ZeroSize { width: self.width, height: self.height });
        }
        let focal_ok = |f: f64| f.is_finite() && f > 0.0;
        if !focal_ok(self.fx) || !focal_ok(self.fy) || !self.cx.is_finite() || !self.cy.is_finite()
        {
            // An uncalibrated camera publishes K = 0; deprojecting with it divides by zero.
            let reason = format!(
                "fx={} fy={} cx={} cy={} (uncalibrated camera?)",
                self.fx, self.fy, self.cx, self.cy
            );
            return Err(GeometryError::InvalidIntrinsics { reason });
        }
        Ok(())
    }

    /// The point at `depth_m` along the ray through pixel (`u`, `v`), in the
    /// camera's optical frame (REP-103: z forward, x right, y down), metres.
    pub fn deproject(&self, u: f64, v: f64, depth_m: f64) -> Vector3<f64> {
        Vector3::new((u - self.cx) / self.fx * depth_m, (v - self.cy) / self.fy * depth_m, depth_m)
    }

    /// The pixel (`u`, `v`) a point in the optical frame falls on, or `None`
    /// if it is not in front of the camera. The pixel may lie outside the image.
    /// The tests' inverse of `deproject`: the bridge itself only deprojects.
    #[cfg(test)]
    pub fn project(&self, point_m: &Vector3<f64>) -> Option<(f64, f64)> {
        let in_front = point_m.z > 0.0 && point_m.iter().all(|c| c.is_finite());
        if !in_front {
            return None;
        }
        Some((self.fx * point_m.x / point_m.z + self.cx, self.fy * point_m.y / point_m.z + self.cy))
    }

    /// The intrinsics of the same camera after its image is resized to
    /// `width` x `height`. The centre maps through pixel edges, not pixel
    /// centres (`c' = s (c + 0.5) - 0.5`), so that a ray keeps its pixel.
    pub fn scaled_to(&self, width: u32, height: u32) -> Result<CameraIntrinsics, GeometryError> {
        if width == 0 || height == 0 {
            return Err(GeometryError::ZeroSize { width, height });
        }
        let scale_x = f64::from(width) / f64::from(self.width);
        let scale_y = f64::from(height) / f64::from(self.height);
        Ok(CameraIntrinsics {
            fx: self.fx * scale_x,
            fy: self.fy * scale_y,
            cx: scale_x * (self.cx + 0.5) - 0.5,
            cy: scale_y * (self.cy + 0.5) - 0.5,
            width,
            height,
        })
    }
}

/// Mean R, G, B (0-255) over the `width` x `height` region whose top-left
/// pixel is (`x`, `y`); the region must lie wholly inside the image.
pub fn region_mean_rgb(
    image: &RgbImage,
    x: u32,
    y: u32,
    width: u32,
    height: u32,
) -> Result<[f64; 3], GeometryError> {
    if width == 0 || height == 0 {
        return Err(GeometryError::EmptyRegion { width, height });
    }
    let fits =
        |start: u32, len: u32, limit: u32| u64::from(start) + u64::from(len) <= u64::from(limit);
    if !fits(x, width, image.width()) || !fits(y, height, image.height()) {
        return Err(GeometryError::RegionOutOfBounds {
            x,
            y,
            width,
            height,
            image_width: image.width(),
            image_height: image.height(),
        });
    }
    // Integer sums are exact: 255 x 2^32 pixels still fits a u64.
    let mut sums = [0u64; 3];
    for row in y..y + height {
        for column in x..x + width {
            let pixel = image.get_pixel(column, row).0;
            (0..3).for_each(|c| sums[c] += u64::from(pixel[c]));
        }
    }
    let count = (u64::from(width) * u64::from(height)) as f64;
    Ok(sums.map(|sum| sum as f64 / count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const K: [f64; 9] = [525.0, 0.0, 319.5, 0.0, 520.0, 239.5, 0.0, 0.0, 1.0];

    fn camera() -> CameraIntrinsics {
        CameraIntrinsics::from_k(&K, 640, 480).unwrap()
    }

    #[test]
    fn reads_k_and_rejects_uncalibrated() {
        assert_eq!(
            camera(),
            CameraIntrinsics {
                fx: 525.0,
                fy: 520.0,
                cx: 319.5,
                cy: 239.5,
                width: 640,
                height: 480
            }
        );
        assert!(matches!(
            CameraIntrinsics::from_k(&[0.0; 9], 640, 480),
            Err(GeometryError::InvalidIntrinsics { .. })
        ));
        assert!(matches!(
            CameraIntrinsics::from_k(&K, 0, 480),
            Err(GeometryError::ZeroSize { .. })
        ));
    }

    #[test]
    fn optical_frame_axes() {
        let camera = camera();
        assert_eq!(
            camera.deproject(319.5, 239.5, 2.0),
            Vector3::new(0.0, 0.0, 2.0),
            "the centre looks straight ahead"
        );
        let right_below = camera.deproject(319.5 + 525.0, 239.5 + 52.0, 1.0);
        assert!(
            (right_below - Vector3::new(1.0, 0.1, 1.0)).norm() < 1e-12,
            "x right, y down: {right_below}"
        );
        assert_eq!(camera.project(&Vector3::new(0.0, 0.0, -1.0)), None, "behind");
        assert_eq!(camera.project(&Vector3::new(1.0, 0.0, 0.0)), None, "in the image plane");
    }

    #[test]
    fn scaling_keeps_rays_on_their_pixels() {
        let half = camera().scaled_to(320, 240).unwrap();
        assert_eq!(
            half,
            CameraIntrinsics {
                fx: 262.5,
                fy: 260.0,
                cx: 159.5,
                cy: 119.5,
                width: 320,
                height: 240
            }
        );
        // Full-size pixel edge 0 (u = -0.5) is half-size edge 0 too.
        let ray = camera().deproject(-0.5, -0.5, 1.0);
        let (u, v) = half.project(&ray).unwrap();
        assert!((u + 0.5).abs() < 1e-12 && (v + 0.5).abs() < 1e-12, "{u} {v}");
        assert!(camera().scaled_to(0, 10).is_err());
    }

    #[test]
    fn region_means_and_bounds() {
        let image =
            RgbImage::from_fn(4, 3, |x, y| image::Rgb([(10 * x) as u8, (100 * y) as u8, 7]));
        assert_eq!(region_mean_rgb(&image, 1, 1, 2, 2).unwrap(), [15.0, 150.0, 7.0]);
        assert_eq!(region_mean_rgb(&image, 0, 0, 4, 3).unwrap(), [15.0, 100.0, 7.0]);
        let err = region_mean_rgb(&image, 3, 0, 2, 1).unwrap_err();
        assert_eq!(
            err,
            GeometryError::RegionOutOfBounds {
                x: 3,
                y: 0,
                width: 2,
                height: 1,
                image_width: 4,
                image_height: 3
            }
        );
        assert!(
            matches!(
                region_mean_rgb(&image, u32::MAX, 0, 2, 1),
                Err(GeometryError::RegionOutOfBounds { .. })
            ),
            "no overflow"
        );
        assert!(matches!(
            region_mean_rgb(&image, 0, 0, 0, 1),
            Err(GeometryError::EmptyRegion { .. })
        ));
    }

    proptest! {
        #[test]
        fn project_inverts_deproject(u in -100.0..740.0f64, v in -100.0..580.0f64, depth_m in 0.05..20.0f64) {
            let camera = camera();
            let (u2, v2) = camera.project(&camera.deproject(u, v, depth_m)).unwrap();
            prop_assert!((u2 - u).abs() < 1e-9 && (v2 - v).abs() < 1e-9, "({u}, {v}) -> ({u2}, {v2})");
        }

        #[test]
        fn deproject_inverts_project(x in -5.0..5.0f64, y in -5.0..5.0f64, z in 0.05..20.0f64) {
            let camera = camera();
            let point = Vector3::new(x, y, z);
            let (u, v) = camera.project(&point).unwrap();
            let back = camera.deproject(u, v, z);
            prop_assert!((back - point).norm() < 1e-9 * (1.0 + point.norm()), "{point} -> {back}");
        }
    }
}

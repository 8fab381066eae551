//! Camera and depth data without ROS: decoding sensor images into plain
//! buffers, encoding them for an agent within a byte budget, depth
//! statistics and pixel geometry.
//!
//! Everything here is pure: the ROS adapter fills [`RawImage`] and
//! [`CompressedFrame`], and errors carry no topic name so that the caller
//! can add the one it read from.
pub(crate) mod color;
pub(crate) mod depth;
pub mod encode;
pub(crate) mod geometry;
pub(crate) mod raw;
pub mod synthetic;

pub use color::{decode_compressed_rgb, decode_rgb};
pub use depth::{decode_depth, to_png_mm, DepthImage};
pub use encode::{encode, to_base64, EncodeOptions, OutputFormat};
pub use geometry::{region_mean_rgb, CameraIntrinsics};
pub use raw::{CompressedFrame, RawImage};

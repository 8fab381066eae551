//! Helpers the tools share, below every tool file: tools import from here
//! (and from the layers below the tools), never from each other.
pub mod alignment;
pub mod fresh;
pub mod head;
pub mod images;
pub mod joints;
pub mod motion;
pub mod observe;

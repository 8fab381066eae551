//! Helpers the tools share, below every tool file: tools import from here
//! (and from the layers below the tools), never from each other.
pub(crate) mod alignment;
pub(crate) mod fresh;
pub(crate) mod head;
pub(crate) mod images;
pub(crate) mod joints;
pub(crate) mod motion;
pub(crate) mod observe;

//! Closed-loop base motion without I/O: the controller `move` and `turn`
//! share ([`controller::BaseMotion`]), its speed profiles and budgets, and
//! the watch of the governor's verdict. Odometry, the verdict and `now` go
//! in, a velocity setpoint comes out; the governed base driver still limits
//! every command it is asked for.
pub mod blocked;
pub mod controller;
pub mod profile;
pub mod yaw;

pub use blocked::{BlockedWatch, BLOCKED_FREE_GRACE, BLOCKED_SETTLE, LATE_DATA_PATIENCE};
pub use controller::{
    displacement, Achieved, Action, BaseMotion, Failure, FailureKind, Reading, Report, Segment,
    Settings, StepInput, StepOutput, PROGRESS_PERIOD,
};

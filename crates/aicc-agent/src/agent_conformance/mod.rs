//! The agent-conformance harness: plays the bridge for a client under
//! test (AICC section 13, the agent's list) and judges what it does. See
//! docs/agent-conformance.md for the driver interface a client implements.
pub mod checks;
pub mod client_process;
pub mod fake_bridge;
pub mod report;

pub use checks::{run_all, CheckOutcome};
pub use client_process::ClientCommand;

//! Nothing here: the tests in `tests/` start the simulated robot and the
//! bridge's binaries (built by `cargo build --release --workspace`) and
//! talk to them over TCP and ROS 2, as users do.

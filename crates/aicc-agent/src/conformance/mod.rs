//! The AICC conformance runner (`aicc-conformance`): runs the scenarios of
//! `conformance/scenarios/` against a bridge over TCP or TLS, checks every
//! line it receives, and reports (table, JSON, JUnit XML). The scenario
//! format is described in `conformance/README.md`.
pub mod checks;
pub mod connection;
pub mod judge;
pub mod matcher;
pub mod offered;
pub mod progress;
pub mod readiness;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod transcript;
pub mod truth;
pub mod vars;

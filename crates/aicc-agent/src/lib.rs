//! AICC clients, with nothing of the bridge's implementation in them: the
//! `aicc` library and command line, the bridge conformance runner (an
//! independent oracle: it imports nothing it tests), and the harness that
//! plays a scripted bridge to certify agents, and the MCP front end
//! (`aicc mcp`), and the agent loop with its backends (`aicc agent`), and
//! the chaos agent (`aicc-chaos`) judged on a simulator's ground truth.
pub mod agent;
pub mod agent_conformance;
pub mod ai_control;
pub mod chaos;
pub mod client;
pub mod conformance;
pub mod mcp;
pub mod replay;

//! The conformance scenario parser (YAML a user writes, or a file someone
//! sends) on arbitrary text: a scenario or an error naming what was wrong,
//! never a panic; what it accepts meets the checks the runner relies on.
#![no_main]
use std::path::Path;

use aicc_agent::conformance::scenario::{self, AREAS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match scenario::parse(Path::new("fuzz.yaml"), text) {
        Ok(parsed) => {
            assert!(!parsed.steps.is_empty(), "an accepted scenario has steps");
            assert!(
                AREAS.contains(&parsed.area.as_str()),
                "an accepted scenario's area is known: {}",
                parsed.area
            );
            assert!(
                parsed.timeout_s > 0.0 && parsed.timeout_s <= scenario::MAX_SECONDS,
                "an accepted timeout is bounded: {}",
                parsed.timeout_s
            );
        }
        Err(error) => assert!(
            error.to_string().contains("fuzz.yaml"),
            "a scenario error names its file: {error}"
        ),
    }
});

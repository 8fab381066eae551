//! The AICC message decoder on arbitrary lines: it answers every line
//! (a message, or an error to send back) and never panics; what it
//! accepts re-encodes as JSON.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &[u8]| {
    match aicc_bridge::protocol_core::decode(line) {
        Ok(_) => assert!(
            serde_json::from_slice::<serde_json::Value>(line).is_ok(),
            "a decoded line is JSON"
        ),
        Err((error, _correlation)) => {
            assert!(!error.message.is_empty(), "an error says what was wrong")
        }
    }
});

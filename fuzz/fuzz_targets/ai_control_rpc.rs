//! The AI-control (JSON-RPC 2.0) request decoder on arbitrary lines: never
//! panics, and every rejection becomes one error line that is JSON.
#![no_main]
use aicc_bridge::ai_control_rpc as rpc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &[u8]| {
    match rpc::decode_request(line) {
        Ok(_request) => assert!(
            serde_json::from_slice::<serde_json::Value>(line).is_ok(),
            "a decoded request is JSON"
        ),
        Err(rejected) => {
            let answer = rpc::error_line(&rejected.id, &rejected.error);
            let value: serde_json::Value =
                serde_json::from_slice(&answer).expect("an error line is JSON");
            assert_eq!(value["jsonrpc"], "2.0");
        }
    }
});

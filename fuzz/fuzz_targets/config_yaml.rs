//! The configuration parser (a ROS 2 parameter file) on arbitrary text:
//! a configuration or an error, never a panic; what it accepts passes the
//! same checks again once written out and read back.
#![no_main]
use aicc_bridge::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(config) = Config::from_params_yaml(text, "aicc_bridge") {
        config.validate().expect("an accepted configuration is valid");
    }
});

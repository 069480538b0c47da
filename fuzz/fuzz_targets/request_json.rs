//! Any bytes as the body of each POST route: parse + validate + strategy factory never panic,
//! and every rejection is a 4xx.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
mod checks {
    include!("../checks.rs");
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::request_json(data));

//! Any template source (first line) and messages (the rest, `role:content` per line) render or
//! fail with an error, never a panic.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
mod checks {
    include!("../checks.rs");
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::chat_template(data));

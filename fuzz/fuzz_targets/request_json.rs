//! Any bytes as the body of each POST route: parse + validate + strategy factory never panic,
//! and every rejection is a 4xx.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ponder::api::{check_body, Limits};
use ponder_strategies::Registry;

fuzz_target!(|data: &[u8]| {
    let (limits, registry) = (Limits::default(), Registry::with_builtins());
    for route in ["/v1/chat/completions", "/v1/completions", "/v1/reason"] {
        if let Err(e) = check_body(route, data, &limits, &registry) {
            assert!(e.status().is_client_error(), "{e} -> {}", e.status());
        }
    }
});

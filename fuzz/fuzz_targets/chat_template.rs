//! Any template source (first line) and messages (the rest, `role:content` per line) render or
//! fail with an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ponder::engine::{ChatMessage, ChatTemplate};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let source = lines.next().unwrap_or_default();
    let messages: Vec<ChatMessage> = lines.map(|l| {
        let (role, content) = l.split_once(':').unwrap_or(("user", l));
        ChatMessage::new(role, content)
    }).collect();
    if let Ok(t) = ChatTemplate::new(source, "<s>", "</s>") {
        let _ = t.render(&messages, true);
    }
});

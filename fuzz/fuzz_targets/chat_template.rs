//! Chat-template rendering: a template, then alternating roles and contents, NUL-separated.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wginfer::tokenizer::{render_template, Message};

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|&b| b == 0).map(String::from_utf8_lossy);
    let Some(template) = parts.next() else { return };
    let rest: Vec<_> = parts.collect();
    let messages: Vec<Message> =
        rest.chunks(2).map(|c| Message::new(&c[0], c.get(1).map_or("", |s| s.as_ref()))).collect();
    let _ = render_template(&template, &messages, "<s>", "</s>");
});

//! The tokenizer and chat template a GGUF file carries in its metadata: built, rendered with odd
//! messages, encoding and streaming back.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use wginfer::model::gguf::Gguf;
use wginfer::tokenizer::TextTokenizer;

fuzz_target!(|data: &[u8]| {
    let Ok(g) = Gguf::from_bytes(Path::new("fuzz.gguf"), data) else { return };
    let Ok(tok) = TextTokenizer::from_gguf(&g) else { return };
    let prompt = tok.render_chat(&wginfer_fuzz::odd_messages()).unwrap_or_else(|_| "héllo 😀 <s>".into());
    if let Ok(ids) = tok.encode(&prompt, true) {
        wginfer_fuzz::check_stream(&tok, &ids);
    }
});

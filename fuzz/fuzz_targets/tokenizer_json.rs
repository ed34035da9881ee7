//! tokenizer.json and tokenizer_config.json (the input cut at its first NUL byte): loaded,
//! the chat template rendered with odd messages, encoded and streamed back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use wginfer::tokenizer::TextTokenizer;

fuzz_target!(|data: &[u8]| {
    let (tokenizer_json, config) = wginfer_fuzz::split_first_nul(data);
    let tc: Value = serde_json::from_slice(config).unwrap_or(Value::Null);
    let Ok(tok) = TextTokenizer::from_hf_files(tokenizer_json, &tc, None, None) else { return };
    let prompt = tok.render_chat(&wginfer_fuzz::odd_messages()).unwrap_or_else(|_| "héllo 😀 <s>".into());
    if let Ok(ids) = tok.encode(&prompt, true) {
        wginfer_fuzz::check_stream(&tok, &ids);
    }
});

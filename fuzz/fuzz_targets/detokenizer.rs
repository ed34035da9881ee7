//! The streaming detokenizer on arbitrary id sequences (some past the vocabulary), with the
//! fixtures' tokenizers: tokenizer.json files and ones built from GGUF metadata.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use wginfer::model::gguf::Gguf;
use wginfer::tokenizer::TextTokenizer;

/// Ids range over the fixtures' vocabularies (384 tokens and a few added ones) and past them.
const ID_RANGE: u16 = 400;

fn tokenizers() -> &'static [TextTokenizer] {
    static TOKENIZERS: OnceLock<Vec<TextTokenizer>> = OnceLock::new();
    TOKENIZERS.get_or_init(|| {
        let hf = [
            &include_bytes!("../../tests/fixtures/llama-f32/tokenizer.json")[..],
            include_bytes!("../../tests/fixtures/mistral-f16/tokenizer.json"),
            include_bytes!("../../tests/fixtures/qwen2-f32/tokenizer.json"),
            include_bytes!("../../tests/fixtures/qwen3-bf16/tokenizer.json"),
            include_bytes!("../../tests/fixtures/gemma3-bf16/tokenizer.json"),
        ];
        let gguf = [
            &include_bytes!("../../tests/fixtures/gguf/tiny-llama-q8_0.gguf")[..],
            include_bytes!("../../tests/fixtures/gguf/tiny-qwen2-q8_0.gguf"),
            include_bytes!("../../tests/fixtures/gguf/tiny-gemma3-q8_0.gguf"),
        ];
        let from_hf = hf.iter().map(|j| TextTokenizer::from_hf_files(j, &Value::Null, None, None));
        let from_gguf =
            gguf.iter().map(|b| TextTokenizer::from_gguf(&Gguf::from_bytes(Path::new("fixture.gguf"), b).unwrap()));
        from_hf.chain(from_gguf).map(|t| t.unwrap()).collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let all = tokenizers();
    let tok = &all[pick as usize % all.len()];
    let ids: Vec<u32> = rest.chunks_exact(2).map(|c| (u16::from_le_bytes([c[0], c[1]]) % ID_RANGE) as u32).collect();
    wginfer_fuzz::check_stream(tok, &ids);
});

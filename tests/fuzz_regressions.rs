//! Inputs the fuzz targets (fuzz/, scripts/fuzz.sh) found to crash the engine, each now a clear
//! error naming the file.

use wginfer::tokenizer::TextTokenizer;

/// A raw control character inside tokenizer.json's "decoder" entry made the `tokenizers` crate
/// panic (`expect("Helper")`) instead of returning its JSON error.
#[test]
fn tokenizer_json_with_a_syntax_error_in_its_decoder() {
    let json = b"{\"version\":\"1.0\",\"decoder\":{\"type\":\"ByteLevel\x01\"}}";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokenizer.json"), json).unwrap();
    let err = format!("{:#}", TextTokenizer::from_hf_dir(dir.path()).err().expect("an error, not a tokenizer"));
    let file = dir.path().join("tokenizer.json").display().to_string();
    assert!(err.contains(&file) && err.contains("not valid JSON") && err.contains("control character"), "{err}");
}

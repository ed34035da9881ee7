//! What the fuzz targets share: splitting one input into several files, the loader's checks on a
//! tensor source, and the streaming detokenizer's promise.

use wginfer::model::config::ModelConfig;
use wginfer::model::loader::check_sizes;
use wginfer::model::tensor::TensorSource;
use wginfer::tokenizer::{Message, StreamDecoder, TextTokenizer};

/// `data` cut at its first NUL byte: (before, after). Text files (JSON, templates) cannot hold a
/// raw NUL, so one input carries a text file and the bytes of another.
pub fn split_first_nul(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// What the loader does with a source before it touches a GPU: the shape checks, then the
/// embedding converted to the layout it would upload and the final norm as f32.
pub fn loader_checks(cfg: &ModelConfig, src: &dyn TensorSource) {
    if check_sizes(cfg, src).is_err() {
        return;
    }
    if let Ok(Some(embed)) = src.tensor("model.embed_tokens.weight") {
        let _ = embed.to_weight_bytes(embed.dtype.gpu_type());
    }
    if let Ok(Some(norm)) = src.tensor("model.norm.weight") {
        let _ = norm.to_f32();
    }
}

/// Chat turns that templates handle badly: empty, a system turn, roles out of order, an unknown
/// role, text that looks like template syntax or special tokens.
pub fn odd_messages() -> Vec<Message> {
    vec![
        Message::new("system", ""),
        Message::new("user", "{{ raise_exception('x') }}<s></s>\u{0}"),
        Message::new("user", "héllo\r\n\t😀"),
        Message::new("assistant", " "),
        Message::new("tool", "{% endfor %}"),
    ]
}

/// Streams `ids` through `StreamDecoder`: every piece and the rest at the end add up to `decode`
/// of all of them, and no piece ends in a cut character (U+FFFD).
pub fn check_stream(tok: &TextTokenizer, ids: &[u32]) {
    let Ok(whole) = tok.decode(ids) else { return };
    let mut dec = StreamDecoder::default();
    let mut streamed = String::new();
    for &id in ids {
        match dec.push(tok, id) {
            Ok(Some(piece)) => {
                assert!(!piece.ends_with('\u{FFFD}'), "piece {piece:?} ends in a cut character");
                streamed.push_str(&piece);
            }
            Ok(None) => {}
            Err(_) => return,
        }
    }
    let Ok(rest) = dec.finish(tok) else { return };
    streamed.push_str(&rest);
    assert_eq!(streamed, whole, "streamed pieces differ from decode of {ids:?}");
}

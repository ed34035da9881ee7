//! A `tokenizers` tokenizer built from GGUF `tokenizer.ggml.*` metadata (gpt2-style byte-level
//! BPE, and Gemma 3's SentencePiece vocabulary), by writing the tokenizer.json that describes it. The pre-tokenizer follows
//! `tokenizer.ggml.pre` as llama.cpp reads it.

use std::collections::HashMap;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use super::gguf::{Gguf, Meta};

/// Qwen2's split pattern (also in its tokenizer.json).
const QWEN2_PATTERN: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Llama 3's: like Qwen2's, with numbers in groups of up to three digits.
const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn byte_level(use_regex: bool) -> Value {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex})
}

fn split_then_bytes(pattern: &str) -> Value {
    json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false},
        byte_level(false),
    ]})
}

/// (pre-tokenizer, normalizer) for a `tokenizer.ggml.pre` value.
fn pre_tokenizer(pre: &str) -> Result<(Value, Value)> {
    Ok(match pre {
        "default" | "gpt2" | "gpt-2" => (byte_level(true), Value::Null),
        // SmolLM: every digit on its own, then GPT-2's split.
        "smollm" | "starcoder" => (
            json!({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
            Value::Null,
        ),
        "qwen2" => (split_then_bytes(QWEN2_PATTERN), json!({"type": "NFC"})),
        "llama3" | "llama-bpe" | "smaug-bpe" => (split_then_bytes(LLAMA3_PATTERN), Value::Null),
        other => bail!("tokenizer.ggml.pre {other:?} is not supported (gpt2, smollm, qwen2, llama-bpe are)"),
    })
}

fn strings<'a>(g: &'a Gguf, key: &str) -> Result<Vec<&'a str>> {
    let arr = g.get(key).and_then(Meta::as_array).with_context(|| format!("missing metadata {key}"))?;
    arr.iter().map(|m| m.as_str().with_context(|| format!("metadata {key} must hold strings"))).collect()
}

/// The tokenizer, plus the texts of the BOS and EOS tokens.
pub fn build(g: &Gguf) -> Result<(tokenizers::Tokenizer, String, String)> {
    let tokens = strings(g, "tokenizer.ggml.tokens")?;
    let types = token_types(g, tokens.len())?;
    let spec = match (g.str("tokenizer.ggml.model")?, g.str("general.architecture")?) {
        (Some("gpt2"), _) => gpt2(g, &tokens, &types)?,
        (Some("llama"), Some("gemma3")) => gemma(&tokens, &types)?,
        (other, _) => bail!(
            "tokenizer.ggml.model {other:?} is not supported (gpt2 byte-level BPE is, and gemma3's \"llama\" vocabulary)"
        ),
    };
    let tok: tokenizers::Tokenizer =
        spec.to_string().parse().map_err(|e| anyhow!("cannot build a tokenizer from the GGUF metadata: {e}"))?;
    let text = |id: Option<u32>| id.map(|i| tokens[i as usize].to_string()).unwrap_or_default();
    Ok((tok, text(g.bos_id()?), text(g.eos_id()?)))
}

/// `tokenizer.ggml.token_type`: one integer a token (1 normal, 3 control, 4 user-defined ...);
/// all normal where absent.
fn token_types(g: &Gguf, n_tokens: usize) -> Result<Vec<i64>> {
    const KEY: &str = "tokenizer.ggml.token_type";
    let Some(v) = g.get(KEY) else { return Ok(vec![1; n_tokens]) };
    let types = v.as_array().with_context(|| format!("metadata {KEY} must be an array, found {}", v.describe()))?;
    if types.len() != n_tokens {
        bail!("metadata {KEY} holds {} types for the {n_tokens} tokens of tokenizer.ggml.tokens", types.len());
    }
    types
        .iter()
        .enumerate()
        .map(|(i, m)| match *m {
            Meta::Int(t) => Ok(t),
            Meta::UInt(t) => Ok(t as i64),
            _ => bail!("metadata {KEY}: entry {i} must be an integer, found {}", m.describe()),
        })
        .collect()
}

/// A gpt2-style byte-level BPE (tokens and merges as the file gives them).
fn gpt2(g: &Gguf, tokens: &[&str], types: &[i64]) -> Result<Value> {
    let merges = strings(g, "tokenizer.ggml.merges")?;
    let vocab: serde_json::Map<String, Value> =
        tokens.iter().enumerate().map(|(i, t)| (t.to_string(), json!(i))).collect();
    // Control (3) and user-defined (4) tokens match as whole strings, before BPE.
    let added: Vec<Value> = tokens
        .iter()
        .zip(types)
        .enumerate()
        .filter(|(_, (_, &ty))| ty == 3 || ty == 4)
        .map(|(i, (t, &ty))| {
            json!({"id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": ty == 4, "special": ty == 3})
        })
        .collect();
    let (pre, normalizer) = pre_tokenizer(g.str("tokenizer.ggml.pre")?.unwrap_or("default"))?;
    Ok(json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre,
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": merges},
    }))
}

/// Tokens longer than this get no merges rebuilt (see `gemma`).
const MAX_MERGED_TOKEN_BYTES: usize = 512;
/// Rebuilt merges, and the bytes of the tokens they make, at most this many times the
/// vocabulary's tokens and bytes: gemma-3-270m's 262,144 tokens give 514,906 merges (1.96 a
/// token); a vocabulary built so that every split of long tokens is a token gives hundreds
/// a token, gigabytes of merges from a file of megabytes.
const MAX_MERGES_PER_TOKEN: usize = 8;

/// Gemma's SentencePiece vocabulary (`tokenizer.ggml.model` "llama", no merges) as transformers
/// 5.x builds it from the file (integrations/gguf, `gemma_tokenizer`): tokens made of spaces only
/// respelled with "\u{2581}"; the merges recovered from the vocabulary, every split of a token into
/// two tokens, ordered by the token's place in the file (not its score), then the longer left
/// piece first; BPE with byte fallback over text whose spaces became "\u{2581}"; control tokens
/// special and user-defined ones whole.
fn gemma(tokens: &[&str], types: &[i64]) -> Result<Value> {
    let respelled: Vec<String> = tokens
        .iter()
        .map(|t| match t.contains(' ') && t.trim().is_empty() {
            true => "\u{2581}".repeat(t.chars().count()),
            false => t.to_string(),
        })
        .collect();
    // A token listed twice keeps its last id, as a Python dict built in file order does.
    let mut ids: HashMap<&str, usize> = HashMap::with_capacity(respelled.len());
    for (i, t) in respelled.iter().enumerate() {
        ids.insert(t, i);
    }
    // The model's unknown token: without it in the vocabulary, text the byte fallback cannot
    // spell would fail at the request, not here.
    if !ids.contains_key("<unk>") {
        bail!("tokenizer.ggml.tokens has no \"<unk>\" token, which a SentencePiece vocabulary needs");
    }
    let mut merges: Vec<(usize, usize, &str, &str)> = Vec::new();
    let vocab_bytes: usize = respelled.iter().map(String::len).sum();
    let (max_merges, max_bytes) = (MAX_MERGES_PER_TOKEN * tokens.len(), MAX_MERGES_PER_TOKEN * vocab_bytes);
    let mut merged_bytes = 0;
    // Each split hashes both halves: quadratic in a token's length, so a file with a token of
    // megabytes would hang here. Real vocabularies' tokens are a few dozen bytes at most.
    for (t, &id) in ids.iter().filter(|(t, _)| t.len() <= MAX_MERGED_TOKEN_BYTES) {
        for (n, (at, _)) in t.char_indices().enumerate().skip(1) {
            let (l, r) = t.split_at(at);
            if ids.contains_key(l) && ids.contains_key(r) {
                merges.push((id, usize::MAX - n, l, r));
                merged_bytes += t.len();
            }
        }
        if merges.len() > max_merges || merged_bytes > max_bytes {
            bail!(
                "tokenizer.ggml.tokens: its {} tokens split into more than {MAX_MERGES_PER_TOKEN} merges a token (or bytes a byte); not a SentencePiece vocabulary",
                tokens.len()
            );
        }
    }
    merges.sort_unstable();
    let merges: Vec<Value> = merges.into_iter().map(|(_, _, l, r)| json!([l, r])).collect();
    let vocab: serde_json::Map<String, Value> = ids.iter().map(|(t, i)| (t.to_string(), json!(i))).collect();
    let added: Vec<Value> = tokens
        .iter()
        .zip(types)
        .enumerate()
        .filter(|(_, (t, &ty))| ty == 3 || (ty == 4 && ids.contains_key(*t)))
        .map(|(i, (t, &ty))| {
            json!({"id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": ty == 3})
        })
        .collect();
    let space = json!({"String": " "});
    Ok(json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": space, "content": "\u{2581}"},
        "pre_tokenizer": {"type": "Split", "pattern": space, "behavior": "MergedWithPrevious", "invert": false},
        "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
                  "vocab": vocab, "merges": merges},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string a^i b^j (i + j <= 40): each splits at every place into two tokens, 27
    /// merges a token, where a SentencePiece vocabulary gives about 2.
    #[test]
    fn a_vocabulary_of_every_split_is_refused() {
        let words: Vec<String> =
            (1..=40).flat_map(|n| (0..=n).map(move |i| "a".repeat(i) + &"b".repeat(n - i))).collect();
        let tokens: Vec<&str> = ["<unk>"].into_iter().chain(words.iter().map(String::as_str)).collect();
        let e = gemma(&tokens, &vec![1; tokens.len()]).unwrap_err();
        assert!(e.to_string().contains("more than 8 merges a token"), "{e}");
        assert!(gemma(&tokens[..5], &[1; 5]).is_ok());
    }

    #[test]
    fn a_vocabulary_without_unk_is_refused() {
        let e = gemma(&["a", "b", "ab"], &[1; 3]).unwrap_err();
        assert!(e.to_string().contains("no \"<unk>\" token"), "{e}");
        assert!(gemma(&["<unk>", "a", "b", "ab"], &[2, 1, 1, 1]).is_ok());
    }
}

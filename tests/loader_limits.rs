//! Hand-built malicious files: a count, length or shape that claims more than the file holds is
//! an error naming the file and the field or tensor, at once, never an abort or an allocation
//! larger than the file. Large files are sparse (`set_len`), so they take no disk.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use wginfer::engine::{Engine, EngineOptions};
use wginfer::model::config::read_config;
use wginfer::model::folder::ModelFolder;
use wginfer::model::gguf::{Gguf, Meta};
use wginfer::model::loader::check_sizes;
use wginfer::model::safetensors::SafeTensors;
use wginfer::tokenizer::TextTokenizer;

mod support;

/// Writes `bytes` to `dir/name`, zero-filled to `len` bytes.
fn write_sparse(dir: &Path, name: &str, bytes: &[u8], len: u64) -> PathBuf {
    let path = dir.join(name);
    let mut f = File::create(&path).unwrap();
    f.write_all(bytes).unwrap();
    f.set_len(len.max(bytes.len() as u64)).unwrap();
    path
}

fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "error {msg:?} should mention {p:?}");
    }
}

/// A GGUF v3 header: magic, version, tensor count, metadata count.
fn gguf_header(n_tensors: u64, n_meta: u64) -> Vec<u8> {
    [&b"GGUF"[..], &3u32.to_le_bytes(), &n_tensors.to_le_bytes(), &n_meta.to_le_bytes()].concat()
}

fn push_str(b: &mut Vec<u8>, s: &str) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s.as_bytes());
}

/// A metadata entry `key` of type array of `elem_type` claiming `n` elements (none follow).
fn array_entry(key: &str, elem_type: u32, n: u64) -> Vec<u8> {
    let mut b = Vec::new();
    push_str(&mut b, key);
    b.extend(9u32.to_le_bytes());
    b.extend(elem_type.to_le_bytes());
    b.extend(n.to_le_bytes());
    b
}

/// The error opening `bytes` as a GGUF file of `len` bytes; it must name the file.
fn gguf_error(bytes: &[u8], len: u64) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write_sparse(dir.path(), "bad.gguf", bytes, len);
    let msg = match Gguf::open(&path) {
        Ok(_) => panic!("a malicious GGUF file opened"),
        Err(e) => format!("{e:#}"),
    };
    assert_mentions(&msg, &["bad.gguf"]);
    msg
}

#[test]
fn gguf_counts_and_lengths_beyond_the_file() {
    let msg = gguf_error(&gguf_header(1 << 40, 0), 0);
    assert_mentions(&msg, &["tensor count is 1099511627776"]);

    let mut b = gguf_header(0, 1);
    push_str(&mut b, "general.name");
    b.extend(8u32.to_le_bytes());
    b.extend((1u64 << 60).to_le_bytes());
    assert_mentions(&gguf_error(&b, 0), &["length of general.name is 1152921504606846976"]);

    let b = [gguf_header(0, 1), array_entry("tokenizer.ggml.tokens", 8, 1 << 40)].concat();
    assert_mentions(&gguf_error(&b, 0), &["element count of tokenizer.ggml.tokens is 1099511627776"]);
}

/// Counts a 64 GiB file could hold, as bytes on disk, but not as the items they become in memory
/// (64 bytes a tensor info, 32 a metadata value): the old reader checked counts only against
/// the file's bytes and reserved 128 GiB for each of these, aborting the process.
#[test]
fn gguf_counts_beyond_what_a_large_file_needs_in_memory() {
    let len = 1u64 << 36;
    assert_mentions(&gguf_error(&gguf_header(1 << 31, 0), len), &["tensor count is 2147483648", "bytes in memory"]);
    let b = [gguf_header(0, 1), array_entry("tokenizer.ggml.token_type", 0, 1 << 32)].concat();
    assert_mentions(&gguf_error(&b, len), &["element count of tokenizer.ggml.token_type is 4294967296", "in memory"]);
}

#[test]
fn gguf_tensor_dims_that_overflow_or_exceed_the_file() {
    let typed = |ne: &[u64], ggml_type: u32, offset: u64| {
        let mut b = gguf_header(1, 0);
        push_str(&mut b, "token_embd.weight");
        b.extend((ne.len() as u32).to_le_bytes());
        ne.iter().for_each(|d| b.extend(d.to_le_bytes()));
        b.extend(ggml_type.to_le_bytes());
        b.extend(offset.to_le_bytes());
        b
    };
    let tensor = |ne: &[u64]| typed(ne, 0, 0); // F32
    assert_mentions(&gguf_error(&tensor(&[1 << 32, 1 << 32, 1 << 32, 1]), 0), &["token_embd.weight", "overflows"]);
    assert_mentions(&gguf_error(&tensor(&[1 << 20, 1 << 20]), 0), &["token_embd.weight", "past the end"]);
    // Each fault by its own name: values past what memory addresses, rows that are not whole
    // blocks (Q8_0: 32 values), an offset off the file's alignment (32 bytes by default).
    assert_mentions(&gguf_error(&tensor(&[1 << 62]), 0), &["token_embd.weight", "too large to address"]);
    assert_mentions(&gguf_error(&typed(&[48, 2], 8, 0), 0), &["token_embd.weight", "not whole", "blocks of 32"]);
    assert_mentions(&gguf_error(&typed(&[8], 0, 1), 0), &["token_embd.weight", "offset 1", "alignment 32"]);
}

/// A tensor or metadata key listed twice is an error (llama.cpp's reader refuses it too), not
/// the last one silently winning.
#[test]
fn gguf_names_listed_twice_are_refused() {
    let mut b = gguf_header(2, 0);
    for offset in [0u64, 32] {
        push_str(&mut b, "output_norm.weight");
        b.extend(1u32.to_le_bytes());
        b.extend(8u64.to_le_bytes());
        b.extend(0u32.to_le_bytes()); // F32
        b.extend(offset.to_le_bytes());
    }
    assert_mentions(&gguf_error(&b, 4096), &["tensor output_norm.weight appears twice"]);
    let mut b = gguf_header(0, 2);
    for value in [1u32, 2] {
        push_str(&mut b, "general.alignment");
        b.extend(4u32.to_le_bytes()); // UINT32
        b.extend(value.to_le_bytes());
    }
    assert_mentions(&gguf_error(&b, 4096), &["metadata key general.alignment appears twice"]);
}

/// GGUF metadata sizes get the same limits as config.json's. The old reader accepted a block
/// count of 2^32 - 1 and the loader reserved that many layers before reading a tensor, aborting.
#[test]
fn absurd_gguf_metadata_sizes_are_rejected() {
    let mut b = std::fs::read(support::fixture("gguf/tiny-llama-q8_0.gguf")).unwrap();
    let key = b"llama.block_count";
    let at = b.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    assert_eq!(b[at..at + 4], 4u32.to_le_bytes(), "block_count is a u32");
    b[at + 4..at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = write_sparse(dir.path(), "bad.gguf", &b, 0);
    let msg = format!("{:#}", Gguf::open(&path).unwrap().config().unwrap_err());
    assert_mentions(&msg, &["llama.block_count", "4294967295"]);
}

/// Metadata the engine reads, of another type than it reads or naming a token the vocabulary
/// lacks, is an error naming the key and the file: read as absent, it changed what the model
/// did without a word (an EOS id past the vocabulary never stopped generation; a string
/// `add_bos_token` dropped the BOS).
#[test]
fn gguf_metadata_of_the_wrong_type_or_past_the_vocabulary_is_refused() {
    let path = support::fixture("gguf/tiny-llama-q8_0.gguf");
    let n = Gguf::open(&path).unwrap().get("tokenizer.ggml.tokens").and_then(Meta::as_array).unwrap().len() as u64;
    let below = format!("below the {n} tokens");
    let cases: [(&str, Meta, &str); 7] = [
        ("tokenizer.ggml.eos_token_id", Meta::UInt(n), &below),
        ("tokenizer.ggml.bos_token_id", Meta::Str("1".into()), "found the string \"1\""),
        ("tokenizer.ggml.add_bos_token", Meta::Str("true".into()), "must be a boolean"),
        ("tokenizer.ggml.pre", Meta::Int(2), "must be a string, found the integer 2"),
        ("tokenizer.chat_template", Meta::Array(vec![]), "must be a string, found an array of 0 values"),
        ("tokenizer.ggml.token_type", Meta::Array(vec![Meta::Int(1)]), &format!("holds 1 types for the {n} tokens")),
        ("tokenizer.ggml.model", Meta::Bool(true), "must be a string, found the boolean true"),
    ];
    for (key, value, says) in cases {
        let mut g = Gguf::open(&path).unwrap();
        g.meta.insert(key.into(), value);
        let Err(e) = TextTokenizer::from_gguf(&g) else { panic!("{key}: the tokenizer was built") };
        assert_mentions(&format!("{e:#}"), &[key, says, "tiny-llama-q8_0.gguf"]);
    }
    for key in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.bos_token_id"] {
        let mut g = Gguf::open(&path).unwrap();
        g.meta.insert(key.into(), Meta::UInt(n));
        assert_mentions(&format!("{:#}", g.config().unwrap_err()), &[key, &below]);
        g.meta.insert(key.into(), Meta::UInt(n - 1));
        assert!(g.config().is_ok() && TextTokenizer::from_gguf(&g).is_ok(), "{key} = {}", n - 1);
    }
}

/// A tensor the file lacks is named as the file would name it, and tensors whose data overlap
/// are refused.
#[test]
fn gguf_tensor_errors_use_the_files_names() {
    let mut b = std::fs::read(support::fixture("gguf/tiny-llama-q8_0.gguf")).unwrap();
    let name = b"blk.0.attn_q.weight";
    let at = b.windows(name.len()).position(|w| w == name).unwrap();
    b[at..at + name.len()].copy_from_slice(b"blk.0.attn_X.weight");
    let g = Gguf::from_bytes(Path::new("renamed.gguf"), &b).unwrap();
    let e = check_sizes(&g.config().unwrap(), &g).unwrap_err();
    assert_mentions(&format!("{e:#}"), &["missing tensor blk.0.attn_q.weight"]);

    let mut b = gguf_header(3, 0);
    for (name, offset) in [("output_norm.weight", 0u64), ("token_embd.weight", 0), ("blk.0.attn_norm.weight", 32)] {
        push_str(&mut b, name);
        b.extend(1u32.to_le_bytes());
        b.extend(8u64.to_le_bytes());
        b.extend(0u32.to_le_bytes()); // F32
        b.extend(offset.to_le_bytes());
    }
    assert_mentions(&gguf_error(&b, 4096), &["tensors output_norm.weight and token_embd.weight overlap"]);
}

/// The error opening `bytes` as a folder's model.safetensors; it must name the file.
fn safetensors_error(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    write_sparse(dir.path(), "model.safetensors", bytes, 0);
    let msg = match SafeTensors::open(&ModelFolder::dir(dir.path())) {
        Ok(_) => panic!("a malicious safetensors file opened"),
        Err(e) => format!("{e:#}"),
    };
    assert_mentions(&msg, &["model.safetensors"]);
    msg
}

/// A safetensors file: `header` as its JSON header, then `data_len` zero bytes.
fn safetensors_bytes(header: &Value, data_len: usize) -> Vec<u8> {
    let h = serde_json::to_vec(header).unwrap();
    [&(h.len() as u64).to_le_bytes()[..], &h, &vec![0; data_len]].concat()
}

#[test]
fn safetensors_header_length_past_the_end() {
    let b = [&1000u64.to_le_bytes()[..], b"{}"].concat();
    assert_mentions(&safetensors_error(&b), &["header length 1000", "past the end"]);
    let b = [&(1u64 << 60).to_le_bytes()[..], b"{}"].concat();
    assert_mentions(&safetensors_error(&b), &["header length 1152921504606846976"]);
}

/// Each header entry the crate rejects is named, with what is wrong with it.
#[test]
fn safetensors_tensor_errors_name_the_tensor() {
    let f32s = |shape: Value, offsets: Value| json!({"dtype": "F32", "shape": shape, "data_offsets": offsets});
    let cases = [
        // Offsets past the data.
        (json!({"a": f32s(json!([4]), json!([0, 16]))}), 8, vec!["tensor a", "data ends at byte 16", "truncated"]),
        // Offsets that do not match the shape, huge or not.
        (json!({"a": f32s(json!([4]), json!([0, 1u64 << 60]))}), 16, vec!["tensor a", "1152921504606846976"]),
        (json!({"a": f32s(json!([2]), json!([0, 16]))}), 16, vec!["tensor a", "shape [2]"]),
        // A shape whose product overflows.
        (
            json!({"a": f32s(json!([1u64 << 32, 1u64 << 32, 1u64 << 32]), json!([0, 16]))}),
            16,
            vec!["tensor a", "overflow"],
        ),
        // A dtype the format does not know, and one the engine does not support.
        (json!({"a": {"dtype": "Q9", "shape": [4], "data_offsets": [0, 16]}}), 16, vec!["tensor a", "Q9"]),
        (json!({"a": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}}), 4, vec!["tensor a", "dtype I8"]),
        // Overlapping tensors.
        (json!({"a": f32s(json!([4]), json!([0, 16])), "b": f32s(json!([4]), json!([8, 24]))}), 24, vec!["`b`"]),
    ];
    for (header, data_len, parts) in cases {
        assert_mentions(&safetensors_error(&safetensors_bytes(&header, data_len)), &parts);
    }
}

/// A copy of the llama fixture with `fields` of its config.json set.
fn fixture_with(fields: &[(&str, Value)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(support::fixture("llama-f32")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    let path = dir.path().join("config.json");
    let mut cfg = support::read_json(&path);
    for (field, value) in fields {
        cfg[*field] = value.clone();
    }
    std::fs::write(&path, cfg.to_string()).unwrap();
    dir
}

/// Sizes no model has are refused as config.json is read. The old loader accepted them and
/// reserved tables of that many layers or rows before reading a tensor, aborting the process.
#[test]
fn absurd_config_sizes_are_rejected() {
    let fields = [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "intermediate_size",
        "vocab_size",
        "max_position_embeddings",
    ];
    for field in fields {
        let dir = fixture_with(&[(field, json!(1u64 << 40))]);
        let msg = format!("{:#}", read_config(&ModelFolder::dir(dir.path())).unwrap_err());
        assert_mentions(&msg, &["config.json", &format!("\"{field}\""), "1099511627776"]);
    }
}

/// Sizes within the limits that the files do not hold: the loader checks the tensors that hold
/// them before sizing anything from them. The old one built the fused QKV row order (3 * 2^48
/// entries here) first, aborting the process.
#[test]
fn config_sizes_the_files_do_not_hold() {
    let load_error = |size: u32| {
        let big = json!(1u64 << size);
        let fields = [("num_attention_heads", big.clone()), ("num_key_value_heads", big.clone()), ("head_dim", big)];
        let dir = fixture_with(&fields);
        match Engine::load(dir.path(), &EngineOptions::default()) {
            Ok(_) => panic!("a config with 2^{size} heads of 2^{size} loaded"),
            Err(e) => format!("{e:#}"),
        }
    };
    assert_mentions(&load_error(12), &["model.layers.0.self_attn.q_proj.weight", "expected [16777216, 64]"]);
    // Past 2^24 q rows the config itself is refused (the product wrapped on 32-bit targets).
    assert_mentions(&load_error(24), &["num_attention_heads 16777216 x head_dim 16777216 is over"]);
}

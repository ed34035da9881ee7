//! SentencePiece's precompiled charsmap (a tokenizer.json `Precompiled` normalizer), checked
//! before the `tokenizers` crate takes it: that crate (0.22, with spm_precompiled 0.1.4) panics
//! on a charsmap that does not decode (`expect("Precompiled")`, as in files whose charsmap is
//! null), and while encoding indexes the charsmap's trie and its normalized strings unchecked.
//! The walk below visits every trie position an input can reach, as `common_prefix_search`
//! does, and every string a leaf points to, as `transform` slices it.

use anyhow::{bail, ensure, Context, Result};
use base64::Engine as _;
use serde_json::Value;

/// Checks every `Precompiled` normalizer of a tokenizer.json's `normalizer` (inside
/// `Sequence`s too).
pub fn check_normalizer(normalizer: &Value) -> Result<()> {
    match normalizer.get("type").and_then(Value::as_str) {
        Some("Sequence") => {
            let inner = normalizer.get("normalizers").and_then(Value::as_array);
            inner.into_iter().flatten().try_for_each(check_normalizer)
        }
        Some("Precompiled") => {
            let map = normalizer.get("precompiled_charsmap");
            let text = map
                .and_then(Value::as_str)
                .with_context(|| format!("normalizer Precompiled: precompiled_charsmap is {map:?}, not a string"))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .context("normalizer Precompiled: precompiled_charsmap is not base64")?;
            check_charsmap(&bytes).context("normalizer Precompiled: precompiled_charsmap")
        }
        _ => Ok(()),
    }
}

/// Inputs reach at most this many bytes into the trie: the crate looks up graphemes of fewer
/// than 6 bytes, else single characters.
const MAX_KEY_BYTES: usize = 5;

/// The charsmap's layout: a u32 byte count of the trie, the trie (u32 units of a darts-clone
/// double array), then NUL-terminated UTF-8 strings that leaves point to.
fn check_charsmap(bytes: &[u8]) -> Result<()> {
    let le = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    ensure!(bytes.len() >= 4, "{} bytes, fewer than its trie size field", bytes.len());
    let trie_bytes = le(bytes) / 4 * 4;
    let trie_end = 4usize.checked_add(trie_bytes).filter(|&e| e <= bytes.len());
    let trie_end = trie_end.with_context(|| format!("a trie of {trie_bytes} bytes in {} bytes", bytes.len()))?;
    let units: Vec<usize> = bytes[4..trie_end].chunks_exact(4).map(le).collect();
    let normalized = std::str::from_utf8(&bytes[trie_end..]).context("its strings are not UTF-8")?;
    ensure!(!units.is_empty(), "the trie is empty");
    let offset = |u: usize| (u >> 10) << ((u & (1 << 9)) >> 6);
    let (label, has_leaf, value) =
        (|u: usize| u & ((1 << 31) | 0xFF), |u: usize| (u >> 8) & 1 == 1, |u| u & ((1 << 31) - 1));
    let unit = |pos: usize| units.get(pos).copied().with_context(|| format!("trie position {pos} of {}", units.len()));
    let mut seen = std::collections::HashSet::new();
    let mut states = vec![(offset(units[0]), 0)];
    while let Some((node, depth)) = states.pop() {
        if depth == MAX_KEY_BYTES || !seen.insert(node) {
            continue;
        }
        for c in 1..=255usize {
            let u = unit(node ^ c)?;
            if label(u) != c {
                continue;
            }
            let next = node ^ c ^ offset(u);
            if has_leaf(u) {
                let at = value(unit(next)?);
                if !normalized.is_char_boundary(at) {
                    bail!("a leaf points to byte {at} of its {}-byte strings", normalized.len());
                }
            }
            states.push((next, depth + 1));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A charsmap mapping "a" to "b": the root's children in units 257..=511 (its offset 256),
    /// "a" at 256 ^ 97 = 353 with a leaf at 353 ^ 1, pointing to string 0.
    fn a_to_b(len: usize, leaf_value: u32) -> Vec<u8> {
        let mut units = vec![0u32; 512];
        units[0] = 256 << 10;
        units[353] = (1 << 10) | (1 << 8) | 97;
        units[352] = leaf_value;
        units.truncate(len);
        let mut bytes = ((4 * len) as u32).to_le_bytes().to_vec();
        units.iter().for_each(|u| bytes.extend(u.to_le_bytes()));
        bytes.extend(b"b\0");
        bytes
    }

    #[test]
    fn charsmaps_the_crate_would_panic_on_are_refused() {
        assert!(check_charsmap(&a_to_b(512, 0)).is_ok());
        for (bytes, why) in [
            (vec![], "fewer than its trie size field"),
            (vec![0; 4], "the trie is empty"),
            (a_to_b(512, 0)[..100].to_vec(), "a trie of 2048 bytes"),
            (a_to_b(300, 0), "trie position"),
            (a_to_b(512, 5), "points to byte 5"),
        ] {
            let e = format!("{:#}", check_charsmap(&bytes).unwrap_err());
            assert!(e.contains(why), "{why}: {e}");
        }
        let json = |map: Value| serde_json::json!({"type": "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap": map}]});
        assert!(check_normalizer(&json(Value::Null)).is_err());
        assert!(check_normalizer(&json("AAAAAA==".into())).is_err());
    }

    /// The crate takes a charsmap that passes, and applies it: "a" encodes as "b" does.
    #[test]
    fn a_valid_charsmap_loads_and_normalizes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama-f32");
        let mut json: Value = serde_json::from_slice(&std::fs::read(dir.join("tokenizer.json")).unwrap()).unwrap();
        let map = base64::engine::general_purpose::STANDARD.encode(a_to_b(512, 0));
        json["normalizer"] = serde_json::json!({"type": "Precompiled", "precompiled_charsmap": map});
        let tok = crate::tokenizer::TextTokenizer::from_hf_files(json.to_string().as_bytes(), &Value::Null, None, None)
            .unwrap();
        assert_eq!(tok.encode("a", false).unwrap(), tok.encode("b", false).unwrap());
        assert_ne!(tok.encode("c", false).unwrap(), tok.encode("b", false).unwrap());
        json["normalizer"]["precompiled_charsmap"] = Value::Null;
        let e = crate::tokenizer::TextTokenizer::from_hf_files(json.to_string().as_bytes(), &Value::Null, None, None);
        assert!(format!("{:#}", e.err().unwrap()).contains("precompiled_charsmap"));
    }
}

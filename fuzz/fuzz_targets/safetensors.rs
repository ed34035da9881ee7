//! A safetensors file: header validation, and every error naming the file.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use wginfer::model::safetensors::SafeTensors;
use wginfer::model::tensor::TensorSource;

fuzz_target!(|data: &[u8]| {
    match SafeTensors::from_bytes(Path::new("fuzz.safetensors"), data) {
        Ok(st) => {
            if let Ok(Some(t)) = st.tensor("model.embed_tokens.weight") {
                let _ = t.to_f32();
            }
        }
        Err(e) => assert!(format!("{e:#}").contains("fuzz.safetensors"), "error does not name the file: {e:#}"),
    }
});

//! config.json, and a Hugging Face folder's config.json with its safetensors file (the input cut
//! at its first NUL byte): the loader's shape checks and conversions against both.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use wginfer::model::config::parse_config;
use wginfer::model::safetensors::SafeTensors;

fuzz_target!(|data: &[u8]| {
    let (config, tensors) = wginfer_fuzz::split_first_nul(data);
    let Ok(json) = serde_json::from_slice(config) else { return };
    let Ok(cfg) = parse_config(&json) else { return };
    let _ = cfg.inv_freq();
    if let Ok(st) = SafeTensors::from_bytes(Path::new("fuzz.safetensors"), tensors) {
        wginfer_fuzz::loader_checks(&cfg, &st);
    }
});

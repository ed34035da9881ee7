//! GGUF header, metadata and tensor table, the config from metadata, and the loader's shape
//! checks and conversions on its tensors.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use wginfer::model::gguf::Gguf;

fuzz_target!(|data: &[u8]| {
    let g = match Gguf::from_bytes(Path::new("fuzz.gguf"), data) {
        Ok(g) => g,
        Err(e) => {
            assert!(format!("{e:#}").contains("fuzz.gguf"), "error does not name the file: {e:#}");
            return;
        }
    };
    let _ = g.data_bytes();
    if let Ok(cfg) = g.config() {
        let _ = cfg.inv_freq();
        wginfer_fuzz::loader_checks(&cfg, &g);
    }
});

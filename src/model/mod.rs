//! Models: configuration, tensor files, weight loading and the forward pass.

pub mod config;
pub mod forward;
pub mod loader;
pub mod safetensors;
pub mod tensor;

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::gpu::Gpu;
use config::{read_config, ModelConfig};
use forward::{Forward, ForwardOptions};

/// Loads a Hugging Face model folder (config.json + safetensors) onto the GPU.
pub fn load_hf_dir(gpu: &Gpu, dir: &Path, opts: &ForwardOptions) -> Result<Forward> {
    if !dir.is_dir() {
        bail!(
            "{}: not a model folder (expected config.json and *.safetensors)",
            dir.display()
        );
    }
    let cfg: ModelConfig = read_config(&dir.join("config.json"))?;
    let src = safetensors::SafeTensors::open_dir(dir)?;
    let weights = loader::load_weights(gpu, &cfg, &src)
        .with_context(|| format!("loading {}", dir.display()))?;
    Forward::new(gpu, cfg, weights, opts)
}

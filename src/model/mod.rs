//! Models: configuration, tensor files, weight loading and the forward pass.

pub mod config;
pub mod folder;
pub mod forward;
pub mod gguf;
pub mod gguf_tokenizer;
pub mod loader;
pub mod mapped;
pub mod quant;
pub mod safetensors;
pub mod synthetic;
pub mod tensor;

use std::path::Path;

use anyhow::{ensure, Context, Result};

use crate::gpu::Gpu;
use config::{read_config, ModelConfig};
use folder::ModelFolder;
use forward::{Forward, ForwardOptions};

/// Loads a GGUF file onto the GPU; quantized weights stay quantized.
pub fn load_gguf(gpu: &Gpu, file: &gguf::Gguf, opts: &ForwardOptions) -> Result<Forward> {
    let cfg = file.config().with_context(|| format!("in {}", file.path.display()))?;
    let weights = loader::load_weights(gpu, &cfg, file).with_context(|| format!("loading {}", file.path.display()))?;
    Forward::new(gpu, cfg, weights, opts)
}

/// Loads a Hugging Face model folder (config.json + safetensors) onto the GPU.
pub fn load_hf(gpu: &Gpu, folder: &ModelFolder, opts: &ForwardOptions) -> Result<Forward> {
    let dir = folder.path();
    if let ModelFolder::Dir(_) = folder {
        ensure!(dir.is_dir(), "{}: not a model folder (expected config.json and *.safetensors)", dir.display());
    }
    let cfg: ModelConfig = read_config(folder)?;
    let src = safetensors::SafeTensors::open(folder)?;
    let weights = loader::load_weights(gpu, &cfg, &src).with_context(|| format!("loading {}", dir.display()))?;
    Forward::new(gpu, cfg, weights, opts)
}

/// Scans every tensor of the model at `path` (a GGUF file or a Hugging Face folder) for NaN and
/// infinite values, on the CPU: an error names the first tensor holding one; else the number
/// of tensors scanned.
pub fn check_finite(path: &Path) -> Result<usize> {
    if path.is_file() {
        tensor::check_finite(&gguf::Gguf::open(path)?)
    } else {
        tensor::check_finite(&safetensors::SafeTensors::open(&ModelFolder::dir(path))?)
    }
}

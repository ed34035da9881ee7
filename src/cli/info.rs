//! `wginfer info`: adapters, the chosen one's backend, driver, features and limits; with
//! --model, the model's shape and its GPU memory; with --check, a scan of its values.

use anyhow::Result;
use clap::Args;

use crate::engine::Engine;
use crate::gpu::{Gpu, GpuOptions};

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// Adapter index to describe.
    #[arg(long)]
    adapter: Option<usize>,
    /// Also load this model and describe it.
    #[arg(long)]
    model: Option<std::path::PathBuf>,
    /// With --model: first scan every tensor for NaN and infinite values, naming the first
    /// tensor that holds one.
    #[arg(long, requires = "model")]
    check: bool,
}

pub fn run(a: &InfoArgs) -> Result<()> {
    println!("adapters:");
    for (i, ad) in crate::gpu::list_adapters(None).iter().enumerate() {
        let info = ad.get_info();
        println!("  [{i}] {} ({:?}, {:?})", info.name, info.backend, info.device_type);
    }
    let opts = GpuOptions { adapter: a.adapter, ..Default::default() };
    match &a.model {
        None => println!("{}", Gpu::new(&opts)?.describe()),
        Some(path) => {
            if a.check {
                let n = crate::model::check_finite(path)?;
                println!("check: {n} tensors scanned, every value finite");
            }
            let engine = Engine::load(path, &crate::engine::EngineOptions { gpu: opts, ..Default::default() })?;
            println!("{}", engine.gpu.describe());
            let c = &engine.forward.cfg;
            println!(
                "model: {} ({:?}): {} layers, hidden {}, {} heads / {} KV heads of {}, intermediate {}, vocab {}",
                path.display(),
                c.arch,
                c.layers,
                c.hidden,
                c.heads,
                c.kv_heads,
                c.head_dim,
                c.intermediate,
                c.vocab
            );
            let mib = |b: u64| b as f64 / (1 << 20) as f64;
            let on_disk: u64 = if path.is_file() {
                std::fs::metadata(path)?.len()
            } else {
                std::fs::read_dir(path)?
                    .filter_map(|e| e.ok())
                    .filter(|e| e.path().extension().is_some_and(|x| x == "safetensors"))
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            };
            let w = &engine.forward.weights;
            println!(
                "weights: {:.1} MiB on the GPU ({:.1} MiB as the files store these tensors, {:+.1}%; {:.1} MiB of files; {:.1} MiB if stored as f16)",
                mib(w.gpu_bytes()),
                mib(w.file_bytes),
                (w.gpu_bytes() as f64 / w.file_bytes.max(1) as f64 - 1.0) * 100.0,
                mib(on_disk),
                mib(w.f16_equivalent_bytes())
            );
        }
    }
    Ok(())
}

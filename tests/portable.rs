//! The portable path: no SHADER_F16, no subgroups (what wgpu's GL backend offers). Every kernel
//! must give the same answers there; the golden checks run on the Vulkan adapter with those
//! features withheld, and on the GL backend when it has an adapter. llvmpipe's GL runs the
//! barrier-heavy tiled matmul very slowly (13 s for a 7-token prompt), so there only the
//! 1-token prompt runs: the decode path.

mod support;

use support::{check_cases, fixture, golden};
use wginfer::engine::{Engine, EngineOptions};
use wginfer::gpu::GpuOptions;

fn check(gpu: GpuOptions, max_prompt: usize) {
    for (name, tol) in [("llama-f32", 1e-3), ("qwen2-bf16", 2e-2)] {
        let mut engine =
            Engine::load(&fixture(name), &EngineOptions { gpu: gpu.clone(), ..Default::default() }).unwrap();
        assert!(!engine.gpu.caps.shader_f16 && !engine.gpu.caps.subgroup);
        let label = format!("{name} on {:?}", engine.gpu.info.backend);
        check_cases(&mut engine, &golden(name), tol, max_prompt, &label);
    }
}

#[test]
fn goldens_without_f16_or_subgroups() {
    check(GpuOptions { portable: true, ..Default::default() }, usize::MAX);
}

#[test]
fn goldens_on_the_gl_backend() {
    let gl = Some(wgpu::Backends::GL);
    if wginfer::gpu::list_adapters(gl).is_empty() {
        eprintln!("no GL adapter here; skipped");
        return;
    }
    check(GpuOptions { backends: gl, portable: true, ..Default::default() }, 1);
}

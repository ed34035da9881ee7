//! `cargo bench`: wall-clock time of each kernel on whatever adapter this machine has (a GPU or
//! lavapipe), 8 dispatches per submit and wait, at small shapes so software adapters finish.
//! Entries are named like the kernels. GPU-timestamp figures at real model shapes, with % of the
//! adapter's measured limits, come from `wginfer bench kernels` (docs/PERF.md).

use criterion::{criterion_group, criterion_main, Criterion};

use wginfer::gpu::{Gpu, GpuOptions};
use wginfer::kv::KvType;
use wginfer::model::synthetic::{random_gpu_weight, random_values};
use wginfer::model::tensor::DType;
use wginfer::ops::argmax::Argmax;
use wginfer::ops::attention::{Attention, AttnBuffers, AttnOptions, AttnStep, Thresholds};
use wginfer::ops::attention_coop;
use wginfer::ops::attention_flash::AttentionFlash;
use wginfer::ops::attention_plain::AttentionPlain;
use wginfer::ops::dequant_f16::DequantF16;
use wginfer::ops::input_f16::InputF16;
use wginfer::ops::linear::{InputNorm, LinearConfig, Rows};
use wginfer::ops::matmul::Matmul;
use wginfer::ops::plan::Plan;
use wginfer::ops::qkv_rope::HeadShape;
use wginfer::ops::rmsnorm::{NormBuffers, NormRows, RmsNorm};
use wginfer::ops::{Step, Weight, WeightType};

const PER_SUBMIT: usize = 8;

fn values(n: usize) -> Vec<f32> {
    random_values(n, 1.0, 7)
}

fn buffer(gpu: &Gpu, v: &[f32]) -> wgpu::Buffer {
    gpu.storage_from("bench", bytemuck::cast_slice(v)).unwrap()
}

/// Times `record` run PER_SUBMIT times in one pass, submitted and waited for.
fn bench(c: &mut Criterion, gpu: &Gpu, name: &str, record: impl Fn(&mut wgpu::ComputePass<'_>)) {
    c.bench_function(name, |b| {
        b.iter(|| gpu.run_pass(|p| (0..PER_SUBMIT).for_each(|_| record(p))).unwrap());
    });
}

fn kernels(c: &mut Criterion) {
    let gpu = Gpu::new(&GpuOptions::default()).expect("a GPU adapter (or lavapipe)");
    let step = Step::buffer(&gpu).unwrap();
    Step { n_tokens: 1, n_out: 1, pad: [0; 2] }.write(&gpu, &step);
    let (k, n) = (512usize, 2048usize);
    let x = buffer(&gpu, &values(k * 64));
    let y = gpu.storage("y", (n * 64 * 4) as u64).unwrap();
    let cfg = LinearConfig::for_gpu(&gpu);
    for ty in [WeightType::F16, WeightType::Q4_0] {
        let bytes = random_gpu_weight(DType::stored_as(ty), n, k, 1).unwrap();
        let w = Weight::upload(&gpu, "w", ty, n, k, &bytes).unwrap();
        let gemv = Matmul::new(&gpu, &cfg, &w, &step, &x, &y, false, Rows::Outputs).unwrap();
        bench(c, &gpu, &format!("matmul gemv {n}x{k} {}", ty.name()), |p| gemv.record(p, 1));
        if ty == WeightType::Q4_0 && gpu.caps.shader_f16 {
            let copy = gpu.storage("w f16", (n * k * 2) as u64).unwrap();
            let dequant = DequantF16::new(&gpu, ty, n as u32, k as u32, &w.single().unwrap().buffer, &copy).unwrap();
            bench(c, &gpu, &format!("dequant_f16 {n}x{k} q4_0"), |p| dequant.record(p));
        }
        if ty == WeightType::F16 {
            let prefill = Matmul::new(&gpu, &cfg, &w, &step, &x, &y, false, Rows::Tokens).unwrap();
            Step { n_tokens: 64, n_out: 1, pad: [0; 2] }.write(&gpu, &step);
            bench(c, &gpu, &format!("matmul prefill 64x{k} . {n}x{k}^T f16"), |p| prefill.record(p, 64));
            Step { n_tokens: 1, n_out: 1, pad: [0; 2] }.write(&gpu, &step);
        }
    }
    let heads = HeadShape { n_heads: 14, n_kv_heads: 2, head_dim: 64 };
    let kv = buffer(&gpu, &values((512 * heads.kv_dim()) as usize));
    // One decode token at position 511 of a 512-position ring slot.
    let plan = Plan::one_sequence(&gpu, 512, 1, 511, 0, 0).unwrap();
    let q = buffer(&gpu, &values(heads.q_dim() as usize));
    let o = gpu.storage("o", u64::from(heads.q_dim()) * 4).unwrap();
    let b = AttnBuffers { q: &q, k_cache: &kv, v_cache: &kv, kv: KvType::F32, o: &o, plan: &plan, o_f16: None };
    let plain = AttentionPlain::new(&gpu, &heads, AttnOptions::full(&heads), 512, &b).unwrap();
    bench(c, &gpu, "attention_plain ctx 512", |p| plain.record(p, heads.n_heads, 1));
    let flash = AttentionFlash::new(&gpu, &heads, AttnOptions::full(&heads), &b).unwrap();
    bench(c, &gpu, "attention_flash ctx 512", |p| flash.record(p, 1, 512));
    // A 64-token prompt in a 512-position slot, on the kernel the router picks for it
    // (attention_coop where the adapter has tensor cores).
    let rows = 64;
    let q_rows = buffer(&gpu, &values((rows * heads.q_dim()) as usize));
    let o_rows = gpu.storage("o", u64::from(rows * heads.q_dim()) * 4).unwrap();
    let tile_rows = attention_coop::tile_rows(&gpu.caps, heads.head_dim);
    let prompt = Plan::one_sequence(&gpu, 512, rows, 0, 0, tile_rows).unwrap();
    let b =
        AttnBuffers { q: &q_rows, k_cache: &kv, v_cache: &kv, kv: KvType::F32, o: &o_rows, plan: &prompt, o_f16: None };
    let att = Attention::new(&gpu, &heads, AttnOptions::full(&heads), Thresholds::all(512), &b).unwrap();
    let step = AttnStep { rows, context: rows, tiles: prompt.tiles };
    let kind = att.route(step);
    bench(c, &gpu, &format!("{} {rows} rows", kind.kernel_name()), |p| att.record(p, kind, step));
    let gamma = buffer(&gpu, &values(k));
    let norm_bufs = NormBuffers { x: &x, gamma: &gamma, y: &y };
    let norm = RmsNorm::new(&gpu, k as u32, 1e-6, NormRows::All, &norm_bufs).unwrap();
    bench(c, &gpu, &format!("rmsnorm 1x{k}"), |p| norm.record(p, 1));
    if gpu.caps.shader_f16 {
        let input = InputF16::new(&gpu, k as u32, &x, &y, Some(InputNorm { weight: &gamma, eps: 1e-6 })).unwrap();
        bench(c, &gpu, &format!("input_f16 64x{k}"), |p| input.record(p, 64));
    }
    let vocab = 32768u32;
    let logits = buffer(&gpu, &values(vocab as usize));
    let id = gpu.storage("id", 4).unwrap();
    let argmax = Argmax::new(&gpu, vocab, 1, &logits, &id).unwrap();
    bench(c, &gpu, &format!("argmax {vocab}"), |p| argmax.record(p, 1));
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(std::time::Duration::from_millis(500));
    targets = kernels
}
criterion_main!(benches);

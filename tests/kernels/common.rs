//! Helpers for kernel tests: a device, uploads, read-backs, random data, comparisons.

use std::sync::OnceLock;

use half::f16;
use wginfer::gpu::{Gpu, GpuOptions};
pub use wginfer::kv::KvType;
use wginfer::model::quant::to_gpu_layout;
use wginfer::model::tensor::DType;
use wginfer::ops::plan::{Plan, PlanLayout, PlanRow, PlanSeq};
use wginfer::ops::weight::WeightLayout;
use wginfer::ops::{Step, Weight, WeightType};

/// One device per test binary: creating a Vulkan device per test is slow on lavapipe.
pub fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| Gpu::new(&GpuOptions::default()).expect("a GPU adapter (lavapipe in CI)"))
}

/// A device that plans with a tiny storage-binding limit, so weights get split.
pub fn small_binding_gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        Gpu::new(&GpuOptions { max_binding_override: Some(1024), ..Default::default() }).expect("a GPU adapter")
    })
}

/// Deterministic pseudo-random values in [-1, 1).
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

pub fn upload(gpu: &Gpu, data: &[f32]) -> wgpu::Buffer {
    gpu.storage_from("test", bytemuck::cast_slice(data)).unwrap()
}

pub fn upload_u32(gpu: &Gpu, data: &[u32]) -> wgpu::Buffer {
    gpu.storage_from("test", bytemuck::cast_slice(data)).unwrap()
}

pub fn zeros(gpu: &Gpu, n: usize) -> wgpu::Buffer {
    gpu.storage("test", (n * 4) as u64).unwrap()
}

pub fn read(gpu: &Gpu, b: &wgpu::Buffer, n: usize) -> Vec<f32> {
    bytemuck::cast_slice(&gpu.read_back(b, (n * 4) as u64).unwrap()).to_vec()
}

/// `v` as a K or V cache of `kv` values, with the values the GPU holds (f16-rounded for F16),
/// which a CPU reference must use.
pub fn upload_kv(gpu: &Gpu, v: &[f32], kv: KvType) -> (wgpu::Buffer, Vec<f32>) {
    match kv {
        KvType::F32 => (upload(gpu, v), v.to_vec()),
        KvType::F16 => {
            let h: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
            let b = gpu.storage_from("kv", bytemuck::cast_slice(&h)).unwrap();
            (b, h.iter().map(|x| x.to_f32()).collect())
        }
    }
}

/// The first `n` values of a K or V cache of `kv` values.
pub fn read_kv(gpu: &Gpu, b: &wgpu::Buffer, n: usize, kv: KvType) -> Vec<f32> {
    match kv {
        KvType::F32 => read(gpu, b, n),
        KvType::F16 => {
            let bytes = gpu.read_back(b, (n * 2) as u64).unwrap();
            bytemuck::cast_slice::<u8, f16>(&bytes).iter().map(|x| x.to_f32()).collect()
        }
    }
}

pub fn read_u32(gpu: &Gpu, b: &wgpu::Buffer, n: usize) -> Vec<u32> {
    bytemuck::cast_slice(&gpu.read_back(b, (n * 4) as u64).unwrap()).to_vec()
}

/// A step of `n_tokens` rows, one of which produces logits.
pub fn step(gpu: &Gpu, n_tokens: u32) -> wgpu::Buffer {
    let b = Step::buffer(gpu).unwrap();
    Step { n_tokens, n_out: 1, pad: [0; 2] }.write(gpu, &b);
    b
}

/// One sequence of a test step: `rows` tokens at positions `start..`, attending back to `lo`;
/// logical block b of its positions is physical block `blocks[b % blocks.len()]` of the cache.
pub struct TestSeq {
    pub rows: usize,
    pub start: usize,
    pub lo: usize,
    pub blocks: Vec<u32>,
}

impl TestSeq {
    /// The cache row (slot) of position `pos`, as lib/plan maps it.
    pub fn slot(&self, pos: usize, block: usize) -> usize {
        self.blocks[(pos / block) % self.blocks.len()] as usize * block + pos % block
    }
}

/// The plan of a step made of `seqs`' rows, in order, over blocks of `block` positions; its
/// outputs are `outs` (rows of the step); query tiles of `tile_rows` (0: none).
pub fn test_plan(gpu: &Gpu, seqs: &[TestSeq], block: usize, outs: &[u32], tile_rows: u32) -> Plan {
    let rows: Vec<PlanRow> = seqs
        .iter()
        .enumerate()
        .flat_map(|(i, s)| (0..s.rows).map(move |t| PlanRow { seq: i as u32, pos: (s.start + t) as u32 }))
        .collect();
    let layout = PlanLayout {
        max_rows: rows.len() as u32,
        max_seqs: seqs.len() as u32,
        max_outs: outs.len().max(1) as u32,
        max_blocks: seqs.iter().map(|s| s.blocks.len() as u32).max().unwrap(),
        block: block as u32,
        tile_rows,
    };
    let mut plan = Plan::new(gpu, layout).unwrap();
    let plan_seqs: Vec<PlanSeq> = seqs.iter().map(|s| PlanSeq { kv_lo: s.lo as u32, blocks: &s.blocks }).collect();
    plan.write(gpu, &rows, &plan_seqs, outs).unwrap();
    plan
}

/// Uploads `data` as a linear layer's weight of type `ty` (in this adapter's layout for them);
/// returns it with the values the GPU really holds (f16-rounded for F16), which the CPU reference
/// must use.
pub fn weight(gpu: &Gpu, ty: WeightType, rows: usize, cols: usize, data: &[f32]) -> (Weight, Vec<f32>) {
    weight_in(gpu, ty, rows, cols, data, WeightLayout::linear(gpu))
}

/// `weight` in `layout`.
pub fn weight_in(
    gpu: &Gpu,
    ty: WeightType,
    rows: usize,
    cols: usize,
    data: &[f32],
    layout: WeightLayout,
) -> (Weight, Vec<f32>) {
    let upload = |bytes: &[u8]| Weight::upload_in(gpu, "w", ty, rows, cols, bytes, layout).unwrap();
    match ty {
        WeightType::F32 => (upload(bytemuck::cast_slice(data)), data.to_vec()),
        WeightType::F16 => {
            let h: Vec<f16> = data.iter().map(|&v| f16::from_f32(v)).collect();
            let back = h.iter().map(|v| v.to_f32()).collect();
            (upload(bytemuck::cast_slice(&h)), back)
        }
        q => panic!("{q:?}: quantized weights are tested in tests/quant.rs"),
    }
}

/// `data` quantized to Q8_0 by its definition (blocks of 32 values: an f16 scale d = max |v| /
/// 127 and 32 int8 q = round(v / d)), in the GPU's byte layout, with the values it holds: d * q.
pub fn q8_0_bytes(data: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let (mut bytes, mut values) = (Vec::new(), Vec::new());
    for block in data.chunks(32) {
        let d = f16::from_f32(block.iter().fold(0.0f32, |a, v| a.max(v.abs())) / 127.0);
        bytes.extend(d.to_le_bytes());
        for v in block {
            let q = (v / d.to_f32()).round().clamp(-127.0, 127.0) as i8;
            bytes.push(q as u8);
            values.push(d.to_f32() * f32::from(q));
        }
    }
    (to_gpu_layout(DType::Q8_0, &bytes), values)
}

/// CPU reference: y[m, n] = sum_k x[m, k] w[n, k].
pub fn matmul_ref(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut y = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k).map(|p| x[i * k + p] as f64 * w[j * k + p] as f64).sum::<f64>() as f32;
        }
    }
    y
}

/// CPU reference: each row of x (rows of gamma.len()) RMS-normalized, scaled by gamma.
pub fn rmsnorm_ref(x: &[f32], gamma: &[f32], eps: f32) -> Vec<f32> {
    x.chunks(gamma.len())
        .flat_map(|r| {
            let inv = 1.0 / (r.iter().map(|v| (v * v) as f64).sum::<f64>() / r.len() as f64 + eps as f64).sqrt();
            r.iter().zip(gamma).map(move |(v, g)| (*v as f64 * inv * *g as f64) as f32)
        })
        .collect()
}

pub fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}: element {i}: got {g}, want {w}");
    }
}

/// Asserts that `x16` holds the first `n` values of `x` as f16, saturated at +-65504 and
/// rounded to nearest even, as input_f16 converts them for the tensor-core cores (a kernel
/// writing its output as f16 rows too, lib/out_f16, must hand those cores the same bits).
pub fn assert_f16_copy_of(gpu: &Gpu, x: &wgpu::Buffer, x16: &wgpu::Buffer, n: usize, label: &str) {
    let want: Vec<u16> = read(gpu, x, n).iter().map(|v| f16::from_f32(v.clamp(-65504.0, 65504.0)).to_bits()).collect();
    let bytes = gpu.read_back(x16, (n * 2) as u64).unwrap();
    let got: &[u16] = bytemuck::cast_slice(&bytes[..n * 2]);
    let first = got.iter().zip(&want).position(|(g, w)| g != w);
    assert!(first.is_none(), "{label}: f16 copy differs at value {}", first.unwrap_or(0));
}

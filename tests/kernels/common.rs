//! Helpers for kernel tests: a device, uploads, read-backs, random data, comparisons.

use std::sync::OnceLock;

use half::f16;
use wginfer::gpu::{Gpu, GpuOptions};
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

pub fn read_u32(gpu: &Gpu, b: &wgpu::Buffer, n: usize) -> Vec<u32> {
    bytemuck::cast_slice(&gpu.read_back(b, (n * 4) as u64).unwrap()).to_vec()
}

pub fn step(gpu: &Gpu, n_tokens: u32, start_pos: u32, kv_lo: u32) -> wgpu::Buffer {
    let b = Step::buffer(gpu).unwrap();
    Step { n_tokens, start_pos, kv_lo, pad: 0 }.write(gpu, &b);
    b
}

/// Uploads `data` as a weight of type `ty`; returns it with the values the GPU really holds
/// (f16-rounded for F16), which the CPU reference must use.
pub fn weight(gpu: &Gpu, ty: WeightType, rows: usize, cols: usize, data: &[f32]) -> (Weight, Vec<f32>) {
    match ty {
        WeightType::F32 => {
            (Weight::upload(gpu, "w", ty, rows, cols, bytemuck::cast_slice(data)).unwrap(), data.to_vec())
        }
        WeightType::F16 => {
            let h: Vec<f16> = data.iter().map(|&v| f16::from_f32(v)).collect();
            let back = h.iter().map(|v| v.to_f32()).collect();
            (Weight::upload(gpu, "w", ty, rows, cols, bytemuck::cast_slice(&h)).unwrap(), back)
        }
        q => panic!("{q:?}: quantized weights are tested in tests/quant.rs"),
    }
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

//! `shaders/qkv_rope.wgsl`: the fused QKV projection + bias + RoPE + KV-cache write.

use anyhow::Result;

use super::linear::{BoundLinear, InputNorm, LinearConfig, LinearKernels, LinearShape, Rows};
use super::plan::{Plan, PlanLayout};
use super::Weight;
use crate::gpu::shader::Defs;
use crate::gpu::Gpu;

/// Head layout of the attention block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadShape {
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
}

impl HeadShape {
    pub fn q_dim(&self) -> u32 {
        self.n_heads * self.head_dim
    }
    pub fn kv_dim(&self) -> u32 {
        self.n_kv_heads * self.head_dim
    }
}

pub fn defs(h: &HeadShape, plan: &PlanLayout, has_bias: bool) -> Defs {
    let d = Defs::new().u32("QN", h.q_dim()).u32("KVN", h.kv_dim()).u32("HD", h.head_dim).bool("HAS_BIAS", has_bias);
    plan.defs(d)
}

pub struct QkvRope(BoundLinear);

/// The buffers `qkv_rope` reads and writes.
pub struct QkvBuffers<'a> {
    pub step: &'a wgpu::Buffer,
    pub x: &'a wgpu::Buffer,
    /// q/k/v biases in the same row order as the weight; `None` for models without.
    pub bias: Option<&'a wgpu::Buffer>,
    pub inv_freq: &'a wgpu::Buffer,
    pub q: &'a wgpu::Buffer,
    pub k_cache: &'a wgpu::Buffer,
    pub v_cache: &'a wgpu::Buffer,
    /// The step plan: each row's sequence, position and KV slot.
    pub plan: &'a Plan,
    /// The attention norm, applied to x on load.
    pub norm: Option<InputNorm<'a>>,
}

impl QkvRope {
    /// `w` stacks Wq, Wk, Wv with q and k rows pair-adjacent per head (see the shader).
    pub fn new(gpu: &Gpu, cfg: &LinearConfig, w: &Weight, h: &HeadShape, b: &QkvBuffers) -> Result<QkvRope> {
        anyhow::ensure!(
            w.rows == h.q_dim() + 2 * h.kv_dim() && h.head_dim.is_multiple_of(2),
            "weight {}: {} rows for {} q + 2x{} kv rows",
            w.name,
            w.rows,
            h.q_dim(),
            h.kv_dim()
        );
        let shape = LinearShape { k: w.cols, n: w.rows, rows: Rows::Tokens, norm_eps: b.norm.map(|n| n.eps) };
        let defs = defs(h, &b.plan.layout, b.bias.is_some());
        let k = LinearKernels::new(gpu, "qkv_rope", &defs, w.ty, &shape, cfg)?;
        // Without a bias the binding still needs a buffer; the shader never reads it.
        let bias = b.bias.unwrap_or(b.inv_freq);
        let buffers = [b.step, b.x, w.single()?, bias, b.inv_freq, b.q, b.k_cache, b.v_cache, &b.plan.buffer];
        Ok(QkvRope(BoundLinear::new(gpu, k, &buffers, b.norm)?))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.0.record(pass, rows);
    }
}

/// Row order of the fused weight as indices into the stacked rows [Wq; Wk; Wv]: the q and k
/// rows of each head pair-adjacent (new row 2i = original i, 2i+1 = original i + head_dim/2),
/// unless `already_paired` says the source stores them so (GGUF `llama`).
pub fn fused_row_order(h: &HeadShape, already_paired: bool) -> Vec<usize> {
    let hd = h.head_dim as usize;
    let half = hd / 2;
    let pair = move |d: usize| match (already_paired, d % 2) {
        (true, _) => d,
        (false, 0) => d / 2,
        (false, _) => d / 2 + half,
    };
    let pairs =
        move |heads: u32, base: usize| (0..heads as usize * hd).map(move |r| base + (r / hd) * hd + pair(r % hd));
    let (qn, kvn) = (h.q_dim() as usize, h.kv_dim() as usize);
    pairs(h.n_heads, 0).chain(pairs(h.n_kv_heads, qn)).chain(qn + kvn..qn + 2 * kvn).collect()
}

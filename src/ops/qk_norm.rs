//! `shaders/qk_norm.wgsl`: the per-head RMSNorm of q and k, then RoPE, in place (Qwen3, Gemma 3). It
//! runs right after `qkv_rope` built with `QK_NORM`, as part of the same op (`QkvRope`).

use anyhow::Result;

use super::plan::{Plan, PlanLayout};
use super::qkv_rope::HeadShape;
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};
use crate::kv::KvType;

/// The norm of each q and k head: its weight (f32, head_dim for q then head_dim for k, in the
/// fused weight's pair-adjacent order, see `qkv_rope::pair_order`) and epsilon.
#[derive(Clone, Copy)]
pub struct QkNorm<'a> {
    pub weight: &'a wgpu::Buffer,
    pub eps: f32,
}

/// Threads per workgroup: one per rotation pair of a head, a power of two (lib/reduce), at
/// most 128 (a head of 256).
fn threads(h: &HeadShape) -> u32 {
    (h.head_dim / 2).next_power_of_two().min(128)
}

pub fn source(h: &HeadShape, eps: f32, plan: &PlanLayout, kv: KvType) -> String {
    let defs = Defs::new()
        .u32("QN", h.q_dim())
        .u32("KVN", h.kv_dim())
        .u32("HD", h.head_dim)
        .f32("EPS", eps)
        .u32("WG_THREADS", threads(h))
        .piece("lib/rope")
        .piece(kv.pair_lib());
    assemble("qk_norm", &plan.defs(defs), &["lib/reduce"])
}

/// The buffers `qk_norm` reads and writes: `qkv_rope`'s q, K cache, frequencies and plan.
pub struct QkNormBuffers<'a> {
    pub norm: QkNorm<'a>,
    pub inv_freq: &'a wgpu::Buffer,
    pub q: &'a wgpu::Buffer,
    pub k_cache: &'a wgpu::Buffer,
    /// How the K cache stores values.
    pub kv: KvType,
    pub plan: &'a Plan,
}

pub struct QkNormRope {
    bound: Bound,
    heads: u32,
}

impl QkNormRope {
    pub fn new(gpu: &Gpu, h: &HeadShape, b: &QkNormBuffers) -> Result<QkNormRope> {
        let k = Kernel::get(gpu, "qk_norm", source(h, b.norm.eps, &b.plan.layout, b.kv))?;
        let bound = k.bind(gpu, &[b.norm.weight, b.inv_freq, b.q, b.k_cache, &b.plan.buffer]);
        Ok(QkNormRope { bound, heads: h.n_heads + h.n_kv_heads })
    }

    /// Normalizes and rotates the q and k heads of the step's first `rows` rows.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.bound.record(pass, [rows, self.heads, 1]);
    }
}

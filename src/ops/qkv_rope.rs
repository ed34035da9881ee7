//! `shaders/qkv_rope.wgsl`: the fused QKV projection + bias + RoPE + KV-cache write; for models
//! with a per-head norm of q and k (Qwen3, Gemma 3), followed by `qk_norm`, which normalizes and rotates.

use anyhow::Result;

use super::linear::{InputNorm, LinearConfig, LinearIo, LinearParts, Rows};
use super::plan::{Plan, PlanLayout};
use super::qk_norm::{QkNorm, QkNormBuffers, QkNormRope};
use super::weight::WeightPart;
use super::Weight;
use crate::gpu::shader::Defs;
use crate::gpu::Gpu;
use crate::kv::KvType;

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

/// Constants of the kernel for the weight part starting at row `row_lo`; `qk_norm`: q and k are
/// stored unrotated, for the `qk_norm` pass.
pub fn defs(h: &HeadShape, plan: &PlanLayout, kv: KvType, has_bias: bool, qk_norm: bool, row_lo: u32) -> Defs {
    let d = Defs::new()
        .u32("N_OFFSET", row_lo)
        .u32("QN", h.q_dim())
        .u32("KVN", h.kv_dim())
        .u32("HD", h.head_dim)
        .bool("HAS_BIAS", has_bias)
        .bool("QK_NORM", qk_norm)
        .piece("lib/rope")
        .piece(kv.pair_lib());
    plan.defs(d)
}

pub struct QkvRope {
    linear: LinearParts,
    /// The per-head norm and RoPE of q and k, where the model has q/k norms.
    qk_norm: Option<QkNormRope>,
}

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
    /// How the caches store values.
    pub kv: KvType,
    /// The step plan: each row's sequence, position and KV slot.
    pub plan: &'a Plan,
    /// The attention norm, applied to x on load.
    pub norm: Option<InputNorm<'a>>,
    /// The per-head norm of q and k (Qwen3, Gemma 3), applied before RoPE; `None` for models without.
    pub qk_norm: Option<QkNorm<'a>>,
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
        // Each part (q/k/v rows of their own type, or a binding's worth) is a dispatch whose
        // outputs start at its first row: RoPE pairs must not straddle two parts.
        if let Some(p) = w.parts.iter().find(|p| p.row_lo % 2 == 1 || p.rows % 2 == 1) {
            anyhow::bail!("weight {}: a part of rows {}..{} splits a RoPE pair", w.name, p.row_lo, p.row_lo + p.rows);
        }
        let (bias, qk_norm) = (b.bias.is_some(), b.qk_norm.is_some());
        // Without a bias the binding still needs a buffer; the shader never reads it.
        let bias_buffer = b.bias.unwrap_or(b.inv_freq);
        let rest = vec![bias_buffer, b.inv_freq, b.q, b.k_cache, b.v_cache, &b.plan.buffer];
        let io = LinearIo { step: b.step, x: b.x, rest, norm: b.norm, f16: Default::default() };
        let part_defs = |p: &WeightPart| Ok(defs(h, &b.plan.layout, b.kv, bias, qk_norm, p.row_lo));
        let linear = LinearParts::new(gpu, cfg, "qkv_rope", w, Rows::Tokens, &io, part_defs)?;
        let qk_norm = match b.qk_norm {
            Some(norm) => {
                let nb =
                    QkNormBuffers { norm, inv_freq: b.inv_freq, q: b.q, k_cache: b.k_cache, kv: b.kv, plan: b.plan };
                Some(QkNormRope::new(gpu, h, &nb)?)
            }
            None => None,
        };
        Ok(QkvRope { linear, qk_norm })
    }

    /// Records the projection, then the q/k norm where the model has one (the forward pass
    /// marks the two apart for the profiler: `record_projection`, `qk_norm`).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.record_projection(pass, rows);
        if let Some(n) = &self.qk_norm {
            n.record(pass, rows);
        }
    }

    /// The projection + bias + RoPE + KV write alone (q and k unrotated where `qk_norm` follows).
    pub fn record_projection(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.linear.record(pass, rows);
    }

    /// The per-head q/k norm pass, for models with q/k norms.
    pub fn qk_norm(&self) -> Option<&QkNormRope> {
        self.qk_norm.as_ref()
    }
}

/// Where each element of a head goes in the fused weight's pair-adjacent order: new position
/// 2i holds original element i, 2i+1 holds i + head_dim/2; the identity where the source
/// stores heads so already (GGUF `llama`). A per-head vector (the q/k norm weights) is
/// reordered with the same indices as the head's rows.
pub fn pair_order(head_dim: usize, already_paired: bool) -> Vec<usize> {
    let half = head_dim / 2;
    (0..head_dim)
        .map(|d| match (already_paired, d % 2) {
            (true, _) => d,
            (false, 0) => d / 2,
            (false, _) => d / 2 + half,
        })
        .collect()
}

/// Row order of the fused weight as indices into the stacked rows [Wq; Wk; Wv]: the q and k
/// rows of each head pair-adjacent (new row 2i = original i, 2i+1 = original i + head_dim/2),
/// unless `already_paired` says the source stores them so (GGUF `llama`).
pub fn fused_row_order(h: &HeadShape, already_paired: bool) -> Vec<usize> {
    let hd = h.head_dim as usize;
    let pair = pair_order(hd, already_paired);
    let pairs = |heads: u32, base: usize| {
        let pair = &pair;
        (0..heads as usize * hd).map(move |r| base + (r / hd) * hd + pair[r % hd])
    };
    let (qn, kvn) = (h.q_dim() as usize, h.kv_dim() as usize);
    pairs(h.n_heads, 0).chain(pairs(h.n_kv_heads, qn)).chain(qn + kvn..qn + 2 * kvn).collect()
}

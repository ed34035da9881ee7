//! `shaders/attention_plain.wgsl`: every score of a row in workgroup memory (short contexts).

use anyhow::Result;

use super::attention::{head_defs, kv_libs, kv_u64, reduce_lib, score_lanes, score_sum_lib, AttnBuffers, AttnOptions};
use super::plan::PlanLayout;
use super::qkv_rope::HeadShape;
use crate::gpu::shader::assemble;
use crate::gpu::{Bound, Caps, Gpu, Kernel};
use crate::kv::KvType;

/// A workgroup of the plain kernel: its threads, and the lanes that read each K row together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainShape {
    pub threads: u32,
    pub score_lanes: u32,
    /// Workgroup reductions through subgroup operations (`reduce_lib`).
    pub subgroups: bool,
    /// K and V read as pairs of u64s (`kv_libs`).
    pub kv_u64: bool,
}

impl PlainShape {
    /// 256 threads on a GPU. On a CPU adapter a workgroup is a loop over its subgroups and each
    /// barrier a switch between them, so just enough threads for a row of V (HD / 4, at least
    /// a subgroup of 8): on lavapipe SmolLM2's attention took 20.9 -> 4.2 ms per layer for a
    /// 64-token prefill and 407 -> 134 us for a decode step (256 -> 16 threads, docs/PERF.md).
    /// Lanes per score: `score_lanes`.
    pub fn for_adapter(caps: &Caps, head_dim: u32) -> PlainShape {
        let threads = match caps.cpu {
            true => (head_dim / 4).next_power_of_two().max(8),
            false => 256,
        };
        PlainShape { threads, score_lanes: score_lanes(caps, head_dim), subgroups: caps.subgroup, kv_u64: kv_u64(caps) }
    }

    /// Workgroup memory for contexts up to `max_len` in a workgroup of `heads` query heads (1
    /// for the plain kernel, a KV group's for the grouped one): each head's scores and query, a
    /// row of reduction values and a vec4 of partial sums per thread.
    pub fn workgroup_bytes(&self, head_dim: u32, max_len: u32, heads: u32) -> u32 {
        4 * (heads * (max_len + head_dim) + self.threads) + 16 * self.threads
    }
}

/// The WGSL of a short-context kernel, `attention_plain` or `attention_grouped`: the same
/// constants and pieces, the plain kernel's weighted sums of V through lib/attention_combine.
/// `max_len`: the longest context it is asked to serve (the router's threshold).
pub fn source(
    kernel: &str,
    h: &HeadShape,
    opts: AttnOptions,
    plan: &PlanLayout,
    kv: KvType,
    max_len: u32,
    shape: PlainShape,
) -> String {
    let combine: &[&str] = if kernel == "attention_plain" { &["lib/attention_combine"] } else { &[] };
    let pieces = [reduce_lib(shape.subgroups), score_sum_lib(shape.score_lanes), "lib/attention_window"];
    assemble(
        kernel,
        &head_defs(h, opts, plan, shape.threads).u32("PLAIN_MAX", max_len).u32("SCORE_LANES", shape.score_lanes),
        &[kv_libs(kv, shape.kv_u64), &pieces, combine].concat(),
    )
}

pub struct AttentionPlain(Bound);

impl AttentionPlain {
    pub fn new(gpu: &Gpu, h: &HeadShape, opts: AttnOptions, max_len: u32, b: &AttnBuffers) -> Result<AttentionPlain> {
        let source = source(
            "attention_plain",
            h,
            opts,
            &b.plan.layout,
            b.kv,
            max_len,
            PlainShape::for_adapter(&gpu.caps, h.head_dim),
        );
        let k = Kernel::get(gpu, "attention_plain", source)?;
        Ok(AttentionPlain(k.bind(gpu, &b.list())))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_heads: u32, rows: u32) {
        self.0.record(pass, [n_heads, rows, 1]);
    }
}

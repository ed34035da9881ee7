//! `shaders/attention_plain.wgsl`: every score of a row in workgroup memory (short contexts).

use anyhow::Result;

use super::attention::{head_defs, kv_libs, kv_u64, reduce_lib, score_lanes, score_sum_lib, AttnBuffers, AttnOptions};
use super::linear::GEMV_MAX_ROWS;
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
    /// The variant for steps of a few rows (`SLOT_TABLE_MAX_ROWS`): each position's KV slot looked
    /// up once into workgroup memory (lib/plain_slots_table) and two rounds of positions scored
    /// an iteration; else lib/plain_slots_lookup, one round. Only the plain kernel has it.
    pub few_rows: bool,
}

/// Steps of up to this many rows take the plain kernel's few-rows variant on GPUs: on an H100
/// the batch sweep's decode tok/s (Qwen2.5-0.5B f16, 128-token prompts and answers in paged
/// blocks of 16) went 5,320 -> 5,510 at B=8 and 7,790 -> 7,975 at B=16 with it on every step,
/// and one-row decode 1,131 / 1,134 -> 1,144 / 1,143 tok/s in `bench e2e` (a ring slot) and
/// 1,054 -> 1,097 in the sweep at B=1 (paged blocks; a binary with another change), while
/// 64-row steps lost 1.2% (18,920 -> 18,690, docs/PERF.md). Its outputs are bitwise the other
/// variant's (the same scores, maximum and sums in the same order).
pub const SLOT_TABLE_MAX_ROWS: u32 = 16;
// The few-rows variant leaves o's f16 copy unwritten (`head_defs`): the o projection of such
// a step runs a GEMV core.
const _: () = assert!(SLOT_TABLE_MAX_ROWS <= GEMV_MAX_ROWS);

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
        PlainShape {
            threads,
            score_lanes: score_lanes(caps, head_dim),
            subgroups: caps.subgroup,
            kv_u64: kv_u64(caps),
            few_rows: false,
        }
    }

    /// Workgroup memory for contexts up to `max_len` in a workgroup of `heads` query heads (1
    /// for the plain kernel, a KV group's for the grouped one): each head's scores and query, a
    /// row of reduction values and a vec4 of partial sums per thread; the few-rows variant's
    /// slot table.
    pub fn workgroup_bytes(&self, head_dim: u32, max_len: u32, heads: u32) -> u32 {
        let slots = if self.few_rows { 4 * max_len } else { 0 };
        4 * (heads * (max_len + head_dim) + self.threads) + 16 * self.threads + slots
    }

    /// Whether `workgroup_bytes` fits the adapter's workgroup memory.
    pub fn fits(&self, caps: &Caps, head_dim: u32, max_len: u32, heads: u32) -> bool {
        self.workgroup_bytes(head_dim, max_len, heads) <= caps.max_workgroup_storage
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
    let slots = if shape.few_rows { "lib/plain_slots_table" } else { "lib/plain_slots_lookup" };
    let plain: &[&str] = if kernel == "attention_plain" { &["lib/attention_combine", slots] } else { &[] };
    let pieces = [reduce_lib(shape.subgroups), score_sum_lib(shape.score_lanes), "lib/attention_window"];
    let defs = head_defs(h, opts, plan, shape.threads, !shape.few_rows)
        .u32("PLAIN_MAX", max_len)
        .u32("SCORE_LANES", shape.score_lanes)
        .u32("SCORE_ROUNDS", if shape.few_rows { 2 } else { 1 });
    assemble(kernel, &defs, &[kv_libs(kv, shape.kv_u64), &pieces, plain].concat())
}

pub struct AttentionPlain {
    /// Steps of more than SLOT_TABLE_MAX_ROWS rows, and every step where `few_rows` is not
    /// built.
    all_rows: Bound,
    /// The few-rows variant, on GPUs where its workgroup fits.
    few_rows: Option<Bound>,
}

impl AttentionPlain {
    /// Both variants for contexts up to `max_len` (the router's threshold): an error where the
    /// all-rows variant's workgroup does not fit the adapter, the few-rows variant left out.
    pub fn new(gpu: &Gpu, h: &HeadShape, opts: AttnOptions, max_len: u32, b: &AttnBuffers) -> Result<AttentionPlain> {
        let shape = PlainShape::for_adapter(&gpu.caps, h.head_dim);
        let bytes = shape.workgroup_bytes(h.head_dim, max_len, 1);
        anyhow::ensure!(
            bytes <= gpu.caps.max_workgroup_storage,
            "--attn-threshold {max_len} needs {bytes} bytes of workgroup memory; this adapter has {} (lower the threshold)",
            gpu.caps.max_workgroup_storage
        );
        let few = PlainShape { few_rows: true, ..shape };
        let few_rows = match !gpu.caps.cpu && few.fits(&gpu.caps, h.head_dim, max_len, 1) {
            true => Some(Self::kernel(gpu, h, opts, max_len, b, few)?),
            false => None,
        };
        Ok(AttentionPlain { all_rows: Self::kernel(gpu, h, opts, max_len, b, shape)?, few_rows })
    }

    /// The plain kernel of `shape` for contexts up to `max_len`, whose workgroup fits
    /// (`PlainShape::fits`).
    pub fn kernel(
        gpu: &Gpu,
        h: &HeadShape,
        opts: AttnOptions,
        max_len: u32,
        b: &AttnBuffers,
        shape: PlainShape,
    ) -> Result<Bound> {
        let source = source("attention_plain", h, opts, &b.plan.layout, b.kv, max_len, shape);
        Ok(Kernel::get(gpu, "attention_plain", source)?.bind_at(gpu, &b.entries(&[])))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_heads: u32, rows: u32) {
        let kernel = match &self.few_rows {
            Some(k) if rows <= SLOT_TABLE_MAX_ROWS => k,
            _ => &self.all_rows,
        };
        kernel.record(pass, [n_heads, rows, 1]);
    }
}

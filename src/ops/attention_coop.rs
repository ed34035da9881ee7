//! `shaders/attention_coop.wgsl`: flash attention for multi-token steps on tensor cores, one
//! workgroup per (query head, query tile of the plan).

use std::sync::OnceLock;

use anyhow::Result;

use super::attention::{head_defs, kv_libs, AttnBuffers, AttnOptions};
use super::linear::shape_knob;
use super::plan::PlanLayout;
use super::qkv_rope::HeadShape;
use crate::gpu::shader::assemble;
use crate::gpu::{Bound, Caps, Gpu, Kernel};
use crate::kv::KvType;

/// A workgroup of the kernel: `subgroups` subgroups of `sg` lanes, 16 query rows each, walking
/// the keys `bc` positions at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoopAttnShape {
    pub subgroups: u32,
    pub bc: u32,
    pub sg: u32,
}

/// Shapes tried in order, the first whose workgroup memory fits: (subgroups, bc).
const SHAPES: [(u32, u32); 5] = [(4, 32), (2, 64), (2, 32), (1, 32), (1, 16)];

/// SHAPES, or what the knob `WGINFER_COOP_ATTN` says (read once: every layer and the plan ask).
fn shapes() -> &'static [(u32, u32)] {
    static S: OnceLock<Vec<(u32, u32)>> = OnceLock::new();
    S.get_or_init(|| {
        let knob = shape_knob("WGINFER_COOP_ATTN", "subgroups,bc (bc a multiple of 16) or 0", |n| match *n {
            [0] => Some(vec![]),
            [s, bc] if s > 0 && bc > 0 && bc.is_multiple_of(16) => Some(vec![(s, bc)]),
            _ => None,
        });
        knob.unwrap_or(SHAPES.to_vec())
    })
}

impl CoopAttnShape {
    /// `None` where the adapter has no cooperative matrices, its subgroups are not 16 lanes per
    /// row pair (32 or 64), the head dimension is not a multiple of 16 or no shape fits its
    /// workgroup memory: the scalar kernels serve every step there.
    /// Kernel developers' knob: `WGINFER_COOP_ATTN` = "subgroups,bc" replaces the list, "0"
    /// leaves the kernel out (to time the scalar kernels beside it).
    pub fn for_adapter(caps: &Caps, head_dim: u32) -> Option<CoopAttnShape> {
        let sg = caps.max_subgroup_size;
        if !caps.coop_matrix || caps.min_subgroup_size != sg || !matches!(sg, 32 | 64) || !head_dim.is_multiple_of(16) {
            return None;
        }
        shapes().iter().map(|&(subgroups, bc)| CoopAttnShape { subgroups, bc, sg }).find(|s| {
            (s.bc / (s.sg / 16)).is_multiple_of(4) && s.workgroup_bytes(head_dim) <= caps.max_workgroup_storage
        })
    }

    /// Rows of a query tile.
    pub fn tile_rows(&self) -> u32 {
        16 * self.subgroups
    }

    /// K and V of a block, the tile's queries and softmax weights (f16, rows 8 values longer),
    /// and per row max(bc, head_dim) f32s of scores or P V (8 longer).
    pub fn workgroup_bytes(&self, head_dim: u32) -> u32 {
        let br = self.tile_rows();
        let f16s = 2 * self.bc * (head_dim + 8) + br * (head_dim + 8) + br * (self.bc + 8);
        2 * f16s + 4 * br * (self.bc.max(head_dim) + 8)
    }
}

/// The rows per query tile the plan should list for this adapter and head size (0: none).
pub fn tile_rows(caps: &Caps, head_dim: u32) -> u32 {
    CoopAttnShape::for_adapter(caps, head_dim).map_or(0, |s| s.tile_rows())
}

pub fn source(h: &HeadShape, opts: AttnOptions, plan: &PlanLayout, kv: KvType, shape: CoopAttnShape) -> String {
    let defs = head_defs(h, opts, plan, shape.sg * shape.subgroups, true)
        .u32("SG", shape.sg)
        .u32("SUBGROUPS", shape.subgroups)
        .u32("BC", shape.bc)
        .u32("WIDE", shape.bc.max(h.head_dim));
    assemble("attention_coop", &defs, &[kv_libs(kv, false), &["lib/attention_window"]].concat())
}

pub struct AttentionCoop {
    bound: Bound,
    n_heads: u32,
}

impl AttentionCoop {
    /// `None` where the adapter cannot run it (`CoopAttnShape::for_adapter`) or the plan lists
    /// tiles of another size.
    pub fn new(gpu: &Gpu, h: &HeadShape, opts: AttnOptions, b: &AttnBuffers) -> Result<Option<AttentionCoop>> {
        let Some(shape) = CoopAttnShape::for_adapter(&gpu.caps, h.head_dim) else { return Ok(None) };
        if b.plan.layout.tile_rows != shape.tile_rows() {
            return Ok(None);
        }
        let k = Kernel::get(gpu, "attention_coop", source(h, opts, &b.plan.layout, b.kv, shape))?;
        Ok(Some(AttentionCoop { bound: k.bind_at(gpu, &b.entries(&[])), n_heads: h.n_heads }))
    }

    /// The plan's `tiles` query tiles.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, tiles: u32) {
        self.bound.record(pass, [self.n_heads, tiles, 1]);
    }
}

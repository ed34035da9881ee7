//! `shaders/embedding.wgsl`: gathers the embedding rows of a step's token ids.

use anyhow::Result;

use super::weight::WeightLayout;
use super::{groups, Weight};
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

const WG_THREADS: u32 = 256;

/// `weight_libs`: the table's `WeightType::libs`, its rows `row_lo .. row_hi` of `d` values in
/// `layout` (the weight matrices'); `scale` multiplies every row (Gemma's sqrt(hidden); 1 for
/// the others).
pub fn source(weight_libs: &[&str], layout: WeightLayout, d: u32, row_lo: u32, row_hi: u32, scale: f32) -> String {
    let defs = Defs::new()
        .u32("K", d)
        .u32("ROW_LO", row_lo)
        .u32("ROW_HI", row_hi)
        .u32("WG_THREADS", WG_THREADS)
        .f32("SCALE", scale)
        .u32("N", row_hi - row_lo)
        .u32("W_GROUP_ROWS", layout.group_rows());
    assemble("embedding", &defs, &[weight_libs, &["lib/weight_rows"]].concat())
}

pub struct Embedding {
    parts: Vec<Bound>,
    d: u32,
}

impl Embedding {
    pub fn new(
        gpu: &Gpu,
        table: &Weight,
        step: &wgpu::Buffer,
        ids: &wgpu::Buffer,
        x: &wgpu::Buffer,
        scale: f32,
    ) -> Result<Embedding> {
        let parts = table
            .parts
            .iter()
            .map(|p| {
                let source = source(p.ty.libs(), p.layout, table.cols, p.row_lo, p.row_lo + p.rows, scale);
                let k = Kernel::get(gpu, "embedding", source)?;
                Ok(k.bind(gpu, &[step, ids, &p.buffer, x]))
            })
            .collect::<Result<_>>()?;
        Ok(Embedding { parts, d: table.cols })
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        for p in &self.parts {
            p.record(pass, [groups(self.d / 4, WG_THREADS), rows, 1]);
        }
    }
}

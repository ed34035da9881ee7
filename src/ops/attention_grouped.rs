//! `shaders/attention_grouped.wgsl`: short contexts, the query heads of a KV group in one
//! workgroup (each K and V row read once for all of them). Its source and workgroup shape are
//! the plain kernel's (`attention_plain::source`, `PlainShape`).

use anyhow::Result;

use super::attention::{AttnBuffers, AttnOptions};
use super::attention_plain::{self, PlainShape};
use super::qkv_rope::HeadShape;
use crate::gpu::{Bound, Gpu, Kernel};

pub struct AttentionGrouped {
    bound: Bound,
    n_kv_heads: u32,
}

impl AttentionGrouped {
    /// `None` where a group's scores for `max_len` positions do not fit the adapter's workgroup
    /// memory.
    pub fn new(
        gpu: &Gpu,
        h: &HeadShape,
        opts: AttnOptions,
        max_len: u32,
        b: &AttnBuffers,
    ) -> Result<Option<AttentionGrouped>> {
        let shape = PlainShape::for_adapter(&gpu.caps, h.head_dim);
        if !shape.fits(&gpu.caps, h.head_dim, max_len, h.n_heads / h.n_kv_heads) {
            return Ok(None);
        }
        let k = Kernel::get(
            gpu,
            "attention_grouped",
            attention_plain::source("attention_grouped", h, opts, &b.plan.layout, b.kv, max_len, shape),
        )?;
        Ok(Some(AttentionGrouped { bound: k.bind_at(gpu, &b.entries(&[])), n_kv_heads: h.n_kv_heads }))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.bound.record(pass, [self.n_kv_heads, rows, 1]);
    }
}

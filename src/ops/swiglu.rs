//! `shaders/swiglu.wgsl`: gate and up projections in one pass, then SwiGLU.

use anyhow::{bail, Result};

use super::linear::{F16Rows, InputNorm, LinearConfig, LinearIo, LinearParts, Rows};
use super::weight::WeightPart;
use super::Weight;
use crate::gpu::shader::Defs;
use crate::gpu::Gpu;
use crate::model::config::Activation;

/// Which rows of the fused gate/up weight a part holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateUpRows {
    /// Gate and up interleaved (row 2i = gate i, 2i+1 = up i): SwiGLU in the epilogue.
    Interleaved,
    /// Gate rows only, stored to h as they are for the up part's dispatch that follows.
    Gate,
    /// Up rows only: h = act(h) * up (the gate's activation of what the gate part stored).
    Up,
}

/// Constants of the kernel for a part of the fused weight starting at row `row_lo`, for
/// `intermediate` outputs per row, with the gate's `activation`; `h_f16`: h is written as f16
/// rows too (lib/out_f16).
pub fn defs(intermediate: u32, rows: GateUpRows, row_lo: u32, activation: Activation, h_f16: bool) -> Defs {
    Defs::new()
        .u32("INTER", intermediate)
        .u32("ROW_LO", row_lo)
        .bool("GATE_ROWS", rows != GateUpRows::Up)
        .bool("UP_ROWS", rows != GateUpRows::Gate)
        .bool("GELU_TANH", activation == Activation::GeluTanh)
        .piece(if h_f16 { "lib/out_f16" } else { "lib/out_f16_none" })
}

/// Whether the fused weight interleaves gate and up rows: when they share a type. Gate and up
/// of different types (llama.cpp's *_M files) are stacked [Wgate; Wup], each part in its own
/// type, and the up part's dispatch finishes what the gate part's stored.
pub fn interleaves(w: &Weight) -> bool {
    w.single_type().is_some()
}

/// What `part` of `w` holds (see `interleaves`), or why the kernel cannot take it.
fn part_rows(w: &Weight, part: &WeightPart) -> Result<GateUpRows> {
    let inter = w.rows / 2;
    let (lo, hi) = (part.row_lo, part.row_lo + part.rows);
    let rows = match interleaves(w) {
        true => GateUpRows::Interleaved,
        false if hi <= inter => GateUpRows::Gate,
        false if lo >= inter => GateUpRows::Up,
        false => bail!("weight {}: rows {lo}..{hi} hold both gate and up rows of different types", w.name),
    };
    if lo % 2 == 1 || part.rows % 2 == 1 {
        bail!("weight {}: rows {lo}..{hi} split a pair of gate/up outputs", w.name);
    }
    Ok(rows)
}

pub struct SwiGlu(LinearParts);

impl SwiGlu {
    /// `w` holds the gate and up rows (see `interleaves`); h gets w.rows / 2 columns.
    /// With `norm`, x is RMS-normalized on load (the MLP norm fused in); `activation` is the
    /// gate's (SwiGLU, or GeGLU for Gemma). `h`'s second member, where given, gets h's rows as
    /// f16 too, for the down projection's tensor cores (`F16Rows::x`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        cfg: &LinearConfig,
        w: &Weight,
        step: &wgpu::Buffer,
        x: &wgpu::Buffer,
        h: (&wgpu::Buffer, Option<&wgpu::Buffer>),
        norm: Option<InputNorm>,
        activation: Activation,
    ) -> Result<SwiGlu> {
        anyhow::ensure!(w.rows.is_multiple_of(2), "weight {}: gate/up rows must come in pairs", w.name);
        let (h, h_f16) = h;
        let io = LinearIo { step, x, rest: vec![h], norm, f16: F16Rows { x: None, out: h_f16 } };
        let part_defs = |p: &WeightPart| Ok(defs(w.rows / 2, part_rows(w, p)?, p.row_lo, activation, h_f16.is_some()));
        let parts = LinearParts::new(gpu, cfg, "swiglu", w, Rows::Tokens, &io, part_defs)?;
        Ok(SwiGlu(parts))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.0.record(pass, rows);
    }
}

/// Row order of the fused weight as indices into the stacked rows [Wgate; Wup]: gate and up
/// rows interleaved (for gate and up of one type; see `interleaves`).
pub fn interleaved_row_order(intermediate: usize) -> Vec<usize> {
    (0..2 * intermediate).map(|r| if r % 2 == 0 { r / 2 } else { intermediate + r / 2 }).collect()
}

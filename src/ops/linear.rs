//! The core shared by every kernel that multiplies activations by a weight (matmul, qkv_rope,
//! swiglu): a GEMV variant for decode (few rows) and a tiled variant for prefill, chosen per
//! step by row count. The kernels differ only in what they do with each output pair.

use anyhow::Result;

use super::{grid, groups};
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Caps, Gpu, Kernel};

/// Tile shape of the tiled (prefill) core. Threads per workgroup = wg_x * wg_y; each thread
/// computes a (tm / wg_y) x (tn / wg_x) micro-tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiles {
    pub tm: u32,
    pub tn: u32,
    pub tk: u32,
    pub wg_x: u32,
    pub wg_y: u32,
}

impl Default for Tiles {
    fn default() -> Self {
        Tiles { tm: 64, tn: 64, tk: 16, wg_x: 16, wg_y: 16 }
    }
}

impl Tiles {
    pub fn check(&self) -> Result<()> {
        let ok = self.tm.is_multiple_of(self.wg_y)
            && self.tn.is_multiple_of(self.wg_x)
            && (self.tn / self.wg_x).is_multiple_of(2)
            && self.tk.is_multiple_of(4)
            && self.wg_x * self.wg_y <= 256;
        anyhow::ensure!(
            ok,
            "tile config {self:?} is invalid (tn/wg_x must be even, tk a multiple of 4, at most 256 threads)"
        );
        Ok(())
    }
}

/// Shape of the GEMV (decode) core: R output columns per workgroup, LANES threads per column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvShape {
    pub rows_per_group: u32,
    pub lanes: u32,
}

impl Default for GemvShape {
    fn default() -> Self {
        GemvShape { rows_per_group: 4, lanes: 64 }
    }
}

/// Up to this many rows (tokens) use the GEMV core; more use the tiled core.
pub const GEMV_MAX_ROWS: u32 = 4;

/// Shapes and variants of the linear cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinearConfig {
    pub tiles: Tiles,
    pub gemv: GemvShape,
    /// Reduce GEMV rows with subgroup operations instead of a workgroup-memory tree.
    pub subgroups: bool,
}

impl LinearConfig {
    /// The heuristic choice for an adapter: subgroup reductions where subgroups exist and are
    /// no wider than a GEMV row's lanes.
    pub fn for_adapter(caps: &Caps) -> LinearConfig {
        let gemv = GemvShape::default();
        LinearConfig { subgroups: caps.subgroup && caps.max_subgroup_size <= gemv.lanes, gemv, ..Default::default() }
    }
}

/// Both compiled variants of one linear kernel for one weight shape.
pub struct LinearKernels {
    pub gemv: Kernel,
    pub tiled: Kernel,
    n: u32,
    cfg: LinearConfig,
}

/// An RMSNorm fused into a linear kernel's input: its weight (f32, one per input column).
#[derive(Clone, Copy)]
pub struct InputNorm<'a> {
    pub weight: &'a wgpu::Buffer,
    pub eps: f32,
}

/// The shape a linear kernel is built for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearShape {
    /// Input width (the weight's columns).
    pub k: u32,
    /// Output width (the weight's rows, or this part's rows).
    pub n: u32,
    /// Rows come from the step's token count; otherwise one row.
    pub rows_from_step: bool,
    /// RMS-normalize the input rows on load with this epsilon (the weight is bound at 15).
    pub norm_eps: Option<f32>,
}

/// WGSL of `name` in both variants; `defs` carries the kernel's own constants.
pub fn sources(name: &str, defs: &Defs, lib_weight: &str, s: &LinearShape, cfg: &LinearConfig) -> [String; 2] {
    let t = cfg.tiles;
    let g = cfg.gemv;
    let lanes = if cfg.subgroups { "lib/lanes_subgroup" } else { "lib/lanes_portable" };
    let input = if s.norm_eps.is_some() { "lib/input_rmsnorm" } else { "lib/input_plain" };
    let common = |d: Defs, norm_rows: u32, threads: u32| {
        let d = d.clone().u32("K", s.k).u32("N", s.n).bool("ROWS_FROM_STEP", s.rows_from_step);
        match s.norm_eps {
            Some(eps) => d.f32("EPS", eps).u32("NORM_ROWS", norm_rows).u32("NORM_THREADS", threads),
            None => d,
        }
    };
    let gemv_threads = g.rows_per_group * g.lanes;
    let gemv_defs = common(defs.clone(), GEMV_MAX_ROWS, gemv_threads)
        .u32("R", g.rows_per_group)
        .u32("LANES", g.lanes)
        .u32("WG_THREADS", gemv_threads);
    let tiled_defs = common(defs.clone(), t.tm, t.wg_x * t.wg_y)
        .u32("TM", t.tm)
        .u32("TN", t.tn)
        .u32("TK", t.tk)
        .u32("WG_X", t.wg_x)
        .u32("WG_Y", t.wg_y)
        .u32("RM", t.tm / t.wg_y)
        .u32("RN", t.tn / t.wg_x);
    [
        assemble(name, &gemv_defs, &[lib_weight, lanes, input, "lib/linear_gemv"]),
        assemble(name, &tiled_defs, &[lib_weight, input, "lib/linear_tiled"]),
    ]
}

impl LinearKernels {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        name: &'static str,
        defs: &Defs,
        lib_weight: &str,
        shape: &LinearShape,
        cfg: &LinearConfig,
    ) -> Result<Self> {
        cfg.tiles.check()?;
        let [g, t] = sources(name, defs, lib_weight, shape, cfg);
        let (gemv, tiled) = (Kernel::get(gpu, name, g)?, Kernel::get(gpu, name, t)?);
        Ok(LinearKernels { gemv, tiled, n: shape.n, cfg: *cfg })
    }

    /// Which variant serves `rows` rows, and its workgroup counts.
    pub fn plan(&self, rows: u32) -> (bool, [u32; 3]) {
        if rows <= GEMV_MAX_ROWS {
            (true, grid(groups(self.n, self.cfg.gemv.rows_per_group)))
        } else {
            (false, [groups(self.n, self.cfg.tiles.tn), groups(rows, self.cfg.tiles.tm), 1])
        }
    }
}

/// A linear kernel with its buffers bound in both variants.
pub struct BoundLinear {
    kernels: LinearKernels,
    gemv: Bound,
    tiled: Bound,
}

impl BoundLinear {
    /// `buffers` go to bindings 0, 1, 2, ...; `norm_weight` (with a normalizing shape) to 15.
    pub fn new(
        gpu: &Gpu,
        kernels: LinearKernels,
        buffers: &[&wgpu::Buffer],
        norm_weight: Option<&wgpu::Buffer>,
    ) -> BoundLinear {
        let entries: Vec<(u32, &wgpu::Buffer)> = buffers
            .iter()
            .copied()
            .enumerate()
            .map(|(i, b)| (i as u32, b))
            .chain(norm_weight.map(|g| (15, g)))
            .collect();
        let gemv = kernels.gemv.bind_at(gpu, &entries);
        let tiled = kernels.tiled.bind_at(gpu, &entries);
        BoundLinear { kernels, gemv, tiled }
    }

    pub fn name(&self) -> &'static str {
        self.gemv.kernel.name
    }

    /// Records the variant that suits `rows` rows.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        let (use_gemv, wg) = self.kernels.plan(rows);
        if use_gemv {
            self.gemv.record(pass, wg);
        } else {
            self.tiled.record(pass, wg);
        }
    }
}

//! Weights on the GPU. The storage type is a property of each weight's row ranges (its parts);
//! kernels read any type through `w_load4` / `w_load8` from `shaders/lib/weight_<type>.wgsl`, one
//! variant per part. A weight larger than one storage binding is split by rows into parts, never
//! truncated.

use anyhow::{bail, Context, Result};

use crate::gpu::Gpu;
use crate::ops::linear::LinearConfig;

#[allow(non_camel_case_types)] // ggml's names
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WeightType {
    F32,
    /// IEEE half, stored two per u32.
    F16,
    /// ggml block types, stored as their blocks (4-byte aligned, see model/quant.rs).
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q4_K,
    Q6_K,
    Q5_1,
    Q5_K,
    Q3_K,
    Q2_K,
    IQ4_NL,
    IQ4_XS,
}

impl WeightType {
    /// Every type (benchmarks, tests, the tune cache's types).
    pub const ALL: [WeightType; 14] = [
        WeightType::F32,
        WeightType::F16,
        WeightType::Q8_0,
        WeightType::Q4_0,
        WeightType::Q4_1,
        WeightType::Q5_0,
        WeightType::Q4_K,
        WeightType::Q6_K,
        WeightType::Q5_1,
        WeightType::Q5_K,
        WeightType::Q3_K,
        WeightType::Q2_K,
        WeightType::IQ4_NL,
        WeightType::IQ4_XS,
    ];

    /// (values per block, bytes per block as ggml stores it); plain types are blocks of one value.
    pub fn ggml_block(self) -> (usize, usize) {
        match self {
            WeightType::F32 => (1, 4),
            WeightType::F16 => (1, 2),
            WeightType::Q8_0 => (32, 34),
            WeightType::Q4_0 => (32, 18),
            WeightType::Q4_1 => (32, 20),
            WeightType::Q5_0 => (32, 22),
            WeightType::Q4_K => (256, 144),
            WeightType::Q6_K => (256, 210),
            WeightType::Q5_1 => (32, 24),
            WeightType::Q5_K => (256, 176),
            WeightType::Q3_K => (256, 110),
            WeightType::Q2_K => (256, 84),
            WeightType::IQ4_NL => (32, 18),
            WeightType::IQ4_XS => (256, 136),
        }
    }

    /// (values per block, bytes per block on the GPU): as the file stores them, but Q6_K and
    /// Q3_K, padded to whole 4-byte words so their pieces read every field as u32 (see
    /// model/quant.rs); Q8_0, Q4_0, Q5_0 and IQ4_NL blocks are read at even byte offsets
    /// (`lib/weight_bytes`), so they take their file's size.
    pub fn block(self) -> (usize, usize) {
        match (self, self.ggml_block()) {
            (WeightType::Q6_K | WeightType::Q3_K, (per, bytes)) => (per, bytes.next_multiple_of(4)),
            (_, block) => block,
        }
    }

    pub fn is_quantized(self) -> bool {
        self.block().0 > 1
    }

    /// Bytes of a row of `cols` values, if `cols` is whole blocks.
    pub fn row_bytes(self, cols: usize) -> Option<usize> {
        let (per, size) = self.block();
        cols.is_multiple_of(per).then(|| cols / per * size)
    }

    /// The shader pieces that define `WElem`, `w_load4` and `w_load8` for this type, its own
    /// `lib/weight_<name>` first, then pieces shared between types. f16 loads eight values at
    /// once; `lib/weight_affine` types read a group's scale once for eight, as Q6_K's own piece
    /// does; f32 pairs two loads of four (`lib/weight_load8`).
    pub fn libs(self) -> &'static [&'static str] {
        match self {
            WeightType::F32 => &["lib/weight_f32", "lib/weight_load8"],
            WeightType::F16 => &["lib/weight_f16"],
            WeightType::Q8_0 => &["lib/weight_q8_0", "lib/weight_bytes", "lib/weight_affine"],
            WeightType::Q4_0 => &["lib/weight_q4_0", "lib/weight_bytes", "lib/weight_affine"],
            WeightType::Q4_1 => &["lib/weight_q4_1", "lib/weight_affine"],
            WeightType::Q5_0 => &["lib/weight_q5_0", "lib/weight_bytes", "lib/weight_q5_bits", "lib/weight_affine"],
            WeightType::Q4_K => &["lib/weight_q4_k", "lib/weight_k4_scales", "lib/weight_affine"],
            WeightType::Q6_K => &["lib/weight_q6_k"],
            WeightType::Q5_1 => &["lib/weight_q5_1", "lib/weight_q5_bits", "lib/weight_affine"],
            WeightType::Q5_K => &["lib/weight_q5_k", "lib/weight_k4_scales", "lib/weight_affine"],
            WeightType::Q3_K => &["lib/weight_q3_k", "lib/weight_affine"],
            WeightType::Q2_K => &["lib/weight_q2_k", "lib/weight_affine"],
            WeightType::IQ4_NL => {
                &["lib/weight_iq4_nl", "lib/weight_bytes", "lib/weight_iq4_values", "lib/weight_affine"]
            }
            WeightType::IQ4_XS => &["lib/weight_iq4_xs", "lib/weight_iq4_values", "lib/weight_affine"],
        }
    }

    /// This type's piece for the one-row GEMV core's runs of 8 values (lib/linear_gemv's `W_RUN`,
    /// `w_run`, `w_run8`): a `w_load8` each, after the lane's x values for f32 and f16 (one or
    /// two 16-byte loads), before them for block types (lib/weight_run8_ahead).
    pub fn run8_lib(self) -> &'static str {
        match self {
            WeightType::F32 | WeightType::F16 => "lib/weight_run8",
            _ => "lib/weight_run8_ahead",
        }
    }

    /// This type's piece for the one-row GEMV core's long runs (more than 8 values), if it has
    /// one: Q4_K's 64-value chunks, whose quant and scale words a run reads once.
    /// `LinearConfig` says which weights take long runs, the others `run8_lib`.
    pub fn long_run_lib(self) -> Option<&'static str> {
        match self {
            WeightType::Q4_K => Some("lib/weight_q4_k_run"),
            _ => None,
        }
    }

    /// The pieces that give the rows core (lib/linear_gemv_rows) this type's `w_block32`: the
    /// type's 64-bit reader (lib/weight64_*, the weight bound as u64s), else its own pieces and
    /// its quants with the block's scale (lib/weight_affine_block32), Q6_K's own, else four
    /// `w_load8`s a block.
    pub fn block32_libs(self) -> Vec<&'static str> {
        match self {
            WeightType::Q8_0 => vec!["lib/words64", "lib/weight64_q8_0"],
            WeightType::Q4_0 => vec!["lib/words64", "lib/weight64_q4_0"],
            WeightType::Q4_1 => vec!["lib/words64", "lib/weight64_q4_1"],
            // Affine types whose scales cover whole 32-value blocks: each block's scale read once.
            WeightType::Q4_K
            | WeightType::Q5_K
            | WeightType::Q5_0
            | WeightType::Q5_1
            | WeightType::IQ4_NL
            | WeightType::IQ4_XS => [self.libs(), &["lib/weight_affine_block32"]].concat(),
            // Its own: two scales a block.
            WeightType::Q6_K => self.libs().to_vec(),
            _ => [self.libs(), &["lib/weight_block32"]].concat(),
        }
    }

    pub fn name(self) -> &'static str {
        &self.libs()[0]["lib/weight_".len()..]
    }
}

/// How a weight part's rows lie in its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightLayout {
    /// Row after row, as files store them.
    Rows,
    /// Groups of `GROUP_ROWS` rows (the last may be shorter), each group's 32-value blocks column
    /// by column: the first block of each of its rows, then the second, ... The rows core's
    /// workgroup (16 rows, 8 lanes of two) then reads one sequential stream, which a CPU's
    /// prefetchers follow, instead of 16 streams 360 bytes apart (SmolLM2's Q4_1 rows), which
    /// they did not: on lavapipe a one-row GEMV of a weight larger than the caches took 1.75x the
    /// time row after row (docs/PERF.md). The linear cores and the embedding read it through
    /// `lib/weight_rows`; the tensor-core cores read rows only.
    Grouped,
}

/// Rows per group of `WeightLayout::Grouped`: the rows core's workgroup at one row of x (16 rows;
/// at several rows of x its workgroups take 32, two streams).
pub const GROUP_ROWS: u32 = 16;

impl WeightLayout {
    /// The layout weight matrices take on this adapter: grouped where the rows core runs them.
    pub fn linear(gpu: &Gpu) -> WeightLayout {
        Self::for_config(&LinearConfig::of_caps(&gpu.caps))
    }

    /// The layout for the linear kernels `cfg` builds: grouped where it has the rows core.
    pub fn for_config(cfg: &LinearConfig) -> WeightLayout {
        match cfg.has_rows_core() {
            true => WeightLayout::Grouped,
            false => WeightLayout::Rows,
        }
    }

    /// `W_GROUP_ROWS` of `lib/weight_rows`: 0 for row after row.
    pub fn group_rows(self) -> u32 {
        match self {
            WeightLayout::Rows => 0,
            WeightLayout::Grouped => GROUP_ROWS,
        }
    }
}

/// Rows `row_lo .. row_lo + rows` of a weight, in one buffer, all of one type and layout.
pub struct WeightPart {
    pub buffer: wgpu::Buffer,
    pub ty: WeightType,
    pub layout: WeightLayout,
    pub row_lo: u32,
    pub rows: u32,
}

/// Consecutive rows of one type, in that type's byte layout: what `Weight::upload_pieces` takes.
pub struct WeightPiece {
    pub ty: WeightType,
    pub rows: usize,
    pub data: Vec<u8>,
}

/// A matrix `[rows, cols]` (a linear layer's W[out, in], or an embedding table), as row ranges
/// (`parts`), each in its own storage type and layout (`WeightLayout`): a fused projection whose
/// source tensors differ in type (llama.cpp's *_M files) keeps every piece as the file stores
/// it, and a weight larger than one storage binding is split by rows.
pub struct Weight {
    pub name: String,
    pub rows: u32,
    pub cols: u32,
    pub parts: Vec<WeightPart>,
}

impl Weight {
    /// Uploads `data` (row-major, already in `ty`'s byte layout) as a linear layer's weight (in
    /// `WeightLayout::linear`), split into parts that each fit one storage binding.
    pub fn upload(gpu: &Gpu, name: &str, ty: WeightType, rows: usize, cols: usize, data: &[u8]) -> Result<Weight> {
        Self::upload_in(gpu, name, ty, rows, cols, data, WeightLayout::linear(gpu))
    }

    /// `upload` in `layout`.
    pub fn upload_in(
        gpu: &Gpu,
        name: &str,
        ty: WeightType,
        rows: usize,
        cols: usize,
        data: &[u8],
        layout: WeightLayout,
    ) -> Result<Weight> {
        Self::upload_pieces(gpu, name, cols, vec![WeightPiece { ty, rows, data: data.to_vec() }], layout)
    }

    /// Uploads row ranges of possibly different types, in order, each split into parts that fit
    /// one storage binding (each piece is at least one part: the caller merges adjacent pieces
    /// of one type, as the loader does, or each costs a dispatch). A part takes `layout` where
    /// its type's blocks are whole 32-value blocks or single values and `cols` is whole 32-value
    /// blocks, else `Rows`.
    pub fn upload_pieces(
        gpu: &Gpu,
        name: &str,
        cols: usize,
        pieces: Vec<WeightPiece>,
        layout: WeightLayout,
    ) -> Result<Weight> {
        let mut parts = Vec::new();
        let mut row_lo = 0;
        for piece in &pieces {
            parts.extend(upload_piece(gpu, name, cols, row_lo, piece, layout)?);
            row_lo += piece.rows;
        }
        Ok(Weight { name: name.to_string(), rows: row_lo as u32, cols: cols as u32, parts })
    }

    /// The only part of a weight that is one part (benchmarks and tests of one kernel).
    pub fn single(&self) -> Result<&WeightPart> {
        match self.parts.as_slice() {
            [p] => Ok(p),
            _ => bail!("weight {} needs {} storage bindings; this kernel takes one", self.name, self.parts.len()),
        }
    }

    /// The type of every part, if they share one.
    pub fn single_type(&self) -> Option<WeightType> {
        let first = self.parts.first()?.ty;
        self.parts.iter().all(|p| p.ty == first).then_some(first)
    }

    /// Bytes this weight takes on the GPU.
    pub fn gpu_bytes(&self) -> u64 {
        let part = |p: &WeightPart| u64::from(p.rows) * p.ty.row_bytes(self.cols as usize).unwrap_or(0) as u64;
        self.parts.iter().map(part).sum()
    }
}

/// The parts of one piece starting at row `row_lo` of weight `name`: as many rows as fit one
/// storage binding each, an even number where more than one fits (so the fused kernels' row
/// pairs never straddle two parts).
fn upload_piece(
    gpu: &Gpu,
    name: &str,
    cols: usize,
    row_lo: usize,
    piece: &WeightPiece,
    layout: WeightLayout,
) -> Result<Vec<WeightPart>> {
    let (ty, rows, data) = (piece.ty, piece.rows, &piece.data);
    let row_bytes = ty
        .row_bytes(cols)
        .with_context(|| format!("weight {name}: {cols} columns are not whole {} blocks", ty.name()))?;
    if data.len() != rows * row_bytes {
        bail!(
            "weight {name}: {} bytes for {rows} rows of {cols} {} values (expected {})",
            data.len(),
            ty.name(),
            rows * row_bytes
        );
    }
    if !cols.is_multiple_of(4) {
        bail!("weight {name}: {cols} columns; the kernels need a multiple of 4");
    }
    let fit = (gpu.caps.max_binding / row_bytes as u64).min(u64::from(u32::MAX)) as usize;
    let rows_per_part = if fit > 1 { fit & !1 } else { fit };
    if rows_per_part == 0 {
        bail!("weight {name}: one row ({row_bytes} bytes) is larger than this adapter's storage binding limit");
    }
    let layout = match ty.block().0 {
        1 | 32 if cols.is_multiple_of(32) => layout,
        _ => WeightLayout::Rows,
    };
    let mut parts = Vec::new();
    let mut lo = 0;
    while lo < rows {
        let n = rows_per_part.min(rows - lo);
        let rows_data = &data[lo * row_bytes..(lo + n) * row_bytes];
        let buffer = match layout {
            WeightLayout::Rows => gpu.storage_from(name, rows_data)?,
            WeightLayout::Grouped => gpu.storage_from(name, &grouped_bytes(rows_data, n, cols, ty))?,
        };
        parts.push(WeightPart { buffer, ty, layout, row_lo: (row_lo + lo) as u32, rows: n as u32 });
        lo += n;
    }
    Ok(parts)
}

/// `rows` rows of `cols` values of type `ty` (whole 32-value blocks, or single values), row after
/// row, in `WeightLayout::Grouped`.
fn grouped_bytes(data: &[u8], rows: usize, cols: usize, ty: WeightType) -> Vec<u8> {
    let (per, bytes) = ty.block();
    let block = 32 / per * bytes;
    let blocks = cols / 32;
    let group = GROUP_ROWS as usize;
    let mut out = Vec::with_capacity(data.len());
    for g0 in (0..rows).step_by(group) {
        for c in 0..blocks {
            for r in g0..rows.min(g0 + group) {
                let at = (r * blocks + c) * block;
                out.extend_from_slice(&data[at..at + block]);
            }
        }
    }
    out
}

/// Rows of `stacked` (row-major, `row_bytes` per row) in the order `order`.
pub fn gather_rows(stacked: &[u8], row_bytes: usize, order: &[usize]) -> Vec<u8> {
    let mut out = Vec::with_capacity(order.len() * row_bytes);
    for &r in order {
        out.extend_from_slice(&stacked[r * row_bytes..(r + 1) * row_bytes]);
    }
    out
}

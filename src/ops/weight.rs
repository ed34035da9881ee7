//! Weights on the GPU. The storage type is a property of each weight; kernels read any type
//! through `w_load4` / `w_load8` from `shaders/lib/weight_<type>.wgsl`. A weight larger than one storage
//! binding is split by rows into parts, never truncated.

use anyhow::{bail, Context, Result};

use crate::gpu::Gpu;

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
}

impl WeightType {
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
        }
    }

    /// (values per block, bytes per block on the GPU): quantized blocks padded to whole 4-byte
    /// words, so every field of a block can be read as u32 (see model/quant.rs).
    pub fn block(self) -> (usize, usize) {
        match self.ggml_block() {
            (1, bytes) => (1, bytes),
            (per, bytes) => (per, bytes.next_multiple_of(4)),
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

    /// The shader pieces that define `WElem`, `w_load4` and `w_load8` for this type (f16 loads
    /// eight values at once; the others pair two loads of four).
    pub fn libs(self) -> &'static [&'static str] {
        match self {
            WeightType::F32 => &["lib/weight_f32", "lib/weight_load8"],
            WeightType::F16 => &["lib/weight_f16"],
            WeightType::Q8_0 => &["lib/weight_q8_0", "lib/weight_load8"],
            WeightType::Q4_0 => &["lib/weight_q4_0", "lib/weight_load8"],
            WeightType::Q4_1 => &["lib/weight_q4_1", "lib/weight_load8"],
            WeightType::Q5_0 => &["lib/weight_q5_0", "lib/weight_load8"],
            WeightType::Q4_K => &["lib/weight_q4_k", "lib/weight_load8"],
            WeightType::Q6_K => &["lib/weight_q6_k", "lib/weight_load8"],
        }
    }

    /// The shader piece that defines `WElem` and `w_load4` for this type.
    pub fn lib(self) -> &'static str {
        self.libs()[0]
    }

    pub fn name(self) -> &'static str {
        &self.lib()["lib/weight_".len()..]
    }
}

/// Rows `row_lo .. row_lo + rows` of a weight, in one buffer.
pub struct WeightPart {
    pub buffer: wgpu::Buffer,
    pub row_lo: u32,
    pub rows: u32,
}

/// A row-major matrix `[rows, cols]` (a linear layer's W[out, in], or an embedding table).
pub struct Weight {
    pub name: String,
    pub ty: WeightType,
    pub rows: u32,
    pub cols: u32,
    pub parts: Vec<WeightPart>,
}

impl Weight {
    /// Uploads `data` (row-major, already in `ty`'s byte layout), split into parts that each fit
    /// one storage binding.
    pub fn upload(gpu: &Gpu, name: &str, ty: WeightType, rows: usize, cols: usize, data: &[u8]) -> Result<Weight> {
        let row_bytes = ty
            .row_bytes(cols)
            .with_context(|| format!("weight {name}: {cols} columns are not whole {} blocks", ty.name()))?;
        if data.len() != rows * row_bytes {
            bail!(
                "weight {name}: {} bytes for a [{rows}, {cols}] {} matrix (expected {})",
                data.len(),
                ty.name(),
                rows * row_bytes
            );
        }
        if !cols.is_multiple_of(4) {
            bail!("weight {name}: {cols} columns; the kernels need a multiple of 4");
        }
        let rows_per_part = (gpu.caps.max_binding / row_bytes as u64).min(u64::from(u32::MAX)) as usize;
        if rows_per_part == 0 {
            bail!("weight {name}: one row ({row_bytes} bytes) is larger than this adapter's storage binding limit");
        }
        let mut parts = Vec::new();
        let mut lo = 0;
        while lo < rows {
            let n = rows_per_part.min(rows - lo);
            let buffer = gpu.storage_from(name, &data[lo * row_bytes..(lo + n) * row_bytes])?;
            parts.push(WeightPart { buffer, row_lo: lo as u32, rows: n as u32 });
            lo += n;
        }
        Ok(Weight { name: name.to_string(), ty, rows: rows as u32, cols: cols as u32, parts })
    }

    /// The single buffer of a weight that must not be split (fused projections).
    pub fn single(&self) -> Result<&wgpu::Buffer> {
        match self.parts.as_slice() {
            [p] => Ok(&p.buffer),
            _ => bail!("weight {} needs {} storage bindings; this kernel takes one", self.name, self.parts.len()),
        }
    }

    /// Bytes this weight takes on the GPU.
    pub fn gpu_bytes(&self) -> u64 {
        u64::from(self.rows) * self.ty.row_bytes(self.cols as usize).unwrap_or(0) as u64
    }
}

/// Rows of `stacked` (row-major, `row_bytes` per row) in the order `order`.
pub fn gather_rows(stacked: &[u8], row_bytes: usize, order: &[usize]) -> Vec<u8> {
    let mut out = Vec::with_capacity(order.len() * row_bytes);
    for &r in order {
        out.extend_from_slice(&stacked[r * row_bytes..(r + 1) * row_bytes]);
    }
    out
}

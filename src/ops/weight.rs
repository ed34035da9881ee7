//! Weights on the GPU. The storage type is a property of each weight; kernels read any type
//! through `w_load4` from `shaders/lib/weight_<type>.wgsl`. A weight larger than one storage
//! binding is split by rows into parts, never truncated.

use anyhow::{bail, Result};

use crate::gpu::Gpu;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightType {
    F32,
    /// IEEE half, stored two per u32.
    F16,
}

impl WeightType {
    pub fn bytes_per_element(self) -> usize {
        match self {
            WeightType::F32 => 4,
            WeightType::F16 => 2,
        }
    }

    /// The shader piece that defines `WElem` and `w_load4` for this type.
    pub fn lib(self) -> &'static str {
        match self {
            WeightType::F32 => "lib/weight_f32",
            WeightType::F16 => "lib/weight_f16",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WeightType::F32 => "f32",
            WeightType::F16 => "f16",
        }
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
    pub fn upload(
        gpu: &Gpu,
        name: &str,
        ty: WeightType,
        rows: usize,
        cols: usize,
        data: &[u8],
    ) -> Result<Weight> {
        let row_bytes = cols * ty.bytes_per_element();
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
        let rows_per_part =
            (gpu.caps.max_binding / row_bytes as u64).min(u64::from(u32::MAX)) as usize;
        if rows_per_part == 0 {
            bail!("weight {name}: one row ({row_bytes} bytes) is larger than this adapter's storage binding limit");
        }
        let mut parts = Vec::new();
        let mut lo = 0;
        while lo < rows {
            let n = rows_per_part.min(rows - lo);
            let buffer = gpu.storage_from(name, &data[lo * row_bytes..(lo + n) * row_bytes])?;
            parts.push(WeightPart {
                buffer,
                row_lo: lo as u32,
                rows: n as u32,
            });
            lo += n;
        }
        Ok(Weight {
            name: name.to_string(),
            ty,
            rows: rows as u32,
            cols: cols as u32,
            parts,
        })
    }

    /// The single buffer of a weight that must not be split (fused projections).
    pub fn single(&self) -> Result<&wgpu::Buffer> {
        match self.parts.as_slice() {
            [p] => Ok(&p.buffer),
            _ => bail!(
                "weight {} needs {} storage bindings; this kernel takes one",
                self.name,
                self.parts.len()
            ),
        }
    }

    /// Bytes this weight takes on the GPU.
    pub fn gpu_bytes(&self) -> u64 {
        u64::from(self.rows) * u64::from(self.cols) * self.ty.bytes_per_element() as u64
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

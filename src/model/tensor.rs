//! Tensors as files hold them, before upload: dtype, shape and bytes (borrowed from a map).

use anyhow::{bail, Result};
use half::{bf16, f16};

use crate::ops::WeightType;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    BF16,
}

impl DType {
    pub fn from_safetensors(s: &str) -> Option<DType> {
        match s {
            "F32" => Some(DType::F32),
            "F16" => Some(DType::F16),
            "BF16" => Some(DType::BF16),
            _ => None,
        }
    }

    pub fn size_of(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// The GPU storage a weight of this dtype gets: f32 stays f32, f16 and bf16 become f16
    /// (bf16's 8-bit mantissa fits f16's 10 bits; its range beyond f16's is never used by
    /// weights, and the conversion checks).
    pub fn gpu_type(self) -> WeightType {
        match self {
            DType::F32 => WeightType::F32,
            DType::F16 | DType::BF16 => WeightType::F16,
        }
    }
}

pub struct HostTensor<'a> {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: &'a [u8],
    /// The file it came from, for error messages.
    pub origin: String,
}

/// Anything that serves tensors by name (safetensors files; GGUF later).
pub trait TensorSource {
    fn tensor(&self, name: &str) -> Result<Option<HostTensor<'_>>>;
}

impl HostTensor<'_> {
    pub fn check_shape(&self, want: &[usize]) -> Result<()> {
        if self.shape != want {
            bail!(
                "tensor {} in {}: shape {:?}, expected {:?}",
                self.name,
                self.origin,
                self.shape,
                want
            );
        }
        Ok(())
    }

    pub fn to_f32(&self) -> Vec<f32> {
        let b = self.bytes;
        match self.dtype {
            DType::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            DType::F16 => b
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            DType::BF16 => b
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
        }
    }

    /// The bytes in `ty`'s GPU layout.
    pub fn to_weight_bytes(&self, ty: WeightType) -> Result<Vec<u8>> {
        Ok(match (self.dtype, ty) {
            (DType::F32, WeightType::F32) | (DType::F16, WeightType::F16) => self.bytes.to_vec(),
            (_, WeightType::F32) => bytemuck::cast_slice(&self.to_f32()).to_vec(),
            (_, WeightType::F16) => {
                let mut out = Vec::with_capacity(self.bytes.len() / self.dtype.size_of() * 2);
                for v in self.to_f32() {
                    let h = f16::from_f32(v);
                    if h.is_infinite() && v.is_finite() {
                        bail!(
                            "tensor {} in {}: value {v} does not fit in f16",
                            self.name,
                            self.origin
                        );
                    }
                    out.extend_from_slice(&h.to_le_bytes());
                }
                out
            }
        })
    }
}

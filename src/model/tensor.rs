//! Tensors as files hold them, before upload: dtype, shape and bytes (borrowed from a map).

use anyhow::{bail, Result};
use half::{bf16, f16};

use crate::ops::WeightType;

#[allow(non_camel_case_types)] // ggml's names
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    BF16,
    // ggml's block-quantized types (see quant.rs)
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

impl DType {
    pub fn from_safetensors(s: &str) -> Option<DType> {
        match s {
            "F32" => Some(DType::F32),
            "F16" => Some(DType::F16),
            "BF16" => Some(DType::BF16),
            _ => None,
        }
    }

    /// The ggml types `from_ggml` knows, for messages.
    pub const GGML_NAMES: &'static str =
        "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS";

    /// ggml type ids as GGUF stores them.
    pub fn from_ggml(id: u32) -> Option<DType> {
        Some(match id {
            0 => DType::F32,
            1 => DType::F16,
            2 => DType::Q4_0,
            3 => DType::Q4_1,
            6 => DType::Q5_0,
            7 => DType::Q5_1,
            8 => DType::Q8_0,
            10 => DType::Q2_K,
            11 => DType::Q3_K,
            12 => DType::Q4_K,
            13 => DType::Q5_K,
            14 => DType::Q6_K,
            20 => DType::IQ4_NL,
            23 => DType::IQ4_XS,
            30 => DType::BF16,
            _ => return None,
        })
    }

    /// (values per block, bytes per block); plain types are blocks of one value.
    pub fn block(self) -> (usize, usize) {
        // bf16 has f16's size; every other type is stored as its GPU type is in ggml.
        self.gpu_type().ggml_block()
    }

    /// Bytes of `n` values (`n` a multiple of the block size).
    pub fn bytes_for(self, n: usize) -> Option<usize> {
        let (per, size) = self.block();
        n.is_multiple_of(per).then(|| n / per).and_then(|b| b.checked_mul(size))
    }

    pub fn is_quantized(self) -> bool {
        self.block().0 > 1
    }

    /// The GPU storage a weight of this dtype gets: f32 stays f32, f16 and bf16 become f16
    /// (bf16's 8-bit mantissa fits f16's 10 bits; its range beyond f16's is never used by
    /// weights, and the conversion checks).
    pub fn gpu_type(self) -> WeightType {
        match self {
            DType::F32 => WeightType::F32,
            DType::F16 | DType::BF16 => WeightType::F16,
            DType::Q8_0 => WeightType::Q8_0,
            DType::Q4_0 => WeightType::Q4_0,
            DType::Q4_1 => WeightType::Q4_1,
            DType::Q5_0 => WeightType::Q5_0,
            DType::Q4_K => WeightType::Q4_K,
            DType::Q6_K => WeightType::Q6_K,
            DType::Q5_1 => WeightType::Q5_1,
            DType::Q5_K => WeightType::Q5_K,
            DType::Q3_K => WeightType::Q3_K,
            DType::Q2_K => WeightType::Q2_K,
            DType::IQ4_NL => WeightType::IQ4_NL,
            DType::IQ4_XS => WeightType::IQ4_XS,
        }
    }

    /// The file type that becomes GPU type `ty` as it is (f16 for f16).
    pub fn stored_as(ty: WeightType) -> DType {
        match ty {
            WeightType::F32 => DType::F32,
            WeightType::F16 => DType::F16,
            WeightType::Q8_0 => DType::Q8_0,
            WeightType::Q4_0 => DType::Q4_0,
            WeightType::Q4_1 => DType::Q4_1,
            WeightType::Q5_0 => DType::Q5_0,
            WeightType::Q4_K => DType::Q4_K,
            WeightType::Q6_K => DType::Q6_K,
            WeightType::Q5_1 => DType::Q5_1,
            WeightType::Q5_K => DType::Q5_K,
            WeightType::Q3_K => DType::Q3_K,
            WeightType::Q2_K => DType::Q2_K,
            WeightType::IQ4_NL => DType::IQ4_NL,
            WeightType::IQ4_XS => DType::IQ4_XS,
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

/// Anything that serves tensors by their Hugging Face names (safetensors, GGUF).
pub trait TensorSource {
    fn tensor(&self, name: &str) -> Result<Option<HostTensor<'_>>>;

    /// Every tensor the source holds, named as its file names them, in name order (for scans
    /// of the whole file: `wginfer info --check`).
    fn every_tensor(&self) -> Vec<HostTensor<'_>>;

    /// What the file calls the tensor of engine name `name` (GGUF: `blk.0.attn_q.weight`), for
    /// errors about a tensor the file lacks.
    fn file_name(&self, name: &str) -> String {
        name.to_string()
    }

    /// Whether the q and k projection rows already come with each RoPE pair adjacent.
    fn qk_rows_pair_adjacent(&self) -> bool {
        false
    }
}

/// The first tensor of `src` holding a NaN or an infinity, named with its file and the first
/// such element; Ok when every value is finite. Returns how many tensors were scanned.
pub fn check_finite(src: &dyn TensorSource) -> Result<usize> {
    let tensors = src.every_tensor();
    for t in &tensors {
        if let Some((i, v)) = t.to_f32().iter().enumerate().find(|(_, v)| !v.is_finite()) {
            bail!("tensor {} in {}: element {i} of {:?} is {v}", t.name, t.origin, t.shape);
        }
    }
    Ok(tensors.len())
}

impl HostTensor<'_> {
    pub fn check_shape(&self, want: &[usize]) -> Result<()> {
        if self.shape != want {
            bail!("tensor {} in {}: shape {:?}, expected {:?}", self.name, self.origin, self.shape, want);
        }
        Ok(())
    }

    pub fn to_f32(&self) -> Vec<f32> {
        let b = self.bytes;
        match self.dtype {
            DType::F32 => b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
            DType::F16 => b.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            DType::BF16 => b.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            q => super::quant::dequantize(q, b),
        }
    }

    /// The bytes in `ty`'s GPU layout.
    pub fn to_weight_bytes(&self, ty: WeightType) -> Result<Vec<u8>> {
        Ok(match (self.dtype, ty) {
            (DType::F32, WeightType::F32) | (DType::F16, WeightType::F16) => self.bytes.to_vec(),
            (q, _) if q.is_quantized() && q.gpu_type() == ty => super::quant::to_gpu_layout(q, self.bytes),
            (_, WeightType::F32) => bytemuck::cast_slice(&self.to_f32()).to_vec(),
            (_, WeightType::F16) => {
                let mut out = Vec::new();
                for v in self.to_f32() {
                    let h = f16::from_f32(v);
                    if h.is_infinite() && v.is_finite() {
                        bail!("tensor {} in {}: value {v} does not fit in f16", self.name, self.origin);
                    }
                    out.extend_from_slice(&h.to_le_bytes());
                }
                out
            }
            (_, t) => bail!("tensor {} in {}: cannot store {:?} as {}", self.name, self.origin, self.dtype, t.name()),
        })
    }
}

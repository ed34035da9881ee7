//! ggml's block-quantized types: sizes, the CPU dequantization (the reference the GPU kernels
//! are tested against, written after ggml's `dequantize_row_*`), and the repacking of blocks
//! into the 4-byte-aligned layout the WGSL `weight_*` pieces read.

use half::f16;

use super::tensor::DType;

fn h(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// Q4_K's 6-bit scale and min of sub-block `j` (ggml's get_scale_min_k4).
fn scale_min_k4(j: usize, q: &[u8]) -> (f32, f32) {
    if j < 4 {
        ((q[j] & 63) as f32, (q[j + 4] & 63) as f32)
    } else {
        (((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4)) as f32, ((q[j + 4] >> 4) | ((q[j] >> 6) << 4)) as f32)
    }
}

/// Dequantizes one block of `dtype` into `y` (block-size values).
fn dequantize_block(dtype: DType, b: &[u8], y: &mut [f32]) {
    match dtype {
        DType::Q8_0 => {
            let d = h(b, 0);
            for (j, v) in y.iter_mut().enumerate() {
                *v = d * (b[2 + j] as i8) as f32;
            }
        }
        DType::Q4_0 | DType::Q4_1 | DType::Q5_0 => {
            let d = h(b, 0);
            let (m, qh, qs) = match dtype {
                DType::Q4_0 => (-8.0 * d, 0u32, &b[2..18]),
                DType::Q4_1 => (h(b, 2), 0, &b[4..20]),
                _ => (-16.0 * d, u32::from_le_bytes([b[2], b[3], b[4], b[5]]), &b[6..22]),
            };
            for j in 0..16 {
                let lo = (qs[j] & 0xF) as u32 | (((qh >> j) & 1) << 4);
                let hi = (qs[j] >> 4) as u32 | (((qh >> (j + 16)) & 1) << 4);
                y[j] = d * lo as f32 + m;
                y[j + 16] = d * hi as f32 + m;
            }
        }
        DType::Q4_K => {
            let (d, dmin) = (h(b, 0), h(b, 2));
            let (scales, qs) = (&b[4..16], &b[16..144]);
            for c in 0..4 {
                let (s1, m1) = scale_min_k4(2 * c, scales);
                let (s2, m2) = scale_min_k4(2 * c + 1, scales);
                for l in 0..32 {
                    let q = qs[c * 32 + l];
                    y[c * 64 + l] = d * s1 * (q & 0xF) as f32 - dmin * m1;
                    y[c * 64 + 32 + l] = d * s2 * (q >> 4) as f32 - dmin * m2;
                }
            }
        }
        DType::Q6_K => {
            let (ql, qh, sc, d) = (&b[0..128], &b[128..192], &b[192..208], h(b, 208));
            for n in 0..2 {
                for l in 0..32 {
                    let (ql, qh, sc) = (&ql[n * 64..], &qh[n * 32..], &sc[n * 8..]);
                    let is = l / 16;
                    let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                    let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                    let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                    let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                    let y = &mut y[n * 128..];
                    y[l] = d * (sc[is] as i8) as f32 * q1 as f32;
                    y[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
                    y[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
                    y[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
                }
            }
        }
        DType::F32 | DType::F16 | DType::BF16 => unreachable!("not a block type"),
    }
}

/// All values of a quantized tensor's bytes (whole blocks).
pub fn dequantize(dtype: DType, bytes: &[u8]) -> Vec<f32> {
    let (n, size) = dtype.block();
    let mut out = vec![0.0f32; bytes.len() / size * n];
    for (b, y) in bytes.chunks_exact(size).zip(out.chunks_exact_mut(n)) {
        dequantize_block(dtype, b, y);
    }
    out
}

/// Blocks repacked so every field starts on a 4-byte boundary: a 2-byte pad follows the leading
/// f16 scale where the next field would be misaligned (Q8_0, Q4_0, Q5_0), or ends the block
/// (Q6_K). Q4_1 and Q4_K are aligned as stored.
pub fn to_gpu_layout(dtype: DType, bytes: &[u8]) -> Vec<u8> {
    let size = dtype.block().1;
    let gpu = dtype.gpu_type().block().1;
    if gpu == size {
        return bytes.to_vec();
    }
    let pad_after_scale = matches!(dtype, DType::Q8_0 | DType::Q4_0 | DType::Q5_0);
    let mut out = Vec::with_capacity(bytes.len() / size * gpu);
    for b in bytes.chunks_exact(size) {
        if pad_after_scale {
            out.extend_from_slice(&b[..2]);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&b[2..]);
        } else {
            out.extend_from_slice(b);
            out.extend_from_slice(&[0, 0]);
        }
    }
    out
}

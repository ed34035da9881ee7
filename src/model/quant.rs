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

/// The IQ4 types' 16 non-linear values (ggml's kvalues_iq4nl).
const IQ4_VALUES: [f32; 16] =
    [-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0];

/// Q2_K's and Q3_K's 2-bit value `j` of a super-block from its 64 bytes `qs`: value
/// 128h + 32s + l sits at bits 2s of byte 32h + l.
fn crumb(qs: &[u8], j: usize) -> u8 {
    (qs[j / 128 * 32 + j % 32] >> (2 * (j % 128 / 32))) & 3
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
        DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 => {
            let d = h(b, 0);
            let (m, qh, qs) = match dtype {
                DType::Q4_0 => (-8.0 * d, 0u32, &b[2..18]),
                DType::Q4_1 => (h(b, 2), 0, &b[4..20]),
                DType::Q5_0 => (-16.0 * d, u32::from_le_bytes([b[2], b[3], b[4], b[5]]), &b[6..22]),
                _ => (h(b, 2), u32::from_le_bytes([b[4], b[5], b[6], b[7]]), &b[8..24]),
            };
            for j in 0..16 {
                let lo = (qs[j] & 0xF) as u32 | (((qh >> j) & 1) << 4);
                let hi = (qs[j] >> 4) as u32 | (((qh >> (j + 16)) & 1) << 4);
                y[j] = d * lo as f32 + m;
                y[j + 16] = d * hi as f32 + m;
            }
        }
        DType::Q4_K | DType::Q5_K => {
            // Q5_K is Q4_K plus 32 bytes of fifth bits (bit s of byte l: value 32s + l).
            let (d, dmin, scales) = (h(b, 0), h(b, 2), &b[4..16]);
            let (qh, qs) = match dtype {
                DType::Q5_K => (Some(&b[16..48]), &b[48..176]),
                _ => (None, &b[16..144]),
            };
            for s in 0..8 {
                let (sc, m) = scale_min_k4(s, scales);
                for l in 0..32 {
                    let hi = qh.map_or(0, |qh| ((qh[l] >> s) & 1) << 4);
                    let q = ((qs[s / 2 * 32 + l] >> (4 * (s % 2))) & 0xF) | hi;
                    y[s * 32 + l] = d * sc * q as f32 - dmin * m;
                }
            }
        }
        DType::Q3_K => {
            let (hmask, qs, sc, d) = (&b[0..32], &b[32..96], &b[96..108], h(b, 108));
            for (j, v) in y.iter_mut().enumerate() {
                // 6-bit scale s: low nibble at byte s % 8 (nibble s / 8), high bits at byte 8 + s % 4.
                let s = j / 16;
                let code = ((sc[s % 8] >> (4 * (s / 8))) & 0xF) | (((sc[8 + s % 4] >> (2 * (s / 4))) & 3) << 4);
                let high = (hmask[j % 32] >> (j / 32)) & 1;
                let q = i32::from(crumb(qs, j)) + 4 * i32::from(high) - 4;
                *v = d * (i32::from(code) - 32) as f32 * q as f32;
            }
        }
        DType::Q2_K => {
            let (sc, qs, d, dmin) = (&b[0..16], &b[16..80], h(b, 80), h(b, 82));
            for (j, v) in y.iter_mut().enumerate() {
                let s = sc[j / 16];
                *v = d * (s & 0xF) as f32 * crumb(qs, j) as f32 - dmin * (s >> 4) as f32;
            }
        }
        DType::IQ4_NL => {
            let d = h(b, 0);
            for j in 0..16 {
                y[j] = d * IQ4_VALUES[usize::from(b[2 + j] & 0xF)];
                y[j + 16] = d * IQ4_VALUES[usize::from(b[2 + j] >> 4)];
            }
        }
        DType::IQ4_XS => {
            // Sub-block s of 32: a 6-bit scale (low nibble in scales_l, high bits in scales_h)
            // and 16 bytes of nibbles as IQ4_NL.
            let (d, scales_h, scales_l) = (h(b, 0), u16::from_le_bytes([b[2], b[3]]), &b[4..8]);
            for s in 0..8 {
                let code = ((scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | ((((scales_h >> (2 * s)) & 3) as u8) << 4);
                let dl = d * (i32::from(code) - 32) as f32;
                let qs = &b[8 + 16 * s..8 + 16 * (s + 1)];
                for l in 0..16 {
                    y[32 * s + l] = dl * IQ4_VALUES[usize::from(qs[l] & 0xF)];
                    y[32 * s + 16 + l] = dl * IQ4_VALUES[usize::from(qs[l] >> 4)];
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

/// Blocks as the GPU holds them: Q6_K and Q3_K padded with 2 bytes at the end, so every field
/// starts on a 4-byte boundary; the other types as stored (`WeightType::block`).
pub fn to_gpu_layout(dtype: DType, bytes: &[u8]) -> Vec<u8> {
    let size = dtype.block().1;
    let gpu = dtype.gpu_type().block().1;
    if gpu == size {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len() / size * gpu);
    for b in bytes.chunks_exact(size) {
        out.extend_from_slice(b);
        out.resize(out.len() + gpu - size, 0);
    }
    out
}

use super::common::*;
use half::f16;
use wginfer::ops::dequant_f16::DequantF16;
use wginfer::ops::WeightType;

/// A Q8_0 weight `[n, k]` through the kernel, against its values rounded to f16 on the CPU:
/// both round the same f32 (d * q, exact in f32), so every value must match. 1030 x 8192 has
/// more runs of 8 values than the grid has threads (its loop takes a second turn).
#[test]
fn q8_0_rows_match_their_values_in_f16() {
    let gpu = gpu();
    if !gpu.caps.shader_f16 {
        return; // only prefill cores that read f16 weights run this kernel
    }
    for (n, k) in [(3, 32), (1030, 8192)] {
        let data: Vec<f32> = (0..n * k).map(|i| ((i * 7919 % 2001) as f32 - 1000.0) / 250.0).collect();
        let (bytes, values) = q8_0_bytes(&data);
        let w = gpu.storage_from("w", &bytes).unwrap();
        let y = zeros(gpu, n * k / 2);
        let op = DequantF16::new(gpu, WeightType::Q8_0, n as u32, k as u32, &w, &y).unwrap();
        gpu.run_pass(|p| op.record(p)).unwrap();
        let got = gpu.read_back(&y, (n * k * 2) as u64).unwrap();
        let got: &[f16] = bytemuck::cast_slice(&got);
        let bad = values.iter().zip(got).position(|(v, g)| f16::from_f32(*v) != *g);
        assert_eq!(bad, None, "dequant_f16 {n}x{k}: first wrong value (want {:?})", bad.map(|i| values[i]));
    }
}

use super::common::*;
use wginfer::ops::embedding::Embedding;
use wginfer::ops::WeightType;

/// Rows of every part, times the scale (Gemma's sqrt(hidden); 1 for the others).
#[test]
fn gathers_rows_of_every_part() {
    for (gpu, ty, scale) in [(gpu(), WeightType::F16, 8.0f32), (small_binding_gpu(), WeightType::F32, 1.0)] {
        let (vocab, d) = (37, 20);
        let (table, host) = weight(gpu, ty, vocab, d, &random(vocab * d, 8));
        let ids = [5u32, 0, 36, 5, 17, 30, 1];
        let (ib, xb, sb) = (upload_u32(gpu, &ids), zeros(gpu, ids.len() * d), step(gpu, ids.len() as u32));
        let k = Embedding::new(gpu, &table, &sb, &ib, &xb, scale).unwrap();
        gpu.run_pass(|p| k.record(p, ids.len() as u32)).unwrap();
        let row = |i: u32| host[i as usize * d..(i as usize + 1) * d].iter().map(move |v| v * scale);
        let want: Vec<f32> = ids.iter().flat_map(|&i| row(i)).collect();
        assert_close(
            &read(gpu, &xb, ids.len() * d),
            &want,
            0.0,
            &format!("embedding {ty:?} parts={}", table.parts.len()),
        );
    }
}

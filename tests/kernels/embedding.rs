use super::common::*;
use wginfer::ops::embedding::Embedding;
use wginfer::ops::WeightType;

#[test]
fn gathers_rows_of_every_part() {
    for (gpu, ty) in [(gpu(), WeightType::F16), (small_binding_gpu(), WeightType::F32)] {
        let (vocab, d) = (37, 20);
        let (table, host) = weight(gpu, ty, vocab, d, &random(vocab * d, 8));
        let ids = [5u32, 0, 36, 5, 17, 30, 1];
        let (ib, xb, sb) = (upload_u32(gpu, &ids), zeros(gpu, ids.len() * d), step(gpu, ids.len() as u32));
        let k = Embedding::new(gpu, &table, &sb, &ib, &xb).unwrap();
        gpu.run_pass(|p| k.record(p, ids.len() as u32)).unwrap();
        let want: Vec<f32> = ids.iter().flat_map(|&i| host[i as usize * d..(i as usize + 1) * d].to_vec()).collect();
        assert_close(
            &read(gpu, &xb, ids.len() * d),
            &want,
            0.0,
            &format!("embedding {ty:?} parts={}", table.parts.len()),
        );
    }
}

use super::common::*;
use wginfer::ops::embedding::Embedding;
use wginfer::ops::weight::WeightLayout;
use wginfer::ops::WeightType;

/// Rows of every part, times the scale (Gemma's sqrt(hidden); 1 for the others), in both
/// layouts (a table is stored as the weight matrices are; the grouped one with a partial last
/// group of rows, and 4-row parts of 1 KiB).
#[test]
fn gathers_rows_of_every_part() {
    let cases = [(gpu(), WeightType::F16, 8.0f32), (small_binding_gpu(), WeightType::F32, 1.0)];
    for ((gpu, ty, scale), layout) in
        cases.into_iter().flat_map(|c| [(c, WeightLayout::Rows), (c, WeightLayout::Grouped)])
    {
        let (vocab, d) = (37, 64);
        let (table, host) = weight_in(gpu, ty, vocab, d, &random(vocab * d, 8), layout);
        assert!(table.parts.iter().all(|p| p.layout == layout));
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
            &format!("embedding {ty:?} {layout:?} parts={}", table.parts.len()),
        );
    }
}

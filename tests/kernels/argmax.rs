use super::common::*;
use wginfer::ops::argmax::Argmax;

#[test]
fn finds_the_largest_lowest_index_on_ties() {
    let gpu = gpu();
    let vocab = 1001;
    let mut logits = random(vocab, 9);
    logits[999] = 7.5;
    logits[613] = 7.5;
    let (lb, ob) = (upload(gpu, &logits), zeros(gpu, 1));
    let k = Argmax::new(gpu, vocab as u32, 1, &lb, &ob).unwrap();
    gpu.run_pass(|p| k.record(p, 1)).unwrap();
    assert_eq!(read_u32(gpu, &ob, 1), vec![613]);
}

#[test]
fn many_workgroups_agree_step_after_step() {
    // A vocabulary scanned by many workgroups; each run must find the new maximum (the last
    // workgroup resets the shared counter for the next step), wherever its slice is.
    let gpu = gpu();
    let vocab = 151_936;
    let logits = random(vocab, 4);
    let (lb, ob) = (upload(gpu, &logits), zeros(gpu, 1));
    let k = Argmax::new(gpu, vocab as u32, 1, &lb, &ob).unwrap();
    for (step, at) in [0usize, 151_935, 77_777, 2048, 2047].into_iter().enumerate() {
        let mut l = logits.clone();
        l[at] = 10.0 + step as f32;
        gpu.queue.write_buffer(&lb, 0, bytemuck::cast_slice(&l));
        gpu.run_pass(|p| k.record(p, 1)).unwrap();
        assert_eq!(read_u32(gpu, &ob, 1), vec![at as u32], "step {step}");
    }
}

#[test]
fn each_row_has_its_own_argmax_step_after_step() {
    // Five rows of a large vocabulary in one dispatch, twice (the per-row counters reset).
    let gpu = gpu();
    let (vocab, rows) = (40_000, 5);
    let mut logits = random(vocab * rows, 12);
    let (ob, lb) = (zeros(gpu, rows), upload(gpu, &logits));
    let k = Argmax::new(gpu, vocab as u32, rows as u32, &lb, &ob).unwrap();
    for step in 0..2 {
        let at: Vec<usize> = (0..rows).map(|r| (r * 7919 + step * 104_729) % vocab).collect();
        for (r, &i) in at.iter().enumerate() {
            logits[r * vocab + i] = 5.0 + r as f32;
        }
        gpu.queue.write_buffer(&lb, 0, bytemuck::cast_slice(&logits));
        gpu.run_pass(|p| k.record(p, rows as u32)).unwrap();
        let want: Vec<u32> =
            (0..rows).map(|r| wginfer::sampling::argmax(&logits[r * vocab..][..vocab]).unwrap()).collect();
        assert_eq!(read_u32(gpu, &ob, rows), want, "step {step}");
    }
}

/// Rows with NaN and infinite logits, each against the host's argmax: NaN and -inf are never
/// chosen, the first +inf is, and a row of nothing choosable answers an id past the vocabulary
/// where the host answers none. The kernel tells them apart by their bits (lib/logit_value),
/// since drivers need not keep NaN semantics in comparisons.
#[test]
fn nan_and_infinite_logits_are_chosen_as_on_the_host() {
    let gpu = gpu();
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let rows: [[f32; 7]; 4] = [
        [1.0, nan, inf, 0.5, inf, -2.0, 3.0],
        [nan, -inf, 2.0, nan, 5.0, -inf, 4.0],
        [-inf, nan, -3.1e38, -inf, nan, -inf, nan],
        [nan, 0.0, -inf, -5.0, nan, -1.0, nan],
    ];
    let vocab = rows[0].len();
    let logits: Vec<f32> = rows.iter().flatten().copied().collect();
    let (lb, ob) = (upload(gpu, &logits), zeros(gpu, rows.len()));
    let k = Argmax::new(gpu, vocab as u32, rows.len() as u32, &lb, &ob).unwrap();
    gpu.run_pass(|p| k.record(p, rows.len() as u32)).unwrap();
    let want: Vec<u32> = rows.iter().map(|r| wginfer::sampling::argmax(r).unwrap_or(u32::MAX)).collect();
    assert_eq!(want, [2, 4, u32::MAX, 1], "the host's rule");
    assert_eq!(read_u32(gpu, &ob, rows.len()), want);
}

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
    let k = Argmax::new(gpu, vocab as u32, &lb, &ob).unwrap();
    gpu.run_pass(|p| k.record(p)).unwrap();
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
    let k = Argmax::new(gpu, vocab as u32, &lb, &ob).unwrap();
    for (step, at) in [0usize, 151_935, 77_777, 2048, 2047].into_iter().enumerate() {
        let mut l = logits.clone();
        l[at] = 10.0 + step as f32;
        gpu.queue.write_buffer(&lb, 0, bytemuck::cast_slice(&l));
        gpu.run_pass(|p| k.record(p)).unwrap();
        assert_eq!(read_u32(gpu, &ob, 1), vec![at as u32], "step {step}");
    }
}

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

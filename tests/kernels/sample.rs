use super::common::*;
use wginfer::ops::sample::{Sample, SampleParams};
use wginfer::sampling::SamplingParams;

const LOGITS: [f32; 7] = [1.0, 3.0, 2.5, -1.0, 0.5, 2.9, 0.0];

/// Token counts of `n` draws (steps 0..n) with `p`.
fn histogram(p: SamplingParams, n: u32) -> [u32; 7] {
    let gpu = gpu();
    let (lb, ob) = (upload(gpu, &LOGITS), zeros(gpu, 1));
    let k = Sample::new(gpu, LOGITS.len() as u32, &lb, &ob).unwrap();
    let mut counts = [0; 7];
    for step in 0..n {
        k.set(gpu, &SampleParams::new(&p, step));
        gpu.run_pass(|pass| k.record(pass)).unwrap();
        counts[read_u32(gpu, &ob, 1)[0] as usize] += 1;
    }
    counts
}

/// softmax(LOGITS / t) restricted to `keep`.
fn probs(t: f32, keep: &[usize]) -> Vec<f64> {
    let e: Vec<f64> = (0..7).map(|i| if keep.contains(&i) { ((LOGITS[i] / t) as f64).exp() } else { 0.0 }).collect();
    let z: f64 = e.iter().sum();
    e.iter().map(|x| x / z).collect()
}

fn assert_matches(counts: [u32; 7], want: &[f64], n: u32) {
    for (i, (&c, &p)) in counts.iter().zip(want).enumerate() {
        let f = c as f64 / n as f64;
        // 5 sigma of a binomial proportion, plus a little.
        let tol = 5.0 * (p * (1.0 - p) / n as f64).sqrt() + 0.01;
        assert!((f - p).abs() <= tol, "token {i}: frequency {f:.3}, probability {p:.3} (counts {counts:?})");
    }
}

#[test]
fn temperature_draws_follow_softmax() {
    let n = 1500;
    let counts = histogram(SamplingParams { temperature: 1.3, seed: 5, ..Default::default() }, n);
    assert_matches(counts, &probs(1.3, &[0, 1, 2, 3, 4, 5, 6]), n);
}

#[test]
fn top_k_and_top_p_cut_the_tail() {
    let n = 600;
    let counts = histogram(SamplingParams { temperature: 1.0, top_k: 3, seed: 9, ..Default::default() }, n);
    assert_matches(counts, &probs(1.0, &[1, 2, 5]), n);
    // At T = 1, tokens 1 and 5 hold 0.36 + 0.32 of the mass: top_p 0.6 keeps exactly those.
    let counts = histogram(SamplingParams { temperature: 1.0, top_p: 0.6, seed: 9, ..Default::default() }, n);
    assert_matches(counts, &probs(1.0, &[1, 5]), n);
}

#[test]
fn same_seed_same_draws() {
    let p = SamplingParams { temperature: 2.0, seed: 42, ..Default::default() };
    assert_eq!(histogram(p.clone(), 50), histogram(p.clone(), 50));
    assert_ne!(histogram(p.clone(), 50), histogram(SamplingParams { seed: 43, ..p }, 50));
}

/// Tokens that survive top-k and top-p over `logits` at temperature `t` (CPU reference).
fn allowed(logits: &[f32], t: f32, top_k: usize, top_p: f32) -> Vec<usize> {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    let mx = logits[order[0]];
    let mass: Vec<f64> = order.iter().map(|&i| (((logits[i] - mx) / t) as f64).exp()).collect();
    let total: f64 = mass.iter().sum();
    let mut keep_p = 0;
    let mut acc = 0.0;
    while acc < top_p as f64 * total {
        acc += mass[keep_p];
        keep_p += 1;
    }
    let keep = if top_k > 0 { keep_p.min(top_k) } else { keep_p };
    order[..keep].to_vec()
}

#[test]
fn large_vocabularies_keep_exactly_the_allowed_tokens() {
    // 50,000 logits: top_k 40, top_k with top_p, and top_p alone take the compacted-candidates
    // path; top_k 3000 (more candidates than the kernel keeps on chip) the full-vocabulary one.
    let gpu = gpu();
    let vocab = 50_000;
    let logits: Vec<f32> = random(vocab, 21).iter().map(|v| v * 8.0).collect();
    let (lb, ob) = (upload(gpu, &logits), zeros(gpu, 1));
    let k = Sample::new(gpu, vocab as u32, &lb, &ob).unwrap();
    for (top_k, top_p) in [(40, 1.0), (40, 0.5), (3000, 1.0), (0, 0.3)] {
        let p = SamplingParams { temperature: 0.8, top_k, top_p, seed: 3, ..Default::default() };
        let keep = allowed(&logits, 0.8, top_k, top_p);
        let mut seen = std::collections::BTreeSet::new();
        for step in 0..100 {
            k.set(gpu, &SampleParams::new(&p, step));
            gpu.run_pass(|pass| k.record(pass)).unwrap();
            let id = read_u32(gpu, &ob, 1)[0] as usize;
            assert!(keep.contains(&id), "top_k {top_k} top_p {top_p}: drew {id}, outside the {} allowed", keep.len());
            seen.insert(id);
        }
        assert!(seen.len() > 1 || keep.len() == 1, "top_k {top_k} top_p {top_p}: always {seen:?}");
    }
}

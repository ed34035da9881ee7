//! The GPU sampler (`shaders/sample.wgsl`) and the CPU one (`wginfer::sampling`) against the
//! distributions transformers' logits warpers give (tests/fixtures/sampling.json, from
//! scripts/make_sampling_goldens.py): every draw inside the allowed set, and the frequencies of
//! a few thousand seeded draws by a chi-square test.

use super::common::*;
use wginfer::ops::sample::{Sample, SampleParams};
use wginfer::sampling::{Sampler, SamplingParams};

struct Case {
    name: String,
    logits: Vec<f32>,
    params: SamplingParams,
    /// transformers' probability of each token (0 outside the allowed set).
    probs: Vec<f64>,
}

fn cases() -> Vec<Case> {
    // Built into the binary, so the kernel tests run from the binary alone (on the H200).
    let v: serde_json::Value = serde_json::from_str(include_str!("../fixtures/sampling.json")).unwrap();
    let f32s = |v: &serde_json::Value| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect::<Vec<_>>();
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_string(),
            logits: f32s(&v["logits"][c["logits"].as_str().unwrap()]).iter().map(|&x| x as f32).collect(),
            params: SamplingParams {
                temperature: c["temperature"].as_f64().unwrap() as f32,
                top_k: c["top_k"].as_u64().unwrap() as usize,
                top_p: c["top_p"].as_f64().unwrap() as f32,
                seed: 11,
                ..Default::default()
            },
            probs: f32s(&c["probs"]),
        })
        .collect()
}

/// Draws for steps `0..n` on the GPU: many steps per pass, one row of logits each (every row
/// has its own parameters; here they differ only in the step).
fn gpu_draws(logits: &[f32], p: &SamplingParams, n: u32) -> Vec<u32> {
    let gpu = gpu();
    let per_pass = (n as usize).min((1 << 20) / logits.len()).max(1) as u32;
    let rows: Vec<f32> = (0..per_pass).flat_map(|_| logits.iter().copied()).collect();
    let (lb, ob) = (upload(gpu, &rows), zeros(gpu, per_pass as usize));
    let k = Sample::new(gpu, logits.len() as u32, per_pass, &lb, &ob).unwrap();
    let mut out = Vec::new();
    for first in (0..n).step_by(per_pass as usize) {
        let count = per_pass.min(n - first);
        let params: Vec<SampleParams> = (first..first + count).map(|step| SampleParams::new(p, step)).collect();
        k.set(gpu, &params);
        gpu.run_pass(|pass| k.record(pass, count)).unwrap();
        out.extend(read_u32(gpu, &ob, count as usize));
    }
    out
}

fn cpu_draws(logits: &[f32], p: &SamplingParams, n: u32) -> Vec<u32> {
    let mut s = Sampler::new(p.clone());
    (0..n).map(|_| s.sample(&mut logits.to_vec(), &[]).expect("finite logits")).collect()
}

/// Every draw has a nonzero probability, and the counts pass Pearson's chi-square test at a
/// significance of 1e-4 (tokens expected fewer than 5 times are pooled into one bin).
fn check_draws(label: &str, draws: &[u32], probs: &[f64]) {
    let n = draws.len() as f64;
    let mut counts = vec![0u32; probs.len()];
    for &d in draws {
        assert!(probs[d as usize] > 0.0, "{label}: drew token {d}, which transformers never keeps");
        counts[d as usize] += 1;
    }
    let (mut chi2, mut bins) = (0.0, 0);
    let (mut pooled_count, mut pooled_expected) = (0.0, 0.0);
    for (&c, &p) in counts.iter().zip(probs).filter(|(_, &p)| p > 0.0) {
        let expected = p * n;
        if expected < 5.0 {
            pooled_count += f64::from(c);
            pooled_expected += expected;
        } else {
            chi2 += (f64::from(c) - expected).powi(2) / expected;
            bins += 1;
        }
    }
    if pooled_expected > 0.0 {
        chi2 += (pooled_count - pooled_expected).powi(2) / pooled_expected;
        bins += 1;
    }
    let df = f64::from(bins - 1).max(1.0);
    // Wilson-Hilferty: the chi-square quantile from the normal one (z of 1 - 1e-4).
    let z = 3.719;
    let critical = df * (1.0 - 2.0 / (9.0 * df) + z * (2.0 / (9.0 * df)).sqrt()).powi(3);
    assert!(chi2 <= critical, "{label}: chi-square {chi2:.1} over {df} degrees of freedom (limit {critical:.1})");
}

/// Fewer draws over the large vocabulary: each costs ~100x more there (in CI, on lavapipe and
/// in a debug build), and its narrow cases still put hundreds of draws in each kept token.
fn draws_for(c: &Case) -> u32 {
    if c.logits.len() > 100 {
        800
    } else {
        4000
    }
}

#[test]
fn gpu_draws_follow_transformers() {
    for c in cases() {
        let draws = gpu_draws(&c.logits, &c.params, draws_for(&c));
        check_draws(&format!("GPU, {}", c.name), &draws, &c.probs);
    }
}

#[test]
fn cpu_draws_follow_transformers() {
    for c in cases() {
        let draws = cpu_draws(&c.logits, &c.params, draws_for(&c));
        check_draws(&format!("CPU, {}", c.name), &draws, &c.probs);
    }
}

#[test]
fn same_seed_same_draws() {
    let c = &cases()[1];
    let p = SamplingParams { seed: 42, ..c.params.clone() };
    assert_eq!(gpu_draws(&c.logits, &p, 50), gpu_draws(&c.logits, &p, 50));
    assert_ne!(gpu_draws(&c.logits, &p, 50), gpu_draws(&c.logits, &SamplingParams { seed: 43, ..p }, 50));
}

/// A pass over rows with different logits and parameters draws for each row what that row
/// draws alone.
#[test]
fn each_row_keeps_its_own_parameters() {
    let gpu = gpu();
    let all = cases();
    let small: Vec<&Case> = all.iter().filter(|c| c.logits.len() == 7).collect();
    let rows: Vec<f32> = small.iter().flat_map(|c| c.logits.iter().copied()).collect();
    let params: Vec<SampleParams> =
        small.iter().enumerate().map(|(i, c)| SampleParams::new(&c.params, i as u32)).collect();
    let (lb, ob) = (upload(gpu, &rows), zeros(gpu, small.len()));
    let k = Sample::new(gpu, 7, small.len() as u32, &lb, &ob).unwrap();
    k.set(gpu, &params);
    gpu.run_pass(|pass| k.record(pass, small.len() as u32)).unwrap();
    let together = read_u32(gpu, &ob, small.len());
    for (i, c) in small.iter().enumerate() {
        let alone = gpu_draws(&c.logits, &c.params, i as u32 + 1)[i];
        assert_eq!(together[i], alone, "{}: row {i}", c.name);
    }
}

/// A row with an infinite logit takes its first one, greedy or drawn and whatever the cut-offs,
/// on the GPU as the host sampler does; NaN and -inf logits are never chosen. Before, the
/// kernel's differences from the largest logit were inf - inf, and it answered no token.
#[test]
fn nan_and_infinite_logits_take_the_draw_as_on_the_host() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let params = [
        SamplingParams::default(),
        SamplingParams { temperature: 0.8, seed: 3, ..Default::default() },
        SamplingParams { temperature: 1.5, top_k: 3, top_p: 0.9, seed: 4, ..Default::default() },
    ];
    let infinite = [1.0, nan, inf, 0.5, inf, -2.0, 3.0];
    let finite = [nan, 2.0, -inf, 1.5, nan, 1.0, -inf];
    for p in &params {
        assert_eq!(cpu_draws(&infinite, p, 20), vec![2; 20], "CPU, {p:?}");
        assert_eq!(gpu_draws(&infinite, p, 20), vec![2; 20], "GPU, {p:?}");
        for (side, draws) in [("CPU", cpu_draws(&finite, p, 200)), ("GPU", gpu_draws(&finite, p, 200))] {
            assert!(draws.iter().all(|d| [1, 3, 5].contains(d)), "{side}, {p:?}: {draws:?}");
        }
    }
}

//! Choosing the next token: greedy (argmax on the GPU) or sampled with temperature, top-k,
//! top-p and repetition penalty from a seeded generator (same seed, same output). The cut-offs
//! apply in transformers' order, as on the GPU (`shaders/sample.wgsl`).

/// Sampling settings; temperature 0 means greedy.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    pub temperature: f32,
    /// 0 = no limit.
    pub top_k: usize,
    /// 1.0 = no limit.
    pub top_p: f32,
    /// 1.0 = none; > 1 makes already seen tokens less likely (CTRL-style, as transformers).
    pub repetition_penalty: f32,
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams { temperature: 0.0, top_k: 0, top_p: 1.0, repetition_penalty: 1.0, seed: 0 }
    }
}

impl SamplingParams {
    /// Whether tokens are drawn at all. A temperature below f32's smallest normal value (0, or
    /// a subnormal whose inverse overflows to infinity) picks the most likely token, the limit
    /// the distribution reaches as the temperature falls.
    pub fn draws(&self) -> bool {
        self.temperature >= f32::MIN_POSITIVE
    }

    /// Whether the GPU's argmax is the answer (no logits need to come back).
    pub fn is_greedy(&self) -> bool {
        !self.draws() && self.repetition_penalty == 1.0
    }

    /// The first setting out of its range.
    pub fn check(&self) -> Result<(), String> {
        check_temperature(self.temperature)?;
        check_top_p(self.top_p)?;
        check_repetition_penalty(self.repetition_penalty)?;
        Ok(())
    }
}

/// Each setting's range, checked where it enters (command-line options, batch lines, the
/// server), with a message saying what it must be.
pub fn check_temperature(t: f32) -> Result<f32, String> {
    match t.is_finite() && t >= 0.0 {
        true => Ok(t),
        false => Err(format!("temperature must be 0 (greedy) or positive, got {t}")),
    }
}

pub fn check_top_p(p: f32) -> Result<f32, String> {
    match p > 0.0 && p <= 1.0 {
        true => Ok(p),
        false => Err(format!("top_p must be in (0, 1], got {p}")),
    }
}

pub fn check_repetition_penalty(r: f32) -> Result<f32, String> {
    match r.is_finite() && r > 0.0 {
        true => Ok(r),
        false => Err(format!("repetition_penalty must be positive, got {r}")),
    }
}

pub struct Sampler {
    params: SamplingParams,
    state: u64,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Sampler {
        let state = params.seed ^ 0x9E37_79B9_7F4A_7C15;
        Sampler { params, state }
    }

    /// splitmix64, as a uniform f64 in [0, 1).
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Picks a token from `logits` (modified in place by the penalty); `seen` are the ids of the
    /// prompt and the output so far. None where no logit can be chosen (`argmax`'s rule: NaN
    /// everywhere, say): the model's values left f32's range.
    pub fn sample(&mut self, logits: &mut [f32], seen: &[u32]) -> Option<u32> {
        let p = self.params.clone();
        if p.repetition_penalty != 1.0 {
            // Once per distinct id, however often it was seen (transformers' rule).
            let mut distinct = seen.to_vec();
            distinct.sort_unstable();
            distinct.dedup();
            for id in distinct {
                // Choosable logits stay finite and choosable (above LOWEST_LOGIT), so that an
                // extreme penalty neither makes the softmax NaN nor leaves no token to choose.
                if let Some(l) = logits.get_mut(id as usize).filter(|l| l.is_finite() && **l > LOWEST_LOGIT) {
                    let penalized = if *l > 0.0 { *l / p.repetition_penalty } else { *l * p.repetition_penalty };
                    *l = penalized.clamp(LOWEST_LOGIT.next_up(), f32::MAX);
                }
            }
        }
        if !p.draws() {
            return argmax(logits);
        }
        // Sorted by logit, the order of logit / temperature; the temperature divides the
        // differences from the largest (below), which cannot overflow as the logits can.
        let mut cand: Vec<(u32, f32)> =
            logits.iter().enumerate().filter(|(_, &l)| l > LOWEST_LOGIT).map(|(i, &l)| (i as u32, l)).collect();
        cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        // An infinite logit takes all the probability (the first of them, as argmax).
        if cand.first()?.1 == f32::INFINITY {
            return Some(cand[0].0);
        }
        // transformers' order: top-k (every token at least as large as the k-th), then top-p
        // over the renormalized survivors.
        if p.top_k > 0 && p.top_k < cand.len() {
            let kth = cand[p.top_k - 1].1;
            let keep = cand.iter().position(|c| c.1 < kth).unwrap_or(cand.len());
            cand.truncate(keep);
        }
        let (mx, t) = (f64::from(cand[0].1), f64::from(p.temperature));
        let mut probs: Vec<f64> = cand.iter().map(|c| ((f64::from(c.1) - mx) / t).exp()).collect();
        let total: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|q| *q /= total);
        if p.top_p < 1.0 {
            let mut acc = 0.0;
            let keep = probs.iter().position(|q| {
                acc += q;
                acc >= p.top_p as f64
            });
            let keep = keep.map_or(probs.len(), |i| i + 1);
            probs.truncate(keep);
            cand.truncate(keep);
        }
        let total: f64 = probs.iter().sum();
        let mut r = self.uniform() * total;
        for (c, q) in cand.iter().zip(&probs) {
            if r < *q {
                return Some(c.0);
            }
            r -= q;
        }
        cand.last().map(|c| c.0)
    }
}

/// Logits at or below this, and NaN, are never chosen (as in shaders/argmax.wgsl and
/// shaders/sample.wgsl, whose answer is then an id past the vocabulary).
pub const LOWEST_LOGIT: f32 = -3.0e38;

/// Index of the largest value, lowest index on ties (as the GPU kernel); None where no value
/// is above LOWEST_LOGIT (NaN everywhere, say).
pub fn argmax(v: &[f32]) -> Option<u32> {
    let mut best = None;
    let mut top = LOWEST_LOGIT;
    for (i, &x) in v.iter().enumerate() {
        if x > top {
            (best, top) = (Some(i as u32), x);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits() -> Vec<f32> {
        vec![1.0, 3.0, 2.5, -1.0, 0.5, 2.9]
    }

    #[test]
    fn greedy_takes_argmax() {
        assert_eq!(Sampler::new(SamplingParams::default()).sample(&mut logits(), &[]), Some(1));
    }

    #[test]
    fn same_seed_same_draws_other_seed_differs() {
        let params = SamplingParams { temperature: 1.5, seed: 7, ..Default::default() };
        let draw = |p: SamplingParams| {
            let mut s = Sampler::new(p);
            (0..64).map(|_| s.sample(&mut logits(), &[])).collect::<Vec<_>>()
        };
        assert_eq!(draw(params.clone()), draw(params.clone()));
        assert_ne!(draw(params.clone()), draw(SamplingParams { seed: 8, ..params }));
    }

    #[test]
    fn top_k_and_top_p_limit_the_candidates() {
        let mut s = Sampler::new(SamplingParams { temperature: 5.0, top_k: 2, seed: 1, ..Default::default() });
        assert!((0..200).all(|_| matches!(s.sample(&mut logits(), &[]), Some(1 | 5))));
        // With a sharp distribution, top_p 0.5 keeps only the top token.
        let mut s = Sampler::new(SamplingParams { temperature: 0.1, top_p: 0.5, seed: 1, ..Default::default() });
        assert!((0..50).all(|_| s.sample(&mut logits(), &[]) == Some(1)));
    }

    #[test]
    fn temperatures_near_zero_and_extreme_penalties_take_the_most_likely_token() {
        // A subnormal temperature (its inverse overflows), a tiny normal one (logits over it
        // overflow), and penalties whose quotients and products overflow: never NaN weights,
        // which would draw the least likely token.
        for temperature in [1e-40, 1e-37, 1e-20] {
            let mut s = Sampler::new(SamplingParams { temperature, seed: 3, ..Default::default() });
            assert!((0..20).all(|_| s.sample(&mut logits(), &[]) == Some(1)), "temperature {temperature}");
        }
        let mut s = Sampler::new(SamplingParams { temperature: 1.0, repetition_penalty: 1e-40, ..Default::default() });
        assert!((0..20).all(|_| s.sample(&mut logits(), &[2, 3]) == Some(2)));
        let mut s = Sampler::new(SamplingParams { temperature: 1e-30, repetition_penalty: 1e38, ..Default::default() });
        assert!((0..20).all(|_| s.sample(&mut logits(), &[1, 3]) == Some(5)));
        assert!(SamplingParams { temperature: 1e-40, ..Default::default() }.is_greedy());
        // Every token seen, their negative logits pushed past LOWEST_LOGIT: still choosable
        // (tied at the floor: the lowest id), not "no token".
        let mut s = Sampler::new(SamplingParams { repetition_penalty: 3e38, ..Default::default() });
        assert_eq!(s.sample(&mut [-1.0, -2.0], &[0, 1]), Some(0));
    }

    #[test]
    fn repetition_penalty_demotes_seen_tokens() {
        let mut s = Sampler::new(SamplingParams { repetition_penalty: 2.0, ..Default::default() });
        // 3.0 / 2 = 1.5 < 2.9: token 5 wins once 1 has been seen.
        assert_eq!(s.sample(&mut logits(), &[1]), Some(5));
    }

    /// NaN logits are never chosen, greedy or drawn; none left to choose is None (where the
    /// GPU kernels answer an id past the vocabulary), and an infinite one takes every draw.
    #[test]
    fn logits_that_are_not_numbers_are_never_chosen() {
        let (nan, inf) = (f32::NAN, f32::INFINITY);
        let greedy = || Sampler::new(SamplingParams::default());
        let drawn = || Sampler::new(SamplingParams { temperature: 1.0, top_p: 0.9, seed: 5, ..Default::default() });
        assert_eq!(greedy().sample(&mut [nan, 1.0, nan, 2.0], &[]), Some(3));
        assert!((0..50).all(|_| matches!(drawn().sample(&mut [nan, 1.0, nan, 1.1], &[]), Some(1 | 3))));
        for mut none in [vec![nan; 4], vec![f32::NEG_INFINITY; 3]] {
            assert_eq!(greedy().sample(&mut none, &[]), None);
            assert_eq!(drawn().sample(&mut none, &[]), None);
        }
        assert_eq!(drawn().sample(&mut [1.0, inf, nan, inf], &[]), Some(1));
        assert_eq!(argmax(&[nan, -1.0, -1.0]), Some(1));
    }
}

// Logits as the comparisons of the argmax and the sampler can rely on, on any driver. A driver
// need not keep NaN and infinity semantics in comparisons (SPIR-V without
// SignedZeroInfNanPreserve, which WGSL allows): on the H100 a greedy row with a NaN logit took
// the NaN. So they are told apart by their bits, before any comparison: NaN and -inf read as
// -F32_MAX (below LOWEST_LOGIT: never chosen, as on the host), +inf as
// F32_MAX (the largest there is: the first of them is chosen, as on the host).
// Constants: LOWEST_LOGIT (crate::sampling's: logits at or below it are never chosen).
const F32_MAX: f32 = 3.4028234e38; // rounds to f32's largest finite value

fn logit_value(l: f32) -> f32 {
    let bits = bitcast<u32>(l);
    if ((bits & 0x7fffffffu) >= 0x7f800000u) {
        return select(-F32_MAX, F32_MAX, bits == 0x7f800000u);
    }
    return l;
}

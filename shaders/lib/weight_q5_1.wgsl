// Weight storage: ggml Q5_1 blocks of 32 values, 6 words each: [d | m] (f16s), qh (bit j = fifth
// bit of value j), then 16 bytes of low nibbles as Q4_0. value = d * q + m (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    return unpack2x16float(w[(e / 32u) * 6u]);
}

fn w_quants(e: u32) -> vec4<f32> {
    let b = (e / 32u) * 6u;
    let j = e % 32u;
    let qh = w[b + 1u] >> j;
    let q = w[b + 2u + (j % 16u) / 4u] >> select(0u, 4u, j >= 16u);
    let lo = vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(15u);
    let hi = (vec4<u32>(qh, qh >> 1u, qh >> 2u, qh >> 3u) & vec4<u32>(1u)) << vec4<u32>(4u);
    return vec4<f32>(lo | hi);
}

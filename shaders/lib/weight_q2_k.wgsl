// Weight storage: ggml Q2_K super-blocks of 256 values, 21 words each: 16 bytes of scales (sub-
// block s of 16: low nibble scale, high nibble min), qs (64 bytes, 2-bit values as Q3_K's),
// [d | dmin] (f16s). value = d * scale * q - dmin * min (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    let b = (e / 256u) * 21u;
    let s = (e % 256u) / 16u;
    let sc = w[b + s / 4u] >> (8u * (s % 4u));
    let dm = unpack2x16float(w[b + 20u]);
    return vec2<f32>(dm.x * f32(sc & 15u), -(dm.y * f32((sc >> 4u) & 15u)));
}

fn w_quants(e: u32) -> vec4<f32> {
    let b = (e / 256u) * 21u;
    let j = e % 256u;
    let q = (w[b + 4u + (j / 128u) * 8u + (j % 32u) / 4u] >> (2u * ((j % 128u) / 32u))) & 0x03030303u;
    return vec4<f32>(vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(255u));
}

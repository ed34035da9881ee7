// Weight storage: ggml Q4_K super-blocks of 256 values, 36 words each: [d | dmin] (f16s),
// 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32 (lib/weight_k4_scales), then 128
// bytes: chunk c (32 bytes) holds sub-block 2c in its low nibbles and 2c + 1 in its high nibbles.
// value = d * scale * q - dmin * min (lib/weight_affine: an 8-value load reads the scale words
// once).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    let b = (e / 256u) * 36u;
    let dm = unpack2x16float(w[b]);
    let sm = k4_scale_min(b, (e % 256u) / 32u);
    return vec2<f32>(dm.x * sm.x, -(dm.y * sm.y));
}

fn w_quants(e: u32) -> vec4<f32> {
    let b = (e / 256u) * 36u;
    let j = e % 256u;
    let l = j % 64u;
    return nibbles4(w[b + 4u + (j / 64u) * 8u + (l % 32u) / 4u], select(0u, 4u, l >= 32u));
}

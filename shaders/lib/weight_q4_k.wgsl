// Weight storage: ggml Q4_K super-blocks of 256 values, 36 words each: [d | dmin] (f16s),
// 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32 (lib/weight_k4_scales), then 128
// bytes: chunk c (32 bytes) holds sub-block 2c in its low nibbles and 2c + 1 in its high nibbles.
// value = d * scale * q - dmin * min.
alias WElem = u32;

fn w_load4(e: u32) -> vec4<f32> {
    let b = (e / 256u) * 36u;
    let dm = unpack2x16float(w[b]);
    let j = e % 256u;
    let c = j / 64u;
    let l = j % 64u;
    let sm = k4_scale_min(b, j / 32u);
    let q = w[b + 4u + c * 8u + (l % 32u) / 4u] >> select(0u, 4u, l >= 32u);
    let v = vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(15u);
    return dm.x * sm.x * vec4<f32>(v) - dm.y * sm.y;
}

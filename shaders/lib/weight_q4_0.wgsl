// Weight storage: ggml Q4_0 blocks of 32 values, 18 bytes as stored (lib/weight_bytes): d (f16),
// then 16 bytes; byte j holds value j (low nibble) and value j + 16 (high nibble).
// value = d * (q - 8) (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    let d = w_f16_at((e / 32u) * 18u);
    return vec2<f32>(d, -8.0 * d);
}

fn w_quants(e: u32) -> vec4<f32> {
    let j = e % 32u;
    return nibbles4(w_word_at((e / 32u) * 18u + 2u + j % 16u), select(0u, 4u, j >= 16u));
}

// The block at e (e % 32 == 0) for lib/linear_gemv_rows: the five words it spans read once
// (lib/weight_bytes' block_scale and block_word take them apart).
fn w_block32(e: u32) -> W32 {
    let byte = (e / 32u) * 18u;
    let i = byte / 4u;
    let w0 = w[i];
    let w1 = w[i + 1u];
    let w2 = w[i + 2u];
    let w3 = w[i + 3u];
    let w4 = w[i + 4u];
    let odd = (byte & 2u) != 0u;
    let d = block_scale(w0, odd);
    let q0 = block_word(w0, w1, odd);
    let q1 = block_word(w1, w2, odd);
    let q2 = block_word(w2, w3, odd);
    let q3 = block_word(w3, w4, odd);
    return nibbles_block(q0, q1, q2, q3, d, -8.0 * d);
}

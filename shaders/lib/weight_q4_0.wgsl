// Weight storage: ggml Q4_0 blocks of 32 values, 5 words each: [d (f16) | pad] then 16 bytes;
// byte j holds value j (low nibble) and value j + 16 (high nibble). value = d * (q - 8).
alias WElem = u32;

fn w_load4(e: u32) -> vec4<f32> {
    let b = (e / 32u) * 5u;
    let d = unpack2x16float(w[b]).x;
    let j = e % 32u;
    let q = w[b + 1u + (j % 16u) / 4u] >> select(0u, 4u, j >= 16u);
    let v = vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(15u);
    return d * (vec4<f32>(v) - 8.0);
}

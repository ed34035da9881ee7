// Weight storage: ggml Q4_1 blocks of 32 values, 5 words each: [d | m] (f16s) then 16 bytes
// (nibbles as Q4_0). value = d * q + m.
alias WElem = u32;

fn w_load4(e: u32) -> vec4<f32> {
    let b = (e / 32u) * 5u;
    let dm = unpack2x16float(w[b]);
    let j = e % 32u;
    return dm.x * nibbles4(w[b + 1u + (j % 16u) / 4u], select(0u, 4u, j >= 16u)) + dm.y;
}

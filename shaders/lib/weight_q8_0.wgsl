// Weight storage: ggml Q8_0 blocks of 32 values, 9 words each: [d (f16) | pad] then 32 int8.
// value = d * q.
alias WElem = u32;

fn w_load4(e: u32) -> vec4<f32> {
    let b = (e / 32u) * 9u;
    let d = unpack2x16float(w[b]).x;
    let q = w[b + 1u + (e % 32u) / 4u];
    let v = vec4<i32>(i32(q << 24u) >> 24u, i32(q << 16u) >> 24u, i32(q << 8u) >> 24u, i32(q) >> 24u);
    return d * vec4<f32>(v);
}

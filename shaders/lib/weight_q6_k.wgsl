// Weight storage: ggml Q6_K super-blocks of 256 values, 53 words each: ql (128 bytes, low 4
// bits), qh (64 bytes, high 2 bits), 16 int8 scales, [d (f16) | pad]. Each half of 128 values
// has four quarters of 32: quarter qd takes ql bytes +32*(qd&1) (high nibble if qd >= 2),
// qh bits 2*qd, and scale 2*qd (+1 for the second 16). value = d * scale * (q - 32).
alias WElem = u32;

fn w_load4(e: u32) -> vec4<f32> {
    let b = (e / 256u) * 53u;
    let j = e % 256u;
    let n = j / 128u;
    let qd = (j % 128u) / 32u;
    let l = j % 32u;
    let lo = w[b + (n * 64u + (qd & 1u) * 32u + l) / 4u] >> select(0u, 4u, qd >= 2u);
    let hi = w[b + 32u + (n * 32u + l) / 4u] >> (2u * qd);
    let q = (vec4<u32>(lo, lo >> 8u, lo >> 16u, lo >> 24u) & vec4<u32>(15u))
        | ((vec4<u32>(hi, hi >> 8u, hi >> 16u, hi >> 24u) & vec4<u32>(3u)) << vec4<u32>(4u));
    let s = n * 8u + l / 16u + 2u * qd;
    let scale = f32(i32(w[b + 48u + s / 4u] << (24u - 8u * (s % 4u))) >> 24u);
    let d = unpack2x16float(w[b + 52u]).x;
    return d * scale * (vec4<f32>(q) - 32.0);
}

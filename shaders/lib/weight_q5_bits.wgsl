// Q5_0 / Q5_1 quants: values j .. j + 3 of a block (j % 4 == 0) from its qh word (bit j = the
// fifth bit of value j) and the word of low nibbles holding them (Q4_0's order: byte i holds
// value i low and value i + 16 high).
fn q5_quants(qh: u32, nibbles: u32, j: u32) -> vec4<f32> {
    let h = qh >> j;
    let q = nibbles >> select(0u, 4u, j >= 16u);
    let lo = vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(15u);
    let hi = (vec4<u32>(h, h >> 1u, h >> 2u, h >> 3u) & vec4<u32>(1u)) << vec4<u32>(4u);
    return vec4<f32>(lo | hi);
}

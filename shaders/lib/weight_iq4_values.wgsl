// The IQ4 types' 16 non-linear values (ggml's kvalues_iq4nl: -127, -104, -83, -65, -49, -35,
// -22, -10, 1, 13, 25, 38, 53, 69, 89, 113) as int8, four per word.
const IQ4_VALUES = vec4<u32>(0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u);

fn iq4_value(table: vec4<u32>, n: u32) -> f32 {
    return f32(i32(table[n / 4u] << (24u - 8u * (n % 4u))) >> 24u);
}

// The values of the four nibbles at bits 0, 8, 16 and 24 of q.
fn iq4_values(q: u32) -> vec4<f32> {
    let table = IQ4_VALUES;  // a let: indexed at run time
    let n = vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(15u);
    return vec4<f32>(iq4_value(table, n.x), iq4_value(table, n.y), iq4_value(table, n.z), iq4_value(table, n.w));
}

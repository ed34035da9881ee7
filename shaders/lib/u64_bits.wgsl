// The halves of a u64 as u32s, and a vec2<u64> as the vec4<f32> whose bits it holds: how the
// pieces that read storage as u64s on CPU adapters (lib/words64, lib/linear_gemv_rows,
// lib/kv_u64) take their loads apart.
fn lo32(v: u64) -> u32 {
    return u32(v & 0xfffffffflu);
}

fn hi32(v: u64) -> u32 {
    return u32(v >> 32u);
}

fn f32x4_of(u: vec2<u64>) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(lo32(u.x), hi32(u.x), lo32(u.y), hi32(u.y)));
}

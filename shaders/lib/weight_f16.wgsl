// Weight storage: f16 packed two per u32. unpack2x16float is core WGSL, so this path needs no
// SHADER_F16 and runs on every adapter.
alias WElem = vec2<u32>;

// Four consecutive weight elements starting at element e (e % 4 == 0).
fn w_load4(e: u32) -> vec4<f32> {
    let p = w[e >> 2u];
    return vec4<f32>(unpack2x16float(p.x), unpack2x16float(p.y));
}

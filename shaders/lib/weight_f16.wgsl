// Weight storage: f16, eight per vec4<u32> (rows are whole multiples of 8 values, so a row
// starts on a 16-byte boundary). unpack2x16float is core WGSL, so this path needs no
// SHADER_F16 and runs on every adapter.
alias WElem = vec4<u32>;

// Four consecutive weight elements starting at element e (e % 4 == 0).
fn w_load4(e: u32) -> vec4<f32> {
    let p = w[e >> 3u];
    let h = select(p.xy, p.zw, (e & 4u) != 0u);
    return vec4<f32>(unpack2x16float(h.x), unpack2x16float(h.y));
}

// Eight consecutive weight elements starting at element e (e % 8 == 0): one 16-byte load.
fn w_load8(e: u32) -> W8 {
    let p = w[e >> 3u];
    return W8(
        vec4<f32>(unpack2x16float(p.x), unpack2x16float(p.y)),
        vec4<f32>(unpack2x16float(p.z), unpack2x16float(p.w)),
    );
}

// Weight storage: plain f32, four elements per array entry.
alias WElem = vec4<f32>;

// Four consecutive weight elements starting at element e (e % 4 == 0).
fn w_load4(e: u32) -> vec4<f32> {
    return w[e >> 2u];
}

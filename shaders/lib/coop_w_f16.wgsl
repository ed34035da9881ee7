// W's values for lib/linear_coop from f16 weights: eight as stored (two 8-byte loads the
// driver may join).
alias WElem = vec4<f16>;

fn w_vals(e: u32) -> H8 {
    return H8(w[e / 4u], w[e / 4u + 1u]);
}

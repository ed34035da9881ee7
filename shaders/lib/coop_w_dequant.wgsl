// W's values for lib/linear_coop from any weight type (lib/weight_*'s w_load8): eight values
// dequantized and rounded to f16, once per workgroup and stage.
fn w_vals(e: u32) -> H8 {
    let v = w_load8(e);
    return H8(vec4<f16>(v.lo), vec4<f16>(v.hi));
}

enable f16;
// The kernel's output rows as f16 as well (binding 7), for the tensor-core linear kernel that
// reads them next (ops/linear.rs `F16Rows`) instead of an input_f16 pass over them: one
// dispatch less a projection on steps past the GEMV cores (the o projection after attention,
// the down projection after SwiGLU). Values saturate at f16's +-65504 as shaders/input_f16
// stores them, so the tensor cores see the same bits either way. A variant that serves only
// steps of GEMV rows (F16_COPY false) declares the binding and stores nothing: the next
// projection of such a step runs a GEMV core, which reads f32.
@group(0) @binding(7) var<storage, read_write> out_f16: array<f16>;

fn store_f16(i: u32, v: f32) {
    if (F16_COPY) {
        out_f16[i] = f16(clamp(v, -65504.0, 65504.0));
    }
}

// The vec4 at index i4 of the output (its values 4 i4 .. 4 i4 + 3).
fn store_f16x4(i4: u32, v: vec4<f32>) {
    if (F16_COPY) {
        let h = vec4<f16>(clamp(v, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
        out_f16[4u * i4] = h.x;
        out_f16[4u * i4 + 1u] = h.y;
        out_f16[4u * i4 + 2u] = h.z;
        out_f16[4u * i4 + 3u] = h.w;
    }
}

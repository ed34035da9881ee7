// How the tiled prefill core reads its input rows: as they are.
fn prepare_input(lid: u32, m0: u32, count: u32) {}

fn load_x4(r: u32, m: u32, k: u32) -> vec4<f32> {
    return x[(m * K + k) / 4u];
}

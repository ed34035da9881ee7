// No f16 copy of the kernel's output (lib/out_f16 where the next kernel does not read one).
fn store_f16(i: u32, v: f32) {}

fn store_f16x4(i4: u32, v: vec4<f32>) {}

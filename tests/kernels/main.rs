//! Each kernel against a CPU reference, on shapes that are not multiples of the tile sizes.
//! One test binary (linking wgpu once); one module per kernel, named like the kernel.

mod argmax;
mod attention;
mod common;
mod dequant_f16;
mod embedding;
mod input_f16;
mod matmul;
mod probe_launch;
mod probe_phases;
mod probe_read;
mod qk_norm;
mod qkv_rope;
mod rmsnorm;
mod sample;
mod swiglu;

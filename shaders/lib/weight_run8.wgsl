// A one-row GEMV lane's run of weight values (lib/linear_gemv) for f32 and f16: the run is its
// first element's index, and each eight values one w_load8 from the weight piece, issued after
// the lane's x values (loading them first made Llama 3.2 1B's f16 decode 1.5% slower on an
// H100; block types load first, lib/weight_run8_ahead; docs/PERF.md).
const W_RUN: u32 = 8u;
alias WRun = u32;

fn w_run(e: u32) -> WRun {
    return e;
}

// Values 8p .. 8p + 7 of the run at e.
fn w_run8(e: WRun, p: u32) -> W8 {
    return w_load8(e + 8u * p);
}

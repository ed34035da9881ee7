// A one-row GEMV lane's run of weight values (lib/linear_gemv) for block types read eight at a
// time: one w_load8 from the weight piece, issued with the run, before the lane's x values.
// Their eight values take several word loads and a scale's decoding, which then overlap the
// x loads: Llama 3.2 1B's Q4_K decode 845 against 877 tok/s with lib/weight_run8's order on an
// H100 (docs/PERF.md); f16's one 16-byte load keeps that order.
const W_RUN: u32 = 8u;
alias WRun = W8;

fn w_run(e: u32) -> WRun {
    return w_load8(e);
}

// Values 8p .. 8p + 7 of the run: the run itself (p is 0).
fn w_run8(r: WRun, p: u32) -> W8 {
    return r;
}

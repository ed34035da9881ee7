//! The `wginfer` command line. Native only: built for wasm32 (cargo builds every binary of the
//! package for the browser tests) it does nothing.

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    if let Err(e) = wginfer::cli::run() {
        // One line, the whole chain of causes: "loading X: missing tensor Y".
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

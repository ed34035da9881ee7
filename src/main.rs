//! The `wginfer` command line.

fn main() {
    if let Err(e) = wginfer::cli::run() {
        // One line, the whole chain of causes: "loading X: missing tensor Y".
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

//! The egui desktop console (issue 4). Until it lands, this binary only says so.
fn main() {
    eprintln!("wginfer-console: the desktop console is not built yet; use `wginfer chat`");
    std::process::exit(2);
}

//! The console in a real window under Xvfb (where `xvfb-run` exists): it answers a prompt from
//! the command line and leaves a PNG of its last frame.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn headless_run_leaves_a_screenshot() {
    if Command::new("xvfb-run").arg("--help").output().is_err() {
        eprintln!("xvfb-run is not installed; skipped (make test installs it)");
        return;
    }
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/qwen2-f32");
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("console.png");
    let out = Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 1400x900x24", env!("CARGO_BIN_EXE_wginfer-console")])
        .args(["--model", model.to_str().unwrap(), "--prompt", "Hello", "--background", "2"])
        .args(["--screenshot", png.to_str().unwrap(), "--exit-after-frames", "120"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let img = image::open(&png).expect("a PNG").to_rgba8();
    assert!(img.width() >= 800 && img.height() >= 600, "{}x{}", img.width(), img.height());
    // Not a blank frame: many distinct colours.
    let colours: std::collections::HashSet<[u8; 4]> = img.pixels().map(|p| p.0).collect();
    assert!(colours.len() > 20, "{} colours", colours.len());
}

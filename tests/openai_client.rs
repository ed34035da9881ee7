//! `wginfer serve` as the official `openai` Python package sees it: tests/openai_client.py
//! (what it checks is described there) runs in the venv `make test` makes
//! (scripts/openai-venv.sh) against this build's binary and a tiny fixture.

mod support;

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_openai_python_package_gets_openai_answers() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("target/openai-venv/bin/python");
    if !python.exists() {
        // CI runs `make test`, which makes the venv: there its absence is a failure.
        let ci = std::env::var("CI").unwrap_or_default();
        assert!(ci.is_empty() || ci == "false", "CI={ci}: no {} (scripts/openai-venv.sh)", python.display());
        eprintln!("no {}; skipped (scripts/openai-venv.sh makes it)", python.display());
        return;
    }
    let out = Command::new(&python)
        .arg(root.join("tests/openai_client.py"))
        .arg(env!("CARGO_BIN_EXE_wginfer"))
        .arg(support::fixture("qwen2-f32"))
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{stdout}");
    assert!(out.status.success(), "{}:\n{stdout}\n{stderr}", out.status);
}

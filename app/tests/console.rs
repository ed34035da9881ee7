//! The console driven headless with egui_kittest, against the real engine thread and a tiny
//! fixture model: sending, stopping, a bad model path, and the engine panels' data.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use eframe::egui;
use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use wginfer::engine::Finish;
use wginfer::gpu::profiler::by_layer;
use wginfer_console::{ConsoleApp, Options};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(name)
}

fn harness<'a>() -> Harness<'a, ConsoleApp> {
    let opts = Options { model: Some(fixture("qwen2-f32")), ..Default::default() };
    let app = ConsoleApp::new(&egui::Context::default(), opts);
    let mut h = Harness::builder()
        .with_size(egui::vec2(1400.0, 900.0))
        .build_ui_state(|ui, app: &mut ConsoleApp| app.ui(ui), app);
    // The fixture has random weights: its text is partly undecodable bytes (U+FFFD), which
    // egui's default font lacks; draw boxes for them as the real app does.
    h.ctx.set_missing_glyph_policy(egui::MissingGlyphPolicy::Tofu);
    wait_until(&mut h, "the model loads", |a| a.model.is_some());
    h
}

/// Steps frames until `cond` holds (the engine works on its own thread meanwhile).
fn wait_until(h: &mut Harness<ConsoleApp>, what: &str, cond: impl Fn(&ConsoleApp) -> bool) {
    let start = Instant::now();
    while !cond(h.state()) {
        assert!(start.elapsed() < Duration::from_secs(180), "timed out waiting until {what}");
        h.step();
        std::thread::sleep(Duration::from_millis(10));
    }
    h.step();
}

fn send(h: &mut Harness<ConsoleApp>, text: &str) {
    h.state_mut().input = text.into();
    h.step();
    h.get_by_label("Send").click();
    h.step();
}

#[test]
fn sending_a_message_streams_an_answer_and_feeds_the_panels() {
    let mut h = harness();
    h.state_mut().sampling.temperature = 0.0;
    send(&mut h, "Hello there");
    wait_until(&mut h, "the answer finishes", |a| a.active.is_none() && !a.finished.is_empty());
    let app = h.state();
    assert_eq!(app.messages.len(), 2);
    assert_eq!(app.messages[0].text, "Hello there");
    assert!(app.finished[0].1.tokens > 0);
    if app.metrics.timestamps {
        let (layers, _) = by_layer(&app.timings);
        assert_eq!(layers.len(), 2, "one bar per layer");
        assert!(layers.iter().all(|l| l.attention_ns > 0.0 && l.mlp_ns > 0.0));
    }
    assert!(!app.queue_history.is_empty() && app.metrics.kv_blocks > 0);
    assert_eq!(app.metrics.summary.requests, 1, "the finished request is in the engine's metrics");
}

#[test]
fn stop_ends_generation() {
    let mut h = harness();
    h.state_mut().max_tokens = 2000;
    h.state_mut().sampling.temperature = 1.0;
    send(&mut h, "Tell me everything");
    wait_until(&mut h, "some text arrives", |a| a.messages.last().is_some_and(|m| !m.text.is_empty()));
    h.get_by_label("Stop").click();
    wait_until(&mut h, "generation stops", |a| a.active.is_none());
    assert_eq!(h.state().finished.last().unwrap().1.finish, Finish::Stopped);
}

#[test]
fn a_bad_model_path_shows_an_error_and_the_old_model_keeps_working() {
    let mut h = harness();
    h.state_mut().model_path = "/nonexistent/model.gguf".into();
    h.step();
    h.get_by_label("Load").click();
    wait_until(&mut h, "the load fails", |a| a.load_error.is_some());
    assert!(h.query_by_label_contains("load failed").is_some(), "the error is visible");
    send(&mut h, "Still there?");
    wait_until(&mut h, "the old model answers", |a| a.active.is_none() && !a.finished.is_empty());
}

/// A turn that fails (a message past the 4096-token context) leaves the history, its text back
/// in the input box: the next message is answered, not refused for carrying it along.
#[test]
fn a_failed_turn_leaves_the_history_and_the_chat_goes_on() {
    let mut h = harness();
    h.state_mut().sampling.temperature = 0.0;
    // Sent without the button, which a text box of 25,000 characters pushes off the window.
    let long = "word ".repeat(5000);
    h.state_mut().input = long.clone();
    h.state_mut().send();
    wait_until(&mut h, "the turn fails", |a| a.active.is_none() && a.error.is_some());
    assert!(h.state().messages.is_empty(), "the failed turn left the history");
    assert_eq!(h.state().input, long.trim(), "its text is back in the input box");
    send(&mut h, "Hello there");
    wait_until(&mut h, "the answer finishes", |a| a.active.is_none() && !a.finished.is_empty());
    assert!(h.state().error.is_none());
    assert_eq!(h.state().messages.len(), 2);
}

//! Drawing: controls on the left, chat in the middle, engine panels on the right, a status
//! line at the bottom.

use eframe::egui::{self, Color32, RichText};
use egui_plot::{Bar, BarChart, Legend, Line, Plot, PlotPoints};
use wginfer::gpu::profiler::{by_kernel, by_layer};
use wginfer::ops::attention::AttnKind;
use wginfer::sched::Priority;

use crate::app::ConsoleApp;

/// What the model field takes: natively a path, in a page a URL.
const MODEL_HINT: &str =
    if cfg!(target_arch = "wasm32") { "a GGUF's URL" } else { "model.gguf or a Hugging Face folder" };

pub fn draw(app: &mut ConsoleApp, ui: &mut egui::Ui) {
    egui::Panel::bottom("status").show(ui, |ui| status_line(app, ui));
    egui::Panel::left("controls").default_size(300.0).show(ui, |ui| {
        egui::ScrollArea::vertical().show(ui, |ui| controls(app, ui));
    });
    egui::Panel::right("engine").default_size(520.0).show(ui, |ui| {
        egui::ScrollArea::vertical().show(ui, |ui| engine_panels(app, ui));
    });
    egui::CentralPanel::default().show(ui, |ui| chat(app, ui));
}

fn status_line(app: &ConsoleApp, ui: &mut egui::Ui) {
    ui.horizontal(|ui| {
        let state = match (&app.loading, app.active) {
            (Some(p), _) => match app.load_stage {
                Some(stage) => format!("loading {}: {stage}", p.display()),
                None => format!("loading {}", p.display()),
            },
            (None, Some(_)) => "generating".to_string(),
            (None, None) if app.model.is_some() => "ready".to_string(),
            _ => "no model".to_string(),
        };
        ui.label(format!(
            "{state} · frame {:.1} ms to build, {:.1} ms between frames · queue {} waiting, {} running, {} rows in the last step",
            app.frame_build_ms, app.frame_interval_ms, app.metrics.waiting, app.metrics.running, app.metrics.batch_rows
        ));
    });
}

fn controls(app: &mut ConsoleApp, ui: &mut egui::Ui) {
    ui.heading("Model");
    ui.add(egui::TextEdit::singleline(&mut app.model_path).hint_text(MODEL_HINT));
    ui.horizontal(|ui| {
        if ui.button("Open file…").clicked() {
            crate::open::pick_file(app);
        }
        #[cfg(not(target_arch = "wasm32"))]
        if ui.button("Open folder…").clicked() {
            crate::open::pick_folder(app);
        }
        if ui.add_enabled(app.loading.is_none(), egui::Button::new("Load")).clicked() {
            app.load();
        }
    });
    if app.loading.is_some() {
        let text = app.load_stage.map_or("loading the model…".to_string(), |stage| format!("{stage}…"));
        ui.add(egui::ProgressBar::new(0.0).animate(true).text(text));
    }
    if let Some(e) = &app.load_error {
        ui.colored_label(Color32::LIGHT_RED, format!("load failed: {e}"));
    }
    match &app.model {
        Some(d) => ui.label(d),
        None => ui.label("no model loaded"),
    };
    ui.separator();
    ui.heading("System prompt");
    ui.add(egui::TextEdit::multiline(&mut app.system).desired_rows(3));
    ui.separator();
    ui.heading("Sampling");
    // The ranges reach the values given on the command line, which a slider would clamp.
    let s = &app.sampling;
    let (t_max, p_min, k_max) = (s.temperature.max(2.0), s.top_p.min(0.05), s.top_k.max(200));
    let tokens_max = app.max_tokens.max(2048);
    ui.add(egui::Slider::new(&mut app.sampling.temperature, 0.0..=t_max).text("temperature"));
    ui.add(egui::Slider::new(&mut app.sampling.top_p, p_min..=1.0).text("top-p"));
    ui.add(egui::Slider::new(&mut app.sampling.top_k, 0..=k_max).text("top-k"));
    ui.add(egui::Slider::new(&mut app.max_tokens, 1..=tokens_max).text("max tokens"));
    ui.horizontal(|ui| {
        ui.label("seed");
        ui.add(egui::DragValue::new(&mut app.sampling.seed));
    });
    ui.separator();
    ui.heading("Background load");
    ui.horizontal(|ui| {
        ui.add(egui::DragValue::new(&mut app.background_count).range(1..=64));
        if ui.button("Submit background requests").clicked() {
            app.submit_background();
        }
    });
}

fn chat(app: &mut ConsoleApp, ui: &mut egui::Ui) {
    ui.horizontal(|ui| {
        ui.heading("Chat");
        if ui.button("New chat").clicked() {
            app.new_chat();
        }
    });
    if let Some(e) = &app.error {
        ui.colored_label(Color32::LIGHT_RED, e);
    }
    let input_height = 90.0;
    egui::ScrollArea::vertical()
        .stick_to_bottom(true)
        .max_height((ui.available_height() - input_height).max(50.0))
        .show(ui, |ui| {
            for m in &app.messages {
                let who =
                    if m.role == "user" { RichText::new("you").strong() } else { RichText::new("assistant").strong() };
                ui.label(who);
                ui.label(&m.text);
                ui.add_space(6.0);
            }
        });
    ui.separator();
    let edit = ui.add(
        egui::TextEdit::multiline(&mut app.input).desired_rows(2).desired_width(f32::INFINITY).hint_text("Message"),
    );
    let enter = edit.has_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter) && !i.modifiers.shift);
    ui.horizontal(|ui| {
        let can_send = app.model.is_some() && app.active.is_none();
        if ui.add_enabled(can_send, egui::Button::new("Send")).clicked() || (enter && can_send) {
            app.send();
        }
        if ui.add_enabled(app.active.is_some(), egui::Button::new("Stop")).clicked() {
            app.stop();
        }
    });
}

fn engine_panels(app: &ConsoleApp, ui: &mut egui::Ui) {
    ui.heading("GPU time per layer (last step)");
    if !app.metrics.timestamps && app.timings.is_empty() {
        ui.label("this adapter has no timestamp queries inside compute passes: no GPU timings");
    } else if app.timings.is_empty() {
        ui.label("no step has run yet");
    } else {
        let attn = match app.metrics.attention {
            Some(AttnKind::Flash) => "flash",
            Some(AttnKind::Coop) => "tensor-core flash",
            Some(AttnKind::Grouped) => "grouped heads",
            _ => "plain",
        };
        ui.label(format!("attention kernel: {attn}"));
        let (layers, other) = by_layer(&app.timings);
        let a: Vec<Bar> = layers.iter().enumerate().map(|(i, l)| Bar::new(i as f64, l.attention_ns / 1e3)).collect();
        let m: Vec<Bar> = layers.iter().enumerate().map(|(i, l)| Bar::new(i as f64, l.mlp_ns / 1e3)).collect();
        let o = vec![Bar::new(layers.len() as f64, other / 1e3)];
        let attention = BarChart::new("attention (us)", a).color(Color32::from_rgb(90, 150, 230));
        let mlp = BarChart::new("MLP (us)", m).color(Color32::from_rgb(230, 150, 70)).stack_on(&[&attention]);
        let rest = BarChart::new("other (us)", o).color(Color32::GRAY);
        Plot::new("layers").height(170.0).legend(Legend::default()).allow_scroll(false).show(ui, |p| {
            p.bar_chart(attention);
            p.bar_chart(mlp);
            p.bar_chart(rest);
        });
        egui::Grid::new("kernels").striped(true).show(ui, |ui| {
            for h in ["kernel", "calls", "total us", "mean us"] {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for k in by_kernel(&app.timings) {
                ui.label(k.kernel);
                ui.label(k.calls.to_string());
                ui.label(format!("{:.1}", k.total_ns / 1e3));
                ui.label(format!("{:.2}", k.total_ns / 1e3 / k.calls as f64));
                ui.end_row();
            }
        });
    }
    ui.separator();
    ui.heading("Queue depth");
    let waiting: PlotPoints = app.queue_history.iter().map(|q| [q[0], q[1]]).collect();
    let running: PlotPoints = app.queue_history.iter().map(|q| [q[0], q[2]]).collect();
    Plot::new("queue").height(120.0).legend(Legend::default()).allow_scroll(false).show(ui, |p| {
        p.line(Line::new("waiting", waiting));
        p.line(Line::new("running", running));
    });
    ui.separator();
    ui.heading("Requests: TTFT and decode speed");
    let ttft: PlotPoints = app.finished.iter().map(|(t, s)| [*t, s.ttft_ms]).collect();
    let speed: PlotPoints = app.finished.iter().map(|(t, s)| [*t, s.decode_tok_s]).collect();
    Plot::new("requests").height(120.0).legend(Legend::default()).allow_scroll(false).show(ui, |p| {
        p.line(Line::new("TTFT (ms)", ttft));
        p.line(Line::new("decode (tok/s)", speed));
    });
    if let Some((_, s)) = app.finished.last() {
        let class = if s.priority == Priority::Interactive { "interactive" } else { "background" };
        ui.label(format!(
            "last: {class}, queued {:.0} ms, TTFT {:.1} ms, {:.1} tok/s, {} tokens",
            s.queued_ms, s.ttft_ms, s.decode_tok_s, s.tokens
        ));
    }
    ui.separator();
    ui.heading("KV cache");
    let m = &app.metrics;
    let (used, total) = (m.kv_blocks_used, m.kv_blocks.max(1));
    let text = format!("{used} / {total} blocks of {} positions", m.kv_block);
    ui.add(egui::ProgressBar::new(used as f32 / total as f32).text(text));
    let s = &m.summary;
    ui.label(format!(
        "TTFT P50 {:.0} ms, P99 {:.0} ms · inter-token P99 {:.1} ms · {:.1} tok/s",
        s.ttft_ms.p50, s.ttft_ms.p99, s.itl_ms.p99, s.tokens_per_s
    ));
}

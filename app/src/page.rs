//! In a page, the console's chat mirrored into the DOM. egui draws on a canvas, which screen
//! readers and tests cannot read; `<section id="transcript" aria-live="polite">` (index.html
//! keeps it off screen) carries the same messages, the model's state, and the last answer's
//! speed.

use std::fmt::Write;

use crate::app::ConsoleApp;

/// What was last written into the page, so unchanged frames touch no DOM.
#[derive(Default)]
pub struct Transcript {
    shown: String,
}

impl Transcript {
    /// Rewrites `#transcript` where the chat or the model's state changed since the last frame.
    pub fn mirror(&mut self, app: &ConsoleApp) {
        let html = render(app);
        if html == self.shown {
            return;
        }
        let section = web_sys::window().and_then(|w| w.document()).and_then(|d| d.get_element_by_id("transcript"));
        if let Some(section) = section {
            section.set_inner_html(&html);
            let _ = section.set_attribute("data-state", state(app));
        }
        self.shown = html;
    }
}

/// `loading`, `failed`, `answering`, `ready` (a model, nothing in flight) or `empty`.
fn state(app: &ConsoleApp) -> &'static str {
    if app.loading.is_some() {
        "loading"
    } else if app.load_error.is_some() || app.error.is_some() {
        "failed"
    } else if app.active.is_some() {
        "answering"
    } else if app.model.is_some() {
        "ready"
    } else {
        "empty"
    }
}

fn render(app: &ConsoleApp) -> String {
    let mut html = String::new();
    let model = app.model.as_deref().unwrap_or("none");
    let _ = write!(html, "<p class=\"model\">{}</p>", escape(model));
    for e in [&app.load_error, &app.error].into_iter().flatten() {
        let _ = write!(html, "<p class=\"error\">{}</p>", escape(e));
    }
    for m in &app.messages {
        let _ = write!(html, "<p class=\"{}\">{}</p>", escape(&m.role), escape(&m.text));
    }
    if let Some((_, s)) = app.finished.last() {
        let _ = write!(
            html,
            "<p class=\"speed\" data-tokens=\"{}\" data-ttft-ms=\"{:.0}\" data-decode-tok-s=\"{:.2}\">{} tokens, first after {:.0} ms, {:.2} tok/s</p>",
            s.tokens, s.ttft_ms, s.decode_tok_s, s.tokens, s.ttft_ms, s.decode_tok_s
        );
    }
    html
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

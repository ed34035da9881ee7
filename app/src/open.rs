//! Where the console's models come from: a path natively; in a page (no file system) a URL
//! fetched, or a file picked, handed to the engine loop as bytes.

use wginfer::engine::EngineOptions;
use wginfer::sched::{Command, ModelSource};

use crate::app::ConsoleApp;

/// Loads what `app.model_path` names: a GGUF file or a Hugging Face folder natively, a GGUF's
/// URL in a page (fetched first; a failure shows as a failed load).
pub fn load(app: &mut ConsoleApp, opts: EngineOptions) {
    let target = app.model_path.trim().to_string();
    #[cfg(not(target_arch = "wasm32"))]
    app.worker.send(Command::Load(ModelSource::Path(target.into()), Box::new(opts)));
    #[cfg(target_arch = "wasm32")]
    load_when_read(app, opts, async move { fetch(&target).await.map(|bytes| Some((target, bytes))) });
}

/// "Open file…": a file dialog; natively its path is loaded, in a page the file's bytes.
pub fn pick_file(app: &mut ConsoleApp) {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(p) = rfd::FileDialog::new().add_filter("GGUF", &["gguf"]).pick_file() {
        app.model_path = p.display().to_string();
        app.load();
    }
    #[cfg(target_arch = "wasm32")]
    {
        let opts = app.engine_options();
        load_when_read(app, opts, async {
            let Some(file) = rfd::AsyncFileDialog::new().add_filter("GGUF", &["gguf"]).pick_file().await else {
                return Ok(None);
            };
            Ok(Some((file.file_name(), file.read().await)))
        });
    }
}

/// "Open folder…" (native only: a page cannot list a folder).
#[cfg(not(target_arch = "wasm32"))]
pub fn pick_folder(app: &mut ConsoleApp) {
    if let Some(p) = rfd::FileDialog::new().pick_folder() {
        app.model_path = p.display().to_string();
        app.load();
    }
}

/// In a page: once `read` has a GGUF's name and bytes, the engine loop loads them; a failed
/// read shows as a failed load, a cancelled one (`None`) does nothing.
#[cfg(target_arch = "wasm32")]
fn load_when_read(
    app: &ConsoleApp,
    opts: EngineOptions,
    read: impl std::future::Future<Output = Result<Option<(String, Vec<u8>)>, String>> + 'static,
) {
    let (commands, errors) = (app.worker.commands(), app.page_errors.0.clone());
    wasm_bindgen_futures::spawn_local(async move {
        match read.await {
            Ok(Some((name, bytes))) => {
                let _ = commands.unbounded_send(Command::Load(ModelSource::Gguf { name, bytes }, Box::new(opts)));
            }
            Ok(None) => {}
            Err(e) => {
                let _ = errors.send(e);
            }
        }
    });
}

/// `url`'s body, through the page's `fetch`; an error names the URL.
#[cfg(target_arch = "wasm32")]
async fn fetch(url: &str) -> Result<Vec<u8>, String> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let why = |e: wasm_bindgen::JsValue| format!("{url}: {e:?}");
    let window = web_sys::window().ok_or("no window")?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str(url)).await.map_err(why)?.unchecked_into();
    if !response.ok() {
        return Err(format!("{url}: HTTP {} {}", response.status(), response.status_text()));
    }
    let body = JsFuture::from(response.array_buffer().map_err(why)?).await.map_err(why)?;
    Ok(js_sys::Uint8Array::new(&body).to_vec())
}

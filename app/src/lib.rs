//! The console's state and drawing, separate from the window so tests can drive it headless.

mod app;
mod open;
#[cfg(target_arch = "wasm32")]
mod page;
mod panels;

pub use app::{ChatMessage, ConsoleApp, Options};

//! The console's state and drawing, separate from the window so tests can drive it headless.

mod app;
mod panels;

pub use app::{ChatMessage, ConsoleApp, Options};

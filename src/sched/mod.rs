//! Scheduling: the continuous batcher (which sequences run, and how many of their tokens, in
//! each step), the engine loop that owns the device and drives it (a thread natively, a task in a page), and the metrics front
//! ends display. Front ends talk to the engine thread through channels only, so a UI thread
//! never waits on the GPU.

pub mod batch;
pub mod metrics;
pub mod sequence;
pub mod worker;

pub use batch::{BatchOptions, Batcher, SeqEvent};
pub use sequence::{SeqRequest, SeqStats, TokenLogprobs};
pub use worker::{Command, Event, GenRequest, LoadStage, Metrics, ModelSource, RequestStats, Worker};

/// Priority classes: interactive requests are admitted and planned first; background ones
/// fill the rest of each step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Interactive,
    Background,
}

//! Scheduling: the engine thread that owns the device, a request queue with priority classes,
//! and the metrics front ends display. Front ends talk to it through channels only, so a UI
//! thread never waits on the GPU.

pub mod worker;

pub use worker::{Command, Event, GenRequest, Metrics, Priority, RequestStats, Worker};

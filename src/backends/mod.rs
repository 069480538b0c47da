//! Backends: implementations of the strategies' `Generator` port. [`LocalGenerator`] runs on
//! this process's engine (the executor actor); a remote backend for OpenAI-compatible servers
//! comes with the service step.

mod local;

pub use local::{LocalGenerator, StopStrings};

//! Backends: implementations of the strategies' `Generator` port. [`LocalGenerator`] runs on
//! this process's engine (the executor actor); [`RemoteGenerator`] runs on OpenAI-compatible
//! completion servers through a [`RemotePool`] (prefix-affinity routing, failover).

mod local;
mod remote;

pub use local::{InterToken, LocalGenerator, StopStrings};
pub use remote::{chatml, RemoteGenerator, RemoteOptions, RemotePool, UNAVAILABLE};

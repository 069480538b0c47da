//! Backends: implementations of the strategies' `Generator` port. [`LocalGenerator`] runs on
//! this process's engine (the executor actor); [`RemoteGenerator`] runs on OpenAI-compatible
//! completion servers through a [`RemotePool`] (prefix-affinity routing, failover).

mod local;
mod remote;
mod token_tree;

pub use local::{LocalGenerator, StopStrings};
pub use remote::{chatml, RemoteGenerator, RemoteOptions, RemotePool, UNAVAILABLE};

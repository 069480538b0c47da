//! Backends: implementations of the strategies' `Generator` port. [`LocalGenerator`] runs on
//! this process's engine (the executor actor); [`RemoteGenerator`] runs on OpenAI-compatible
//! completion servers through a [`RemotePool`] (prefix-affinity routing, failover, TLS, keys).

mod remote;

pub use remote::{
    affinity_key, chatml, BackendFormat, BackendKeys, FormatError, RemoteGenerator, RemoteOptions,
    RemotePool, Secret,
};

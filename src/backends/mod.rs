//! Remote backends: the strategies' `Generator` port over other engines. (The local one,
//! `ponder_engine::LocalGenerator`, runs on this process's engine.) [`RemoteGenerator`] runs on OpenAI-compatible
//! completion servers through a [`RemotePool`] (prefix-affinity routing, failover, TLS, keys).

mod remote;

pub use remote::{
    affinity_key, chatml, BackendFormat, BackendKeys, FormatError, RemoteGenerator, RemoteOptions,
    RemotePool, Secret,
};

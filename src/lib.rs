//! Ponder: a test-time-scaling reasoning server.
//!
//! This crate is the service over the model runtime (the `ponder-engine` crate): process reward
//! models run on it ([`prm`]), model locations ([`models`]), remote backends, router, learned outcome
//! verifier ([`learned_verifier`]) and HTTP API, the fixed train / held-out split of
//! datasets ([`split`]) and the roles of the public benchmark sets ([`roles`]). Strategies
//! and verifiers live in their own crates and see the engine only through ports.

pub mod api;
pub mod backends;
pub mod bench;
pub mod learned_verifier;
pub mod models;
pub mod prm;
pub mod reason;
pub mod roles;
pub mod router;
pub mod split;
pub mod telemetry;

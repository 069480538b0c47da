//! Ponder's strategy engine: the `Strategy` trait, the `Generator` port a strategy drives, the
//! budget meter, the search tree every strategy records into, and the built-in strategies
//! (best-of-N, self-consistency, beam search and DVTS, A*-decoding, MCTS, early stopping,
//! adaptive parallel thinking).
//!
//! This crate knows nothing of candle, axum or the engine: it sees models only through the
//! `Generator` port and scores only through `ponder-verifiers`. Its contents arrive with the
//! strategy-engine step (see DESIGN.md); today it holds the crate boundary only.

//! Ponder's verifiers: the `Verifier` trait, answer extraction and math equivalence, the PRM
//! protocol (step segmentation, aggregation), confidence scores and vote aggregation.
//!
//! Pure logic: no model runtime, no HTTP. Model-based verifiers (PRMs) reach the engine through
//! a port the service implements. Its contents arrive with the verifiers step (see DESIGN.md);
//! today it holds the crate boundary only.

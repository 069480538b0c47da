//! The semantic router: decide per query how much thinking it deserves, before the search.
//!
//! A query is embedded by all-MiniLM-L6-v2 ([`embed`]), classified into a category and a
//! difficulty by two softmax-regression heads ([`classifier`], trained by
//! `ponder router train` on `data/router/labelled.jsonl`), and given a compute allocation —
//! direct answer or not, strategy, N, per-branch cap, budget — by the [`allocator`] from a
//! calibration table measured by the harness (`ponder-eval calibrate`) or `ponder bench
//! strategies`. The `auto` strategy ([`Auto`]) runs the chosen row as measured, after a probe
//! of its first two samples that may move it to the easy or the hard bin's row; its decision
//! ([`Decision`]) rides on the `Outcome` as its own type. With the same encoder it chooses a question's few-shot
//! worked examples ([`exemplars`]) for the server and the harness.
//!
//! [`Router`] is loaded once (encoder weights + router file) and shared across requests; it
//! keeps a gauge of the `auto` searches in flight, the load the allocator degrades under.

pub mod allocator;
mod auto;
pub mod bench;
pub mod calibrate;
pub mod classifier;
pub mod data;
pub mod defaults;
pub mod embed;
mod error;
pub mod exemplars;
pub mod file;
pub mod noninferiority;
pub mod train;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

pub use crate::models::FittedModel;
pub use allocator::{
    Allocation, Allocator, AllocatorConfig, BinnedBy, CalibrationRow, CalibrationTable, TableFault,
    PRIOR_BIN,
};
pub use auto::{
    register_auto, registry_with_auto, Allocated, Auto, AutoParams, ProbeBin, ProbeRead,
    ProbeReport, DIRECT_SYSTEM_PROMPT, PROBE_SAMPLES,
};
pub use classifier::{Classifier, Confusion, Head, Prediction, TrainOptions};
pub use defaults::{default_defaults_path, MeasuredDefault, MeasuredDefaults};
pub use embed::{cosine, Embedder, Embedding};
pub use error::{Result, RouterError};
pub use exemplars::{default_exemplars_path, default_shots, Exemplars, Shot, MAX_SHOTS};
pub use file::{default_router_path, RouterFile};

/// Concurrent `auto` searches at which the router counts the server as fully loaded.
pub const DEFAULT_CAPACITY: usize = 8;

/// A query's predicted category and difficulty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    /// Category prediction.
    pub category: Prediction,
    /// Difficulty prediction.
    pub difficulty: Prediction,
    /// Word pieces the encoder saw.
    pub query_tokens: usize,
    /// Whether the query was cut to the encoder's window.
    pub truncated: bool,
}

/// What the router predicted and chose: kept on the `Outcome` as this type
/// (`Outcome::routing::<Decision>()`), written out as its `router` object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Predicted category.
    pub category: String,
    /// Its probability.
    pub category_probability: f32,
    /// Predicted difficulty.
    pub difficulty: String,
    /// Its probability.
    pub difficulty_probability: f32,
    /// Word pieces the encoder saw.
    pub query_tokens: usize,
    /// Whether the query was truncated to the encoder's window for routing.
    pub truncated: bool,
    /// The encoder's window.
    pub window: usize,
    /// The request's budget (the hard cap).
    pub request_budget: u64,
    /// Load the allocation was made under.
    pub load: f64,
    /// The allocation.
    #[serde(flatten)]
    pub allocation: Allocation,
    /// Time to embed, classify and allocate, in milliseconds.
    pub route_ms: f64,
    /// What `auto`'s probe of the first two samples saw and which bin it chose (absent when
    /// no probe ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeReport>,
}

impl Decision {
    /// The decision a `router` object written out by the API records (a response read over
    /// HTTP); `None` for an object that is not one. In process, read it typed with
    /// `Outcome::routing::<Decision>()`.
    pub fn of(router: &serde_json::Value) -> Option<Self> {
        Self::deserialize(router).ok()
    }
}

impl ponder_strategies::RoutingDecision for Decision {
    fn to_json(&self) -> serde_json::Value {
        // A struct of strings, numbers and JSON values: serialising it cannot fail.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// The loaded router.
pub struct Router {
    embedder: Arc<Embedder>,
    file: RouterFile,
    active: AtomicUsize,
    capacity: usize,
    /// Why the calibration table does not apply to the served model (`None`: it applies).
    foreign: Option<String>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("embedder", &self.embedder)
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}

impl Router {
    /// Loads the router file (first: a bad file fails fast, naming it) and the encoder.
    pub fn load(router_file: &Path, embedder_dir: &Path) -> Result<Self> {
        let file = RouterFile::load(router_file)?;
        let embedder = Arc::new(Embedder::load(embedder_dir)?);
        Self::new(embedder, file)
            .map_err(|reason| RouterError::corrupt(router_file, "router file", reason))
    }

    /// Loads [`default_router_path`] and the installed encoder.
    pub fn load_default() -> Result<Self> {
        Self::load(
            &default_router_path(),
            &crate::models::default_embedder_dir(),
        )
    }

    /// A router from parts; fails when the file's vector length is not the encoder's.
    pub fn new(embedder: Arc<Embedder>, file: RouterFile) -> std::result::Result<Self, String> {
        if file.dim != embedder.dim() {
            return Err(format!(
                "trained on {}-d vectors, the encoder makes {}-d",
                file.dim,
                embedder.dim()
            ));
        }
        Ok(Self {
            embedder,
            file,
            active: AtomicUsize::new(0),
            capacity: DEFAULT_CAPACITY,
            foreign: None,
        })
    }

    /// The router for a server of `served`: when its calibration table was measured with
    /// another model (style rule 21), `auto` does not run the table's rows but the
    /// model-agnostic policy ([`Allocator::model_agnostic`]) and says why in its decision; a
    /// warning is logged once here.
    pub fn serving(mut self, served: &FittedModel) -> Self {
        self.foreign = match &self.file.allocator.table.model {
            Some(fitted) if !fitted.applies_to(served) => {
                let why = format!(
                    "the calibration table was measured with {fitted}, this server runs {served}"
                );
                tracing::warn!("`auto` runs its model-agnostic policy: {why}");
                Some(why)
            }
            _ => None,
        };
        self
    }

    /// Why the calibration table does not apply to the served model, if it does not
    /// ([`Router::serving`]).
    pub fn table_foreign(&self) -> Option<&str> {
        self.foreign.as_deref()
    }

    /// The encoder.
    pub fn embedder(&self) -> &Embedder {
        &self.embedder
    }

    /// The encoder, shared (the server's worked-example pool embeds with it).
    pub fn shared_embedder(&self) -> Arc<Embedder> {
        Arc::clone(&self.embedder)
    }

    /// The router file's contents.
    pub fn file(&self) -> &RouterFile {
        &self.file
    }

    /// Worked examples `auto` is shown when neither the request nor the operator sets a
    /// count: as many as its calibration rows were measured with (0 when they differ), so
    /// that it runs the configuration that was measured.
    pub fn auto_shots(&self) -> usize {
        if self.foreign.is_some() {
            return 0;
        }
        self.file.allocator.table.measured_shots().unwrap_or(0)
    }

    /// Classifies a batch of queries (one encoder pass).
    pub fn classify(&self, queries: &[&str]) -> Result<Vec<Classification>> {
        if queries.iter().any(|q| q.trim().is_empty()) {
            return Err(RouterError::EmptyQuery);
        }
        let c = &self.file.classifier;
        Ok(self
            .embedder
            .embed(queries)?
            .into_iter()
            .map(|e| Classification {
                category: c.category.predict(&e.vector),
                difficulty: c.difficulty.predict(&e.vector),
                query_tokens: e.tokens,
                truncated: e.truncated,
            })
            .collect())
    }

    /// [`Router::route_for`] a search without a verifier.
    pub fn route(&self, query: &str, budget: u64, load: f64) -> Result<Decision> {
        self.route_for(query, budget, load, "none")
    }

    /// Embeds, classifies and allocates one query under `budget` tokens at `load`, for a search
    /// scored by `verifier` (its name; `none`): [`Allocator::allocate_for`].
    pub fn route_for(
        &self,
        query: &str,
        budget: u64,
        load: f64,
        verifier: &str,
    ) -> Result<Decision> {
        let start = Instant::now();
        let c = self
            .classify(&[query])?
            .pop()
            .ok_or(RouterError::EmptyQuery)?;
        let allocation = match &self.foreign {
            Some(why) => self.file.allocator.model_agnostic(budget, why),
            None => {
                // A probe-binned table has no evidence on a query before its probe.
                let bin = self.file.allocator.table.starting_bin(&c.difficulty.label);
                self.file
                    .allocator
                    .allocate_for(&c.category.label, bin, budget, load, verifier)
            }
        };
        Ok(Decision {
            category: c.category.label,
            category_probability: c.category.probability,
            difficulty: c.difficulty.label,
            difficulty_probability: c.difficulty.probability,
            query_tokens: c.query_tokens,
            truncated: c.truncated,
            window: self.embedder.window(),
            request_budget: budget,
            load,
            allocation,
            route_ms: start.elapsed().as_secs_f64() * 1e3,
            probe: None,
        })
    }

    /// The share of capacity busy with other `auto` searches, in [0, 1].
    pub fn current_load(&self) -> f64 {
        (self.active.load(Ordering::Relaxed) as f64 / self.capacity.max(1) as f64).min(1.0)
    }

    /// Counts a search in flight until the guard drops.
    pub(crate) fn enter(self: &Arc<Self>) -> InFlight {
        self.active.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(self))
    }
}

/// One `auto` search in flight (see [`Router::current_load`]).
pub(crate) struct InFlight(Arc<Router>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

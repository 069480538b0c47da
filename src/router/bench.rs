//! `ponder router bench`: routing latency per query — embed + classify + allocate, one query at
//! a time as a request sees it — and the batched encoder's per-query cost as the baseline, in
//! the same process. Prints JSON; wall-clock numbers are for reports, never for test asserts.

use std::time::Instant;

use serde::Serialize;

use super::error::Result;
use super::Router;

/// Latency report.
#[derive(Debug, Clone, Serialize)]
pub struct RouterBench {
    /// Queries routed.
    pub queries: usize,
    /// Timed passes over them.
    pub repeat: usize,
    /// Mean route time (embed + classify + allocate), ms.
    pub route_mean_ms: f64,
    /// Median route time, ms.
    pub route_p50_ms: f64,
    /// 95th percentile route time, ms.
    pub route_p95_ms: f64,
    /// Mean classify + allocate time given the embedding (the part after the encoder), ms.
    pub classify_allocate_mean_ms: f64,
    /// Per-query time when the queries are embedded in batches of `batch`, ms.
    pub batched_per_query_ms: f64,
    /// Batch size of the batched baseline.
    pub batch: usize,
    /// `route_mean_ms / batched_per_query_ms`.
    pub single_vs_batched: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Routes every query `repeat` times (after one warm-up pass) at budget 2048 and load 0.
pub fn bench_router(
    router: &Router,
    queries: &[&str],
    repeat: usize,
    batch: usize,
) -> Result<RouterBench> {
    let repeat = repeat.max(1);
    let batch = batch.max(1);
    for q in queries {
        router.route(q, 2048, 0.0)?;
    }
    let mut times = Vec::with_capacity(queries.len() * repeat);
    for _ in 0..repeat {
        for q in queries {
            let start = Instant::now();
            router.route(q, 2048, 0.0)?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    let route_mean_ms = times.iter().sum::<f64>() / times.len().max(1) as f64;
    let embeddings = router.embedder().embed_many(queries)?;
    let file = router.file();
    let start = Instant::now();
    for _ in 0..repeat {
        for e in &embeddings {
            let c = file.classifier.category.predict(e);
            let d = file.classifier.difficulty.predict(e);
            std::hint::black_box(file.allocator.allocate(&c.label, &d.label, 2048, 0.0));
        }
    }
    let classify_allocate_mean_ms =
        start.elapsed().as_secs_f64() * 1e3 / (repeat * queries.len()).max(1) as f64;
    let start = Instant::now();
    for _ in 0..repeat {
        for chunk in queries.chunks(batch) {
            std::hint::black_box(router.classify(chunk)?);
        }
    }
    let batched_per_query_ms =
        start.elapsed().as_secs_f64() * 1e3 / (repeat * queries.len()).max(1) as f64;
    Ok(RouterBench {
        queries: queries.len(),
        repeat,
        route_mean_ms,
        route_p50_ms: percentile(&times, 0.5),
        route_p95_ms: percentile(&times, 0.95),
        classify_allocate_mean_ms,
        batched_per_query_ms,
        batch,
        single_vs_batched: route_mean_ms / batched_per_query_ms.max(1e-9),
    })
}

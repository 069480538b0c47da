//! The straightforward sampler the fused one is tested against: sort the vocabulary, apply
//! temperature, top-k, top-p and min-p one after another in f64 with `std`'s `exp`, normalise.
//! It shares nothing with the fused path but parameter validation (no keys, no fixed point,
//! no Cephes `exp`), so agreement checks the thresholds and the masses independently.

use super::encode::RowCode;
use super::{SamplingConfig, SamplingError};

/// A row's target distribution and the raw statistics a sample reports, in f64.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// Probability of drawing each token (0 outside the kept set; one-hot for temperature 0).
    pub probs: Vec<f64>,
    /// `log softmax(logits)` of the model's own distribution (before temperature).
    pub logprobs: Vec<f64>,
    /// Entropy of the model's own distribution, in nats.
    pub entropy: f64,
}

/// The distribution `sample` must draw from for one row of logits under `config`.
pub fn target_distribution(
    logits: &[f32],
    config: &SamplingConfig,
) -> Result<Distribution, SamplingError> {
    RowCode::new(0, config, 0, 0)?;
    if logits.is_empty() {
        return Err(SamplingError::ZeroVocab);
    }
    if let Some(index) = logits
        .iter()
        .position(|l| l.is_nan() || *l == f32::INFINITY)
    {
        return Err(SamplingError::NonFiniteLogit {
            row: 0,
            index,
            value: logits[index],
        });
    }
    let x: Vec<f64> = logits.iter().map(|&l| f64::from(l)).collect();
    let max = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return Err(SamplingError::AllMasked { row: 0 });
    }
    let z: f64 = x.iter().map(|l| (l - max).exp()).sum();
    let logprobs: Vec<f64> = x.iter().map(|l| l - max - z.ln()).collect();
    let entropy = -logprobs
        .iter()
        .filter(|l| l.is_finite())
        .map(|l| l.exp() * l)
        .sum::<f64>();

    // Rank: larger logit first, lower id on ties.
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[b].total_cmp(&x[a]).then(a.cmp(&b)));
    let mut probs = vec![0.0; x.len()];
    if config.temperature == 0.0 {
        probs[order[0]] = 1.0;
        return Ok(Distribution {
            probs,
            logprobs,
            entropy,
        });
    }
    let p: Vec<f64> = x
        .iter()
        .map(|l| ((l - max) / config.temperature).exp())
        .collect();
    let mut keep = order.len();
    if config.top_k > 0 {
        keep = keep.min(config.top_k);
    }
    if config.top_p < 1.0 {
        let total: f64 = order[..keep].iter().map(|&i| p[i]).sum();
        let mut acc = 0.0;
        for (n, &i) in order[..keep].iter().enumerate() {
            acc += p[i];
            if acc >= config.top_p * total {
                keep = n + 1;
                break;
            }
        }
    }
    let p_max = p[order[0]];
    for &i in &order[..keep] {
        if p[i] >= config.min_p * p_max {
            probs[i] = p[i];
        }
    }
    let total: f64 = probs.iter().sum();
    for q in &mut probs {
        *q /= total;
    }
    Ok(Distribution {
        probs,
        logprobs,
        entropy,
    })
}

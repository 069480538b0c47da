//! The fused sampler on the CPU: the reference for `cuda/sampling.cu`, computing per row what
//! the kernel computes in one launch: the token, its log-probability, the top-n
//! log-probabilities and the entropy of the raw distribution.
//!
//! The draw, in the kernel's terms (see `encode` for the shared pieces): rank tokens by key;
//! top-k keeps keys >= the k-th largest; top-p keeps keys >= the key at which the weight mass
//! in rank order (within top-k) first reaches `max(1, ceil(Z_k * top_p_fixed / 2^32))`; min-p
//! keeps tokens whose tempered probability relative to the max is >= `min_p`; then
//! `target = (philox_u64 * Z_kept) >> 64` and the token is the smallest id whose running sum of
//! kept weights, in id order, exceeds `target`. The kernel finds the thresholds by radix select
//! and the token by a block scan; here they are a sort and a walk, giving the same integers.
//! The order of truncations (temperature, top-k, top-p, min-p against the max) is the engine's
//! (`src/engine/sampling.rs`); ties in top-k / top-p are broken by lower id, as there.
//!
//! Logprobs and entropy accumulate in f64 here, in f32 on the GPU: equal within tolerance.

use super::encode::{fixed, key_id, key_logit, rank_key, scale_ceil, tempered, RowCode, TOP_P_OFF};
use super::philox::draw_u64;
use super::{Sample, SamplingError};

/// The raw distribution of a row: max logit, `ln Z` (f64), checked logits.
struct Raw {
    best: u64,
    max: f32,
    log_z: f64,
    entropy: f64,
}

fn raw(row: usize, logits: &[f32]) -> Result<Raw, SamplingError> {
    let mut best = 0u64;
    for (i, &l) in logits.iter().enumerate() {
        if l.is_nan() || l == f32::INFINITY {
            return Err(SamplingError::NonFiniteLogit {
                row,
                index: i,
                value: l,
            });
        }
        best = best.max(rank_key(l, i as u32));
    }
    let max = key_logit(best);
    if max == f32::NEG_INFINITY {
        return Err(SamplingError::AllMasked { row });
    }
    let (mut z, mut e) = (0f64, 0f64);
    for &l in logits {
        let d = l - max;
        if d == f32::NEG_INFINITY {
            continue;
        }
        let w = f64::from(d).exp();
        z += w;
        e += w * f64::from(d);
    }
    let log_z = z.ln();
    Ok(Raw {
        best,
        max,
        log_z,
        entropy: log_z - e / z,
    })
}

/// The kept tokens' fixed-point weights (0 for dropped tokens), indexed by token id.
pub(crate) fn kept_weights(logits: &[f32], code: &RowCode, max: f32) -> Vec<u64> {
    let vocab = logits.len();
    let weight = |i: usize| fixed(tempered(logits[i], max, code.inv_temp));
    let mut ranked: Vec<(u64, u64)> = Vec::new();
    let mut floor = 0u64;
    let top_k = code.top_k as usize;
    let top_k_on = top_k > 0 && top_k < vocab;
    if top_k_on || code.top_p_fixed < TOP_P_OFF {
        ranked = (0..vocab)
            .map(|i| (rank_key(logits[i], i as u32), weight(i)))
            .collect();
        ranked.sort_unstable_by_key(|r| std::cmp::Reverse(r.0));
    }
    if top_k_on {
        floor = ranked[top_k - 1].0;
    }
    if code.top_p_fixed < TOP_P_OFF {
        let z_k: u64 = ranked.iter().filter(|r| r.0 >= floor).map(|r| r.1).sum();
        let target = scale_ceil(z_k, code.top_p_fixed).max(1);
        let mut acc = 0u64;
        for &(key, w) in ranked.iter().take_while(|r| r.0 >= floor) {
            acc += w;
            if acc >= target {
                floor = floor.max(key);
                break;
            }
        }
    }
    (0..vocab)
        .map(|i| {
            let w = tempered(logits[i], max, code.inv_temp);
            if rank_key(logits[i], i as u32) < floor || w < code.min_p {
                0
            } else {
                fixed(w)
            }
        })
        .collect()
}

/// Samples one row (`logits` is the row, `vocab` long) as the kernel does.
pub(crate) fn sample_row(
    row: usize,
    logits: &[f32],
    code: &RowCode,
    top_logprobs: usize,
) -> Result<Sample, SamplingError> {
    let raw = raw(row, logits)?;
    let logprob = |id: u32| (f64::from(logits[id as usize] - raw.max) - raw.log_z) as f32;
    let mut top = Vec::new();
    if top_logprobs > 0 {
        let mut keys: Vec<u64> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| rank_key(l, i as u32))
            .collect();
        let n = top_logprobs.min(keys.len());
        keys.select_nth_unstable_by(n - 1, |a, b| b.cmp(a));
        keys.truncate(n);
        keys.sort_unstable_by(|a, b| b.cmp(a));
        top = keys
            .iter()
            .map(|&k| (key_id(k), logprob(key_id(k))))
            .collect();
    }
    let token = if code.inv_temp == 0.0 {
        key_id(raw.best)
    } else {
        let kept = kept_weights(logits, code, raw.max);
        let total: u64 = kept.iter().sum();
        let r = draw_u64(code.seed, code.offset);
        let target = ((u128::from(r) * u128::from(total)) >> 64) as u64;
        let mut acc = 0u64;
        let mut token = key_id(raw.best);
        for (i, &w) in kept.iter().enumerate() {
            acc += w;
            if target < acc {
                token = i as u32;
                break;
            }
        }
        token
    };
    Ok(Sample {
        token,
        logprob: logprob(token),
        top_logprobs: top,
        entropy: raw.entropy as f32,
    })
}

/// The distribution the fused sampler draws from for one row: kept weight / total per token
/// (all mass on the argmax for temperature 0).
pub(crate) fn row_distribution(
    row: usize,
    logits: &[f32],
    code: &RowCode,
) -> Result<Vec<f64>, SamplingError> {
    let raw = raw(row, logits)?;
    if code.inv_temp == 0.0 {
        let mut p = vec![0.0; logits.len()];
        p[key_id(raw.best) as usize] = 1.0;
        return Ok(p);
    }
    let kept = kept_weights(logits, code, raw.max);
    let total: u64 = kept.iter().sum();
    Ok(kept.iter().map(|&w| w as f64 / total as f64).collect())
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// `radix_select` of `cuda/sampling.cu`, transcribed: the largest key `K` with
    /// `sum_{key >= K, key >= floor} w >= target`, by 8-bit digits from the top.
    fn radix_select(items: &[(u64, u64)], floor: u64, target: u64) -> u64 {
        let (mut prefix, mut above) = (0u64, 0u64);
        for shift in (0..8).rev().map(|d| d * 8) {
            let mask = if shift == 56 {
                0
            } else {
                !((1u64 << (shift + 8)) - 1)
            };
            let mut hist = [0u64; 256];
            for &(k, w) in items {
                if k >= floor && (k & mask) == prefix {
                    hist[((k >> shift) & 255) as usize] += w;
                }
            }
            for d in (0..256).rev() {
                if above + hist[d] >= target {
                    prefix |= (d as u64) << shift;
                    break;
                }
                above += hist[d];
            }
        }
        prefix
    }

    /// The kernel finds the top-k and top-p thresholds by radix select; this file by sorting.
    /// Both must give the same key on any input, ties and masked tokens included.
    #[test]
    fn the_kernels_radix_select_finds_the_sorted_thresholds() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for round in 0..200 {
            let vocab = [1usize, 2, 9, 300, 5000][round % 5];
            let logits: Vec<f32> = (0..vocab)
                .map(|_| match rng.random_range(0..10) {
                    0 => f32::NEG_INFINITY,
                    1 => 1.5, // ties
                    _ => rng.random_range(-30.0f32..30.0),
                })
                .collect();
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if max == f32::NEG_INFINITY {
                continue;
            }
            let inv_temp = rng.random_range(0.1f32..3.0);
            let items: Vec<(u64, u64)> = (0..vocab)
                .map(|i| {
                    let w = fixed(tempered(logits[i], max, inv_temp));
                    (rank_key(logits[i], i as u32), w)
                })
                .collect();
            let mut sorted = items.clone();
            sorted.sort_unstable_by_key(|r| std::cmp::Reverse(r.0));
            let k = rng.random_range(1..=vocab);
            let counts: Vec<(u64, u64)> = items.iter().map(|&(key, _)| (key, 1)).collect();
            let floor = radix_select(&counts, 0, k as u64);
            assert_eq!(floor, sorted[k - 1].0, "round {round}: top-{k}");
            let z_k: u64 = sorted.iter().filter(|r| r.0 >= floor).map(|r| r.1).sum();
            let p = rng.random_range(1..TOP_P_OFF);
            let target = scale_ceil(z_k, p).max(1);
            let mut acc = 0u64;
            let want = sorted
                .iter()
                .take_while(|r| r.0 >= floor)
                .find(|r| {
                    acc += r.1;
                    acc >= target
                })
                .map(|r| r.0);
            assert_eq!(
                Some(radix_select(&items, floor, target)),
                want,
                "round {round}: top-p"
            );
        }
    }
}

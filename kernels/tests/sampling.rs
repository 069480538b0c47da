//! The fused sampler (the CPU reference for `cuda/sampling.cu`) against the straightforward
//! f64 sampler: the same kept set and probabilities, logprobs, top-n and entropy within named
//! tolerances; deterministic for a seed; 100k draws per setting fit the target distribution
//! (chi-square); bad input is a typed error.

use ponder_kernels::sampling::{
    fused_distribution, sample, target_distribution, SampleRequest, SamplingConfig, SamplingError,
    MAX_VOCAB,
};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::common::rng;

/// Absolute tolerance of logprobs and entropy (nats) against the f64 reference.
pub(crate) const LOGPROB_TOL: f32 = 2e-5;
/// Tolerance of a kept token's probability, absolute plus relative to it.
const PROB_TOL: (f64, f64) = (1e-9, 2e-6);
/// Draws per setting in the chi-square test.
const DRAWS: u64 = 100_000;

pub(crate) fn config(temperature: f64, top_k: usize, top_p: f64, min_p: f64) -> SamplingConfig {
    SamplingConfig {
        temperature,
        top_k,
        top_p,
        min_p,
        top_logprobs: 5,
    }
}

/// Settings covering each truncation alone and together.
pub(crate) fn settings() -> Vec<SamplingConfig> {
    vec![
        config(1.0, 0, 1.0, 0.0),
        config(0.7, 10, 1.0, 0.0),
        config(1.3, 0, 0.8, 0.0),
        config(1.0, 0, 1.0, 0.1),
        config(0.9, 25, 0.9, 0.02),
        config(2.0, 3, 0.5, 0.0),
    ]
}

pub(crate) fn logits(rng: &mut ChaCha8Rng, vocab: usize, spread: f32) -> Vec<f32> {
    (0..vocab)
        .map(|_| rng.random_range(-spread..spread))
        .collect()
}

pub(crate) fn one(
    logits: &[f32],
    config: SamplingConfig,
    seed: u64,
    offset: u64,
) -> ponder_kernels::sampling::Sample {
    let row = SampleRequest {
        config,
        seed,
        offset,
    };
    match sample(logits, logits.len(), &[row]) {
        Ok(mut s) => s.remove(0),
        Err(e) => panic!("valid row rejected: {e}"),
    }
}

#[test]
fn fused_distribution_matches_the_straightforward_sampler() {
    let mut rng = rng(60);
    for vocab in [1usize, 2, 7, 40, 1000, 50_257] {
        let x = logits(&mut rng, vocab, 6.0);
        for c in settings() {
            let want = target_distribution(&x, &c).expect("valid");
            let got = fused_distribution(&x, &c).expect("valid");
            for (i, (&g, &w)) in got.iter().zip(&want.probs).enumerate() {
                assert_eq!(
                    g > 0.0,
                    w > 0.0,
                    "vocab {vocab} {c:?}: token {i} kept by one only"
                );
                assert!(
                    (g - w).abs() <= PROB_TOL.0 + PROB_TOL.1 * w,
                    "vocab {vocab} {c:?}: token {i}: {g} vs {w}"
                );
            }
        }
    }
}

#[test]
fn logprobs_top_n_and_entropy_match_the_reference() {
    let mut rng = rng(61);
    for (vocab, spread) in [(3usize, 1.0f32), (64, 8.0), (32_000, 12.0), (151_936, 20.0)] {
        let mut x = logits(&mut rng, vocab, spread);
        if vocab > 3 {
            x[vocab / 2] = f32::NEG_INFINITY;
            x[1] = x[0]; // a tie: the lower id ranks first
        }
        let c = SamplingConfig {
            top_logprobs: 20,
            ..config(0.8, 50, 0.95, 0.0)
        };
        let want = target_distribution(&x, &c).expect("valid");
        let s = one(&x, c, 9, 4);
        assert!(want.probs[s.token as usize] > 0.0, "drew a dropped token");
        assert!((s.logprob - want.logprobs[s.token as usize] as f32).abs() <= LOGPROB_TOL);
        assert!(
            (s.entropy - want.entropy as f32).abs() <= LOGPROB_TOL,
            "{} vs {}",
            s.entropy,
            want.entropy
        );
        let mut order: Vec<usize> = (0..vocab).collect();
        order.sort_by(|&a, &b| x[b].total_cmp(&x[a]).then(a.cmp(&b)));
        assert_eq!(s.top_logprobs.len(), vocab.min(20));
        for (&(id, lp), &want_id) in s.top_logprobs.iter().zip(&order) {
            assert_eq!(id as usize, want_id, "vocab {vocab}: top-n order");
            assert!((lp - want.logprobs[want_id] as f32).abs() <= LOGPROB_TOL);
        }
    }
}

#[test]
fn greedy_picks_the_largest_logit_lowest_id_on_ties() {
    let x = [0.5f32, 2.0, -1.0, 2.0, f32::NEG_INFINITY];
    let s = one(&x, config(0.0, 0, 1.0, 0.0), 1, 2);
    assert_eq!(s.token, 1);
    let x = [-0.0f32, 0.0];
    assert_eq!(
        one(&x, config(0.0, 0, 1.0, 0.0), 1, 2).token,
        0,
        "-0 ties with +0"
    );
}

#[test]
fn a_fixed_seed_is_deterministic_and_batch_invariant() {
    let mut rng = rng(62);
    let x = logits(&mut rng, 500, 4.0);
    let rows: Vec<SampleRequest> = (0..64)
        .map(|i| SampleRequest {
            config: settings()[i % 6],
            seed: 1234 + (i as u64 % 3),
            offset: i as u64,
        })
        .collect();
    let batch: Vec<f32> = rows.iter().flat_map(|_| x.iter().copied()).collect();
    let first = sample(&batch, 500, &rows).expect("valid");
    assert_eq!(first, sample(&batch, 500, &rows).expect("valid"));
    for (row, s) in rows.iter().zip(&first) {
        assert_eq!(
            *s,
            one(&x, row.config, row.seed, row.offset),
            "row alone vs in batch"
        );
    }
    let tokens: std::collections::HashSet<u32> = first.iter().map(|s| s.token).collect();
    assert!(
        tokens.len() > 5,
        "different offsets must give different draws"
    );
}

/// Upper critical value of chi-square with `df` degrees of freedom at significance 1e-3
/// (Wilson-Hilferty).
fn chi2_critical(df: usize) -> f64 {
    let (df, z) = (df as f64, 3.090_232);
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + z * a.sqrt()).powi(3)
}

#[test]
fn hundred_thousand_draws_fit_the_target_distribution() {
    let mut rng = rng(63);
    let x = logits(&mut rng, 40, 3.0);
    for (n, c) in settings().into_iter().enumerate() {
        let target = target_distribution(&x, &c).expect("valid").probs;
        let mut counts = vec![0u64; x.len()];
        for offset in 0..DRAWS {
            let row = SampleRequest {
                config: c,
                seed: 2024,
                offset,
            };
            let s = sample(&x, x.len(), &[row]).expect("valid");
            counts[s[0].token as usize] += 1;
        }
        // Bins with expected count >= 5 stand alone; the rest of the support is pooled.
        let (mut stat, mut bins, mut pool_e, mut pool_o) = (0f64, 0usize, 0f64, 0f64);
        for (i, (&p, &o)) in target.iter().zip(&counts).enumerate() {
            if p == 0.0 {
                assert_eq!(o, 0, "setting {n}: drew token {i}, outside the kept set");
                continue;
            }
            let e = p * DRAWS as f64;
            if e < 5.0 {
                (pool_e, pool_o) = (pool_e + e, pool_o + o as f64);
            } else {
                stat += (o as f64 - e).powi(2) / e;
                bins += 1;
            }
        }
        if pool_e > 0.0 {
            stat += (pool_o - pool_e).powi(2) / pool_e;
            bins += 1;
        }
        if bins > 1 {
            let crit = chi2_critical(bins - 1);
            assert!(
                stat < crit,
                "setting {n} {c:?}: chi-square {stat:.1} >= {crit:.1} ({bins} bins)"
            );
        }
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    let ok = SampleRequest {
        config: SamplingConfig::default(),
        seed: 0,
        offset: 0,
    };
    let x = [0.1f32, f32::NAN, f32::INFINITY];
    assert!(matches!(
        sample(&x, 3, &[ok]),
        Err(SamplingError::NonFiniteLogit {
            row: 0,
            index: 1,
            ..
        })
    ));
    let x = [0.1f32, 0.3, f32::INFINITY, 0.2, 0.1, f32::NAN];
    assert!(matches!(
        sample(&x, 3, &[ok, ok]),
        Err(SamplingError::NonFiniteLogit {
            row: 0,
            index: 2,
            ..
        })
    ));
    let masked = [f32::NEG_INFINITY; 4];
    assert_eq!(
        sample(&masked, 4, &[ok]),
        Err(SamplingError::AllMasked { row: 0 })
    );
    let partly = [f32::NEG_INFINITY, 1.0, f32::NEG_INFINITY];
    for offset in 0..50 {
        assert_eq!(
            sample(&partly, 3, &[SampleRequest { offset, ..ok }]).expect("valid")[0].token,
            1
        );
    }
    assert!(matches!(
        sample(&[0.0; 5], 3, &[ok]),
        Err(SamplingError::LogitsLen {
            got: 5,
            expected: 3,
            ..
        })
    ));
    assert_eq!(sample(&[], 0, &[]), Err(SamplingError::ZeroVocab));
    assert!(matches!(
        sample(&[], MAX_VOCAB + 1, &[]),
        Err(SamplingError::VocabTooLarge { .. })
    ));
    for (c, field) in [
        (config(-1.0, 0, 1.0, 0.0), "temperature"),
        (config(f64::NAN, 0, 1.0, 0.0), "temperature"),
        (config(1e-300, 0, 1.0, 0.0), "temperature"),
        (config(1.0, 0, 0.0, 0.0), "top_p"),
        (config(1.0, 0, 1.5, 0.0), "top_p"),
        (config(1.0, 0, 1.0, 1.0), "min_p"),
        (
            SamplingConfig {
                top_logprobs: 21,
                ..SamplingConfig::default()
            },
            "top_logprobs",
        ),
    ] {
        let row = SampleRequest { config: c, ..ok };
        match sample(&[0.0, 1.0, 0.5, -1.0], 2, &[ok, row]) {
            Err(SamplingError::Param {
                row: 1, field: f, ..
            }) => assert_eq!(f, field),
            other => panic!("{c:?}: expected a {field} error, got {other:?}"),
        }
    }
}

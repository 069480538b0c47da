//! Tests of the sampler: determinism by seed, the truncations, penalties and logit bias,
//! logprobs.

use super::*;

fn sampler(p: SamplingParams) -> Sampler {
    match Sampler::new(p) {
        Ok(s) => s,
        Err(e) => panic!("valid params rejected: {e}"),
    }
}

#[test]
fn greedy_picks_the_max_and_reports_its_logprob() -> Result<()> {
    let mut s = sampler(SamplingParams {
        top_logprobs: 2,
        ..SamplingParams::greedy()
    });
    let out = s.sample(&[0.0, 3.0, 1.0], &[])?;
    assert_eq!(out.token, 1);
    let lp = log_softmax(&[0.0, 3.0, 1.0]);
    assert!((out.logprob - lp[1]).abs() < 1e-6);
    assert_eq!(
        out.top_logprobs.iter().map(|t| t.0).collect::<Vec<_>>(),
        vec![1, 2]
    );
    Ok(())
}

#[test]
fn same_seed_same_tokens_and_different_seeds_differ() -> Result<()> {
    let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32 * 0.3).collect();
    let run = |seed| -> Result<Vec<u32>> {
        let mut s = sampler(SamplingParams {
            seed,
            ..SamplingParams::default()
        });
        (0..64).map(|_| Ok(s.sample(&logits, &[])?.token)).collect()
    };
    assert_eq!(run(7)?, run(7)?);
    assert_ne!(run(7)?, run(8)?);
    Ok(())
}

#[test]
fn top_k_one_is_greedy_and_top_p_min_p_restrict_the_support() -> Result<()> {
    let logits = [2.0, 1.9, -5.0, -6.0];
    let mut k1 = sampler(SamplingParams {
        top_k: 1,
        seed: 3,
        ..SamplingParams::default()
    });
    let mut p = sampler(SamplingParams {
        top_p: 0.9,
        seed: 3,
        ..SamplingParams::default()
    });
    let mut m = sampler(SamplingParams {
        min_p: 0.5,
        seed: 3,
        ..SamplingParams::default()
    });
    for _ in 0..200 {
        assert_eq!(k1.sample(&logits, &[])?.token, 0);
        assert!(p.sample(&logits, &[])?.token < 2);
        assert!(m.sample(&logits, &[])?.token < 2);
    }
    Ok(())
}

#[test]
fn repetition_penalty_moves_greedy_off_a_seen_token() -> Result<()> {
    let mut s = sampler(SamplingParams {
        repetition_penalty: 2.0,
        ..SamplingParams::greedy()
    });
    assert_eq!(s.sample(&[3.0, 2.0], &[0])?.token, 1);
    Ok(())
}

#[test]
fn a_banned_token_is_never_drawn_and_a_plus_100_bias_forces_one() -> Result<()> {
    // Token 1 is the model's favourite by far; a -100 bias bans it, at any temperature.
    let logits = [0.0, 8.0, 0.5, 0.2];
    for temperature in [0.0, 1.0, 2.0] {
        let mut ban = sampler(SamplingParams {
            temperature,
            logit_bias: vec![(1, -100.0)],
            seed: 5,
            ..SamplingParams::default()
        });
        let mut force = sampler(SamplingParams {
            temperature,
            logit_bias: vec![(3, 100.0)],
            seed: 5,
            ..SamplingParams::default()
        });
        for _ in 0..500 {
            assert_ne!(ban.sample(&logits, &[])?.token, 1);
            let forced = force.sample(&logits, &[])?;
            assert_eq!(forced.token, 3);
            // Logprobs stay the model's own, as OpenAI and vLLM report them.
            assert!((forced.logprob - log_softmax(&logits)[3]).abs() < 1e-5);
        }
    }
    Ok(())
}

#[test]
fn presence_and_frequency_count_only_generated_tokens() -> Result<()> {
    // Context: prompt [0, 0, 0] then generated [0, 1, 1]; penalties per OpenAI's formula.
    let context = [0, 0, 0, 0, 1, 1];
    let p = |presence, frequency| SamplingParams {
        presence_penalty: presence,
        frequency_penalty: frequency,
        ..SamplingParams::greedy()
    };
    let draw = |params: SamplingParams| sampler(params).generated_from(3).prepare();
    let logits = [1.0, 1.5, 0.0];
    assert_eq!(
        draw(p(1.0, 0.0)).penalised(&logits, &context),
        vec![0.0, 0.5, 0.0]
    );
    assert_eq!(
        draw(p(0.0, 0.5)).penalised(&logits, &context),
        vec![0.5, 0.5, 0.0]
    );
    // Greedy moves off the most repeated token; the prompt's copies of 0 do not count.
    assert_eq!(draw(p(0.0, 1.0)).sample(&logits, &context)?.token, 0);
    assert_eq!(draw(p(0.0, 0.0)).sample(&logits, &context)?.token, 1);
    // A negative penalty encourages repeats.
    assert_eq!(
        draw(p(-2.0, 0.0)).sample(&[0.0, 1.0, 2.5], &context)?.token,
        1
    );
    Ok(())
}

#[test]
fn penalties_and_biases_replay_by_seed() -> Result<()> {
    let logits: Vec<f32> = (0..300).map(|i| ((i * 37) % 11) as f32 * 0.2).collect();
    let run = |seed| -> Result<Vec<u32>> {
        let mut s = sampler(SamplingParams {
            seed,
            frequency_penalty: 0.7,
            presence_penalty: 0.3,
            repetition_penalty: 1.1,
            logit_bias: vec![(4, 2.0), (9, -100.0)],
            ..SamplingParams::default()
        });
        let mut context = vec![1, 2, 3];
        for _ in 0..64 {
            let t = s.sample(&logits, &context)?.token;
            context.push(t);
        }
        Ok(context)
    };
    assert_eq!(run(7)?, run(7)?);
    assert_ne!(run(7)?, run(8)?);
    assert!(!run(7)?.contains(&9));
    Ok(())
}

#[test]
fn out_of_range_params_name_the_field() {
    for (p, field) in [
        (
            SamplingParams {
                temperature: -1.0,
                ..Default::default()
            },
            "temperature",
        ),
        (
            SamplingParams {
                top_p: 0.0,
                ..Default::default()
            },
            "top_p",
        ),
        (
            SamplingParams {
                min_p: 1.0,
                ..Default::default()
            },
            "min_p",
        ),
        (
            SamplingParams {
                repetition_penalty: 0.0,
                ..Default::default()
            },
            "repetition_penalty",
        ),
        (
            SamplingParams {
                presence_penalty: 2.5,
                ..Default::default()
            },
            "presence_penalty",
        ),
        (
            SamplingParams {
                frequency_penalty: -2.5,
                ..Default::default()
            },
            "frequency_penalty",
        ),
        (
            SamplingParams {
                logit_bias: vec![(3, 101.0)],
                ..Default::default()
            },
            "logit_bias",
        ),
        (
            SamplingParams {
                top_logprobs: 21,
                ..Default::default()
            },
            "top_logprobs",
        ),
    ] {
        match Sampler::new(p) {
            Err(EngineError::InvalidInput { field: f, .. }) => assert_eq!(f, field),
            other => panic!("expected an error naming {field}, got {other:?}"),
        }
    }
}

#[test]
fn plain_draws_over_a_large_vocabulary_land_on_the_tokens_with_weight() -> Result<()> {
    // Three chunks of the two-level walk; only tokens 5, 1500 and 2999 are possible.
    let mut logits = vec![f32::NEG_INFINITY; 3000];
    for (t, l) in [(5usize, 0.0f32), (1500, 1.0), (2999, 0.5)] {
        logits[t] = l;
    }
    let mut s = sampler(SamplingParams {
        seed: 11,
        ..SamplingParams::default()
    });
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..3000 {
        *counts
            .entry(s.sample(&logits, &[])?.token)
            .or_insert(0usize) += 1;
    }
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        vec![5, 1500, 2999]
    );
    // p = e^0, e^1, e^0.5 over their sum: 0.186, 0.506, 0.307.
    for (t, p) in [(5u32, 0.186), (1500, 0.506), (2999, 0.307)] {
        let got = counts[&t] as f64 / 3000.0;
        assert!((got - p).abs() < 0.04, "token {t}: {got} vs {p}");
    }
    Ok(())
}

#[test]
fn entropy_of_uniform_is_log_n() -> Result<()> {
    let mut s = sampler(SamplingParams::greedy());
    let out = s.sample(&[1.0; 8], &[])?;
    assert!((out.entropy - (8f32).ln()).abs() < 1e-5);
    Ok(())
}

/// The nucleus as a full sort finds it: the shortest most-likely-first prefix reaching
/// `target` (all candidates if none does).
fn nucleus_by_full_sort(mut cands: Vec<(u32, f32)>, target: f32) -> Vec<(u32, f32)> {
    cands.sort_unstable_by(by_weight_desc);
    let mut acc = 0.0;
    let keep = cands
        .iter()
        .position(|c| {
            acc += c.1;
            acc >= target
        })
        .map_or(cands.len(), |i| i + 1);
    cands.truncate(keep);
    cands
}

proptest::proptest! {
    /// Selecting the top few and widening keeps exactly the prefix a full sort keeps, in its
    /// order — over peaked and flat distributions, ties, and vocabularies from 1 to 5,000.
    #[test]
    fn nucleus_keeps_the_prefix_a_full_sort_keeps(
        logits in proptest::collection::vec(-30.0f32..10.0, 1..5000),
        sharpness in 0.0f32..4.0,
        top_p in 0.01f64..1.0,
        ties in 0usize..4,
    ) {
        let weights: Vec<f32> = logits
            .iter()
            .enumerate()
            // Every `ties + 2`th token shares a weight with its neighbour.
            .map(|(i, l)| (if i % (ties + 2) == 1 { logits[i - 1] } else { *l } * sharpness).exp())
            .collect();
        let cands: Vec<(u32, f32)> = weights.iter().enumerate().map(|(i, w)| (i as u32, *w)).collect();
        let target = top_p as f32 * weights.iter().sum::<f32>();
        let mut fast = cands.clone();
        nucleus(&mut fast, target);
        proptest::prop_assert_eq!(fast, nucleus_by_full_sort(cands, target));
    }
}

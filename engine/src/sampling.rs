//! Choosing the next token from logits: greedy, temperature, top-k, top-p, min-p, the
//! repetition penalty (CTRL's, as vLLM and HF apply it: over prompt and output), OpenAI's
//! presence and frequency penalties (over the tokens generated so far, as vLLM counts them) and
//! `logit_bias` (added to the logits; -100 bans a token), with a seeded ChaCha RNG so a seed
//! replays a generation token for token. Without penalties or biases the logits are never
//! copied: the plain path is one pass over the vocabulary.
//!
//! Every sample also reports what strategies need to judge it: the chosen token's logprob, the
//! top alternatives and the entropy, all under the model's own distribution (the raw logits,
//! before penalty, temperature or truncation), as OpenAI's and vLLM's `logprobs` do.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use ponder_kernels::math;

use super::error::{EngineError, Result};

/// Tokens per chunk of the plain draw's two-level walk.
const DRAW_CHUNK: usize = 1024;

/// Most alternatives a caller may ask for per token (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// How to pick tokens. The defaults sample from the model's distribution unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f64,
    /// Keep the `k` most likely tokens; 0 disables.
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `p`; 1 disables.
    pub top_p: f64,
    /// Drop tokens less likely than `min_p` times the most likely one; 0 disables.
    pub min_p: f64,
    /// >1 discourages tokens already in the context; 1 disables.
    pub repetition_penalty: f64,
    /// Subtracted once from the logit of every token generated so far; in [-2, 2], 0 disables.
    pub presence_penalty: f64,
    /// Subtracted from a token's logit once per time it was generated so far; in [-2, 2].
    pub frequency_penalty: f64,
    /// Added to the logits of these tokens (each in [-100, 100]; -100 bans the token), sorted
    /// by token id, each token once.
    pub logit_bias: Vec<(u32, f32)>,
    /// RNG seed.
    pub seed: u64,
    /// Alternatives to report per token (at most [`MAX_TOP_LOGPROBS`]).
    pub top_logprobs: usize,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: Vec::new(),
            seed: 0,
            top_logprobs: 0,
        }
    }
}

/// A bias at or below this bans its token (OpenAI: "-100 should result in a ban").
pub(crate) const LOGIT_BIAS_BAN: f32 = -100.0;

impl SamplingParams {
    /// Greedy decoding.
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            ..Self::default()
        }
    }

    /// Whether top-k, top-p or min-p cut the candidates.
    fn restricted(&self) -> bool {
        self.top_k > 0 || self.top_p < 1.0 || self.min_p > 0.0
    }

    /// Whether a penalty or a bias changes the logits before the draw.
    fn adjusts(&self) -> bool {
        self.repetition_penalty != 1.0
            || self.presence_penalty != 0.0
            || self.frequency_penalty != 0.0
            || !self.logit_bias.is_empty()
    }

    /// Checks every knob is in range; the error names the field and the limit.
    pub fn validate(&self) -> Result<()> {
        let bad =
            |field: &'static str, reason: String| Err(EngineError::InvalidInput { field, reason });
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return bad(
                "temperature",
                format!("{} must be a finite number >= 0", self.temperature),
            );
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", format!("{} must be in (0, 1]", self.top_p));
        }
        if !(0.0..1.0).contains(&self.min_p) {
            return bad("min_p", format!("{} must be in [0, 1)", self.min_p));
        }
        if !self.repetition_penalty.is_finite() || self.repetition_penalty <= 0.0 {
            return bad(
                "repetition_penalty",
                format!("{} must be a finite number > 0", self.repetition_penalty),
            );
        }
        for (field, v) in [
            ("presence_penalty", self.presence_penalty),
            ("frequency_penalty", self.frequency_penalty),
        ] {
            if !(-2.0..=2.0).contains(&v) {
                return bad(field, format!("{v} must be in [-2, 2]"));
            }
        }
        if let Some((t, b)) = self
            .logit_bias
            .iter()
            .find(|(_, b)| !(-100.0..=100.0).contains(b))
        {
            return bad(
                "logit_bias",
                format!("{b} (token {t}) must be in [-100, 100]"),
            );
        }
        if self.logit_bias.windows(2).any(|w| w[0].0 >= w[1].0) {
            return bad(
                "logit_bias",
                "tokens must be sorted by id, each once".to_string(),
            );
        }
        if self.top_logprobs > MAX_TOP_LOGPROBS {
            return bad(
                "top_logprobs",
                format!(
                    "{} exceeds the limit of {MAX_TOP_LOGPROBS}",
                    self.top_logprobs
                ),
            );
        }
        Ok(())
    }
}

/// One chosen token and what the model thought of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampledToken {
    /// The token id.
    pub token: u32,
    /// Its log-probability under the model.
    pub logprob: f32,
    /// The most likely tokens and their log-probabilities, best first.
    pub top_logprobs: Vec<(u32, f32)>,
    /// Entropy of the model's next-token distribution, in nats.
    pub entropy: f32,
}

/// A seeded sampler for one sequence.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    rng: ChaCha8Rng,
    /// Context positions from here on were generated (what presence and frequency count).
    generated_from: usize,
}

impl Sampler {
    /// Validates `params` and seeds the RNG.
    pub fn new(params: SamplingParams) -> Result<Self> {
        params.validate()?;
        let rng = ChaCha8Rng::seed_from_u64(params.seed);
        Ok(Self {
            params,
            rng,
            generated_from: 0,
        })
    }

    /// Counts only `context[prompt_len..]` as generated for the presence and frequency
    /// penalties (by default the whole context counts).
    pub fn generated_from(mut self, prompt_len: usize) -> Self {
        self.generated_from = prompt_len;
        self
    }

    /// The parameters in use.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Picks the next token. `context` holds the tokens seen so far (for the repetition penalty).
    pub fn sample(&mut self, logits: &[f32], context: &[u32]) -> Result<SampledToken> {
        check_logits(logits)?;
        self.prepare().sample_checked(logits, context)
    }

    /// Takes this sample's random number now (the only state a sample changes), so the rest of
    /// the work can run on another thread: `prepare().sample(logits, context)` is
    /// `sample(logits, context)`, except that bad logits are reported after the RNG moved on.
    pub fn prepare(&mut self) -> Draw {
        let r = (self.params.temperature > 0.0).then(|| self.rng.random::<f32>());
        Draw {
            params: self.params.clone(),
            r,
            generated_from: self.generated_from,
        }
    }
}

/// One sample with its random number already drawn ([`Sampler::prepare`]): a pure function of
/// the logits and the context.
#[derive(Debug, Clone)]
pub struct Draw {
    params: SamplingParams,
    /// Uniform in `[0, 1)`; `None` for greedy.
    r: Option<f32>,
    /// As [`Sampler::generated_from`].
    generated_from: usize,
}

/// Rejects logits no token can be drawn from.
fn check_logits(logits: &[f32]) -> Result<()> {
    if logits.is_empty() {
        return Err(EngineError::InvalidInput {
            field: "logits",
            reason: "empty".into(),
        });
    }
    // One pass flags NaN (no early exit, so it vectorises).
    if logits.iter().fold(false, |nan, x| nan | x.is_nan()) {
        return Err(EngineError::InvalidInput {
            field: "logits",
            reason: "contain NaN".into(),
        });
    }
    Ok(())
}

impl Draw {
    /// Picks the token, as [`Sampler::sample`] would have.
    pub fn sample(&self, logits: &[f32], context: &[u32]) -> Result<SampledToken> {
        check_logits(logits)?;
        self.sample_checked(logits, context)
    }

    fn sample_checked(&self, logits: &[f32], context: &[u32]) -> Result<SampledToken> {
        // One pass over the vocabulary (`Pass`, 16 lanes wide, nothing allocated) serves the
        // log-probabilities, the entropy and, when only the temperature shapes the draw, the
        // draw's sums; the draw then recomputes the weights of the one chunk it lands in.
        // (Three allocating passes took 300 us per row, a tenth of a 16-row decode step.)
        let max = math::max(logits);
        let plain = !self.params.adjusts() && !self.params.restricted();
        let scale =
            (self.params.temperature > 0.0 && plain).then(|| 1.0 / self.params.temperature as f32);
        let pass = Pass::over(logits, max, scale);
        let log_sum = pass.z.ln() + max;
        // `H = -sum p ln p` with `p = w / z`, `ln p = (l - max) - ln z`; 0 when nothing has weight.
        let entropy = if pass.z > 0.0 {
            pass.z.ln() - pass.dot / pass.z
        } else {
            0.0
        };
        let top_logprobs = top_n(logits, self.params.top_logprobs)
            .into_iter()
            .map(|(t, l)| (t, l - log_sum))
            .collect();
        let logprob_of = |t: u32| {
            logits
                .get(t as usize)
                .map_or(f32::NEG_INFINITY, |&l| l - log_sum)
        };

        let token = match (self.r, scale) {
            (None, _) => {
                if !self.params.adjusts() {
                    argmax(logits)
                } else {
                    argmax(&self.penalised(logits, context))
                }
            }
            (Some(r), Some(scale)) => pass.draw(logits, max, scale, r * pass.total),
            (Some(r), None) => {
                let scale = 1.0 / self.params.temperature as f32;
                // Scaling by 1/T > 0 keeps the maximum where it was.
                let weights = if !self.params.adjusts() {
                    shifted_exp(logits, max, scale)
                } else {
                    let adjusted = self.penalised(logits, context);
                    shifted_exp(&adjusted, math::max(&adjusted), scale)
                };
                let total = math::sum(&weights);
                self.draw(weights, total, r)
            }
        };
        Ok(SampledToken {
            token,
            logprob: logprob_of(token),
            top_logprobs,
            entropy,
        })
    }

    /// `logits` with the penalties and biases applied: the repetition penalty to every token
    /// of `context`; presence and frequency (`l - presence - count * frequency`, OpenAI's
    /// formula) to the tokens generated so far; then each bias added (a ban sets `-inf`).
    fn penalised(&self, logits: &[f32], context: &[u32]) -> Vec<f32> {
        let p = &self.params;
        let mut adjusted = logits.to_vec();
        if p.repetition_penalty != 1.0 {
            let penalty = p.repetition_penalty as f32;
            let mut seen = context.to_vec();
            seen.sort_unstable();
            seen.dedup();
            for t in seen {
                if let Some(l) = adjusted.get_mut(t as usize) {
                    *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
                }
            }
        }
        if p.presence_penalty != 0.0 || p.frequency_penalty != 0.0 {
            let mut generated = context
                .get(self.generated_from..)
                .unwrap_or_default()
                .to_vec();
            generated.sort_unstable();
            for run in generated.chunk_by(|a, b| a == b) {
                if let Some(l) = run.first().and_then(|&t| adjusted.get_mut(t as usize)) {
                    *l -= (p.presence_penalty + run.len() as f64 * p.frequency_penalty) as f32;
                }
            }
        }
        for &(t, bias) in &p.logit_bias {
            if let Some(l) = adjusted.get_mut(t as usize) {
                *l = if bias <= LOGIT_BIAS_BAN {
                    f32::NEG_INFINITY
                } else {
                    *l + bias
                };
            }
        }
        adjusted
    }

    /// Draws a token with probability proportional to `weights` (unnormalised; `total` is their
    /// sum in index order) after top-k, top-p and min-p; with none of them, walks `weights` in
    /// index order. `r` is the uniform number in `[0, 1)`.
    fn draw(&self, weights: Vec<f32>, total: f32, r: f32) -> u32 {
        if !self.params.restricted() {
            let mut u = r * total;
            for (i, &w) in weights.iter().enumerate() {
                if w > 0.0 {
                    if u < w {
                        return i as u32;
                    }
                    u -= w;
                }
            }
            return weights.iter().rposition(|&w| w > 0.0).unwrap_or(0) as u32;
        }
        let mut cands: Vec<(u32, f32)> = weights
            .into_iter()
            .enumerate()
            .map(|(i, w)| (i as u32, w))
            .collect();
        if self.params.top_k > 0 && self.params.top_k < cands.len() {
            let k = self.params.top_k;
            cands.select_nth_unstable_by(k - 1, by_weight_desc);
            cands.truncate(k);
        }
        // Only nucleus and min-p need the candidates in order (top-k alone walks them as
        // left), and only the ones they keep: those are found without sorting the vocabulary.
        if self.params.top_p < 1.0 {
            let target = self.params.top_p as f32 * cands.iter().map(|c| c.1).sum::<f32>();
            nucleus(&mut cands, target);
        }
        if self.params.min_p > 0.0 {
            let max = cands.iter().map(|c| c.1).fold(0.0, f32::max);
            let floor = self.params.min_p as f32 * max;
            cands.retain(|c| c.1 >= floor);
            if self.params.top_p >= 1.0 {
                cands.sort_unstable_by(by_weight_desc);
            }
        }
        let total: f32 = cands.iter().map(|c| c.1).sum();
        let mut u = r * total;
        for c in &cands {
            if u < c.1 {
                return c.0;
            }
            u -= c.1;
        }
        cands.last().map_or(0, |c| c.0)
    }
}

/// Most likely first; equal weights by token id, so the order is total and replays.
fn by_weight_desc(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// Candidates examined first when looking for the nucleus; grows ×4 until it holds it.
const NUCLEUS_FIRST_LOOK: usize = 64;

/// Keeps the shortest most-likely-first prefix of `cands` whose weights add up to `target`
/// (all of them if none does), sorted most likely first — the prefix a full sort would give,
/// found by selecting the top few, sorting those and widening only when they fall short.
fn nucleus(cands: &mut Vec<(u32, f32)>, target: f32) {
    let mut look = NUCLEUS_FIRST_LOOK.min(cands.len());
    loop {
        if look < cands.len() {
            cands.select_nth_unstable_by(look - 1, by_weight_desc);
        }
        let top = &mut cands[..look];
        top.sort_unstable_by(by_weight_desc);
        let mut acc = 0.0;
        let reached = top.iter().position(|c| {
            acc += c.1;
            acc >= target
        });
        if let Some(i) = reached {
            cands.truncate(i + 1);
            return;
        }
        if look == cands.len() {
            return;
        }
        look = (look * 4).min(cands.len());
    }
}

/// What one pass over the vocabulary gives a sample: 16 lanes wide, every exponential
/// computed once, nothing allocated per logit.
#[derive(Debug)]
struct Pass {
    /// `sum e^(l - max)`, added in `math::sum`'s order.
    z: f32,
    /// `sum e^(l - max) (l - max)` over finite logits (the entropy is `ln z - dot / z`).
    dot: f32,
    /// With a draw scale `s`: `sum e^((l - max) s)` in `math::sum`'s order; else 0.
    total: f32,
    /// With a draw scale: each `DRAW_CHUNK` of those weights summed as `math::sum` would.
    chunk_mass: Vec<f32>,
}

impl Pass {
    /// One pass over `logits` (`max` is their maximum); `scale` asks for the draw's weights
    /// `e^((l - max) scale)` as well (their sums; `draw` recomputes one chunk of them).
    fn over(logits: &[f32], max: f32, scale: Option<f32>) -> Self {
        // Chunk by chunk through L1-sized buffers, each loop a plain map or lane sum over a
        // slice (what the compiler vectorises reliably; one fused loop body did not).
        let mut z = [0f32; 16];
        let mut dot = [0f32; 16];
        let mut total = [0f32; 16];
        let mut chunk_mass = Vec::new();
        let mut w1 = [0f32; DRAW_CHUNK];
        let mut ws = [0f32; DRAW_CHUNK];
        for chunk in logits.chunks(DRAW_CHUNK) {
            let n = chunk.len();
            let (w1, ws) = (&mut w1[..n], &mut ws[..n]);
            for (w, &l) in w1.iter_mut().zip(chunk) {
                *w = weight(l, max, 1.0);
            }
            add_lanes(&mut z, w1);
            let mut terms = [0f32; DRAW_CHUNK];
            for ((t, &w), &l) in terms.iter_mut().zip(w1.iter()).zip(chunk) {
                *t = if l == f32::NEG_INFINITY {
                    0.0
                } else {
                    w * (l - max)
                };
            }
            add_lanes(&mut dot, &terms[..n]);
            if let Some(s) = scale {
                let ws: &[f32] = if s == 1.0 {
                    w1
                } else {
                    for (w, &l) in ws.iter_mut().zip(chunk) {
                        *w = weight(l, max, s);
                    }
                    ws
                };
                add_lanes(&mut total, ws);
                chunk_mass.push(math::sum(ws));
            }
        }
        Self {
            z: math::tree_sum(z),
            dot: math::tree_sum(dot),
            total: math::tree_sum(total),
            chunk_mass,
        }
    }

    /// The token where `u` (uniform in `[0, total)`) lands, walking the weights
    /// `e^((l - max) scale)` in index order: a chunk's mass at a time, then token by token
    /// inside the chunk it lands in.
    fn draw(&self, logits: &[f32], max: f32, scale: f32, mut u: f32) -> u32 {
        let mut last = None;
        for (c, (&mass, chunk)) in self
            .chunk_mass
            .iter()
            .zip(logits.chunks(DRAW_CHUNK))
            .enumerate()
        {
            if u >= mass {
                u -= mass;
                if mass > 0.0 {
                    last = Some((c, chunk));
                }
                continue;
            }
            for (i, &l) in chunk.iter().enumerate() {
                let w = weight(l, max, scale);
                if w > 0.0 {
                    if u < w {
                        return (c * DRAW_CHUNK + i) as u32;
                    }
                    u -= w;
                }
            }
            last = Some((c, chunk));
            break;
        }
        // Rounding left `u` past the end: the last token with any weight.
        last.and_then(|(c, chunk)| {
            chunk
                .iter()
                .rposition(|&l| weight(l, max, scale) > 0.0)
                .map(|i| (c * DRAW_CHUNK + i) as u32)
        })
        .unwrap_or(0)
    }
}

/// Adds `xs` into `math::sum`'s lanes: lane `i` takes elements `i, i + 16, ...`; a rest (only a
/// vocabulary's last chunk has one) goes to the first lanes, as `math::sum` adds it.
#[inline(always)]
fn add_lanes(lanes: &mut [f32; 16], xs: &[f32]) {
    let vecs = xs.chunks_exact(16);
    let rest = vecs.remainder();
    for v in vecs {
        for (lane, &x) in lanes.iter_mut().zip(v) {
            *lane += x;
        }
    }
    for (lane, &x) in lanes.iter_mut().zip(rest) {
        *lane += x;
    }
}

/// `e^((l - max) * scale)`; exactly 0 for a `-inf` logit (a token ruled out), which the
/// clamped fast `exp` alone would give a tiny weight.
#[inline(always)]
fn weight(l: f32, max: f32, scale: f32) -> f32 {
    if l == f32::NEG_INFINITY {
        0.0
    } else {
        ponder_kernels::math::exp((l - max) * scale)
    }
}

/// `e^((l - max) * scale)` per logit; exactly 0 for a `-inf` logit (a token ruled out), which the
/// clamped fast `exp` alone would give a tiny weight.
fn shifted_exp(logits: &[f32], max: f32, scale: f32) -> Vec<f32> {
    logits.iter().map(|&l| weight(l, max, scale)).collect()
}

/// Index of the largest value; the lowest index wins ties.
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best as u32
}

/// Numerically stable `log(softmax(x))`.
pub fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = math::max(logits);
    let log_sum = math::sum(&shifted_exp(logits, max, 1.0)).ln() + max;
    logits.iter().map(|&l| l - log_sum).collect()
}

/// The `n` largest values with their indices, largest first (lowest index first among ties).
fn top_n(values: &[f32], n: usize) -> Vec<(u32, f32)> {
    if n == 0 || values.is_empty() {
        return Vec::new();
    }
    let mut idx: Vec<(u32, f32)> = values
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, l))
        .collect();
    let n = n.min(idx.len());
    idx.select_nth_unstable_by(n - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    idx.truncate(n);
    idx.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    idx
}

#[cfg(test)]
#[path = "sampling_tests.rs"]
mod tests;

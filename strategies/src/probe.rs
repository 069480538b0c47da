//! Answer probes (Dynasor-CoT's "probe-in-the-middle"): ask the model for its answer so far
//! by forking a branch, appending [`ANSWER_PROBE`] and decoding greedily until the `\boxed{`
//! closes. The fork shares the branch's KV, so a probe costs its own few tokens, charged as
//! probe tokens. A probe can be split ([`Context::probe_fork`], [`Context::probe_read`]) so it
//! is submitted together with the branch's next step.

use ponder_verifiers::extract_answer;

use crate::budget::Charge;
use crate::context::{Branch, Context, StepSpec, ANSWER_PROBE};
use crate::error::{GeneratorError, Result};
use crate::generator::{Sampling, StopKind};

impl Context {
    /// Asks the model for its answer so far: [`Context::probe_fork`] then
    /// [`Context::probe_read`]. Charged as probe tokens.
    pub async fn probe_answer(&self, branch: &Branch, max_tokens: usize) -> Result<Option<String>> {
        let probe = self.probe_fork(branch)?;
        self.probe_read(probe, max_tokens).await
    }

    /// The first half of a probe, done at once: forks `branch` and appends [`ANSWER_PROBE`].
    /// A strategy that submits the probe together with the branch's next step forks first
    /// (so the probe reads the branch as it is now), then awaits [`Context::probe_read`] and
    /// the step together.
    pub fn probe_fork(&self, branch: &Branch) -> Result<Branch> {
        let probe = self.fork(branch)?;
        if let Err(e) = self.generator.append(probe.seq, ANSWER_PROBE) {
            self.release(&probe);
            return Err(e);
        }
        Ok(probe)
    }

    /// The second half of a probe: decodes the fork made by [`Context::probe_fork`] greedily
    /// until the `\boxed{` it ends in is closed — braces balanced, so `\frac{1}{2}` is read
    /// whole — or `max_tokens` are spent, then releases the fork. Each decode stops at a `}`;
    /// an inner brace closes a group, not the box, so decoding resumes from there. Charged as
    /// probe tokens.
    pub async fn probe_read(&self, probe: Branch, max_tokens: usize) -> Result<Option<String>> {
        let mut text = String::new();
        let mut left = max_tokens;
        let mut current = probe.clone();
        let result: Result<()> = async {
            while left > 0 {
                let spec = StepSpec {
                    max_tokens: left,
                    stop: vec!["}".into()],
                    sampling: Sampling::greedy(0),
                };
                let (next, ext) = self
                    .extend_as(vec![(current.clone(), 0)], &spec, Charge::Probe)
                    .await?
                    .into_iter()
                    .next()
                    .ok_or_else(|| GeneratorError::Missing {
                        what: "probe sample",
                    })?;
                text.push_str(&ext.text);
                left = left.saturating_sub(ext.tokens.len());
                current = next;
                if ext.stop != StopKind::Stop || ext.tokens.is_empty() || box_closed(&text) {
                    break;
                }
            }
            Ok(())
        }
        .await;
        self.release(&probe);
        result?;
        Ok(extract_answer(&format!("\\boxed{{{text}")))
    }
}

/// Whether the text after an opening `\boxed{` closes it: braces balanced back to depth 0.
fn box_closed(text: &str) -> bool {
    let mut depth = 1i32;
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_box_closes_when_its_braces_balance() {
        assert!(!box_closed("\\frac{1}"));
        assert!(box_closed("\\frac{1}{2}}"));
        assert!(box_closed("7}"));
        assert!(!box_closed("7"));
    }
}

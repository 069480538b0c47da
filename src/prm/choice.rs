//! Which verifier scores a search's candidates, as chosen on the command line (`ponder reason
//! --verifier …`, `ponder serve --verifier …`): none, the generator judging its own steps
//! ([`LlmPrm`]), or a PRM checkpoint run by an executor of its own ([`ModelPrm`]).
//!
//! [`SearchVerifier`] is how a server holds the choice: a checkpoint PRM is started once and
//! shared, while the LLM-as-PRM is built per search on that search's own generator, so its
//! paid prefixes and step-score cache live and die with the search — a search's charges never
//! depend on other requests, and a long-running server's memory stays flat.
//!
//! This module only parses the choice and builds the verifier; it must not know about requests
//! or strategies.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use ponder_strategies::Generator;
use ponder_verifiers::Verifier;

use super::{LlmPrm, LlmPrmConfig, ModelPrm, PrmOptions};
use crate::models::FittedModel;

/// A verifier named on the command line.
///
/// ```
/// use ponder::prm::VerifierChoice;
///
/// assert_eq!("none".parse::<VerifierChoice>(), Ok(VerifierChoice::None));
/// assert_eq!("calc".parse::<VerifierChoice>(), Ok(VerifierChoice::Calc));
/// assert_eq!("llm-prm".parse::<VerifierChoice>(), Ok(VerifierChoice::LlmPrm));
/// assert_eq!(
///     "qwen-prm:/models/Qwen2.5-Math-PRM-7B".parse::<VerifierChoice>(),
///     Ok(VerifierChoice::QwenPrm("/models/Qwen2.5-Math-PRM-7B".into()))
/// );
/// assert!("prm".parse::<VerifierChoice>().unwrap_err().contains("llm-prm"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum VerifierChoice {
    /// No verifier: strategies select by votes and confidence.
    #[default]
    None,
    /// The exact calculation check: the equalities each step writes, evaluated (no model).
    Calc,
    /// The generator asked whether each step is correct (P("Yes")), sharing its executor.
    LlmPrm,
    /// The learned outcome verifier (a model file; `learned` alone: the shipped one).
    Learned(Option<PathBuf>),
    /// A Qwen2.5-Math-PRM-style reward-head checkpoint (safetensors directory).
    QwenPrm(PathBuf),
    /// A Math-Shepherd-style token-logit checkpoint (safetensors directory or GGUF).
    ShepherdPrm(PathBuf),
}

const FORMS: &str = "none, calc, llm-prm, learned[:FILE], qwen-prm:DIR, shepherd-prm:PATH";

impl FromStr for VerifierChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let path = |p: &str, name: &str| {
            if p.is_empty() {
                Err(format!("--verifier {name}: needs a path after `{name}:`"))
            } else {
                Ok(PathBuf::from(p))
            }
        };
        match s.split_once(':') {
            None if s == "none" => Ok(Self::None),
            None if s == "calc" => Ok(Self::Calc),
            None if s == "llm-prm" => Ok(Self::LlmPrm),
            None if s == "learned" => Ok(Self::Learned(None)),
            Some(("learned", p)) => path(p, "learned").map(|p| Self::Learned(Some(p))),
            Some(("qwen-prm", p)) => path(p, "qwen-prm").map(Self::QwenPrm),
            Some(("shepherd-prm", p)) => path(p, "shepherd-prm").map(Self::ShepherdPrm),
            _ => Err(format!("unknown verifier `{s}`: expected one of {FORMS}")),
        }
    }
}

impl fmt::Display for VerifierChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Calc => f.write_str("calc"),
            Self::LlmPrm => f.write_str("llm-prm"),
            Self::Learned(None) => f.write_str("learned"),
            Self::Learned(Some(p)) => write!(f, "learned:{}", p.display()),
            Self::QwenPrm(p) => write!(f, "qwen-prm:{}", p.display()),
            Self::ShepherdPrm(p) => write!(f, "shepherd-prm:{}", p.display()),
        }
    }
}

impl VerifierChoice {
    /// Builds the verifier of one search; `generator` is the one the LLM-as-PRM judges with,
    /// `served` the model it runs (a learned verifier fitted on another's is refused). A
    /// checkpoint PRM loads its model and starts its own executor here (an error names the
    /// path).
    pub async fn build(
        &self,
        generator: Arc<dyn Generator>,
        served: &FittedModel,
    ) -> Result<Option<Arc<dyn Verifier>>, String> {
        match self.search_verifier(served)? {
            Some(v) => v.for_search(generator).await.map(Some),
            None => Ok(None),
        }
    }

    /// What a server holds to give each search its verifier (see [`SearchVerifier`]), for
    /// candidates of `served` (the learned verifier applies to the generator it was fitted
    /// on only). A checkpoint PRM is started here.
    pub fn search_verifier(&self, served: &FittedModel) -> Result<Option<SearchVerifier>, String> {
        let checkpoint = |opts: PrmOptions| {
            let path = opts.model.display().to_string();
            ModelPrm::start(&opts)
                .map(|p| Some(SearchVerifier::Shared(Arc::new(p))))
                .map_err(|e| format!("--verifier {self}: cannot start the PRM at {path}: {e}"))
        };
        match self {
            Self::None => Ok(None),
            Self::Calc => Ok(Some(SearchVerifier::Shared(Arc::new(
                ponder_verifiers::CalcCheck::default(),
            )))),
            Self::LlmPrm => Ok(Some(SearchVerifier::LlmPrm(LlmPrmConfig::default()))),
            Self::Learned(path) => {
                let path = path
                    .clone()
                    .unwrap_or_else(crate::learned_verifier::default_model_path);
                crate::learned_verifier::LearnedVerifier::load(
                    &path,
                    &crate::models::default_embedder_dir(),
                    served,
                )
                .map(|v| Some(SearchVerifier::Shared(Arc::new(v))))
                .map_err(|e| format!("--verifier {self}: {e}"))
            }
            Self::QwenPrm(path) => checkpoint(PrmOptions::qwen_math_prm(path.clone())),
            Self::ShepherdPrm(path) => checkpoint(PrmOptions::math_shepherd(path.clone())),
        }
    }
}

/// Where each search gets its verifier.
#[derive(Clone)]
pub enum SearchVerifier {
    /// One verifier shared by every search (a checkpoint PRM with its own executor).
    Shared(Arc<dyn Verifier>),
    /// An [`LlmPrm`] built per search on the generator it is given, its state (paid prefixes,
    /// step cache) dropped with the search.
    LlmPrm(LlmPrmConfig),
}

impl fmt::Debug for SearchVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Shared(v) => f.debug_tuple("Shared").field(&v.name()).finish(),
            Self::LlmPrm(c) => f.debug_tuple("LlmPrm").field(c).finish(),
        }
    }
}

impl SearchVerifier {
    /// The verifier of one search; an LLM-as-PRM judges with `generator`, which should be that
    /// search's own (a fresh one per search).
    pub async fn for_search(
        &self,
        generator: Arc<dyn Generator>,
    ) -> Result<Arc<dyn Verifier>, String> {
        match self {
            Self::Shared(v) => Ok(Arc::clone(v)),
            Self::LlmPrm(config) => LlmPrm::new(generator, config.clone())
                .await
                .map(|p| Arc::new(p) as Arc<dyn Verifier>)
                .map_err(|e| format!("--verifier llm-prm: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_round_trips_and_bad_forms_name_the_valid_ones() {
        for s in [
            "none",
            "calc",
            "llm-prm",
            "learned",
            "learned:/a/outcome.json",
            "qwen-prm:/a/b",
            "shepherd-prm:x.gguf",
        ] {
            let c: VerifierChoice = s.parse().expect(s);
            assert_eq!(c.to_string(), s);
        }
        for bad in ["", "prm", "qwen-prm:", "llm-prm:x", "orm:/a", "learned:"] {
            let e = bad.parse::<VerifierChoice>().expect_err(bad);
            assert!(
                e.contains("llm-prm") || e.contains("needs a path"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_missing_checkpoint_is_an_error_naming_it() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let generator: Arc<dyn Generator> =
            Arc::new(ponder_strategies::fake::FakeGenerator::new(|_| {
                ponder_strategies::fake::FakeChunk::last("", 0.0)
            }));
        let choice = VerifierChoice::QwenPrm("/nonexistent/prm".into());
        let e = rt
            .block_on(choice.build(
                generator,
                &FittedModel {
                    name: "m".into(),
                    sha256: None,
                },
            ))
            .map(|_| ())
            .expect_err("missing");
        assert!(e.contains("/nonexistent/prm"), "{e}");
    }

    /// A learned verifier fitted on one model's candidates is refused for another's (its
    /// agreement, confidence and length features are that model's), naming both; one that
    /// records none is applied.
    #[test]
    fn a_learned_verifier_of_another_model_is_refused_naming_both() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/verifier/gsm_gen-outcome.json");
        let mut model = crate::learned_verifier::OutcomeModel::load(&fixture).expect("fixture");
        let model_of = |name: &str, sha: char| FittedModel {
            name: name.into(),
            sha256: Some(sha.to_string().repeat(64)),
        };
        let served = model_of("served.gguf", 'b');
        let path = dir.path().join("outcome.json");
        let choice = VerifierChoice::Learned(Some(path.clone()));

        model.generator = Some(model_of("fitted.gguf", 'a'));
        model.save(&path).expect("save");
        let e = choice
            .search_verifier(&served)
            .map(|_| ())
            .expect_err("foreign");
        assert!(
            e.contains("--verifier learned:")
                && e.contains("fitted.gguf")
                && e.contains("served.gguf"),
            "{e}"
        );

        model.generator = Some(served.clone());
        model.save(&path).expect("save");
        assert!(matches!(choice.search_verifier(&served), Ok(Some(_))));
        model.generator = None;
        model.save(&path).expect("save");
        assert!(matches!(choice.search_verifier(&served), Ok(Some(_))));
    }
}

//! The strategy registry: names → typed parameter structs → `Box<dyn Strategy>`.
//!
//! Each strategy has a parameter struct (serde, `deny_unknown_fields`, `Default`) that is its
//! typed config; registering it gives the registry a factory that parses JSON parameters into
//! that struct, validates them and builds the strategy. The service builds strategies by name
//! from requests (`strategy`, `strategy_params`), lists them with their defaults
//! (`GET /v1/strategies`), and users add their own with [`Registry::register`].

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Result, StrategyError};
use crate::strategy::Strategy;

type Factory = Box<dyn Fn(serde_json::Value) -> Result<Box<dyn Strategy>> + Send + Sync>;

/// A registered strategy, as listed to users.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StrategyInfo {
    /// Its name.
    pub name: String,
    /// One line on what it does.
    pub description: String,
    /// Its parameters with their default values.
    pub defaults: serde_json::Value,
}

struct Entry {
    info: StrategyInfo,
    factory: Factory,
}

/// Named strategy factories.
#[derive(Default)]
pub struct Registry {
    entries: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.entries.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `name`: its parameters `P` are parsed from JSON (missing fields take
    /// `P::default()`), then `build` validates them and makes the strategy. Replaces an earlier
    /// registration of the same name.
    pub fn register<P, F>(&mut self, name: &str, description: &str, build: F)
    where
        P: DeserializeOwned + Serialize + Default + 'static,
        F: Fn(P) -> Result<Box<dyn Strategy>> + Send + Sync + 'static,
    {
        let defaults = serde_json::to_value(P::default()).unwrap_or(serde_json::Value::Null);
        let owner = name.to_string();
        let factory: Factory = Box::new(move |value| {
            let value = if value.is_null() {
                serde_json::json!({})
            } else {
                value
            };
            let params: P = serde_json::from_value(value)
                .map_err(|e| StrategyError::invalid(&owner, "strategy_params", e.to_string()))?;
            build(params)
        });
        self.entries.insert(
            name.to_string(),
            Entry {
                info: StrategyInfo {
                    name: name.into(),
                    description: description.into(),
                    defaults,
                },
                factory,
            },
        );
    }

    /// Builds the strategy `name` from JSON parameters (`null` or `{}` for the defaults).
    pub fn build(&self, name: &str, params: serde_json::Value) -> Result<Box<dyn Strategy>> {
        match self.entries.get(name) {
            Some(e) => (e.factory)(params),
            None => Err(StrategyError::UnknownStrategy {
                name: name.into(),
                valid: self.names(),
            }),
        }
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    /// Every strategy with its description and defaults, sorted by name.
    pub fn list(&self) -> Vec<StrategyInfo> {
        self.entries.values().map(|e| e.info.clone()).collect()
    }

    /// Whether `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }
}

//! Parameters bound to `$name` at execution, so user text is never spliced
//! into a statement.

use std::collections::HashMap;

use serde_json::Value;

use crate::error::{Error, Result};

/// A parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// Text, for strings (seed text, ids, regexes, globs).
    Text(String),
    /// A number.
    Number(f64),
    /// A query vector, for `NEAR($name)`: the caller's own embedding of
    /// the question, searched for as it is (scaled to unit length) instead
    /// of embedding text.
    Vector(Vec<f32>),
}

/// Parameters bound to `$name` (or `$1`, named `"1"`) at execution, so
/// user text is never spliced into a statement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    values: HashMap<String, Param>,
}

impl Params {
    /// No parameters.
    pub fn new() -> Params {
        Params::default()
    }

    /// Binds `$name` to text.
    pub fn text(mut self, name: impl Into<String>, value: impl Into<String>) -> Params {
        self.values.insert(name.into(), Param::Text(value.into()));
        self
    }

    /// Binds `$name` to a number.
    pub fn number(mut self, name: impl Into<String>, value: f64) -> Params {
        self.values.insert(name.into(), Param::Number(value));
        self
    }

    /// Binds `$name` to a query vector (see [`Param::Vector`]).
    pub fn vector(mut self, name: impl Into<String>, value: Vec<f32>) -> Params {
        self.values.insert(name.into(), Param::Vector(value));
        self
    }

    /// Parameters from a JSON object of strings, numbers and arrays of
    /// numbers (vectors), keyed by name (without the `$`), as the HTTP API
    /// and the MCP `query` tool take them; any other value is a usage
    /// error naming the parameter.
    pub fn from_json(values: &serde_json::Map<String, Value>) -> Result<Params> {
        values
            .iter()
            .try_fold(Params::new(), |params, (name, value)| match value {
                Value::String(text) => Ok(params.text(name, text.as_str())),
                Value::Number(n) => Ok(params.number(name, n.as_f64().unwrap_or(f64::NAN))),
                Value::Array(items) => {
                    let numbers: Option<Vec<f32>> =
                        items.iter().map(|x| x.as_f64().map(|x| x as f32)).collect();
                    numbers.map(|v| params.vector(name, v)).ok_or_else(|| {
                        Error::Usage(format!(
                            "parameter ${name} is an array holding more than numbers: a vector is an array of numbers"
                        ))
                    })
                }
                other => Err(Error::Usage(format!(
                    "parameter ${name} is {other}: give a string, a number or an array of numbers"
                ))),
            })
    }

    /// The value bound to `$name`.
    pub fn get(&self, name: &str) -> Option<&Param> {
        self.values.get(name)
    }

    /// Every binding, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Param)> {
        self.values
            .iter()
            .map(|(name, value)| (name.as_str(), value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_parameters_bind_strings_numbers_and_vectors_and_refuse_the_rest() {
        let values = serde_json::json!({"q": "ramen", "n": 128});
        let params = Params::from_json(values.as_object().unwrap()).unwrap();
        assert_eq!(params.get("q"), Some(&Param::Text("ramen".into())));
        assert_eq!(params.get("n"), Some(&Param::Number(128.0)));
        let values = serde_json::json!({"v": [0.5, -1, 2e-3]});
        let params = Params::from_json(values.as_object().unwrap()).unwrap();
        assert_eq!(params.get("v"), Some(&Param::Vector(vec![0.5, -1.0, 2e-3])));
        let values = serde_json::json!({"q": true});
        let refused = Params::from_json(values.as_object().unwrap()).unwrap_err();
        assert!(matches!(refused, Error::Usage(_)));
        assert_eq!(
            refused.to_string(),
            "parameter $q is true: give a string, a number or an array of numbers"
        );
        let values = serde_json::json!({"v": [0.5, "x"]});
        let refused = Params::from_json(values.as_object().unwrap()).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("array holding more than numbers")
        );
    }
}

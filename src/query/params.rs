//! Parameters bound to `$name` at execution, so user text is never spliced
//! into a statement.

use std::collections::HashMap;

/// A parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// Text, for strings (seed text, ids, regexes, globs).
    Text(String),
    /// A number.
    Number(f64),
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

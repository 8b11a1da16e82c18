//! [`LlmCost`]: what the language-model steps of a build cost.

use serde::{Deserialize, Serialize};

/// Language-model work spent on a document (or summed over many): the
/// calls made, their tokens and time, and the units that fell back to the
/// model-free path because the model's replies stayed invalid.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmCost {
    /// Chat requests answered.
    pub calls: u32,
    /// Prompt tokens, as the server counted them.
    pub prompt_tokens: u64,
    /// Completion tokens, as the server counted them.
    pub completion_tokens: u64,
    /// Wall-clock milliseconds spent waiting for the model.
    pub millis: u64,
    /// Units (documents for the structurer, windows for the IP writer)
    /// built by the model-free path after the model's replies failed
    /// validation.
    pub fallbacks: u32,
    /// Written information points dropped because they could not be
    /// linked to any node of their window.
    #[serde(default)]
    pub dropped_points: u32,
}

impl LlmCost {
    /// Adds `other` to this cost.
    pub fn add(&mut self, other: &LlmCost) {
        // Counts come from servers: saturate rather than overflow.
        self.calls = self.calls.saturating_add(other.calls);
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.millis = self.millis.saturating_add(other.millis);
        self.fallbacks = self.fallbacks.saturating_add(other.fallbacks);
        self.dropped_points = self.dropped_points.saturating_add(other.dropped_points);
    }

    /// Whether no model work was done or attempted.
    pub fn is_zero(&self) -> bool {
        *self == LlmCost::default()
    }
}

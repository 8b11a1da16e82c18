//! PECAN's information-point writer through a chat model: each window of
//! lower-level nodes goes in as text, short bullet points come out, one
//! event or fact each, in the model's own words with full names instead
//! of pronouns. Nothing it writes touches a coordinate: a written point is
//! stored with its text beside the DAG's EDU spans, and [`super::build`]
//! links it to the window's nodes by attention.
//!
//! - **Batching.** Every window of a level is asked at once.
//! - **Validation.** A reply must be JSON of the requested schema: at least
//!   one point and at most [`IpWriterOptions::max_points`] (fewer for a
//!   small budget, and fewer than the window's nodes), each non-blank, at most [`IpWriterOptions::point_chars`]
//!   characters, without control characters, all together at most twice
//!   the window's token budget. A refused reply is asked again, telling the
//!   model why, up to [`IpWriterOptions::invalid_retries`] times.
//! - **Linking.** A point none of whose words (English function words
//!   aside) occurs in its window has nothing there to attend to: it cannot
//!   be linked to any of the window's nodes, so it is dropped and counted
//!   ([`LlmCost::dropped_points`]). Repeated points are kept once.
//! - **Fallback.** A window whose replies stay refused, or whose points are
//!   all dropped, gets the model-free points instead (counted in
//!   [`LlmCost::fallbacks`]).

use std::collections::HashSet;

use serde::Deserialize;

use crate::compute::chat::{ChatError, ChatModel, ChatRequest, ask_checked, clip, parse_reply};
use crate::compute::embed::hashed::words;
use crate::ingest::tree::llm::FUNCTION_WORDS;
use crate::model::cost::LlmCost;

/// How the writer asks and what it accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IpWriterOptions {
    /// Most points asked of one window.
    pub max_points: u32,
    /// Most characters of one point.
    pub point_chars: usize,
    /// Characters of one lower node shown; longer nodes are cut with `…`.
    pub node_chars: usize,
    /// Times a refused reply is asked again before the window falls back.
    pub invalid_retries: u32,
}

impl Default for IpWriterOptions {
    fn default() -> Self {
        IpWriterOptions {
            max_points: 12,
            point_chars: 300,
            node_chars: 2_000,
            invalid_retries: 2,
        }
    }
}

/// One window to write points for: its lower nodes' text, in document
/// order, and about how many tokens its points may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointWindow {
    /// Each lower node's text.
    pub nodes: Vec<String>,
    /// Token budget of the window's points.
    pub budget: u32,
}

/// One window's written points, or `None` when it falls back.
pub type WrittenPoints = Option<Vec<String>>;

/// Writes information points with a chat model (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct LlmIpWriter<'a> {
    chat: &'a dyn ChatModel,
    options: IpWriterOptions,
}

/// The reply's JSON, as the schema asks for it.
#[derive(Deserialize)]
struct Reply {
    points: Vec<String>,
}

/// The system message of every request.
const SYSTEM: &str = "You write the information points of a passage. \
The user gives the passage in numbered parts. Reply with JSON only: {\"points\": [\"...\", ...]}. \
Each point is one short sentence stating one event or fact the passage states, \
self-contained: use full names instead of pronouns, keep numbers, dates and names exactly \
as written, and add nothing the passage does not say. Cover the passage's main points in \
its order, most important first within each part.";

/// Tokens a typical point takes, for how many points a budget allows.
const TOKENS_PER_POINT: u32 = 24;

impl<'a> LlmIpWriter<'a> {
    /// A writer asking `chat`, with `options`.
    pub fn new(chat: &'a dyn ChatModel, options: IpWriterOptions) -> LlmIpWriter<'a> {
        LlmIpWriter { chat, options }
    }

    /// Each window's points (`None`: the window falls back to the
    /// model-free points; the cost counts it), with what the calls cost.
    /// Fails only when the model could not be asked.
    pub fn write(
        &self,
        windows: &[PointWindow],
    ) -> Result<(Vec<WrittenPoints>, LlmCost), ChatError> {
        let requests: Vec<ChatRequest> = windows.iter().map(|w| self.request(w)).collect();
        let (replies, mut cost) = ask_checked(
            self.chat,
            &requests,
            self.options.invalid_retries,
            |w, content| self.check(content, &windows[w]),
        )?;
        let points = (replies.into_iter().zip(windows))
            .map(|(reply, window)| {
                let kept = reply.map(|points| {
                    let (kept, dropped) = linked(points, window);
                    cost.dropped_points = cost.dropped_points.saturating_add(dropped);
                    kept
                });
                let kept = kept.filter(|points| !points.is_empty());
                if kept.is_none() {
                    cost.fallbacks = cost.fallbacks.saturating_add(1);
                }
                kept
            })
            .collect();
        Ok((points, cost))
    }

    /// Most points a window is asked for: one per [`TOKENS_PER_POINT`]
    /// of its budget, at most [`IpWriterOptions::max_points`], and fewer
    /// than its nodes (so the level shrinks), but at least one.
    fn most_points(&self, window: &PointWindow) -> u32 {
        let fewer = (window.nodes.len() as u32).saturating_sub(1);
        (window.budget / TOKENS_PER_POINT)
            .min(self.options.max_points)
            .min(fewer)
            .max(1)
    }

    /// The (first) request for one window.
    fn request(&self, window: &PointWindow) -> ChatRequest {
        let mut user = String::new();
        for (n, node) in window.nodes.iter().enumerate() {
            let shown = clip(node, self.options.node_chars);
            user.push_str(&format!("Part {}: {shown}\n", n + 1));
        }
        let most = self.most_points(window);
        user.push_str(&format!("\nWrite at most {most} points."));
        let properties = serde_json::json!({
            "points": {
                "type": "array",
                "minItems": 1,
                "maxItems": most,
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": self.options.point_chars
                }
            }
        });
        let max_tokens = (64 + 2 * window.budget).min(4_096);
        ChatRequest::for_object(SYSTEM, user, "information_points", properties, max_tokens)
    }

    /// Reads and checks one window's reply: its points, trimmed, or why
    /// the reply is refused.
    fn check(&self, content: &str, window: &PointWindow) -> Result<Vec<String>, String> {
        let reply: Reply = parse_reply(content)?;
        let most = self.most_points(window);
        if reply.points.is_empty() {
            return Err("the reply has no points".into());
        }
        if reply.points.len() > most as usize {
            return Err(format!(
                "the reply has {} points; write at most {most}",
                reply.points.len()
            ));
        }
        let mut tokens = 0u32;
        let mut points = Vec::with_capacity(reply.points.len());
        for (n, point) in reply.points.iter().enumerate() {
            let n = n + 1;
            let point = point.trim();
            if point.is_empty() {
                return Err(format!("point {n} is blank"));
            }
            if point.chars().count() > self.options.point_chars {
                return Err(format!(
                    "point {n} is longer than {} characters",
                    self.options.point_chars
                ));
            }
            if point.chars().any(char::is_control) {
                return Err(format!("point {n} has control characters"));
            }
            tokens = tokens.saturating_add(crate::model::tokens::count(point));
            points.push(point.to_owned());
        }
        let limit = window.budget.saturating_mul(2).max(TOKENS_PER_POINT);
        if tokens > limit {
            return Err(format!(
                "the points take {tokens} tokens; keep them under {limit}"
            ));
        }
        Ok(points)
    }
}

/// The points that share a word with `window` (function words aside), each
/// once (compared case-folded), and how many were dropped for sharing none.
/// A repeat is left out without counting.
fn linked(points: Vec<String>, window: &PointWindow) -> (Vec<String>, u32) {
    let function: HashSet<&str> = FUNCTION_WORDS.iter().copied().collect();
    let present: HashSet<String> = window.nodes.iter().flat_map(|n| words(n)).collect();
    let mut seen = HashSet::new();
    let mut dropped = 0u32;
    let mut kept = Vec::with_capacity(points.len());
    for point in points {
        if !seen.insert(point.to_lowercase()) {
            continue;
        }
        let grounded = words(&point)
            .iter()
            .any(|w| !function.contains(w.as_str()) && present.contains(w));
        if grounded {
            kept.push(point);
        } else {
            dropped += 1;
        }
    }
    (kept, dropped)
}

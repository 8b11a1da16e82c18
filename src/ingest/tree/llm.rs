//! LingoEDU's structurer through a chat model: the document's EDUs go in
//! numbered, its outline comes out as sections with closed EDU spans, and
//! nothing the model writes reaches the tree unchecked.
//!
//! - **Windows.** A document whose numbered EDUs exceed
//!   [`StructurerOptions::window_tokens`] is cut into windows that overlap
//!   by [`StructurerOptions::overlap`] of their EDUs; all windows are asked
//!   at once.
//! - **Validation.** Each window's reply must be JSON of the requested
//!   schema whose sections, read as a LingoEDU outline over the window,
//!   [`parse_outline`] accepts: levels 1 to [`StructurerOptions::max_level`]
//!   without skips, spans inside the window, nested in their parent and
//!   after their previous sibling. A rejected reply is asked again, telling
//!   the model why, up to [`StructurerOptions::invalid_retries`] times; a
//!   window still rejected makes the whole document fall back to the
//!   model-free [`LayoutTreeBuilder`](crate::ingest::tree::LayoutTreeBuilder)
//!   (counted in [`LlmCost::fallbacks`]).
//! - **Stitching.** Between two windows the cut is the middle of their
//!   overlap: each window contributes the sections that start on its side.
//! - **Covering.** The top-level sections are made to tile the document:
//!   the first starts at EDU 0, each ends where the next starts, the last
//!   ends at the last EDU. Deeper sections are clipped into their parent
//!   and after their previous sibling (one left empty is dropped, and its
//!   children move up a level). The result is parsed by [`parse_outline`]
//!   once more, so the tree is valid by the same rules as any outline.
//! - **Titles: extractive or replaced.** A title is kept only when every
//!   word of it (a run of letters and digits, compared case-folded) occurs
//!   in its section's own text; otherwise the section gets the model-free
//!   extractive title (the opening words of its most central EDU). So
//!   titles never hold words the document does not have.

use std::collections::HashSet;
use std::ops::Range;

use serde::Deserialize;

use crate::compute::chat::{ChatError, ChatModel, ChatRequest};
use crate::ingest::tree::builder::StructureInput;
use crate::ingest::tree::outline::parse_outline;
use crate::ingest::tree::title::extractive_title;
use crate::model::cost::LlmCost;
use crate::model::edu::Span;
use crate::model::tree::Tree;

/// How the structurer asks and what it accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StructurerOptions {
    /// Most o200k tokens of numbered EDUs shown in one request.
    pub window_tokens: u32,
    /// Share of a window's EDUs the next window repeats.
    pub overlap: f32,
    /// Deepest section level accepted.
    pub max_level: u16,
    /// Times a rejected reply is asked again before the document falls back.
    pub invalid_retries: u32,
    /// Characters of one EDU shown; longer EDUs are cut with `…`.
    pub edu_chars: usize,
}

impl Default for StructurerOptions {
    fn default() -> Self {
        StructurerOptions {
            window_tokens: 1_500,
            overlap: 0.15,
            max_level: 3,
            invalid_retries: 2,
            edu_chars: 400,
        }
    }
}

/// Builds document trees with a chat model (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct LlmStructurer<'a> {
    chat: &'a dyn ChatModel,
    options: StructurerOptions,
}

/// One section of an outline: a level (1 = top), a closed EDU span
/// (0-based, document-wide) and a title.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Section {
    level: u16,
    span: Span,
    title: String,
}

/// The reply's JSON, as the schema asks for it.
#[derive(Deserialize)]
struct Reply {
    sections: Vec<RawSection>,
}

#[derive(Deserialize)]
struct RawSection {
    level: i64,
    first: i64,
    last: i64,
    title: String,
}

/// Answers the system message states once for every request.
const SYSTEM: &str = "You divide a document into sections, like a table of contents. \
The user lists the document's sentences, each after its number in brackets. \
Reply with JSON only: {\"sections\": [...]}, the sections in document order, each \
{\"level\": L, \"first\": F, \"last\": T, \"title\": \"...\"}. F and T are the numbers of the \
section's first and last sentence (inclusive). The level-1 sections follow each other and \
together cover every sentence shown; a level L+1 section lies inside the level L section \
before it. A title names the section's topic in a few words taken from its own sentences.";

impl<'a> LlmStructurer<'a> {
    /// A structurer asking `chat`, with `options`.
    pub fn new(chat: &'a dyn ChatModel, options: StructurerOptions) -> LlmStructurer<'a> {
        LlmStructurer { chat, options }
    }

    /// The document's tree from the model, or `None` when its replies stayed
    /// invalid (the caller falls back; the cost counts the fallback), with
    /// what the calls cost. Fails only when the model could not be asked.
    pub fn structure(
        &self,
        input: &StructureInput<'_>,
    ) -> Result<(Option<Tree>, LlmCost), ChatError> {
        let count = input.edus.len() as u32;
        let mut cost = LlmCost::default();
        if count == 0 {
            return Ok((None, cost));
        }
        let windows = self.windows(input);
        let mut outlines: Vec<Option<Vec<Section>>> = vec![None; windows.len()];
        let mut rejections: Vec<Option<String>> = vec![None; windows.len()];
        for attempt in 0..=self.options.invalid_retries {
            let pending: Vec<usize> = (0..windows.len())
                .filter(|&w| outlines[w].is_none())
                .collect();
            if pending.is_empty() {
                break;
            }
            let requests: Vec<ChatRequest> = pending
                .iter()
                .map(|&w| self.request(input, &windows[w], rejections[w].as_deref(), attempt))
                .collect();
            let (replies, spent) = self.chat.chat(&requests)?;
            cost.add(&spent);
            for (&w, reply) in pending.iter().zip(replies) {
                let checked = if reply.truncated {
                    Err("the reply was cut off at its token limit; give fewer sections".into())
                } else {
                    self.check_window(&reply.content, &windows[w])
                };
                match checked {
                    Ok(sections) => outlines[w] = Some(sections),
                    Err(why) => {
                        tracing::debug!(window = w, attempt, "structurer reply rejected: {why}");
                        rejections[w] = Some(why);
                    }
                }
            }
        }
        let Some(outlines) = outlines.into_iter().collect::<Option<Vec<_>>>() else {
            cost.fallbacks += 1;
            return Ok((None, cost));
        };
        let sections = cover(stitch(&windows, outlines), count);
        let sections = sections
            .into_iter()
            .map(|s| Section {
                title: checked_title(input, s.span, s.title),
                ..s
            })
            .collect::<Vec<_>>();
        match parse_outline(&outline_text(&sections), count, false) {
            Ok(tree) => Ok((Some(tree), cost)),
            Err(error) => {
                tracing::warn!("the stitched outline did not parse ({error}); falling back");
                cost.fallbacks += 1;
                Ok((None, cost))
            }
        }
    }

    /// The EDU ranges asked about: consecutive windows of at most
    /// `window_tokens` shown tokens (at least one EDU each), each repeating
    /// the last `overlap` share of the one before.
    fn windows(&self, input: &StructureInput<'_>) -> Vec<Range<u32>> {
        let count = input.edus.len() as u32;
        let shown = |e: u32| -> u32 {
            let edu = &input.edus[e as usize];
            let cap = (self.options.edu_chars / 3).max(1) as u32;
            edu.tokens.min(cap) + 4
        };
        let mut windows = Vec::new();
        let mut start = 0u32;
        loop {
            let mut end = start;
            let mut tokens = 0u32;
            while end < count && (end == start || tokens + shown(end) <= self.options.window_tokens)
            {
                tokens += shown(end);
                end += 1;
            }
            windows.push(start..end);
            if end >= count {
                return windows;
            }
            let overlap = ((end - start) as f32 * self.options.overlap).round() as u32;
            start = (end - overlap.min(end - start - 1)).max(start + 1);
        }
    }

    /// The request for one window; `rejection` says why the previous reply
    /// was refused, and retries sample a little, so a greedy model's next
    /// answer can differ.
    fn request(
        &self,
        input: &StructureInput<'_>,
        window: &Range<u32>,
        rejection: Option<&str>,
        attempt: u32,
    ) -> ChatRequest {
        let mut user = String::new();
        for e in window.clone() {
            let edu = &input.edus[e as usize];
            let text = input.text[edu.start as usize..edu.end as usize].trim();
            let mut shown: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if shown.chars().count() > self.options.edu_chars {
                shown = shown.chars().take(self.options.edu_chars).collect();
                shown.push('…');
            }
            user.push_str(&format!("[{}] {shown}\n", e + 1));
        }
        if let Some(why) = rejection {
            user.push_str(&format!(
                "\nYour previous answer was rejected: {why}. Answer again, following the rules exactly."
            ));
        }
        let (first, last) = (window.start + 1, window.end);
        let most = (window.len() as u32).min(32);
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "sections": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": most,
                    "items": {
                        "type": "object",
                        "properties": {
                            "level": {"type": "integer", "minimum": 1, "maximum": self.options.max_level},
                            "first": {"type": "integer", "minimum": first, "maximum": last},
                            "last": {"type": "integer", "minimum": first, "maximum": last},
                            "title": {"type": "string", "minLength": 1, "maxLength": 80}
                        },
                        "required": ["level", "first", "last", "title"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["sections"],
            "additionalProperties": false
        });
        ChatRequest {
            system: SYSTEM.into(),
            user,
            schema_name: "outline",
            schema,
            max_tokens: (64 + 48 * most).min(4_096),
            temperature: if attempt == 0 { 0.0 } else { 0.4 },
        }
    }

    /// Reads and checks one window's reply: its sections (document-wide,
    /// 0-based), or why the reply is refused.
    fn check_window(&self, content: &str, window: &Range<u32>) -> Result<Vec<Section>, String> {
        let reply: Reply = serde_json::from_str(content)
            .map_err(|e| format!("the reply is not the requested JSON ({e})"))?;
        if reply.sections.is_empty() {
            return Err("the reply has no sections".into());
        }
        let (first, last) = (i64::from(window.start) + 1, i64::from(window.end));
        let mut sections = Vec::with_capacity(reply.sections.len());
        for (n, raw) in reply.sections.into_iter().enumerate() {
            let n = n + 1;
            if !(1..=i64::from(self.options.max_level)).contains(&raw.level) {
                return Err(format!(
                    "section {n} has level {}; levels run from 1 to {}",
                    raw.level, self.options.max_level
                ));
            }
            if raw.first < first || raw.last > last || raw.first > raw.last {
                return Err(format!(
                    "section {n} spans sentences {}-{}, not within {first}-{last} in order",
                    raw.first, raw.last
                ));
            }
            let title = raw.title.split_whitespace().collect::<Vec<_>>().join(" ");
            if title.is_empty() {
                return Err(format!("section {n} has no title"));
            }
            sections.push(Section {
                level: raw.level as u16,
                span: Span::new(raw.first as u32 - 1, raw.last as u32 - 1),
                title,
            });
        }
        check_nesting(&sections, window)?;
        Ok(sections)
    }
}

/// Checks that a window's sections form an outline (the rules of
/// [`parse_outline`]: no skipped level, each inside the open section above
/// it and after its previous sibling), saying what is wrong in the model's
/// own numbering (sections from 1, sentences as shown).
fn check_nesting(sections: &[Section], window: &Range<u32>) -> Result<(), String> {
    let shown = |span: Span| format!("sentences {}-{}", span.first + 1, span.last + 1);
    // Open sections: (level, span, number, end of its last child).
    let mut open: Vec<(u16, Span, usize, Option<u32>)> =
        vec![(0, Span::new(window.start, window.end - 1), 0, None)];
    for (n, section) in sections.iter().enumerate() {
        let n = n + 1;
        while open.last().is_some_and(|o| o.0 >= section.level) {
            open.pop();
        }
        let Some(parent) = open.last_mut() else {
            return Err(format!("section {n} has level {}", section.level));
        };
        let (level, span) = (section.level, section.span);
        if level > parent.0 + 1 {
            return Err(format!(
                "section {n} has level {level} but no level-{} section holds it",
                level - 1
            ));
        }
        if !parent.1.contains(&span) {
            return Err(format!(
                "section {n} ({}) is not inside section {} ({}) above it",
                shown(span),
                parent.2,
                shown(parent.1)
            ));
        }
        if let Some(end) = parent.3
            && end >= span.first
        {
            return Err(format!(
                "section {n} ({}) starts before the section before it ends (sentence {})",
                shown(span),
                end + 1
            ));
        }
        parent.3 = Some(span.last);
        open.push((level, span, n, None));
    }
    Ok(())
}

/// Joins the windows' outlines: window `k` gives the sections that start
/// between the middles of its overlaps with its neighbours.
fn stitch(windows: &[Range<u32>], outlines: Vec<Vec<Section>>) -> Vec<Section> {
    let cut = |k: usize| -> u32 {
        // The cut between windows k and k + 1.
        (windows[k + 1].start + windows[k].end) / 2
    };
    let mut sections = Vec::new();
    for (k, outline) in outlines.into_iter().enumerate() {
        let from = if k == 0 { 0 } else { cut(k - 1) };
        let to = if k + 1 == windows.len() {
            u32::MAX
        } else {
            cut(k)
        };
        sections.extend(
            outline
                .into_iter()
                .filter(|s| (from..to).contains(&s.span.first)),
        );
    }
    sections
}

/// Makes the top-level sections tile `0..count` and clips deeper sections
/// into their parents and after their previous siblings (see the module
/// docs); levels are renumbered so none is skipped.
fn cover(mut sections: Vec<Section>, count: u32) -> Vec<Section> {
    sections.sort_by_key(|s| s.span.first);
    // A stitched outline may open below level 1; its first section is
    // promoted, and every level at most one below the one before it.
    let mut previous = 0u16;
    for s in &mut sections {
        s.level = s.level.min(previous + 1).max(1);
        previous = s.level;
    }
    let mut tops: Vec<usize> = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        if s.level == 1
            && tops
                .last()
                .is_none_or(|&t| sections[t].span.first < s.span.first)
        {
            tops.push(i);
        }
    }
    if tops.is_empty() {
        return Vec::new();
    }
    for (n, &t) in tops.iter().enumerate() {
        let first = if n == 0 { 0 } else { sections[t].span.first };
        let last = tops
            .get(n + 1)
            .map_or(count - 1, |&next| sections[next].span.first - 1);
        sections[t].span = Span::new(first, last);
    }
    let top_set: HashSet<usize> = tops.iter().copied().collect();
    // The stack holds (declared level, kept index) of open sections; each
    // keeps the end of its last kept child.
    let mut kept: Vec<Section> = Vec::with_capacity(sections.len());
    let mut stack: Vec<(u16, usize, Option<u32>)> = Vec::new();
    for (i, s) in sections.into_iter().enumerate() {
        if s.level == 1 && !top_set.contains(&i) {
            // A second level-1 section starting where another does.
            continue;
        }
        while stack.last().is_some_and(|&(level, ..)| level >= s.level) {
            stack.pop();
        }
        let (parent_span, after, level) = match stack.last() {
            Some(&(_, parent, last_child)) => {
                (kept[parent].span, last_child, kept[parent].level + 1)
            }
            None => (Span::new(0, count - 1), None, 1),
        };
        let first = s
            .span
            .first
            .max(parent_span.first)
            .max(after.map_or(0, |a| a + 1));
        let last = s.span.last.min(parent_span.last);
        if first > last {
            continue;
        }
        if let Some(top) = stack.last_mut() {
            top.2 = Some(last);
        }
        kept.push(Section {
            level,
            span: Span::new(first, last),
            title: s.title,
        });
        stack.push((s.level, kept.len() - 1, None));
    }
    kept
}

/// `title` when every word of it occurs in the section's own text, else the
/// section's extractive title.
fn checked_title(input: &StructureInput<'_>, span: Span, title: String) -> String {
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let (first, last) = (
        &input.edus[span.first as usize],
        &input.edus[span.last as usize],
    );
    let own: HashSet<String> = words(&input.text[first.start as usize..last.end as usize])
        .into_iter()
        .collect();
    let title_words = words(&title);
    if !title_words.is_empty() && title_words.iter().all(|w| own.contains(w)) {
        title
    } else {
        extractive_title(input.text, input.edus, span)
    }
}

/// Sections as LingoEDU outline lines, `## [first-last] Title` (0-based).
fn outline_text(sections: &[Section]) -> String {
    sections
        .iter()
        .map(|s| {
            format!(
                "{} [{}-{}] {}\n",
                "#".repeat(s.level as usize),
                s.span.first,
                s.span.last,
                s.title
            )
        })
        .collect()
}

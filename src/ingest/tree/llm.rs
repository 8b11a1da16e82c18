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
//! - **Titles: extractive or replaced.** A title is kept only when it is at
//!   most [`TITLE_CHARS`] characters, every word of it (a run of letters
//!   and digits, compared case-folded) occurs in its section's own text,
//!   English function words ([`FUNCTION_WORDS`]: `and`, `of`, `the`, …)
//!   excepted, and every other character of it (punctuation, symbols;
//!   never a control character) occurs there too; otherwise the section
//!   gets the model-free extractive title (the opening words of its most
//!   central EDU). So a title holds no word or symbol its section lacks,
//!   beyond those function words.

use std::collections::HashSet;
use std::ops::Range;

use serde::Deserialize;

use crate::compute::chat::{
    ChatError, ChatModel, ChatRequest, ask_checked, clip, parse_reply, strict_object,
};
use crate::compute::embed::hashed::words;
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

/// Words a title may use without its section having them: they join the
/// section's own words and carry no facts.
pub const FUNCTION_WORDS: &[&str] = &[
    "a", "an", "and", "as", "at", "by", "for", "from", "in", "into", "of", "on", "or", "the", "to",
    "vs", "with",
];

/// The system message of every request.
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
        if count == 0 {
            return Ok((None, LlmCost::default()));
        }
        let windows = self.windows(input);
        let requests: Vec<ChatRequest> = windows.iter().map(|w| self.request(input, w)).collect();
        let (outlines, mut cost) = ask_checked(
            self.chat,
            &requests,
            self.options.invalid_retries,
            |w, content| self.check_window(content, &windows[w]),
        )?;
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

    /// The (first) request for one window.
    fn request(&self, input: &StructureInput<'_>, window: &Range<u32>) -> ChatRequest {
        let mut user = String::new();
        for e in window.clone() {
            let edu = &input.edus[e as usize];
            let text = &input.text[edu.start as usize..edu.end as usize];
            let shown = clip(text, self.options.edu_chars);
            user.push_str(&format!("[{}] {shown}\n", e + 1));
        }
        let (first, last) = (window.start + 1, window.end);
        let most = (window.len() as u32).min(32);
        let section = strict_object(serde_json::json!({
            "level": {"type": "integer", "minimum": 1, "maximum": self.options.max_level},
            "first": {"type": "integer", "minimum": first, "maximum": last},
            "last": {"type": "integer", "minimum": first, "maximum": last},
            "title": {"type": "string", "minLength": 1, "maxLength": 80}
        }));
        let properties = serde_json::json!({
            "sections": {"type": "array", "minItems": 1, "maxItems": most, "items": section}
        });
        let max_tokens = (64 + 48 * most).min(4_096);
        ChatRequest::for_object(SYSTEM, user, "outline", properties, max_tokens)
    }

    /// Reads and checks one window's reply: its sections (document-wide,
    /// 0-based), or why the reply is refused.
    fn check_window(&self, content: &str, window: &Range<u32>) -> Result<Vec<Section>, String> {
        let reply: Reply = parse_reply(content)?;
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

/// Most characters of a title the model wrote.
pub const TITLE_CHARS: usize = 80;

/// `title` when it is short and made of the section's own text: every word
/// of it (function words aside) a word of the section, and every other
/// character (punctuation, symbols) one the section has; else the
/// section's extractive title.
fn checked_title(input: &StructureInput<'_>, span: Span, title: String) -> String {
    let (first, last) = (
        &input.edus[span.first as usize],
        &input.edus[span.last as usize],
    );
    let text = &input.text[first.start as usize..last.end as usize];
    let own: HashSet<String> = words(text).into_iter().collect();
    let title_words = words(&title);
    let content: Vec<&String> = title_words
        .iter()
        .filter(|w| !FUNCTION_WORDS.contains(&w.as_str()))
        .collect();
    let symbols_are_own = title
        .chars()
        .filter(|c| !c.is_alphanumeric() && *c != ' ')
        .all(|c| !c.is_control() && text.contains(c));
    if title.chars().count() <= TITLE_CHARS
        && symbols_are_own
        && !content.is_empty()
        && content.iter().all(|w| own.contains(*w))
    {
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

#[cfg(test)]
mod tests {
    use std::fmt;
    use std::sync::Mutex;

    use proptest::prelude::*;

    use super::*;
    use crate::compute::chat::ChatReply;
    use crate::ingest::segment::split_edus;
    use crate::model::edu::{Edu, EduKind};

    /// A text cut into EDUs, as the pipeline's segmenter cuts it.
    struct Document {
        text: String,
        edus: Vec<Edu>,
    }

    fn segmented(text: String) -> Document {
        let edus = split_edus(&text, 0..text.len())
            .into_iter()
            .enumerate()
            .map(|(id, range)| Edu {
                id: id as u32,
                start: range.start as u32,
                end: range.end as u32,
                tokens: crate::model::tokens::count(&text[range]),
                kind: EduKind::Text,
            })
            .collect();
        Document { text, edus }
    }

    /// A chat model answering from a script: `answer(request)` for every
    /// request, which it records.
    struct Scripted<F> {
        answer: F,
        seen: Mutex<Vec<ChatRequest>>,
    }

    impl<F: Fn(&ChatRequest, usize) -> (String, bool) + Send + Sync> fmt::Debug for Scripted<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Scripted")
        }
    }

    impl<F: Fn(&ChatRequest, usize) -> (String, bool) + Send + Sync> ChatModel for Scripted<F> {
        fn chat(&self, requests: &[ChatRequest]) -> Result<(Vec<ChatReply>, LlmCost), ChatError> {
            let mut seen = self.seen.lock().unwrap();
            let replies = requests
                .iter()
                .map(|request| {
                    let (content, truncated) = (self.answer)(request, seen.len());
                    seen.push(request.clone());
                    ChatReply {
                        content,
                        truncated,
                        prompt_tokens: 10,
                        completion_tokens: 5,
                    }
                })
                .collect::<Vec<_>>();
            let cost = LlmCost {
                calls: replies.len() as u32,
                prompt_tokens: 10 * replies.len() as u64,
                completion_tokens: 5 * replies.len() as u64,
                millis: 1,
                ..LlmCost::default()
            };
            Ok((replies, cost))
        }

        fn identity(&self) -> String {
            "scripted".into()
        }
    }

    fn scripted<F: Fn(&ChatRequest, usize) -> (String, bool) + Send + Sync>(
        answer: F,
    ) -> Scripted<F> {
        Scripted {
            answer,
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Twelve sentences on three topics, one EDU each.
    fn three_topics() -> Document {
        let text = "Rust is a systems language. It has ownership. Borrowing is checked. \
Lifetimes name scopes.\n\nPython is a scripting language. It is dynamic. It has a lock. \
Its libraries are many.\n\nGo was made at Google. It has goroutines. Channels pass messages. \
Its compiler is fast.\n";
        let doc = segmented(text.into());
        assert_eq!(doc.edus.len(), 12, "{:?}", doc.edus);
        doc
    }

    fn input(doc: &Document) -> StructureInput<'_> {
        StructureInput {
            text: &doc.text,
            edus: &doc.edus,
            blocks: &[],
        }
    }

    fn reply(sections: &[(u16, u32, u32, &str)]) -> String {
        let sections: Vec<serde_json::Value> = sections
            .iter()
            .map(|&(level, first, last, title)| {
                serde_json::json!({"level": level, "first": first, "last": last, "title": title})
            })
            .collect();
        serde_json::json!({ "sections": sections }).to_string()
    }

    fn spans(tree: &Tree) -> Vec<(u16, Span, String)> {
        tree.nodes
            .iter()
            .skip(1)
            .map(|n| (n.level, n.span, n.title.clone()))
            .collect()
    }

    #[test]
    fn a_valid_outline_becomes_the_tree_with_extractive_titles() {
        let doc = three_topics();
        let answer = reply(&[
            (1, 1, 4, "Rust systems language"),
            (2, 2, 3, "Ownership and borrowing"),
            (1, 5, 8, "Python \u{1b}[2J snakes"),
            (1, 9, 12, "Go goroutines"),
        ]);
        let chat = scripted(move |_, _| (answer.clone(), false));
        let structurer = LlmStructurer::new(&chat, StructurerOptions::default());
        let (tree, cost) = structurer.structure(&input(&doc)).unwrap();
        let tree = tree.expect("a tree");
        tree.validate(12).unwrap();
        let got = spans(&tree);
        assert_eq!(got[0], (1, Span::new(0, 3), "Rust systems language".into()));
        assert_eq!(
            got[1],
            (2, Span::new(1, 2), "Ownership and borrowing".into())
        );
        // "Amazing snakes" is not in the section's text: replaced.
        assert_eq!(got[2].1, Span::new(4, 7));
        assert_eq!(
            got[2].2,
            extractive_title(&doc.text, &doc.edus, Span::new(4, 7))
        );
        assert_eq!(got[3], (1, Span::new(8, 11), "Go goroutines".into()));
        assert_eq!((cost.calls, cost.fallbacks), (1, 0));
        // The request numbered every EDU from 1 and bounded the numbers.
        let seen = chat.seen.lock().unwrap();
        assert!(seen[0].user.starts_with("[1] Rust is a systems language."));
        assert!(seen[0].user.contains("[12] Its compiler is fast."));
        assert_eq!(
            seen[0].schema["properties"]["sections"]["items"]["properties"]["last"]["maximum"],
            12
        );
    }

    #[test]
    fn top_level_sections_are_made_to_cover_the_document() {
        let doc = three_topics();
        // A gap (4-5), a missing tail (9-12) and a subsection running past
        // its parent.
        let answer = reply(&[
            (1, 2, 3, "Ownership"),
            (2, 3, 5, "Borrowing"),
            (1, 6, 8, "Python"),
        ]);
        let chat = scripted(move |_, _| (answer.clone(), false));
        let structurer = LlmStructurer::new(&chat, StructurerOptions::default());
        // The subsection runs past its parent: rejected at every attempt.
        let (tree, cost) = structurer.structure(&input(&doc)).unwrap();
        assert!(tree.is_none());
        assert_eq!((cost.calls, cost.fallbacks), (3, 1));

        let answer = reply(&[
            (1, 2, 3, "Ownership"),
            (2, 3, 3, "Borrowing"),
            (1, 6, 8, "Python"),
        ]);
        let chat = scripted(move |_, _| (answer.clone(), false));
        let structurer = LlmStructurer::new(&chat, StructurerOptions::default());
        let tree = structurer.structure(&input(&doc)).unwrap().0.unwrap();
        let got: Vec<(u16, Span)> = spans(&tree).into_iter().map(|s| (s.0, s.1)).collect();
        assert_eq!(
            got,
            vec![
                (1, Span::new(0, 4)),
                (2, Span::new(2, 2)),
                (1, Span::new(5, 11))
            ]
        );
    }

    #[test]
    fn a_rejected_reply_is_asked_again_with_the_reason() {
        let doc = three_topics();
        let good = reply(&[(1, 1, 12, "Rust")]);
        let bad = reply(&[(2, 1, 12, "Rust")]);
        let chat = scripted(move |_, n| (if n == 0 { bad.clone() } else { good.clone() }, false));
        let structurer = LlmStructurer::new(&chat, StructurerOptions::default());
        let (tree, cost) = structurer.structure(&input(&doc)).unwrap();
        assert_eq!(spans(&tree.unwrap())[0].1, Span::new(0, 11));
        assert_eq!((cost.calls, cost.fallbacks), (2, 0));
        let seen = chat.seen.lock().unwrap();
        assert!(!seen[0].user.contains("rejected"));
        assert!(
            seen[1]
                .user
                .contains("rejected: section 1 has level 2 but no level-1 section holds it"),
            "{}",
            seen[1].user
        );
        assert!(seen[1].temperature > 0.0);
    }

    #[test]
    fn replies_that_stay_invalid_fall_back_and_are_counted() {
        let doc = three_topics();
        let cases: [(String, bool); 5] = [
            ("not json".into(), false),
            (r#"{"sections": []}"#.into(), false),
            (reply(&[(1, 1, 13, "Rust")]), false),
            (reply(&[(1, 1, 6, "Rust"), (1, 4, 12, "Go")]), false),
            (reply(&[(1, 1, 12, "Rust")]), true),
        ];
        for (content, truncated) in cases {
            let chat = scripted(move |_, _| (content.clone(), truncated));
            let options = StructurerOptions {
                invalid_retries: 1,
                ..StructurerOptions::default()
            };
            let (tree, cost) = LlmStructurer::new(&chat, options)
                .structure(&input(&doc))
                .unwrap();
            assert!(tree.is_none());
            assert_eq!((cost.calls, cost.fallbacks), (2, 1));
        }
    }

    #[test]
    fn a_one_edu_document_is_one_section() {
        let doc = segmented("Rust has ownership.".into());
        assert_eq!(doc.edus.len(), 1);
        let answer = reply(&[(1, 1, 1, "Rust ownership")]);
        let chat = scripted(move |_, _| (answer.clone(), false));
        let (tree, cost) = LlmStructurer::new(&chat, StructurerOptions::default())
            .structure(&input(&doc))
            .unwrap();
        let tree = tree.unwrap();
        tree.validate(1).unwrap();
        assert_eq!(
            spans(&tree),
            vec![(1, Span::new(0, 0), "Rust ownership".into())]
        );
        assert_eq!(cost.calls, 1);
        // Out of range for a one-EDU window: refused, then a fallback.
        let chat = scripted(|_, _| (reply(&[(1, 1, 2, "Rust")]), false));
        let (tree, cost) = LlmStructurer::new(&chat, StructurerOptions::default())
            .structure(&input(&doc))
            .unwrap();
        assert!(tree.is_none());
        assert_eq!((cost.calls, cost.fallbacks), (3, 1));
    }

    /// A document of `n` one-EDU sentences.
    fn sentences(n: usize) -> Document {
        let text: String = (0..n)
            .map(|i| format!("Sentence number {i} talks about topic {}. ", i / 7))
            .collect();
        let doc = segmented(text);
        assert_eq!(doc.edus.len(), n);
        doc
    }

    /// The sentence numbers a request showed.
    fn shown(request: &ChatRequest) -> Vec<u32> {
        request
            .user
            .lines()
            .filter_map(|l| l.strip_prefix('[')?.split_once(']')?.0.parse().ok())
            .collect()
    }

    #[test]
    fn long_documents_are_asked_in_overlapping_windows_and_stitched() {
        let doc = sentences(60);
        // One level-1 section per five shown sentences.
        let chat = scripted(|request, _| {
            let numbers = shown(request);
            let sections: Vec<(u16, u32, u32, &str)> = numbers
                .chunks(5)
                .map(|c| (1, c[0], *c.last().unwrap(), "topic"))
                .collect();
            (reply(&sections), false)
        });
        let options = StructurerOptions {
            window_tokens: 200,
            ..StructurerOptions::default()
        };
        let (tree, cost) = LlmStructurer::new(&chat, options)
            .structure(&input(&doc))
            .unwrap();
        let tree = tree.unwrap();
        tree.validate(60).unwrap();
        let seen = chat.seen.lock().unwrap();
        assert!(seen.len() >= 3, "{} windows", seen.len());
        assert_eq!(cost.calls as usize, seen.len());
        let windows: Vec<Vec<u32>> = seen.iter().map(shown).collect();
        assert_eq!(windows[0][0], 1);
        assert_eq!(*windows.last().unwrap().last().unwrap(), 60);
        for pair in windows.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(
                b[0] > a[0] && b[0] <= *a.last().unwrap(),
                "{a:?} then {b:?}"
            );
            assert!(a.windows(2).all(|w| w[1] == w[0] + 1));
        }
        // The top level tiles the document.
        let tops: Vec<Span> = tree.nodes[0]
            .children
            .iter()
            .map(|&c| tree.nodes[c as usize].span)
            .collect();
        assert_eq!(tops[0].first, 0);
        assert_eq!(tops.last().unwrap().last, 59);
        assert!(tops.windows(2).all(|w| w[1].first == w[0].last + 1));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the model answers, the result is a valid tree whose top
        /// level tiles the document and whose titles use the section's own
        /// words, or a counted fallback.
        #[test]
        fn any_reply_gives_a_valid_covering_tree_or_a_fallback(
            raw in proptest::collection::vec((0i64..5, 0i64..16, 0i64..16, 0usize..4), 0..8)
        ) {
            let doc = three_topics();
            let titles = ["Rust", "Go goroutines", "made up words", "Python lock"];
            let sections: Vec<serde_json::Value> = raw
                .iter()
                .map(|&(level, first, len, title)| serde_json::json!({
                    "level": level, "first": first, "last": first + len % 6,
                    "title": titles[title]
                }))
                .collect();
            let content = serde_json::json!({ "sections": sections }).to_string();
            let chat = scripted(move |_, _| (content.clone(), false));
            let (tree, cost) = LlmStructurer::new(&chat, StructurerOptions::default())
                .structure(&input(&doc))
                .unwrap();
            match tree {
                None => prop_assert_eq!(cost.fallbacks, 1),
                Some(tree) => {
                    prop_assert!(tree.validate(12).is_ok());
                    let tops: Vec<Span> = tree.nodes[0]
                        .children
                        .iter()
                        .map(|&c| tree.nodes[c as usize].span)
                        .collect();
                    prop_assert_eq!(tops[0].first, 0);
                    prop_assert_eq!(tops.last().unwrap().last, 11);
                    prop_assert!(tops.windows(2).all(|w| w[1].first == w[0].last + 1));
                    for node in tree.nodes.iter().skip(1) {
                        let text = &doc.text[doc.edus[node.span.first as usize].start as usize
                            ..doc.edus[node.span.last as usize].end as usize]
                            .to_lowercase();
                        let words = node.title.split(|c: char| !c.is_alphanumeric());
                        for word in words.filter(|w| !w.is_empty() && !FUNCTION_WORDS.contains(&w.to_lowercase().as_str())) {
                            prop_assert!(text.contains(&word.to_lowercase()), "{word} not in {text}");
                        }
                    }
                }
            }
        }
    }
}

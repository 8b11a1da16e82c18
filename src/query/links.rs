//! PROPAGATE's step across documents: relevance flows from the best
//! candidates of a seed to the sections whose titles they name.
//!
//! A multi-hop question's second piece of evidence usually shares no word
//! with the question; what leads to it is a name in the first piece ("…
//! shot in Leland, in the film *Maximum Overdrive*" → the section titled
//! *Maximum Overdrive*). Within one document the DAG's shared-term points
//! carry that; across documents nothing did, so a store of one passage per
//! document got no help from propagation. Here section titles act as the
//! entities of HippoRAG's graph: a candidate *names* a section when its
//! text holds every word of the section's title (a trailing parenthetical
//! qualifier, "Lilu (mythology)", need not appear), and the named section
//! receives `ACROSS ×` the candidate's score. A candidate's text here is
//! its first [`SOURCE_TOKENS`] tokens. Links are found at query time
//! through the full-text index's title field, so nothing is stored and a
//! new document is linked as soon as it is indexed. The question itself is
//! a source too, HippoRAG's query entities: a section it names is as
//! relevant as the best candidate, whether or not the seed's ranking found
//! it (a multi-hop question usually names its first hop by title, and
//! BM25 ranks that title below passages sharing the question's commoner
//! words). One step: relevance reaching a named section is not passed on
//! again (a second step measured no better on HotpotQA and MuSiQue).

use std::collections::{HashMap, HashSet};

use crate::compute::embed::hashed::{word_spans, words};
use crate::error::Result;
use crate::model::edu::Span;
use crate::storage::fulltext::FullTextReader;

/// How many of the best candidates pass relevance on to the sections they
/// name.
pub(super) const SOURCES: usize = 3;
/// A source's text is its shortest run of first EDUs holding this many
/// tokens (or all of it): where a passage names what it is about, and a
/// bound on the title lookup's cost for a candidate as large as a whole
/// document.
pub(super) const SOURCE_TOKENS: u32 = 256;
/// Sections whose titles best match a source's text, checked per source.
const TITLES_PER_SOURCE: usize = 8;
/// A title is a name only when one of its terms heads at most this many
/// sections; otherwise it is a generic heading that many documents share.
const MAX_SECTIONS_PER_NAME: u64 = 16;

/// A text that passes relevance on: the question, or the part of a
/// candidate that is read.
#[derive(Debug, Clone, Copy)]
pub(super) struct Source<'a> {
    /// Where a candidate's text lies: its document's id and the EDUs read
    /// (the candidate's first [`SOURCE_TOKENS`]); `None` for the question.
    pub place: Option<(&'a str, Span)>,
    /// The text.
    pub text: &'a str,
    /// The score the sections it names receive.
    pub passes: f32,
}

/// A section some source names.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Named {
    /// Its document's id.
    pub doc: String,
    /// Its tree node.
    pub section: u32,
    /// The most any source naming it passes on.
    pub score: f32,
}

/// The sections `sources` name, each scored the most any source naming it
/// passes on, in order of first discovery. Per source, the
/// [`TITLES_PER_SOURCE`] titles that best match its [`name_words`] within
/// `scope` are checked with [`names`]; sections overlapping a candidate's
/// text are left out, and so are generic headings (a title none of whose terms heads
/// at most [`MAX_SECTIONS_PER_NAME`] sections, such as "Motivation" in a
/// store of RFCs). `title_of(doc, section)` reads a section's title; `None`
/// (the document or the section is gone) names nothing.
pub(super) fn named_sections(
    reader: &FullTextReader,
    scope: Option<&[&str]>,
    sources: &[Source<'_>],
    mut title_of: impl FnMut(&str, u32) -> Result<Option<String>>,
) -> Result<Vec<Named>> {
    let mut found: Vec<Named> = Vec::new();
    let mut position: HashMap<(String, u32), usize> = HashMap::new();
    for source in sources {
        let said: HashSet<String> = words(source.text).into_iter().collect();
        let hits = reader.rank_titles(&name_words(source.text), scope, TITLES_PER_SOURCE)?;
        for hit in hits {
            let Some(section) = hit.node else { continue };
            // A text names neither the section it lies in nor those
            // starting inside it (its own headings). Sections after it in a
            // larger candidate can be named: in a document of many
            // passages, one passage names another.
            if source
                .place
                .is_some_and(|(doc, span)| hit.doc == doc && hit.span.overlaps(&span))
            {
                continue;
            }
            let Some(title) = title_of(&hit.doc, section)? else {
                continue;
            };
            if !names(&said, &title) || reader.title_sections(&title)? > MAX_SECTIONS_PER_NAME {
                continue;
            }
            let score = source.passes;
            match position.get(&(hit.doc.clone(), section)) {
                Some(&i) => found[i].score = found[i].score.max(score),
                None => {
                    position.insert((hit.doc.clone(), section), found.len());
                    found.push(Named {
                        doc: hit.doc,
                        section,
                        score,
                    });
                }
            }
        }
    }
    Ok(found)
}

/// The words of `text` that may belong to a name, space-separated: those
/// not starting with a lowercase letter (capitalised words, numbers, words
/// of scripts without case). Titles are looked up by these alone: a
/// source's common words would make the lookup several times slower
/// without finding other titles (measured on the dev sets).
fn name_words(text: &str) -> String {
    word_spans(text)
        .filter(|w| w.chars().next().is_some_and(|c| !c.is_lowercase()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a text whose words are `said` names the section titled `title`:
/// every word of the title, but for a trailing parenthetical qualifier, is
/// among them. A title without words is never named.
pub(super) fn names(said: &HashSet<String>, title: &str) -> bool {
    let name = match title.trim_end().strip_suffix(')') {
        Some(rest) => rest.rfind('(').map_or(title, |open| &rest[..open]),
        None => title,
    };
    let needed = words(name);
    !needed.is_empty() && needed.iter().all(|w| said.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(text: &str) -> HashSet<String> {
        words(text).into_iter().collect()
    }

    #[test]
    fn a_text_names_a_title_when_it_holds_all_its_words() {
        let text = said("Parts were shot in Leland for Maximum Overdrive, directed by King.");
        assert!(names(&text, "Maximum Overdrive"));
        assert!(names(&text, "maximum overdrive"));
        assert!(!names(&text, "Maximum Security"));
        assert!(!names(&text, "Overdrive (band) Tour"));
    }

    #[test]
    fn a_trailing_qualifier_need_not_be_said() {
        let text = said("It is linked with other demons like Gallu and Lilu.");
        assert!(names(&text, "Lilu (mythology)"));
        assert!(names(&text, "Gallu (demon) "));
        // Only a trailing qualifier is dropped.
        assert!(!names(&text, "Lilu (mythology) and Kur"));
        assert!(!names(&text, "(Lilu)"));
    }

    #[test]
    fn titles_are_looked_up_by_the_words_that_may_start_a_name() {
        assert_eq!(
            name_words("the film Maximum Overdrive (1986) was shot in Leland, 東京 too"),
            "Maximum Overdrive 1986 Leland 東京"
        );
        assert_eq!(name_words("nothing named here"), "");
    }

    #[test]
    fn a_title_without_words_is_never_named() {
        let text = said("anything at all");
        assert!(!names(&text, ""));
        assert!(!names(&text, " -- "));
    }
}

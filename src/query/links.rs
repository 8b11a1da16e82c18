//! PROPAGATE's step across documents: relevance flows from the question
//! and the best candidates of a seed to the sections whose titles they
//! name.
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
//! new document is linked as soon as it is indexed.
//!
//! The question itself is a source too, as HippoRAG starts from the
//! query's entities: a section it names is as relevant as the best
//! candidate, whether or not the seed's ranking found it (a multi-hop
//! question usually names its first hop by title, and BM25 ranks that
//! title below passages sharing the question's commoner words). The
//! question names a title only by writing its words in order, as one run
//! (quoted names make near-namesakes common: "A Man Without Love" must not
//! name "The Man Without Love"); a candidate's text names it by holding its
//! words anywhere (passages word a name in many ways, and requiring the
//! run there measured worse).
//!
//! One step: relevance reaching a named section is not passed on again (a
//! second step measured no better on HotpotQA and MuSiQue).

use std::collections::{HashMap, HashSet};

use crate::compute::embed::hashed::{word_spans, words};
use crate::error::Result;
use crate::model::edu::Span;
use crate::storage::fulltext::FullTextSet;

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
    /// (the candidate's first [`SOURCE_TOKENS`]); `None` for the question,
    /// which names a title only as a phrase.
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
/// `scope` are checked with [`Said::names`]; sections overlapping a
/// candidate's text are left out, and so are generic headings (a title
/// none of whose terms heads at most [`MAX_SECTIONS_PER_NAME`] sections,
/// such as "Motivation" in a store of RFCs). `title_of(doc, section)`
/// reads a section's title; `None` (the document or the section is gone)
/// names nothing.
pub(super) fn named_sections(
    reader: &FullTextSet,
    scope: Option<&[&str]>,
    sources: &[Source<'_>],
    mut title_of: impl FnMut(&str, u32) -> Result<Option<String>>,
) -> Result<Vec<Named>> {
    let mut found: Vec<Named> = Vec::new();
    let mut position: HashMap<(String, u32), usize> = HashMap::new();
    for source in sources {
        let said = Said::of(source);
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
            if !said.names(&title) || reader.title_sections(&title)? > MAX_SECTIONS_PER_NAME {
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

/// A source's words, as the test of what it names needs them.
enum Said {
    /// A candidate's words, as a set: it names a title whose every word it
    /// holds.
    Anywhere(HashSet<String>),
    /// The question's words, in order: it names a title whose words it
    /// holds as one run.
    InOrder(Vec<String>),
}

impl Said {
    /// The words of `source`, kept as its kind of source needs them.
    fn of(source: &Source<'_>) -> Said {
        let said = words(source.text);
        match source.place {
            Some(_) => Said::Anywhere(said.into_iter().collect()),
            None => Said::InOrder(said),
        }
    }

    /// Whether these words name the section titled `title`, all but a
    /// trailing parenthetical qualifier of it ("Lilu (mythology)" is named
    /// by "Lilu"). A title without words is never named.
    fn names(&self, title: &str) -> bool {
        let name = match title.trim_end().strip_suffix(')') {
            Some(rest) => rest.rfind('(').map_or(title, |open| &rest[..open]),
            None => title,
        };
        let needed = words(name);
        !needed.is_empty()
            && match self {
                Said::Anywhere(said) => needed.iter().all(|w| said.contains(w)),
                Said::InOrder(said) => said.windows(needed.len()).any(|run| run == needed),
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `text` says as a source lying at `place`.
    fn said(text: &str, place: Option<(&str, Span)>) -> Said {
        Said::of(&Source {
            place,
            text,
            passes: 1.0,
        })
    }

    /// What a candidate's `text` says.
    fn candidate(text: &str) -> Said {
        said(text, Some(("doc", Span::new(0, 0))))
    }

    /// What the question `text` says.
    fn question(text: &str) -> Said {
        said(text, None)
    }

    #[test]
    fn a_candidate_names_a_title_when_it_holds_all_its_words() {
        let text = candidate("Parts were shot in Leland for Maximum Overdrive, directed by King.");
        assert!(text.names("Maximum Overdrive"));
        assert!(text.names("maximum overdrive"));
        assert!(text.names("Overdrive Maximum"));
        assert!(text.names("King Leland"));
        assert!(!text.names("Maximum Security"));
        assert!(!text.names("Overdrive (band) Tour"));
    }

    #[test]
    fn the_question_names_a_title_only_by_writing_it() {
        let text = question("Who sang \"A Man Without Love\" on the 1968 album?");
        assert!(text.names("A Man Without Love"));
        assert!(text.names("man without love"));
        assert!(text.names("Man Without Love (song)"));
        // Every word is there, but not as the title's run of words.
        assert!(!text.names("The Man Without Love"));
        assert!(!text.names("Love Without Man"));
        assert!(!text.names("Album 1968"));
    }

    #[test]
    fn a_trailing_qualifier_need_not_be_said() {
        let text = candidate("It is linked with other demons like Gallu and Lilu.");
        assert!(text.names("Lilu (mythology)"));
        assert!(text.names("Gallu (demon) "));
        // Only a trailing qualifier is dropped.
        assert!(!text.names("Lilu (mythology) and Kur"));
        assert!(!text.names("(Lilu)"));
        let text = question("Which demons are like Lilu?");
        assert!(text.names("Lilu (mythology)"));
        assert!(!text.names("(Lilu)"));
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
        for said in [candidate("anything at all"), question("anything at all")] {
            assert!(!said.names(""));
            assert!(!said.names(" -- "));
        }
    }
}

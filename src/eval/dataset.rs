//! The evaluation data set: documents and questions with gold evidence, read
//! from (and written as) JSONL, one record per line.
//!
//! ```text
//! {"type":"document","id":"d1","group":"q1","format":"markdown","text":"# A\n\nOne. Two."}
//! {"type":"document","id":"d2","sections":[{"title":"A","sentences":["One.", " Two."]}]}
//! {"type":"question","id":"q1","group":"q1","question":"…","answer":"…",
//!  "evidence":[{"doc":"d1","bytes":[5,9]}, {"doc":"d2","section":0,"sentence":1}, {"doc":"d2","section":0}]}
//! ```
//!
//! A document is either `text` (`format` `text` or `markdown`, default
//! `markdown`: the stored text is the given text unchanged, so byte spans
//! index it), `sections`, which become Markdown: `# title`, a blank line,
//! the sentences concatenated as given (include their separating spaces),
//! a blank line; or a `path`: a file (relative to the data set's
//! directory) ingested as `edudb ingest` reads it, a PDF among others.
//!
//! Evidence is a byte span `[start, end)` of the document's text, one
//! sentence of a section, or a whole section (one gold sentence per
//! sentence of it): every such item is one *gold sentence*, and recall
//! counts them. Or it is a `text` passage (with the `page` it is on, for
//! reading), for documents whose stored text is known only once ingested:
//! recall is then the share of the passage's word bigrams in what was
//! picked ([`crate::eval::bigrams::word_bigrams`]). A question's evidence is
//! all spans or all passages. Records with the same `group` form one store
//! (a per-question store); records without one share the data set's store.
//!
//! ```text
//! {"type":"document","id":"3M_2018_10K","group":"3M_2018_10K","path":"pdfs/3M_2018_10K.pdf"}
//! {"type":"question","id":"q2","group":"3M_2018_10K","question":"…",
//!  "evidence":[{"doc":"3M_2018_10K","text":"Purchases of property …","page":60}]}
//! ```

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::document::Format;

/// One line of the JSONL file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// A document to ingest.
    Document(DocumentRecord),
    /// A question with its gold evidence.
    Question(QuestionRecord),
}

/// A document as written in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentRecord {
    /// Document id in the store.
    pub id: String,
    /// The store it belongs to; `None` for the data set's shared store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// `text` or `markdown` (the default), for a `text` document; for a
    /// `path`, any format `edudb ingest --format` takes (default: from the
    /// extension, as `edudb ingest` reads it: another extension is
    /// refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The whole text (exclusive with `sections` and `path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Titled sections of sentences (exclusive with `text` and `path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sections: Option<Vec<SectionRecord>>,
    /// A file to ingest, relative to the data set file's directory
    /// (exclusive with `text` and `sections`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A titled run of sentences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SectionRecord {
    /// The heading.
    pub title: String,
    /// The sentences, concatenated as given.
    pub sentences: Vec<String>,
}

/// A question as written in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionRecord {
    /// Question id.
    pub id: String,
    /// The store it is asked of; `None` for the shared store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The question text.
    pub question: String,
    /// The reference answer, kept for reading results (not scored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Gold evidence.
    pub evidence: Vec<EvidenceRecord>,
}

/// One gold evidence reference: `bytes`, `section` with an optional
/// `sentence`, or a `text` passage with an optional `page`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRecord {
    /// The document it is in.
    pub doc: String,
    /// Byte span `[start, end)` of the document's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<[usize; 2]>,
    /// Section index (0-based) of a `sections` document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<usize>,
    /// Sentence index (0-based) within the section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentence: Option<usize>,
    /// A passage of the document, scored by its word bigrams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The page (1-based) the passage is on, for reading results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
}

/// A document ready to ingest.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalDocument {
    /// Document id.
    pub id: String,
    /// Its store group.
    pub group: Option<String>,
    /// What is ingested.
    pub body: Body,
}

/// What an evaluation document is made of.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Text stored as given (byte spans index it).
    Text {
        /// Text or Markdown.
        format: Format,
        /// The text.
        text: String,
    },
    /// A file, ingested as `edudb ingest` reads it.
    File {
        /// The format asked for; `None`: detected.
        format: Option<Format>,
        /// Where it is.
        path: PathBuf,
    },
}

impl EvalDocument {
    /// The given text; `None` for a file.
    pub fn text(&self) -> Option<&str> {
        match &self.body {
            Body::Text { text, .. } => Some(text),
            Body::File { .. } => None,
        }
    }
}

/// A question with its gold sentences resolved to byte spans.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalQuestion {
    /// Question id.
    pub id: String,
    /// Its store group.
    pub group: Option<String>,
    /// The question text.
    pub question: String,
    /// The reference answer, if given.
    pub answer: Option<String>,
    /// Gold sentences (none when the evidence is passages).
    pub evidence: Vec<Evidence>,
    /// Gold passages (none when the evidence is sentences).
    pub passages: Vec<Passage>,
}

/// One gold passage: text of a document, scored by its word bigrams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passage {
    /// Document id.
    pub doc: String,
    /// The passage.
    pub text: String,
    /// The page it is on (1-based), when given.
    pub page: Option<u32>,
}

/// One gold sentence: a trimmed, non-empty byte span of a document.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Evidence {
    /// Document id.
    pub doc: String,
    /// Bytes `[start, end)` of its text.
    pub bytes: Range<usize>,
}

/// A validated data set.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Its name in reports (the file stem).
    pub name: String,
    /// Documents in file order.
    pub documents: Vec<EvalDocument>,
    /// Questions in file order.
    pub questions: Vec<EvalQuestion>,
}

/// The documents and questions of one store.
#[derive(Debug, Clone, PartialEq)]
pub struct Group<'a> {
    /// The group name; `None` for the shared store.
    pub name: Option<&'a str>,
    /// Its documents.
    pub documents: Vec<&'a EvalDocument>,
    /// Its questions.
    pub questions: Vec<&'a EvalQuestion>,
}

/// A document's body with each section's sentence spans.
struct Composed {
    body: Body,
    /// Trimmed sentence spans per section; `None` for a `text` or `path`
    /// document.
    sections: Option<Vec<Vec<Range<usize>>>>,
}

impl Dataset {
    /// Reads and validates a JSONL file; its stem names the data set.
    pub fn load(path: &Path) -> Result<Dataset> {
        let file = std::fs::File::open(path).map_err(|source| Error::Input {
            path: path.to_owned(),
            source,
        })?;
        let mut records = Vec::new();
        for (index, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|source| Error::Input {
                path: path.to_owned(),
                source,
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let record: Record = serde_json::from_str(&line).map_err(|e| Error::Dataset {
                path: path.to_owned(),
                line: index + 1,
                message: format!("column {}: {e}", e.column()),
            })?;
            records.push((index + 1, record));
        }
        let name = path.file_stem().map_or_else(
            || "dataset".to_owned(),
            |s| s.to_string_lossy().into_owned(),
        );
        Dataset::from_records(&name, path, records)
    }

    /// Validates `records` (each with its line number for errors, reported
    /// against `path`) into a data set named `name`.
    pub fn from_records(name: &str, path: &Path, records: Vec<(usize, Record)>) -> Result<Dataset> {
        let fail = |line: usize, message: String| Error::Dataset {
            path: path.to_owned(),
            line,
            message,
        };
        let base = path.parent().unwrap_or(Path::new("."));
        let mut documents = Vec::new();
        let mut composed: HashMap<String, (Option<String>, Composed)> = HashMap::new();
        let mut question_records = Vec::new();
        for (line, record) in records {
            match record {
                Record::Document(doc) => {
                    crate::model::ids::validate_id(&doc.id)
                        .map_err(|e| fail(line, e.to_string()))?;
                    let body = compose(&doc, base).map_err(|message| fail(line, message))?;
                    if composed.contains_key(&doc.id) {
                        return Err(fail(line, format!("document {:?} appears twice", doc.id)));
                    }
                    documents.push(EvalDocument {
                        id: doc.id.clone(),
                        group: doc.group.clone(),
                        body: body.body.clone(),
                    });
                    composed.insert(doc.id, (doc.group, body));
                }
                Record::Question(question) => question_records.push((line, question)),
            }
        }
        let mut seen = HashSet::new();
        let mut questions = Vec::new();
        for (line, record) in question_records {
            if !seen.insert(record.id.clone()) {
                return Err(fail(
                    line,
                    format!("question {:?} appears twice", record.id),
                ));
            }
            if record.question.trim().is_empty() {
                return Err(fail(line, format!("question {:?} has no text", record.id)));
            }
            if record.evidence.is_empty() {
                return Err(fail(
                    line,
                    format!("question {:?} has no evidence", record.id),
                ));
            }
            let mut evidence = Vec::new();
            let mut passages = Vec::new();
            for item in &record.evidence {
                let Some((group, body)) = composed.get(&item.doc) else {
                    return Err(fail(
                        line,
                        format!("evidence names unknown document {:?}", item.doc),
                    ));
                };
                if *group != record.group {
                    return Err(fail(
                        line,
                        format!(
                            "evidence document {:?} is in group {:?}, the question in {:?}",
                            item.doc, group, record.group
                        ),
                    ));
                }
                if let Some(text) = &item.text {
                    if item.bytes.is_some() || item.section.is_some() || item.sentence.is_some() {
                        return Err(fail(
                            line,
                            format!(
                                "evidence in document {:?} is a text passage or a span, not both",
                                item.doc
                            ),
                        ));
                    }
                    if super::bigrams::word_bigrams(text).is_empty() {
                        return Err(fail(
                            line,
                            format!(
                                "evidence passage in document {:?} has fewer than two words",
                                item.doc
                            ),
                        ));
                    }
                    passages.push(Passage {
                        doc: item.doc.clone(),
                        text: text.clone(),
                        page: item.page,
                    });
                    continue;
                }
                for bytes in resolve(item, body).map_err(|message| fail(line, message))? {
                    evidence.push(Evidence {
                        doc: item.doc.clone(),
                        bytes,
                    });
                }
            }
            if !evidence.is_empty() && !passages.is_empty() {
                return Err(fail(
                    line,
                    format!(
                        "question {:?} mixes text passages and spans as evidence",
                        record.id
                    ),
                ));
            }
            questions.push(EvalQuestion {
                id: record.id,
                group: record.group,
                question: record.question,
                answer: record.answer,
                evidence,
                passages,
            });
        }
        Ok(Dataset {
            name: name.to_owned(),
            documents,
            questions,
        })
    }

    /// The stores to build: groups in order of first appearance.
    pub fn groups(&self) -> Vec<Group<'_>> {
        let mut groups: Vec<Group<'_>> = Vec::new();
        fn slot<'g, 'a>(
            groups: &'g mut Vec<Group<'a>>,
            name: Option<&'a str>,
        ) -> &'g mut Group<'a> {
            let index = match groups.iter().position(|g| g.name == name) {
                Some(index) => index,
                None => {
                    groups.push(Group {
                        name,
                        documents: Vec::new(),
                        questions: Vec::new(),
                    });
                    groups.len() - 1
                }
            };
            &mut groups[index]
        }
        for doc in &self.documents {
            slot(&mut groups, doc.group.as_deref()).documents.push(doc);
        }
        for question in &self.questions {
            slot(&mut groups, question.group.as_deref())
                .questions
                .push(question);
        }
        groups.retain(|g| !g.questions.is_empty());
        groups
    }
}

/// Writes records as JSONL.
pub fn write_jsonl(records: &[Record], out: &mut dyn Write) -> std::io::Result<()> {
    for record in records {
        serde_json::to_writer(&mut *out, record)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The body of a document record and its sentence spans; a `path` is
/// taken relative to `base`.
fn compose(doc: &DocumentRecord, base: &Path) -> std::result::Result<Composed, String> {
    match (&doc.text, &doc.sections, &doc.path) {
        (None, None, Some(path)) => {
            let format = doc
                .format
                .as_deref()
                .map(|name| {
                    Format::from_name(name)
                        .ok_or_else(|| format!("document {:?}: unknown format {name:?}", doc.id))
                })
                .transpose()?;
            let path = base.join(path);
            if !path.is_file() {
                return Err(format!(
                    "document {:?}: no file at {}",
                    doc.id,
                    path.display()
                ));
            }
            Ok(Composed {
                body: Body::File { format, path },
                sections: None,
            })
        }
        (Some(text), None, None) => {
            let format = match doc.format.as_deref() {
                None | Some("markdown") => Format::Markdown,
                Some("text") => Format::Text,
                Some(other) => {
                    return Err(format!(
                        "document {:?}: format {other:?} is not text or markdown (byte spans must index the stored text)",
                        doc.id
                    ));
                }
            };
            if text.trim().is_empty() {
                return Err(format!("document {:?} has no text", doc.id));
            }
            Ok(Composed {
                body: Body::Text {
                    format,
                    text: text.clone(),
                },
                sections: None,
            })
        }
        (None, Some(sections), None) => {
            if doc.format.as_deref().is_some_and(|f| f != "markdown") {
                return Err(format!("document {:?}: sections are Markdown", doc.id));
            }
            if sections.is_empty() {
                return Err(format!("document {:?} has no sections", doc.id));
            }
            let mut text = String::new();
            let mut spans = Vec::with_capacity(sections.len());
            for section in sections {
                text.push_str("# ");
                text.push_str(&section.title.replace(['\n', '\r'], " "));
                text.push_str("\n\n");
                let mut sentences = Vec::with_capacity(section.sentences.len());
                for sentence in &section.sentences {
                    let start = text.len();
                    text.push_str(&sentence.replace(['\n', '\r'], " "));
                    sentences.push(crate::ingest::layout::trim_range(&text, start..text.len()));
                }
                text.push_str("\n\n");
                spans.push(sentences);
            }
            Ok(Composed {
                body: Body::Text {
                    format: Format::Markdown,
                    text,
                },
                sections: Some(spans),
            })
        }
        _ => Err(format!(
            "document {:?} needs exactly one of \"text\", \"sections\" and \"path\"",
            doc.id
        )),
    }
}

/// The gold sentences an evidence reference names.
fn resolve(
    item: &EvidenceRecord,
    body: &Composed,
) -> std::result::Result<Vec<Range<usize>>, String> {
    let doc = &item.doc;
    let spans = match (item.bytes, item.section, item.sentence) {
        (Some([start, end]), None, None) => {
            let Body::Text { text, .. } = &body.body else {
                return Err(format!(
                    "evidence in document {doc:?}, a file, must be a text passage (its stored text is known only once ingested)"
                ));
            };
            if start >= end || end > text.len() {
                return Err(format!(
                    "evidence bytes [{start}, {end}) are not a non-empty range within document {doc:?} ({} bytes)",
                    text.len()
                ));
            }
            if !text.is_char_boundary(start) || !text.is_char_boundary(end) {
                return Err(format!(
                    "evidence bytes [{start}, {end}) of document {doc:?} cut a UTF-8 character"
                ));
            }
            vec![crate::ingest::layout::trim_range(text, start..end)]
        }
        (None, Some(section), sentence) => {
            let Some(sections) = &body.sections else {
                return Err(format!(
                    "evidence names a section of document {doc:?}, which has no sections"
                ));
            };
            let Some(sentences) = sections.get(section) else {
                return Err(format!(
                    "document {doc:?} has {} sections; evidence names section {section}",
                    sections.len()
                ));
            };
            match sentence {
                None => sentences.clone(),
                Some(i) => match sentences.get(i) {
                    Some(span) => vec![span.clone()],
                    None => {
                        return Err(format!(
                            "section {section} of document {doc:?} has {} sentences; evidence names sentence {i}",
                            sentences.len()
                        ));
                    }
                },
            }
        }
        _ => {
            return Err(format!(
                "evidence in document {doc:?} needs \"bytes\", \"section\" with an optional \"sentence\", or \"text\""
            ));
        }
    };
    let spans: Vec<Range<usize>> = spans.into_iter().filter(|s| !s.is_empty()).collect();
    if spans.is_empty() {
        return Err(format!("evidence in document {doc:?} is only whitespace"));
    }
    Ok(spans)
}

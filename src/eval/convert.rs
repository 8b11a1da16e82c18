//! Converters from the published layouts of HotpotQA, MuSiQue and
//! FinanceBench (as in `../shared/data`) to evaluation [`Record`]s, in
//! either setting:
//!
//! - [`Setting::PerQuestion`]: each question's own paragraphs (10 for
//!   HotpotQA, 20 for MuSiQue) become one document with a heading per
//!   paragraph, in a group (store) of its own;
//! - [`Setting::Shared`]: every passage of the corpus file becomes a
//!   document (`# title` and its text) in one shared store.
//!
//! HotpotQA evidence is sentence-level (`supporting_facts`: title and
//! sentence index); MuSiQue evidence is paragraph-level (`is_supporting`),
//! so each sentence of a supporting paragraph is one gold sentence
//! (paragraphs are split with [`crate::ingest::segment::sentences`]).
//!
//! FinanceBench asks questions of SEC filings given as PDFs: each filing
//! is a `path` document (per question: a store per filing, holding it and
//! asked every question about it; shared: one store of every filing), and
//! its evidence is the published passage text with its page, scored by
//! word bigrams.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::dataset::{DocumentRecord, EvidenceRecord, QuestionRecord, Record, SectionRecord};
use crate::error::{Error, Result};

/// Which stores the questions are asked of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// One store per question holding only its paragraphs (FinanceBench:
    /// one store per filing, holding only it).
    PerQuestion,
    /// One store over the whole corpus.
    Shared,
}

#[derive(Deserialize)]
struct HotpotQuestion {
    #[serde(rename = "_id")]
    id: String,
    question: String,
    answer: String,
    context: Vec<(String, Vec<String>)>,
    supporting_facts: Vec<(String, usize)>,
}

#[derive(Deserialize)]
struct MusiqueQuestion {
    id: String,
    question: String,
    answer: String,
    paragraphs: Vec<MusiqueParagraph>,
}

#[derive(Deserialize)]
struct MusiqueParagraph {
    title: String,
    paragraph_text: String,
    is_supporting: bool,
}

#[derive(Deserialize)]
struct FinanceBenchQuestion {
    financebench_id: String,
    doc_name: String,
    question: String,
    answer: String,
    evidence: Vec<FinanceBenchEvidence>,
}

#[derive(Deserialize)]
struct FinanceBenchEvidence {
    doc_name: String,
    evidence_text: String,
    /// 0-based.
    evidence_page_num: u32,
}

#[derive(Deserialize)]
struct Passage {
    title: String,
    text: String,
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|source| Error::Input {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Dataset {
        path: path.to_owned(),
        line: e.line(),
        message: format!("column {}: {e}", e.column()),
    })
}

fn unmatched(path: &Path, message: String) -> Error {
    Error::Dataset {
        path: path.to_owned(),
        line: 0,
        message,
    }
}

fn corpus_of(setting: Setting, corpus: Option<&Path>) -> Result<Option<&Path>> {
    match (setting, corpus) {
        (Setting::Shared, None) => Err(Error::Usage(
            "the shared setting needs the corpus file (--corpus)".to_owned(),
        )),
        (_, corpus) => Ok(corpus),
    }
}

/// Converts HotpotQA questions (`context`, `supporting_facts`) and, for
/// the shared setting, the corpus (a JSON object: title → sentences).
pub fn hotpotqa(questions: &Path, corpus: Option<&Path>, setting: Setting) -> Result<Vec<Record>> {
    let corpus = corpus_of(setting, corpus)?;
    let parsed: Vec<HotpotQuestion> = read_json(questions)?;
    let mut records = Vec::new();
    if let Some(corpus) = corpus.filter(|_| setting == Setting::Shared) {
        let passages: serde_json::Map<String, serde_json::Value> = read_json(corpus)?;
        for (title, sentences) in passages {
            let sentences: Vec<String> = serde_json::from_value(sentences)
                .map_err(|e| unmatched(corpus, format!("passage {title:?}: {e}")))?;
            records.push(passage_document(&title, title.clone(), sentences));
        }
    }
    for q in parsed {
        let group = (setting == Setting::PerQuestion).then(|| q.id.clone());
        if setting == Setting::PerQuestion {
            records.push(question_document(
                &q.id,
                q.context.iter().map(|(t, s)| (t.clone(), s.clone())),
            ));
        }
        let mut evidence = Vec::new();
        for (title, sentence) in &q.supporting_facts {
            let section = q
                .context
                .iter()
                .position(|(t, _)| t == title)
                .ok_or_else(|| {
                    unmatched(
                        questions,
                        format!(
                            "question {}: supporting fact names {title:?}, not in its context",
                            q.id
                        ),
                    )
                })?;
            evidence.push(match setting {
                Setting::PerQuestion => sentence_ref(&q.id, section, Some(*sentence)),
                Setting::Shared => sentence_ref(title, 0, Some(*sentence)),
            });
        }
        records.push(Record::Question(QuestionRecord {
            id: q.id,
            group,
            question: q.question,
            answer: Some(q.answer),
            evidence,
        }));
    }
    Ok(records)
}

/// Converts MuSiQue questions (`paragraphs` with `is_supporting`) and, for
/// the shared setting, the corpus (a list of `{title, text}`; repeated
/// titles get ids `title (2)`, `title (3)`, …).
pub fn musique(questions: &Path, corpus: Option<&Path>, setting: Setting) -> Result<Vec<Record>> {
    let corpus = corpus_of(setting, corpus)?;
    let parsed: Vec<MusiqueQuestion> = read_json(questions)?;
    let mut records = Vec::new();
    // (title, text) → document id, in the shared setting.
    let mut passage_ids: HashMap<(String, String), String> = HashMap::new();
    if let Some(corpus) = corpus.filter(|_| setting == Setting::Shared) {
        let passages: Vec<Passage> = read_json(corpus)?;
        let mut seen_titles: HashMap<String, usize> = HashMap::new();
        for passage in passages {
            let count = seen_titles.entry(passage.title.clone()).or_default();
            *count += 1;
            let id = match *count {
                1 => passage.title.clone(),
                n => format!("{} ({n})", passage.title),
            };
            records.push(passage_document(
                &id,
                passage.title.clone(),
                split_sentences(&passage.text),
            ));
            passage_ids.insert((passage.title, passage.text), id);
        }
    }
    for q in parsed {
        let group = (setting == Setting::PerQuestion).then(|| q.id.clone());
        if setting == Setting::PerQuestion {
            records.push(question_document(
                &q.id,
                q.paragraphs
                    .iter()
                    .map(|p| (p.title.clone(), split_sentences(&p.paragraph_text))),
            ));
        }
        let mut evidence = Vec::new();
        for (section, paragraph) in q.paragraphs.iter().enumerate() {
            if !paragraph.is_supporting {
                continue;
            }
            evidence.push(match setting {
                Setting::PerQuestion => sentence_ref(&q.id, section, None),
                Setting::Shared => {
                    let key = (paragraph.title.clone(), paragraph.paragraph_text.clone());
                    let id = passage_ids.get(&key).ok_or_else(|| {
                        unmatched(
                            questions,
                            format!(
                                "question {}: supporting paragraph {:?} is not in the corpus",
                                q.id, paragraph.title
                            ),
                        )
                    })?;
                    sentence_ref(id, 0, None)
                }
            });
        }
        records.push(Record::Question(QuestionRecord {
            id: q.id,
            group,
            question: q.question,
            answer: Some(q.answer),
            evidence,
        }));
    }
    Ok(records)
}

/// `text` cut before each sentence, so the pieces concatenate back to it.
fn split_sentences(text: &str) -> Vec<String> {
    let starts: Vec<usize> = crate::ingest::segment::sentences(text, 0..text.len())
        .iter()
        .map(|s| s.start)
        .skip(1)
        .collect();
    let mut pieces = Vec::with_capacity(starts.len() + 1);
    let mut from = 0;
    for start in starts {
        pieces.push(text[from..start].to_owned());
        from = start;
    }
    pieces.push(text[from..].to_owned());
    pieces
}

/// A question's paragraphs as one document of titled sections, in the
/// question's own group.
fn question_document(id: &str, paragraphs: impl Iterator<Item = (String, Vec<String>)>) -> Record {
    Record::Document(DocumentRecord {
        id: id.to_owned(),
        group: Some(id.to_owned()),
        format: None,
        text: None,
        path: None,
        sections: Some(
            paragraphs
                .map(|(title, sentences)| SectionRecord { title, sentences })
                .collect(),
        ),
    })
}

/// One corpus passage as a one-section document of the shared store.
fn passage_document(id: &str, title: String, sentences: Vec<String>) -> Record {
    Record::Document(DocumentRecord {
        id: id.to_owned(),
        group: None,
        format: None,
        text: None,
        path: None,
        sections: Some(vec![SectionRecord { title, sentences }]),
    })
}

/// Converts FinanceBench questions (JSONL, one question per line, as in
/// `financebench_dev/questions.jsonl`) whose filings are `pdfs/<doc_name>.pdf`
/// (written as absolute paths, so the output loads from anywhere).
pub fn financebench(questions: &Path, pdfs: &Path, setting: Setting) -> Result<Vec<Record>> {
    let text = std::fs::read_to_string(questions).map_err(|source| Error::Input {
        path: questions.to_owned(),
        source,
    })?;
    let pdfs = std::fs::canonicalize(pdfs).map_err(|source| Error::Input {
        path: pdfs.to_owned(),
        source,
    })?;
    let mut documents: Vec<Record> = Vec::new();
    let mut asked = Vec::new();
    let mut filings = std::collections::HashSet::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let q: FinanceBenchQuestion = serde_json::from_str(line).map_err(|e| Error::Dataset {
            path: questions.to_owned(),
            line: index + 1,
            message: format!("column {}: {e}", e.column()),
        })?;
        let group = (setting == Setting::PerQuestion).then(|| q.doc_name.clone());
        let mut evidence = Vec::new();
        for item in &q.evidence {
            if setting == Setting::PerQuestion && item.doc_name != q.doc_name {
                return Err(Error::Dataset {
                    path: questions.to_owned(),
                    line: index + 1,
                    message: format!(
                        "question {}: evidence in {}, not its filing {} (use the shared setting)",
                        q.financebench_id, item.doc_name, q.doc_name
                    ),
                });
            }
            evidence.push(EvidenceRecord {
                doc: item.doc_name.clone(),
                bytes: None,
                section: None,
                sentence: None,
                text: Some(item.evidence_text.clone()),
                page: Some(item.evidence_page_num + 1),
            });
        }
        for name in std::iter::once(&q.doc_name).chain(q.evidence.iter().map(|e| &e.doc_name)) {
            if !filings.insert(name.clone()) {
                continue;
            }
            let path = pdfs.join(format!("{name}.pdf"));
            if !path.is_file() {
                return Err(Error::Dataset {
                    path: questions.to_owned(),
                    line: index + 1,
                    message: format!("no filing {} for {name}", path.display()),
                });
            }
            documents.push(Record::Document(DocumentRecord {
                id: name.clone(),
                group: (setting == Setting::PerQuestion).then(|| name.clone()),
                format: Some(crate::Format::Pdf.name().to_owned()),
                text: None,
                sections: None,
                path: Some(path.to_string_lossy().into_owned()),
            }));
        }
        asked.push(Record::Question(QuestionRecord {
            id: q.financebench_id,
            group,
            question: q.question,
            answer: Some(q.answer),
            evidence,
        }));
    }
    documents.extend(asked);
    Ok(documents)
}

fn sentence_ref(doc: &str, section: usize, sentence: Option<usize>) -> EvidenceRecord {
    EvidenceRecord {
        doc: doc.to_owned(),
        bytes: None,
        section: Some(section),
        sentence,
        text: None,
        page: None,
    }
}

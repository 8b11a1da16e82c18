//! `edudb eval memory`: evidence recall of agent-memory contexts on
//! long multi-session dialogues in the LoCoMo format (a conversation's
//! dated sessions of turns, and questions naming their evidence turns).
//!
//! Each conversation is loaded as one session in one
//! [`Db::append_turns`] call: a turn's text is `Speaker: text`, with
//! ` [shares CAPTION]` when the turn shared an image (LoCoMo's caption of
//! it), the first speaker as [`Role::User`] and the other as
//! [`Role::Assistant`], and the session's date as the turn's time. Then
//! every question with evidence is asked after the last turn, and each
//! method's context is scored by the share of the evidence turns it holds
//! any text of ([`METHODS`]).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use crate::db::Db;
use crate::engine::OpenOptions;
use crate::error::{Error, Result};
use crate::eval::flat::{Baseline, FlatIndex, Unit};
use crate::eval::score::Observation;
use crate::memory::TurnInput;
use crate::model::dialogue::Role;
use crate::model::document::Document;
use crate::model::ids::turn_number;
use crate::progress::{CancelToken, NoProgress, Progress};
use crate::query::{Params, Rows};

/// LoCoMo's question categories, by number.
pub const CATEGORIES: [(u32, &str); 5] = [
    (1, "multi-hop"),
    (2, "temporal"),
    (3, "open-domain"),
    (4, "single-hop"),
    (5, "adversarial"),
];

/// The methods compared, in report order:
/// - `context+query`: [`Db::session_context`] with the question as query;
/// - `context`: [`Db::session_context`] without a query (path and summaries);
/// - `bm25`, `hybrid`: a query over the session's turns
///   (`SELECT SPANS FROM session(…) SEED BM25/HYBRID(…) BUDGET …`);
/// - `recency`: the latest whole turns that fit;
/// - `flat-bm25-turns`: whole turns ranked by BM25 (a tantivy index of the
///   turns alone), taken in rank order into as many characters as
///   `context+query` returned (a turn that does not fit is skipped).
pub const METHODS: [&str; 6] = [
    "context+query",
    "context",
    "bm25",
    "hybrid",
    "recency",
    "flat-bm25-turns",
];

/// One conversation: its turns in order and its questions.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// Its name: the file's stem (also the session id).
    pub name: String,
    /// Its turns, in order.
    pub turns: Vec<TurnInput>,
    /// Its questions that name at least one known evidence turn.
    pub questions: Vec<MemoryQuestion>,
    /// Evidence ids that name no turn (LoCoMo has a few malformed ones).
    pub unknown_evidence: usize,
}

/// A question about a conversation.
#[derive(Debug, Clone)]
pub struct MemoryQuestion {
    /// The question.
    pub question: String,
    /// LoCoMo's category number ([`CATEGORIES`]).
    pub category: u32,
    /// The evidence turns, by turn number.
    pub evidence: Vec<u32>,
}

/// A LoCoMo file: the sessions under `conversation` (as LoCoMo publishes
/// them) or at the top level beside `qa` (as the dev set keeps them).
#[derive(serde::Deserialize)]
struct LocomoFile {
    conversation: Option<serde_json::Map<String, serde_json::Value>>,
    qa: Vec<LocomoQuestion>,
    #[serde(flatten)]
    rest: serde_json::Map<String, serde_json::Value>,
}

#[derive(serde::Deserialize)]
struct LocomoQuestion {
    question: String,
    category: u32,
    #[serde(default)]
    evidence: Vec<String>,
}

#[derive(serde::Deserialize)]
struct LocomoTurn {
    speaker: String,
    dia_id: String,
    text: String,
    blip_caption: Option<String>,
}

/// A session date as LoCoMo writes it (`1:47 pm on 18 May, 2023`), as
/// seconds since the Unix epoch, read as UTC.
fn locomo_time(text: &str) -> Option<i64> {
    let upper = text.trim().replace(" am ", " AM ").replace(" pm ", " PM ");
    let parsed = jiff::fmt::strtime::parse("%l:%M %p on %d %B, %Y", &upper).ok()?;
    let datetime = parsed.to_datetime().ok()?;
    let zoned = datetime.to_zoned(jiff::tz::TimeZone::UTC).ok()?;
    Some(zoned.timestamp().as_second())
}

/// Reads a LoCoMo conversation file.
pub fn load_locomo(path: &Path) -> Result<Conversation> {
    let bad = |message: String| Error::Dataset {
        path: path.to_owned(),
        line: 0,
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    let file: LocomoFile =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a LoCoMo conversation: {e}")))?;
    let conversation = file.conversation.unwrap_or(file.rest);
    let speaker_a = conversation
        .get("speaker_a")
        .and_then(|v| v.as_str())
        .ok_or_else(|| bad("no speaker_a".into()))?
        .to_owned();
    let mut sessions: Vec<(u32, &serde_json::Value)> = conversation
        .iter()
        .filter_map(|(key, value)| Some((key.strip_prefix("session_")?.parse().ok()?, value)))
        .collect();
    sessions.sort_by_key(|&(n, _)| n);
    let mut turns = Vec::new();
    let mut numbers: HashMap<String, u32> = HashMap::new();
    for (n, value) in sessions {
        let date = conversation
            .get(&format!("session_{n}_date_time"))
            .and_then(|v| v.as_str());
        let at = date.and_then(locomo_time);
        let session: Vec<LocomoTurn> =
            serde_json::from_value(value.clone()).map_err(|e| bad(format!("session_{n}: {e}")))?;
        for turn in session {
            let mut text = format!("{}: {}", turn.speaker, turn.text.trim());
            if let Some(caption) = turn.blip_caption.filter(|c| !c.trim().is_empty()) {
                text.push_str(&format!(" [shares {}]", caption.trim()));
            }
            let role = if turn.speaker == speaker_a {
                Role::User
            } else {
                Role::Assistant
            };
            numbers.insert(turn.dia_id.clone(), turns.len() as u32);
            turns.push(TurnInput {
                role,
                text,
                at,
                ..TurnInput::default()
            });
        }
    }
    let mut unknown_evidence = 0;
    let mut questions = Vec::new();
    for qa in file.qa {
        let mut evidence: Vec<u32> = Vec::new();
        for id in &qa.evidence {
            match numbers.get(id.trim()) {
                Some(&turn) if !evidence.contains(&turn) => evidence.push(turn),
                Some(_) => {}
                None => unknown_evidence += 1,
            }
        }
        if !evidence.is_empty() {
            questions.push(MemoryQuestion {
                question: qa.question,
                category: qa.category,
                evidence,
            });
        }
    }
    let name = path.file_stem().map_or_else(
        || "conversation".into(),
        |s| s.to_string_lossy().into_owned(),
    );
    Ok(Conversation {
        name,
        turns,
        questions,
        unknown_evidence,
    })
}

/// The session id a conversation is loaded under.
fn session_id(conversation: &Conversation) -> String {
    format!(
        "locomo-{}",
        conversation
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
    )
}

/// What [`evaluate_memory`] measured besides the observations.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LoadTimes {
    /// Per conversation, in order.
    pub conversations: Vec<Loaded>,
}

/// One conversation as loaded: how long it took and the dialogue tree
/// automatic placement made of it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Loaded {
    /// The conversation's name.
    pub name: String,
    /// Its turns.
    pub turns: usize,
    /// Seconds [`Db::append_turns`] took to load them (`None`: a kept
    /// store already held them).
    pub seconds: Option<f64>,
    /// Topics of its dialogue tree.
    pub topics: u32,
    /// Branches of its dialogue tree.
    pub branches: u32,
    /// Its dated sessions (distinct turn times): a rough reference for
    /// its topics.
    pub dated_sessions: usize,
}

/// Loads each conversation into its own store (built with `options`) and
/// scores every method of [`METHODS`] on every question at every budget.
/// The stores live in `stores` when given (`DIR/<n>-<name>`; a store that
/// already holds the conversation's session with all its turns is reused,
/// so a model-backed store is built once), else in a temporary directory.
/// Observations name the category as their data set (and again under
/// `all`). Progress counts questions.
pub fn evaluate_memory(
    conversations: &[Conversation],
    budgets: &[u64],
    options: &OpenOptions,
    stores: Option<&Path>,
    progress: &dyn Progress,
    cancel: &CancelToken,
) -> Result<(Vec<Observation>, LoadTimes)> {
    let temporary = tempfile::tempdir().map_err(|source| Error::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let work = stores.unwrap_or(temporary.path());
    let mut observations = Vec::new();
    let mut times = LoadTimes::default();
    let total = conversations.iter().map(|c| c.questions.len() as u64).sum();
    progress.start("eval memory", total);
    let outcome = (|| -> Result<()> {
        for (number, conversation) in conversations.iter().enumerate() {
            let session = session_id(conversation);
            let dir = work.join(format!("{number}-{session}"));
            let db = Db::open_with(
                dir.join("store"),
                &OpenOptions {
                    create: true,
                    ..options.clone()
                },
            )?;
            let started = Instant::now();
            // A kept store is reused only with every turn there and said.
            let kept = db.dialogue(&session).ok();
            let whole = kept.as_ref().is_some_and(|d| {
                d.turns.len() == conversation.turns.len()
                    && d.turns.iter().all(|t| !t.is_forgotten())
            });
            let seconds = if whole {
                None
            } else {
                if kept.is_some() {
                    db.remove_session(&session)?;
                }
                db.append_turns(&session, &conversation.turns, &NoProgress, cancel)?;
                Some(started.elapsed().as_secs_f64())
            };
            let tree = db.dialogue(&session)?.meta();
            let dated: std::collections::HashSet<i64> =
                conversation.turns.iter().filter_map(|t| t.at).collect();
            times.conversations.push(Loaded {
                name: conversation.name.clone(),
                turns: conversation.turns.len(),
                seconds,
                topics: tree.topics,
                branches: tree.branches,
                dated_sessions: dated.len(),
            });
            let run = ConversationRun::build(&db, &session, &dir)?;
            for question in &conversation.questions {
                cancel.check()?;
                run.ask(question, budgets, &mut observations)?;
                progress.advance(1, &conversation.name);
            }
        }
        Ok(())
    })();
    progress.finish();
    outcome.map(|()| (observations, times))
}

/// One loaded conversation and its flat index of whole turns.
struct ConversationRun<'a> {
    db: &'a Db,
    session: String,
    turns: Vec<Document>,
    /// Each turn's tokens, by number.
    tokens: Vec<u64>,
    flat: FlatIndex,
}

impl<'a> ConversationRun<'a> {
    fn build(db: &'a Db, session: &str, dir: &Path) -> Result<ConversationRun<'a>> {
        let dialogue = db.dialogue(session)?;
        // Each turn under a plain id: the index keeps session turns apart.
        let turns = dialogue
            .turns
            .iter()
            .map(|t| {
                let mut doc = db.document(&t.doc)?;
                doc.meta.id = doc.meta.id.replace(['@', '/'], "-");
                Ok(doc)
            })
            .collect::<Result<Vec<Document>>>()?;
        let tokens = dialogue.turns.iter().map(|t| t.tokens).collect();
        // One unit per turn: no turn reaches this many tokens.
        let _ = std::fs::remove_dir_all(dir.join("flat"));
        let flat = FlatIndex::build(
            Baseline::Bm25Chunks(u32::MAX),
            &turns,
            &dir.join("flat"),
            db.embedder(),
        )?;
        Ok(ConversationRun {
            db,
            session: session.to_owned(),
            turns,
            tokens,
            flat,
        })
    }

    /// Scores every method on `question` at every budget.
    fn ask(
        &self,
        question: &MemoryQuestion,
        budgets: &[u64],
        observations: &mut Vec<Observation>,
    ) -> Result<()> {
        let category = CATEGORIES
            .iter()
            .find(|(n, _)| *n == question.category)
            .map_or_else(
                || format!("category {}", question.category),
                |(_, name)| (*name).to_owned(),
            );
        let mut observe =
            |method: &str, budget: u64, turns: &HashSet<u32>, tokens: u64, seconds: f64| {
                let found = question
                    .evidence
                    .iter()
                    .filter(|t| turns.contains(t))
                    .count();
                for dataset in [category.as_str(), "all"] {
                    observations.push(Observation {
                        dataset: dataset.to_owned(),
                        question: question.question.clone(),
                        method: method.to_owned(),
                        structured: !matches!(method, "recency" | "flat-bm25-turns"),
                        budget,
                        recall: found as f64 / question.evidence.len() as f64,
                        precision: if turns.is_empty() {
                            0.0
                        } else {
                            found as f64 / turns.len() as f64
                        },
                        tokens,
                        latency_ms: seconds * 1e3,
                    });
                }
            };
        let ranked = self.flat.rank(
            &question.question,
            self.turns.len(),
            self.db.embedder(),
            &self.turns,
        )?;
        for &budget in budgets {
            let mut context_chars = 0;
            for with_query in [true, false] {
                let started = Instant::now();
                let query = with_query.then_some(question.question.as_str());
                let context = self.db.session_context(&self.session, budget, query)?;
                let seconds = started.elapsed().as_secs_f64();
                if with_query {
                    context_chars = context.items.iter().map(|i| i.text.len()).sum();
                }
                let turns = context.items.iter().map(|i| i.turn).collect();
                let name = if with_query {
                    "context+query"
                } else {
                    "context"
                };
                observe(name, budget, &turns, context.tokens_used, seconds);
            }
            for (name, seed) in [("bm25", "BM25($q)"), ("hybrid", "HYBRID($q, 0.5)")] {
                let statement = format!(
                    "SELECT SPANS FROM session($session) SEED {seed} BUDGET {budget} TOKENS"
                );
                let params = Params::new()
                    .text("q", question.question.as_str())
                    .text("session", self.session.as_str());
                let started = Instant::now();
                let result = self.db.query(&statement, &params)?;
                let seconds = started.elapsed().as_secs_f64();
                let Rows::Selection(selection) = result.rows else {
                    return Err(Error::Usage(format!("{statement} is not a SELECT")));
                };
                let turns = selection
                    .items
                    .iter()
                    .filter_map(|item| turn_number(&item.doc))
                    .collect();
                observe(name, budget, &turns, selection.tokens_used, seconds);
            }
            let (recent, tokens) = self.recency(budget);
            observe("recency", budget, &recent, tokens, 0.0);
            let (flat, tokens) = self.flat_by_chars(&ranked, context_chars);
            observe("flat-bm25-turns", budget, &flat, tokens, 0.0);
        }
        Ok(())
    }

    /// The latest whole turns that fit `budget` tokens.
    fn recency(&self, budget: u64) -> (HashSet<u32>, u64) {
        let mut used = 0;
        let mut turns = HashSet::new();
        for (number, &tokens) in self.tokens.iter().enumerate().rev() {
            if used + tokens > budget {
                break;
            }
            used += tokens;
            turns.insert(number as u32);
        }
        (turns, used)
    }

    /// Whole turns taken in `ranked` order into `chars` bytes of text,
    /// skipping any that does not fit.
    fn flat_by_chars(&self, ranked: &[Unit], chars: usize) -> (HashSet<u32>, u64) {
        let (mut used, mut tokens) = (0, 0);
        let mut turns = HashSet::new();
        for unit in ranked {
            let length = self.turns[unit.doc].text.len();
            if used + length <= chars && turns.insert(unit.doc as u32) {
                used += length;
                tokens += self.tokens[unit.doc];
            }
        }
        (turns, tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locomo_dates_read_as_utc() {
        assert_eq!(locomo_time("1:47 pm on 18 May, 2023"), Some(1_684_417_620));
        assert_eq!(
            locomo_time("10:04 am on 19 October, 2023"),
            Some(1_697_709_840)
        );
        assert_eq!(locomo_time("someday"), None);
    }
}

//! Appending turns to a session: each turn stored as its own document, its
//! place in the dialogue tree decided ([`crate::memory::placement`], or a
//! chat model when asked), and the dialogue record written with it in one
//! batch.

use crate::compute::vector::{centroid, mean_unit};
use crate::engine::Engine;
use crate::engine::write::Written;
use crate::error::{Error, Result};
use crate::memory::dialogue::{NewTurn, add_turn, branch_sum};
use crate::memory::llm_placement;
use crate::memory::placement::{self, DecidedBy, Decision, Placement};
use crate::memory::summary;
use crate::model::cost::LlmCost;
use crate::model::dag::Dag;
use crate::model::dialogue::{Dialogue, MAX_TURNS, Role, SummaryPick, span_text};
use crate::model::document::{Document, Format, PackedVectors};
use crate::model::ids::{turn_doc_id, validate_session_id, write_turn_doc_id};
use crate::model::metadata::Metadata;
use crate::progress::{CancelToken, Progress};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

/// Checks a turn before anything is stored: the session id
/// ([`validate_session_id`]), the text as ingest checks any input (size
/// limit, NUL bytes; [`crate::ingest::pipeline::check_bytes`]), and text
/// that is not blank ([`Error::EmptyTurn`]).
pub fn check_turn_input(session: &str, text: &str) -> Result<()> {
    validate_session_id(session)?;
    crate::ingest::pipeline::check_bytes(&format!("session {session}"), text.as_bytes())?;
    if text.trim().is_empty() {
        return Err(Error::EmptyTurn {
            session: session.to_owned(),
        });
    }
    Ok(())
}

/// One turn for [`crate::Db::append_turns`] to append.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnInput {
    /// Who speaks it.
    pub role: Role,
    /// Its text.
    pub text: String,
    /// When it was said, in seconds since the Unix epoch (UTC); see
    /// [`crate::model::time`] for RFC 3339 text.
    pub at: Option<i64>,
    /// Where it goes.
    pub placement: Placement,
    /// What the caller says about it (its speaker, its source, any key):
    /// its document's metadata, which `WHERE meta.KEY …` filters on in a
    /// `session('id')` scope.
    pub metadata: Metadata,
}

impl TurnInput {
    /// A turn by `role` with `text`, placed automatically, without a time.
    pub fn new(role: Role, text: impl Into<String>) -> TurnInput {
        TurnInput {
            role,
            text: text.into(),
            ..TurnInput::default()
        }
    }

    /// A turn from its JSON form, as `session add --jsonl` lines and the
    /// server take it: `{text, role?, at?, placement?, metadata?}`, `at` in
    /// RFC 3339 or a plain date, `metadata` an object as documents' is,
    /// other fields refused. The error says what is wrong; callers add
    /// where.
    pub fn from_json(json: &str) -> std::result::Result<TurnInput, String> {
        /// The JSON form.
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct TurnJson {
            text: String,
            #[serde(default)]
            role: Role,
            at: Option<String>,
            #[serde(default)]
            placement: Placement,
            metadata: Option<serde_json::Value>,
        }
        let turn: TurnJson =
            serde_json::from_str(json).map_err(|e| format!("not a turn object: {e}"))?;
        let at = turn
            .at
            .map(|at| crate::model::time::parse(&at))
            .transpose()
            .map_err(|e| e.to_string())?;
        let metadata = (turn.metadata.as_ref())
            .map(Metadata::from_json)
            .transpose()
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        Ok(TurnInput {
            role: turn.role,
            text: turn.text,
            at,
            placement: turn.placement,
            metadata,
        })
    }
}

impl TurnInput {
    /// The JSON form [`TurnInput::from_json`] reads back.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "text": self.text,
            "role": self.role,
            "at": self.at.map(crate::model::time::format),
            "placement": self.placement,
            "metadata": self.metadata.to_json(),
        })
    }
}

/// What [`crate::Db::append_turns`] did with one turn: where it went and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TurnReceipt {
    /// The session id.
    pub session: String,
    /// The turn's number.
    pub turn: u32,
    /// Its document id.
    pub doc: String,
    /// Who spoke it.
    pub role: Role,
    /// When it was said (RFC 3339, UTC), if given.
    #[serde(serialize_with = "crate::model::time::serialize_at")]
    pub at: Option<i64>,
    /// Its parent turn (`None`: the first turn of a topic).
    pub parent: Option<u32>,
    /// Its topic.
    pub topic: u32,
    /// Its branch.
    pub branch: u32,
    /// Its EDUs.
    pub edus: u32,
    /// Its tokens.
    pub tokens: u64,
    /// Its summary: a closed EDU span of its own text.
    pub summary: [u32; 2],
    /// The placement decision and the similarities behind it.
    pub decision: Decision,
}

/// The work of [`crate::Db::append_turn`]: [`append_turns`] of one turn.
pub(crate) fn append_turn(engine: &Engine, session: &str, input: TurnInput) -> Result<TurnReceipt> {
    let mut receipts = append_turns(
        engine,
        session,
        std::slice::from_ref(&input),
        &crate::progress::NoProgress,
        &CancelToken::new(),
    )?;
    Ok(receipts.remove(0))
}

/// A turn analysed before it joins the dialogue: its document, vectors and DAG.
type Prepared = (Document, PackedVectors, Dag);

/// The work of [`crate::Db::append_turns`]: every turn is checked and
/// analysed (in parallel) before anything is written, then placed in
/// order, and all of them are written with the dialogue in one atomic
/// batch. Cancelling writes nothing.
pub(crate) fn append_turns(
    engine: &Engine,
    session: &str,
    inputs: &[TurnInput],
    progress: &dyn Progress,
    cancel: &CancelToken,
) -> Result<Vec<TurnReceipt>> {
    validate_session_id(session)?;
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    for input in inputs {
        check_turn_input(session, &input.text)?;
    }
    if inputs.iter().any(|i| i.placement == Placement::Llm) && engine.chat().is_none() {
        return Err(Error::NoChatModel {
            step: "the LLM placement",
        });
    }
    let empty = || Error::EmptyTurn {
        session: session.to_owned(),
    };
    engine.write(|| {
        let existing = engine.dialogue_to_change(session)?;
        let first = existing.as_ref().map_or(0, |d| d.turns.len() as u32);
        if u64::from(first) + inputs.len() as u64 > u64::from(MAX_TURNS) {
            return Err(Error::SessionFull {
                session: session.to_owned(),
                limit: MAX_TURNS,
            });
        }
        // The first turn's unknown explicit target fails before any
        // analysis; a later turn's (which may name a turn of this batch) is
        // checked as that turn is placed. Nothing is written either way.
        if let Some(input) = inputs.first() {
            placement::check(session, existing.as_ref(), input.placement)?;
        }
        progress.start("analyse turns", inputs.len() as u64);
        let prepared = inputs
            .par_iter()
            .enumerate()
            .map(|(index, input)| -> Result<Prepared> {
                cancel.check()?;
                let id = turn_doc_id(session, first + index as u32);
                // Text with no words to index (only punctuation, say) is an
                // empty turn, not an error naming the internal document id.
                let mut prepared = engine
                    .prepare_text(&id, input.text.clone(), Format::Text)
                    .map_err(|e| match e {
                        Error::EmptyDocument { .. } => empty(),
                        e => e,
                    })?;
                prepared.0.metadata = input.metadata.clone();
                progress.advance(1, &id);
                Ok(prepared)
            })
            .collect::<Result<Vec<Prepared>>>();
        progress.finish();
        let prepared = prepared?;
        cancel.check()?;
        let mut dialogue = existing.unwrap_or_else(|| Dialogue {
            id: session.to_owned(),
            turns: Vec::new(),
            topics: Vec::new(),
            branches: Vec::new(),
            current: 0,
        });
        let mut vectors = TurnVectors::new(engine, session, first, &prepared);
        let mut receipts = Vec::with_capacity(inputs.len());
        for (input, (doc, doc_vectors, _)) in inputs.iter().zip(&prepared) {
            receipts.push(place_turn(
                &mut dialogue,
                session,
                input,
                doc,
                doc_vectors,
                &mut vectors,
            )?);
        }
        engine.store().put_turns(&prepared, &dialogue)?;
        let put = prepared.into_iter().map(|(doc, ..)| doc).collect();
        Ok((
            receipts,
            Written {
                put,
                removed: Vec::new(),
                sessions: vec![dialogue],
            },
        ))
    })
}

/// Unit vectors (and texts) of a session's turns, for placement and
/// summaries: the new turns' from their analysis, earlier turns' read from
/// the store, each turn's mean computed once.
pub(super) struct TurnVectors<'a> {
    engine: &'a Engine,
    session: &'a str,
    /// The number of the first new turn.
    first: u32,
    /// The new turns, from `first` on.
    prepared: &'a [Prepared],
    /// Means of the new turns computed so far.
    means: HashMap<u32, Arc<Vec<f32>>>,
    /// The document id last looked up (its allocation reused).
    id: String,
}

impl<'a> TurnVectors<'a> {
    /// The vectors of session `session`'s turns, those from `first` on
    /// being `prepared` (not yet stored).
    pub(super) fn new(
        engine: &'a Engine,
        session: &'a str,
        first: u32,
        prepared: &'a [Prepared],
    ) -> TurnVectors<'a> {
        TurnVectors {
            engine,
            session,
            first,
            prepared,
            means: HashMap::new(),
            id: String::new(),
        }
    }

    /// Turn `turn`'s EDU vectors (row-major) and their dimension.
    pub(super) fn edus(&self, turn: u32) -> Result<(std::borrow::Cow<'_, [f32]>, usize)> {
        let fresh = turn
            .checked_sub(self.first)
            .and_then(|i| self.prepared.get(i as usize));
        Ok(match fresh {
            Some((_, vectors, _)) => {
                let dimension = vectors.dimension as usize;
                (vectors.edus.to_f32(dimension).into(), dimension)
            }
            None => {
                let (edus, dimension) =
                    self.engine.edu_vectors(&turn_doc_id(self.session, turn))?;
                (edus.into(), dimension)
            }
        })
    }

    /// Turn `turn`'s unit vector: the unit mean of its EDU vectors (a
    /// stored turn's from the engine's centroid cache, as placing each
    /// turn compares with every turn of its topic).
    pub(super) fn turn(&mut self, turn: u32) -> Result<Arc<Vec<f32>>> {
        if turn < self.first {
            write_turn_doc_id(&mut self.id, self.session, turn);
            return self.engine.centroid(&self.id);
        }
        if let Some(mean) = self.means.get(&turn) {
            return Ok(Arc::clone(mean));
        }
        let (edus, dimension) = self.edus(turn)?;
        let mean = Arc::new(centroid(&edus, dimension));
        self.means.insert(turn, Arc::clone(&mean));
        Ok(mean)
    }

    /// Turn `turn`'s text.
    pub(super) fn text(&self, turn: u32) -> Result<String> {
        let fresh = turn
            .checked_sub(self.first)
            .and_then(|i| self.prepared.get(i as usize));
        match fresh {
            Some((doc, ..)) => Ok(doc.text.clone()),
            None => Ok(self
                .engine
                .document(&turn_doc_id(self.session, turn))?
                .text()?
                .to_owned()),
        }
    }

    /// The unit vector of summary pick `pick`'s EDUs.
    pub(super) fn pick(&self, pick: &SummaryPick) -> Result<Vec<f32>> {
        let (edus, dimension) = self.edus(pick.turn)?;
        Ok(mean_unit(
            &edus,
            dimension,
            pick.edus.first as usize,
            pick.edus.last as usize,
        ))
    }
}

/// Places one analysed turn (`doc` with its `doc_vectors`) in `dialogue`:
/// resolves its placement, picks its summary and adds it.
fn place_turn(
    dialogue: &mut Dialogue,
    session: &str,
    input: &TurnInput,
    doc: &Document,
    doc_vectors: &PackedVectors,
    vectors: &mut TurnVectors<'_>,
) -> Result<TurnReceipt> {
    let existing = (!dialogue.turns.is_empty()).then_some(&*dialogue);
    let placement = placement::check(session, existing, input.placement)?;
    let id = doc.meta.id.clone();
    let (Some(first), Some(last)) = (doc.edus.first(), doc.edus.last()) else {
        return Err(Error::EmptyTurn {
            session: session.to_owned(),
        });
    };
    let bytes = [first.start, last.end];
    let tokens = crate::model::tokens::count(span_text(&id, &doc.text, bytes)?);
    let dimension = doc_vectors.dimension as usize;
    let edu_vectors = doc_vectors.edus.to_f32(dimension);
    let vector = centroid(&edu_vectors, dimension);
    let cue = placement::opens_as_continuation(&doc.text);
    let mut resolved = placement::resolve(existing, placement, &vector, cue, &mut |turn| {
        vectors.turn(turn)
    })?;
    if let Some(dialogue) = existing
        && input.placement == Placement::Llm
        && resolved.decision.in_doubt()
    {
        resolved = placed_by_model(dialogue, session, resolved, &doc.text, &vector, vectors)?;
    }
    let number = dialogue.turns.len() as u32;
    let (pick, pick_vector) = summary::turn_summary(number, doc, &edu_vectors, dimension);
    let branch_sum = branch_sum(dialogue, &resolved, &mut |turn| vectors.turn(turn))?;
    let mut stored_pick_vector = |p: &SummaryPick| vectors.pick(p);
    add_turn(
        dialogue,
        &resolved,
        NewTurn {
            role: input.role,
            doc: id.clone(),
            summary: pick,
            edus: doc.meta.edus,
            bytes,
            tokens: u64::from(tokens),
            at: input.at,
            vector,
            summary_vector: pick_vector,
        },
        branch_sum,
        &mut stored_pick_vector,
    )?;
    dialogue.check_tree().map_err(|message| Error::Invariant {
        doc: id.clone(),
        message,
    })?;
    let turn = dialogue.current_turn();
    Ok(TurnReceipt {
        session: session.to_owned(),
        turn: number,
        doc: id,
        role: input.role,
        at: input.at,
        parent: turn.parent,
        topic: turn.topic,
        branch: turn.branch,
        edus: turn.edus,
        tokens: turn.tokens,
        summary: [pick.edus.first, pick.edus.last],
        decision: resolved.decision,
    })
}

/// The placement the chat model decides for a turn whose similarities left
/// `auto` (their resolution) in doubt, keeping those similarities in the
/// decision; `auto` itself when the model's replies stay invalid.
fn placed_by_model(
    dialogue: &Dialogue,
    session: &str,
    auto: placement::Resolved,
    text: &str,
    vector: &[f32],
    vectors: &mut TurnVectors<'_>,
) -> Result<placement::Resolved> {
    let chat = vectors.engine.chat().ok_or(Error::NoChatModel {
        step: "the LLM placement",
    })?;
    let chosen = llm_placement::topics_shown(dialogue, auto.decision.best_other_topic);
    // Each topic by its latest turn still said (a topic all forgotten is
    // not shown).
    let topics = chosen
        .into_iter()
        .filter_map(|topic| {
            let latest =
                (dialogue.turns.iter().rev()).find(|t| t.topic == topic && !t.is_forgotten())?;
            Some(vectors.text(latest.number).map(|text| (topic, text)))
        })
        .collect::<Result<Vec<_>>>()?;
    let path = dialogue.active_path();
    let recent = path[path.len().saturating_sub(llm_placement::RECENT_TURNS)..]
        .iter()
        .map(|&turn| Ok((turn, vectors.text(turn)?)))
        .collect::<Result<Vec<_>>>()?;
    let fork_candidate = match auto.decision.fork_candidate {
        Some((turn, _)) if !path.ends_with(&[turn]) => Some((turn, vectors.text(turn)?)),
        _ => None,
    };
    let shown = llm_placement::Shown {
        topics,
        recent,
        fork_candidate,
        new_turn: text,
    };
    let (decided, cost) = llm_placement::decide(chat, dialogue, &shown)?;
    let Some(decided) = decided else {
        let mut fallback = auto;
        fallback.decision.decided_by = DecidedBy::Fallback;
        fallback.decision.llm = LlmCost {
            fallbacks: 1,
            ..cost
        };
        return Ok(fallback);
    };
    let checked = placement::check(session, Some(dialogue), decided)?;
    // The model's placement is explicit: no cue is weighed.
    let mut resolved = placement::resolve(Some(dialogue), checked, vector, false, &mut |turn| {
        vectors.turn(turn)
    })?;
    resolved.decision = placement::Decision {
        requested: Placement::Llm,
        topic: resolved.decision.topic,
        branch: resolved.decision.branch,
        decided_by: DecidedBy::Model,
        llm: cost,
        ..auto.decision
    };
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_reads_back_from_its_json_form() {
        let placements = [Placement::Auto, Placement::NewTopic, Placement::Fork(3)];
        for (i, placement) in placements.into_iter().enumerate() {
            let mut input = TurnInput {
                placement,
                ..TurnInput::new(Role::Assistant, "It \"rains\" in Kyoto.")
            };
            input.at = (i > 0).then_some(1_700_000_000 + i as i64);
            if i % 2 == 1 {
                input.metadata = Metadata::from_json(&serde_json::json!({
                    "speaker": "Caroline", "page": i, "tags": ["trip"]
                }))
                .unwrap();
            }
            let json = input.to_json().to_string();
            assert_eq!(TurnInput::from_json(&json), Ok(input), "{json}");
        }
    }

    #[test]
    fn a_turn_s_metadata_is_refused_as_a_document_s_is() {
        let refused = TurnInput::from_json(r#"{"text": "x", "metadata": {"where": {"a": 1}}}"#);
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("where")),
            "{refused:?}"
        );
        let refused = TurnInput::from_json(r#"{"text": "x", "metadata": ["speaker"]}"#);
        assert!(refused.is_err());
    }
}

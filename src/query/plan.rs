//! Binding: a parsed [`Statement`] plus parameters becomes a typed, checked
//! [`Plan`]. Every semantic error (unknown document, bad regex, a budget of
//! 0, an absurd number, a clause whose index does not exist yet) is raised
//! here, pointing at the value or clause at fault.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::Arc;

use super::ast::{self, Expand, Order, Output, Scope, Seed, Show, Statement, ValueKind};
use super::catalog::Catalog;
use super::condition::{Filter, MetaCheck, documents_meeting, meta_documents};
use super::error::{QueryError, nearest};
use crate::model::dialogue::TimedTurns;
use crate::model::metadata::MetaValue;
use crate::model::tree::NodeKind;
use crate::query::params::{Param, Params};

/// Default [`SelectPlan::limit`] when neither BUDGET nor LIMIT is given.
pub const DEFAULT_LIMIT: usize = 10;
/// Default continuation threshold of TRAVERSE.
pub const DEFAULT_THRESHOLD: f32 = 0.3;
/// Largest accepted BUDGET, in tokens.
pub const MAX_BUDGET: u64 = 10_000_000;
/// Largest accepted LIMIT.
pub const MAX_LIMIT: u64 = 100_000;
/// Largest accepted level or depth.
pub const MAX_LEVEL: u64 = 1_000;
/// Largest accepted page number.
pub const MAX_PAGE: u64 = 1_000_000;
/// Largest accepted CONTEXT, in EDUs either side.
pub const MAX_CONTEXT: u64 = 10_000;
/// Longest accepted compiled regex, in bytes.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Largest `MIN` a BM25 seed takes (BM25 scores are unbounded; real ones
/// stay far below this).
const MAX_BM25_MIN: f64 = 1000.0;
/// Longest seed text (BM25, NEAR, HYBRID), inline or a parameter, in
/// bytes: about 3,000 words, more than any question; the cost of a full-text
/// query grows with its terms.
pub const MAX_SEED_TEXT_BYTES: usize = 16 * 1024;

/// A statement ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// EXPLAIN was given.
    pub explain: bool,
    /// What to do.
    pub kind: PlanKind,
}

/// A retrieval or a browse.
#[derive(Debug, Clone)]
pub enum PlanKind {
    /// SELECT.
    Select(Box<SelectPlan>),
    /// SHOW.
    Show(ShowPlan),
}

/// A bound SELECT.
#[derive(Debug, Clone)]
pub struct SelectPlan {
    /// Result shape.
    pub output: Output,
    /// Documents to look in: `None` for every document.
    pub docs: Option<Vec<String>>,
    /// The scope as written, for EXPLAIN.
    pub scope_text: String,
    /// WHERE, compiled.
    pub filter: Option<Filter>,
    /// SEED: how relevance is scored, and against what text.
    pub seed: Option<SeedPlan>,
    /// TRAVERSE: threshold and deepest level.
    pub traverse: Option<(f32, Option<u16>)>,
    /// PROPAGATE.
    pub propagate: Option<PropagatePlan>,
    /// EXPAND.
    pub expand: Option<Growth>,
    /// BUDGET in tokens.
    pub budget: Option<u64>,
    /// ORDER BY (POSITION with a budget, SCORE without, unless given).
    pub order: Order,
    /// Most items returned.
    pub limit: usize,
    /// WITH BOXES.
    pub boxes: bool,
    /// The times of the scope's session turns, by document id (empty
    /// unless the scope is a session).
    pub times: HashMap<String, i64>,
}

/// A bound PROPAGATE.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PropagatePlan {
    /// Levels carried down; `None`: from each document's top level to its chunks.
    pub steps: Option<u32>,
    /// Weight of propagated against direct score.
    pub alpha: f32,
    /// Share of a candidate's score passed to the sections it names (0:
    /// propagation stays within each document's DAG).
    pub across: f32,
}

/// PROPAGATE's alpha when none is given.
pub const DEFAULT_PROPAGATE_ALPHA: f32 = 0.5;
/// PROPAGATE's ACROSS when none is given: tuned on the HotpotQA and
/// MuSiQue dev sets (docs/benchmarks.md).
pub const DEFAULT_PROPAGATE_ACROSS: f32 = 0.8;
/// Largest accepted STEPS (the DAG has at most 17 levels).
pub const MAX_STEPS: u64 = 16;

/// A bound SEED.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedPlan {
    /// The text relevance is measured against (empty for a given vector).
    pub text: String,
    /// `NEAR($v)` with a vector parameter: the caller's query vector, of
    /// unit length, searched for instead of the text's embedding.
    pub vector: Option<Vec<f32>>,
    /// How.
    pub method: SeedMethod,
    /// `MIN x`: hits whose match score (BM25, cosine, HYBRID's fused
    /// score on its fixed scale) is below it are dropped before the
    /// ranking is divided by its best.
    pub min: Option<f32>,
}

/// How a SEED scores nodes and EDUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SeedMethod {
    /// BM25 over the full-text index.
    Bm25,
    /// Cosine similarity over the vector index.
    Near,
    /// `alpha × cosine + (1 − alpha) × BM25`, cosine as it is and BM25
    /// divided by the query's idf sum; the fused ranking divided by its best.
    Hybrid {
        /// Weight of the vector score, 0..=1.
        alpha: f32,
    },
}

/// Where a `time` condition is written in `pred`, if it has one.
fn time_condition(pred: &ast::Pred) -> Option<Range<usize>> {
    match pred {
        ast::Pred::Time(_, value) => Some(value.at.clone()),
        ast::Pred::And(preds) | ast::Pred::Or(preds) => preds.iter().find_map(time_condition),
        ast::Pred::Not(pred) => time_condition(pred),
        _ => None,
    }
}

/// HYBRID's alpha when none is given: vectors and BM25 weigh the same.
pub const DEFAULT_HYBRID_ALPHA: f32 = 0.5;

/// EXPAND, bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// The node's whole span (an EDU grows to its innermost node).
    Subtree,
    /// The parent node.
    Parent,
    /// The pick and its neighbouring siblings.
    Siblings,
    /// `n` EDUs either side.
    Context(u32),
}

/// A bound SHOW.
#[derive(Debug, Clone)]
pub enum ShowPlan {
    /// Every document.
    Docs,
    /// A tree, to a depth.
    Tree(String, Option<u16>),
    /// A DAG, at one level or all.
    Dag(String, Option<u16>),
    /// One node with its text.
    Node(String, u32),
    /// EDUs of a document.
    Edus(String, Option<(u32, u32)>),
    /// Store totals.
    Stats,
    /// Every session.
    Sessions,
    /// One session's dialogue tree.
    Session(String),
}

/// Names `kind =` accepts.
pub const KIND_NAMES: [&str; 7] = [
    "document",
    "section",
    "segment",
    "paragraph",
    "list",
    "table",
    "edu",
];

/// Binds `statement` (parsed from `source`) with `params` against `catalog`.
pub fn bind(
    source: &str,
    statement: &Statement,
    params: &Params,
    catalog: &dyn Catalog,
) -> crate::error::Result<Plan> {
    let binder = Binder {
        source,
        params,
        catalog,
    };
    let kind = match &statement.body {
        ast::Body::Select(select) => PlanKind::Select(Box::new(binder.select(select)?)),
        ast::Body::Show(show) => PlanKind::Show(binder.show(show)?),
    };
    Ok(Plan {
        explain: statement.explain,
        kind,
    })
}

/// The ids of the documents (session turns not among them) meeting
/// `condition`, parsed from `source`, sorted: for listing documents by
/// their metadata. A condition on nodes (level, kind, title, page, time)
/// is an error at its place.
pub fn documents_where(
    source: &str,
    condition: &ast::Pred,
    catalog: &dyn Catalog,
) -> crate::error::Result<Vec<String>> {
    if let Some(at) = node_condition(condition) {
        let message =
            "this is a condition on nodes; documents are listed by meta.KEY and doc conditions";
        return Err(QueryError::new(source, at, message).into());
    }
    let binder = Binder {
        source,
        params: &Params::default(),
        catalog,
    };
    let filter = binder.filter(condition)?;
    let mut universe = || Ok(catalog.document_ids()?.into_iter().collect());
    let meeting = documents_meeting(&filter, &mut universe)?.unwrap_or_default();
    Ok(meeting
        .into_iter()
        .filter(|doc| !crate::model::ids::is_turn_id(doc))
        .collect())
}

/// Where the first condition on nodes in `pred` is written, if any.
fn node_condition(pred: &ast::Pred) -> Option<Range<usize>> {
    match pred {
        ast::Pred::Level(_, value)
        | ast::Pred::Time(_, value)
        | ast::Pred::Page(_, value)
        | ast::Pred::Title(value) => Some(value.at.clone()),
        ast::Pred::Kind { at, .. } => Some(at.clone()),
        ast::Pred::Doc(_) | ast::Pred::Meta { .. } => None,
        ast::Pred::And(preds) | ast::Pred::Or(preds) => preds.iter().find_map(node_condition),
        ast::Pred::Not(pred) => node_condition(pred),
    }
}

struct Binder<'a> {
    source: &'a str,
    params: &'a Params,
    catalog: &'a dyn Catalog,
}

/// A bound value: text or number.
enum Bound {
    Text(String),
    Number(String),
}

impl Binder<'_> {
    fn error(&self, at: Range<usize>, message: impl Into<String>) -> QueryError {
        QueryError::new(self.source, at, message)
    }

    fn value(&self, value: &ast::Value) -> crate::error::Result<Bound> {
        Ok(match &value.kind {
            ValueKind::Str(text) => Bound::Text(text.clone()),
            ValueKind::Number(number) => Bound::Number(number.clone()),
            // Only metadata conditions take booleans (`Binder::meta_value`).
            ValueKind::Bool(b) => Bound::Text(b.to_string()),
            ValueKind::Param(name) => match self.params.get(name) {
                Some(Param::Text(text)) => Bound::Text(text.clone()),
                Some(Param::Number(number)) => Bound::Number(number.to_string()),
                Some(Param::Vector(_)) => {
                    return Err(self
                        .error(
                            value.at.clone(),
                            format!("parameter ${name} is a vector, which only NEAR takes"),
                        )
                        .with_hint("seed with NEAR($name), or bind text")
                        .into());
                }
                None => {
                    return Err(self
                        .error(value.at.clone(), format!("parameter ${name} is not given"))
                        .into());
                }
            },
        })
    }

    /// A text value; a number parameter is taken as its decimal text.
    fn text(&self, value: &ast::Value) -> crate::error::Result<String> {
        Ok(match self.value(value)? {
            Bound::Text(text) | Bound::Number(text) => text,
        })
    }

    /// The query vector `value` binds, scaled to unit length, when it is a
    /// vector parameter: of the store's dimension, finite, not all zeros.
    fn query_vector(&self, value: &ast::Value) -> crate::error::Result<Option<Vec<f32>>> {
        let ValueKind::Param(name) = &value.kind else {
            return Ok(None);
        };
        let Some(Param::Vector(vector)) = self.params.get(name) else {
            return Ok(None);
        };
        let dimension = self.catalog.vector_dimension();
        let refused = |message: String| Err(self.error(value.at.clone(), message).into());
        if vector.len() != dimension {
            return refused(format!(
                "parameter ${name} is a vector of {} numbers; this store's vectors have {dimension}",
                vector.len()
            ));
        }
        if !vector.iter().all(|x| x.is_finite()) || vector.iter().all(|&x| x == 0.0) {
            return refused(format!(
                "parameter ${name} must be a vector of finite numbers, not all zero"
            ));
        }
        let mut unit = vector.clone();
        crate::compute::vector::normalise(&mut unit);
        Ok(Some(unit))
    }

    /// A seed's text, at most [`MAX_SEED_TEXT_BYTES`] long.
    fn seed_text(&self, value: &ast::Value) -> crate::error::Result<String> {
        let text = self.text(value)?;
        if text.len() > MAX_SEED_TEXT_BYTES {
            return Err(self
                .error(
                    value.at.clone(),
                    format!(
                        "a seed text of {} bytes; at most {MAX_SEED_TEXT_BYTES} are searched for",
                        text.len()
                    ),
                )
                .into());
        }
        Ok(text)
    }

    fn real(&self, value: &ast::Value, what: &str, range: Range<f64>) -> crate::error::Result<f64> {
        let number = match self.value(value)? {
            Bound::Number(number) => number.parse::<f64>().ok(),
            Bound::Text(_) => None,
        };
        match number {
            Some(x) if x.is_finite() && x >= range.start && x <= range.end => Ok(x),
            _ => Err(self
                .error(
                    value.at.clone(),
                    format!(
                        "{what} must be a number from {} to {}",
                        range.start, range.end
                    ),
                )
                .into()),
        }
    }

    fn whole(
        &self,
        value: &ast::Value,
        what: &str,
        min: u64,
        max: u64,
    ) -> crate::error::Result<u64> {
        let bound = self.value(value)?;
        let number = match &bound {
            Bound::Number(number) if number.bytes().all(|b| b.is_ascii_digit()) => {
                // Digits only: the only failure is overflow, which is "too large".
                Ok((number.parse::<u64>().unwrap_or(u64::MAX), number.as_str()))
            }
            Bound::Number(number) => Err(format!("{what} must be a whole number, not {number}")),
            Bound::Text(text) => Err(format!(
                "{what} must be a whole number, not the text '{text}'"
            )),
        };
        match number {
            Ok((n, _)) if n < min => Err(self
                .error(value.at.clone(), format!("{what} must be at least {min}"))
                .into()),
            // The number as written: one past u64 would read as u64::MAX.
            Ok((n, written)) if n > max => {
                let shown = match written.trim_start_matches('0') {
                    digits if digits.len() > 40 => {
                        format!("{}… ({} digits)", &digits[..40], digits.len())
                    }
                    digits => digits.to_owned(),
                };
                Err(self
                    .error(
                        value.at.clone(),
                        format!("{what} of {shown} is too large; at most {max}"),
                    )
                    .into())
            }
            Ok((n, _)) => Ok(n),
            Err(message) => Err(self.error(value.at.clone(), message).into()),
        }
    }

    /// An existing document id, or an error suggesting the nearest one.
    fn document(&self, value: &ast::Value) -> crate::error::Result<String> {
        let id = self.text(value)?;
        if self.catalog.document_size(&id)?.is_some() {
            return Ok(id);
        }
        let ids = self.catalog.document_ids()?;
        let candidates: Vec<&str> = ids.iter().map(String::as_str).collect();
        let error = QueryError::new(self.source, value.at.clone(), format!("no document '{id}'"));
        Err(match nearest(&id, &candidates) {
            Some(near) => error.with_hint(format!("did you mean '{near}'?")),
            None => error.with_hint("SHOW DOCS lists the documents"),
        }
        .into())
    }

    /// An existing session id and its turn documents, or an error
    /// suggesting the nearest session.
    fn session(&self, value: &ast::Value) -> crate::error::Result<(String, TimedTurns)> {
        let id = self.text(value)?;
        if let Some(turns) = self.catalog.session_turns(&id)? {
            return Ok((id, turns));
        }
        let ids = self.catalog.session_ids()?;
        let candidates: Vec<&str> = ids.iter().map(String::as_str).collect();
        let error = QueryError::new(self.source, value.at.clone(), format!("no session '{id}'"));
        Err(match nearest(&id, &candidates) {
            Some(near) => error.with_hint(format!("did you mean '{near}'?")),
            None => error.with_hint("SHOW SESSIONS lists the sessions"),
        }
        .into())
    }

    fn select(&self, select: &ast::Select) -> crate::error::Result<SelectPlan> {
        let mut times = HashMap::new();
        let (docs, scope_text) = match &select.scope {
            // Session turns are documents but not part of `*`: the indexes
            // keep them apart (see `FullTextReader::rank`).
            None | Some((Scope::All, _)) => (None, "*".to_owned()),
            Some((Scope::Doc(value), at)) => (
                Some(vec![self.document(value)?]),
                self.source[at.clone()].to_owned(),
            ),
            Some((Scope::Docs(value), at)) => {
                let pattern = self.text(value)?;
                let matcher = globset::Glob::new(&pattern)
                    .map_err(|e| self.error(value.at.clone(), format!("bad glob: {e}")))?
                    .compile_matcher();
                let ids = self.catalog.document_ids()?;
                let matching = ids.into_iter().filter(|id| matcher.is_match(id)).collect();
                (Some(matching), self.source[at.clone()].to_owned())
            }
            Some((Scope::Session(value), at)) => {
                let turns = self.session(value)?.1;
                times.extend(
                    turns
                        .iter()
                        .filter_map(|(doc, at)| Some((doc.clone(), (*at)?))),
                );
                let docs = turns.into_iter().map(|(doc, _)| doc).collect();
                (Some(docs), self.source[at.clone()].to_owned())
            }
        };
        let in_session = matches!(select.scope, Some((Scope::Session(_), _)));
        let time_order = select
            .order
            .as_ref()
            .filter(|(order, _)| *order == Order::Time)
            .map(|(_, at)| at.clone());
        let time_at = select
            .filter
            .as_ref()
            .and_then(time_condition)
            .or(time_order);
        if let Some(at) = time_at.filter(|_| !in_session) {
            return Err(self
                .error(at, "time is a property of session turns")
                .with_hint("scope the query to a session: FROM session('id')")
                .into());
        }
        let filter = select.filter.as_ref().map(|p| self.filter(p)).transpose()?;
        let (docs, scope_text) = match &filter {
            Some(filter) => self.narrowed(docs, scope_text, filter)?,
            None => (docs, scope_text),
        };
        let seed = match &select.seed {
            None => None,
            Some((seed, _)) => {
                let (text, method) = match seed {
                    Seed::Bm25(text) => (text, SeedMethod::Bm25),
                    Seed::Near(text) => (text, SeedMethod::Near),
                    Seed::Hybrid(text, alpha) => (
                        text,
                        SeedMethod::Hybrid {
                            alpha: match alpha {
                                Some(v) => self.real(v, "HYBRID's alpha", 0.0..1.0)? as f32,
                                None => DEFAULT_HYBRID_ALPHA,
                            },
                        },
                    ),
                };
                let most = match method {
                    SeedMethod::Bm25 => MAX_BM25_MIN,
                    SeedMethod::Near | SeedMethod::Hybrid { .. } => 1.0,
                };
                let min = (select.seed_min.as_ref())
                    .map(|v| self.real(v, "SEED's MIN", 0.0..most))
                    .transpose()?;
                let vector = match seed {
                    Seed::Near(value) => self.query_vector(value)?,
                    _ => None,
                };
                Some(SeedPlan {
                    text: match vector {
                        Some(_) => String::new(),
                        None => self.seed_text(text)?,
                    },
                    vector,
                    method,
                    min: min.map(|m| m as f32),
                })
            }
        };
        let propagate = match &select.propagate {
            None => None,
            Some((_, at)) if seed.is_none() => {
                return Err(self
                    .error(
                        at.clone(),
                        "PROPAGATE needs a SEED to score the DAG's nodes",
                    )
                    .with_hint("add SEED BM25('...')")
                    .into());
            }
            Some((_, at)) if select.traverse.is_some() => {
                return Err(self
                    .error(
                        at.clone(),
                        "PROPAGATE and TRAVERSE are two ways to walk; use one of them",
                    )
                    .into());
            }
            Some((propagate, _)) => Some(PropagatePlan {
                steps: propagate
                    .steps
                    .as_ref()
                    .map(|v| self.whole(v, "STEPS", 1, MAX_STEPS))
                    .transpose()?
                    .map(|n| n as u32),
                alpha: match &propagate.alpha {
                    Some(v) => self.real(v, "PROPAGATE's alpha", 0.0..1.0)? as f32,
                    None => DEFAULT_PROPAGATE_ALPHA,
                },
                across: match &propagate.across {
                    Some(v) => self.real(v, "PROPAGATE's ACROSS", 0.0..1.0)? as f32,
                    None => DEFAULT_PROPAGATE_ACROSS,
                },
            }),
        };
        let traverse = match &select.traverse {
            None => None,
            Some((_, at)) if seed.is_none() => {
                return Err(self
                    .error(
                        at.clone(),
                        "TRAVERSE needs a SEED to score the nodes it walks",
                    )
                    .with_hint("add SEED BM25('...')")
                    .into());
            }
            Some((traverse, _)) => Some((
                match &traverse.threshold {
                    Some(v) => self.real(v, "THRESHOLD", 0.0..1.0)? as f32,
                    None => DEFAULT_THRESHOLD,
                },
                traverse
                    .depth
                    .as_ref()
                    .map(|v| self.whole(v, "DEPTH", 0, MAX_LEVEL))
                    .transpose()?
                    .map(|d| d as u16),
            )),
        };
        let expand = match &select.expand {
            None => None,
            Some(Expand::Subtree) => Some(Growth::Subtree),
            Some(Expand::Parent) => Some(Growth::Parent),
            Some(Expand::Siblings) => Some(Growth::Siblings),
            Some(Expand::Context(n)) => {
                Some(Growth::Context(
                    self.whole(n, "CONTEXT", 1, MAX_CONTEXT)? as u32
                ))
            }
        };
        let budget = select
            .budget
            .as_ref()
            .map(|v| match self.whole(v, "a budget", 0, MAX_BUDGET)? {
                0 => Err::<u64, crate::error::Error>(
                    self.error(
                        v.at.clone(),
                        "a budget of 0 tokens can return nothing; give at least 1",
                    )
                    .into(),
                ),
                n => Ok(n),
            })
            .transpose()?;
        let limit = match &select.limit {
            Some(v) => self.whole(v, "LIMIT", 1, MAX_LIMIT)? as usize,
            None if budget.is_some() => usize::MAX,
            None => DEFAULT_LIMIT,
        };
        let order = select
            .order
            .as_ref()
            .map(|(order, _)| *order)
            .unwrap_or(if budget.is_some() {
                Order::Position
            } else {
                Order::Score
            });
        Ok(SelectPlan {
            output: select.output,
            docs,
            scope_text,
            filter,
            seed,
            traverse,
            propagate,
            expand,
            budget,
            order,
            limit,
            boxes: select.boxes,
            times,
        })
    }

    /// The scope's documents (`None`: every document) narrowed to those
    /// that can meet `filter`, with the scope's text saying so.
    fn narrowed(
        &self,
        docs: Option<Vec<String>>,
        scope_text: String,
        filter: &Filter,
    ) -> crate::error::Result<(Option<Vec<String>>, String)> {
        let mut universe = || -> crate::error::Result<BTreeSet<String>> {
            Ok(match &docs {
                Some(docs) => docs.iter().cloned().collect(),
                None => self.catalog.document_ids()?.into_iter().collect(),
            })
        };
        let Some(meeting) = documents_meeting(filter, &mut universe)? else {
            return Ok((docs, scope_text));
        };
        let narrowed: Vec<String> = match &docs {
            Some(docs) => docs
                .iter()
                .filter(|d| meeting.contains(*d))
                .cloned()
                .collect(),
            // Every document: session turns are not among them.
            None => (meeting.into_iter())
                .filter(|doc| !crate::model::ids::is_turn_id(doc))
                .collect(),
        };
        let text = format!(
            "{scope_text}, narrowed by WHERE to {} documents",
            narrowed.len()
        );
        Ok((Some(narrowed), text))
    }

    /// A metadata condition's value: a text (a date when in date form), a
    /// number or a boolean.
    fn meta_value(&self, value: &ast::Value) -> crate::error::Result<MetaValue> {
        Ok(match (&value.kind, self.value(value)?) {
            (ValueKind::Bool(b), _) => MetaValue::Bool(*b),
            (_, Bound::Text(text)) => MetaValue::text(text),
            (_, Bound::Number(number)) => match number.parse::<f64>() {
                Ok(number) if number.is_finite() => MetaValue::Number(number),
                _ => {
                    let message = format!("{number} is not a finite number");
                    return Err(self.error(value.at.clone(), message).into());
                }
            },
        })
    }

    /// A metadata condition, its values bound.
    fn meta_check(&self, condition: &ast::MetaCondition) -> crate::error::Result<MetaCheck> {
        Ok(match condition {
            ast::MetaCondition::Compare(op, value) => {
                MetaCheck::Compare(*op, self.meta_value(value)?)
            }
            ast::MetaCondition::Between(low, high) => {
                let (low_value, high_value) = (self.meta_value(low)?, self.meta_value(high)?);
                if crate::model::metadata::order(&low_value, &high_value).is_none() {
                    let message =
                        "BETWEEN's ends must be of one type (texts, numbers, dates or booleans)";
                    return Err(self.error(low.at.start..high.at.end, message).into());
                }
                MetaCheck::Between(low_value, high_value)
            }
            ast::MetaCondition::In(values) => MetaCheck::In(
                (values.iter())
                    .map(|value| self.meta_value(value))
                    .collect::<crate::error::Result<_>>()?,
            ),
            ast::MetaCondition::Contains(value) => MetaCheck::Contains(self.text(value)?),
            ast::MetaCondition::Exists => MetaCheck::Exists,
        })
    }

    fn filters(&self, preds: &[ast::Pred]) -> crate::error::Result<Vec<Filter>> {
        preds.iter().map(|pred| self.filter(pred)).collect()
    }

    fn filter(&self, pred: &ast::Pred) -> crate::error::Result<Filter> {
        Ok(match pred {
            ast::Pred::Page(op, value) => {
                Filter::Page(*op, self.whole(value, "a page number", 1, MAX_PAGE)? as u32)
            }
            ast::Pred::Level(op, value) => {
                Filter::Level(*op, self.whole(value, "a level", 0, MAX_LEVEL)? as u16)
            }
            ast::Pred::Kind { equal, name, at } => {
                let lower = name.to_ascii_lowercase();
                let kind = match lower.as_str() {
                    "document" => Some(NodeKind::Document),
                    "section" => Some(NodeKind::Section),
                    "segment" => Some(NodeKind::Segment),
                    "paragraph" => Some(NodeKind::Paragraph),
                    "list" => Some(NodeKind::List),
                    "table" => Some(NodeKind::Table),
                    "edu" => None,
                    _ => {
                        let error = QueryError::new(
                            self.source,
                            at.clone(),
                            format!(
                                "unknown node kind '{name}'; expected one of {}",
                                KIND_NAMES.join(", ")
                            ),
                        );
                        return Err(match nearest(&lower, &KIND_NAMES) {
                            Some(near) => error.with_hint(format!("did you mean {near}?")),
                            None => error,
                        }
                        .into());
                    }
                };
                Filter::Kind(*equal, kind)
            }
            ast::Pred::Title(value) => {
                let pattern = self.text(value)?;
                let regex = regex::RegexBuilder::new(&pattern)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| {
                        let message = e.to_string();
                        let last = message
                            .lines()
                            .last()
                            .unwrap_or("invalid")
                            .trim()
                            .to_owned();
                        self.error(value.at.clone(), format!("bad regular expression: {last}"))
                    })?;
                Filter::Title(regex)
            }
            ast::Pred::Doc(value) => Filter::Doc(self.document(value)?),
            ast::Pred::Meta { key, condition, .. } => {
                let check = self.meta_check(condition)?;
                Filter::Docs(Arc::new(meta_documents(self.catalog, key, &check)?))
            }
            ast::Pred::Time(op, value) => {
                let text = self.text(value)?;
                let at = crate::model::time::parse(&text)
                    .map_err(|e| self.error(value.at.clone(), e.to_string()))?;
                Filter::Time(*op, at)
            }
            ast::Pred::And(preds) => Filter::And(self.filters(preds)?),
            ast::Pred::Or(preds) => Filter::Or(self.filters(preds)?),
            ast::Pred::Not(a) => Filter::Not(Box::new(self.filter(a)?)),
        })
    }

    fn show(&self, show: &Show) -> crate::error::Result<ShowPlan> {
        Ok(match show {
            Show::Docs => ShowPlan::Docs,
            Show::Stats => ShowPlan::Stats,
            Show::Sessions => ShowPlan::Sessions,
            Show::Session(value) => ShowPlan::Session(self.session(value)?.0),
            Show::Tree(doc, depth) => ShowPlan::Tree(
                self.document(doc)?,
                depth
                    .as_ref()
                    .map(|v| self.whole(v, "DEPTH", 0, MAX_LEVEL))
                    .transpose()?
                    .map(|d| d as u16),
            ),
            Show::Node(doc, node) => {
                let id = self.document(doc)?;
                let (nodes, _) = self.catalog.document_size(&id)?.unwrap_or_default();
                let last = u64::from(nodes.saturating_sub(1));
                let n = self.whole(node, "a node id", 0, u64::from(u32::MAX))?;
                if n > last {
                    return Err(self
                        .error(
                            node.at.clone(),
                            format!("document '{id}' has nodes 0..{last}; there is no node {n}"),
                        )
                        .into());
                }
                ShowPlan::Node(id, n as u32)
            }
            Show::Edus(doc, range) => {
                let id = self.document(doc)?;
                let (_, edus) = self.catalog.document_size(&id)?.unwrap_or_default();
                let last = u64::from(edus.saturating_sub(1));
                let range = match range {
                    None => None,
                    Some((a, b)) => {
                        let first = self.whole(a, "the first EDU", 0, last)?;
                        let end = self.whole(b, "the last EDU", first, last)?;
                        Some((first as u32, end as u32))
                    }
                };
                ShowPlan::Edus(id, range)
            }
            Show::Dag(doc, level, _) => ShowPlan::Dag(
                self.document(doc)?,
                level
                    .as_ref()
                    .map(|v| self.whole(v, "LEVEL", 1, MAX_LEVEL))
                    .transpose()?
                    .map(|l| l as u16),
            ),
        })
    }
}

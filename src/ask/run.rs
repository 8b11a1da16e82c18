//! [`ask`]: retrieve, read with the model until it has enough, answer with
//! citations; every step recorded for `--explain` and JSON.

use serde::Serialize;

use crate::ask::answer::answer;
use crate::ask::evidence::{DEFAULT_STATEMENT, Evidence};
use crate::ask::judge::judge;
use crate::error::{Error, Result};
use crate::model::cost::LlmCost;
use crate::progress::{CancelToken, Progress};
use crate::query::Item;
use crate::query::corpus::Corpus;

/// How [`crate::Db::ask`] retrieves, reads and answers.
#[derive(Debug, Clone, PartialEq)]
pub struct AskOptions {
    /// Tokens of evidence retrieved at most (`$budget` in the statement).
    pub budget: u64,
    /// The SELECT retrieving the evidence, with `$question` and `$budget`
    /// (default [`DEFAULT_STATEMENT`]: BM25, best first).
    pub statement: Option<String>,
    /// Items shown to the model per step.
    pub group: usize,
    /// Whether to answer after reading (else only retrieval and judgements).
    pub answer: bool,
}

impl Default for AskOptions {
    fn default() -> Self {
        AskOptions {
            budget: 1_024,
            statement: None,
            group: 2,
            answer: true,
        }
    }
}

impl AskOptions {
    /// The statement evidence is retrieved with.
    pub fn statement(&self) -> &str {
        self.statement.as_deref().unwrap_or(DEFAULT_STATEMENT)
    }
}

/// Why reading stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// The model judged the useful evidence enough.
    Enough,
    /// Every retrieved item (the budget) was read.
    Budget,
    /// The statement retrieved nothing.
    Nothing,
}

/// One step of reading: the items shown and the model's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AskStep {
    /// Numbers of the items shown in this step.
    pub shown: Vec<usize>,
    /// Those the verdict found useful (all of them after a fallback).
    pub relevant: Vec<usize>,
    /// Whether the useful evidence so far was judged enough.
    pub enough: bool,
    /// `model`, or `fallback` when the replies stayed invalid (the step
    /// keeps every item and reads on).
    pub judged_by: &'static str,
    /// What the step's calls cost.
    pub cost: LlmCost,
}

/// What [`crate::Db::ask`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AskResult {
    /// The question.
    pub question: String,
    /// The statement that retrieved the evidence.
    pub statement: String,
    /// Every item shown, numbered from 1 in the order shown (best first),
    /// with its coordinates and text.
    pub evidence: Vec<Item>,
    /// The reading steps.
    pub steps: Vec<AskStep>,
    /// Why reading stopped.
    pub stopped: Stopped,
    /// The answer (`None` without the answer step, with nothing retrieved,
    /// or when its replies stayed invalid).
    pub answer: Option<String>,
    /// Numbers of the evidence items the answer cites.
    pub citations: Vec<usize>,
    /// What every call cost, fallbacks included.
    pub cost: LlmCost,
}

impl AskResult {
    /// The items the answer cites, with their coordinates.
    pub fn cited(&self) -> impl Iterator<Item = &Item> {
        self.citations
            .iter()
            .filter_map(|&n| self.evidence.get(n - 1))
    }

    /// The items judged useful so far, each with its number, in the order
    /// judged.
    fn useful(&self) -> impl Iterator<Item = (usize, &Item)> {
        (self.steps.iter().flat_map(|step| &step.relevant))
            .filter_map(|&n| Some((n, self.evidence.get(n.checked_sub(1)?)?)))
    }

    /// The JSON form (the fields above; `cited` lists the cited items).
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        value["cited"] = serde_json::to_value(self.cited().collect::<Vec<_>>()).unwrap_or_default();
        value
    }
}

/// The work of [`crate::Db::ask`].
pub(crate) fn ask(
    corpus: &Corpus<'_>,
    question: &str,
    options: &AskOptions,
    progress: &dyn Progress,
    cancel: &CancelToken,
) -> Result<AskResult> {
    let chat = corpus.chat().ok_or(Error::NoChatModel { step: "ask" })?;
    if question.trim().is_empty() {
        return Err(Error::Usage("ask needs a question".into()));
    }
    if options.group == 0 {
        return Err(Error::Usage("ask shows at least one item per step".into()));
    }
    let mut evidence = Evidence::retrieve(corpus, question, options.statement(), options.budget)?;
    let mut result = AskResult {
        question: question.to_owned(),
        statement: evidence.statement().to_owned(),
        evidence: Vec::new(),
        steps: Vec::new(),
        stopped: Stopped::Nothing,
        answer: None,
        citations: Vec::new(),
        cost: LlmCost::default(),
    };
    if evidence.remaining() == 0 {
        return Ok(result);
    }
    progress.start("ask", evidence.remaining() as u64);
    result.stopped = Stopped::Budget;
    while evidence.remaining() > 0 {
        cancel.check()?;
        let new = evidence.next_group(options.group);
        let first = result.evidence.len() + 1;
        let shown: Vec<usize> = (first..first + new.len()).collect();
        let so_far = result.useful().collect::<Vec<_>>();
        let (verdict, cost) = judge(chat, question, &so_far, &new, first)?;
        let (relevant, enough, judged_by, cost) = match verdict {
            Some(verdict) => (verdict.relevant, verdict.enough, "model", cost),
            None => (
                shown.clone(),
                false,
                "fallback",
                LlmCost {
                    fallbacks: 1,
                    ..cost
                },
            ),
        };
        progress.advance(new.len() as u64, "");
        result.evidence.extend(new);
        result.cost.add(&cost);
        result.steps.push(AskStep {
            shown,
            relevant,
            enough,
            judged_by,
            cost,
        });
        if enough {
            result.stopped = Stopped::Enough;
            break;
        }
    }
    progress.finish();
    if options.answer {
        cancel.check()?;
        // The answer reads the useful items, or everything shown when
        // nothing was judged useful.
        let mut given: Vec<(usize, &Item)> = result.useful().collect();
        if given.is_empty() {
            given = result
                .evidence
                .iter()
                .enumerate()
                .map(|(i, item)| (i + 1, item))
                .collect();
        }
        let (answered, mut cost) = answer(chat, question, &given)?;
        match answered {
            Some(answered) => {
                result.answer = Some(answered.text);
                result.citations = answered.citations;
            }
            None => cost.fallbacks += 1,
        }
        result.cost.add(&cost);
    }
    Ok(result)
}

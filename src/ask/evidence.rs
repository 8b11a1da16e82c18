//! [`Evidence`]: what a SELECT retrieved for a question, in score order.

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::query::corpus::Corpus;
use crate::query::{Item, Params, Query, Rows};

/// The statement evidence is retrieved with when none is given: BM25 over
/// every document, under the budget, best first.
pub const DEFAULT_STATEMENT: &str =
    "SELECT SPANS FROM * SEED BM25($question) BUDGET $budget TOKENS ORDER BY SCORE";

/// The items a SELECT picked for a question, best first: a cursor over
/// them. `ask` reads it a group at a time; an agent may read it itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    items: VecDeque<Item>,
    statement: String,
}

impl Evidence {
    /// Runs `statement` (a SELECT; `$question` and `$budget` are bound to
    /// `question` and `budget`) and keeps its items in score order.
    pub(crate) fn retrieve(
        corpus: &Corpus<'_>,
        question: &str,
        statement: &str,
        budget: u64,
    ) -> Result<Evidence> {
        let params = Params::new()
            .text("question", question)
            .number("budget", budget as f64);
        let result = Query::parse(statement)?.run_on(corpus, &params)?;
        let Rows::Selection(selection) = result.rows else {
            return Err(Error::Usage(format!(
                "evidence is retrieved with a SELECT statement, not {statement:?}"
            )));
        };
        let mut items = selection.items;
        items.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.doc.cmp(&b.doc))
                .then(a.edus[0].cmp(&b.edus[0]))
        });
        Ok(Evidence {
            items: items.into(),
            statement: statement.to_owned(),
        })
    }

    /// The statement that retrieved the evidence.
    pub fn statement(&self) -> &str {
        &self.statement
    }

    /// How many items are left to read.
    pub fn remaining(&self) -> usize {
        self.items.len()
    }

    /// Takes the next (at most) `count` items.
    pub fn next_group(&mut self, count: usize) -> Vec<Item> {
        let count = count.min(self.items.len());
        self.items.drain(..count).collect()
    }
}

impl Iterator for Evidence {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        self.items.pop_front()
    }
}

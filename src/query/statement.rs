//! [`Query`]: a parsed statement, run many times with different
//! parameters.

use crate::engine::Engine;
use crate::error::{QueryError, Result};
use crate::query::ast;
use crate::query::corpus::Corpus;
use crate::query::exec;
use crate::query::params::Params;
use crate::query::parser;
use crate::query::plan;
use crate::query::result::QueryResult;

/// A parsed statement, ready to run many times with different parameters.
#[derive(Debug, Clone)]
pub struct Query {
    source: String,
    statement: ast::Statement,
}

impl Query {
    /// Parses `source`; syntax errors name line and column.
    pub fn parse(source: &str) -> std::result::Result<Query, QueryError> {
        Ok(Query {
            statement: parser::parse(source)?,
            source: source.to_owned(),
        })
    }

    /// The same statement run as if it began with `EXPLAIN`: its result
    /// carries the plan, with each stage's counts and time.
    pub fn explained(mut self) -> Query {
        self.statement.explain = true;
        self
    }

    /// The statement text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Binds `params` and runs the statement on `engine` ([`crate::Db::run`]).
    pub(crate) fn run(&self, engine: &Engine, params: &Params) -> Result<QueryResult> {
        self.run_on(&Corpus::one(engine), params)
    }

    /// Binds `params` and runs the statement on `corpus`, one store or a
    /// shard set's.
    pub(crate) fn run_on(&self, corpus: &Corpus<'_>, params: &Params) -> Result<QueryResult> {
        let started = std::time::Instant::now();
        let plan = plan::bind(&self.source, &self.statement, params, corpus)?;
        let mut result = exec::execute(corpus, &plan)?;
        result.elapsed = started.elapsed();
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::Query;
    use crate::engine::three_fruit_store;
    use crate::query::result::Rows;

    #[test]
    fn every_kind_of_statement_leaves_damaged_documents_out_and_says_so() {
        let (_dir, engine) = three_fruit_store();
        engine.store().damage("pears", false);
        engine.store().damage("plums", true);
        // The full-text index still holds them (the vector index left
        // them out when it caught up, with its own warning): every seed
        // and walk answers from the rest, as listings do, and the load
        // stage counts what it left out.
        for how in ["", "TRAVERSE", "PROPAGATE"] {
            for seed in ["BM25", "NEAR", "HYBRID"] {
                let statement = format!(
                    "EXPLAIN SELECT SPANS FROM * SEED {seed}('apples orchards pears picking plums prunes') {how} BUDGET 256 TOKENS"
                );
                let result = Query::parse(&statement)
                    .unwrap()
                    .run(&engine, &Default::default())
                    .unwrap_or_else(|e| panic!("{statement}: {e}"));
                let Rows::Selection(selection) = &result.rows else {
                    panic!("{statement}: not a selection")
                };
                let docs: Vec<&str> = selection.items.iter().map(|i| i.doc.as_str()).collect();
                assert!(docs.contains(&"apples"), "{statement}: {docs:?}");
                assert!(docs.iter().all(|&d| d == "apples"), "{statement}: {docs:?}");
                let load = result.stages.iter().find(|s| s.operator == "load").unwrap();
                assert!(
                    seed == "NEAR" || load.detail.contains("2 damaged left out"),
                    "{statement}: {load:?}"
                );
            }
        }
    }
}

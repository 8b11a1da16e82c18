//! [`Query`]: a parsed statement, run many times with different
//! parameters.

use crate::engine::Engine;
use crate::error::{QueryError, Result};
use crate::query::ast;
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
        let started = std::time::Instant::now();
        let plan = plan::bind(&self.source, &self.statement, params, engine)?;
        let mut result = exec::execute(engine, &plan)?;
        result.elapsed = started.elapsed();
        Ok(result)
    }
}

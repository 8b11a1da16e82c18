//! Recursive-descent parser: tokens to a [`Statement`]. Keywords are
//! case-insensitive; every error names line and column, what was expected,
//! and the nearest keyword for a misspelling.

use std::ops::Range;

use super::ast::*;
use super::error::{QueryError, nearest};
use super::lexer::{Token, TokenKind, tokenize};

/// Every word of the grammar, spelt as in `docs/query-language.md` (for
/// completion in the console; a test keeps it equal to the documented EBNF).
pub const KEYWORDS: [&str; 63] = [
    "ACROSS",
    "ALPHA",
    "AND",
    "BETWEEN",
    "BM25",
    "BUDGET",
    "BOXES",
    "BY",
    "CONTAINS",
    "CONTEXT",
    "DAG",
    "DEPTH",
    "DOCS",
    "EDUS",
    "EXISTS",
    "EXPAND",
    "EXPLAIN",
    "FROM",
    "HYBRID",
    "IN",
    "JSON",
    "LEVEL",
    "LIMIT",
    "MIN",
    "NEAR",
    "NODE",
    "NODES",
    "NOT",
    "OR",
    "ORDER",
    "PARENT",
    "POSITION",
    "PROPAGATE",
    "SCORE",
    "SEED",
    "SELECT",
    "SESSION",
    "SESSIONS",
    "SHOW",
    "SIBLINGS",
    "SPANS",
    "STATS",
    "STEPS",
    "SUBTREE",
    "TEXT",
    "THRESHOLD",
    "TOKENS",
    "TIME",
    "TRAVERSE",
    "TREE",
    "WHERE",
    "WITH",
    "doc",
    "docs",
    "false",
    "kind",
    "level",
    "meta",
    "page",
    "session",
    "time",
    "title",
    "true",
];

/// Clause keywords of SELECT after FROM.
const CLAUSES: [&str; 10] = [
    "WHERE",
    "SEED",
    "TRAVERSE",
    "PROPAGATE",
    "EXPAND",
    "BUDGET",
    "ORDER",
    "LIMIT",
    "WITH",
    ";",
];

/// Longest statement accepted, in bytes (long texts belong in parameters,
/// which have limits of their own).
pub const MAX_STATEMENT_BYTES: usize = 64 * 1024;

/// Parses one statement (an optional trailing `;` allowed).
pub fn parse(source: &str) -> Result<Statement, QueryError> {
    let mut parser = Parser::of(source, "statement")?;
    let statement = parser.statement()?;
    parser.eat_symbol(";");
    if !matches!(parser.peek().kind, TokenKind::End) {
        return Err(parser.unexpected("end of statement (one statement at a time)", &[]));
    }
    Ok(statement)
}

/// Parses a condition alone, as a WHERE clause writes it (for listing
/// documents by their metadata: `docs --where`).
pub fn parse_condition(source: &str) -> Result<Pred, QueryError> {
    let mut parser = Parser::of(source, "condition")?;
    let condition = parser.or_pred()?;
    if !matches!(parser.peek().kind, TokenKind::End) {
        return Err(parser.unexpected("AND, OR or the end of the condition", &[]));
    }
    Ok(condition)
}

/// Deepest parenthesised condition accepted. With chains of `AND`/`OR`
/// kept as lists and double negations dropped, this bounds the depth of
/// every condition tree, so no statement can exhaust the stack in the
/// parser, the planner, the executor or when the tree is dropped.
const MAX_NESTING: usize = 64;

/// The one predicate of `preds`, or `join` of them all.
fn one_or(mut preds: Vec<Pred>, join: fn(Vec<Pred>) -> Pred) -> Pred {
    if preds.len() == 1 {
        preds.pop().expect("one predicate")
    } else {
        join(preds)
    }
}

struct Parser<'a> {
    source: &'a str,
    tokens: Vec<Token>,
    next: usize,
    /// Open parentheses around the condition being parsed.
    nesting: usize,
}

impl<'a> Parser<'a> {
    /// A parser of `source` (a `what`: statement or condition), refused
    /// past [`MAX_STATEMENT_BYTES`].
    fn of(source: &'a str, what: &str) -> Result<Parser<'a>, QueryError> {
        if source.len() > MAX_STATEMENT_BYTES {
            return Err(QueryError::new(
                source,
                MAX_STATEMENT_BYTES..MAX_STATEMENT_BYTES + 1,
                format!(
                    "the {what} is {} bytes long; at most {MAX_STATEMENT_BYTES} are accepted",
                    source.len()
                ),
            ));
        }
        Ok(Parser {
            source,
            tokens: tokenize(source)?,
            next: 0,
            nesting: 0,
        })
    }
}

impl Parser<'_> {
    fn peek(&self) -> &Token {
        &self.tokens[self.next]
    }

    fn advance(&mut self) -> Token {
        let token = self.tokens[self.next].clone();
        if !matches!(token.kind, TokenKind::End) {
            self.next += 1;
        }
        token
    }

    fn error(&self, at: Range<usize>, message: impl Into<String>) -> QueryError {
        QueryError::new(self.source, at, message)
    }

    /// "expected X, found Y" at the next token, with the nearest of
    /// `keywords` as a hint when the token is a near miss.
    fn unexpected(&self, expected: &str, keywords: &[&str]) -> QueryError {
        let token = self.peek();
        let error = self.error(
            token.start..token.end,
            format!("expected {expected}, found {}", token.describe()),
        );
        match &token.kind {
            TokenKind::Word(word) => match nearest(word, keywords) {
                Some(keyword) => error.with_hint(format!("did you mean {keyword}?")),
                None => error,
            },
            _ => error,
        }
    }

    fn is_word(&self, keyword: &str) -> bool {
        matches!(&self.peek().kind, TokenKind::Word(w) if w.eq_ignore_ascii_case(keyword))
    }

    fn eat_word(&mut self, keyword: &str) -> bool {
        let found = self.is_word(keyword);
        if found {
            self.advance();
        }
        found
    }

    fn expect_word(&mut self, keyword: &str) -> Result<Token, QueryError> {
        if self.is_word(keyword) {
            Ok(self.advance())
        } else {
            Err(self.unexpected(keyword, &[keyword]))
        }
    }

    /// Consumes one of `keywords` and returns it (upper case).
    fn one_of(
        &mut self,
        keywords: &[&'static str],
        expected: &str,
    ) -> Result<&'static str, QueryError> {
        match keywords.iter().find(|k| self.is_word(k)) {
            Some(keyword) => {
                self.advance();
                Ok(keyword)
            }
            None => Err(self.unexpected(expected, keywords)),
        }
    }

    fn eat_symbol(&mut self, symbol: &str) -> bool {
        let found = matches!(self.peek().kind, TokenKind::Symbol(s) if s == symbol);
        if found {
            self.advance();
        }
        found
    }

    fn expect_symbol(&mut self, symbol: &str) -> Result<(), QueryError> {
        if self.eat_symbol(symbol) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{symbol}'"), &[]))
        }
    }

    fn statement(&mut self) -> Result<Statement, QueryError> {
        let explain = self.eat_word("EXPLAIN");
        let body = match self.one_of(&["SELECT", "SHOW"], "SELECT or SHOW")? {
            "SELECT" => Body::Select(Box::new(self.select()?)),
            _ => Body::Show(self.show()?),
        };
        Ok(Statement { explain, body })
    }

    fn select(&mut self) -> Result<Select, QueryError> {
        let mut select = Select {
            output: match ["TEXT", "SPANS", "NODES", "JSON"]
                .into_iter()
                .find(|k| self.is_word(k))
            {
                Some(keyword) => {
                    self.advance();
                    match keyword {
                        "SPANS" => Output::Spans,
                        "NODES" => Output::Nodes,
                        "JSON" => Output::Json,
                        _ => Output::Text,
                    }
                }
                None => Output::Text,
            },
            ..Select::default()
        };
        if !self.is_word("FROM") {
            return Err(self.unexpected(
                "FROM (or an output form TEXT, SPANS, NODES, JSON)",
                &["FROM", "TEXT", "SPANS", "NODES", "JSON"],
            ));
        }
        self.advance();
        let start = self.peek().start;
        let scope = self.scope()?;
        select.scope = Some((scope, start..self.previous_end()));
        loop {
            let token = self.peek().clone();
            let TokenKind::Word(word) = &token.kind else {
                if matches!(token.kind, TokenKind::End | TokenKind::Symbol(";")) {
                    return Ok(select);
                }
                return Err(self.unexpected("a clause (WHERE, SEED, TRAVERSE, PROPAGATE, EXPAND, BUDGET, ORDER BY, LIMIT, WITH BOXES) or the end", &CLAUSES));
            };
            let keyword = word.to_ascii_uppercase();
            let at = token.start..token.end;
            let twice = || {
                self.error(at.clone(), format!("{keyword} is given twice"))
                    .with_hint("give each clause once")
            };
            match keyword.as_str() {
                "WHERE" if select.filter.is_some() => return Err(twice()),
                "SEED" if select.seed.is_some() => return Err(twice()),
                "TRAVERSE" if select.traverse.is_some() => return Err(twice()),
                "PROPAGATE" if select.propagate.is_some() => return Err(twice()),
                "EXPAND" if select.expand.is_some() => return Err(twice()),
                "BUDGET" if select.budget.is_some() => return Err(twice()),
                "ORDER" if select.order.is_some() => return Err(twice()),
                "LIMIT" if select.limit.is_some() => return Err(twice()),
                "WITH" if select.boxes => return Err(twice()),
                _ => {}
            }
            match keyword.as_str() {
                "WHERE" => {
                    self.advance();
                    select.filter = Some(self.or_pred()?);
                }
                "SEED" => {
                    self.advance();
                    let seed = self.seed()?;
                    if self.eat_word("MIN") {
                        select.seed_min = Some(self.number("the least match score to keep")?);
                    }
                    select.seed = Some((seed, at.start..self.previous_end()));
                }
                "TRAVERSE" => {
                    self.advance();
                    let mut traverse = Traverse::default();
                    loop {
                        if self.eat_word("THRESHOLD") {
                            traverse.threshold = Some(self.number("a threshold")?);
                        } else if self.eat_word("DEPTH") {
                            traverse.depth = Some(self.number("a depth")?);
                        } else {
                            break;
                        }
                    }
                    select.traverse = Some((traverse, at.start..self.previous_end()));
                }
                "PROPAGATE" => {
                    self.advance();
                    let mut propagate = Propagate::default();
                    loop {
                        if self.eat_word("STEPS") {
                            propagate.steps = Some(self.number("a number of steps")?);
                        } else if self.eat_word("ALPHA") {
                            propagate.alpha = Some(self.number("an alpha")?);
                        } else if self.eat_word("ACROSS") {
                            propagate.across = Some(self.number("a weight across documents")?);
                        } else {
                            break;
                        }
                    }
                    select.propagate = Some((propagate, at.start..self.previous_end()));
                }
                "EXPAND" => {
                    self.advance();
                    select.expand = Some(
                        match self.one_of(
                            &["SUBTREE", "PARENT", "SIBLINGS", "CONTEXT"],
                            "SUBTREE, PARENT, SIBLINGS or CONTEXT n",
                        )? {
                            "SUBTREE" => Expand::Subtree,
                            "PARENT" => Expand::Parent,
                            "SIBLINGS" => Expand::Siblings,
                            _ => Expand::Context(self.number("a number of EDUs")?),
                        },
                    );
                }
                "BUDGET" => {
                    self.advance();
                    select.budget = Some(self.number("a token budget")?);
                    self.expect_word("TOKENS")?;
                }
                "ORDER" => {
                    self.advance();
                    self.expect_word("BY")?;
                    let start = self.peek().start;
                    let order = match self
                        .one_of(&["POSITION", "SCORE", "TIME"], "POSITION, SCORE or TIME")?
                    {
                        "POSITION" => Order::Position,
                        "SCORE" => Order::Score,
                        _ => Order::Time,
                    };
                    select.order = Some((order, start..self.previous_end()));
                }
                "LIMIT" => {
                    self.advance();
                    select.limit = Some(self.number("a limit")?);
                }
                "WITH" => {
                    self.advance();
                    self.expect_word("BOXES")?;
                    select.boxes = true;
                }
                _ => {
                    return Err(self.unexpected(
                        "a clause (WHERE, SEED, TRAVERSE, PROPAGATE, EXPAND, BUDGET, ORDER BY, LIMIT, WITH BOXES) or the end",
                        &CLAUSES,
                    ));
                }
            }
        }
    }

    fn previous_end(&self) -> usize {
        self.tokens[..self.next].last().map_or(0, |t| t.end)
    }

    fn scope(&mut self) -> Result<Scope, QueryError> {
        if self.eat_symbol("*") {
            return Ok(Scope::All);
        }
        let scopes = ["DOC", "DOCS", "SESSION"];
        if !matches!(&self.peek().kind, TokenKind::Word(_))
            || !scopes.iter().any(|s| self.is_word(s))
        {
            return Err(self.unexpected(
                "a scope: *, doc('id'), docs('glob*') or session('id')",
                &scopes,
            ));
        }
        let keyword = self.one_of(&scopes, "a scope")?;
        self.expect_symbol("(")?;
        let value = self.string("an id in quotes")?;
        self.expect_symbol(")")?;
        Ok(match keyword {
            "DOC" => Scope::Doc(value),
            "DOCS" => Scope::Docs(value),
            _ => Scope::Session(value),
        })
    }

    fn doc_ref(&mut self) -> Result<Value, QueryError> {
        self.expect_word("DOC")?;
        self.expect_symbol("(")?;
        let value = self.string("a document id in quotes")?;
        self.expect_symbol(")")?;
        Ok(value)
    }

    fn seed(&mut self) -> Result<Seed, QueryError> {
        let kind = self.one_of(&["BM25", "NEAR", "HYBRID"], "BM25, NEAR or HYBRID")?;
        self.expect_symbol("(")?;
        let text = self.string("the seed text in quotes")?;
        let seed = match kind {
            "BM25" => Seed::Bm25(text),
            "NEAR" => Seed::Near(text),
            _ => {
                let alpha = if self.eat_symbol(",") {
                    Some(self.number("an alpha between 0 and 1")?)
                } else {
                    None
                };
                Seed::Hybrid(text, alpha)
            }
        };
        self.expect_symbol(")")?;
        Ok(seed)
    }

    fn or_pred(&mut self) -> Result<Pred, QueryError> {
        let mut preds = vec![self.and_pred()?];
        while self.eat_word("OR") {
            preds.push(self.and_pred()?);
        }
        Ok(one_or(preds, Pred::Or))
    }

    fn and_pred(&mut self) -> Result<Pred, QueryError> {
        let mut preds = vec![self.not_pred()?];
        while self.eat_word("AND") {
            preds.push(self.not_pred()?);
        }
        Ok(one_or(preds, Pred::And))
    }

    fn not_pred(&mut self) -> Result<Pred, QueryError> {
        // Iterative over repeated NOTs, and only their parity is kept, so
        // `NOT NOT ... x` neither overflows here nor builds a deep tree.
        let mut negated = false;
        while self.eat_word("NOT") {
            negated = !negated;
        }
        let pred = self.atom_pred()?;
        Ok(if negated {
            Pred::Not(Box::new(pred))
        } else {
            pred
        })
    }

    fn atom_pred(&mut self) -> Result<Pred, QueryError> {
        if self.peek().kind == TokenKind::Symbol("(") {
            let open = self.advance();
            self.nesting += 1;
            if self.nesting > MAX_NESTING {
                return Err(self.error(
                    open.start..open.end,
                    format!("conditions are nested more than {MAX_NESTING} parentheses deep"),
                ));
            }
            let pred = self.or_pred()?;
            self.expect_symbol(")")?;
            self.nesting -= 1;
            return Ok(pred);
        }
        if self.is_word("META") || self.is_word("EXISTS") {
            return self.meta_pred();
        }
        let fields = [
            "LEVEL", "KIND", "TITLE", "DOC", "TIME", "PAGE", "META", "EXISTS",
        ];
        let field = self.one_of(
            &fields,
            "a condition on level, kind, title, doc, time, page or meta.KEY",
        )?;
        match field {
            "PAGE" if self.eat_word("BETWEEN") => {
                let first = self.number("a page number")?;
                if !self.eat_word("AND") {
                    return Err(self.unexpected("AND", &[]));
                }
                let last = self.number("a page number")?;
                Ok(Pred::And(vec![
                    Pred::Page(CompareOp::Ge, first),
                    Pred::Page(CompareOp::Le, last),
                ]))
            }
            "PAGE" => {
                let op = self.compare_op()?;
                Ok(Pred::Page(op, self.number("a page number")?))
            }
            "LEVEL" => {
                let op = self.compare_op()?;
                Ok(Pred::Level(op, self.number("a level")?))
            }
            "TIME" => {
                let op = self.compare_op()?;
                Ok(Pred::Time(
                    op,
                    self.string("a time in quotes, such as '2023-05-01'")?,
                ))
            }
            "KIND" => {
                let equal = if self.eat_symbol("=") {
                    true
                } else if self.eat_symbol("!=") {
                    false
                } else {
                    return Err(self.unexpected("'=' or '!='", &[]));
                };
                let token = self.peek().clone();
                match token.kind {
                    TokenKind::Word(name) | TokenKind::Str(name) => {
                        self.advance();
                        Ok(Pred::Kind {
                            equal,
                            name,
                            at: token.start..token.end,
                        })
                    }
                    _ => Err(self.unexpected("a node kind such as section or paragraph", &[])),
                }
            }
            "TITLE" => {
                self.expect_symbol("~")?;
                Ok(Pred::Title(self.string("a regular expression in quotes")?))
            }
            _ => {
                self.expect_symbol("=")?;
                Ok(Pred::Doc(self.string("a document id in quotes")?))
            }
        }
    }

    /// `meta.KEY <op> value`, `meta.KEY BETWEEN a AND b`, `meta.KEY IN
    /// (a, …)`, `meta.KEY CONTAINS 'text'` or `EXISTS meta.KEY`.
    fn meta_pred(&mut self) -> Result<Pred, QueryError> {
        let start = self.peek().start;
        let exists = self.eat_word("EXISTS");
        self.expect_word("META")?;
        self.expect_symbol(".")?;
        let token = self.peek().clone();
        let TokenKind::Word(key) = token.kind else {
            return Err(self.unexpected("a metadata key after 'meta.'", &[]));
        };
        if let Err(error) = crate::model::metadata::check_key(&key) {
            return Err(self.error(token.start..token.end, error.to_string()));
        }
        self.advance();
        let condition = if exists {
            MetaCondition::Exists
        } else if self.eat_word("IN") {
            self.expect_symbol("(")?;
            let mut values = vec![self.meta_value()?];
            while self.eat_symbol(",") {
                values.push(self.meta_value()?);
            }
            self.expect_symbol(")")?;
            MetaCondition::In(values)
        } else if self.eat_word("CONTAINS") {
            MetaCondition::Contains(self.string("a text in quotes")?)
        } else if self.eat_word("BETWEEN") {
            let low = self.meta_value()?;
            if !self.eat_word("AND") {
                return Err(self.unexpected("AND", &[]));
            }
            MetaCondition::Between(low, self.meta_value()?)
        } else if matches!(self.peek().kind, TokenKind::Symbol(_)) {
            let op = self.compare_op()?;
            MetaCondition::Compare(op, self.meta_value()?)
        } else {
            return Err(self.unexpected(
                "a comparison, IN, BETWEEN or CONTAINS",
                &["IN", "BETWEEN", "CONTAINS"],
            ));
        };
        Ok(Pred::Meta {
            key,
            condition,
            at: start..self.previous_end(),
        })
    }

    /// A value a metadata key is compared with: a text, a number (maybe
    /// negative), `true`, `false` or a parameter.
    fn meta_value(&mut self) -> Result<Value, QueryError> {
        let token = self.peek().clone();
        let kind = match &token.kind {
            TokenKind::Str(text) => ValueKind::Str(text.clone()),
            TokenKind::Number(number) => ValueKind::Number(number.clone()),
            TokenKind::Param(name) => ValueKind::Param(name.clone()),
            TokenKind::Word(word) if word.eq_ignore_ascii_case("true") => ValueKind::Bool(true),
            TokenKind::Word(word) if word.eq_ignore_ascii_case("false") => ValueKind::Bool(false),
            TokenKind::Symbol("-") => {
                self.advance();
                let number = self.number("a number after '-'")?;
                let ValueKind::Number(digits) = number.kind else {
                    return Err(self.error(number.at, "a parameter cannot be negated"));
                };
                return Ok(Value {
                    kind: ValueKind::Number(format!("-{digits}")),
                    at: token.start..number.at.end,
                });
            }
            _ => {
                return Err(self.unexpected(
                    "a text in quotes, a number, true, false or a parameter",
                    &[],
                ));
            }
        };
        self.advance();
        Ok(Value {
            kind,
            at: token.start..token.end,
        })
    }

    fn compare_op(&mut self) -> Result<CompareOp, QueryError> {
        for (symbol, op) in [
            ("=", CompareOp::Eq),
            ("!=", CompareOp::Ne),
            ("<=", CompareOp::Le),
            (">=", CompareOp::Ge),
            ("<", CompareOp::Lt),
            (">", CompareOp::Gt),
        ] {
            if self.eat_symbol(symbol) {
                return Ok(op);
            }
        }
        Err(self.unexpected("a comparison (=, !=, <, <=, >, >=)", &[]))
    }

    fn value(&mut self, accept_string: bool, expected: &str) -> Result<Value, QueryError> {
        let token = self.peek().clone();
        let kind = match token.kind {
            TokenKind::Str(text) if accept_string => ValueKind::Str(text),
            TokenKind::Number(number) if !accept_string => ValueKind::Number(number),
            TokenKind::Param(name) => ValueKind::Param(name),
            _ => return Err(self.unexpected(expected, &[])),
        };
        self.advance();
        Ok(Value {
            kind,
            at: token.start..token.end,
        })
    }

    fn string(&mut self, expected: &str) -> Result<Value, QueryError> {
        self.value(true, expected)
    }

    fn number(&mut self, expected: &str) -> Result<Value, QueryError> {
        self.value(false, expected)
    }

    fn show(&mut self) -> Result<Show, QueryError> {
        let what = self.one_of(
            &[
                "DOCS", "TREE", "NODE", "EDUS", "DAG", "STATS", "SESSIONS", "SESSION",
            ],
            "DOCS, TREE, NODE, EDUS, DAG, STATS, SESSIONS or SESSION",
        )?;
        Ok(match what {
            "DOCS" => Show::Docs,
            "STATS" => Show::Stats,
            "SESSIONS" => Show::Sessions,
            "SESSION" => Show::Session(self.string("a session id in quotes")?),
            "TREE" => {
                let doc = self.doc_ref()?;
                let depth = if self.eat_word("DEPTH") {
                    Some(self.number("a depth")?)
                } else {
                    None
                };
                Show::Tree(doc, depth)
            }
            "NODE" => {
                let doc = self.doc_ref()?;
                Show::Node(doc, self.number("a node id")?)
            }
            "EDUS" => {
                let doc = self.doc_ref()?;
                let range =
                    if matches!(self.peek().kind, TokenKind::Number(_) | TokenKind::Param(_)) {
                        let first = self.number("the first EDU")?;
                        self.expect_symbol("..")?;
                        Some((first, self.number("the last EDU")?))
                    } else {
                        None
                    };
                Show::Edus(doc, range)
            }
            _ => {
                let start = self.tokens[self.next - 1].start;
                let doc = self.doc_ref()?;
                let level = if self.eat_word("LEVEL") {
                    Some(self.number("a level")?)
                } else {
                    None
                };
                Show::Dag(doc, level, start..self.previous_end())
            }
        })
    }
}

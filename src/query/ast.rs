//! The syntax tree of one statement, as written: values may still be
//! parameters, and every value keeps its byte range for error messages.

use std::ops::Range;

/// A value in a statement: a literal or a parameter, with where it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// The literal or parameter.
    pub kind: ValueKind,
    /// Byte range in the statement.
    pub at: Range<usize>,
}

/// What a [`Value`] holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueKind {
    /// A quoted string.
    Str(String),
    /// A number as written.
    Number(String),
    /// `$1` or `$name`, bound at execution.
    Param(String),
    /// `true` or `false` (metadata conditions only).
    Bool(bool),
}

/// One statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// `EXPLAIN` was given.
    pub explain: bool,
    /// The statement proper.
    pub body: Body,
}

/// A SELECT or a SHOW.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Retrieval.
    Select(Box<Select>),
    /// Browsing.
    Show(Show),
}

/// How results are shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    /// Text of each pick with its coordinates (the default).
    #[default]
    Text,
    /// Coordinates only.
    Spans,
    /// Nodes only (titles and spans, no text).
    Nodes,
    /// The JSON contract.
    Json,
}

/// Where a SELECT looks.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    /// Every document.
    All,
    /// One document.
    Doc(Value),
    /// Documents whose id matches a glob.
    Docs(Value),
    /// An agent's dialogue session.
    Session(Value),
}

/// Comparison operators of `level` and `time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `=`
    Eq,
    /// `!=` or `<>`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// A WHERE predicate over nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum Pred {
    /// `level <op> n`
    Level(CompareOp, Value),
    /// `kind = name` (or `!=`); the name and where it was.
    Kind {
        /// Equal (`=`) or not (`!=`).
        equal: bool,
        /// The kind name.
        name: String,
        /// Where the name was.
        at: Range<usize>,
    },
    /// `title ~ 'regex'`
    Title(Value),
    /// `doc = 'id'`
    Doc(Value),
    /// `time <op> 'RFC 3339 time or date'`: a session turn's time.
    Time(CompareOp, Value),
    /// `page <op> n` (1-based): a page a PDF's candidate lies on;
    /// `page BETWEEN a AND b` is `page >= a AND page <= b`.
    Page(CompareOp, Value),
    /// A condition on a document's metadata key (`meta.KEY …`, `EXISTS
    /// meta.KEY`): it holds for every candidate of a document that meets
    /// it.
    Meta {
        /// The key.
        key: String,
        /// What its value must be.
        condition: MetaCondition,
        /// Where the condition was written.
        at: Range<usize>,
    },
    /// Every one holds (two or more: a chain of `AND`s is one list, so its
    /// length never deepens the tree).
    And(Vec<Pred>),
    /// At least one holds (two or more, like `And`).
    Or(Vec<Pred>),
    /// It does not hold (never directly around another `Not`: a double
    /// negation is dropped while parsing).
    Not(Box<Pred>),
}

/// What a metadata condition asks of its key's value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaCondition {
    /// `meta.KEY <op> value`
    Compare(CompareOp, Value),
    /// `meta.KEY BETWEEN a AND b` (both included)
    Between(Value, Value),
    /// `meta.KEY IN (a, b, …)`
    In(Vec<Value>),
    /// `meta.KEY CONTAINS 'text'`: a list holding the text.
    Contains(Value),
    /// `EXISTS meta.KEY`
    Exists,
}

/// How relevance is seeded.
#[derive(Debug, Clone, PartialEq)]
pub enum Seed {
    /// `BM25('text')`
    Bm25(Value),
    /// `NEAR('text')`
    Near(Value),
    /// `HYBRID('text' [, alpha])`
    Hybrid(Value, Option<Value>),
}

/// `TRAVERSE [THRESHOLD x] [DEPTH n]`
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Traverse {
    /// Continuation threshold.
    pub threshold: Option<Value>,
    /// Deepest level explored.
    pub depth: Option<Value>,
}

/// `PROPAGATE [STEPS n] [ALPHA x] [ACROSS w]`
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Propagate {
    /// Levels propagated down.
    pub steps: Option<Value>,
    /// Weight of propagated against direct score.
    pub alpha: Option<Value>,
    /// Share of a candidate's score passed to the sections it names.
    pub across: Option<Value>,
}

/// How each pick grows.
#[derive(Debug, Clone, PartialEq)]
pub enum Expand {
    /// The whole span of the pick's node.
    Subtree,
    /// The pick's parent node.
    Parent,
    /// The pick with its neighbouring siblings.
    Siblings,
    /// `n` EDUs either side.
    Context(Value),
}

/// Order of results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Original document order.
    Position,
    /// Best first.
    Score,
    /// By the time of each item's session turn (items without one last, in
    /// document order).
    Time,
}

/// A SELECT statement; `at` fields locate clauses for semantic errors.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Select {
    /// Result shape.
    pub output: Output,
    /// Where to look, and where the scope was written.
    pub scope: Option<(Scope, Range<usize>)>,
    /// WHERE.
    pub filter: Option<Pred>,
    /// SEED and where it was.
    pub seed: Option<(Seed, Range<usize>)>,
    /// SEED's `MIN x`: the least match score a seed hit keeps.
    pub seed_min: Option<Value>,
    /// TRAVERSE and where it was.
    pub traverse: Option<(Traverse, Range<usize>)>,
    /// PROPAGATE and where it was.
    pub propagate: Option<(Propagate, Range<usize>)>,
    /// EXPAND.
    pub expand: Option<Expand>,
    /// BUDGET n TOKENS.
    pub budget: Option<Value>,
    /// ORDER BY, and where its order was written.
    pub order: Option<(Order, Range<usize>)>,
    /// LIMIT.
    pub limit: Option<Value>,
    /// WITH BOXES: each item also carries its lines' boxes on its PDF's
    /// pages.
    pub boxes: bool,
}

/// A SHOW statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Show {
    /// `SHOW DOCS`
    Docs,
    /// `SHOW TREE doc('id') [DEPTH n]`
    Tree(Value, Option<Value>),
    /// `SHOW NODE doc('id') n`
    Node(Value, Value),
    /// `SHOW EDUS doc('id') [a..b]`
    Edus(Value, Option<(Value, Value)>),
    /// `SHOW DAG doc('id') [LEVEL n]`
    Dag(Value, Option<Value>, Range<usize>),
    /// `SHOW STATS`
    Stats,
    /// `SHOW SESSIONS`
    Sessions,
    /// `SHOW SESSION 'id'`
    Session(Value),
}

//! The MCP tools: each one's arguments (their JSON Schemas, from
//! schemars, are what a model sees) and what it asks of the store.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::{ErrorData, Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::options::McpOptions;
use super::text;
use crate::error::{Error, Result};
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::sources::expand_listing_skipped;
use crate::memory::TurnInput;
use crate::model::document::Format;
use crate::progress::{CancelToken, NoProgress};
use crate::query::Params;
use crate::query::parser::parse_condition;
use crate::serve::api::{Api, described};
use crate::serve::scheduling::{ServedStore, joined};

/// Where the MCP tools' calls run.
#[derive(Clone)]
pub(super) enum Calls {
    /// A store's [`Api`]: a store opened here, or a client of a server.
    Api(Arc<dyn Api + Send + Sync>),
    /// The store a server holds, behind its gate (a vacuum closes and
    /// opens it again).
    Served(ServedStore),
}

/// The MCP handler over a store's [`Api`].
#[derive(Clone)]
pub struct McpServer {
    pub(super) calls: Calls,
    pub(super) options: Arc<McpOptions>,
    pub(super) tool_router: ToolRouter<McpServer>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server of `api` as `options` allow.
    pub fn new(api: Arc<dyn Api + Send + Sync>, options: McpOptions) -> McpServer {
        McpServer::over(Calls::Api(api), options)
    }

    /// A server whose calls run as `calls` say, as `options` allow.
    pub(super) fn over(calls: Calls, options: McpOptions) -> McpServer {
        let mut tool_router = McpServer::tool_router();
        if options.read_only {
            for name in WRITING {
                tool_router.disable_route(*name);
            }
        }
        McpServer {
            calls,
            options: Arc::new(options),
            tool_router,
        }
    }

    /// Runs `work` on the store on a blocking thread (the store's calls
    /// block).
    pub(super) async fn on_store<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn Api) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let outcome = match &self.calls {
            Calls::Api(api) => {
                let api = Arc::clone(api);
                joined(tokio::task::spawn_blocking(move || work(&*api))).await
            }
            Calls::Served(store) => store.run(move |db| work(db.api())).await,
        };
        outcome.map_err(|e| Error::Serve(format!("the call failed: {e}")))?
    }
}

/// A tool's answer: `text` for the model, `value` as its structured
/// content (an object: an array is wrapped as `{key: array}`).
pub(super) fn answered(text: String, value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

/// A tool's failure: the store's message (what and where) for the model,
/// and `{class, message, query?, damage?}` as structured content.
pub(super) fn refused(err: Error) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(err.to_string())]);
    result.structured_content = Some(described(err));
    result
}

/// ` WHERE (condition)` for a `search`, once `condition` parses alone as
/// a condition (so an error's line and column are the condition's own,
/// and nothing in it can end the clause); on lines of its own, so that a
/// comment in it ends with it.
fn where_clause(condition: &str) -> Result<String> {
    parse_condition(condition)?;
    Ok(format!(" WHERE (\n{condition}\n)"))
}

/// The tools that write to the store, left out when read-only.
pub(super) const WRITING: &[&str] = &["remember", "forget", "ingest", "remove"];

/// A `search`'s budget when the call names none.
const DEFAULT_BUDGET: u64 = 1024;
/// A `recall`'s budget when the call names none.
const DEFAULT_RECALL_BUDGET: u64 = 2048;

/// A tool's outcome as MCP answers it.
type Answer = std::result::Result<CallToolResult, ErrorData>;

/// `result`, answered as `shown` (text and structured content) says, or
/// refused with the store's message.
fn reply<T>(result: Result<T>, shown: impl FnOnce(T) -> (String, Value)) -> Answer {
    Ok(match result {
        Ok(value) => {
            let (said, value) = shown(value);
            answered(said, value)
        }
        Err(err) => refused(err),
    })
}

/// How `search` seeds relevance.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchMethod {
    /// BM25 over words: exact terms, names, figures.
    #[default]
    Bm25,
    /// Nearest vectors of the store's embedder: paraphrases.
    Semantic,
    /// Both, fused.
    Hybrid,
}

impl SearchMethod {
    /// The query language's seed for it.
    fn seed(self) -> &'static str {
        match self {
            SearchMethod::Bm25 => "BM25",
            SearchMethod::Semantic => "NEAR",
            SearchMethod::Hybrid => "HYBRID",
        }
    }
}

/// `search`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What to find: a question or a description, in plain words.
    pub question: String,
    /// The most tokens of text to return (default 1024).
    pub budget: Option<u64>,
    /// Only documents whose ids match this glob (`*` any run of
    /// characters, `?` one), e.g. `10k-2023-*`.
    pub scope: Option<String>,
    /// How relevance is seeded: `bm25` (words; the default), `semantic`
    /// (the store's embedder) or `hybrid` (both).
    pub method: Option<SearchMethod>,
    /// Only what meets this condition, as a query's WHERE writes it: on
    /// documents' metadata (`meta.company = 'Boeing' AND meta.year >=
    /// 2020`, `meta.tags CONTAINS 'risk'`), pages (`page BETWEEN 3 AND
    /// 5`) or the tree (`level >= 2`). Documents' conditions restrict what
    /// is ranked, so the budget fills from matching documents.
    #[serde(rename = "where")]
    pub condition: Option<String>,
}

/// `query`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryArgs {
    /// One statement of edudb's query language, e.g. `SELECT SPANS FROM
    /// docs('rfc-*') SEED BM25($q) PROPAGATE BUDGET 512 TOKENS` or `SHOW
    /// TREE doc('x') DEPTH 2`. Put user text in parameters, never in the
    /// statement.
    pub statement: String,
    /// Values of the statement's `$name` parameters, keyed by name without
    /// the `$`: strings, numbers, or arrays of numbers (a query vector of
    /// the store's dimension, for `NEAR($v)`).
    #[serde(default)]
    pub params: serde_json::Map<String, Value>,
    /// Also return the plan: each operator with its rows in and out and
    /// its time.
    #[serde(default)]
    pub explain: bool,
}

/// Names a document.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentArgs {
    /// The document's id (as `list_documents` gives it).
    pub document: String,
}

/// `document_tree`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TreeArgs {
    /// The document's id.
    pub document: String,
    /// Levels below the root to show (all when absent).
    pub depth: Option<u32>,
}

/// `read`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The document's id.
    pub document: String,
    /// The first EDU to read (a citation's range start; default 0).
    pub first: Option<u32>,
    /// The last EDU to read, inclusive (default: as far as the token
    /// limit allows).
    pub last: Option<u32>,
    /// Read a tree node's whole span instead (its `#id` in
    /// `document_tree`).
    pub node: Option<u32>,
}

/// `remember`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    /// The session (created by its first turn).
    pub session: String,
    /// What was said, or a fact to keep.
    pub text: String,
    /// Who said it: `user` (the default), `assistant`, `system` or
    /// `tool`.
    pub role: Option<String>,
    /// When it was said: RFC 3339 (`2026-05-01T10:00:00Z`) or a date.
    pub at: Option<String>,
    /// What to keep about it, as a flat object of texts, numbers,
    /// booleans, dates or lists of texts (`{"speaker": "Caroline",
    /// "source": "chat"}`); `query` filters on it with `WHERE meta.KEY`.
    pub metadata: Option<serde_json::Map<String, Value>>,
}

/// `recall`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// The session.
    pub session: String,
    /// What is being asked or said now: the context then favours what is
    /// relevant to it.
    pub query: Option<String>,
    /// The most tokens of context (default 2048).
    pub budget: Option<u64>,
}

/// `forget`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    /// The session: removed with all its turns unless `turn` is given.
    pub session: String,
    /// One turn of it to forget instead: its text goes, the numbers of
    /// the turns after it stay.
    pub turn: Option<u32>,
}

/// `ingest`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngestArgs {
    /// The document's id (replaces a document of that id); required with
    /// `text`, else taken from the file's name.
    pub id: Option<String>,
    /// The document's text.
    pub text: Option<String>,
    /// A file or directory to read instead (only under the directories
    /// this server was allowed to read).
    pub path: Option<String>,
    /// `text`, `markdown`, `html` or `pdf` (detected when absent).
    pub format: Option<String>,
}

/// `list_documents`' arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Only the documents meeting this condition on their metadata, as a
    /// query's WHERE writes it: `meta.company = 'Boeing' AND meta.year
    /// >= 2020`, `meta.tags CONTAINS 'risk'`, `EXISTS meta.form`.
    #[serde(rename = "where")]
    pub condition: Option<String>,
}

/// `list_sessions`' arguments: none.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[tool_router(vis = "pub(super)")]
impl McpServer {
    #[tool(
        description = "Find the passages of the stored documents that answer a question, within a token budget. Returns spans in document order, each cited by document id, EDU range and pages (PDFs); follow a citation with `read`.",
        annotations(read_only_hint = true)
    )]
    async fn search(&self, Parameters(args): Parameters<SearchArgs>) -> Answer {
        let budget = match self.options.budget(args.budget.unwrap_or(DEFAULT_BUDGET)) {
            Ok(budget) => budget,
            Err(err) => return Ok(refused(err)),
        };
        let scope = if args.scope.is_some() {
            "docs($scope)"
        } else {
            "*"
        };
        let filter = match args.condition.as_deref().map(where_clause).transpose() {
            Ok(filter) => filter.unwrap_or_default(),
            Err(err) => return Ok(refused(err)),
        };
        let statement = format!(
            "SELECT SPANS FROM {scope}{filter} SEED {}($question) PROPAGATE BUDGET $budget TOKENS",
            args.method.unwrap_or_default().seed()
        );
        let mut params = Params::new()
            .text("question", args.question)
            .number("budget", budget as f64);
        if let Some(scope) = args.scope {
            params = params.text("scope", scope);
        }
        let answer = self
            .on_store(move |api| api.query(&statement, &params, false))
            .await;
        reply(answer, |answer| (text::query(&answer), answer))
    }

    #[tool(
        description = "Run one statement of edudb's query language (SELECT … FROM … SEED … TRAVERSE/PROPAGATE … BUDGET n TOKENS, or SHOW DOCS/TREE/EDUS/SESSIONS …) with bound parameters; `explain` adds the plan. Errors give the line and column.",
        annotations(read_only_hint = true)
    )]
    async fn query(&self, Parameters(args): Parameters<QueryArgs>) -> Answer {
        let params = match Params::from_json(&args.params) {
            Ok(params) => params,
            Err(err) => return Ok(refused(err)),
        };
        let statement = args.statement;
        let explain = args.explain;
        let answer = self
            .on_store(move |api| api.query(&statement, &params, explain))
            .await;
        reply(answer, |answer| (text::query(&answer), answer))
    }

    #[tool(
        description = "List the stored documents: id, title, EDUs, tokens and metadata; `where` keeps those meeting a condition on their metadata.",
        annotations(read_only_hint = true)
    )]
    async fn list_documents(&self, Parameters(args): Parameters<ListArgs>) -> Answer {
        let answer = (self.on_store(move |api| api.documents(args.condition.as_deref()))).await;
        reply(answer, |documents| {
            (
                text::documents(&documents),
                json!({ "documents": documents }),
            )
        })
    }

    #[tool(
        description = "A document's structural tree (sections, paragraphs, tables): each node's #id, kind, EDU span [first-last] and title, to a depth.",
        annotations(read_only_hint = true)
    )]
    async fn document_tree(&self, Parameters(args): Parameters<TreeArgs>) -> Answer {
        let document = args.document;
        let answer = self.on_store(move |api| api.tree(&document)).await;
        reply(answer, |tree| {
            let tree = match args.depth {
                Some(depth) => text::pruned(tree, depth),
                None => tree,
            };
            (text::tree(&tree, args.depth), tree)
        })
    }

    #[tool(
        description = "Read a document's text exactly, by EDU range (as a citation gives it) or by tree node, up to the server's token limit; says where to continue when cut.",
        annotations(read_only_hint = true)
    )]
    async fn read(&self, Parameters(args): Parameters<ReadArgs>) -> Answer {
        let limit = self.options.max_budget;
        let answer = self.on_store(move |api| read(api, &args, limit)).await;
        reply(answer, |shown| shown)
    }

    #[tool(
        description = "Append a turn (something said, with its role and time) or a fact to a session's memory; the store places it in the session's dialogue tree. Creates the session on its first turn.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn remember(
        &self,
        peer: Peer<RoleServer>,
        Parameters(args): Parameters<RememberArgs>,
    ) -> Answer {
        if let Err(err) = self.options.text_fits(&args.text) {
            return Ok(refused(err));
        }
        // The JSON form `session add --jsonl` and the server take, absent
        // fields left out (a null is refused there).
        let mut turn = json!({ "text": args.text });
        if let Some(role) = args.role {
            turn["role"] = json!(role);
        }
        if let Some(at) = args.at {
            turn["at"] = json!(at);
        }
        if let Some(metadata) = args.metadata {
            turn["metadata"] = Value::Object(metadata);
        }
        let turn = match TurnInput::from_json(&turn.to_string()) {
            Ok(turn) => turn,
            Err(why) => return Ok(refused(Error::Usage(why))),
        };
        let session = args.session;
        let answer = self
            .on_store(move |api| api.append_turn(&session, &turn))
            .await;
        if answer.as_ref().is_ok_and(|r| r["turn"] == 0) {
            announce(&peer).await;
        }
        reply(answer, |receipt| {
            let said = format!(
                "Remembered as turn {} of session {} (topic {}, branch {}).",
                receipt["turn"],
                receipt["session"].as_str().unwrap_or("?"),
                receipt["topic"],
                receipt["branch"]
            );
            (said, receipt)
        })
    }

    #[tool(
        description = "The memory of a session for its next turn, within a token budget: the active path of the dialogue plus summaries of other branches, favouring what is relevant to `query` when given.",
        annotations(read_only_hint = true)
    )]
    async fn recall(&self, Parameters(args): Parameters<RecallArgs>) -> Answer {
        let budget = match self
            .options
            .budget(args.budget.unwrap_or(DEFAULT_RECALL_BUDGET))
        {
            Ok(budget) => budget,
            Err(err) => return Ok(refused(err)),
        };
        let answer = self
            .on_store(move |api| api.session_context(&args.session, budget, args.query.as_deref()))
            .await;
        reply(answer, |context| (text::context(&context), context))
    }

    #[tool(
        description = "List the memory sessions: id, turns, topics, branches, tokens.",
        annotations(read_only_hint = true)
    )]
    async fn list_sessions(&self, Parameters(_): Parameters<NoArgs>) -> Answer {
        let answer = self.on_store(|api| api.sessions()).await;
        reply(answer, |sessions| {
            (text::sessions(&sessions), json!({ "sessions": sessions }))
        })
    }

    #[tool(
        description = "Forget a session (remove it with all its turns), or one turn of it: that turn's text goes and recall leaves it out, while later turns keep their numbers.",
        annotations(read_only_hint = false, destructive_hint = true)
    )]
    async fn forget(
        &self,
        peer: Peer<RoleServer>,
        Parameters(args): Parameters<ForgetArgs>,
    ) -> Answer {
        let session = args.session;
        if let Some(turn) = args.turn {
            let answer = self
                .on_store(move |api| api.forget_turn(&session, turn))
                .await;
            return reply(answer, |receipt| {
                (
                    format!(
                        "Forgot turn {turn} of session {}.",
                        receipt["session"].as_str().unwrap_or("?")
                    ),
                    receipt,
                )
            });
        }
        let answer = self.on_store(move |api| api.remove_session(&session)).await;
        if answer.is_ok() {
            announce(&peer).await;
        }
        reply(answer, |receipt| {
            (
                format!(
                    "Forgot session {}.",
                    receipt["removed"].as_str().unwrap_or("?")
                ),
                receipt,
            )
        })
    }

    #[tool(
        description = "Store a document from its text (with an id), or from a file or directory the server may read; a document of the same id is replaced. Text, Markdown, HTML and PDF.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn ingest(
        &self,
        peer: Peer<RoleServer>,
        Parameters(args): Parameters<IngestArgs>,
    ) -> Answer {
        let options = self.options.clone();
        let answer = self.on_store(move |api| ingest(api, args, &options)).await;
        if answer.is_ok() {
            announce(&peer).await;
        }
        reply(answer, |answer| {
            let ids: Vec<&str> = (answer["documents"].as_array().into_iter().flatten())
                .filter_map(|d| d["id"].as_str())
                .collect();
            let mut said = format!("Stored {} documents: {}.", ids.len(), ids.join(", "));
            for failure in answer["failures"].as_array().into_iter().flatten() {
                said.push_str(&format!(
                    "\nNot stored: {}: {}",
                    failure["source"].as_str().unwrap_or("?"),
                    failure["message"].as_str().unwrap_or("?")
                ));
            }
            (said, answer)
        })
    }

    #[tool(
        description = "Remove a document completely.",
        annotations(read_only_hint = false, destructive_hint = true)
    )]
    async fn remove(
        &self,
        peer: Peer<RoleServer>,
        Parameters(args): Parameters<DocumentArgs>,
    ) -> Answer {
        let document = args.document;
        let answer = self.on_store(move |api| api.remove(&document)).await;
        if answer.is_ok() {
            announce(&peer).await;
        }
        reply(answer, |receipt| {
            let said = format!("Removed {}.", receipt["removed"][0].as_str().unwrap_or("?"));
            (said, receipt)
        })
    }
}

/// Tells the client that the resources (documents, sessions) changed; a
/// client that went away misses nothing it could use.
async fn announce(peer: &Peer<RoleServer>) {
    let _ = peer.notify_resource_list_changed().await;
}

/// `read`: the EDUs asked for (a node's span, or `first..=last`), cut
/// after `limit` tokens; the text and `{document, edus, tokens, next}`
/// (`next`: the EDU to continue from when cut).
fn read(api: &dyn Api, args: &ReadArgs, limit: u64) -> Result<(String, Value)> {
    let (first, last) = match args.node {
        Some(node) => {
            if args.first.is_some() || args.last.is_some() {
                return Err(Error::Usage(
                    "give either a node or an EDU range, not both".into(),
                ));
            }
            let tree = api.tree(&args.document)?;
            let span = find_node(&tree, node)
                .ok_or_else(|| Error::Usage(format!("{} has no node #{node}", args.document)))?;
            (span[0], Some(span[1]))
        }
        None => (args.first.unwrap_or(0), args.last),
    };
    let edus = match last {
        Some(last) => api.edus(&args.document, Some((first, last)))?,
        None => {
            let all = api.edus(&args.document, None)?;
            let count = all.as_array().map_or(0, Vec::len) as u32;
            if first >= count {
                return Err(Error::EduRange {
                    doc: args.document.clone(),
                    first,
                    last: first,
                    count,
                });
            }
            all
        }
    };
    let last = last.unwrap_or(u32::MAX);
    let asked = (edus.as_array().into_iter().flatten())
        .filter(|edu| edu["id"].as_u64().is_some_and(|id| id >= u64::from(first)));
    let mut kept = Vec::new();
    let mut tokens = 0;
    for edu in asked {
        let size = edu["tokens"].as_u64().unwrap_or(0);
        if !kept.is_empty() && tokens + size > limit {
            break;
        }
        tokens += size;
        kept.push(edu.clone());
    }
    let read_to = kept
        .last()
        .and_then(|e| e["id"].as_u64())
        .unwrap_or(u64::from(first));
    let available = (edus.as_array().and_then(|e| e.last()))
        .and_then(|e| e["id"].as_u64())
        .unwrap_or(0)
        .min(u64::from(last));
    let next = (read_to < available).then_some(read_to + 1);
    let mut said = text::edus(&args.document, &kept);
    if let Some(next) = next {
        said.push_str(&format!(
            "(cut at {limit} tokens: continue with first = {next})"
        ));
    }
    let value = json!({"document": args.document, "edus": kept, "tokens": tokens, "next": next});
    Ok((said, value))
}

/// The EDU span of node `id` in a tree's JSON.
fn find_node(node: &Value, id: u32) -> Option<[u32; 2]> {
    if node["id"] == id {
        let span = &node["span"];
        return Some([span[0].as_u64()? as u32, span[1].as_u64()? as u32]);
    }
    (node["children"].as_array()?.iter()).find_map(|child| find_node(child, id))
}

/// `ingest`: a text under its id, or the files of an allowed path.
fn ingest(api: &dyn Api, args: IngestArgs, options: &McpOptions) -> Result<Value> {
    let format = args
        .format
        .as_deref()
        .map(str::parse::<Format>)
        .transpose()?;
    let ingest_options = IngestOptions {
        format,
        ..IngestOptions::default()
    };
    match (args.text, args.path) {
        (Some(text), None) => {
            let id = args
                .id
                .ok_or_else(|| Error::Usage("a text needs an id to be stored under".into()))?;
            options.text_fits(&text)?;
            let document = api.ingest_bytes(&id, text.into_bytes(), ingest_options)?;
            Ok(json!({"documents": [document], "failures": []}))
        }
        (None, Some(path)) => {
            let root = options.allowed(&PathBuf::from(path))?;
            let (sources, _skipped) = expand_listing_skipped(&[root], args.id.as_deref())?;
            // A link inside an allowed directory may point out of it.
            for source in &sources {
                if let crate::ingest::sources::Origin::File(file) = &source.origin {
                    options.allowed(file)?;
                }
            }
            api.ingest(&sources, ingest_options, &NoProgress, &CancelToken::new())
        }
        _ => Err(Error::Usage(
            "give either text (with an id) or a path".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::ast::Body;
    use crate::query::parser::parse;

    #[test]
    fn a_search_condition_becomes_a_where_clause_of_its_own() {
        let clause = where_clause("meta.year >= 2020 -- recent ones").unwrap();
        let statement = format!("SELECT SPANS FROM *{clause} SEED BM25($q) BUDGET 10 TOKENS");
        let Body::Select(select) = parse(&statement).unwrap().body else {
            panic!("{statement} is a SELECT");
        };
        // The comment ends with the condition's line: the clauses after it stay.
        assert!(select.filter.is_some() && select.seed.is_some() && select.budget.is_some());
    }

    #[test]
    fn a_search_condition_that_would_end_its_clause_is_refused_at_its_own_position() {
        for (condition, column) in [("meta.x = 1) LIMIT 1 --", 11), ("meta.year >", 12)] {
            match where_clause(condition) {
                Err(Error::Query(err)) => {
                    assert_eq!((err.line, err.column), (1, column), "{condition}")
                }
                other => panic!("{condition}: {other:?}"),
            }
        }
    }
}

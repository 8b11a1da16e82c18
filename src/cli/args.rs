//! The command line: its global flags, every command and its arguments
//! (clap), and what each command needs to know about itself.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use edudb::compute::embed::EmbedderConfig;
use edudb::compute::embed::http::HttpConfig;
use edudb::{ChatConfig, ChatModel, Error, Format, HttpChat, IpMakerKind, Structurer};

use super::render::OutputFormat;
use super::{eval, mcp, session};

/// What `highlight` runs unless told otherwise.
const HIGHLIGHT_STATEMENT: &str =
    "SELECT SPANS FROM doc($doc) SEED HYBRID($question) BUDGET $budget TOKENS";

/// edudb: an embedded document database with EDU coordinates and structural trees.
#[derive(Debug, Parser)]
#[command(name = "edudb", version, about)]
pub(super) struct Cli {
    /// Store directory.
    #[arg(long, global = true, env = "EDUDB_PATH", default_value = "./edudb.db")]
    pub(super) db: PathBuf,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub(super) json: bool,
    /// Hide progress bars.
    #[arg(long, short, global = true)]
    pub(super) quiet: bool,
    /// Seconds to wait for another process (not a server) to release the
    /// store before failing with exit code 3 (busy: retry).
    #[arg(
        long,
        global = true,
        env = "EDUDB_WAIT",
        default_value = "5",
        value_name = "SECONDS",
        value_parser = parse_wait
    )]
    pub(super) wait: std::time::Duration,
    #[command(flatten)]
    pub(super) embedder: EmbedderArgs,
    #[command(flatten)]
    pub(super) llm: LlmArgs,
    #[command(subcommand)]
    pub(super) command: Command,
}

/// Which embedder makes the vectors. A new store records it; an existing
/// store uses the recorded one unless these say otherwise (and then they
/// must name the same model).
#[derive(Debug, clap::Args)]
pub(super) struct EmbedderArgs {
    /// Embedder: `hashed` (built in, no model), `openai` (an
    /// OpenAI-compatible /v1/embeddings server) or `local` (a
    /// sentence-transformers model run in-process, from --model).
    #[arg(long, global = true, env = "EDUDB_EMBEDDER", value_enum)]
    embedder: Option<EmbedderKind>,
    /// Vector length of the hashed embedder.
    #[arg(long, global = true, default_value_t = edudb::compute::embed::hashed::DEFAULT_DIMENSION)]
    embed_dimension: usize,
    /// Base URL of the embedding server, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, global = true, env = "EDUDB_EMBED_URL")]
    embed_url: Option<String>,
    /// Model name sent to the embedding server.
    #[arg(long, global = true, env = "EDUDB_EMBED_MODEL")]
    embed_model: Option<String>,
    /// Name of the environment variable holding the server's API key.
    #[arg(long, global = true)]
    embed_key_env: Option<String>,
    /// Directory of the local model (config.json, tokenizer.json,
    /// model.safetensors), for `--embedder local`.
    #[arg(long, global = true, env = "EDUDB_MODEL")]
    model: Option<PathBuf>,
}

/// The chat model the language-model steps ask (`ingest --structurer
/// llm`): any OpenAI-compatible /v1/chat/completions server.
#[derive(Debug, clap::Args)]
pub(super) struct LlmArgs {
    /// Base URL of the chat server, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, global = true, env = "EDUDB_LLM_URL")]
    llm_url: Option<String>,
    /// Model name sent to the chat server.
    #[arg(long, global = true, env = "EDUDB_LLM_MODEL")]
    llm_model: Option<String>,
    /// Name of the environment variable holding the chat server's API key.
    #[arg(long, global = true)]
    llm_key_env: Option<String>,
}

impl LlmArgs {
    /// The chat model these flags name, if any.
    pub(super) fn chat(&self) -> edudb::Result<Option<Arc<dyn ChatModel>>> {
        let (url, model) = match (&self.llm_url, &self.llm_model) {
            (None, None) => return Ok(None),
            (Some(url), Some(model)) => (url, model),
            _ => {
                return Err(Error::Usage(
                    "a chat model needs both --llm-url and --llm-model".into(),
                ));
            }
        };
        let mut config = ChatConfig::new(url.clone(), model.clone());
        config.api_key_env = self.llm_key_env.clone();
        Ok(Some(Arc::new(HttpChat::new(&config)?)))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum EmbedderKind {
    /// Hashed word and character n-grams.
    Hashed,
    /// An OpenAI-compatible embedding server.
    Openai,
    /// A local sentence-transformers model (its attention weights the DAG).
    Local,
}

impl EmbedderArgs {
    pub(super) fn config(&self) -> edudb::Result<Option<EmbedderConfig>> {
        Ok(match self.embedder {
            None => None,
            Some(EmbedderKind::Hashed) => Some(EmbedderConfig::Hashed {
                dimension: self.embed_dimension,
            }),
            Some(EmbedderKind::Openai) => {
                let need = |value: &Option<String>, flag: &str| {
                    value
                        .clone()
                        .ok_or_else(|| Error::Usage(format!("--embedder openai needs {flag}")))
                };
                let mut config = HttpConfig::new(
                    need(&self.embed_url, "--embed-url")?,
                    need(&self.embed_model, "--embed-model")?,
                );
                config.api_key_env = self.embed_key_env.clone();
                Some(EmbedderConfig::Http(config))
            }
            Some(EmbedderKind::Local) => {
                let dir = self
                    .model
                    .as_ref()
                    .ok_or_else(|| Error::Usage("--embedder local needs --model DIR".into()))?;
                // Recorded absolute, so the store finds it from anywhere.
                let model = std::fs::canonicalize(dir)
                    .map_err(|e| Error::Usage(format!("--model {}: {e}", dir.display())))?;
                Some(EmbedderConfig::Local { model })
            }
        })
    }
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// Create an empty store, or with --shards a shard set of that many
    /// stores (documents placed by a hash of their ids, queried as one).
    Init {
        /// Make a shard set of this many stores instead of one store.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=4096))]
        shards: Option<u16>,
    },
    /// Ingest files, directories (recursively) or `-` for standard input.
    Ingest(IngestArgs),
    /// List documents (`--json` with their metadata).
    Docs {
        /// Only the documents meeting this condition on their metadata,
        /// as a query's WHERE writes it: `meta.company = 'Boeing' AND
        /// meta.year >= 2020`, `meta.tags CONTAINS 'risk'`, `EXISTS
        /// meta.form`.
        #[arg(long = "where", value_name = "CONDITION")]
        condition: Option<String>,
    },
    /// Show a document's metadata, or change it without re-ingesting:
    /// `meta DOC set KEY=VALUE…`, `meta DOC unset KEY…`.
    Meta {
        /// Document id.
        doc: String,
        #[command(subcommand)]
        change: Option<MetaChange>,
    },
    /// Show a document's structural tree.
    Tree {
        /// Document id.
        doc: String,
        /// Show nodes down to this depth only (root = 0).
        #[arg(long)]
        depth: Option<u16>,
    },
    /// Show a document's weighted DAG of information points: nodes, levels
    /// and the strongest edges; `--json` lists every node and edge, `--dot`
    /// writes Graphviz; `--attention FILE` re-weights the edges from
    /// supplied attention (safetensors; see docs/architecture.md).
    Dag {
        /// Document id.
        doc: String,
        /// Show this level only (1: chunks).
        #[arg(long)]
        level: Option<u16>,
        /// Write Graphviz DOT instead.
        #[arg(long, conflicts_with = "attention")]
        dot: bool,
        /// Re-weight the DAG's edges from this safetensors file first.
        #[arg(long)]
        attention: Option<std::path::PathBuf>,
    },
    /// Show EDUs with their coordinates; RANGE is `A..B` (inclusive) or `A`.
    Show {
        /// Document id.
        doc: String,
        /// EDU range `A..B` (both ends included) or a single EDU `A`.
        range: Option<String>,
        /// Only the EDUs on this page of a PDF (1-based), or pages `A..B`.
        #[arg(long, conflicts_with = "range")]
        page: Option<String>,
    },
    /// Write a copy of the PDF a document was read from with what a
    /// question retrieves in it highlighted (one annotation per line,
    /// noting the EDUs and score), to look at exactly what was retrieved.
    Highlight(HighlightArgs),
    /// Full-text (BM25) search over EDUs and section titles.
    Search {
        /// Query terms (tantivy query syntax: words, "phrases", +must, -not).
        query: String,
        /// Most hits to return.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        limit: u32,
    },
    /// Run one query-language statement (see docs/query-language.md).
    Query {
        /// The statement, e.g. "SELECT FROM * SEED BM25('borrow checker') BUDGET 300 TOKENS".
        statement: String,
        /// Output: text or json (same as --json).
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
        /// Bind a parameter: NAME=VALUE for `$NAME` (`1=...` for `$1`); numbers bind as numbers, `[x, y, ...]` as a query vector for NEAR.
        #[arg(long = "param", short = 'p', value_parser = parse_param)]
        params: Vec<(String, String)>,
    },
    /// Answer a question from the store with the chat model
    /// (--llm-url/--llm-model): evidence is retrieved best first, shown to
    /// the model a few items at a time until it judges it enough, and the
    /// answer cites it by coordinates (document, EDU span, bytes).
    Ask(AskArgs),
    /// Interactive console: statements end with `;`, `.help` lists commands.
    Console {
        /// Output: text or json (`.format` changes it in the console).
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Serve the store to other processes over HTTP/JSON (and a Unix
    /// socket in the store directory) until SIGINT or SIGTERM.
    Serve(ServeArgs),
    /// Serve the store to an agent over the Model Context Protocol on
    /// standard input and output (through the store's server when one
    /// runs). Tools: search, query, list_documents, document_tree, read,
    /// remember, recall, list_sessions, forget, ingest, remove.
    Mcp {
        #[command(flatten)]
        access: mcp::McpAccess,
    },
    /// Delete documents completely.
    Rm {
        /// Document ids.
        #[arg(required = true)]
        docs: Vec<String>,
    },
    /// Show store totals.
    Stats,
    /// Rebuild the full-text and vector indexes from the store.
    Reindex,
    /// Validate every stored document and the index.
    Check,
    /// Write a consistent copy of the store to DEST while it stays in use
    /// (through a running server, whose writers wait only for the last
    /// changes): a store of its own that opens and checks clean.
    Backup {
        /// The copy's directory (absent or empty, outside the store).
        dest: PathBuf,
    },
    /// Rewrite the store compactly, giving back the space removed and
    /// replaced documents left (through a running server, whose requests
    /// wait while it runs); a stop at any moment leaves the old store or
    /// the new one, whole.
    Vacuum,
    /// Copy every document and session that still reads whole into a new
    /// store (for a damaged store `rm` cannot repair); name what is left.
    Salvage {
        /// The new store's directory (absent or empty).
        to: PathBuf,
    },
    /// Ingest the bundled demo corpus into a temporary store and tour it.
    Demo,
    /// Agent memory: append turns to a session, show its dialogue tree,
    /// build the context for its next turn, list and remove sessions.
    Session {
        #[command(subcommand)]
        command: session::SessionCommand,
    },
    /// Retrieval-quality evaluation and structure-recovery scoring.
    Eval {
        #[command(subcommand)]
        command: eval::EvalCommand,
    },
}

/// How `meta DOC` changes the document's metadata.
#[derive(Debug, clap::Subcommand)]
pub(super) enum MetaChange {
    /// Set keys: `KEY=VALUE` (a plain number, true/false, a date or a
    /// text) or `KEY:=JSON`.
    Set {
        /// The keys and their values.
        #[arg(required = true, value_name = "KEY=VALUE")]
        pairs: Vec<String>,
    },
    /// Remove keys.
    Unset {
        /// The keys.
        #[arg(required = true, value_name = "KEY")]
        keys: Vec<String>,
    },
}

/// What `ingest` reads and how it builds each document.
#[derive(Debug, clap::Args)]
pub(super) struct IngestArgs {
    /// Inputs: files, directories, or `-`.
    #[arg(required = true)]
    pub(super) paths: Vec<PathBuf>,
    /// Document id (one input only); default: the file name without extension.
    #[arg(long)]
    pub(super) id: Option<String>,
    /// Input format: text, markdown, html or pdf; default: by extension, then sniffed.
    #[arg(long, value_parser = parse_named::<Format>)]
    pub(super) format: Option<Format>,
    /// Replace invalid UTF-8 with U+FFFD instead of rejecting the file.
    #[arg(long)]
    pub(super) lossy: bool,
    /// What builds each document's tree: `layout` (headings, blocks,
    /// cohesion; no model) or `llm` (LingoEDU's outline from the chat
    /// model of --llm-url/--llm-model, checked, falling back to the
    /// layout tree for a document whose outline stays invalid).
    #[arg(long, default_value = "layout", value_parser = parse_named::<Structurer>)]
    pub(super) structurer: Structurer,
    /// What makes each document's information points: `bridge` (shared
    /// terms, then salient EDUs; no model) or `llm` (PECAN's points
    /// written by the chat model of --llm-url/--llm-model, checked and
    /// linked by attention, the model-free points for a window whose
    /// replies stay invalid).
    #[arg(long, default_value = "bridge", value_parser = parse_named::<IpMakerKind>)]
    pub(super) ip_maker: IpMakerKind,
    /// Also bring the vector graph up to date now (with progress), so
    /// the first NEAR or HYBRID search does not build it.
    #[arg(long)]
    pub(super) vectors: bool,
    /// Metadata every ingested document is given, `KEY=VALUE` (repeated):
    /// a plain number (2020) is a number, true/false a boolean, a date
    /// (2020-01-31) a date, anything else a text; `KEY:=JSON` gives a
    /// JSON value (a list of texts: `tags:='["risk","cash"]'`).
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub(super) meta: Vec<String>,
    /// Metadata every ingested document is given, from a JSON object in
    /// FILE (`--meta` keys win over it).
    #[arg(long, value_name = "FILE")]
    pub(super) meta_json: Option<PathBuf>,
}

/// What `highlight` retrieves and where it writes the copy.
#[derive(Debug, clap::Args)]
pub(super) struct HighlightArgs {
    /// Document id (read from a PDF).
    pub(super) doc: String,
    /// The question; its picks are highlighted.
    pub(super) question: String,
    /// The PDF the document was read from (checked by size and CRC-32).
    #[arg(long)]
    pub(super) pdf: PathBuf,
    /// Where to write the highlighted copy.
    #[arg(long, short)]
    pub(super) output: PathBuf,
    /// Tokens picked at most.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) budget: u64,
    /// The statement to run instead (parameters $doc, $question, $budget).
    #[arg(long, default_value = HIGHLIGHT_STATEMENT)]
    pub(super) statement: String,
}

/// What `ask` asks and how it retrieves the evidence.
#[derive(Debug, clap::Args)]
pub(super) struct AskArgs {
    /// The question.
    pub(super) question: String,
    /// Tokens of evidence retrieved at most.
    #[arg(long, default_value_t = 1024)]
    pub(super) budget: u64,
    /// The SELECT that retrieves the evidence, with $question and
    /// $budget (default: BM25 over every document, best first).
    #[arg(long)]
    pub(super) statement: Option<String>,
    /// Items shown to the model per step.
    #[arg(long, default_value_t = 2)]
    pub(super) group: usize,
    /// Retrieve and judge only; no answer step.
    #[arg(long)]
    pub(super) no_answer: bool,
    /// Show every step: the items shown, each verdict, tokens and time.
    #[arg(long)]
    pub(super) explain: bool,
}

/// Where `serve` listens and what its `/mcp` allows.
#[derive(Debug, clap::Args)]
pub(super) struct ServeArgs {
    /// TCP address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:7733")]
    pub(super) listen: std::net::SocketAddr,
    /// Environment variable holding the bearer token every request must
    /// present (required to listen beyond loopback).
    #[arg(long, value_name = "VAR")]
    pub(super) token_env: Option<String>,
    /// Seconds a request may run before it is answered busy (a read,
    /// such as a slow model's `ask`) or unknown (a write); it goes on.
    /// Also how long open requests get to finish at shutdown.
    #[arg(long, default_value_t = 60.0, value_name = "SECS", value_parser = parse_seconds)]
    pub(super) request_timeout: f64,
    /// `/mcp` offers only the reading tools.
    #[arg(long)]
    pub(super) mcp_read_only: bool,
    /// A directory whose files `/mcp`'s ingest may read (repeatable).
    #[arg(long, value_name = "DIR")]
    pub(super) mcp_allow_dir: Vec<PathBuf>,
}

impl Command {
    /// Whether the command is forwarded whole to a server of its store
    /// (with its standard input when it [reads one](Command::reads_stdin)):
    /// every command on an existing store except the console (which sends
    /// its statements one by one).
    pub(super) fn routable(&self) -> bool {
        !matches!(
            self,
            Command::Init { .. }
                | Command::Vacuum
                | Command::Console { .. }
                | Command::Serve(_)
                | Command::Mcp { .. }
                | Command::Demo
                | Command::Eval { .. }
        )
    }

    /// Whether the command reads standard input (`ingest -`, `session add -`).
    pub(super) fn reads_stdin(&self) -> bool {
        match self {
            Command::Ingest(args) => args.paths.iter().any(|p| p.as_os_str() == "-"),
            Command::Session { command } => command.reads_stdin(),
            _ => false,
        }
    }

    /// Makes the command's relative file paths relative to `cwd` (the
    /// directory of the process that forwarded it).
    pub(super) fn resolve_paths(&mut self, cwd: &std::path::Path) {
        let resolve = |path: &mut PathBuf| {
            if path.is_relative() && path.as_os_str() != "-" {
                *path = cwd.join(&*path);
            }
        };
        match self {
            Command::Ingest(args) => {
                args.paths.iter_mut().for_each(resolve);
                args.meta_json.iter_mut().for_each(resolve);
            }
            Command::Dag {
                attention: Some(path),
                ..
            } => resolve(path),
            Command::Session { command } => command.resolve_paths(cwd),
            Command::Salvage { to } => resolve(to),
            Command::Backup { dest } => resolve(dest),
            Command::Highlight(args) => {
                resolve(&mut args.pdf);
                resolve(&mut args.output);
            }
            _ => {}
        }
    }

    /// Whether the command may ask a chat model, so the store opens with
    /// the one --llm-url/--llm-model name (other commands ignore them).
    pub(super) fn may_ask_a_model(&self) -> bool {
        matches!(
            self,
            Command::Ingest(_)
                | Command::Ask(_)
                | Command::Serve(_)
                | Command::Session {
                    command: session::SessionCommand::Add { .. }
                }
        )
    }

    /// Whether the command removes documents or session turns, so the
    /// store may open on a full disk in the room it keeps for removals.
    pub(super) fn removes(&self) -> bool {
        matches!(
            self,
            Command::Rm { .. }
                | Command::Session {
                    command: session::SessionCommand::Rm { .. }
                        | session::SessionCommand::Forget { .. }
                }
        )
    }

    /// Whether the command writes new text, whose tokens it must count.
    pub(super) fn counts_tokens(&self) -> bool {
        matches!(
            self,
            Command::Ingest(_)
                | Command::Demo
                | Command::Session {
                    command: session::SessionCommand::Add { .. }
                }
        )
    }
}

/// A positive, finite number of seconds.
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 && seconds < 1e9 => Ok(seconds),
        _ => Err(format!(
            "expected a positive number of seconds, got {text:?}"
        )),
    }
}

fn parse_param(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(name, value)| (name.trim_start_matches('$').to_owned(), value.to_owned()))
        .ok_or_else(|| format!("expected NAME=VALUE, got {text:?}"))
}

/// A flag value read by its type's `FromStr` (formats, structurers), the
/// library's message as clap's error.
fn parse_named<T: std::str::FromStr<Err = Error>>(name: &str) -> Result<T, String> {
    name.parse().map_err(|e: Error| e.to_string())
}

/// Parses `--wait`: a non-negative number of seconds.
fn parse_wait(text: &str) -> Result<std::time::Duration, String> {
    text.parse::<f64>()
        .ok()
        .and_then(|seconds| std::time::Duration::try_from_secs_f64(seconds).ok())
        .ok_or_else(|| format!("{text:?} is not a number of seconds (0 or more)"))
}

//! Argument parsing and command dispatch for the `edudb` binary. All
//! printing happens here and in the submodules, never in the library.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use edudb::compute::embed::EmbedderConfig;
use edudb::compute::embed::http::HttpConfig;
use edudb::ingest::sources::Origin;
use edudb::serve::{CommandOutput, CommandRequest, CommandRunner};
use edudb::{
    AskOptions, CancelToken, ChatConfig, ChatModel, Db, Error, Format, HttpChat, IngestOptions,
    IpMakerKind, OpenOptions, Params, Structurer,
};
use serde_json::json;

mod bars;
mod console;
mod demo;
mod eval;
mod failure;
mod highlight;
mod mcp;
mod render;
mod route;
mod session;

use failure::{EXIT_INTERNAL, EXIT_USER, Failure};
use render::OutputFormat;

/// What `highlight` runs unless told otherwise.
const HIGHLIGHT_STATEMENT: &str =
    "SELECT SPANS FROM doc($doc) SEED HYBRID($question) BUDGET $budget TOKENS";

/// edudb: an embedded document database with EDU coordinates and structural trees.
#[derive(Debug, Parser)]
#[command(name = "edudb", version, about)]
struct Cli {
    /// Store directory.
    #[arg(long, global = true, env = "EDUDB_PATH", default_value = "./edudb.db")]
    db: PathBuf,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Hide progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
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
    wait: std::time::Duration,
    #[command(flatten)]
    embedder: EmbedderArgs,
    #[command(flatten)]
    llm: LlmArgs,
    #[command(subcommand)]
    command: Command,
}

/// Which embedder makes the vectors. A new store records it; an existing
/// store uses the recorded one unless these say otherwise (and then they
/// must name the same model).
#[derive(Debug, clap::Args)]
struct EmbedderArgs {
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
struct LlmArgs {
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
    fn chat(&self) -> edudb::Result<Option<Arc<dyn ChatModel>>> {
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
    fn config(&self) -> edudb::Result<Option<EmbedderConfig>> {
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

/// A command line being run: here, or by a server on the store it holds
/// open (`served`), for a command forwarded to it.
struct Context<'a> {
    cli: &'a Cli,
    served: Option<&'a Db>,
    /// Where `-` reads from.
    stdin: route::Stdin<'a>,
}

impl<'a> Context<'a> {
    /// The store: the served one, or the one at `--db` opened (created when
    /// `create`) with the chosen embedder.
    fn open(&self, create: bool) -> edudb::Result<route::Store<'a>> {
        if let Some(db) = self.served {
            return Ok(route::Store::Served(db));
        }
        Db::open_with(&self.cli.db, &self.open_options(create)?)
            .map(|db| route::Store::Owned(Box::new(db)))
    }

    /// How the store at `--db` is opened (created when `create`).
    fn open_options(&self, create: bool) -> edudb::Result<OpenOptions> {
        let cli = self.cli;
        Ok(OpenOptions {
            create,
            embedder: cli.embedder.config()?,
            busy_timeout: cli.wait,
            chat: if cli.command.may_ask_a_model() {
                cli.llm.chat()?
            } else {
                None
            },
            ..Default::default()
        })
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create an empty store.
    Init,
    /// Ingest files, directories (recursively) or `-` for standard input.
    Ingest {
        /// Inputs: files, directories, or `-`.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Document id (one input only); default: the file name without extension.
        #[arg(long)]
        id: Option<String>,
        /// Input format: text, markdown, html or pdf; default: by extension, then sniffed.
        #[arg(long, value_parser = parse_named::<Format>)]
        format: Option<Format>,
        /// Replace invalid UTF-8 with U+FFFD instead of rejecting the file.
        #[arg(long)]
        lossy: bool,
        /// What builds each document's tree: `layout` (headings, blocks,
        /// cohesion; no model) or `llm` (LingoEDU's outline from the chat
        /// model of --llm-url/--llm-model, checked, falling back to the
        /// layout tree for a document whose outline stays invalid).
        #[arg(long, default_value = "layout", value_parser = parse_named::<Structurer>)]
        structurer: Structurer,
        /// What makes each document's information points: `bridge` (shared
        /// terms, then salient EDUs; no model) or `llm` (PECAN's points
        /// written by the chat model of --llm-url/--llm-model, checked and
        /// linked by attention, the model-free points for a window whose
        /// replies stay invalid).
        #[arg(long, default_value = "bridge", value_parser = parse_named::<IpMakerKind>)]
        ip_maker: IpMakerKind,
        /// Also bring the vector graph up to date now (with progress), so
        /// the first NEAR or HYBRID search does not build it.
        #[arg(long)]
        vectors: bool,
    },
    /// List documents.
    Docs,
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
    Highlight {
        /// Document id (read from a PDF).
        doc: String,
        /// The question; its picks are highlighted.
        question: String,
        /// The PDF the document was read from (checked by size and CRC-32).
        #[arg(long)]
        pdf: PathBuf,
        /// Where to write the highlighted copy.
        #[arg(long, short)]
        output: PathBuf,
        /// Tokens picked at most.
        #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
        budget: u64,
        /// The statement to run instead (parameters $doc, $question, $budget).
        #[arg(long, default_value = HIGHLIGHT_STATEMENT)]
        statement: String,
    },
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
        /// Bind a parameter: NAME=VALUE for `$NAME` (`1=...` for `$1`); numbers bind as numbers.
        #[arg(long = "param", short = 'p', value_parser = parse_param)]
        params: Vec<(String, String)>,
    },
    /// Answer a question from the store with the chat model
    /// (--llm-url/--llm-model): evidence is retrieved best first, shown to
    /// the model a few items at a time until it judges it enough, and the
    /// answer cites it by coordinates (document, EDU span, bytes).
    Ask {
        /// The question.
        question: String,
        /// Tokens of evidence retrieved at most.
        #[arg(long, default_value_t = 1024)]
        budget: u64,
        /// The SELECT that retrieves the evidence, with $question and
        /// $budget (default: BM25 over every document, best first).
        #[arg(long)]
        statement: Option<String>,
        /// Items shown to the model per step.
        #[arg(long, default_value_t = 2)]
        group: usize,
        /// Retrieve and judge only; no answer step.
        #[arg(long)]
        no_answer: bool,
        /// Show every step: the items shown, each verdict, tokens and time.
        #[arg(long)]
        explain: bool,
    },
    /// Interactive console: statements end with `;`, `.help` lists commands.
    Console {
        /// Output: text or json (`.format` changes it in the console).
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Serve the store to other processes over HTTP/JSON (and a Unix
    /// socket in the store directory) until SIGINT or SIGTERM.
    Serve {
        /// TCP address to listen on (port 0: any free port).
        #[arg(long, default_value = "127.0.0.1:7733")]
        listen: std::net::SocketAddr,
        /// Environment variable holding the bearer token every request must
        /// present (required to listen beyond loopback).
        #[arg(long, value_name = "VAR")]
        token_env: Option<String>,
        /// Seconds a request may run before it is answered busy (a read,
        /// such as a slow model's `ask`) or unknown (a write); it goes on.
        /// Also how long open requests get to finish at shutdown.
        #[arg(long, default_value_t = 60.0, value_name = "SECS", value_parser = parse_seconds)]
        request_timeout: f64,
        /// `/mcp` offers only the reading tools.
        #[arg(long)]
        mcp_read_only: bool,
        /// A directory whose files `/mcp`'s ingest may read (repeatable).
        #[arg(long, value_name = "DIR")]
        mcp_allow_dir: Vec<PathBuf>,
    },
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

impl Command {
    /// Whether the command is forwarded whole to a server of its store
    /// (with its standard input when it [reads one](Command::reads_stdin)):
    /// every command on an existing store except the console (which sends
    /// its statements one by one).
    fn routable(&self) -> bool {
        !matches!(
            self,
            Command::Init
                | Command::Console { .. }
                | Command::Serve { .. }
                | Command::Mcp { .. }
                | Command::Demo
                | Command::Eval { .. }
        )
    }

    /// Whether the command reads standard input (`ingest -`, `session add -`).
    fn reads_stdin(&self) -> bool {
        match self {
            Command::Ingest { paths, .. } => paths.iter().any(|p| p.as_os_str() == "-"),
            Command::Session { command } => command.reads_stdin(),
            _ => false,
        }
    }

    /// Makes the command's relative file paths relative to `cwd` (the
    /// directory of the process that forwarded it).
    fn resolve_paths(&mut self, cwd: &std::path::Path) {
        let resolve = |path: &mut PathBuf| {
            if path.is_relative() && path.as_os_str() != "-" {
                *path = cwd.join(&*path);
            }
        };
        match self {
            Command::Ingest { paths, .. } => paths.iter_mut().for_each(resolve),
            Command::Dag {
                attention: Some(path),
                ..
            } => resolve(path),
            Command::Session { command } => command.resolve_paths(cwd),
            Command::Salvage { to } => resolve(to),
            Command::Highlight { pdf, output, .. } => {
                resolve(pdf);
                resolve(output);
            }
            _ => {}
        }
    }

    /// Whether the command may ask a chat model, so the store opens with
    /// the one --llm-url/--llm-model name (other commands ignore them).
    fn may_ask_a_model(&self) -> bool {
        matches!(
            self,
            Command::Ingest { .. }
                | Command::Ask { .. }
                | Command::Serve { .. }
                | Command::Session {
                    command: session::SessionCommand::Add { .. }
                }
        )
    }

    /// Whether the command writes new text, whose tokens it must count.
    fn counts_tokens(&self) -> bool {
        matches!(
            self,
            Command::Ingest { .. }
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

/// Parameters from `--param` pairs: numbers as numbers, the rest as text.
pub fn bind_params(pairs: &[(String, String)]) -> Params {
    pairs.iter().fold(Params::new(), |params, (name, value)| {
        match value.parse::<f64>() {
            Ok(number) if number.is_finite() => params.number(name, number),
            _ => params.text(name, value),
        }
    })
}

/// A flag value read by its type's `FromStr` (formats, structurers), the
/// library's message as clap's error.
fn parse_named<T: std::str::FromStr<Err = Error>>(name: &str) -> Result<T, String> {
    name.parse().map_err(|e: Error| e.to_string())
}

/// Runs the CLI and maps the outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() { EXIT_USER } else { 0 };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    // Library warnings show; sled's own log lines (its recovery notes
    // after a crash, routed here through `log`) and the PDF reader's only
    // when RUST_LOG asks: pdf_oxide logs every stream it cannot inflate
    // as an error, hundreds for a filing whose images are damaged though
    // all its text reads, and a page it cannot read is ours to report.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,sled=off,pdf_oxide=off".into()),
        )
        .init();
    if cli.command.routable()
        && let Some(code) = route::forward(&cli.db, cli.command.reads_stdin())
    {
        return ExitCode::from(code);
    }
    let context = Context {
        cli: &cli,
        served: None,
        stdin: route::Stdin::Own,
    };
    // Standard output is not held locked: `edudb mcp` writes its messages
    // to it from the runtime's threads.
    let result = run(&context, &mut anstream::stdout(), &mut anstream::stderr());
    ExitCode::from(finish(&cli, result, &mut anstream::stderr()))
}

/// Runs forwarded command lines on the served store (the server side of
/// [`route::forward`]): parsed as here, relative paths read from the
/// caller's directory, progress bars off.
#[derive(Debug)]
struct Runner;

impl CommandRunner for Runner {
    fn run(&self, db: &Db, request: CommandRequest) -> CommandOutput {
        let refused = |stderr: String| CommandOutput {
            stdout: String::new(),
            stderr,
            code: EXIT_USER,
        };
        let args = std::iter::once("edudb".to_owned()).chain(request.args);
        let mut cli = match Cli::try_parse_from(args) {
            Ok(cli) => cli,
            Err(err) => return refused(err.render().to_string()),
        };
        if !cli.command.routable() {
            return refused("error: this command cannot run through a server\n".into());
        }
        cli.command.resolve_paths(&request.cwd);
        cli.quiet = true;
        let decode = |text: &str| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(text)
        };
        let stdin = match request.stdin_base64.as_deref().map(decode).transpose() {
            Ok(stdin) => stdin,
            Err(err) => {
                return refused(format!(
                    "error: the forwarded standard input is not base64: {err}\n"
                ));
            }
        };
        let (mut out, mut errors) = (Vec::new(), Vec::new());
        let context = Context {
            cli: &cli,
            served: Some(db),
            stdin: route::Stdin::Forwarded(stdin.as_deref()),
        };
        let result = run(&context, &mut out, &mut errors);
        let code = finish(&cli, result, &mut errors);
        CommandOutput {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&errors).into_owned(),
            code,
        }
    }
}

/// The exit code of a command's outcome, with the failure written to
/// `errors`.
fn finish(cli: &Cli, result: Result<u8, Failure>, errors: &mut dyn Write) -> u8 {
    match result {
        Ok(code) => code,
        // The reader went away (`edudb docs | head`): nothing left to say.
        Err(Failure::Output(err)) if err.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(Failure::Output(err)) => {
            let _ = render::error(errors, &format!("writing output: {err}"));
            EXIT_INTERNAL
        }
        Err(Failure::Db(err)) => {
            let _ = render::error(errors, &err);
            if err.is_busy() {
                let _ = render::hint(
                    errors,
                    &format!(
                        "waited {} s for it; --wait SECONDS (or EDUDB_WAIT) waits longer",
                        cli.wait.as_secs_f64()
                    ),
                );
            }
            failure::exit_code(&err)
        }
    }
}

/// Runs the command, writing to `out` and `errors`; returns the exit code.
fn run(context: &Context, out: &mut dyn Write, errors: &mut dyn Write) -> Result<u8, Failure> {
    let cli = context.cli;
    if cli.command.counts_tokens() {
        edudb::model::tokens::load_in_background();
    }
    match &cli.command {
        Command::Init => {
            let db = context.open(true)?;
            if cli.json {
                render::json(out, &json!({ "path": db.path() }))?;
            } else {
                writeln!(out, "store ready at {}", db.path().display())?;
            }
        }
        Command::Ingest {
            paths,
            id,
            format,
            lossy,
            structurer,
            ip_maker,
            vectors,
        } => {
            let (mut sources, skipped) =
                edudb::ingest::sources::expand_listing_skipped(paths, id.as_deref())?;
            if let route::Stdin::Forwarded(_) = context.stdin {
                for source in &mut sources {
                    if source.origin == Origin::Stdin {
                        source.origin = Origin::Bytes(context.stdin.read()?);
                    }
                }
            }
            let db = context.open(true)?;
            let options = IngestOptions {
                format: *format,
                lossy: *lossy,
                structurer: *structurer,
                ip_maker: *ip_maker,
            };
            let progress = bars::Bars::new(cli.quiet || cli.json);
            let report = match db.ingest(&sources, options, &progress, &CancelToken::new()) {
                Ok(report) => report,
                Err(err) => {
                    if cli.json {
                        render::unfinished_ingest(out, &err)?;
                    }
                    return Err(Failure::Db(err));
                }
            };
            render::ingest_report(out, errors, &report, &skipped, cli.json)?;
            if *vectors {
                db.build_vectors(&progress, &CancelToken::new())?;
            }
            if !report.failures.is_empty() {
                return Ok(EXIT_USER);
            }
        }
        Command::Docs => {
            let db = context.open(false)?;
            render::documents(out, &db.documents()?, &db.build_costs()?, cli.json)?
        }
        Command::Tree { doc, depth } => {
            render::tree(out, &context.open(false)?.tree(doc)?, *depth, cli.json)?
        }
        Command::Dag {
            doc,
            level,
            dot,
            attention,
        } => {
            let db = context.open(false)?;
            if let Some(path) = attention {
                db.reweight_dag(
                    doc,
                    &edudb::ingest::dag::supplied::SuppliedAttention::read(path)?,
                )?;
            }
            let listing = db.dag_listing(doc, *level)?;
            if *dot {
                render::dag_dot(out, &listing)?;
            } else if cli.json {
                render::json(out, &serde_json::to_value(&listing).unwrap_or_default())?;
            } else {
                render::dag(out, &listing)?;
            }
        }
        Command::Show { doc, range, page } => {
            let range = (range.as_deref())
                .map(|r| parse_range(r, "EDU range"))
                .transpose()?;
            let pages = (page.as_deref())
                .map(|p| parse_range(p, "page range"))
                .transpose()?;
            let db = context.open(false)?;
            let mut edus = db.edus(doc, range)?;
            if let Some((first, last)) = pages {
                let Some(layout) = db.pages(doc)? else {
                    return Err(Failure::Db(Error::Usage(format!(
                        "{doc} has no pages: --page is for documents read from a PDF"
                    ))));
                };
                let count = layout.pages.len() as u32;
                if first == 0 || first > last {
                    return Err(Failure::Db(Error::Usage(format!(
                        "bad page range {first}..{last}: pages are numbered from 1, first to last"
                    ))));
                }
                if first > count {
                    let noun = if count == 1 { "page" } else { "pages" };
                    return Err(Failure::Db(Error::Usage(format!(
                        "{doc} has {count} {noun}: --page {first} is past its last"
                    ))));
                }
                edus.retain(|e| e.pages.is_some_and(|[a, b]| a <= last && first <= b));
            }
            render::edus(out, &edus, cli.json)?;
        }
        Command::Highlight {
            doc,
            question,
            pdf,
            output,
            budget,
            statement,
        } => {
            let db = context.open(false)?;
            let params = Params::new()
                .text("doc", doc)
                .text("question", question)
                .number("budget", *budget as f64);
            let written = highlight::write(&db, doc, &db.query(statement, &params)?, pdf, output)?;
            if cli.json {
                render::json(out, &serde_json::to_value(&written).unwrap_or_default())?;
            } else {
                writeln!(
                    out,
                    "{} spans highlighted on pages {:?} in {}",
                    written.spans,
                    written.pages,
                    output.display()
                )?;
            }
        }
        Command::Search { query, limit } => {
            let hits = context.open(false)?.search(query, *limit as usize)?;
            render::hits(out, &hits, cli.json)?;
        }
        Command::Query {
            statement,
            format,
            params,
        } => {
            let db = context.open(false)?;
            let result = db.query(statement, &bind_params(params))?;
            render::query_result(out, &result, cli.json || *format == OutputFormat::Json)?;
        }
        Command::Ask {
            question,
            budget,
            statement,
            group,
            no_answer,
            explain,
        } => {
            let db = context.open(false)?;
            let options = AskOptions {
                budget: *budget,
                statement: statement.clone(),
                group: *group,
                answer: !*no_answer,
            };
            let progress = bars::Bars::new(cli.quiet || cli.json);
            let result = db.ask(question, &options, &progress, &CancelToken::new())?;
            render::ask(out, &result, *explain, cli.json)?;
        }
        Command::Console { format } => {
            let format = if cli.json {
                OutputFormat::Json
            } else {
                *format
            };
            // The console does not forward itself: it sends each statement
            // to the store's server, when one is live.
            let target = match route::Server::find(&cli.db) {
                Some(server) => console::Target::Served(server),
                None => {
                    console::Target::Local(std::sync::Arc::new(context.open(false)?.into_owned()?))
                }
            };
            return console::run(target, format);
        }
        Command::Rm { docs } => {
            let db = context.open(false)?;
            for doc in docs {
                db.remove(doc)?;
                if !cli.json {
                    writeln!(out, "removed {doc}")?;
                }
            }
            if cli.json {
                render::json(out, &json!({ "removed": docs }))?;
            }
        }
        Command::Stats => render::stats(out, &context.open(false)?.stats()?, cli.json)?,
        Command::Mcp { access } => mcp::run(&cli.db, || context.open(true)?.into_owned(), access)?,
        Command::Serve {
            listen,
            token_env,
            request_timeout,
            mcp_read_only,
            mcp_allow_dir,
        } => {
            let token = match token_env {
                Some(var) => Some(std::env::var(var).map_err(|_| {
                    Error::Usage(format!("--token-env {var}: the variable is not set"))
                })?),
                None => None,
            };
            let options = edudb::serve::ServeOptions {
                listen: *listen,
                token,
                request_timeout: std::time::Duration::from_secs_f64(*request_timeout),
                stop_on_signals: true,
                commands: Some(std::sync::Arc::new(Runner)),
                mcp: Some(
                    edudb::serve::mcp::McpOptions {
                        read_only: *mcp_read_only,
                        allowed_dirs: mcp_allow_dir.clone(),
                        ..Default::default()
                    }
                    .resolved()?,
                ),
                ..Default::default()
            };
            let mut announced = Ok(());
            edudb::serve::run(
                context.open(false)?.into_owned()?,
                &options,
                |bound| announced = render::serving(out, bound, cli.json),
                &edudb::CancelToken::new(),
            )?;
            announced?;
        }
        Command::Reindex => {
            let db = context.open(false)?;
            let skipped =
                db.reindex(&bars::Bars::new(cli.quiet || cli.json), &CancelToken::new())?;
            let entries = db.stats()?.fulltext_entries;
            let vectors = db.vector_counts()?;
            if cli.json {
                render::json(
                    out,
                    &json!({ "fulltext_entries": entries, "vectors": vectors, "skipped": skipped }),
                )?;
            } else {
                writeln!(
                    out,
                    "indexes rebuilt: {entries} full-text entries, {} node and {} EDU vectors in the graph (heading EDUs are not indexed: their section's vector carries the title)",
                    vectors.nodes, vectors.edus
                )?;
                for damaged in &skipped {
                    writeln!(
                        out,
                        "  skipped damaged {}: {}",
                        damaged.doc, damaged.problem
                    )?;
                }
            }
            if !skipped.is_empty() {
                return Ok(EXIT_INTERNAL);
            }
        }
        Command::Salvage { to } => {
            let bars = bars::Bars::new(cli.quiet || cli.json);
            let cancel = CancelToken::new();
            // A served store is open; one that is not is first read from
            // its data log, before its engine can cut it short.
            let report = match context.served {
                Some(db) => db.salvage(to, &bars, &cancel)?,
                None => {
                    Db::salvage_store(&cli.db, to, &context.open_options(false)?, &bars, &cancel)?
                }
            };
            if cli.json {
                render::json(out, &serde_json::to_value(&report).unwrap_or_default())?;
            } else {
                if let Some(log) = &report.from_log {
                    writeln!(
                        out,
                        "its data log is damaged, or its engine could not open it, so it was read page by page: {} pages, {} records, {} damaged stretches left out (a document removed or replaced just before the damage may be back in its earlier form)",
                        log.pages, log.records, log.damaged
                    )?;
                }
                writeln!(
                    out,
                    "salvaged into {}: {} documents and {} sessions, {} left out",
                    to.display(),
                    report.documents,
                    report.sessions,
                    report.skipped.len()
                )?;
                for skipped in &report.skipped {
                    writeln!(out, "  left out {}: {}", skipped.doc, skipped.problem)?;
                }
            }
            if !report.skipped.is_empty() {
                return Ok(EXIT_INTERNAL);
            }
        }
        Command::Check => {
            let report = context.open(false)?.check()?;
            if cli.json {
                render::json(out, &serde_json::to_value(&report).unwrap_or_default())?;
            } else if !report.damaged.is_empty() {
                writeln!(
                    out,
                    "damaged: {} of {} documents (the rest are valid)",
                    report.damaged.len(),
                    report.documents
                )?;
                for damaged in &report.damaged {
                    writeln!(out, "  {}: {}", damaged.doc, damaged.problem)?;
                }
            } else {
                writeln!(
                    out,
                    "ok: {} documents valid, {} full-text entries, {} node and {} EDU vectors stored",
                    report.documents,
                    report.fulltext_entries,
                    report.vectors.nodes,
                    report.vectors.edus
                )?;
                if report.vector_graph_change < report.last_change {
                    writeln!(
                        out,
                        "vector graph at change {} of {}: it catches up on the next vector search (or `edudb reindex`)",
                        report.vector_graph_change, report.last_change
                    )?;
                }
            }
            if !report.damaged.is_empty() {
                return Ok(EXIT_INTERNAL);
            }
        }
        Command::Demo => demo::run(out, cli.quiet)?,
        Command::Session { command } => session::run(
            out,
            command,
            &|create| context.open(create),
            context.stdin,
            &bars::Bars::new(cli.quiet || cli.json),
            cli.json,
        )?,
        Command::Eval { command } => {
            eval::run(out, command, cli.embedder.config()?, cli.json, cli.quiet)?
        }
    }
    Ok(0)
}

/// Parses `A..B` (inclusive) or `A` into an EDU range.
fn parse_range(text: &str, what: &str) -> edudb::Result<(u32, u32)> {
    let bad = || {
        Error::Usage(format!(
            "bad {what} {text:?}; expected A..B (inclusive) or A, e.g. 3..7"
        ))
    };
    let number = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
    match text.split_once("..") {
        Some((a, b)) => Ok((number(a)?, number(b.strip_prefix('=').unwrap_or(b))?)),
        None => number(text).map(|a| (a, a)),
    }
}

/// Parses `--wait`: a non-negative number of seconds.
fn parse_wait(text: &str) -> Result<std::time::Duration, String> {
    text.parse::<f64>()
        .ok()
        .and_then(|seconds| std::time::Duration::try_from_secs_f64(seconds).ok())
        .ok_or_else(|| format!("{text:?} is not a number of seconds (0 or more)"))
}

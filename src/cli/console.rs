//! `edudb console`: an interactive query console in the habits of psql and
//! sqlite3. Statements may span lines and run once they end with `;`; lines
//! starting with `.` are console commands. On a terminal it edits lines with
//! rustyline (persistent history, keyword and document-id completion);
//! otherwise it reads statements from standard input without prompts.

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, mpsc};
use std::time::Instant;

use edudb::query::lexer::{opens_string, split_statements};
use edudb::query::parser::KEYWORDS;
use edudb::query::plan::KIND_NAMES;
use edudb::serve::CommandOutput;
use edudb::{Db, Params, QueryResult};
use regex::Regex;
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::{Config, Context, Editor, Helper, Highlighter, Hinter, Validator};

use super::failure::{EXIT_USER, Failure};
use super::render::{self, OutputFormat};
use super::route::Server;

/// Prompt for a new statement.
const PROMPT: &str = "edudb> ";
/// Prompt while a statement continues over more lines.
const CONTINUATION: &str = "   ...> ";
/// Prompt while a string of a statement is still open (a quote to close).
const IN_STRING: &str = "  '...> ";
/// How deeply `.read` files may read further files.
const MAX_READ_DEPTH: usize = 16;
/// Console commands, for `.help` and completion.
const COMMANDS: [(&str, &str); 6] = [
    (".help", "show this help"),
    (".timing on|off", "print how long each statement took"),
    (
        ".format text|json",
        "print results for people or as the JSON contract",
    ),
    (".read FILE", "run the statements and commands in FILE"),
    (".quit", "leave the console (also .exit or Ctrl-D)"),
    (".exit", "leave the console"),
];

/// Where the console's statements run.
pub enum Target {
    /// The store the console opened.
    Local(Arc<Db>),
    /// The server holding the store: each statement goes to it as an
    /// `edudb query` command line.
    Served(Server),
}

impl Target {
    /// The store's directory, for the banner.
    fn path(&self) -> &Path {
        match self {
            Target::Local(db) => db.path(),
            Target::Served(server) => server.store(),
        }
    }

    /// The document and session ids, for completion.
    fn names(&self) -> edudb::Result<Names> {
        match self {
            Target::Local(db) => Ok(Names {
                documents: db.documents()?.into_iter().map(|d| d.id).collect(),
                sessions: db.sessions()?.into_iter().map(|s| s.id).collect(),
            }),
            Target::Served(server) => {
                let ids = |args: &[&str]| -> edudb::Result<Vec<String>> {
                    let output = run_on(server, args)?;
                    let listing: serde_json::Value =
                        serde_json::from_str(&output.stdout).unwrap_or_default();
                    Ok(listing
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|row| row["id"].as_str().map(str::to_owned))
                        .collect())
                };
                Ok(Names {
                    documents: ids(&["docs", "--json"])?,
                    sessions: ids(&["session", "ls", "--json"])?,
                })
            }
        }
    }

    /// Runs one statement.
    fn run(&self, statement: &str, format: OutputFormat) -> Outcome {
        match self {
            Target::Local(db) => Outcome::Done(db.query(statement, &Params::new())),
            Target::Served(server) => {
                let format = match format {
                    OutputFormat::Text => "text",
                    OutputFormat::Json => "json",
                };
                Outcome::Forwarded(run_on(
                    server,
                    &["query", "--format", format, "--", statement],
                ))
            }
        }
    }
}

/// Runs an `edudb` command line on `server`, from this directory.
fn run_on(server: &Server, args: &[&str]) -> edudb::Result<CommandOutput> {
    let args = args.iter().map(|arg| (*arg).to_owned()).collect();
    server.run(args, std::env::current_dir().unwrap_or_default(), None)
}

/// Runs the console on `target` until `.quit` or end of input. Reading
/// from a pipe, a failed statement makes the exit code 1.
pub fn run(target: Target, format: OutputFormat) -> Result<u8, Failure> {
    let mut console = Console {
        target: Arc::new(target),
        format,
        timing: false,
        pending: String::new(),
        failures: 0,
        interruptible: false,
    };
    if io::stdin().is_terminal() {
        // Outside line editing the terminal turns Ctrl-C into a signal:
        // it goes to the statement running then, if any, not to the process.
        console.interruptible = ctrlc::set_handler(|| {
            let running = RUNNING
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(running) = running.as_ref() {
                let _ = running.send(Outcome::Interrupted);
            }
        })
        .is_ok();
        interactive(&mut console)?;
        Ok(0)
    } else {
        for line in io::stdin().lock().lines() {
            if let Flow::Quit = console.feed(&line?, 0)? {
                break;
            }
        }
        console.finish_pending()?;
        Ok(if console.failures == 0 { 0 } else { EXIT_USER })
    }
}

/// The line-editing loop on a terminal.
fn interactive(console: &mut Console) -> Result<(), Failure> {
    let config = Config::builder()
        .auto_add_history(false)
        .history_ignore_dups(true)
        .map_err(readline_failure)?
        .build();
    let mut editor: Editor<Completion, DefaultHistory> =
        Editor::with_config(config).map_err(readline_failure)?;
    let names = console.target.names()?;
    editor.set_helper(Some(Completion { names }));
    let history = history_path();
    if let Some(path) = &history {
        // A missing history file is the normal first run.
        let _ = editor.load_history(path);
    }
    let mut out = anstream::stdout();
    writeln!(
        out,
        "edudb {} console on {}. Statements end with ';'. Type .help for help.",
        env!("CARGO_PKG_VERSION"),
        console.target.path().display()
    )?;
    let mut history_warned = false;
    let mut entry = String::new();
    loop {
        let prompt = if console.pending.is_empty() {
            PROMPT
        } else if opens_string(&console.pending) {
            IN_STRING
        } else {
            CONTINUATION
        };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            // Ctrl-C drops the statement being typed, as in psql.
            Err(ReadlineError::Interrupted) => {
                console.pending.clear();
                entry.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(err) => return Err(readline_failure(err)),
        };
        // A statement typed over several lines is one history entry, its
        // lines joined, recalled whole.
        if !line.trim().is_empty() {
            if !entry.is_empty() {
                entry.push(' ');
            }
            entry.push_str(line.trim());
        }
        let flow = console.feed(&line, 0)?;
        if console.pending.is_empty() && !entry.is_empty() {
            let _ = editor.add_history_entry(std::mem::take(&mut entry));
            if let Some(path) = &history
                && let Err(err) = editor.append_history(path)
                && !history_warned
            {
                history_warned = true;
                let message = format!("history not saved to {}: {err}", path.display());
                render::error(&mut anstream::stderr(), &message)?;
            }
        }
        if let Flow::Quit = flow {
            break;
        }
    }
    Ok(())
}

/// Where history persists: `$EDUDB_HISTORY`, else `~/.edudb_history`.
fn history_path() -> Option<PathBuf> {
    std::env::var_os("EDUDB_HISTORY")
        .map(PathBuf::from)
        .or_else(|| std::env::home_dir().map(|home| home.join(".edudb_history")))
}

fn readline_failure(err: ReadlineError) -> Failure {
    Failure::Output(io::Error::other(err))
}

/// Whether the console goes on after a line.
enum Flow {
    Continue,
    Quit,
}

/// How a statement ended.
enum Outcome {
    /// Run here.
    Done(edudb::Result<QueryResult>),
    /// Run by the server: what it printed.
    Forwarded(edudb::Result<CommandOutput>),
    /// Cancelled with Ctrl-C.
    Interrupted,
}

/// Where Ctrl-C is sent while a statement runs (nowhere otherwise).
static RUNNING: Mutex<Option<mpsc::Sender<Outcome>>> = Mutex::new(None);

/// The open store, the settings, and the statement being typed.
struct Console {
    target: Arc<Target>,
    format: OutputFormat,
    timing: bool,
    /// Lines of a statement that has not ended with `;` yet.
    pending: String,
    /// Statements or commands that failed so far.
    failures: usize,
    /// Whether Ctrl-C cancels a running statement (on a terminal).
    interruptible: bool,
}

impl Console {
    /// Takes one input line: a console command when no statement is being
    /// typed, else part of a statement, which runs once it ends with `;`.
    fn feed(&mut self, line: &str, depth: usize) -> Result<Flow, Failure> {
        if self.pending.is_empty() {
            let trimmed = line.trim();
            if trimmed.is_empty() {
                return Ok(Flow::Continue);
            }
            if trimmed.starts_with('.') {
                return self.command(trimmed, depth);
            }
        } else {
            self.pending.push('\n');
        }
        self.pending.push_str(line);
        // Every statement the line completes runs, in order; what follows
        // the last `;` waits for more lines.
        let typed = std::mem::take(&mut self.pending);
        let (statements, rest) = split_statements(&typed);
        for statement in statements {
            self.execute(statement)?;
        }
        self.pending = rest.trim_start().to_owned();
        Ok(Flow::Continue)
    }

    /// Runs a statement left without its `;` at the end of the input.
    fn finish_pending(&mut self) -> Result<(), Failure> {
        let statement = std::mem::take(&mut self.pending);
        if statement.trim().is_empty() {
            return Ok(());
        }
        self.execute(&statement)
    }

    /// Runs one statement and prints its result or its error.
    fn execute(&mut self, statement: &str) -> Result<(), Failure> {
        let started = Instant::now();
        let outcome = if self.interruptible {
            self.run_interruptible(statement)
        } else {
            self.target.run(statement, self.format)
        };
        let elapsed = started.elapsed();
        let mut out = anstream::stdout();
        match outcome {
            Outcome::Done(Ok(result)) => {
                render::query_result(&mut out, &result, self.format == OutputFormat::Json)?
            }
            Outcome::Done(Err(err)) | Outcome::Forwarded(Err(err)) => self.fail(&err)?,
            Outcome::Forwarded(Ok(printed)) => {
                out.write_all(printed.stdout.as_bytes())?;
                if printed.code != 0 {
                    self.failures += 1;
                    out.flush()?;
                    anstream::stderr().write_all(printed.stderr.as_bytes())?;
                }
            }
            Outcome::Interrupted => self.fail(&"statement cancelled")?,
        }
        if self.timing {
            writeln!(out, "Time: {:.3} ms", elapsed.as_secs_f64() * 1000.0)?;
        }
        out.flush()?;
        Ok(())
    }

    /// Runs `statement` on a worker thread and waits for it or for Ctrl-C,
    /// whichever comes first. A cancelled statement is abandoned: it only
    /// reads, and its thread's result is dropped when it ends.
    fn run_interruptible(&self, statement: &str) -> Outcome {
        let (sender, outcome) = mpsc::channel();
        *RUNNING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sender.clone());
        let (target, statement, format) =
            (Arc::clone(&self.target), statement.to_owned(), self.format);
        std::thread::spawn(move || {
            let _ = sender.send(target.run(&statement, format));
        });
        let outcome = outcome.recv().unwrap_or(Outcome::Interrupted);
        *RUNNING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        outcome
    }

    /// Reports a failed statement or command and counts it.
    fn fail(&mut self, message: &dyn std::fmt::Display) -> io::Result<()> {
        self.failures += 1;
        anstream::stdout().flush()?;
        render::error(&mut anstream::stderr(), message)
    }

    /// Runs a console command (a line starting with `.`).
    fn command(&mut self, line: &str, depth: usize) -> Result<Flow, Failure> {
        let (name, argument) = line
            .split_once(char::is_whitespace)
            .map_or((line, ""), |(name, rest)| (name, rest.trim()));
        let mut out = anstream::stdout();
        match (name, argument) {
            (".help", _) => help(&mut out)?,
            (".quit" | ".exit", _) => return Ok(Flow::Quit),
            (".timing", "on") => self.timing = true,
            (".timing", "off") => self.timing = false,
            (".format", "text") => self.format = OutputFormat::Text,
            (".format", "json") => self.format = OutputFormat::Json,
            (".read", file) if !file.is_empty() => return self.read(Path::new(file), depth),
            (".timing" | ".format" | ".read", _) => {
                let usage = COMMANDS
                    .iter()
                    .find(|(usage, _)| usage.split(' ').next() == Some(name))
                    .map_or(name, |(usage, _)| usage);
                self.fail(&format!("usage: {usage}"))?;
            }
            _ => self.fail(&format!("unknown command {name}; .help lists the commands"))?,
        }
        out.flush()?;
        Ok(Flow::Continue)
    }

    /// `.read FILE`: feeds the file's lines as if typed.
    fn read(&mut self, file: &Path, depth: usize) -> Result<Flow, Failure> {
        if depth >= MAX_READ_DEPTH {
            let message = format!(
                ".read {}: files read each other more than {MAX_READ_DEPTH} deep",
                file.display()
            );
            self.fail(&message)?;
            return Ok(Flow::Continue);
        }
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(err) => {
                self.fail(&format!(".read {}: {err}", file.display()))?;
                return Ok(Flow::Continue);
            }
        };
        for line in text.lines() {
            if let Flow::Quit = self.feed(line, depth + 1)? {
                return Ok(Flow::Quit);
            }
        }
        self.finish_pending()?;
        Ok(Flow::Continue)
    }
}

/// Prints the console commands and a few statements to start from.
fn help(out: &mut dyn Write) -> io::Result<()> {
    for (usage, what) in COMMANDS {
        writeln!(out, "{usage:<20} {what}")?;
    }
    writeln!(
        out,
        "\nStatements end with ';' and may span lines (docs/query-language.md):\n  \
         SHOW DOCS;\n  \
         SHOW TREE doc('id') DEPTH 2;\n  \
         SELECT FROM * SEED BM25('words') BUDGET 300 TOKENS;\n  \
         EXPLAIN SELECT SPANS FROM * SEED BM25('words') TRAVERSE LIMIT 5;\n\
         Tab completes keywords, kinds, document and session ids."
    )
}

/// Tab completion for the console's line editor.
#[derive(Helper, Hinter, Validator, Highlighter)]
struct Completion {
    names: Names,
}

/// The ids quoted names complete to.
struct Names {
    documents: Vec<String>,
    sessions: Vec<String>,
}

impl Completer for Completion {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        Ok(complete(line, pos, &self.names))
    }
}

/// An unfinished quoted document id: `doc('…`, `docs('…` or `doc = '…`.
static DOC_ID_PREFIX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bdocs?\s*(?:\(|=)\s*'([^']*)$").expect("valid regex"));

/// An unfinished quoted session id: `session('…` or `SHOW SESSION '…`.
static SESSION_ID_PREFIX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bsession\s*\(?\s*'([^']*)$").expect("valid regex"));

/// The start of the text to replace and the completions for the word
/// before `pos`: document or session ids (left open: the person closes them) inside a quoted
/// id, console commands at the start of a line, otherwise keywords and kind
/// names in the case the word was typed in.
fn complete(line: &str, pos: usize, names: &Names) -> (usize, Vec<String>) {
    let before = &line[..pos];
    for (prefix, ids) in [
        (&DOC_ID_PREFIX, &names.documents),
        (&SESSION_ID_PREFIX, &names.sessions),
    ] {
        if let Some(partial) = prefix.captures(before).and_then(|c| c.get(1)) {
            let ids = ids
                .iter()
                .filter(|id| id.starts_with(partial.as_str()))
                // Not closed: a person types the `'` (closing it here made
                // their `')` an escaped quote that kept the string open).
                .map(|id| id.to_string())
                .collect();
            return (partial.start(), ids);
        }
    }
    if before.starts_with('.') && !before.contains(char::is_whitespace) {
        let commands = COMMANDS
            .iter()
            .filter_map(|(usage, _)| usage.split(' ').next())
            .filter(|name| name.starts_with(before))
            .map(str::to_owned)
            .collect();
        return (0, commands);
    }
    let start = before
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
    let word = &before[start..];
    let lowercase = !word.is_empty() && !word.chars().any(char::is_uppercase);
    let words = KEYWORDS
        .iter()
        .chain(KIND_NAMES.iter())
        .filter(|keyword| {
            keyword
                .to_ascii_lowercase()
                .starts_with(&word.to_ascii_lowercase())
        })
        .map(|keyword| {
            if lowercase {
                keyword.to_ascii_lowercase()
            } else {
                (*keyword).to_owned()
            }
        })
        .collect();
    (start, words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> Names {
        Names {
            documents: vec!["alpha".into(), "alpine".into(), "beta".into()],
            sessions: vec!["trip".into(), "triage".into()],
        }
    }

    #[test]
    fn keywords_complete_in_the_case_typed() {
        assert_eq!(complete("SEL", 3, &ids()), (0, vec!["SELECT".to_owned()]));
        assert_eq!(complete("sel", 3, &ids()), (0, vec!["select".to_owned()]));
        let (start, words) = complete("SHOW TR", 7, &ids());
        assert_eq!(
            (start, words),
            (
                5,
                vec!["TRAVERSE".to_owned(), "TREE".to_owned(), "true".to_owned()]
            )
        );
        let (_, words) = complete("SELECT FROM * WHERE kind = sec", 30, &ids());
        assert_eq!(words, vec!["section".to_owned()]);
    }

    #[test]
    fn document_ids_complete_inside_quotes() {
        let line = "SHOW TREE doc('al";
        let (start, words) = complete(line, line.len(), &ids());
        assert_eq!(start, line.len() - 2);
        assert_eq!(words, vec!["alpha".to_owned(), "alpine".to_owned()]);
        let line = "SELECT FROM * WHERE doc = 'b";
        assert_eq!(complete(line, line.len(), &ids()).1, vec!["beta"]);
        let line = "SELECT FROM docs('";
        assert_eq!(complete(line, line.len(), &ids()).1.len(), 3);
    }

    #[test]
    fn session_ids_complete_inside_quotes() {
        let line = "SELECT FROM session('tri";
        let (start, words) = complete(line, line.len(), &ids());
        assert_eq!(start, line.len() - 3);
        assert_eq!(words, vec!["trip".to_owned(), "triage".to_owned()]);
        let line = "show session 'tria";
        assert_eq!(complete(line, line.len(), &ids()).1, vec!["triage"]);
    }

    #[test]
    fn commands_complete_at_the_start_of_a_line() {
        assert_eq!(complete(".ti", 3, &ids()), (0, vec![".timing".to_owned()]));
        let (_, words) = complete(".", 1, &ids());
        assert_eq!(words.len(), COMMANDS.len());
    }
}

//! `edudb session …`: agent memory from the command line.

use std::io::Write;

use clap::Subcommand;
use edudb::{Error, Placement, Role, TurnInput};
use serde_json::json;

use super::failure::Failure;
use super::render;
use super::route::{Stdin, Store};

/// What `edudb session` does.
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Append a turn to SESSION (created by its first turn) and print where
    /// it went (turn, topic, branch, parent) and why. Without a placement
    /// flag the placement is decided from similarities.
    Add {
        /// Session id (letters, digits, '-', '_', '.', ':').
        session: String,
        /// Who speaks the turn.
        #[arg(long, default_value = "user", value_parser = parse_role)]
        role: Role,
        /// Start a new topic.
        #[arg(long, conflicts_with_all = ["topic", "fork", "continue_"])]
        new_topic: bool,
        /// Go back to topic N (continue its latest turn).
        #[arg(long, value_name = "N", conflicts_with_all = ["fork", "continue_"])]
        topic: Option<u32>,
        /// Start a new branch whose first turn follows turn TURN.
        #[arg(long, value_name = "TURN", conflicts_with = "continue_")]
        fork: Option<u32>,
        /// Follow the current turn.
        #[arg(long = "continue", id = "continue_")]
        continue_: bool,
        /// `llm`: decide from similarities, but ask the chat model
        /// (--llm-url/--llm-model) when they leave the decision in doubt.
        #[arg(long, value_name = "HOW", value_parser = ["auto", "llm"], conflicts_with_all = ["new_topic", "topic", "fork", "continue_"])]
        placement: Option<String>,
        /// When the turn was said: RFC 3339 (2023-05-18T13:47:00Z) or a date.
        #[arg(long, value_name = "TIME", value_parser = parse_time)]
        at: Option<i64>,
        /// The turn's metadata, `KEY=VALUE` (repeated), as `ingest --meta`
        /// takes it (`--meta speaker=Caroline`); `WHERE meta.KEY …` in a
        /// `session('id')` scope filters on it.
        #[arg(long = "meta", value_name = "KEY=VALUE")]
        meta: Vec<String>,
        /// Append many turns from a JSON Lines file (`-`: standard input),
        /// one object per line: `{"text": …}` with optional `"role"`
        /// (user, assistant, system), `"at"` (RFC 3339), `"placement"`
        /// ("auto", "llm", "continue", "new_topic", {"topic": N}, {"fork": N})
        /// and `"metadata"` (an object), all in one atomic write.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["text", "role", "new_topic", "topic", "fork", "continue_", "placement", "at", "meta"])]
        jsonl: Option<String>,
        /// The turn's text, or `-` to read it from standard input (text
        /// starting with '-', such as "-5 °C tonight?", is taken as text).
        #[arg(allow_hyphen_values = true, required_unless_present = "jsonl")]
        text: Option<String>,
    },
    /// Show SESSION's dialogue tree: topics, branches, turns with their
    /// roles and summary spans; the current turn marked.
    Show {
        /// Session id.
        session: String,
    },
    /// The context for SESSION's next turn: the active path in full and the
    /// summaries of other branches and topics, within a token budget.
    Context {
        /// Session id.
        session: String,
        /// Most tokens (o200k_base) the context may hold.
        #[arg(long)]
        budget: u64,
        /// What the user just said: the context then holds the recent
        /// turns, the turns of the whole history most relevant to it with
        /// their neighbours, and their topics' summaries.
        #[arg(long)]
        query: Option<String>,
    },
    /// List sessions.
    Ls,
    /// Remove a session and all its turns.
    Rm {
        /// Session id.
        session: String,
    },
    /// Forget one turn: its text goes, while it keeps its place (later
    /// turns keep their numbers); contexts and queries leave it out.
    Forget {
        /// Session id.
        session: String,
        /// The turn's number.
        turn: u32,
    },
}

impl SessionCommand {
    /// Whether it reads standard input (`add -` or `add --jsonl -`).
    pub fn reads_stdin(&self) -> bool {
        match self {
            SessionCommand::Add {
                jsonl: Some(path), ..
            } => path == "-",
            SessionCommand::Add { text, .. } => text.as_deref().is_none_or(|t| t == "-"),
            _ => false,
        }
    }

    /// Makes a relative `--jsonl` file relative to `cwd`.
    pub fn resolve_paths(&mut self, cwd: &std::path::Path) {
        if let SessionCommand::Add {
            jsonl: Some(path), ..
        } = self
            && path != "-"
            && std::path::Path::new(path.as_str()).is_relative()
        {
            *path = cwd.join(path.as_str()).display().to_string();
        }
    }
}

fn parse_role(name: &str) -> Result<Role, String> {
    name.parse().map_err(|e: Error| e.to_string())
}

fn parse_time(text: &str) -> Result<i64, String> {
    edudb::model::time::parse(text).map_err(|e| e.to_string())
}

/// Reads `session add --jsonl` input for session `session`: one turn per
/// non-blank line, each checked as a turn ([`edudb::memory::check_turn_input`]);
/// a bad line is an [`Error::Dataset`] naming the input (`<stdin>` for
/// `-`) and its line.
fn read_turn_lines(path: &str, session: &str, input: &str) -> Result<Vec<TurnInput>, Error> {
    let name = std::path::PathBuf::from(input_name(path));
    let mut turns = Vec::new();
    for (index, line) in input.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at_line = |message: String| Error::Dataset {
            path: name.clone(),
            line: index + 1,
            message,
        };
        let turn = TurnInput::from_json(line).map_err(at_line)?;
        edudb::memory::check_turn_input(session, &turn.text).map_err(|e| at_line(e.to_string()))?;
        turns.push(turn);
    }
    if turns.is_empty() {
        return Err(Error::Dataset {
            path: name,
            line: 0,
            message: "no turns in it".into(),
        });
    }
    Ok(turns)
}

/// How errors name input `path`: `<stdin>` for `-`.
fn input_name(path: &str) -> &str {
    if path == "-" { "<stdin>" } else { path }
}

/// The whole of `path` (`-`: `stdin`) as text.
fn read_input(path: &str, stdin: Stdin) -> Result<String, Error> {
    if path == "-" {
        return stdin.read_text();
    }
    std::fs::read_to_string(path).map_err(|source| Error::Input {
        path: path.into(),
        source,
    })
}

/// Runs one `edudb session` command on the store `open` opens (creating it
/// for `add`), `-` read from `stdin`.
pub fn run<'a>(
    out: &mut dyn Write,
    command: &SessionCommand,
    open: &dyn Fn(bool) -> edudb::Result<Store<'a>>,
    stdin: Stdin,
    progress: &dyn edudb::Progress,
    as_json: bool,
) -> Result<(), Failure> {
    match command {
        SessionCommand::Add {
            session,
            jsonl: Some(path),
            ..
        } => {
            // Bad input fails before a store is opened or created.
            let turns = read_turn_lines(path, session, &read_input(path, stdin)?)?;
            let receipts =
                open(true)?.append_turns(session, &turns, progress, &edudb::CancelToken::new())?;
            render::receipts(out, &receipts, as_json)?;
        }
        SessionCommand::Add {
            session,
            role,
            new_topic,
            topic,
            fork,
            continue_,
            placement,
            at,
            meta,
            text,
            ..
        } => {
            let placement = match (new_topic, topic, fork, continue_) {
                (true, ..) => Placement::NewTopic,
                (_, Some(topic), ..) => Placement::Topic(*topic),
                (_, _, Some(turn), _) => Placement::Fork(*turn),
                (_, _, _, true) => Placement::Continue,
                _ if placement.as_deref() == Some("llm") => Placement::Llm,
                _ => Placement::Auto,
            };
            let text = match text.as_deref() {
                Some("-") | None => stdin.read_text()?,
                Some(text) => text.to_owned(),
            };
            // Bad input fails before a store is opened or created.
            edudb::memory::check_turn_input(session, &text)?;
            let input = TurnInput {
                role: *role,
                text,
                at: *at,
                placement,
                metadata: super::meta_values::given(meta, None)?,
            };
            let db = open(true)?;
            let receipt = db.append_turns(
                session,
                &[input],
                &edudb::NoProgress,
                &edudb::CancelToken::new(),
            )?;
            render::receipt(out, &receipt[0], as_json)?;
        }
        SessionCommand::Show { session } => {
            render::session(out, &open(false)?.session(session)?, as_json)?
        }
        SessionCommand::Context {
            session,
            budget,
            query,
        } => {
            let context = open(false)?.session_context(session, *budget, query.as_deref())?;
            render::context(out, &context, as_json)?;
        }
        SessionCommand::Ls => render::sessions(out, &open(false)?.sessions()?, as_json)?,
        SessionCommand::Forget { session, turn } => {
            open(false)?.forget_turn(session, *turn)?;
            if as_json {
                render::json(out, &json!({ "session": session, "forgotten": turn }))?;
            } else {
                writeln!(out, "forgot turn {turn} of session {session}")?;
            }
        }
        SessionCommand::Rm { session } => {
            open(false)?.remove_session(session)?;
            if as_json {
                render::json(out, &json!({ "removed": session }))?;
            } else {
                writeln!(out, "removed session {session}")?;
            }
        }
    }
    Ok(())
}

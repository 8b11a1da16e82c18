//! `edudb session …`: agent memory from the command line.

use std::io::{Read, Write};

use clap::Subcommand;
use edudb::{Db, Error, Placement, Role};
use serde_json::json;

use super::failure::Failure;
use super::render;

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
        /// The turn's text, or `-` to read it from standard input (text
        /// starting with '-', such as "-5 °C tonight?", is taken as text).
        #[arg(allow_hyphen_values = true)]
        text: String,
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
    },
    /// List sessions.
    Ls,
    /// Remove a session and all its turns.
    Rm {
        /// Session id.
        session: String,
    },
}

fn parse_role(name: &str) -> Result<Role, String> {
    name.parse().map_err(|e: Error| e.to_string())
}

/// Runs one `edudb session` command on the store `open` opens (creating it
/// for `add`).
pub fn run(
    out: &mut dyn Write,
    command: &SessionCommand,
    open: &dyn Fn(bool) -> edudb::Result<Db>,
    as_json: bool,
) -> Result<(), Failure> {
    match command {
        SessionCommand::Add {
            session,
            role,
            new_topic,
            topic,
            fork,
            continue_,
            text,
        } => {
            let placement = match (new_topic, topic, fork, continue_) {
                (true, ..) => Placement::NewTopic,
                (_, Some(topic), ..) => Placement::Topic(*topic),
                (_, _, Some(turn), _) => Placement::Fork(*turn),
                (_, _, _, true) => Placement::Continue,
                _ => Placement::Auto,
            };
            let text = if text == "-" {
                let mut buffer = String::new();
                std::io::stdin()
                    .read_to_string(&mut buffer)
                    .map_err(|source| Error::Input {
                        path: "<stdin>".into(),
                        source,
                    })?;
                buffer
            } else {
                text.clone()
            };
            // Bad input fails before a store is opened or created.
            edudb::memory::check_turn_input(session, &text)?;
            let receipt = open(true)?.append_turn(session, *role, &text, placement)?;
            render::receipt(out, &receipt, as_json)?;
        }
        SessionCommand::Show { session } => {
            render::session(out, &open(false)?.session(session)?, as_json)?
        }
        SessionCommand::Context { session, budget } => {
            let context = open(false)?.session_context(session, *budget)?;
            render::context(out, &context, as_json)?;
        }
        SessionCommand::Ls => render::sessions(out, &open(false)?.sessions()?, as_json)?,
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

//! Typed errors of the library. Each variant says what went wrong and where;
//! [`Error::is_user_error`] separates bad input from internal failures, and
//! [`Error::is_busy`] marks a store another process holds (retry later).

use std::path::PathBuf;

mod chat;
mod embed;
mod query;

pub use chat::ChatError;
pub use embed::EmbedError;
pub use query::QueryError;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in edudb.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is not valid UTF-8.
    #[error("{source_name}: invalid UTF-8 at byte {offset} (line {line}, column {column})")]
    InvalidUtf8 {
        /// File name or document id.
        source_name: String,
        /// Byte offset of the first invalid byte.
        offset: usize,
        /// 1-based line of the first invalid byte.
        line: usize,
        /// 1-based column (in bytes) of the first invalid byte.
        column: usize,
    },
    /// The input looks like a binary file.
    #[error("{source_name}: looks like a binary file (NUL byte at offset {offset}); not ingested")]
    Binary {
        /// File name or document id.
        source_name: String,
        /// Offset of the first NUL byte.
        offset: usize,
    },
    /// A ZIP container (an office document such as DOCX, ODT, PPTX or
    /// XLSX, an EPUB, or an archive), which edudb does not read.
    #[error(
        "{source_name}: a ZIP container (DOCX, ODT, PPTX, XLSX, EPUB or an archive), which edudb does not read; convert it to PDF, HTML, Markdown or text first (for example with pandoc or LibreOffice); not ingested"
    )]
    Container {
        /// File name or document id.
        source_name: String,
    },
    /// A file whose extension names no format edudb reads (a directory
    /// walk leaves such files out the same way).
    #[error(
        "{source_name}: .{extension} files are not read (edudb reads {known}); give --format text, markdown, html or pdf to read it as one of those; not ingested"
    )]
    UnreadExtension {
        /// The file's path.
        source_name: String,
        /// Its extension, as written.
        extension: String,
        /// The extensions edudb reads.
        known: String,
    },
    /// A PDF that cannot be read: damaged, encrypted with a password,
    /// without a text layer, or refused by the reader.
    #[error("{source_name}: {message}; not ingested")]
    Pdf {
        /// File name or document id.
        source_name: String,
        /// What is wrong, and where (the page) when known.
        message: String,
    },
    /// The document has no text to index.
    #[error("{source_name}: document has no text to index")]
    EmptyDocument {
        /// File name or document id.
        source_name: String,
    },
    /// The document exceeds the size the coordinates can address.
    #[error("{source_name}: document is {bytes} bytes; the limit is {limit} bytes")]
    TooLarge {
        /// File name or document id.
        source_name: String,
        /// Size of the input.
        bytes: usize,
        /// Largest accepted size.
        limit: usize,
    },
    /// Bytes given as prepared documents are not whole, valid ones.
    #[error("prepared document{}: {message}", if what.is_empty() { String::new() } else { format!(" {what}") })]
    BadPrepared {
        /// Which document: its place in a batch, its id once read.
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// A shard set's manifest does not read, or names stores that do not
    /// make one set.
    #[error("shard set {}: {message}", path.display())]
    BadShardSet {
        /// The shard set's directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A document id is not acceptable.
    #[error("invalid document id {id:?}: {reason}")]
    InvalidId {
        /// The rejected id.
        id: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// Metadata given for a document holds what metadata cannot.
    #[error("invalid metadata{}: {message}", if key.is_empty() { String::new() } else { format!(" key {key:?}") })]
    InvalidMetadata {
        /// The key at fault (empty for the object as a whole).
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A format name given by the user is unknown.
    #[error("unknown format {0:?}; expected text, markdown, html or pdf")]
    UnknownFormat(String),
    /// No document has this id.
    #[error("no document with id {0:?}")]
    NoSuchDocument(String),
    /// An EDU range runs backwards or is outside the document (ranges
    /// include both ends).
    #[error("{}", edu_range_message(doc, *first, *last, *count))]
    EduRange {
        /// The document id.
        doc: String,
        /// Requested first EDU.
        first: u32,
        /// Requested last EDU (inclusive).
        last: u32,
        /// Number of EDUs in the document.
        count: u32,
    },
    /// A full-text query could not be parsed.
    #[error("search query {query:?}: {message}")]
    BadSearch {
        /// The query text.
        query: String,
        /// What the parser said.
        message: String,
    },
    /// Reading an input file or directory failed.
    #[error("{path}: {source}")]
    Input {
        /// The path being read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An evaluation data set (JSONL or a converter's input), or a JSON
    /// Lines file of session turns, is malformed.
    #[error("{path}:{line}: {message}")]
    Dataset {
        /// The file read.
        path: PathBuf,
        /// 1-based line of the bad record (0 when the fault is not on one line).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The command-line or API arguments do not make sense together.
    #[error("{0}")]
    Usage(String),
    /// The server (`edudb serve`) could not start or keep serving: an
    /// address that cannot be bound, the runtime, an answer that does not
    /// encode.
    #[error("server: {0}")]
    Serve(String),
    /// A server (`edudb serve`) refused a [`crate::serve::Client`]'s
    /// request; `class` is its error class, which [`Error::is_busy`] and
    /// [`Error::is_user_error`] follow.
    #[error("the server answered {status}: {message}")]
    Served {
        /// `user`, `busy` or `internal`.
        class: String,
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
        /// A query error's location (`line`, `column`, `hint`, …).
        query: Option<serde_json::Value>,
        /// The server found stored records damaged ([`Error::is_damage`]).
        damage: bool,
    },
    /// No store exists at the path.
    #[error("no edudb store at {0}; create one with `edudb init` or by ingesting")]
    NoStore(PathBuf),
    /// Another process holds the store.
    #[error("store {path} is locked by another process{}", holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default())]
    Locked {
        /// The store's directory.
        path: PathBuf,
        /// The process holding it, when it recorded itself.
        holder: Option<u32>,
    },
    /// The store was written by an incompatible version of edudb.
    #[error("store {path} has format version {found}; this edudb reads version {expected}")]
    FormatVersion {
        /// The store directory.
        path: PathBuf,
        /// Version found in the store.
        found: String,
        /// Version this build understands.
        expected: u32,
    },
    /// The path exists but is not an edudb store.
    #[error("{0} exists but is not an edudb store")]
    NotAStore(PathBuf),
    /// A structural invariant does not hold.
    #[error("invariant violated in {doc:?}: {message}")]
    Invariant {
        /// The document id.
        doc: String,
        /// Which invariant and where.
        message: String,
    },
    /// A query statement is wrong; the error locates the fault.
    #[error("{0}")]
    Query(#[from] QueryError),
    /// The operation was cancelled through its [`crate::CancelToken`].
    #[error("cancelled")]
    Cancelled,
    /// The storage engine failed.
    #[error("storage: {0}")]
    Storage(String),
    /// The disk holding the store has too little free space for a write:
    /// refused before anything was stored (every earlier change is kept),
    /// or refused by the file system (the detail says which).
    #[error("the disk holding {path} is full: {detail}; free some space and retry")]
    DiskFull {
        /// The store's storage directory.
        path: PathBuf,
        /// How much the write needed and how much was free, or the file
        /// system's own refusal.
        detail: String,
    },
    /// An earlier call through this process's handle on the store failed
    /// in the file system, and the handle was abandoned: sled could not
    /// close it without hanging, so it stays open (holding the store) until
    /// the process exits. Nothing stored is lost.
    #[error(
        "the store at {path} failed in its file system earlier in this process ({cause}); its engine could not close it, so this process cannot use it again: open it from a new process"
    )]
    Abandoned {
        /// The store's storage directory.
        path: PathBuf,
        /// The file system's error.
        cause: String,
    },
    /// A change was stored durably, but updating the derived indexes
    /// afterwards failed: do not repeat the change; the indexes catch up
    /// from the store's change log on the next write or open.
    #[error(
        "the change is stored, but updating the indexes failed: {0}; they catch up on the next write or when the store is next opened"
    )]
    IndexBehind(Box<Error>),
    /// A stored record failed validation.
    #[error("corrupt record {key}: {message}")]
    Corrupt {
        /// Which record.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// The full-text index (tantivy) failed; its error is the source.
    #[error("full-text index: {source}")]
    FullText {
        /// tantivy's error, boxed so tantivy's types stay out of the API.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Embedding text failed; nothing that needed the vectors was written.
    #[error(transparent)]
    Embedding(#[from] EmbedError),
    /// A chat model call failed (after its retries); documents already
    /// written stay whole.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// A step that needs a chat model was asked for without one.
    #[error(
        "{step} needs a chat model: give its server (--llm-url and --llm-model, or OpenOptions::chat)"
    )]
    NoChatModel {
        /// The step asked for, as the user named it.
        step: &'static str,
    },
    /// The store was built with a different embedder than the one given.
    #[error(
        "this store's vectors were made by embedder {stored}, not {given}; open it with the same embedder (or omit it to use the recorded one)"
    )]
    EmbedderMismatch {
        /// The identity recorded in the store.
        stored: String,
        /// The identity of the embedder given.
        given: String,
    },
    /// The vector index failed.
    #[error("vector index: {0}")]
    Vectors(String),
    /// The GPU failed while running a kernel (finding none is not an
    /// error: the CPU serves instead).
    #[error("GPU: {0}")]
    Gpu(String),
    /// Caller-supplied attention or DAG input is malformed.
    #[error("{what}: {message}")]
    DagInput {
        /// The input at fault (a file, or the argument).
        what: String,
        /// What is wrong with it, and where.
        message: String,
    },
    /// A session id is not acceptable.
    #[error("invalid session id {id:?}: {reason}")]
    InvalidSession {
        /// The rejected id.
        id: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// No session has this id.
    #[error("no session with id {0:?}")]
    NoSuchSession(String),
    /// A session has no turn with this number.
    #[error("session {session:?} has no turn {turn} (it has turns 0..{count})")]
    NoSuchTurn {
        /// The session id.
        session: String,
        /// The requested turn number.
        turn: u32,
        /// How many turns the session has.
        count: u32,
    },
    /// A session has no topic with this id.
    #[error("session {session:?} has no topic {topic} (it has topics 0..{count})")]
    NoSuchTopic {
        /// The session id.
        session: String,
        /// The requested topic id.
        topic: u32,
        /// How many topics the session has.
        count: u32,
    },
    /// A turn's text is empty or only whitespace.
    #[error("session {session:?}: a turn needs text; this one is empty")]
    EmptyTurn {
        /// The session id.
        session: String,
    },
    /// A session holds as many turns as its turn ids can number.
    #[error("session {session:?} already has {limit} turns, the most a session can hold")]
    SessionFull {
        /// The session id.
        session: String,
        /// The largest number of turns.
        limit: u32,
    },
    /// The document is a session's turn, which only its session may change.
    #[error(
        "document {doc:?} is turn {turn} of session {session:?}; turns are removed with their session (remove_session / `edudb session rm`) or forgotten one by one (forget_turn / `edudb session forget SESSION TURN`)"
    )]
    TurnDocument {
        /// The turn document's id.
        doc: String,
        /// Its session.
        session: String,
        /// Its turn number.
        turn: String,
    },
    /// An ingest of several documents failed part-way: those in `stored`
    /// were written before the failure, each whole, and stay; those in
    /// `not_stored` were not written (documents refused for their content
    /// are in neither: the ingest's report lists them). Ingesting
    /// `not_stored` again resumes it. Classed as its cause.
    #[error(
        "{cause}; of this ingest's documents, {} were stored before that, each whole ({}), and {} were not ({}): ingest those again to finish",
        stored.len(), listed(stored), not_stored.len(), listed(not_stored)
    )]
    PartlyIngested {
        /// What stopped the ingest.
        cause: Box<Error>,
        /// The ids of the documents written before it.
        stored: Vec<String>,
        /// The ids of the documents not written.
        not_stored: Vec<String>,
    },
    /// This process was forked from one that had opened a store, and
    /// edudb's background threads do not survive a fork.
    #[error(
        "this process was forked from process {parent} after it had opened an edudb store, and edudb's threads do not survive fork(): open stores in processes started afresh (Python's multiprocessing: the 'spawn' or 'forkserver' start method, e.g. multiprocessing.get_context('spawn')), or open the store only after forking, or go through a server (`edudb serve`, edudb.connect)"
    )]
    Forked {
        /// The process that had opened a store.
        parent: u32,
    },
    /// Other I/O on the store directory failed.
    #[error("I/O on {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The first few of `ids`, and how many more there are.
fn listed(ids: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut listed = ids
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        listed.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    listed
}

impl Error {
    /// The error itself, or what stopped an ingest part-way
    /// ([`Error::PartlyIngested`]): what the classes follow.
    fn cause(&self) -> &Error {
        match self {
            Error::PartlyIngested { cause, .. } => cause.cause(),
            other => other,
        }
    }

    /// Whether this is damage to stored records (an unreadable record, or
    /// records that disagree), which salvage can skip past, rather than a
    /// failure to read or write at all.
    pub fn is_damage(&self) -> bool {
        matches!(
            self.cause(),
            Error::Corrupt { .. } | Error::Invariant { .. } | Error::Served { damage: true, .. }
        )
    }

    /// True when another process holds the store ([`Error::Locked`]): the
    /// same call may succeed later (exit code 3 in the CLI).
    pub fn is_busy(&self) -> bool {
        match self.cause() {
            Error::Served { class, .. } => class == "busy",
            other => matches!(other, Error::Locked { .. }),
        }
    }

    /// True when the error is caused by the caller's input (exit code 1 in
    /// the CLI); false for internal failures (exit code 2) and a busy store
    /// ([`Error::is_busy`]).
    pub fn is_user_error(&self) -> bool {
        let this = self.cause();
        if let Error::Served { class, .. } = this {
            return class == "user";
        }
        // Listed, not excluded: a new variant is internal until added here.
        matches!(
            this,
            Error::InvalidUtf8 { .. }
                | Error::Binary { .. }
                | Error::Container { .. }
                | Error::UnreadExtension { .. }
                | Error::Pdf { .. }
                | Error::EmptyDocument { .. }
                | Error::TooLarge { .. }
                | Error::InvalidId { .. }
                | Error::InvalidMetadata { .. }
                | Error::BadPrepared { .. }
                | Error::BadShardSet { .. }
                | Error::UnknownFormat(_)
                | Error::NoSuchDocument(_)
                | Error::EduRange { .. }
                | Error::BadSearch { .. }
                | Error::Input { .. }
                | Error::Dataset { .. }
                | Error::Usage(_)
                | Error::NoStore(_)
                | Error::FormatVersion { .. }
                | Error::NotAStore(_)
                | Error::Query(_)
                | Error::Cancelled
                | Error::EmbedderMismatch { .. }
                | Error::DagInput { .. }
                | Error::InvalidSession { .. }
                | Error::NoSuchSession(_)
                | Error::NoSuchTurn { .. }
                | Error::NoSuchTopic { .. }
                | Error::EmptyTurn { .. }
                | Error::SessionFull { .. }
                | Error::TurnDocument { .. }
                | Error::NoChatModel { .. }
                | Error::Forked { .. }
                | Error::Chat(ChatError::Config(_))
        )
    }
}

/// Makes an I/O error at `path` an [`Error::Io`] naming it: for
/// `map_err(io_error(path))`.
pub fn io_error(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// Runs `work` and returns what it returned, or, if it panicked, the
/// panic's payload (its message through [`panic_message`]), which the
/// caller turns into an error: for work in code edudb does not own that
/// may panic on bad input or damage. The panic's message is not printed
/// (the library never prints); panics anywhere else print as before, and
/// a panic hook set before the first call is kept and called for them.
pub(crate) fn catch_quietly<T>(work: impl FnOnce() -> T) -> std::thread::Result<T> {
    use std::cell::Cell;
    thread_local!(static QUIET: Cell<bool> = const { Cell::new(false) });
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let printing = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                printing(info)
            }
        }));
    });
    let outer = QUIET.with(|quiet| quiet.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    QUIET.with(|quiet| quiet.set(outer));
    result
}

/// The message a caught panic carried (`panic!` with a literal or a
/// formatted string), or `"no message"`.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("no message")
}

/// The message of [`Error::EduRange`], in the inclusive `A..B` notation the
/// CLI and the query language use.
fn edu_range_message(doc: &str, first: u32, last: u32, count: u32) -> String {
    if first > last {
        format!(
            "EDU range {first}..{last} runs backwards; write the lower end first (A..B includes both ends)"
        )
    } else if count == 0 {
        format!("EDU range {first}..{last} is outside document {doc:?}, which has no EDUs")
    } else {
        format!(
            "EDU range {first}..{last} is outside document {doc:?}, whose EDUs are 0..{} (both ends included)",
            count - 1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn a_quiet_catch_returns_the_value_or_the_panic() {
        assert_eq!(super::catch_quietly(|| 7).unwrap(), 7);
        let panic = super::catch_quietly(|| panic!("inner {}", 1)).unwrap_err();
        assert_eq!(panic_message(&*panic), "inner 1");
        let outer = super::catch_quietly(|| {
            let _ = super::catch_quietly(|| panic!("a"));
            panic!("b")
        })
        .unwrap_err();
        assert_eq!(panic_message(&*outer), "b");
    }

    #[test]
    fn a_panic_message_is_read_from_a_literal_or_a_formatted_payload() {
        let literal = std::panic::catch_unwind(|| panic!("mid > len")).unwrap_err();
        let formatted = std::panic::catch_unwind(|| panic!("{} > {}", "mid", "len")).unwrap_err();
        let other = std::panic::catch_unwind(|| std::panic::panic_any(7_u8)).unwrap_err();
        assert_eq!(panic_message(&*literal), "mid > len");
        assert_eq!(panic_message(&*formatted), "mid > len");
        assert_eq!(panic_message(&*other), "no message");
    }
}

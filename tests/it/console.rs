//! End-to-end tests of `edudb console`: statements typed into a
//! pseudo-terminal and the screen read back, and the same console reading
//! a pipe.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rexpect::reader::Options;
use rexpect::session::{PtySession, spawn_with_options};

use crate::support::{edudb, edudb_with_stdin, stderr, text};

/// Seconds any one expected output may take to appear.
const TIMEOUT_MS: u64 = 30_000;

/// A store holding two small Markdown documents, `alpha` and `beta`.
fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("alpha.md"),
        "# Alpha\n\nThe borrow checker rejects aliasing mutation. It keeps references valid.\n\n\
         ## Lifetimes\n\nLifetimes name the regions where a reference is valid.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("beta.md"),
        "# Beta\n\nGardens need water and light. Tomatoes grow in summer.\n",
    )
    .unwrap();
    let db = dir.path().join("store");
    let out = edudb(&db, &["ingest", "-q", docs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    (dir, db)
}

/// Starts the console on a pseudo-terminal.
fn console(db: &Path, history: &Path, no_color: bool) -> PtySession {
    let mut command = Command::new(env!("CARGO_BIN_EXE_edudb"));
    command
        .args(["--db", db.to_str().unwrap(), "console"])
        .env("EDUDB_HISTORY", history)
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE");
    if no_color {
        command.env("NO_COLOR", "1");
    }
    let options = Options::new().timeout_ms(Some(TIMEOUT_MS));
    let mut session = spawn_with_options(command, options).unwrap();
    session.exp_string("Type .help for help.").unwrap();
    session.exp_string("edudb> ").unwrap();
    session
}

/// Types `line` and Enter, then returns the screen up to the next prompt,
/// escape sequences included.
fn raw_line(session: &mut PtySession, line: &str) -> String {
    session.send_line(line).unwrap();
    // A fresh prompt follows a new line; redraws of the edited line do not.
    let (screen, _) = session.exp_regex("\n[^\n]*edudb> ").unwrap();
    utf8(&screen)
}

/// Types `line` and Enter, then returns the text on the screen up to the
/// next prompt, without escape sequences.
fn type_line(session: &mut PtySession, line: &str) -> String {
    let screen = raw_line(session, line);
    regex::Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]")
        .unwrap()
        .replace_all(&screen, "")
        .into_owned()
}

/// The screen as UTF-8: rexpect hands back each byte as one `char`.
fn utf8(screen: &str) -> String {
    let bytes: Vec<u8> = screen.chars().map(|c| c as u32 as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// True when `screen` holds an SGR (colour or weight) escape sequence.
fn has_colour(screen: &str) -> bool {
    regex::Regex::new(r"\x1b\[[0-9;]*m")
        .unwrap()
        .is_match(screen)
}

#[test]
fn a_person_types_statements_and_commands_and_reads_results() {
    let (dir, db) = store();
    let history = dir.path().join("history");
    let mut session = console(&db, &history, false);

    // A statement over two lines runs once it ends with `;`.
    session.send_line("SELECT FROM *").unwrap();
    session.exp_string("...> ").unwrap();
    let screen = type_line(
        &mut session,
        "  SEED BM25('borrow checker') BUDGET 40 TOKENS;",
    );
    assert!(screen.contains("── alpha ["), "{screen}");
    assert!(screen.contains("bytes "), "coordinates shown: {screen}");
    assert!(screen.contains("borrow checker rejects"), "{screen}");
    assert!(screen.contains("of a 40-token budget"), "{screen}");

    // A quote left open says so in the prompt until it is closed.
    session
        .send_line("SELECT FROM * SEED BM25('borrow")
        .unwrap();
    session.exp_string("'...> ").unwrap();
    let screen = type_line(&mut session, "checker') BUDGET 40 TOKENS;");
    assert!(screen.contains("of a 40-token budget"), "{screen}");

    // Tab completes a keyword, then a document id inside doc('…').
    session.send("SHOW TRE\t").unwrap();
    session.flush().unwrap();
    session.exp_string("SHOW TREE").unwrap();
    // The id is completed, not closed: the person types the quote.
    session.send(" doc('alp\t").unwrap();
    session.flush().unwrap();
    session.exp_string("alpha").unwrap();
    let screen = type_line(&mut session, "') DEPTH 2;");
    assert!(screen.contains("└── "), "box-drawn tree: {screen}");
    assert!(screen.contains("Lifetimes"), "{screen}");

    // Two statements on one line both run, in order.
    let screen = type_line(&mut session, "SHOW EDUS doc('beta') 0..0; SHOW DOCS;");
    let (edus, docs) = (screen.find("[0] ").unwrap(), screen.find("alpha").unwrap());
    assert!(edus < docs, "{screen}");

    // .timing and .format.
    type_line(&mut session, ".timing on");
    let screen = type_line(&mut session, "SHOW STATS;");
    assert!(screen.contains("documents"), "{screen}");
    assert!(screen.contains("Time: "), "{screen}");
    type_line(&mut session, ".timing off");
    type_line(&mut session, ".format json");
    let screen = type_line(&mut session, "SHOW DOCS;");
    assert!(screen.contains("\"id\": \"beta\""), "{screen}");
    assert!(!screen.contains("Time: "), "{screen}");
    type_line(&mut session, ".format text");

    // .read runs a file of statements.
    let script = dir.path().join("script.sql");
    std::fs::write(&script, "-- a script\nSHOW EDUS doc('beta') 0..0;\n").unwrap();
    let screen = type_line(&mut session, &format!(".read {}", script.display()));
    assert!(screen.contains("[0] "), "{screen}");

    // Errors are located and the console carries on.
    let screen = type_line(&mut session, "SELECT FORM *;");
    assert!(screen.contains("line 1, column 8"), "{screen}");
    assert!(screen.contains("did you mean FROM?"), "{screen}");
    let screen = type_line(&mut session, ".help");
    assert!(screen.contains(".read FILE"), "{screen}");

    session.send_line(".quit").unwrap();
    session.exp_eof().unwrap();

    // History persists across sessions; a statement typed over two lines
    // is one entry.
    let saved = std::fs::read_to_string(&history).unwrap();
    assert!(saved.contains("SHOW STATS;"), "{saved}");
    assert!(
        saved.contains("SELECT FROM * SEED BM25('borrow checker') BUDGET 40 TOKENS;"),
        "{saved}"
    );
    let mut session = console(&db, &history, false);
    session.send("\x1b[A").unwrap(); // Up arrow recalls the last line.
    session.flush().unwrap();
    session.exp_string(".quit").unwrap();
    session.send_line("").unwrap();
    session.exp_eof().unwrap();
}

#[test]
fn colour_on_a_terminal_and_off_with_no_color_or_a_pipe() {
    let (dir, db) = store();
    let history = dir.path().join("history");
    let mut coloured = console(&db, &history, false);
    assert!(has_colour(&raw_line(&mut coloured, "SHOW DOCS;")));
    coloured.send_line(".quit").unwrap();
    coloured.exp_eof().unwrap();

    let mut plain = console(&db, &history, true);
    let screen = raw_line(&mut plain, "SHOW DOCS;");
    assert!(screen.contains("beta"), "{screen}");
    assert!(!has_colour(&screen), "{screen:?}");
    plain.send_line(".quit").unwrap();
    plain.exp_eof().unwrap();

    let mut piped = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .args(["--db", db.to_str().unwrap(), "console"])
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    piped
        .stdin
        .take()
        .unwrap()
        .write_all(b"SHOW TREE doc('alpha');\nSHOW DOCS")
        .unwrap();
    let out = piped.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("└── "), "{stdout}");
    assert!(
        stdout.contains("beta"),
        "a final statement without ';' runs"
    );
    assert!(
        !stdout.contains("edudb> "),
        "no prompts on a pipe: {stdout}"
    );
    assert!(!has_colour(&stdout), "{stdout:?}");
}

#[test]
fn a_piped_script_with_an_error_exits_1() {
    let (_dir, db) = store();
    let out = edudb_with_stdin(&db, &["console"], b"SHOW TREE doc('gamma');\nSHOW DOCS;\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("gamma"), "{}", stderr(&out));
    assert!(text(&out).contains("alpha"), "later statements still run");
}

#[test]
fn ctrl_c_cancels_the_running_statement_not_the_console() {
    // A store embedded by a server that answers ingest and then stops
    // answering: the next vector search waits on it.
    let server = crate::scripted::ScriptedServer::start(|_, request| {
        let asks = request.body["input"].to_string();
        if asks.contains("unanswered") {
            crate::scripted::Reply::Silence
        } else {
            crate::embedding_http::embeddings_reply(request)
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let file = dir.path().join("notes.md");
    std::fs::write(&file, "# Notes\n\nHerons wade in the shallows at dawn.\n").unwrap();
    let out = edudb(
        &db,
        &[
            "ingest",
            "-q",
            "--embedder",
            "openai",
            "--embed-url",
            &server.base_url,
            "--embed-model",
            "fake-model",
            file.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let history = dir.path().join("history");
    let mut session = console(&db, &history, true);
    session
        .send_line("SELECT FROM * SEED NEAR('an unanswered question') LIMIT 3;")
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    // The statement ends by being cancelled (it would otherwise wait out
    // the embedder's timeouts); the session's timeout bounds only a hang.
    session.send_control('c').unwrap();
    session.exp_string("statement cancelled").unwrap();
    session.exp_string("edudb> ").unwrap();
    // The console goes on.
    let screen = type_line(&mut session, "SHOW STATS;");
    assert!(screen.contains("documents"), "{screen}");
    session.send_line(".quit").unwrap();
    session.exp_eof().unwrap();
}

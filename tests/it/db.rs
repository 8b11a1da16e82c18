//! Library-level behaviour of [`Db`]: ingest, replace, remove, search,
//! catch-up of the derived index, locking, cancellation and bad input.

use edudb::ingest::sources::{Origin, Source};
use edudb::{CancelToken, Db, Error, Format, IngestOptions, NoProgress, OpenOptions, Progress};

use crate::support::{ingest_markdown, ingest_rfcs, markdown, rfc_sources, selection, store};

fn source(id: &str, text: &str) -> Source {
    Source {
        id: id.to_owned(),
        origin: Origin::Bytes(text.as_bytes().to_vec()),
    }
}

#[test]
fn ingest_then_browse_with_exact_coordinates() {
    let (_dir, db) = store();
    let text = "# Guide\n\nSled stores the records. Tantivy indexes them.\n\n## Lists\n\n- first item\n- second item\n";
    let meta = ingest_markdown(&db, "guide", text);
    assert_eq!(
        (meta.id.as_str(), meta.title.as_str(), meta.bytes),
        ("guide", "Guide", text.len() as u64)
    );
    let edus = db.edus("guide", None).unwrap();
    for edu in &edus {
        assert_eq!(
            &text[edu.bytes[0] as usize..edu.bytes[1] as usize],
            edu.text
        );
    }
    let texts: Vec<&str> = edus.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "Guide",
            "Sled stores the records.",
            "Tantivy indexes them.",
            "Lists",
            "first item",
            "second item"
        ]
    );
    let tree = db.tree("guide").unwrap();
    let titles: Vec<&str> = tree.nodes.iter().map(|n| n.title.as_str()).collect();
    assert!(titles.contains(&"Lists"), "{titles:?}");
    assert_eq!(db.edus("guide", Some((1, 2))).unwrap().len(), 2);
    assert!(matches!(
        db.edus("guide", Some((2, 6))),
        Err(Error::EduRange { count: 6, .. })
    ));
    assert!(matches!(
        db.edus("guide", Some((3, 2))),
        Err(Error::EduRange { .. })
    ));
    assert!(matches!(
        db.edus("nope", None),
        Err(Error::NoSuchDocument(_))
    ));
    db.check().unwrap();
}

#[test]
fn search_finds_edus_and_section_titles_with_coordinates() {
    let (_dir, db) = store();
    ingest_markdown(
        &db,
        "a",
        "# Borrowing\n\nThe borrow checker rejects aliasing. Lifetimes are inferred.\n",
    );
    ingest_markdown(&db, "b", "# Other\n\nNothing relevant lives here.\n");
    let hits = db.search("lifetimes", 10).unwrap();
    assert_eq!(hits.len(), 1);
    // Any limit is answered (the server passes a client's on).
    assert_eq!(db.search("lifetimes", usize::MAX).unwrap(), hits);
    assert_eq!(
        (hits[0].doc.as_str(), hits[0].node, hits[0].text.as_str()),
        ("a", None, "Lifetimes are inferred.")
    );
    let title_hit = db.search("borrowing", 10).unwrap();
    assert_eq!(title_hit[0].node, Some(1));
    assert_eq!(title_hit[0].edus, edudb::Span::new(0, 2));
    assert!(matches!(
        db.search("AND (", 10),
        Err(Error::BadSearch { .. })
    ));
}

#[test]
fn replace_and_remove_update_every_index() {
    let (_dir, db) = store();
    ingest_markdown(&db, "doc", "Zebras graze on the plain.");
    ingest_markdown(&db, "doc", "Giraffes browse the acacias.");
    assert!(db.search("zebras", 10).unwrap().is_empty());
    assert_eq!(db.search("giraffes", 10).unwrap().len(), 1);
    assert_eq!(db.documents().unwrap().len(), 1);
    db.remove("doc").unwrap();
    assert!(db.search("giraffes", 10).unwrap().is_empty());
    assert!(db.documents().unwrap().is_empty());
    assert!(matches!(db.remove("doc"), Err(Error::NoSuchDocument(_))));
    assert_eq!(db.stats().unwrap().fulltext_entries, 0);
    db.check().unwrap();
}

#[test]
fn data_and_index_survive_reopen_and_a_lost_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::create(dir.path()).unwrap();
        ingest_rfcs(&db, 5);
    }
    let before = {
        let db = Db::open(dir.path()).unwrap();
        db.check().unwrap();
        db.search("compiler", 20).unwrap()
    };
    assert!(!before.is_empty());
    std::fs::remove_dir_all(dir.path().join("fulltext")).unwrap();
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.search("compiler", 20).unwrap(), before);
    db.check().unwrap();
    db.reindex(&NoProgress, &CancelToken::new()).unwrap();
    assert_eq!(db.search("compiler", 20).unwrap(), before);
}

#[test]
fn a_second_open_is_refused_while_locked() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path()).unwrap();
    let err = Db::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(
        err.is_busy() && !err.is_user_error(),
        "busy is its own class"
    );
    drop(db);
    Db::open(dir.path()).unwrap();
}

#[test]
fn an_open_waits_within_its_busy_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let held = Db::create(dir.path()).unwrap();
    let waiting = |ms| OpenOptions {
        busy_timeout: std::time::Duration::from_millis(ms),
        ..Default::default()
    };
    // Still held when the timeout runs out: busy.
    let err = Db::open_with(dir.path(), &waiting(50)).unwrap_err();
    assert!(err.is_busy(), "{err}");
    // Released while the second open waits: it opens.
    let path = dir.path().to_owned();
    let (started, start) = std::sync::mpsc::channel();
    let opener = std::thread::spawn(move || {
        started.send(()).unwrap();
        Db::open_with(&path, &waiting(60_000))
    });
    start.recv().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !opener.is_finished(),
        "the open ended while the store was held"
    );
    drop(held);
    opener.join().unwrap().unwrap();
}

#[test]
fn opening_requires_a_store() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Db::open(dir.path().join("missing")),
        Err(Error::NoStore(_))
    ));
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    assert!(matches!(
        Db::open(dir.path().join("empty")),
        Err(Error::NoStore(_))
    ));
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    assert!(matches!(Db::open(dir.path()), Err(Error::NotAStore(_))));
    assert!(matches!(Db::create(dir.path()), Err(Error::NotAStore(_))));
    assert!(matches!(
        Db::create(dir.path().join("notes.txt")),
        Err(Error::NotAStore(_))
    ));
}

#[test]
fn an_interrupted_creation_opens_as_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("LOCK"), "").unwrap();
    let db = Db::open(&path).unwrap();
    assert!(db.documents().unwrap().is_empty());
    db.check().unwrap();
}

/// Cancels its token once a given number of documents are done.
struct CancelAfter {
    token: CancelToken,
    after: usize,
    done: std::sync::atomic::AtomicUsize,
}

impl Progress for CancelAfter {
    fn advance(&self, _units: u64, _item: &str) {
        if self.done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 >= self.after {
            self.token.cancel();
        }
    }
}

#[test]
fn cancellation_keeps_whole_documents_only() {
    let (_dir, db) = store();
    let sources = rfc_sources(30);
    let cancelled = CancelToken::new();
    cancelled.cancel();
    assert!(matches!(
        db.ingest(&sources, IngestOptions::default(), &NoProgress, &cancelled),
        Err(Error::Cancelled)
    ));
    assert!(db.documents().unwrap().is_empty());

    let token = CancelToken::new();
    let progress = CancelAfter {
        token: token.clone(),
        after: 3,
        done: Default::default(),
    };
    let result = db.ingest(&sources, IngestOptions::default(), &progress, &token);
    assert!(matches!(result, Err(Error::Cancelled)));
    let stored = db.documents().unwrap().len();
    assert!(
        (3..sources.len()).contains(&stored),
        "{stored} documents stored"
    );
    assert_eq!(db.check().unwrap().documents, stored);
}

#[test]
fn bad_inputs_fail_alone_with_clear_errors() {
    let (_dir, db) = store();
    let mut invalid = b"line one\nline two has \xff here".to_vec();
    invalid.extend_from_slice(b" and more");
    let sources = vec![
        Source {
            id: "utf8".into(),
            origin: Origin::Bytes(invalid.clone()),
        },
        Source {
            id: "binary".into(),
            origin: Origin::Bytes(b"\x7fELF\0\0\x01binary".to_vec()),
        },
        source("empty", ""),
        source("blank", " \n\t\n  "),
        source("only-headings", "# \n\n## \n\n###\n"),
        source("good", "This one is fine."),
        Source {
            id: "report".into(),
            // A DOCX file's first bytes: a ZIP container.
            origin: Origin::Bytes(b"PK\x03\x04\x14\x00\x06\x00[Content_Types].xml".to_vec()),
        },
    ];
    let report = db
        .ingest(
            &sources,
            IngestOptions::default(),
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(
        report
            .documents
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>(),
        ["good"]
    );
    let errors: Vec<String> = report
        .failures
        .iter()
        .map(|f| f.error.to_string())
        .collect();
    assert_eq!(errors.len(), 6, "{errors:?}");
    let docx = report
        .failures
        .iter()
        .find(|f| f.source == "report")
        .unwrap();
    assert!(
        matches!(docx.error, Error::Container { .. })
            && docx.error.is_user_error()
            && docx
                .error
                .to_string()
                .contains("convert it to PDF, HTML, Markdown or text"),
        "{}",
        docx.error
    );
    let utf8 = report.failures.iter().find(|f| f.source == "utf8").unwrap();
    assert!(
        matches!(
            utf8.error,
            Error::InvalidUtf8 {
                offset: 22,
                line: 2,
                column: 14,
                ..
            }
        ),
        "{}",
        utf8.error
    );
    assert!(
        report
            .failures
            .iter()
            .any(|f| matches!(f.error, Error::Binary { offset: 4, .. }))
    );
    assert_eq!(
        report
            .failures
            .iter()
            .filter(|f| matches!(f.error, Error::EmptyDocument { .. }))
            .count(),
        3
    );
    assert_eq!(db.documents().unwrap().len(), 1);

    let lossy = IngestOptions {
        format: None,
        lossy: true,
        ..Default::default()
    };
    let meta = db.ingest_bytes("utf8", invalid, lossy.clone()).unwrap();
    assert!(
        db.edus("utf8", None)
            .unwrap()
            .iter()
            .any(|e| e.text.contains('\u{fffd}'))
    );
    assert_eq!(meta.edus, 1);
    // A control character, or an id a URL path cannot carry.
    for id in ["bad\nid", ".", ".."] {
        assert!(
            matches!(
                db.ingest_bytes(id, b"text".to_vec(), lossy.clone()),
                Err(Error::InvalidId { .. })
            ),
            "{id:?}"
        );
    }
    db.check().unwrap();
}

#[test]
fn ten_thousand_nested_lists_are_bounded() {
    let (_dir, db) = store();
    let markdown_lists = format!("{}deep\n", "- ".repeat(10_000));
    let html_lists = format!("{}deep", "<ul><li>x".repeat(10_000));
    for (id, text, format) in [
        ("md", markdown_lists, Format::Markdown),
        ("html", html_lists, Format::Html),
    ] {
        let options = IngestOptions {
            format: Some(format),
            ..Default::default()
        };
        let meta = db.ingest_bytes(id, text.into_bytes(), options).unwrap();
        let tree = db.tree(id).unwrap();
        let depth = tree.nodes.iter().map(|n| n.level).max().unwrap();
        assert!(depth <= 64, "{id}: tree depth {depth}");
        assert_eq!(meta.nodes as usize, tree.nodes.len());
    }
    db.check().unwrap();
}

#[test]
fn a_fifty_megabyte_document_is_ingested_whole() {
    let corpus: String = rfc_sources(40)
        .iter()
        .map(|s| String::from_utf8(s.read().unwrap()).unwrap())
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut text = String::with_capacity(51 << 20);
    while text.len() < 50 << 20 {
        text.push_str(&corpus);
    }
    let (_dir, db) = store();
    let meta = db
        .ingest_bytes("big", text.clone().into_bytes(), markdown())
        .unwrap();
    assert_eq!(meta.bytes as usize, text.len());
    let stored = db.document("big").unwrap();
    assert_eq!(stored.text, text);
    let last = db
        .edus("big", Some((meta.edus - 1, meta.edus - 1)))
        .unwrap();
    assert_eq!(
        &text[last[0].bytes[0] as usize..last[0].bytes[1] as usize],
        last[0].text
    );
    stored.validate().unwrap();
}

#[test]
fn no_edu_is_longer_than_the_limit_so_every_one_fits_a_budget() {
    use edudb::ingest::segment::MAX_EDU_TOKENS;
    // Prose without a sentence mark, a long code listing, a huge table
    // row and a long heading: each would have been one EDU.
    let words: String = (0..40_000).map(|i| format!("entry{} ", i % 500)).collect();
    let code: String = (0..2_000).map(|i| format!("let v{i} = w{i};\n")).collect();
    let row: String = (0..600).map(|i| format!("| c{i} ")).collect::<String>() + "|";
    let separator: String = (0..600).map(|_| "|---").collect::<String>() + "|";
    let heading: String = (0..400).map(|i| format!("title{i} ")).collect();
    let document =
        format!("# {heading}\n\n{words}\n\n```\n{code}```\n\n{row}\n{separator}\n{row}\n");
    let (_dir, db) = store();
    for (id, text, options) in [
        (
            "plain",
            words.clone(),
            IngestOptions {
                format: Some(Format::Text),
                ..Default::default()
            },
        ),
        ("marked", document, markdown()),
    ] {
        let meta = db.ingest_bytes(id, text.into_bytes(), options).unwrap();
        let edus = db.edus(id, None).unwrap();
        assert!(edus.len() > 10, "{id}: {}", edus.len());
        assert!(
            edus.iter().all(|e| e.tokens <= MAX_EDU_TOKENS),
            "{id}: {:?}",
            edus.iter().map(|e| e.tokens).max()
        );
        assert_eq!(meta.edus as usize, edus.len());
        db.document(id).unwrap().validate().unwrap();
    }
    let picked = selection(
        &db,
        "SELECT SPANS FROM doc('plain') SEED BM25('entry17') BUDGET 300 TOKENS",
    );
    assert!(!picked.items.is_empty() && picked.tokens_used <= 300);
}

#[test]
fn a_change_stored_before_the_index_fails_says_so_and_is_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path()).unwrap();
    ingest_markdown(&db, "kept", "# Kept\n\nThe first document stays.\n");
    // Take the full-text directory away under the open index: its next
    // commit cannot write (even as root), after the store has the change.
    let index_dir = dir.path().join("fulltext");
    let moved = dir.path().join("fulltext.moved");
    std::fs::rename(&index_dir, &moved).unwrap();
    std::fs::write(&index_dir, b"not a directory").unwrap();
    let err = db
        .append_turn(
            "s",
            edudb::Role::User,
            "Where do the otters sleep?",
            edudb::Placement::Auto,
        )
        .unwrap_err();
    assert!(matches!(err, Error::IndexBehind(_)), "{err}");
    assert!(!err.is_user_error());
    assert!(err.to_string().contains("the change is stored"), "{err}");
    std::fs::remove_file(&index_dir).unwrap();
    std::fs::rename(&moved, &index_dir).unwrap();
    let found = |db: &Db, words: &str| {
        let statement = format!("SELECT FROM session('s') SEED BM25('{words}') LIMIT 1");
        selection(db, &statement).items.len()
    };
    // The next write in the same process commits the index past the
    // missed change only after replaying it: both turns are searchable.
    db.append_turn(
        "s",
        edudb::Role::Assistant,
        "Otters sleep in dens along the river bank.",
        edudb::Placement::Continue,
    )
    .unwrap();
    assert_eq!(db.dialogue("s").unwrap().turns.len(), 2);
    assert_eq!(found(&db, "where otters sleep"), 1);
    db.check().unwrap();
    let both = selection(&db, "SELECT FROM session('s') SEED BM25('otters') LIMIT 5");
    let turns: std::collections::HashSet<&str> =
        both.items.iter().map(|i| i.doc.as_str()).collect();
    assert_eq!(turns.len(), 2, "{:?}", both.items);
    // And after reopening, nothing is replayed twice or lost.
    drop(db);
    let db = Db::open(dir.path()).unwrap();
    db.check().unwrap();
    assert_eq!(db.dialogue("s").unwrap().turns.len(), 2);
    assert_eq!(found(&db, "otters"), 1);
}

#[test]
fn a_process_forked_after_a_store_was_opened_is_refused_rather_than_left_to_hang() {
    let dir = tempfile::tempdir().unwrap();
    drop(Db::create(dir.path()).unwrap());
    // SAFETY: the child only opens the store, which refuses before it
    // starts any thread or takes any lock, and ends with `_exit`.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        let refused = matches!(
            Db::open(dir.path()),
            Err(Error::Forked { parent }) if parent == unsafe { libc::getppid() } as u32
        );
        unsafe { libc::_exit(if refused { 0 } else { 1 }) };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut status = 0;
    while unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) } == 0 {
        if std::time::Instant::now() > deadline {
            unsafe { libc::kill(child, libc::SIGKILL) };
            panic!("the forked child hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child was not refused with Error::Forked (status {status})"
    );
    // This process opens it as ever.
    Db::open(dir.path()).unwrap();
}

#[test]
fn a_child_forked_while_a_store_is_open_does_not_keep_it_locked() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path()).unwrap();
    // A write makes the full-text index's writer, whose lock is held too.
    ingest_markdown(&db, "a", "Moss grows in shade.");
    // SAFETY: the child only sleeps (async-signal-safe) and ends with
    // `_exit`; it is killed below.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        unsafe {
            libc::sleep(60);
            libc::_exit(0)
        };
    }
    drop(db);
    // While the child lives, its copies of the store's locks are gone: the
    // store opens, and a write makes the index writer again.
    let written = Db::open(dir.path()).and_then(|reopened| {
        reopened.ingest_bytes("b", b"Ferns grow in shade.".to_vec(), markdown())
    });
    unsafe {
        libc::kill(child, libc::SIGKILL);
        libc::waitpid(child, std::ptr::null_mut(), 0);
    }
    written.expect("the parent reopens and writes the store its child was forked with");
}

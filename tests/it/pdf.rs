//! PDFs in: documents generated here with pdf_oxide's writer (headings,
//! running headers and folios, a table, an outline, encryption) and the
//! real SEC filings of `../shared/data/financebench_dev`, ingested through
//! the library, the CLI and the server; pages and boxes out.

use edudb::ingest::layout::pdf::highlight::{Highlight, highlighted};
use edudb::model::pages::{BoxPt, PageBox};
use edudb::{Error, Format, IngestOptions, Params, Rows};
use pdf_oxide::PdfDocument;
use pdf_oxide::writer::DocumentBuilder;

use crate::support;

/// Body sentences of the generated report, one line each.
const BODY: [&str; 6] = [
    "The company makes adhesives, films and abrasives for many industries.",
    "Its sales grew in every region during the year under review here.",
    "Capital spending rose to build new plants in three countries abroad.",
    "The board approved a larger dividend for the coming fiscal period.",
    "Research spending stayed near six percent of sales over the years.",
    "Cash from operations covered the dividend and the capital spending.",
];

/// A two-page annual report: a running header and a folio on each page,
/// a large heading and body text on both, and a table of figures on the
/// second page; with `outline`, bookmarks naming the two headings.
fn report(outline: bool) -> Vec<u8> {
    let mut builder = DocumentBuilder::new();
    if outline {
        builder = builder
            .bookmark("Overview of the Year", 0)
            .bookmark("Cash Flows", 1);
    }
    for page in 0..2 {
        let mut fluent = builder
            .letter_page()
            .font("Helvetica", 9.0)
            .at(72.0, 750.0)
            .text("ACME Corporation Annual Report 2018")
            .font("Helvetica-Bold", 16.0)
            .at(72.0, 700.0)
            .text(if page == 0 {
                "Overview of the Year"
            } else {
                "Cash Flows"
            })
            .font("Helvetica", 10.0)
            .at(72.0, 670.0);
        for sentence in BODY {
            fluent = fluent.text(sentence);
        }
        if page == 1 {
            let rows = [
                ("(Millions)", "2018", "2017"),
                ("Purchases of plant", "(1,577)", "(1,373)"),
                ("Proceeds from sales", "262", "49"),
            ];
            for (i, (label, a, b)) in rows.iter().enumerate() {
                let y = 560.0 - 14.0 * i as f32;
                fluent = fluent
                    .at(72.0, y)
                    .text(label)
                    .at(380.0, y)
                    .text(a)
                    .at(460.0, y)
                    .text(b);
            }
        }
        fluent
            .font("Helvetica", 9.0)
            .at(300.0, 40.0)
            .text(&(page + 1).to_string())
            .done();
    }
    builder.build().unwrap()
}

fn ingest(db: &edudb::Db, id: &str, bytes: Vec<u8>) -> edudb::Result<edudb::DocMeta> {
    db.ingest_bytes(id, bytes, IngestOptions::default())
}

#[test]
fn a_pdf_is_stored_as_its_text_with_pages_headings_tables_and_no_furniture_in_edus() {
    let (_dir, db) = support::store();
    let meta = ingest(&db, "report", report(false)).unwrap();
    assert_eq!(meta.format, Format::Pdf);
    let edus = db.edus("report", None).unwrap();
    let texts: Vec<&str> = edus.iter().map(|e| e.text.as_str()).collect();
    // Running headers and folios are not EDUs...
    assert!(
        texts.iter().all(|t| !t.contains("ACME Corporation")),
        "{texts:?}"
    );
    assert!(
        texts.iter().all(|t| t.trim() != "1" && t.trim() != "2"),
        "{texts:?}"
    );
    // ...but stay in the stored text, where every EDU's bytes point.
    let stored = db.document("report").unwrap();
    let text = &stored.text;
    assert_eq!(
        text.matches("ACME Corporation Annual Report 2018").count(),
        2
    );
    for edu in &edus {
        assert_eq!(
            &text[edu.bytes[0] as usize..edu.bytes[1] as usize],
            edu.text
        );
    }
    // Every EDU knows its page; the body of page 2 is on page 2.
    let research: Vec<[u32; 2]> = (edus.iter())
        .filter(|e| e.text.starts_with("Research spending"))
        .map(|e| e.pages.unwrap())
        .collect();
    assert_eq!(research, [[1, 1], [2, 2]]);
    // Headings become sections titled with their own text.
    let tree = db.tree("report").unwrap();
    let sections: Vec<&str> = (tree.nodes.iter())
        .filter(|n| n.kind == edudb::NodeKind::Section)
        .map(|n| n.title.as_str())
        .collect();
    assert_eq!(sections, ["Overview of the Year", "Cash Flows"]);
    // Its largest type is a heading style of both pages: no cover title.
    assert!(!["Overview of the Year", "Cash Flows"].contains(&meta.title.as_str()));
    // The table: one node, one EDU per row, cells in column order.
    let table = (tree.nodes.iter())
        .find(|n| n.kind == edudb::NodeKind::Table)
        .expect("a table node");
    let rows: Vec<&str> = texts[table.span.first as usize..=table.span.last as usize].to_vec();
    assert_eq!(
        rows,
        [
            "(Millions) | 2018 | 2017",
            "Purchases of plant | (1,577) | (1,373)",
            "Proceeds from sales | 262 | 49"
        ]
    );
    // The page layout checks out against the text.
    let pages = db.pages("report").unwrap().expect("a PDF has pages");
    assert_eq!(pages.pages.len(), 2);
    assert_eq!(pages.validate(text.len() as u32), Ok(()));
}

#[test]
fn a_pdf_is_titled_by_what_its_cover_sets_largest() {
    let mut builder = DocumentBuilder::new();
    for page in 0..2 {
        let mut fluent = builder.letter_page();
        if page == 0 {
            fluent = fluent
                .font("Helvetica-Bold", 22.0)
                .at(72.0, 700.0)
                .text("Structural Retrieval")
                .at(72.0, 672.0)
                .text("over Long Filings");
        } else {
            fluent = fluent
                .font("Helvetica-Bold", 14.0)
                .at(72.0, 700.0)
                .text("Methods");
        }
        fluent = fluent.font("Helvetica", 10.0).at(72.0, 640.0);
        for sentence in BODY {
            fluent = fluent.text(sentence);
        }
        fluent.done();
    }
    let (_dir, db) = support::store();
    let meta = ingest(&db, "paper", builder.build().unwrap()).unwrap();
    assert_eq!(meta.title, "Structural Retrieval over Long Filings");
    let tree = db.tree("paper").unwrap();
    assert_eq!(tree.nodes[0].title, meta.title);
    // As written in the stored text, line by line.
    let stored = db.document("paper").unwrap();
    let text = &stored.text;
    assert!(text.contains("Structural Retrieval") && text.contains("over Long Filings"));
}

#[test]
fn queries_carry_pages_and_filter_on_them() {
    let (_dir, db) = support::store();
    ingest(&db, "report", report(false)).unwrap();
    let query = |statement: &str| match db.query(statement, &Params::new()).unwrap().rows {
        Rows::Selection(selection) => selection.items,
        other => panic!("{other:?}"),
    };
    let all = query("SELECT SPANS FROM * SEED BM25('research spending') BUDGET 200 TOKENS");
    assert!(!all.is_empty());
    assert!(all.iter().all(|item| item.pages.is_some()));
    let second = query(
        "SELECT SPANS FROM * WHERE page = 2 SEED BM25('research spending') BUDGET 200 TOKENS",
    );
    assert!(!second.is_empty());
    assert!(
        second.iter().all(|i| i.pages.unwrap()[1] >= 2),
        "{second:?}"
    );
    let between = query(
        "SELECT SPANS FROM * WHERE page BETWEEN 1 AND 1 AND kind = 'edu' \
         SEED BM25('spending') BUDGET 100 TOKENS",
    );
    assert!(!between.is_empty());
    assert!(
        between.iter().all(|i| i.pages == Some([1, 1])),
        "{between:?}"
    );
    assert!(
        query("SELECT SPANS FROM * WHERE page > 2 SEED BM25('spending') BUDGET 100 TOKENS")
            .is_empty(),
        "no EDU lies past the last page"
    );
    // A document without pages never meets a page condition.
    db.ingest_bytes(
        "notes",
        b"Plain notes on research.\n".to_vec(),
        IngestOptions::default(),
    )
    .unwrap();
    let statement =
        "SELECT SPANS FROM doc('notes') WHERE page >= 1 SEED BM25('research') BUDGET 50 TOKENS";
    assert!(query(statement).is_empty());
    let statement = "SELECT SPANS FROM doc('notes') SEED BM25('research') BUDGET 50 TOKENS";
    assert!(query(statement).iter().all(|i| i.pages.is_none()));
    // Boxes on request: one per line of the span, on the item's pages and
    // within the page; none asked, none given; none to give for notes.
    let plain = query("SELECT SPANS FROM * SEED BM25('research spending') BUDGET 200 TOKENS");
    assert!(plain.iter().all(|item| item.boxes.is_none()));
    let boxed =
        query("SELECT SPANS FROM * SEED BM25('research spending') BUDGET 200 TOKENS WITH BOXES");
    let spans = |items: &[edudb::Item]| {
        items
            .iter()
            .map(|i| (i.doc.clone(), i.edus))
            .collect::<Vec<_>>()
    };
    assert_eq!(spans(&boxed), spans(&plain), "boxes change nothing picked");
    let layout = db.pages("report").unwrap().unwrap();
    for item in boxed.iter().filter(|i| i.doc == "report") {
        let boxes = item.boxes.as_ref().unwrap();
        let [first, last] = item.pages.unwrap();
        let lines = layout.line_boxes(item.bytes[0]..item.bytes[1]);
        assert_eq!(boxes.len(), lines.len(), "{item:?}");
        assert!(!boxes.is_empty());
        for (b, line) in boxes.iter().zip(&lines) {
            assert_eq!(b.page, line.page + 1);
            assert!((first..=last).contains(&b.page));
            let page = &layout.pages[line.page as usize];
            assert!(b.x0 < b.x1 && b.y0 < b.y1, "{b:?}");
            assert!(b.x1 <= page.width && b.y1 <= page.height, "{b:?}");
        }
    }
    let statement =
        "SELECT SPANS FROM doc('notes') SEED BM25('research') BUDGET 50 TOKENS WITH BOXES";
    let notes = query(statement);
    assert!(!notes.is_empty());
    assert!(notes.iter().all(|i| i.boxes.as_deref() == Some(&[][..])));
    // The clause is checked like any other.
    let twice = db
        .query(
            "SELECT SPANS FROM * SEED BM25('x') WITH BOXES WITH BOXES",
            &Params::new(),
        )
        .unwrap_err();
    assert!(twice.to_string().contains("WITH is given twice"), "{twice}");
    let bare = db
        .query("SELECT SPANS FROM * WITH PAGES", &Params::new())
        .unwrap_err();
    assert!(
        bare.to_string()
            .contains("line 1, column 26: expected BOXES"),
        "{bare}"
    );
}

#[test]
fn an_outline_gives_the_sections() {
    let (_dir, db) = support::store();
    ingest(&db, "report", report(true)).unwrap();
    let tree = db.tree("report").unwrap();
    let sections: Vec<(&str, u16)> = (tree.nodes.iter())
        .filter(|n| n.kind == edudb::NodeKind::Section)
        .map(|n| (n.title.as_str(), n.level))
        .collect();
    assert_eq!(sections, [("Overview of the Year", 1), ("Cash Flows", 1)]);
}

/// A 10-Q whose contents page lists its items: the items it names are
/// sections where they start (even those set like body text or too long
/// for a heading), under their part; the contents' own `PART I` is none.
#[test]
fn a_filings_table_of_contents_names_its_sections() {
    let (_dir, db) = support::store();
    let path = support::shared_data().join("financebench_dev/pdfs/BESTBUY_2024Q2_10Q.pdf");
    ingest(&db, "q", std::fs::read(path).unwrap()).unwrap();
    let tree = db.tree("q").unwrap();
    let sections: Vec<&edudb::Node> = (tree.nodes.iter())
        .filter(|n| n.kind == edudb::NodeKind::Section)
        .collect();
    let starting = |prefix: &str| -> Vec<&edudb::Node> {
        let words = |title: &str| title.split_whitespace().collect::<Vec<_>>().join(" ");
        (sections.iter().copied())
            .filter(|n| words(&n.title).starts_with(prefix))
            .collect()
    };
    assert_eq!(starting("PART I ").len(), 1, "PART I once, where it starts");
    assert_eq!(
        starting("TABLE OF CONTENTS").len(),
        1,
        "the contents, a section"
    );
    let part_two = starting("PART II")[0];
    for item in [
        "Item 1. Legal Proceedings",
        "Item 2. Unregistered Sales of Equity Securities",
        "Item 5. Other Information",
        "Item 6. Exhibits",
    ] {
        let found = starting(item);
        assert_eq!(found.len(), 1, "{item}");
        assert_eq!(found[0].parent, Some(part_two.id), "{item} is in part II");
    }
}

#[test]
fn bad_pdfs_are_clear_errors_and_write_nothing() {
    let (_dir, db) = support::store();
    let good = report(false);
    // Truncated, corrupt in the middle, not a PDF at all but named one.
    let truncated = good[..good.len() / 3].to_vec();
    let mut corrupt = good.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle..middle + 200].fill(b'#');
    let cases = [
        ("truncated", truncated),
        ("corrupt", corrupt),
        ("empty", b"%PDF-1.7\n%%EOF\n".to_vec()),
    ];
    for (id, bytes) in cases {
        match ingest(&db, id, bytes) {
            Err(Error::Pdf { message, .. }) => assert!(!message.is_empty()),
            // A damaged file pdf_oxide repairs may still read; then it is whole.
            Ok(meta) => assert_eq!(meta.format, Format::Pdf, "{id}"),
            Err(other) => panic!("{id}: {other}"),
        }
    }
    // Encrypted with a password: refused, saying so.
    let mut builder = DocumentBuilder::new();
    builder
        .letter_page()
        .at(72.0, 700.0)
        .text("A secret.")
        .done();
    let encrypted = builder.to_bytes_encrypted("user-pw", "owner-pw").unwrap();
    let err = ingest(&db, "secret", encrypted).unwrap_err();
    assert!(
        matches!(&err, Error::Pdf { message, .. } if message.contains("password")),
        "{err}"
    );
    // No text layer (a scan): named, with the pages.
    let mut builder = DocumentBuilder::new();
    builder.letter_page().done();
    builder.letter_page().done();
    let err = ingest(&db, "scan", builder.build().unwrap()).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("no extractable text on pages 1–2"),
        "{message}"
    );
    assert!(message.contains("OCR is not supported"), "{message}");
    assert!(db.document("secret").is_err() && db.document("scan").is_err());
}

#[test]
fn a_highlighted_copy_holds_one_annotation_per_box_read_back() {
    let pdf = report(false);
    let boxes = vec![
        PageBox {
            page: 0,
            rect: BoxPt {
                x0: 72.0,
                y0: 660.0,
                x1: 400.0,
                y1: 672.0,
            },
        },
        PageBox {
            page: 1,
            rect: BoxPt {
                x0: 72.0,
                y0: 556.0,
                x1: 500.0,
                y1: 568.0,
            },
        },
    ];
    let copy = highlighted(
        "report.pdf",
        pdf,
        &[Highlight {
            boxes,
            note: "report EDUs 3-4".into(),
        }],
    )
    .unwrap();
    let read = PdfDocument::from_bytes(copy).unwrap();
    for page in 0..2 {
        let annotations = read.get_annotations(page).unwrap();
        let highlights: Vec<_> = (annotations.iter())
            .filter(|a| a.subtype.as_deref() == Some("Highlight"))
            .collect();
        assert_eq!(highlights.len(), 1, "page {page}: {annotations:?}");
        assert_eq!(highlights[0].contents.as_deref(), Some("report EDUs 3-4"));
    }
}

/// `edudb highlight` on a shard set: the document is read from its store,
/// the question answered over the set, and the copy carries a highlight
/// per picked line, on the pages the picks name.
#[test]
fn the_cli_highlights_a_shard_sets_document() {
    let dir = tempfile::tempdir().unwrap();
    let (set, pdf, copy) = (
        dir.path().join("set"),
        dir.path().join("report.pdf"),
        dir.path().join("copy.pdf"),
    );
    std::fs::write(&pdf, report(false)).unwrap();
    let made = support::edudb(&set, &["init", "--shards", "2"]);
    assert!(made.status.success(), "{}", support::stderr(&made));
    let out = support::edudb(&set, &["ingest", "-q", pdf.to_str().unwrap()]);
    assert!(out.status.success(), "{}", support::stderr(&out));
    let out = support::edudb(
        &set,
        &[
            "--json",
            "highlight",
            "report",
            "capital spending on new plants",
            "--pdf",
            pdf.to_str().unwrap(),
            "-o",
            copy.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", support::stderr(&out));
    let written: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(written["spans"].as_u64().unwrap() >= 1, "{written}");
    let read = PdfDocument::from_bytes(std::fs::read(&copy).unwrap()).unwrap();
    for page in written["pages"].as_array().unwrap() {
        let page = page.as_u64().unwrap() as usize - 1;
        let annotations = read.get_annotations(page).unwrap();
        assert!(
            annotations
                .iter()
                .any(|a| a.subtype.as_deref() == Some("Highlight")),
            "page {page}: {annotations:?}"
        );
    }
}

/// A PDF made of `objects` (object `i + 1` is `objects[i]`; object 1 the
/// catalog), with a correct cross-reference table.
fn handmade(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut pdf = b"%PDF-1.7\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        pdf.extend_from_slice(body);
        pdf.extend_from_slice(b"\nendobj\n");
    }
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

/// A one-page PDF whose page has `content` as its content stream (with
/// `filter` as its /Filter, if any) and `count` as its page tree's /Count.
fn one_page(content: &[u8], filter: Option<&str>, count: u64) -> Vec<u8> {
    let filter = filter.map_or(String::new(), |f| format!(" /Filter /{f}"));
    let mut stream = format!("<< /Length {}{filter} >>\nstream\n", content.len()).into_bytes();
    stream.extend_from_slice(content);
    stream.extend_from_slice(b"\nendstream");
    handmade(&[
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        format!("<< /Type /Pages /Kids [3 0 R] /Count {count} >>").into_bytes(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
           /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_vec(),
        stream,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ])
}

/// Runs `work` on a thread of its own and fails the test unless it ends
/// within `seconds`.
fn within<T: Send + 'static>(seconds: u64, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || sender.send(work()));
    receiver
        .recv_timeout(std::time::Duration::from_secs(seconds))
        .expect("the PDF was not read within its time")
}

/// Reads `bytes` as a PDF, as ingest does: its layout or the error.
fn read(bytes: Vec<u8>) -> edudb::Result<usize> {
    edudb::ingest::layout::pdf::parse("hostile.pdf", bytes, &edudb::CancelToken::new(), &|_, _| {})
        .map(|(layout, _)| layout.text.len())
}

#[test]
fn hostile_pdfs_end_within_bounds_as_text_or_a_pdf_error() {
    // A handmade page reads.
    let page = one_page(
        b"BT /F1 12 Tf 72 700 Td (Plain words on a page.) Tj ET",
        None,
        1,
    );
    assert!(within(20, move || read(page)).unwrap() > 0);
    // Deep nesting in the content stream and in an object.
    let deep = [vec![b'['; 200_000], vec![b']'; 200_000]].concat();
    let mut content = b"BT /F1 12 Tf 72 700 Td ".to_vec();
    content.extend_from_slice(&deep);
    content.extend_from_slice(b" TJ ET");
    let nested_content = one_page(&content, None, 1);
    let mut nested_object = one_page(b"BT ET", None, 1);
    nested_object.splice(
        9..9,
        [b"6 0 obj\n".as_slice(), &deep, b"\nendobj\n"].concat(),
    );
    // A stream that inflates to 300 MB of spaces.
    let mut deflater = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let spaces = vec![b' '; 1 << 20];
    for _ in 0..300 {
        std::io::Write::write_all(&mut deflater, &spaces).unwrap();
    }
    let bomb = one_page(&deflater.finish().unwrap(), Some("FlateDecode"), 1);
    // A page tree that claims a billion pages.
    let liar = one_page(
        b"BT /F1 12 Tf 72 700 Td (One real page.) Tj ET",
        None,
        1_000_000_000,
    );
    for (what, bytes) in [
        ("nested content", nested_content),
        ("nested object", nested_object),
        ("inflation bomb", bomb),
        ("page-count lie", liar),
    ] {
        match within(60, move || read(bytes)) {
            Ok(_) | Err(Error::Pdf { .. }) => {}
            Err(other) => panic!("{what}: {other}"),
        }
    }
}

/// Mutations of a small real filing and of the generated report: bytes
/// flipped, runs overwritten, cut short. Each is read to the end within a
/// bound or refused as a PDF error; none panics or hangs. Cases:
/// `EDUDB_PDF_FUZZ_CASES` (default 48 in all).
#[test]
fn mutated_pdfs_are_read_or_refused_never_a_crash() {
    use rand::{Rng, SeedableRng};
    let cases: usize = std::env::var("EDUDB_PDF_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(48);
    let filing =
        support::shared_data().join("financebench_dev/pdfs/AMCOR_2022_8K_dated-2022-07-01.pdf");
    let seeds = [report(true), std::fs::read(filing).unwrap()];
    let mut rng = rand::rngs::StdRng::seed_from_u64(46);
    let started = std::time::Instant::now();
    for case in 0..cases {
        let mut bytes = seeds[case % seeds.len()].clone();
        match rng.random_range(0..3) {
            0 => {
                for _ in 0..rng.random_range(1..64) {
                    let at = rng.random_range(0..bytes.len());
                    bytes[at] = rng.random();
                }
            }
            1 => {
                let at = rng.random_range(0..bytes.len());
                let len = rng.random_range(1..4096).min(bytes.len() - at);
                let fill = rng.random();
                bytes[at..at + len].fill(fill);
            }
            _ => bytes.truncate(rng.random_range(0..bytes.len())),
        }
        match within(60, move || read(bytes)) {
            Ok(_) | Err(Error::Pdf { .. }) => {}
            Err(other) => panic!("case {case}: {other}"),
        }
    }
    eprintln!(
        "{cases} mutated PDFs read or refused in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Records what an ingest reports.
#[derive(Default)]
struct Reported {
    advances: std::sync::Mutex<Vec<String>>,
    working: std::sync::Mutex<Vec<String>>,
}

impl edudb::Progress for Reported {
    fn advance(&self, _units: u64, item: &str) {
        self.advances.lock().unwrap().push(item.to_owned());
    }

    fn working_on(&self, what: &str) {
        self.working.lock().unwrap().push(what.to_owned());
    }
}

#[test]
fn a_pdfs_pages_are_reported_as_they_are_read_and_the_document_once() {
    let (dir, db) = support::store();
    let path = dir.path().join("report.pdf");
    std::fs::write(&path, report(false)).unwrap();
    let sources = edudb::ingest::sources::expand(&[path], None).unwrap();
    let reported = Reported::default();
    db.ingest(
        &sources,
        IngestOptions::default(),
        &reported,
        &edudb::CancelToken::new(),
    )
    .unwrap();
    let working = reported.working.lock().unwrap().clone();
    let pages: Vec<&String> = working.iter().filter(|w| w.contains(" page ")).collect();
    assert_eq!(pages, ["report page 1/2", "report page 2/2"]);
    // Then its texts embedded, the last step the whole.
    let vectors = working.last().unwrap();
    assert!(vectors.starts_with("report vectors "), "{working:?}");
    let (done, total) = vectors.rsplit_once(' ').unwrap().1.split_once('/').unwrap();
    assert_eq!(done, total);
    assert_eq!(*reported.advances.lock().unwrap(), ["report"]);
}

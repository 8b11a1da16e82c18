//! Documents prepared apart from any store (`Preparer`), carried as bytes
//! and written in one batch (`Db::write_prepared`): the same documents a
//! store's own ingest writes, refused whole when they do not fit.

use edudb::ingest::sources::{Origin, Source};
use edudb::storage::prepared::{decode_batch, encode_batch};
use edudb::{
    CancelToken, EmbedderConfig, Error, IngestOptions, Params, PreparedDocument, Preparer,
};
use rand::{Rng, SeedableRng};

use crate::support::{demo_dir, ingest_all, rfc_sources, small_pdf, store, untimed};

/// Sources of the kinds ingest reads: Markdown RFCs, the demo corpus's
/// other files (Markdown, plain text) and a PDF.
fn sources() -> Vec<Source> {
    let mut sources = rfc_sources(12);
    let demo = edudb::ingest::sources::expand(&[demo_dir()], None).unwrap();
    let new: Vec<Source> = (demo.into_iter())
        .filter(|d| sources.iter().all(|s| s.id != d.id))
        .collect();
    sources.extend(new);
    sources.push(Source {
        id: "filing".into(),
        origin: Origin::Bytes(small_pdf(&[
            "Item 7. Management's Discussion and Analysis",
            "Net sales grew by four percent in fiscal 2022.",
            "Operating margin fell because of higher freight costs.",
        ])),
    });
    sources
}

fn prepare_all(preparer: &Preparer, sources: &[Source]) -> Vec<PreparedDocument> {
    (sources.iter())
        .map(|source| {
            preparer
                .prepare(
                    source,
                    IngestOptions::default(),
                    &|_, _, _| {},
                    &CancelToken::new(),
                )
                .unwrap()
        })
        .collect()
}

/// What a statement answers, as JSON without its timings.
fn answer(db: &edudb::Db, statement: &str) -> serde_json::Value {
    untimed(db.query(statement, &Params::new()).unwrap())
}

#[test]
fn a_document_prepared_apart_and_written_is_the_one_ingest_writes() {
    let sources = sources();
    let (_a, ingested) = store();
    ingest_all(&ingested, &sources);

    // Prepared with no store open, carried as one batch of bytes.
    let preparer = Preparer::new(&EmbedderConfig::default()).unwrap();
    let body = encode_batch(&prepare_all(&preparer, &sources)).unwrap();
    let carried = decode_batch(&body).unwrap();
    let (_b, written) = store();
    let metas = written.write_prepared(carried).unwrap();
    assert_eq!(metas.len(), sources.len());

    let listed = |db: &edudb::Db| {
        let mut docs = db.documents().unwrap();
        docs.sort_by(|a, b| a.id.cmp(&b.id));
        docs
    };
    assert_eq!(listed(&written), listed(&ingested));
    for source in &sources {
        let id = source.id.as_str();
        assert_eq!(
            written.document(id).unwrap(),
            ingested.document(id).unwrap(),
            "{id}"
        );
        assert_eq!(written.dag(id).unwrap(), ingested.dag(id).unwrap(), "{id}");
    }
    // The vectors and both indexes agree: every ranking, scores included.
    for statement in [
        "SELECT FROM * SEED BM25('borrow checker lifetimes') LIMIT 20",
        "SELECT FROM * SEED NEAR('how are private fields declared') LIMIT 20",
        "SELECT SPANS FROM * SEED HYBRID('net sales fiscal 2022') PROPAGATE BUDGET 400 TOKENS",
        "SELECT FROM * SEED NEAR('operating margin') TRAVERSE BUDGET 300 TOKENS",
    ] {
        assert_eq!(
            answer(&written, statement),
            answer(&ingested, statement),
            "{statement}"
        );
    }
    // Counts, index entries and change numbers too; nothing damaged.
    let check = written.check().unwrap();
    assert!(check.damaged.is_empty(), "{:?}", check.damaged);
    assert_eq!(check, ingested.check().unwrap());
    assert_eq!(
        written.pages("filing").unwrap(),
        ingested.pages("filing").unwrap()
    );
}

#[test]
fn a_batch_is_written_whole_or_not_at_all() {
    let (_dir, db) = store();
    let preparer = Preparer::new(&EmbedderConfig::default()).unwrap();
    let doc = |id: &str, text: &str| {
        preparer
            .prepare_bytes(id, text.as_bytes().to_vec(), IngestOptions::default())
            .unwrap()
    };

    // One document made by another embedder refuses the whole batch.
    let other = Preparer::new(&EmbedderConfig::Hashed { dimension: 64 }).unwrap();
    let foreign =
        (other.prepare_bytes("c", b"Gamma text here.".to_vec(), IngestOptions::default())).unwrap();
    let batch = vec![
        doc("a", "Alpha text here."),
        doc("b", "Beta text here."),
        foreign,
    ];
    let err = db.write_prepared(batch).unwrap_err();
    assert!(matches!(err, Error::BadPrepared { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("\"c\"") && message.contains("dimension 64"),
        "{message}"
    );
    assert!(err.is_user_error());
    assert!(db.documents().unwrap().is_empty());

    // The same id twice is refused, nothing written.
    let err = db
        .write_prepared(vec![doc("a", "First."), doc("a", "Second.")])
        .unwrap_err();
    assert!(err.to_string().contains("\"a\" is given twice"), "{err}");
    assert!(db.documents().unwrap().is_empty());

    // A good batch replaces what it names and leaves the rest.
    db.write_prepared(vec![
        doc("a", "Alpha text here."),
        doc("b", "Beta text here."),
    ])
    .unwrap();
    db.write_prepared(vec![doc("b", "Beta, rewritten.")])
        .unwrap();
    let ids: Vec<String> = db.documents().unwrap().into_iter().map(|d| d.id).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(db.document("b").unwrap().text, "Beta, rewritten.");
    let hits = db.search("rewritten", 5).unwrap();
    assert_eq!(hits.first().map(|h| h.doc.as_str()), Some("b"));
    assert!(db.write_prepared(Vec::new()).unwrap().is_empty());
}

#[test]
fn damaged_or_hostile_bytes_are_refused_with_what_is_wrong_never_a_panic() {
    let preparer = Preparer::new(&EmbedderConfig::default()).unwrap();
    let doc = preparer
        .prepare_bytes(
            "rfc",
            b"# Title\n\nSome text about lifetimes. And more text about borrowing.\n".to_vec(),
            IngestOptions::default(),
        )
        .unwrap();
    let bytes = doc.to_bytes().unwrap();
    let back = PreparedDocument::from_bytes(&bytes).unwrap();
    assert_eq!(back.document(), doc.document());
    assert_eq!(back.vectors(), doc.vectors());
    assert_eq!(back.dag(), doc.dag());
    assert_eq!(back.embedder(), doc.embedder());

    let refused = |bytes: &[u8]| match PreparedDocument::from_bytes(bytes) {
        Err(Error::BadPrepared { message, .. }) => message,
        Err(other) => panic!("not a BadPrepared error: {other}"),
        Ok(_) => panic!("accepted"),
    };
    assert!(refused(b"%PDF-1.7 not this").contains("magic"));
    let mut other_version = bytes.clone();
    other_version[8] ^= 0x7f;
    assert!(refused(&other_version).contains("made for store format"));
    for cut in (0..bytes.len()).step_by(7) {
        refused(&bytes[..cut]);
    }
    // Flipped bytes: refused, or (where a flip lands in a value that stays
    // valid) a document that passes every check the store makes.
    let mut rng = rand::rngs::StdRng::seed_from_u64(46);
    for _ in 0..300 {
        let mut damaged = bytes.clone();
        let at = rng.random_range(12..damaged.len());
        damaged[at] ^= 1 << rng.random_range(0..8);
        if let Ok(doc) = PreparedDocument::from_bytes(&damaged) {
            doc.document().validate().unwrap();
        }
    }

    // A batch names the frame that is wrong.
    let mut body = encode_batch(&[back]).unwrap();
    body.extend_from_slice(&1000u64.to_le_bytes());
    body.extend_from_slice(&bytes[..10]);
    let err = decode_batch(&body).unwrap_err().to_string();
    assert!(
        err.contains("1 of the batch") && err.contains("1000 bytes"),
        "{err}"
    );
}

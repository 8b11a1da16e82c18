//! The query language end to end: every clause's semantics, the JSON
//! contract, EXPLAIN, parameters, prepared statements, and errors that
//! point at the fault.

use std::collections::HashSet;

use edudb::{Db, Error, IngestOptions, Item, Params, QueryResult, Rows};
use tempfile::TempDir;

use crate::support::{self, ingest_markdown, ingest_rfcs, selection, selection_with};

const GARDEN: &str = "# Garden guide

Gardens reward patience and regular care. Every plant needs water and light.

## Watering

Water tomatoes every morning before the heat. Tomatoes dislike wet leaves, so water the soil.

### Drip irrigation

Drip lines save a great deal of water. They deliver water slowly to the roots.

## Pruning

Prune roses in late winter while they are dormant. Always cut just above an outward facing bud.

## Compost

Compost feeds the soil with organic matter. Turn the heap every few weeks to keep it aerobic.
";

/// A store holding `GARDEN` and the first 20 RFCs.
fn store() -> (TempDir, Db) {
    let (dir, db) = support::store();
    ingest_markdown(&db, "garden", GARDEN);
    ingest_rfcs(&db, 20);
    (dir, db)
}

fn run(db: &Db, statement: &str) -> QueryResult {
    db.query(statement, &Params::new())
        .unwrap_or_else(|e| panic!("{statement}: {e}"))
}

fn query_error(db: &Db, statement: &str) -> edudb::QueryError {
    match db.query(statement, &Params::new()) {
        Err(Error::Query(error)) => error,
        other => panic!("{statement}: expected a query error, got {other:?}"),
    }
}

/// Every item is exact: its text is the stored text at its bytes, its
/// bytes are its EDUs' bytes, its tokens are its EDUs' tokens.
fn assert_exact(db: &Db, items: &[Item]) {
    for item in items {
        let edus = db
            .edus(&item.doc, Some((item.edus[0], item.edus[1])))
            .unwrap();
        assert_eq!(
            item.bytes,
            [edus[0].bytes[0], edus.last().unwrap().bytes[1]]
        );
        let stored = db.document(&item.doc).unwrap();
        let text = &stored.text;
        assert_eq!(
            item.text,
            text[item.bytes[0] as usize..item.bytes[1] as usize]
        );
        assert_eq!(
            item.tokens,
            edus.iter().map(|e| u64::from(e.tokens)).sum::<u64>()
        );
    }
}

fn edus_of(items: &[Item]) -> Vec<(String, u32)> {
    items
        .iter()
        .flat_map(|i| (i.edus[0]..=i.edus[1]).map(|e| (i.doc.clone(), e)))
        .collect()
}

#[test]
fn a_budgeted_query_fits_reads_in_document_order_and_never_repeats_an_edu() {
    let (_dir, db) = store();
    for budget in [20, 64, 200, 1000] {
        let picked = selection(
            &db,
            &format!(
                "SELECT FROM * SEED BM25('trait method lifetime borrow') BUDGET {budget} TOKENS"
            ),
        );
        assert!(!picked.items.is_empty());
        assert!(
            picked.tokens_used <= budget,
            "{} > {budget}",
            picked.tokens_used
        );
        assert_eq!(
            picked.tokens_used,
            picked.items.iter().map(|i| i.tokens).sum::<u64>()
        );
        assert_eq!(picked.budget, Some(budget));
        let edus = edus_of(&picked.items);
        assert_eq!(edus.len(), edus.iter().collect::<HashSet<_>>().len());
        assert_exact(&db, &picked.items);
        // Grouped by document, in document order within each.
        let mut seen_docs: Vec<&str> = Vec::new();
        for pair in picked.items.windows(2) {
            if pair[0].doc == pair[1].doc {
                assert!(pair[0].edus[1] < pair[1].edus[0]);
            }
        }
        for item in &picked.items {
            if seen_docs.last() != Some(&item.doc.as_str()) {
                assert!(
                    !seen_docs.contains(&item.doc.as_str()),
                    "{} split",
                    item.doc
                );
                seen_docs.push(&item.doc);
            }
        }
    }
}

#[test]
fn seed_ranks_nodes_at_every_level_and_whole_nodes_win_when_they_fit() {
    let (_dir, db) = store();
    let picked = selection(
        &db,
        "SELECT NODES FROM doc('garden') SEED BM25('drip irrigation') LIMIT 1",
    );
    assert_eq!(picked.items.len(), 1);
    let item = &picked.items[0];
    assert_eq!(item.title.as_deref(), Some("Drip irrigation"));
    // The document root, the h1 section, Watering, then Drip irrigation.
    assert_eq!((item.kind, item.level), ("section", 3));
    // With room, the whole section is returned rather than its sentences.
    let picked = selection(
        &db,
        "SELECT FROM doc('garden') SEED BM25('drip irrigation') BUDGET 40 TOKENS",
    );
    assert!(
        picked
            .items
            .iter()
            .any(|i| i.title.as_deref() == Some("Drip irrigation"))
    );
    assert_exact(&db, &picked.items);
}

#[test]
fn where_filters_by_level_kind_title_and_doc() {
    let (_dir, db) = store();
    let level = selection(
        &db,
        "SELECT NODES FROM * WHERE level = 1 AND kind = section LIMIT 50",
    );
    assert!(!level.items.is_empty());
    assert!(
        level
            .items
            .iter()
            .all(|i| i.level == 1 && i.kind == "section")
    );
    let titled = selection(
        &db,
        "SELECT NODES FROM * WHERE title ~ '^(?i)motivation$' LIMIT 100",
    );
    assert!(titled.items.len() >= 5);
    assert!(titled.items.iter().all(|i| {
        i.title
            .as_deref()
            .unwrap()
            .eq_ignore_ascii_case("motivation")
    }));
    let garden = selection(
        &db,
        "SELECT NODES FROM * WHERE doc = 'garden' AND NOT (kind = document OR kind = paragraph) LIMIT 100",
    );
    let titles: Vec<_> = garden
        .items
        .iter()
        .map(|i| i.title.clone().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "Garden guide",
            "Watering",
            "Drip irrigation",
            "Pruning",
            "Compost"
        ]
    );
    let edus = selection(
        &db,
        "SELECT FROM doc('garden') SEED BM25('water') WHERE kind = edu LIMIT 5",
    );
    assert!(
        edus.items
            .iter()
            .all(|i| i.node.is_none() && i.kind == "edu")
    );
    assert!(!edus.items.is_empty());
}

#[test]
fn traverse_walks_down_only_where_the_continuation_score_holds() {
    let (_dir, db) = store();
    // At threshold 1 only the path to the best hit is walked: one document.
    let strict = run(
        &db,
        "EXPLAIN SELECT FROM * SEED BM25('roses dormant winter') TRAVERSE THRESHOLD 1 BUDGET 500 TOKENS",
    );
    let Rows::Selection(picked) = &strict.rows else {
        panic!()
    };
    assert!(!picked.items.is_empty());
    assert!(picked.items.iter().all(|i| i.doc == "garden"));
    assert!(picked.items.iter().any(|i| i.text.contains("Prune roses")));
    let stage = strict
        .stages
        .iter()
        .find(|s| s.operator == "traverse")
        .unwrap();
    assert!(stage.rows_out < stage.rows_in);
    // A looser threshold explores more of the store.
    let loose = selection(
        &db,
        "SELECT FROM * SEED BM25('roses dormant winter') TRAVERSE THRESHOLD 0.05 BUDGET 500 TOKENS",
    );
    assert!(loose.items.len() >= picked.items.len());
    // DEPTH bounds how deep whole nodes are taken.
    let shallow = selection(
        &db,
        "SELECT FROM * SEED BM25('trait object method') TRAVERSE THRESHOLD 0.1 DEPTH 1 LIMIT 50",
    );
    assert!(
        shallow
            .items
            .iter()
            .filter(|i| i.node.is_some())
            .all(|i| i.level <= 1)
    );
    assert_exact(&db, &shallow.items);
}

#[test]
fn traverse_keeps_a_walked_through_section_that_matches_better_than_its_parts() {
    let (_dir, db) = support::store();
    let report = "# Annual report\n\n\
        ## Statement of Cash Flows\n\n\
        Amounts are in millions of dollars. Figures are audited.\n\n\
        Operating cash rose in the year. Investing outflows were steady.\n\n\
        ## Liquidity\n\n\
        Our cash flow statement shows cash flow from operations, and the cash flow statement of each unit shows its cash flow.\n";
    ingest_markdown(&db, "report", report);
    let question = "cash flow statement";
    let seeded = selection(
        &db,
        &format!("SELECT NODES FROM * SEED BM25('{question}') ORDER BY SCORE LIMIT 1"),
    );
    let best = &seeded.items[0];
    assert_eq!(best.title.as_deref(), Some("Statement of Cash Flows"));
    let walked = selection(
        &db,
        &format!(
            "SELECT NODES FROM * SEED BM25('{question}') TRAVERSE THRESHOLD 0.01 ORDER BY SCORE LIMIT 100"
        ),
    );
    // The walk went below the section (a paragraph of it matched "cash")
    // and still offers the section whole, at its own seed score.
    let inside = walked
        .items
        .iter()
        .any(|w| w.level > best.level && w.edus[0] >= best.edus[0] && w.edus[1] <= best.edus[1]);
    let kept = walked.items.iter().find(|w| w.node == best.node);
    assert!(inside, "the walk did not go below the section: {walked:?}");
    assert_eq!(kept.map(|k| k.score), Some(best.score), "{walked:?}");
    assert_exact(&db, &walked.items);
}

#[test]
fn expand_grows_each_pick_structurally() {
    let (_dir, db) = store();
    let base = "SELECT FROM doc('garden') SEED BM25('outward facing bud') WHERE kind = edu";
    let bare = selection(&db, &format!("{base} LIMIT 1"));
    assert_eq!(bare.items[0].kind, "edu");
    let subtree = selection(&db, &format!("{base} EXPAND SUBTREE LIMIT 1"));
    assert!(subtree.items[0].node.is_some());
    assert!(
        subtree.items[0].edus[0] <= bare.items[0].edus[0]
            && bare.items[0].edus[1] <= subtree.items[0].edus[1]
    );
    let parent = selection(
        &db,
        "SELECT NODES FROM doc('garden') SEED BM25('drip lines') WHERE title ~ 'Drip' EXPAND PARENT LIMIT 1",
    );
    assert_eq!(parent.items[0].title.as_deref(), Some("Watering"));
    let context = selection(&db, &format!("{base} EXPAND CONTEXT 2 LIMIT 1"));
    assert_eq!(
        context.items[0].edus[0],
        bare.items[0].edus[0].saturating_sub(2)
    );
    let siblings = selection(
        &db,
        "SELECT FROM doc('garden') SEED BM25('pruning roses') WHERE title ~ 'x' OR title ~ '^Pruning$' EXPAND SIBLINGS LIMIT 1",
    );
    let text = &siblings.items[0].text;
    assert!(
        text.contains("Drip lines") && text.contains("Pruning") && text.contains("Compost"),
        "{text}"
    );
    assert_exact(&db, &siblings.items);
}

#[test]
fn order_limit_and_the_default_limit() {
    let (_dir, db) = store();
    let by_score = selection(
        &db,
        "SELECT FROM * SEED BM25('macro syntax') ORDER BY SCORE LIMIT 8",
    );
    assert_eq!(by_score.items.len(), 8);
    assert!(by_score.items.windows(2).all(|w| w[0].score >= w[1].score));
    let default = selection(&db, "SELECT FROM * SEED BM25('the')");
    assert_eq!(default.items.len(), edudb::query::plan::DEFAULT_LIMIT);
    let scan = selection(&db, "SELECT SPANS FROM doc('garden') BUDGET 30 TOKENS");
    assert!(scan.tokens_used <= 30 && !scan.items.is_empty());
    assert_eq!(scan.items[0].edus[0], 0, "no seed reads from the start");
}

#[test]
fn parameters_bind_values_and_prepared_statements_rerun() {
    let (_dir, db) = store();
    let literal = selection(
        &db,
        "SELECT FROM doc('garden') SEED BM25('compost heap') LIMIT 3",
    );
    let params = Params::new()
        .text("doc", "garden")
        .text("q", "compost heap")
        .number("1", 3.0);
    let bound = selection_with(&db, "SELECT FROM doc($doc) SEED BM25($q) LIMIT $1", &params);
    assert_eq!(bound, literal);
    // Quotes in parameters are data, never syntax.
    let tricky = Params::new().text("q", "it's ') LIMIT 1 --");
    assert!(db.query("SELECT FROM * SEED BM25($q)", &tricky).is_ok());
    let prepared = db.prepare("SELECT FROM * SEED BM25($q) LIMIT 2").unwrap();
    for q in ["roses", "tomatoes"] {
        let result = db.run(&prepared, &Params::new().text("q", q)).unwrap();
        let Rows::Selection(s) = result.rows else {
            panic!()
        };
        assert!(
            s.items[0]
                .text
                .to_lowercase()
                .contains(q.trim_end_matches('s')),
            "{q}: {:?}",
            s.items[0].text
        );
    }
    let missing = match db.run(&prepared, &Params::new()) {
        Err(Error::Query(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(missing.column, 25);
    assert!(missing.message.contains("$q"));
}

/// `NEAR($v)` with a vector parameter searches for the caller's own query
/// vector: the store's embedding of a text, given so (at any length), picks
/// what `NEAR('text')` picks; a vector of another dimension, of zeros, or
/// given to a seed that needs text is refused where it is written.
#[test]
fn near_takes_the_callers_own_query_vector() {
    let (_dir, db) = store();
    let question = "how often should tomatoes be watered";
    let by_text = selection(
        &db,
        &format!("SELECT FROM * SEED NEAR('{question}') LIMIT 5"),
    );
    let mut vector = db.embedder().embed(&[question]).unwrap().pop().unwrap();
    vector.iter_mut().for_each(|x| *x *= 3.0);
    let given = Params::new().vector("v", vector.clone());
    let by_vector = selection_with(&db, "SELECT FROM * SEED NEAR($v) LIMIT 5", &given);
    assert_eq!(edus_of(&by_vector.items), edus_of(&by_text.items));
    assert!(!by_vector.items.is_empty());
    let explained = db
        .query("EXPLAIN SELECT FROM * SEED NEAR($v) LIMIT 5", &given)
        .unwrap()
        .to_json();
    let seed = explained["plan"][0]["detail"].as_str().unwrap();
    assert!(
        seed.contains(&format!("a given vector of {}", vector.len())),
        "{seed}"
    );
    let refused = |statement: &str, params: &Params| match db.query(statement, params) {
        Err(Error::Query(error)) => error,
        other => panic!("{statement}: expected a query error, got {other:?}"),
    };
    let short = Params::new().vector("v", vec![1.0; 3]);
    let error = refused("SELECT FROM * SEED NEAR($v)", &short);
    assert!(error.message.contains("a vector of 3 numbers"), "{error}");
    assert_eq!((error.line, error.column), (1, 25));
    let zeros = Params::new().vector("v", vec![0.0; vector.len()]);
    let error = refused("SELECT FROM * SEED NEAR($v)", &zeros);
    assert!(error.message.contains("not all zero"), "{error}");
    let error = refused("SELECT FROM * SEED BM25($v)", &given);
    assert!(error.message.contains("only NEAR takes"), "{error}");
    assert_eq!((error.line, error.column), (1, 25));
}

#[test]
fn the_json_contract() {
    let (_dir, db) = store();
    let json = run(
        &db,
        "SELECT JSON FROM doc('garden') SEED BM25('water') BUDGET 50 TOKENS",
    )
    .to_json();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["budget", "elapsed_ms", "results", "tokens_used"]);
    assert_eq!(json["budget"], 50);
    let item = &json["results"][0];
    let mut fields: Vec<&str> = item
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "bytes",
            "doc",
            "edus",
            "kind",
            "level",
            "match_score",
            "node",
            "score",
            "text",
            "title",
            "tokens"
        ]
    );
    assert!(
        item["bytes"].as_array().unwrap().len() == 2 && item["edus"].as_array().unwrap().len() == 2
    );
    let explained = run(
        &db,
        "EXPLAIN SELECT FROM doc('garden') SEED BM25('water') LIMIT 2",
    )
    .to_json();
    let operators: Vec<&str> = explained["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["operator"].as_str().unwrap())
        .collect();
    assert_eq!(operators, ["seed", "load", "select", "linearise"]);
    for stage in explained["plan"].as_array().unwrap() {
        assert_eq!(stage["device"], "cpu");
        assert!(stage["elapsed"].as_f64().unwrap() >= 0.0);
    }
}

/// A seed's scores are each divided by the ranking's best, so the best hit
/// scores 1 however poorly it matches; `match_score` keeps the seed's own
/// score, and `MIN` cuts on it.
#[test]
fn match_scores_are_the_seeds_own_and_min_cuts_on_them() {
    let (_dir, db) = store();
    let unrelated = "SELECT FROM * SEED NEAR('hazardous actions within perilous procedures')";
    let best = &selection(&db, &format!("{unrelated} LIMIT 1")).items[0];
    let raw = best.match_score.expect("a seed hit has its match score");
    assert_eq!(best.score, 1.0, "divided by the best");
    assert!(raw > 0.0 && raw < 1.0, "a cosine similarity: {raw}");
    let kept = selection(&db, &format!("{unrelated} MIN {raw} LIMIT 1")).items;
    assert_eq!(
        kept.first().map(|i| (&i.doc, i.edus)),
        Some((&best.doc, best.edus))
    );
    let above = raw + 1e-4;
    let cut = selection(&db, &format!("{unrelated} MIN {above} LIMIT 50")).items;
    assert!(cut.iter().any(|i| i.match_score.is_some()), "{cut:?}");
    assert!(
        cut.iter().all(|i| i.match_score.is_none_or(|m| m >= above)),
        "{cut:?}"
    );
    assert!(!cut.iter().any(|i| i.doc == best.doc && i.edus == best.edus));
    // BM25: an EDU's match score is its BM25 score, ranked as scored.
    let hits = selection(
        &db,
        "SELECT FROM doc('garden') SEED BM25('water soil') ORDER BY SCORE LIMIT 5",
    )
    .items;
    let scores: Vec<f32> = hits.iter().map(|i| i.match_score.unwrap()).collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]) && scores[0] > 1.0,
        "{scores:?}"
    );
    let over = selection(
        &db,
        "SELECT FROM doc('garden') SEED BM25('water soil') MIN 999 LIMIT 5",
    );
    assert!(over.items.is_empty(), "nothing scores 999");
    // No seed, no match score; EXPLAIN shows the cut.
    let scanned = selection(&db, "SELECT FROM doc('garden') LIMIT 3").items;
    assert!(scanned.iter().all(|i| i.match_score.is_none()));
    let explained = run(&db, &format!("EXPLAIN {unrelated} MIN 0.25 LIMIT 1")).to_json();
    let seed = explained["plan"][0]["detail"].as_str().unwrap();
    assert!(seed.contains(" MIN 0.25 "), "{seed}");
    // Out of range: a cosine (or HYBRID's fused score) is at most 1.
    let error = query_error(&db, "SELECT FROM * SEED NEAR('x') MIN 2");
    assert!(
        error
            .to_string()
            .contains("SEED's MIN must be a number from 0 to 1"),
        "{error}"
    );
    assert_eq!((error.line, error.column), (1, 34));
    let error = query_error(&db, "SELECT FROM * SEED BM25('x') MIN LIMIT 3");
    assert!(
        error.to_string().contains("the least match score to keep"),
        "{error}"
    );
}

#[test]
fn explain_reports_every_stage_with_rows_and_time() {
    let (_dir, db) = store();
    let result = run(
        &db,
        "EXPLAIN SELECT FROM * SEED BM25('closure capture') TRAVERSE WHERE level >= 1 EXPAND CONTEXT 1 BUDGET 300 TOKENS",
    );
    assert!(result.explain);
    let operators: Vec<&str> = result.stages.iter().map(|s| s.operator).collect();
    assert_eq!(
        operators,
        [
            "seed",
            "load",
            "traverse",
            "filter",
            "expand",
            "select",
            "linearise"
        ]
    );
    let Rows::Selection(picked) = &result.rows else {
        panic!()
    };
    // The seed fetches max(64, 8 x LIMIT, BUDGET / 8) from each ranking.
    assert!(
        result.stages[0].rows_out <= 2 * 64,
        "{:?}",
        result.stages[0]
    );
    let select = &result.stages[5];
    assert_eq!(select.rows_out, picked.items.len());
    for pair in result.stages.windows(2) {
        assert_eq!(
            pair[0].rows_out, pair[1].rows_in,
            "{} -> {}",
            pair[0].operator, pair[1].operator
        );
    }
}

#[test]
fn show_statements_browse_the_store() {
    let (_dir, db) = store();
    let Rows::Docs(docs) = run(&db, "SHOW DOCS").rows else {
        panic!()
    };
    assert_eq!(docs.len(), 21);
    let Rows::Tree(tree, depth) = run(&db, "show tree doc('garden') depth 1").rows else {
        panic!()
    };
    assert_eq!(
        (tree.nodes.len(), depth),
        (db.tree("garden").unwrap().nodes.len(), Some(1))
    );
    let Rows::Edus(edus) = run(&db, "SHOW EDUS doc('garden') 2..3").rows else {
        panic!()
    };
    assert_eq!(edus, db.edus("garden", Some((2, 3))).unwrap());
    let Rows::Selection(node) = run(&db, "SHOW NODE doc('garden') 0").rows else {
        panic!()
    };
    // The root starts at the heading's text, after its `# ` marker.
    assert_eq!(node.items[0].text, GARDEN["# ".len()..].trim_end());
    let Rows::Stats(stats) = run(&db, "SHOW STATS;").rows else {
        panic!()
    };
    assert_eq!(stats, db.stats().unwrap());
}

/// A statement, where its error is (line, column), words of the message, the hint.
type ErrorCase = (
    &'static str,
    (usize, usize),
    &'static str,
    Option<&'static str>,
);

#[test]
fn errors_name_line_column_and_what_was_expected() {
    let (_dir, db) = store();
    let cases: &[ErrorCase] = &[
        (
            "SELECT FORM *",
            (1, 8),
            "expected FROM",
            Some("did you mean FROM?"),
        ),
        (
            "SELECT FROM *\n  SEED BM25('x')\n  BUGDET 10 TOKENS",
            (3, 3),
            "expected a clause",
            Some("did you mean BUDGET?"),
        ),
        (
            "SELECT FROM * LIMIT 1 LIMIT 2",
            (1, 23),
            "LIMIT is given twice",
            Some("give each clause once"),
        ),
        (
            "SELECT FROM * SEED BM25('x') BUDGET 0 TOKENS",
            (1, 37),
            "budget of 0",
            None,
        ),
        (
            "SELECT FROM * LIMIT 99999999999999999999999",
            (1, 21),
            "99999999999999999999999 is too large",
            None,
        ),
        (
            "SELECT FROM * SEED BM25('x') BUDGET 00018446744073709551616 TOKENS",
            (1, 37),
            "budget of 18446744073709551616 is too large",
            None,
        ),
        (
            "SELECT FROM * SEED BM25('x') TRAVERSE THRESHOLD 1.5",
            (1, 49),
            "THRESHOLD",
            None,
        ),
        (
            "SELECT FROM doc('gardn')",
            (1, 17),
            "no document 'gardn'",
            Some("did you mean 'garden'?"),
        ),
        (
            "SELECT FROM * WHERE title ~ '(unclosed'",
            (1, 29),
            "bad regular expression",
            None,
        ),
        (
            "SELECT FROM * WHERE kind = sectoin",
            (1, 28),
            "unknown node kind",
            Some("did you mean section?"),
        ),
        (
            "SELECT FROM * SEED HYBRID('x', 1.5)",
            (1, 32),
            "HYBRID's alpha must be a number from 0 to 1",
            None,
        ),
        (
            "SELECT FROM * PROPAGATE STEPS 2",
            (1, 15),
            "PROPAGATE needs a SEED",
            Some("add SEED BM25('...')"),
        ),
        (
            "SELECT FROM * SEED BM25('x') TRAVERSE PROPAGATE",
            (1, 39),
            "use one of them",
            None,
        ),
        (
            "SELECT FROM * SEED BM25('x') PROPAGATE STEPS 0",
            (1, 46),
            "STEPS must be at least 1",
            None,
        ),
        (
            "SELECT FROM * SEED BM25('x') PROPAGATE ALPHA 2",
            (1, 46),
            "PROPAGATE's alpha must be a number from 0 to 1",
            None,
        ),
        (
            "SELECT FROM * SEED BM25('x') PROPAGATE ACROSS 2",
            (1, 47),
            "PROPAGATE's ACROSS must be a number from 0 to 1",
            None,
        ),
        (
            "SHOW DAG doc('gardn')",
            (1, 14),
            "no document 'gardn'",
            Some("did you mean 'garden'?"),
        ),
        (
            "SHOW DAG doc('garden') LEVEL 0",
            (1, 30),
            "LEVEL must be at least 1",
            None,
        ),
        (
            "SELECT FROM session('s1')",
            (1, 21),
            "no session 's1'",
            Some("SHOW SESSIONS lists the sessions"),
        ),
        (
            "SELECT FROM * TRAVERSE",
            (1, 15),
            "needs a SEED",
            Some("add SEED BM25('...')"),
        ),
        (
            "SELECT FROM * WHERE level = 1.5",
            (1, 29),
            "whole number",
            None,
        ),
        ("SHOW EDUS doc('garden') 3..999", (1, 28), "at most", None),
        ("SHOW NODE doc('garden') 99", (1, 25), "no node 99", None),
        (
            "SELECT FROM * SEED BM25('never closed",
            (1, 25),
            "unterminated string",
            None,
        ),
        (
            "SELECT FROM * ; SELECT FROM *",
            (1, 17),
            "one statement at a time",
            None,
        ),
    ];
    for &(statement, (line, column), message, hint) in cases {
        let error = query_error(&db, statement);
        assert_eq!(
            (error.line, error.column),
            (line, column),
            "{statement}: {error}"
        );
        assert!(error.message.contains(message), "{statement}: {error}");
        assert_eq!(error.hint.as_deref(), hint, "{statement}: {error}");
        let shown = error.to_string();
        assert!(
            shown.contains(&format!("line {line}, column {column}")),
            "{shown}"
        );
        assert!(
            shown.lines().nth(2).unwrap().trim_start().starts_with('^'),
            "{shown}"
        );
    }
    let deep = format!(
        "SELECT FROM * WHERE {}level = 1{}",
        "(".repeat(100),
        ")".repeat(100)
    );
    assert!(query_error(&db, &deep).message.contains("nested more than"));
}

#[test]
fn the_keyword_list_is_the_documented_grammar() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/query-language.md"
    ))
    .unwrap();
    let ebnf = doc
        .split("```ebnf")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let without_comments = regex::Regex::new(r"(?s)\(\*.*?\*\)")
        .unwrap()
        .replace_all(ebnf, "");
    let documented: HashSet<&str> = regex::Regex::new(r#""([A-Za-z][A-Za-z0-9]*)""#)
        .unwrap()
        .captures_iter(&without_comments)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    let listed: HashSet<&str> = edudb::query::parser::KEYWORDS.into_iter().collect();
    assert_eq!(listed, documented);
}

#[test]
fn queries_see_replaced_and_removed_documents() {
    let (_dir, db) = support::store();
    let text = |words: &str| format!("# Notes\n\n{words} grow in the garden.\n").into_bytes();
    db.ingest_bytes("notes", text("Tomatoes"), IngestOptions::default())
        .unwrap();
    let statement = "SELECT FROM doc('notes') SEED BM25('garden') BUDGET 50 TOKENS";
    let before = selection(&db, statement);
    assert!(before.items[0].text.contains("Tomatoes"));
    assert_eq!(
        db.document_cache_usage().0,
        1,
        "the query kept the document"
    );

    db.ingest_bytes("notes", text("Cucumbers"), IngestOptions::default())
        .unwrap();
    let after = selection(&db, statement);
    assert!(after.items[0].text.contains("Cucumbers"), "{after:?}");
    assert_exact(&db, &after.items);

    db.remove("notes").unwrap();
    assert!(matches!(
        db.query(statement, &Params::new()),
        Err(Error::Query(_))
    ));
    db.set_document_cache_bytes(0);
    assert_eq!(db.document_cache_usage(), (0, 0));
}

/// The (doc, first EDU, last EDU) of every item `statement` selects.
fn picks(db: &Db, statement: &str) -> Vec<(String, u32, u32)> {
    selection(db, statement)
        .items
        .iter()
        .map(|i| (i.doc.clone(), i.edus[0], i.edus[1]))
        .collect()
}

#[test]
fn long_chains_of_conditions_run_in_a_small_stack() {
    let (_dir, db) = store();
    let plain = picks(&db, "SELECT FROM * WHERE level = 1 LIMIT 50");
    let negated = picks(&db, "SELECT FROM * WHERE NOT level = 1 LIMIT 50");
    assert!(!plain.is_empty() && plain != negated);
    let levels: Vec<String> = (0..4_000)
        .map(|n| format!("level = {}", n % 20 + 1))
        .collect();
    let statements = [
        (
            format!(
                "SELECT FROM * WHERE {}level = 1 LIMIT 50",
                "NOT ".repeat(10_000)
            ),
            plain.clone(),
        ),
        (
            format!(
                "SELECT FROM * WHERE {}level = 1 LIMIT 50",
                "NOT ".repeat(10_001)
            ),
            negated,
        ),
        (
            format!("SELECT FROM * WHERE {} LIMIT 50", levels.join(" OR ")),
            picks(
                &db,
                "SELECT FROM * WHERE level >= 1 AND level <= 20 LIMIT 50",
            ),
        ),
        (
            format!(
                "SELECT FROM * WHERE {} LIMIT 50",
                vec!["level = 1"; 4_000].join(" AND ")
            ),
            plain,
        ),
    ];
    // A thread with a quarter of a megabyte of stack: recursion as deep as
    // the chains would overflow it.
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn_scoped(scope, || {
                for (statement, expected) in &statements {
                    assert_eq!(&picks(&db, statement), expected, "{}", &statement[..60]);
                }
            })
            .unwrap()
            .join()
            .unwrap();
    });
}

#[test]
fn oversized_statements_and_seed_texts_are_refused_with_short_errors() {
    let (_dir, db) = store();
    let words = "compost soil ".repeat(6_000);
    let huge = format!("SELECT FROM * SEED BM25('{words}') LIMIT 3");
    let error = query_error(&db, &huge);
    assert!(error.message.contains("at most 65536"), "{error}");
    assert!(error.to_string().len() < 400, "{error}");
    // A seed text through a parameter is bounded too, and not echoed.
    let params = Params::new().text("q", &words[..40_000]);
    let error = match db.query("SELECT FROM * SEED BM25($q) LIMIT 3", &params) {
        Err(Error::Query(error)) => error,
        other => panic!("expected a query error, got {other:?}"),
    };
    assert!(error.message.contains("40000 bytes"), "{error}");
    assert!(error.to_string().len() < 400, "{error}");
    // A fault at the end of a long line is shown in a window around it.
    let long = format!(
        "SELECT FROM * SEED BM25('{}') LIMTI 3",
        "compost ".repeat(500)
    );
    let error = query_error(&db, &long);
    let shown = error.to_string();
    assert!(shown.len() < 400, "{shown}");
    let lines: Vec<&str> = shown.lines().collect();
    let caret = lines[2].find('^').unwrap();
    let marked: String = lines[1].chars().skip(caret).take(5).collect();
    assert_eq!(marked, "LIMTI", "{shown}");
    assert!(lines[1].trim_start().starts_with('…'), "{shown}");
    // Below the limits, a long seed text still runs.
    let params = Params::new().text("q", &words[..15_000]);
    db.query("SELECT FROM * SEED BM25($q) LIMIT 3", &params)
        .unwrap();
}

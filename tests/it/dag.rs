//! The weighted DAG end to end: its invariants on real and random
//! documents, supplied attention, PROPAGATE, SHOW DAG and batched
//! propagation over the whole store.

use edudb::compute::aggregate::Segments;
use edudb::compute::device::Device;
use edudb::compute::embed::Embedder;
use edudb::compute::embed::hashed::HashedEmbedder;
use edudb::compute::propagate::{PropagateOptions, PropagationGraph, propagate};
use edudb::ingest::dag::attention::ComputedAttention;
use edudb::ingest::dag::bridge::BridgeIpMaker;
use edudb::ingest::dag::build::DagConfig;
use edudb::ingest::dag::ip::{EduVectors, ExtractiveIpMaker, IpMaker};
use edudb::ingest::dag::supplied::{SuppliedAttention, SuppliedWindow};
use edudb::model::dag::{Dag, WEIGHT_SUM_TOLERANCE};
use edudb::{Db, Document, Error, Format, IngestOptions, Params, Rows};
use proptest::prelude::*;
use tempfile::TempDir;

use crate::support::{ingest_markdown, markdown, rfcs, selection, store};

/// The largest RFCs (by bytes), so their DAGs have information-point levels.
fn large_rfcs(count: usize) -> Vec<std::path::PathBuf> {
    let mut files: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(rfcs())
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (std::fs::metadata(&p).unwrap().len(), p))
        .collect();
    files.sort();
    files
        .into_iter()
        .rev()
        .take(count)
        .map(|(_, p)| p)
        .collect()
}

/// A store holding the files at `paths`, each under its file stem.
fn store_with(paths: &[std::path::PathBuf]) -> (TempDir, Db) {
    let (dir, db) = store();
    for path in paths {
        let id = path.file_stem().unwrap().to_str().unwrap();
        db.ingest_bytes(id, std::fs::read(path).unwrap(), IngestOptions::default())
            .unwrap();
    }
    (dir, db)
}

/// Checks what every DAG must satisfy beyond [`Dag::validate`]: out-weights
/// sum to 1, every IP's text is its points' exact source text, chunks stay
/// near their target size.
fn check_dag(dag: &Dag, doc: &edudb::Document) -> Result<(), String> {
    dag.validate(doc.edus.len() as u32)?;
    let config = DagConfig::default();
    for (i, node) in dag.nodes.iter().enumerate() {
        let sum: f32 = dag.edges_of(i).map(|(_, w)| w).sum();
        if dag.edges_of(i).next().is_some() && (sum - 1.0).abs() > WEIGHT_SUM_TOLERANCE {
            return Err(format!("node {i} out-weights sum to {sum}"));
        }
        let text = dag.node_text(doc, i);
        for e in node.edus() {
            let edu = &doc.edus[e as usize];
            if !text.contains(&doc.text[edu.start as usize..edu.end as usize]) {
                return Err(format!("node {i}'s text lacks EDU {e}"));
            }
        }
        if node.level == 1 && node.span.len() > 1 {
            let tokens: u32 = node
                .edus()
                .iter()
                .map(|&e| doc.edus[e as usize].tokens)
                .sum();
            let last = doc.edus[node.span.last as usize].tokens;
            if tokens - last > config.chunk_tokens {
                return Err(format!("chunk {i} has {tokens} tokens"));
            }
        }
        // Only a point with no words (so no tokens to attend from) lacks edges.
        let has_words = !edudb::compute::embed::hashed::words(&text).is_empty();
        if node.level > 1 && dag.edges_of(i).next().is_none() && has_words {
            return Err(format!("information point {i} has no edges"));
        }
    }
    Ok(())
}

#[test]
fn rfc_dags_are_valid_multi_level_and_extractive() {
    let (_dir, db) = store_with(&large_rfcs(6));
    let mut levels_above_chunks = 0;
    for meta in db.documents().unwrap() {
        let dag = db.dag(&meta.id).unwrap();
        let doc = db.document(&meta.id).unwrap();
        check_dag(&dag, &doc).unwrap_or_else(|e| panic!("{}: {e}", meta.id));
        levels_above_chunks += usize::from(dag.top_level() - 1);
        // The top level is small, and every level below the top is pointed at.
        let top = dag
            .nodes
            .iter()
            .filter(|n| n.level == dag.top_level())
            .count();
        assert!(top <= DagConfig::default().top_nodes || dag.top_level() == 1);
        let targets: std::collections::HashSet<u32> = dag.targets.iter().copied().collect();
        assert!(
            targets.len()
                > dag
                    .nodes
                    .iter()
                    .filter(|n| n.level < dag.top_level())
                    .count()
                    / 2
        );
    }
    assert!(
        levels_above_chunks >= 6,
        "large RFCs have information points"
    );
    assert_eq!(db.check().unwrap().documents, 6);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random documents of 1 to 400 sentences over a small vocabulary
    /// (so attention has shared words to find): every DAG is valid, its
    /// out-weights sum to 1, chunks tile the document.
    #[test]
    fn random_documents_give_valid_dags(
        sentences in proptest::collection::vec(
            proptest::collection::vec(0usize..40, 3..18), 1..400),
        chunk_tokens in 40u32..400,
        window_tokens in 100u32..3000,
    ) {
        let words: Vec<String> = (0..40).map(|i| format!("w{}x{}", i % 7, i)).collect();
        let mut text = String::new();
        for (n, s) in sentences.iter().enumerate() {
            let sentence: Vec<&str> = s.iter().map(|&w| words[w].as_str()).collect();
            text.push_str(&format!("Start {}.", sentence.join(" ")));
            text.push_str(if n % 5 == 4 { "\n\n" } else { " " });
        }
        let doc = edudb::ingest::analyze("random", text, Format::Text).unwrap();
        let embedder = HashedEmbedder::new(64).unwrap();
        let edu_texts: Vec<&str> = doc.edus.iter().map(|e| &doc.text[e.start as usize..e.end as usize]).collect();
        let vectors: Vec<f32> = embedder.embed(&edu_texts).unwrap().concat();
        let config = DagConfig { chunk_tokens, window_tokens, ..DagConfig::default() };
        let dag = edudb::ingest::dag::build::build(
            &doc,
            &EduVectors::Full { values: &vectors, dimension: 64 },
            &config,
            &ExtractiveIpMaker::default(),
            None,
            &ComputedAttention::new(Device::Cpu),
        ).unwrap().0;
        dag.validate(doc.edus.len() as u32).map_err(TestCaseError::fail)?;
        for i in 0..dag.nodes.len() {
            let sum: f32 = dag.edges_of(i).map(|(_, w)| w).sum();
            prop_assert!(dag.edges_of(i).next().is_none() || (sum - 1.0).abs() <= WEIGHT_SUM_TOLERANCE);
        }
        let chunks: Vec<_> = dag.nodes.iter().filter(|n| n.level == 1).collect();
        prop_assert_eq!(chunks.first().map(|c| c.span.first), Some(0));
        prop_assert_eq!(chunks.last().map(|c| c.span.last), Some(doc.edus.len() as u32 - 1));
    }
}

/// A store whose one document has an information-point level.
fn one_large_rfc() -> (TempDir, Db, String) {
    let (dir, db) = store_with(&large_rfcs(1));
    let id = db.documents().unwrap()[0].id.clone();
    assert!(db.dag(&id).unwrap().top_level() >= 2);
    (dir, db, id)
}

/// The DAG's windows as the supplied-attention format defines them: the
/// information points sharing a `window` `[a, b]` (query nodes, by id) and
/// nodes `a..=b` (key nodes).
fn windows_of(dag: &Dag) -> Vec<(Vec<u32>, Vec<u32>)> {
    let mut windows: Vec<([u32; 2], Vec<u32>)> = Vec::new();
    for (i, node) in dag.nodes.iter().enumerate() {
        let Some(window) = node.window else { continue };
        match windows.last_mut() {
            Some((last, queries)) if *last == window => queries.push(i as u32),
            _ => windows.push((window, vec![i as u32])),
        }
    }
    windows
        .into_iter()
        .map(|([a, b], queries)| (queries, (a..=b).collect()))
        .collect()
}

/// Uniform attention (one token per node): every key node gets the same weight.
fn uniform(query_nodes: Vec<u32>, key_nodes: Vec<u32>) -> SuppliedWindow {
    let (q, k) = (query_nodes.len(), key_nodes.len());
    SuppliedWindow {
        attention: vec![1.0 / k as f32; q * k],
        query_tokens: q,
        key_tokens: k,
        query_segments: Segments::from_lengths(vec![1; q]),
        key_segments: Segments::from_lengths(vec![1; k]),
        query_nodes,
        key_nodes,
    }
}

#[test]
fn supplied_attention_reweights_edges_by_segment_means() {
    let (_dir, db, id) = one_large_rfc();
    let before = db.dag(&id).unwrap();
    let windows = windows_of(&before);
    // The first window holding 3 or more key nodes gets hand-made attention.
    let crafted = windows
        .iter()
        .position(|(_, keys)| keys.len() >= 3)
        .unwrap();
    let (queries, keys) = windows[crafted].clone();
    let ip = queries[0];
    // Row 0 is a prompt token; `ip` has rows 1..3; the other queries a row
    // each. Key nodes 0, 1, 2 have columns 0, 1..3 and 3; column 4 belongs
    // to none; every further key node has one column.
    let (rows, columns) = (3 + queries.len() - 1, 5 + keys.len() - 3);
    let mut attention = vec![0.0f32; rows * columns];
    attention[..5].copy_from_slice(&[0.9, 0.0, 0.0, 0.0, 0.1]);
    attention[columns..columns + 5].copy_from_slice(&[0.2, 0.2, 0.2, 0.0, 0.4]);
    attention[2 * columns..2 * columns + 5].copy_from_slice(&[0.4, 0.0, 0.4, 0.0, 0.2]);
    attention[3 * columns..].fill(0.5);
    let mut key_segments = vec![0..1, 1..3, 3..4];
    key_segments.extend((5..columns as u32).map(|c| c..c + 1));
    let query_segments: Vec<_> = std::iter::once(1..3)
        .chain((3..rows as u32).map(|r| r..r + 1))
        .collect();
    let mut supplied = SuppliedAttention {
        windows: windows
            .iter()
            .map(|(q, k)| uniform(q.clone(), k.clone()))
            .collect(),
    };
    supplied.windows[crafted] = SuppliedWindow {
        attention,
        query_tokens: rows,
        key_tokens: columns,
        query_nodes: queries.clone(),
        query_segments: Segments(query_segments),
        key_nodes: keys.clone(),
        key_segments: Segments(key_segments),
    };
    let file = TempDir::new().unwrap();
    let path = file.path().join("attention.safetensors");
    std::fs::write(&path, supplied.to_bytes().unwrap()).unwrap();
    let read = SuppliedAttention::read(&path).unwrap();
    assert_eq!(read, supplied);
    db.reweight_dag(&id, &read).unwrap();
    let after = db.dag(&id).unwrap();
    assert_eq!(after.nodes, before.nodes);
    // Segment means: key 0 (0.2 + 0.4) / 2 = 0.3; key 1 ((0.2 + 0.2) / 2
    // + (0.0 + 0.4) / 2) / 2 = 0.2; key 2 and the rest 0. Normalised: 0.6 and 0.4.
    let edges: Vec<(u32, f32)> = after.edges_of(ip as usize).collect();
    assert_eq!(edges.len(), 2, "{edges:?}");
    assert_eq!((edges[0].0, edges[1].0), (keys[0], keys[1]));
    assert!((edges[0].1 - 0.6).abs() < 1e-6, "{edges:?}");
    assert!((edges[1].1 - 0.4).abs() < 1e-6, "{edges:?}");
    // Every other point attends uniformly, so weighs its keys equally.
    for (q, k) in &windows {
        for &node in q.iter().filter(|&&n| n != ip) {
            let edges: Vec<(u32, f32)> = after.edges_of(node as usize).collect();
            assert_eq!(edges.iter().map(|e| e.0).collect::<Vec<_>>(), *k);
            assert!(
                edges
                    .iter()
                    .all(|e| (e.1 - 1.0 / k.len() as f32).abs() < 1e-6)
            );
        }
    }
    db.check().unwrap();
}

#[test]
fn bad_supplied_attention_is_refused_and_changes_nothing() {
    let (_dir, db, id) = one_large_rfc();
    let before = db.dag(&id).unwrap();
    let windows = windows_of(&before);
    let all = || SuppliedAttention {
        windows: windows
            .iter()
            .map(|(q, k)| uniform(q.clone(), k.clone()))
            .collect(),
    };
    let mut missing = all();
    missing.windows.pop();
    let mut wrong_keys = all();
    wrong_keys.windows[0].key_nodes.reverse();
    let mut extra = all();
    extra.windows.push(uniform(vec![999_999], vec![0]));
    let mut twice = all();
    twice.windows.push(twice.windows[0].clone());
    let cases = [
        (missing, "no window supplies attention for nodes"),
        (wrong_keys, "the DAG's window is"),
        (extra, "matches no window of the DAG"),
        (twice, "is a query node in windows 0 and"),
    ];
    for (supplied, expected) in cases {
        let error = db.reweight_dag(&id, &supplied).unwrap_err();
        assert!(matches!(error, Error::DagInput { .. }), "{error}");
        assert!(error.to_string().contains(expected), "{error}");
    }
    let valid = all().to_bytes().unwrap();
    for (bytes, expected) in [
        (b"not safetensors".to_vec(), "not a safetensors file"),
        (valid[..40].to_vec(), "not a safetensors file"),
    ] {
        let error = SuppliedAttention::from_bytes(&bytes, "attention.bin").unwrap_err();
        assert!(error.to_string().contains(expected), "{error}");
        assert!(error.to_string().starts_with("attention.bin"), "{error}");
    }
    assert_eq!(db.dag(&id).unwrap(), before);
    db.reweight_dag(&id, &all()).unwrap();
    db.check().unwrap();
}

#[test]
fn propagate_scores_edus_by_their_chunks_and_points_and_keeps_the_seeded_nodes() {
    let (_dir, db, id) = one_large_rfc();
    let question = "how are the changes tested and documented";
    let run = |statement: &str| {
        db.query(statement, &Params::new().text("q", question))
            .unwrap()
    };
    let Rows::Selection(edus) =
        run("SELECT SPANS FROM * WHERE kind = edu SEED BM25($q) LIMIT 100000").rows
    else {
        panic!("a selection")
    };
    let result = run(
        "EXPLAIN SELECT SPANS FROM * WHERE kind = edu SEED BM25($q) PROPAGATE ALPHA 0.5 ACROSS 0 LIMIT 100000",
    );
    assert!(
        result
            .stages
            .iter()
            .any(|s| s.operator == "propagate" && s.device == "cpu")
    );
    let Rows::Selection(propagated) = result.rows else {
        panic!("a selection")
    };
    // Expected: the DAG's nodes seeded by their best EDU's seed score and
    // propagated by the reference implementation; a seeded EDU scores
    // (1 − α)·own + α·(its chunk's score), a point's member α·(the point's
    // score), an EDU the best of these.
    let alpha = 0.5f32;
    let dag = db.dag(&id).unwrap();
    let doc = db.document(&id).unwrap();
    let mut edu_score = vec![0.0f32; doc.edus.len()];
    for item in &edus.items {
        edu_score[item.edus[0] as usize] = item.score;
    }
    let seeds: Vec<f32> = dag
        .nodes
        .iter()
        .map(|n| {
            n.edus()
                .iter()
                .map(|&e| edu_score[e as usize])
                .fold(0.0, f32::max)
        })
        .collect();
    let graph = PropagationGraph::from_edges(dag.nodes.len(), dag.edges());
    let options = PropagateOptions {
        steps: u32::from(dag.top_level() - 1),
        alpha,
    };
    let z = propagate(&graph, &seeds, 1, options);
    let mut expected = vec![0.0f32; doc.edus.len()];
    for (i, node) in dag.nodes.iter().enumerate() {
        if node.level == 1 {
            for e in node.span.first..=node.span.last {
                if edu_score[e as usize] > 0.0 {
                    let blended = (1.0 - alpha) * edu_score[e as usize] + alpha * z[i];
                    expected[e as usize] = expected[e as usize].max(blended);
                }
            }
        } else if z[i] > 0.0 {
            for &e in &node.points {
                expected[e as usize] = expected[e as usize].max(alpha * z[i]);
            }
        }
    }
    let returned: Vec<(u32, f32)> = propagated
        .items
        .iter()
        .map(|item| {
            assert_eq!(item.edus[0], item.edus[1], "one EDU per candidate");
            (item.edus[0], item.score)
        })
        .collect();
    let wanted: Vec<u32> = (0..doc.edus.len() as u32)
        .filter(|&e| expected[e as usize] > 0.0)
        .collect();
    let mut got: Vec<u32> = returned.iter().map(|&(e, _)| e).collect();
    got.sort_unstable();
    assert_eq!(got, wanted);
    for (e, score) in returned {
        assert!(
            (score - expected[e as usize]).abs() < 1e-5,
            "EDU {e}: {score} against {}",
            expected[e as usize]
        );
    }
    // Points carry relevance to EDUs the seed did not reach.
    assert!(
        wanted.iter().any(|&e| edu_score[e as usize] == 0.0),
        "some unseeded EDU is reached through a point"
    );
    // At ALPHA 0 (and ACROSS 0) propagation adds nothing: exactly the seeded EDUs come
    // back, with their own scores (no member of a point at score 0).
    let Rows::Selection(unmoved) =
        run("SELECT SPANS FROM * WHERE kind = edu SEED BM25($q) PROPAGATE ALPHA 0 ACROSS 0 LIMIT 100000")
            .rows
    else {
        panic!("a selection")
    };
    let scores = |items: &[edudb::Item]| -> Vec<(u32, String)> {
        let mut out: Vec<_> = items
            .iter()
            .map(|i| (i.edus[0], format!("{:.5}", i.score)))
            .collect();
        out.sort();
        out
    };
    assert_eq!(scores(&unmoved.items), scores(&edus.items));
    // The seeded tree nodes stay candidates: the best node of the plain
    // seed is picked by the propagated query too.
    let Rows::Selection(nodes) =
        run("SELECT FROM * WHERE kind != edu SEED BM25($q) ORDER BY SCORE LIMIT 1").rows
    else {
        panic!("a selection")
    };
    let Rows::Selection(nodes_propagated) =
        run("SELECT FROM * WHERE kind != edu SEED BM25($q) PROPAGATE ORDER BY SCORE LIMIT 1").rows
    else {
        panic!("a selection")
    };
    assert_eq!(nodes.items[0].edus, nodes_propagated.items[0].edus);
    // A budgeted PROPAGATE selects and linearises like every query.
    let Rows::Selection(budgeted) =
        run("SELECT FROM * SEED BM25($q) PROPAGATE BUDGET 300 TOKENS").rows
    else {
        panic!("a selection")
    };
    assert!(budgeted.tokens_used <= 300 && !budgeted.items.is_empty());
    assert!(
        budgeted
            .items
            .windows(2)
            .all(|w| w[0].edus[1] < w[1].edus[0])
    );
}

/// Two documents where the second hop is named only in the first:
/// "leland" matches the question, "overdrive" shares no word with it.
fn named_across_store() -> (TempDir, Db) {
    let (dir, db) = store();
    ingest_markdown(
        &db,
        "leland",
        "# Leland, North Carolina\n\nLeland is a town of Brunswick County. \
         Parts of the film Maximum Overdrive were filmed in Leland.\n",
    );
    ingest_markdown(
        &db,
        "overdrive",
        "# Maximum Overdrive\n\nMaximum Overdrive is a horror picture by Stephen King, \
         starring Emilio Estevez.\n",
    );
    ingest_markdown(
        &db,
        "wilmington",
        "# Wilmington\n\nWilmington is a port city with film studios.\n",
    );
    (dir, db)
}

#[test]
fn propagate_reaches_across_documents_to_the_sections_a_match_names() {
    let (_dir, db) = named_across_store();
    let question = Params::new().text("q", "What was filmed in Leland?");
    let run = |statement: &str| -> edudb::QueryResult { db.query(statement, &question).unwrap() };
    let items = |statement: &str| -> Vec<edudb::Item> {
        let Rows::Selection(s) = run(statement).rows else {
            panic!("a selection")
        };
        s.items
    };
    let in_overdrive =
        |items: &[edudb::Item]| items.iter().filter(|i| i.doc == "overdrive").count();
    // The plain seed never reaches the named film: no word is shared.
    assert_eq!(
        in_overdrive(&items("SELECT FROM * SEED BM25($q) LIMIT 100")),
        0
    );
    // PROPAGATE carries the best match's score across to the section it
    // names, whole (at ACROSS × that score) and as its first sentence.
    let best = items("SELECT FROM * SEED BM25($q) ORDER BY SCORE LIMIT 1")[0].score;
    for (across, clause) in [(0.8f32, ""), (0.5, " ACROSS 0.5")] {
        let found = items(&format!(
            "SELECT FROM * SEED BM25($q) PROPAGATE{clause} ORDER BY SCORE LIMIT 100"
        ));
        let section = found
            .iter()
            .find(|i| i.doc == "overdrive" && i.kind == "section")
            .unwrap_or_else(|| panic!("the named section at ACROSS {across}: {found:?}"));
        assert!(
            (section.score - across * best).abs() < 1e-6,
            "{} against {across} x {best}",
            section.score
        );
        let spans = items(&format!(
            "SELECT SPANS FROM * WHERE kind = edu SEED BM25($q) PROPAGATE{clause} LIMIT 100"
        ));
        assert!(
            spans
                .iter()
                .any(|i| i.doc == "overdrive" && i.text.starts_with("Maximum Overdrive is")),
            "the named section's first sentence: {spans:?}"
        );
    }
    // EXPLAIN counts the sections named.
    let explained = run("EXPLAIN SELECT FROM * SEED BM25($q) PROPAGATE LIMIT 100");
    let stage = explained
        .stages
        .iter()
        .find(|s| s.operator == "propagate")
        .unwrap();
    assert!(
        stage.detail.ends_with("sections named across: 1"),
        "{}",
        stage.detail
    );
    // ACROSS 0 keeps propagation within each document's DAG.
    assert_eq!(
        in_overdrive(&items(
            "SELECT FROM * SEED BM25($q) PROPAGATE ACROSS 0 LIMIT 100"
        )),
        0
    );
    // A scope bounds where relevance may go.
    assert_eq!(
        in_overdrive(&items(
            "SELECT FROM docs('{leland,wilmington}') SEED BM25($q) PROPAGATE LIMIT 100"
        )),
        0
    );
}

#[test]
fn a_section_the_question_names_scores_as_the_best_candidate() {
    let (_dir, db) = named_across_store();
    // A near-namesake: every word of its title is in the question, but not
    // as the title's run of words.
    ingest_markdown(
        &db,
        "namesake",
        "# Overdrive Maximum\n\nOverdrive Maximum was a concert tour.\n",
    );
    // The question names "Maximum Overdrive", but its commoner words match
    // the port city better.
    let question = Params::new().text(
        "q",
        "Which port city with film studios lies near where Maximum Overdrive was shot?",
    );
    let items = |statement: &str| -> Vec<edudb::Item> {
        let Rows::Selection(s) = db.query(statement, &question).unwrap().rows else {
            panic!("a selection")
        };
        s.items
    };
    let section_score = |items: &[edudb::Item], doc: &str| {
        items
            .iter()
            .find(|i| i.doc == doc && i.kind == "section")
            .map(|i| i.score)
    };
    let seeded = items("SELECT FROM * SEED BM25($q) ORDER BY SCORE LIMIT 100");
    let best = seeded[0].score;
    assert_ne!(seeded[0].doc, "overdrive", "{seeded:?}");
    assert!(
        section_score(&seeded, "overdrive").is_none_or(|s| s < best),
        "{seeded:?}"
    );
    // PROPAGATE gives the named section the best candidate's score (not
    // ACROSS × it: the question is what every score measures relevance to),
    // and not the near-namesake.
    for clause in ["", " ACROSS 0.5"] {
        let found = items(&format!(
            "SELECT FROM * SEED BM25($q) PROPAGATE{clause} ORDER BY SCORE LIMIT 100"
        ));
        assert_eq!(
            section_score(&found, "overdrive"),
            Some(best),
            "{clause}: {found:?}"
        );
        assert!(
            section_score(&found, "namesake").is_none_or(|s| s < best),
            "{clause}: {found:?}"
        );
    }
    // ACROSS 0 turns the question's names off with the rest.
    let within = items("SELECT FROM * SEED BM25($q) PROPAGATE ACROSS 0 ORDER BY SCORE LIMIT 100");
    assert!(
        section_score(&within, "overdrive").is_none_or(|s| s < best),
        "{within:?}"
    );
    // A scope bounds what the question may name.
    let scoped = items("SELECT FROM docs('{leland,wilmington}') SEED BM25($q) PROPAGATE LIMIT 100");
    assert!(
        !scoped.is_empty() && scoped.iter().all(|i| i.doc != "overdrive"),
        "{scoped:?}"
    );
}

#[test]
fn a_generic_heading_is_never_named_across_documents() {
    let (_dir, db) = store();
    // Twenty documents share a "Motivation" section; one also has a
    // specific one.
    for i in 0..20 {
        ingest_markdown(
            &db,
            &format!("rfc-{i}"),
            &format!("# Proposal {i}\n\n## Motivation\n\nReason number {i} for it.\n"),
        );
    }
    ingest_markdown(
        &db,
        "pinning",
        "# Pinning\n\nPinning keeps a value at one address.\n",
    );
    ingest_markdown(
        &db,
        "asker",
        "# Asker\n\nThe Motivation for Pinning is explained by the zebra team.\n",
    );
    let Rows::Selection(found) = db
        .query(
            "SELECT FROM * SEED BM25('zebra team') PROPAGATE LIMIT 100",
            &Params::new(),
        )
        .unwrap()
        .rows
    else {
        panic!("a selection")
    };
    assert!(
        found.items.iter().any(|i| i.doc == "pinning"),
        "the specific title is named: {found:?}"
    );
    assert!(
        found.items.iter().all(|i| !i.doc.starts_with("rfc-")),
        "the generic heading is not: {found:?}"
    );
}

#[test]
fn show_dag_lists_nodes_and_edges_with_their_text() {
    let (_dir, db, id) = one_large_rfc();
    let dag = db.dag(&id).unwrap();
    let result = db
        .query(&format!("SHOW DAG doc('{id}')"), &Params::new())
        .unwrap();
    let json = result.to_json();
    assert_eq!(
        json["dag"]["nodes"].as_array().unwrap().len(),
        dag.nodes.len()
    );
    assert_eq!(
        json["dag"]["edges"].as_array().unwrap().len(),
        dag.targets.len()
    );
    let first = &json["dag"]["nodes"][0];
    let doc = db.document(&id).unwrap();
    assert_eq!(first["text"], dag.node_text(&doc, 0));
    let Rows::Dag(level_two) = db
        .query(&format!("SHOW DAG doc('{id}') LEVEL 2"), &Params::new())
        .unwrap()
        .rows
    else {
        panic!("a DAG listing")
    };
    assert!(!level_two.nodes.is_empty() && level_two.nodes.iter().all(|n| n.level == 2));
    assert!(
        level_two
            .edges
            .iter()
            .all(|e| dag.nodes[e.to as usize].level == 1)
    );
}

#[test]
fn batched_propagation_equals_each_query_alone() {
    let (_dir, db) = store_with(&large_rfcs(3));
    let queries = [
        "error handling",
        "unsafe code and soundness",
        "traits and generics",
    ];
    let options = PropagateOptions {
        steps: 3,
        alpha: 0.6,
    };
    let together = db.propagate_texts(&queries, options, 10).unwrap();
    assert_eq!(together.len(), 3);
    for (query, hits) in queries.iter().zip(&together) {
        assert_eq!(&db.propagate_texts(&[query], options, 10).unwrap()[0], hits);
        assert!(!hits.is_empty() && hits.len() <= 10);
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        for hit in hits {
            let dag = db.dag(&hit.doc).unwrap();
            assert_eq!(dag.nodes[hit.node as usize].span, hit.edus);
        }
    }
    let index = db.dag_index().unwrap();
    let error = db.propagate_batch(&[1.0; 3], 2, options, 5).unwrap_err();
    assert!(
        error
            .to_string()
            .contains(&format!("{} nodes", index.nodes.len())),
        "{error}"
    );
    // The store-wide graph follows writes.
    db.remove(&index.documents[0]).unwrap();
    assert_eq!(db.dag_index().unwrap().documents.len(), 2);
}

#[test]
fn small_documents_have_only_chunks_and_propagate_still_answers() {
    let (_dir, db) = store();
    db.ingest_bytes(
        "tiny",
        b"# Tiny\n\nOne short sentence here. Another one.".to_vec(),
        markdown(),
    )
    .unwrap();
    let dag = db.dag("tiny").unwrap();
    assert_eq!(dag.top_level(), 1);
    assert!(dag.targets.is_empty());
    let found = selection(
        &db,
        "SELECT FROM * SEED BM25('short sentence') PROPAGATE LIMIT 3",
    );
    assert!(!found.items.is_empty());
}

// ---------------------------------------------------------------------------
// Information points from shared terms

/// Two paragraphs that share one rare name, and filler that shares
/// only common words.
fn bridge_document() -> Document {
    let text = "The film Lanterns was directed by Orvald Brisk. It opened in the spring. \
                The studio sold the film to a large network.\n\n\
                The weather was mild that year. The harvest was large and the market was busy.\n\n\
                Orvald Brisk was born in a small harbour town. His father was a ferry pilot.\n";
    edudb::ingest::analyze("d", text.into(), Format::Text).unwrap()
}

fn hashed_edu_vectors(doc: &Document) -> Vec<f32> {
    let texts: Vec<&str> = (doc.edus.iter())
        .map(|e| &doc.text[e.start as usize..e.end as usize])
        .collect();
    HashedEmbedder::new(64)
        .unwrap()
        .embed(&texts)
        .unwrap()
        .concat()
}

fn edu_text(doc: &Document, e: u32) -> &str {
    let edu = &doc.edus[e as usize];
    &doc.text[edu.start as usize..edu.end as usize]
}

#[test]
fn a_shared_name_becomes_a_point_spanning_the_nodes_that_mention_it() {
    let doc = bridge_document();
    let values = hashed_edu_vectors(&doc);
    let vectors = EduVectors::Full {
        values: &values,
        dimension: 64,
    };
    // Each paragraph is one lower node.
    let mut batch: Vec<Vec<u32>> = vec![Vec::new()];
    for (e, edu) in doc.edus.iter().enumerate() {
        if e > 0 && doc.text[..edu.start as usize].ends_with("\n\n") {
            batch.push(Vec::new());
        }
        batch.last_mut().unwrap().push(e as u32);
    }
    assert_eq!(batch.len(), 3, "three paragraphs");
    let maker = BridgeIpMaker {
        max_share: 0.3,
        ..BridgeIpMaker::default()
    };
    let points = maker.make(&doc, &vectors, &batch, 64);
    let bridge = points
        .iter()
        .find(|p| {
            p.iter()
                .any(|&e| edu_text(&doc, e).contains("directed by Orvald"))
        })
        .expect("a point holds the first mention");
    assert!(
        bridge
            .iter()
            .any(|&e| edu_text(&doc, e).contains("Orvald Brisk was born")),
        "the point reaches the other paragraph: {:?}",
        bridge
            .iter()
            .map(|&e| edu_text(&doc, e))
            .collect::<Vec<_>>()
    );
    for point in &points {
        assert!(!point.is_empty() && point.windows(2).all(|w| w[0] < w[1]));
    }
    let tokens: u32 = points
        .iter()
        .flatten()
        .map(|&e| doc.edus[e as usize].tokens)
        .sum();
    assert!(tokens <= 64, "within the budget: {tokens}");
}

#[test]
fn without_shared_terms_the_points_are_the_extractive_ones() {
    let text = "Apples grow slowly. Rivers bend eastward. Copper conducts heat.\n";
    let doc = edudb::ingest::analyze("d", text.into(), Format::Text).unwrap();
    let values = hashed_edu_vectors(&doc);
    let vectors = EduVectors::Full {
        values: &values,
        dimension: 64,
    };
    let batch = vec![(0..doc.edus.len() as u32).collect::<Vec<_>>()];
    let points = BridgeIpMaker::default().make(&doc, &vectors, &batch, 8);
    let extractive = ExtractiveIpMaker::default().make(&doc, &vectors, &batch, 8);
    assert!(!points.is_empty());
    assert_eq!(points, extractive);
}

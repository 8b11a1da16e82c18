//! PECAN's information points written by a chat model (`--ip-maker llm`):
//! stored with their text, given coordinates by attention, invented ones
//! dropped and counted, invalid replies falling back to the model-free
//! points; the document's coordinates untouched whatever the model says.

use std::sync::Arc;

use edudb::compute::device::Device;
use edudb::compute::embed::Embedder;
use edudb::compute::embed::hashed::HashedEmbedder;
use edudb::ingest::dag::attention::ComputedAttention;
use edudb::ingest::dag::bridge::BridgeIpMaker;
use edudb::ingest::dag::build::{DagConfig, SUPPORT_EDUS};
use edudb::ingest::dag::ip::EduVectors;
use edudb::ingest::dag::llm::{IpWriterOptions, LlmIpWriter, PointWindow};
use edudb::model::dag::{Dag, WEIGHT_SUM_TOLERANCE};
use edudb::{Document, Error, Format, IngestOptions, IpMakerKind};
use proptest::prelude::*;
use serde_json::json;

use crate::scripted::ScriptedChat;
use crate::support::{edudb, stderr, store_asking};

/// Sixty short paragraphs of distinct facts: about 2,000 tokens, so the
/// DAG has a level of information points over its chunks.
pub fn towns() -> String {
    (0..60)
        .map(|i| {
            format!(
                "Town {i} lies beside the river Aro{i}. Its mayor Mira{i} opened a library in {}.\n\n",
                1900 + i
            )
        })
        .collect()
}

/// The first sentence of each part of an information-point request.
fn first_sentences(user: &str) -> Vec<String> {
    user.lines()
        .filter_map(|l| l.strip_prefix("Part "))
        .filter_map(|l| l.split_once(": "))
        .map(|(_, text)| format!("{}.", text.split('.').next().unwrap()))
        .collect()
}

/// A model writing two points per window, each a sentence of the window,
/// and one invented point sharing no word with it.
pub fn faithful_but_for_one() -> ScriptedChat {
    ScriptedChat::new().on("information_points", |request, _| {
        let mut points: Vec<String> = first_sentences(&request.user).into_iter().take(2).collect();
        points.push("Quantum zebras orbit Neptune.".into());
        json!({ "points": points }).to_string()
    })
}

pub fn written() -> IngestOptions {
    IngestOptions {
        format: Some(Format::Text),
        ip_maker: IpMakerKind::Llm,
        ..Default::default()
    }
}

/// The DAG's invariants, and every written point's coordinates inside its
/// span.
fn assert_valid(dag: &Dag, doc: &Document) {
    dag.validate(doc.edus.len() as u32).unwrap();
    for node in dag.nodes.iter().filter(|n| n.text.is_some()) {
        assert!((1..=SUPPORT_EDUS).contains(&node.points.len()), "{node:?}");
        assert!(
            node.points
                .iter()
                .all(|&e| node.span.first <= e && e <= node.span.last)
        );
    }
}

/// Each written point (a sentence of its window, as
/// [`faithful_but_for_one`] writes them) has the EDU holding that sentence
/// among its coordinates, and its strongest edge is to that EDU's chunk.
pub fn assert_linked_to_their_sources(dag: &Dag, doc: &Document) {
    let points: Vec<(usize, &str)> = (dag.nodes.iter().enumerate())
        .filter_map(|(i, n)| n.text.as_deref().map(|t| (i, t)))
        .collect();
    assert!(!points.is_empty());
    for &(i, point) in &points {
        assert_ne!(point, "Quantum zebras orbit Neptune.");
        let node = &dag.nodes[i];
        let source = (node.span.first..=node.span.last)
            .find(|&e| {
                let edu = &doc.edus[e as usize];
                &doc.text[edu.start as usize..edu.end as usize] == point
            })
            .unwrap_or_else(|| panic!("{point:?} is no EDU of its span"));
        assert!(node.points.contains(&source), "{point:?}: {node:?}");
        let (strongest, _) = dag.edges_of(i).max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        let chunk = &dag.nodes[strongest as usize];
        assert!(chunk.span.first <= source && source <= chunk.span.last);
        assert_eq!(dag.node_text(doc, i), point);
    }
}

#[test]
fn written_points_are_stored_with_their_text_and_linked_by_attention() {
    let chat = Arc::new(faithful_but_for_one());
    let (_dir, db) = store_asking(chat.clone());
    let text = towns();
    db.ingest_bytes("towns", text.clone().into_bytes(), written())
        .unwrap();
    // The document is exactly what the model-free ingest stores.
    let doc = db.document("towns").unwrap();
    assert_eq!(
        doc,
        edudb::ingest::analyze("towns", text, Format::Text).unwrap()
    );
    let dag = db.dag("towns").unwrap();
    assert_valid(&dag, &doc);
    let windows = chat.asked("information_points");
    assert!(windows >= 1);
    let points: Vec<(usize, &str)> = (dag.nodes.iter().enumerate())
        .filter_map(|(i, n)| n.text.as_deref().map(|t| (i, t)))
        .collect();
    assert_eq!(points.len(), 2 * windows, "two kept per window");
    assert_linked_to_their_sources(&dag, &doc);
    // Supplied attention re-weights model-free points only.
    let supplied = edudb::ingest::dag::supplied::SuppliedAttention {
        windows: Vec::new(),
    };
    let refused = db.reweight_dag("towns", &supplied).unwrap_err();
    assert!(
        matches!(&refused, Error::DagInput { message, .. } if message.contains("--ip-maker llm")),
        "{refused:?}"
    );
    assert_eq!(db.dag("towns").unwrap(), dag);
    // The listing says which text is the model's.
    let listing = db.dag_listing("towns", Some(2)).unwrap();
    assert!(listing.nodes.iter().all(|n| n.written));
    // What it cost, with the invented points counted.
    let costs = db.build_costs().unwrap();
    let cost = costs[0].1;
    assert_eq!(cost.calls as usize, windows);
    assert_eq!(cost.dropped_points as usize, windows);
    assert_eq!(cost.fallbacks, 0);
    // Retrieval over the written points stays in document coordinates.
    let result = db
        .query(
            "SELECT SPANS FROM * SEED BM25('mayor Mira7 library') PROPAGATE BUDGET 120 TOKENS",
            &edudb::Params::new(),
        )
        .unwrap();
    let rows = result.to_json();
    assert!(rows.to_string().contains("Mira7"), "{rows}");
}

#[test]
fn replies_that_stay_invalid_fall_back_to_the_model_free_points() {
    let chat = Arc::new(ScriptedChat::new().on("information_points", |_, _| {
        json!({ "points": ["   "] }).to_string()
    }));
    let (_dir, db) = store_asking(chat.clone());
    let text = towns();
    db.ingest_bytes("llm", text.clone().into_bytes(), written())
        .unwrap();
    db.ingest_bytes("plain", text.into_bytes(), IngestOptions::default())
        .unwrap();
    // Every window was asked three times (a pass whose model-free points
    // did not shrink the level was asked again over wider windows).
    let windows = chat.asked("information_points") / 3;
    assert!(windows >= 1);
    assert_eq!(chat.asked("information_points"), 3 * windows);
    // Every window fell back: the DAG is the model-free one.
    let dag = db.dag("llm").unwrap();
    assert_eq!(dag, db.dag("plain").unwrap());
    // Every call is paid for; the fallbacks counted are the DAG's own
    // windows, not those of a pass asked again.
    let kept: std::collections::BTreeSet<(u16, Option<[u32; 2]>)> = (dag.nodes.iter())
        .filter(|n| n.level > 1)
        .map(|n| (n.level, n.window))
        .collect();
    let cost = db.build_costs().unwrap()[0].1;
    assert_eq!(
        (cost.calls as usize, cost.fallbacks as usize),
        (3 * windows, kept.len())
    );
    // Each re-ask said why.
    let seen = chat.seen.lock().unwrap();
    assert!(
        seen[windows].user.contains("point 1 is blank"),
        "{}",
        seen[windows].user
    );
}

#[test]
fn the_llm_ip_maker_without_a_chat_model_is_a_user_error() {
    let (dir, db) = crate::support::store();
    let err = db
        .ingest_bytes("d", towns().into_bytes(), written())
        .unwrap_err();
    assert!(matches!(err, Error::NoChatModel { .. }), "{err:?}");
    assert!(db.documents().unwrap().is_empty());
    let file = dir.path().join("d.txt");
    std::fs::write(&file, "One line.").unwrap();
    let store = dir.path().join("cli");
    for (flag, says) in [("llm", "needs a chat model"), ("oracle", "bridge or llm")] {
        let out = edudb(
            &store,
            &["ingest", file.to_str().unwrap(), "--ip-maker", flag],
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
}

#[test]
fn each_rule_refuses_a_reply_with_its_reason_and_the_re_ask_says_it() {
    // Three nodes and 60 tokens: at most 2 points.
    let window = PointWindow {
        nodes: vec![
            "Town 3 lies beside the river Aro3.".into(),
            "Its mayor Mira3 opened a library in 1903.".into(),
            "Town 4 lies beside the river Aro4.".into(),
        ],
        budget: 60,
    };
    let good_reply = || json!({"points": ["Mira3 opened a library in 1903."]}).to_string();
    let good = good_reply();
    let long = "word ".repeat(70);
    let many: Vec<String> = (0..40).map(|i| format!("Town {i}.")).collect();
    let wordy: Vec<String> = (0..2).map(|_| "Mira3 ".repeat(50)).collect();
    for (bad, reason) in [
        ("no json".to_owned(), "not the requested JSON"),
        (json!({"points": []}).to_string(), "has no points"),
        (json!({"points": many}).to_string(), "write at most 2"),
        (
            json!({"points": [long]}).to_string(),
            "longer than 300 characters",
        ),
        (
            json!({"points": ["Mira3\u{7} rang."]}).to_string(),
            "control characters",
        ),
        (json!({"points": wordy}).to_string(), "keep them under 120"),
    ] {
        let answers = [bad.clone(), good.clone()];
        let chat =
            ScriptedChat::new().on("information_points", move |_, n| answers[n.min(1)].clone());
        let writer = LlmIpWriter::new(&chat, IpWriterOptions::default());
        let (points, cost) = writer.write(std::slice::from_ref(&window)).unwrap();
        assert_eq!(
            points,
            vec![Some(vec!["Mira3 opened a library in 1903.".to_owned()])],
            "{bad}"
        );
        assert_eq!((cost.calls, cost.fallbacks), (2, 0));
        let seen = chat.seen.lock().unwrap();
        assert!(seen[1].user.contains(reason), "{bad}: {}", seen[1].user);
        assert_eq!(seen[0].schema["properties"]["points"]["maxItems"], 2);
    }
    // Never as many points as the window has nodes: the level shrinks.
    let chat = ScriptedChat::new().on("information_points", move |_, _| good_reply());
    let writer = LlmIpWriter::new(&chat, IpWriterOptions::default());
    let two = PointWindow {
        nodes: window.nodes[..2].to_vec(),
        budget: 1_000,
    };
    writer.write(&[two]).unwrap();
    assert_eq!(
        chat.seen.lock().unwrap()[0].schema["properties"]["points"]["maxItems"],
        1
    );
    // Repeats are kept once; an invented point is dropped and counted.
    let chat = ScriptedChat::new().on("information_points", |_, _| {
        json!({"points": ["Aro3 is a river.", "aro3 IS a river.", "Zebras fly."]}).to_string()
    });
    let writer = LlmIpWriter::new(&chat, IpWriterOptions::default());
    let mut window = PointWindow {
        budget: 100,
        ..window
    };
    window
        .nodes
        .push("Its mayor Mira4 opened a library in 1904.".into());
    window
        .nodes
        .push("Town 5 lies beside the river Aro5.".into());
    let (points, cost) = writer.write(&[window]).unwrap();
    assert_eq!(points, vec![Some(vec!["Aro3 is a river.".to_owned()])]);
    assert_eq!((cost.dropped_points, cost.fallbacks), (1, 0));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever points the model writes (blank, invented, repeated, of any
    /// characters), the DAG keeps its invariants and the written points
    /// their coordinates.
    #[test]
    fn any_written_points_keep_the_dag_valid(
        points in prop::collection::vec(prop_oneof![
            "[ a-zA-Z0-9.,\u{e9}\u{4e2d}]{0,60}",
            prop::collection::vec(
                prop::sample::select(vec!["Town", "river", "Mira3", "Aro12", "library", "zebra", "the"]),
                1..6,
            ).prop_map(|words| words.join(" ")),
        ], 0..8),
        chunk_tokens in 40u32..200,
    ) {
        let text = towns();
        let doc = edudb::ingest::analyze("towns", text, Format::Text).unwrap();
        let edu_texts: Vec<&str> = doc.edus.iter().map(|e| &doc.text[e.start as usize..e.end as usize]).collect();
        let vectors: Vec<f32> = HashedEmbedder::new(64).unwrap().embed(&edu_texts).unwrap().concat();
        let reply = json!({ "points": points }).to_string();
        let chat = ScriptedChat::new().on("information_points", move |_, _| reply.clone());
        let writer = LlmIpWriter::new(&chat, IpWriterOptions::default());
        let config = DagConfig { chunk_tokens, window_tokens: 600, ..DagConfig::default() };
        let (dag, cost) = edudb::ingest::dag::build::build(
            &doc,
            &EduVectors::Full { values: &vectors, dimension: 64 },
            &config,
            &BridgeIpMaker::default(),
            Some(&writer),
            &ComputedAttention::new(Device::Cpu),
        ).unwrap();
        dag.validate(doc.edus.len() as u32).map_err(TestCaseError::fail)?;
        for (i, node) in dag.nodes.iter().enumerate() {
            let sum: f32 = dag.edges_of(i).map(|(_, w)| w).sum();
            prop_assert!(dag.edges_of(i).next().is_none() || (sum - 1.0).abs() <= WEIGHT_SUM_TOLERANCE);
            if let Some(text) = &node.text {
                prop_assert!(points.iter().any(|p| p.trim() == text));
                prop_assert!(!node.points.is_empty() && node.points.len() <= SUPPORT_EDUS);
            }
        }
        prop_assert!(u64::from(cost.calls) >= u64::from(cost.fallbacks));
    }
}

#[test]
fn cancelling_while_the_model_writes_stops_the_ingest_with_whole_documents_only() {
    let cancel = edudb::CancelToken::new();
    let on_call = cancel.clone();
    // The model is asked for the first document's points; the caller
    // cancels while it answers.
    let chat = Arc::new(
        ScriptedChat::new().on("information_points", move |request, _| {
            on_call.cancel();
            let points: Vec<String> = first_sentences(&request.user).into_iter().take(1).collect();
            json!({ "points": points }).to_string()
        }),
    );
    let (_dir, db) = store_asking(chat.clone());
    let sources: Vec<edudb::Source> = (0..4)
        .map(|i| edudb::Source {
            id: format!("towns-{i}"),
            origin: edudb::ingest::sources::Origin::Bytes(towns().into_bytes()),
        })
        .collect();
    let err = db
        .ingest(&sources, written(), &edudb::NoProgress, &cancel)
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err:?}");
    // Whatever was written before the cancellation is whole; the rest is
    // absent, and the store checks clean.
    let stored = db.documents().unwrap();
    assert!(stored.len() < sources.len(), "{stored:?}");
    assert_eq!(db.check().unwrap().documents, stored.len());
    for meta in &stored {
        let doc = db.document(&meta.id).unwrap();
        db.dag(&meta.id)
            .unwrap()
            .validate(doc.edus.len() as u32)
            .unwrap();
    }
}

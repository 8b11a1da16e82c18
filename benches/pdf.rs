//! PDF extraction on the FinanceBench dev filings
//! (`../shared/data/financebench_dev`): pages per second through
//! edudb's PDF layout stage (pdf_oxide, then lines, furniture, tables,
//! headings), and how much of each evidence page comes out: the share of
//! the word bigrams of its `evidence_text_full_page` in the page's stored
//! text, and in its EDUs alone (running headers and folios left out).
//! Then the cost of ingesting the longest filing as a whole process: time,
//! pages per second and peak memory against the text it yields (target:
//! ≤ 10×). `benches/pdf/extractors.py` measures Python's extractors on the
//! same pages with the same bigrams, for the table in docs/benchmarks.md.
//!
//! `cargo bench --bench pdf`

mod common;

use std::collections::HashMap;
use std::time::Instant;

use edudb::CancelToken;
use edudb::eval::bigrams::word_bigrams as bigrams;
use edudb::ingest::layout::pdf;

/// The share of `wanted`'s bigrams in `found`.
fn recall(wanted: &str, found: &str) -> f64 {
    let wanted = bigrams(wanted);
    if wanted.is_empty() {
        return 1.0;
    }
    let found = bigrams(found);
    wanted.intersection(&found).count() as f64 / wanted.len() as f64
}

fn main() {
    let data = common::shared_data().join("financebench_dev");
    let mut evidence: HashMap<(String, u32), String> = HashMap::new();
    for line in std::fs::read_to_string(data.join("questions.jsonl"))
        .unwrap()
        .lines()
    {
        let question: serde_json::Value = serde_json::from_str(line).unwrap();
        let doc = question["doc_name"].as_str().unwrap().to_owned();
        for item in question["evidence"].as_array().unwrap() {
            let page = item["evidence_page_num"].as_u64().unwrap() as u32;
            let full = item["evidence_text_full_page"].as_str().unwrap().to_owned();
            evidence.insert((doc.clone(), page), full);
        }
    }
    let mut paths: Vec<_> = (std::fs::read_dir(data.join("pdfs")).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let (mut pages, mut seconds) = (0usize, 0.0f64);
    let (mut page_recall, mut edu_recall) = (Vec::new(), Vec::new());
    for path in &paths {
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let bytes = std::fs::read(path).unwrap();
        let started = Instant::now();
        let (layout, geometry) = pdf::parse(&name, bytes, &CancelToken::new(), &|_, _| {}).unwrap();
        seconds += started.elapsed().as_secs_f64();
        pages += geometry.pages.len();
        let text_len = layout.text.len() as u32;
        for ((_, page), full) in evidence.iter().filter(|((doc, _), _)| *doc == name) {
            let bytes = geometry.bytes_of_pages(*page..page + 1, text_len);
            let page_text = &layout.text[bytes.start as usize..bytes.end as usize];
            page_recall.push(recall(full, page_text));
            let in_blocks: Vec<&str> = (layout.blocks.iter())
                .filter(|b| {
                    b.range.start >= bytes.start as usize && b.range.end <= bytes.end as usize
                })
                .map(|b| &layout.text[b.range.clone()])
                .collect();
            edu_recall.push(recall(full, &in_blocks.join("\n")));
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!("edudb PDF layout (pdf_oxide) on {} filings:", paths.len());
    println!(
        "  {pages} pages in {seconds:.1} s: {:.1} pages/s (one thread)",
        pages as f64 / seconds
    );
    println!(
        "  evidence pages: {}; bigram recall of the page text {:.4}, of its EDUs {:.4}",
        page_recall.len(),
        mean(&page_recall),
        mean(&edu_recall)
    );
    // The longest filing ingested by the CLI, as a whole process.
    let longest = data.join("pdfs/3M_2022_10K.pdf");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (took, peak) = common::edudb(&db, &["ingest", longest.to_str().unwrap()]);
    let store = edudb::Db::open(&db).unwrap();
    let meta = store.documents().unwrap().remove(0);
    let page_count = store.pages(&meta.id).unwrap().unwrap().pages.len();
    println!(
        "ingest of {} ({page_count} pages, {:.2} MB of text) with the default embedder: \
         {:.1} s, {:.1} pages/s, peak memory {:.0} MB = {:.1}x the text",
        meta.id,
        meta.bytes as f64 / 1e6,
        took.as_secs_f64(),
        page_count as f64 / took.as_secs_f64(),
        peak as f64 / 1e6,
        peak as f64 / meta.bytes as f64
    );
}

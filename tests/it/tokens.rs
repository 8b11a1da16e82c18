//! Token counts: edudb's o200k_base counter (bpe-openai) against the
//! reference tokenizer (tiktoken-rs) on every EDU of the RFC corpus.

use edudb::Format;
use edudb::ingest::pipeline::analyze;

use crate::support::rfc_sources;

#[test]
fn every_rfc_edu_has_tiktokens_count() {
    let reference = tiktoken_rs::o200k_base_singleton();
    let mut checked = 0usize;
    for source in rfc_sources(usize::MAX) {
        let text = String::from_utf8(source.read().unwrap()).unwrap();
        let doc = analyze(&source.id, text, Format::Markdown).unwrap();
        for edu in &doc.edus {
            let slice = &doc.text[edu.start as usize..edu.end as usize];
            let expected = reference.encode_ordinary(slice).len() as u32;
            assert_eq!(
                edu.tokens, expected,
                "{} EDU {}: {slice:?}",
                source.id, edu.id
            );
            checked += 1;
        }
    }
    assert!(checked > 50_000, "only {checked} EDUs");
}

#[test]
fn special_tokens_count_as_text_and_odd_text_counts() {
    let reference = tiktoken_rs::o200k_base_singleton();
    for text in [
        "",
        "<|endoftext|> is text here",
        "naïve café — 東京 🦀🦀 \u{200b}",
        "    indented\tcode();\r\n",
        &"a".repeat(5_000),
    ] {
        assert_eq!(
            edudb::model::tokens::count(text),
            reference.encode_ordinary(text).len() as u32,
            "{text:?}"
        );
    }
}

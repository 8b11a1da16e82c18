//! Property tests of the invariants every analysed document must meet:
//! EDUs are exact, ordered, disjoint, trimmed coordinates that cover every
//! word of the prose; tree spans nest and tile; no node is too wide.

use edudb::ingest::analyze;
use edudb::ingest::segment::{MIN_CLAUSE_WORDS, split_edus};
use edudb::ingest::tree::MAX_FANOUT;
use edudb::{Document, Format};
use proptest::prelude::*;

/// Checks EDU coordinates and the tree against the document.
fn check_document(doc: &Document) -> Result<(), TestCaseError> {
    let words = collapse(&doc.text);
    let mut previous_end = 0usize;
    for (index, edu) in doc.edus.iter().enumerate() {
        let (start, end) = (edu.start as usize, edu.end as usize);
        prop_assert_eq!(edu.id as usize, index);
        prop_assert!(start < end && start >= previous_end && end <= doc.text.len());
        prop_assert!(doc.text.is_char_boundary(start) && doc.text.is_char_boundary(end));
        let slice = &doc.text[start..end];
        prop_assert_eq!(slice, slice.trim(), "EDU {} is not trimmed", index);
        prop_assert_eq!(edu.tokens, edudb::model::tokens::count(slice));
        prop_assert!(edu.tokens <= edudb::ingest::segment::MAX_EDU_TOKENS);
        previous_end = end;
    }
    doc.tree
        .validate(doc.edus.len() as u32)
        .map_err(TestCaseError::fail)?;
    for node in &doc.tree.nodes {
        let covered_by_children: u32 = node
            .children
            .iter()
            .map(|&c| doc.tree.nodes[c as usize].span.len())
            .sum();
        let direct_edus = node.span.len() - covered_by_children;
        prop_assert!(
            node.children.len() + direct_edus as usize <= MAX_FANOUT,
            "node {} has {} children and {} direct EDUs",
            node.id,
            node.children.len(),
            direct_edus
        );
        prop_assert!(!node.title.is_empty() || node.kind == edudb::NodeKind::Section);
        prop_assert!(
            words.contains(&collapse(&node.title)),
            "title {:?} of node {} is not extractive",
            node.title,
            node.id
        );
    }
    prop_assert_eq!(doc.meta.edus as usize, doc.edus.len());
    prop_assert_eq!(
        doc.meta.tokens,
        doc.edus.iter().map(|e| u64::from(e.tokens)).sum::<u64>()
    );
    Ok(())
}

/// `text` with whitespace runs collapsed to one space.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every non-whitespace byte of `text[range]` lies inside some EDU.
fn covers(text: &str, range: std::ops::Range<usize>, edus: &[std::ops::Range<usize>]) -> bool {
    text[range.clone()]
        .char_indices()
        .filter(|(_, c)| !c.is_whitespace())
        .all(|(i, _)| {
            let at = range.start + i;
            edus.iter().any(|e| e.start <= at && at < e.end)
        })
}

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,9}",
        "[A-Z][a-z]{1,8}",
        "[0-9]{1,4}(\\.[0-9]{1,2})?",
        Just("e.g.".to_owned()),
        Just("Dr.".to_owned()),
        Just("`x.y()`".to_owned()),
        Just("https://example.com/a.b".to_owned()),
        "[\u{4e00}-\u{4e30}]{1,6}",
    ]
}

fn sentence() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(
            (
                word(),
                prop::sample::select(vec!["", "", "", ",", ";", ":", " because", " but,"]),
            ),
            1..20,
        ),
        prop::sample::select(vec![".", "!", "?", "。", "", "..."]),
    )
        .prop_map(|(words, end)| {
            let body: Vec<String> = words.into_iter().map(|(w, p)| format!("{w}{p}")).collect();
            format!("{}{end}", body.join(" "))
        })
}

fn paragraph() -> impl Strategy<Value = String> {
    prop::collection::vec(sentence(), 1..8).prop_map(|s| s.join(" "))
}

/// One Markdown block: heading of any level (possibly empty), paragraph,
/// list item at some depth, code block, or table.
fn markdown_block() -> impl Strategy<Value = String> {
    prop_oneof![
        (1usize..7, prop::option::of(sentence())).prop_map(|(level, title)| {
            format!("{} {}", "#".repeat(level), title.unwrap_or_default())
        }),
        sentence().prop_map(|title| format!("{title}\n---")),
        paragraph(),
        (0usize..6, sentence()).prop_map(|(depth, item)| format!("{}- {item}", "  ".repeat(depth))),
        paragraph().prop_map(|code| format!("```\n{code}\n```")),
        (word(), word()).prop_map(|(a, b)| format!("| {a} | {b} |\n|---|---|\n| {b} | {a} |")),
    ]
}

fn markdown() -> impl Strategy<Value = String> {
    prop::collection::vec(markdown_block(), 1..60).prop_map(|blocks| blocks.join("\n\n"))
}

/// Plain text: paragraphs, numbered headings, bullets.
fn plain_text() -> impl Strategy<Value = String> {
    let block = prop_oneof![
        paragraph(),
        (1u8..9, 1u8..9, sentence()).prop_map(|(a, b, t)| format!("{a}.{b} {t}")),
        sentence().prop_map(|s| format!("* {s}")),
    ];
    prop::collection::vec(block, 1..80).prop_map(|blocks| blocks.join("\n\n"))
}

fn html() -> impl Strategy<Value = String> {
    let block = prop_oneof![
        (1u8..7, sentence()).prop_map(|(l, t)| format!("<h{l}>{t}</h{l}>")),
        paragraph().prop_map(|p| format!("<p>{p}</p>")),
        prop::collection::vec(sentence(), 1..5).prop_map(|items| format!(
            "<ul>{}</ul>",
            items
                .iter()
                .map(|i| format!("<li>{i}</li>"))
                .collect::<String>()
        )),
        Just("<script>var a = 'x. Y.';</script><nav>Home</nav>".to_owned()),
        paragraph().prop_map(|p| format!("<div>{p}<pre>{p}</pre></div>")),
    ];
    (paragraph(), prop::collection::vec(block, 0..40)).prop_map(|(first, rest)| {
        format!("<html><body><p>{first}</p>{}</body></html>", rest.concat())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn segmentation_tiles_any_text(text in "\\PC{0,400}", start_frac in 0.0f64..1.0) {
        let mut start = (text.len() as f64 * start_frac) as usize;
        while !text.is_char_boundary(start) { start -= 1; }
        let ranges = split_edus(&text, start..text.len());
        let mut previous_end = start;
        for range in &ranges {
            prop_assert!(range.start >= previous_end && range.start < range.end && range.end <= text.len());
            prop_assert!(text[previous_end..range.start].trim().is_empty(), "gap holds text");
            prop_assert_eq!(text[range.clone()].trim(), &text[range.clone()]);
            previous_end = range.end;
        }
        prop_assert!(text[previous_end..].trim().is_empty());
        prop_assert!(covers(&text, start..text.len(), &ranges));
    }

    #[test]
    fn clause_splits_leave_no_fragments(text in paragraph()) {
        use unicode_segmentation::UnicodeSegmentation;
        let ranges = split_edus(&text, 0..text.len());
        for pair in ranges.windows(2) {
            let (left, right) = (&text[pair[0].clone()], &text[pair[1].clone()]);
            let clause_split = left.ends_with([',', ';', ':', '，', '；', '：', '、'])
                || ["because ", "although ", "whereas ", "unless "].iter().any(|c| right.starts_with(c));
            if clause_split {
                prop_assert!(left.unicode_words().count() >= MIN_CLAUSE_WORDS, "fragment {:?}", left);
                prop_assert!(right.unicode_words().count() >= MIN_CLAUSE_WORDS, "fragment {:?}", right);
            }
        }
    }

    #[test]
    fn markdown_documents_meet_invariants(text in markdown()) {
        match analyze("doc", text.clone(), Format::Markdown) {
            Ok(doc) => {
                prop_assert_eq!(&doc.text, &text, "Markdown is stored unchanged");
                check_document(&doc)?;
            }
            Err(edudb::Error::EmptyDocument { .. }) => {
                // Only a document of empty headings has nothing to index.
                prop_assert!(text.lines().all(|l| l.trim().trim_start_matches('#').is_empty()), "{:?}", text);
            }
            Err(other) => prop_assert!(false, "unexpected error {}", other),
        }
    }

    #[test]
    fn plain_text_documents_meet_invariants(text in plain_text()) {
        let doc = analyze("doc", text.clone(), Format::Text).unwrap();
        prop_assert_eq!(&doc.text, &text);
        check_document(&doc)?;
        // Every word of the text is inside an EDU, except list bullets.
        let edus: Vec<_> = doc.edus.iter().map(|e| e.start as usize..e.end as usize).collect();
        let words_outside = text.char_indices().filter(|&(i, c)| {
            !c.is_whitespace() && c != '*' && !edus.iter().any(|e| e.start <= i && i < e.end)
        }).count();
        prop_assert_eq!(words_outside, 0);
    }

    #[test]
    fn html_documents_meet_invariants(text in html()) {
        let doc = analyze("doc", text, Format::Html).unwrap();
        check_document(&doc)?;
        prop_assert!(!doc.text.contains("var a"), "script text leaked");
    }
}

//! HTML layout: parses with a real HTML5 parser (html5ever via scraper),
//! drops scripts, styles, navigation and other non-content, and extracts
//! readable text with one block per heading, paragraph, list item, code
//! block or table. Blocks are separated by a blank line in the stored text.
//!
//! The traversal is iterative, so arbitrarily deep markup is safe.

use ego_tree::iter::Edge;
use scraper::{Html, Node};

use serde_json::Value;

use super::{Block, BlockKind, Layout, trim_range};
use crate::model::metadata::{Metadata, keywords};

/// Elements whose whole subtree is not document content.
const DROPPED: &[&str] = &[
    "script", "style", "noscript", "template", "nav", "head", "svg", "canvas", "iframe", "object",
    "button", "select", "form",
];

/// Elements that start and end a block but have no kind of their own.
const CONTAINERS: &[&str] = &[
    "html",
    "body",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "blockquote",
    "figure",
    "figcaption",
    "dl",
    "dt",
    "dd",
    "address",
    "details",
    "summary",
    "hr",
    "caption",
];

/// Parses an HTML document into its readable text and blocks.
pub fn parse(html: &str) -> Layout {
    let document = Html::parse_document(html);
    let mut extractor = Extractor::default();
    let mut dropped_depth = 0usize;
    for edge in document.tree.root().traverse() {
        match edge {
            Edge::Open(node) => match node.value() {
                Node::Element(el) if dropped_depth > 0 || DROPPED.contains(&el.name()) => {
                    dropped_depth += 1
                }
                Node::Element(el) => extractor.open(el.name()),
                Node::Text(text) if dropped_depth == 0 => extractor.text(text),
                _ => {}
            },
            Edge::Close(node) => {
                if let Node::Element(el) = node.value() {
                    if dropped_depth > 0 {
                        dropped_depth -= 1;
                    } else {
                        extractor.close(el.name());
                    }
                }
            }
        }
    }
    extractor.boundary();
    let title = page_title(&document);
    let mut layout = Layout {
        text: extractor.text,
        blocks: extractor.blocks,
        title: None,
        metadata: page_metadata(&document, title.as_deref()),
    };
    if let Some(title) = title {
        entitle(&mut layout, title);
    }
    layout
}

/// What the page says about itself: its `<title>` as `title`, and each
/// `<meta>` with a `name` (or Open Graph's `property`) and a `content`,
/// keyed by that name (`og:title` is `og_title`); `keywords` is a list
/// ([`keywords`]). The first of a name is kept.
fn page_metadata(document: &Html, title: Option<&str>) -> Metadata {
    let selector = scraper::Selector::parse("meta[content]").expect("a valid selector");
    let metas = document.select(&selector).filter_map(|meta| {
        let element = meta.value();
        let name = element.attr("name").or_else(|| element.attr("property"))?;
        let content = element.attr("content")?;
        let value = if name.eq_ignore_ascii_case("keywords") {
            Value::Array(keywords(content))
        } else {
            Value::String(content.into())
        };
        Some((name.to_owned(), value))
    });
    let title = title.map(|title| ("title".to_owned(), Value::String(title.into())));
    Metadata::from_source(title.into_iter().chain(metas))
}

/// The text of the document's `<title>`, whitespace collapsed, if it has
/// one that is not blank.
fn page_title(document: &Html) -> Option<String> {
    let selector = scraper::Selector::parse("title").expect("a valid selector");
    let title = document.select(&selector).next()?;
    let words: Vec<&str> = title.text().flat_map(str::split_whitespace).collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// Makes the page's `title` the layout's: as its first heading when that
/// reads the same, else written at the start of the text as a block of its
/// own, so that the title stays a span of the stored text.
fn entitle(layout: &mut Layout, title: String) {
    let first_heading = layout
        .blocks
        .first()
        .filter(|b| matches!(b.kind, BlockKind::Heading { .. }))
        .map(|b| &layout.text[b.range.clone()]);
    if first_heading.is_some_and(|heading| heading.eq_ignore_ascii_case(&title)) {
        layout.title = first_heading.map(str::to_owned);
        return;
    }
    let separator = if layout.text.is_empty() { "" } else { "\n\n" };
    let shift = title.len() + separator.len();
    for block in &mut layout.blocks {
        block.range = block.range.start + shift..block.range.end + shift;
    }
    layout.blocks.insert(
        0,
        Block {
            kind: BlockKind::Paragraph,
            range: 0..title.len(),
        },
    );
    layout.text = format!("{title}{separator}{}", layout.text);
    layout.title = Some(title);
}

/// Accumulates text and blocks while walking the element tree.
#[derive(Default)]
struct Extractor {
    text: String,
    blocks: Vec<Block>,
    /// Kinds of the enclosing block elements, innermost last.
    context: Vec<BlockKind>,
    /// Depth of enclosing `ul`/`ol` elements.
    list_depth: u16,
    /// Depth of enclosing `pre` elements; whitespace is kept inside.
    pre_depth: usize,
    /// The open block: its kind and where its text starts.
    open: Option<(BlockKind, usize)>,
}

impl Extractor {
    fn open(&mut self, name: &str) {
        match name {
            "br" => self.push_raw("\n"),
            "td" | "th" if self.open.is_some() && !self.text.ends_with('\n') => {
                self.push_raw(" | ")
            }
            "tr" if self.open.is_some() => self.push_raw("\n"),
            _ => {
                if let Some(kind) = self.block_kind(name) {
                    self.boundary();
                    self.context.push(kind);
                } else if CONTAINERS.contains(&name) {
                    self.boundary();
                }
                match name {
                    "ul" | "ol" => self.list_depth += 1,
                    "pre" => self.pre_depth += 1,
                    _ => {}
                }
            }
        }
    }

    fn close(&mut self, name: &str) {
        if self.block_kind(name).is_some() {
            self.boundary();
            self.context.pop();
        } else if CONTAINERS.contains(&name) {
            self.boundary();
        }
        match name {
            "ul" | "ol" => self.list_depth = self.list_depth.saturating_sub(1),
            "pre" => self.pre_depth = self.pre_depth.saturating_sub(1),
            _ => {}
        }
    }

    /// The block kind an element opens, if it is a block element with a kind.
    fn block_kind(&self, name: &str) -> Option<BlockKind> {
        Some(match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => BlockKind::Heading {
                level: name.as_bytes()[1] - b'0',
            },
            "p" => BlockKind::Paragraph,
            "li" => BlockKind::ListItem {
                depth: self.list_depth.saturating_sub(1),
            },
            "pre" => BlockKind::Code,
            "table" => BlockKind::Table,
            "ul" | "ol" => return None,
            _ => return None,
        })
    }

    /// Appends a text node, collapsing whitespace outside `pre`.
    fn text(&mut self, text: &str) {
        if self.pre_depth > 0 {
            self.push_raw(text);
            return;
        }
        let mut collapsed = String::with_capacity(text.len());
        let mut last_space = self.text.ends_with([' ', '\n']) || self.open.is_none();
        for c in text.chars() {
            if c.is_whitespace() {
                if !last_space {
                    collapsed.push(' ');
                    last_space = true;
                }
            } else {
                collapsed.push(c);
                last_space = false;
            }
        }
        if !collapsed.trim().is_empty() {
            self.push_raw(&collapsed);
        }
    }

    /// Appends text to the open block, opening one if needed.
    fn push_raw(&mut self, text: &str) {
        if self.open.is_none() {
            if text.trim().is_empty() {
                return;
            }
            if !self.text.is_empty() {
                self.text.push_str("\n\n");
            }
            let kind = self.context.last().copied().unwrap_or(BlockKind::Paragraph);
            self.open = Some((kind, self.text.len()));
        }
        self.text.push_str(text);
    }

    /// Closes the open block, recording it if it holds any text.
    fn boundary(&mut self) {
        if let Some((kind, start)) = self.open.take() {
            let range = trim_range(&self.text, start..self.text.len());
            if range.is_empty() {
                self.text.truncate(start.saturating_sub(2));
            } else {
                self.text.truncate(range.end);
                self.blocks.push(Block { kind, range });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(html: &str) -> Vec<(BlockKind, String)> {
        let layout = parse(html);
        layout
            .blocks
            .iter()
            .map(|b| (b.kind, layout.text[b.range.clone()].to_owned()))
            .collect()
    }

    #[test]
    fn extracts_headings_paragraphs_and_lists() {
        let html = "<html><head><title>Intro</title><style>p{}</style></head><body>\
            <nav><a href='/'>Home</a></nav><h1>Intro</h1><p>Hello   <b>bold</b>\n world.</p>\
            <ul><li>one</li><li>two<ul><li>deep</li></ul></li></ul>\
            <script>var x = 1;</script><h2>Code</h2><pre>fn main() {\n    x\n}</pre></body></html>";
        assert_eq!(
            blocks(html),
            [
                (BlockKind::Heading { level: 1 }, "Intro".to_owned()),
                (BlockKind::Paragraph, "Hello bold world.".to_owned()),
                (BlockKind::ListItem { depth: 0 }, "one".to_owned()),
                (BlockKind::ListItem { depth: 0 }, "two".to_owned()),
                (BlockKind::ListItem { depth: 1 }, "deep".to_owned()),
                (BlockKind::Heading { level: 2 }, "Code".to_owned()),
                (BlockKind::Code, "fn main() {\n    x\n}".to_owned()),
            ]
        );
    }

    #[test]
    fn the_page_s_title_and_meta_tags_are_its_metadata() {
        let layout = parse(
            "<html><head><title>Moss  care</title>\
             <meta name='author' content='A. Gardener'><meta name='Author' content='second'>\
             <meta name='keywords' content='moss, shade ,, damp'>\
             <meta property='og:site-name' content='Garden'>\
             <meta name='date' content='2024-05-01'><meta charset='utf-8'>\
             <meta http-equiv='refresh' content='5'><meta name='empty' content=' '>\
             </head><body><p>Keep it damp.</p></body></html>",
        );
        assert_eq!(
            layout.metadata.to_json(),
            serde_json::json!({
                "title": "Moss care", "author": "A. Gardener", "keywords": ["moss", "shade", "damp"],
                "og_site_name": "Garden", "date": "2024-05-01",
            })
        );
        assert!(parse("<p>No head.</p>").metadata.is_empty());
    }

    #[test]
    fn the_page_title_titles_the_layout_and_stays_in_its_text() {
        // A title unlike the first heading is written first, as its own block.
        let layout = parse(
            "<html><head><title> Moss  care | Garden </title></head>\
             <body><h1>Moss</h1><p>Keep it damp.</p></body></html>",
        );
        assert_eq!(layout.title.as_deref(), Some("Moss care | Garden"));
        assert_eq!(layout.text, "Moss care | Garden\n\nMoss\n\nKeep it damp.");
        let texts: Vec<&str> = layout
            .blocks
            .iter()
            .map(|b| &layout.text[b.range.clone()])
            .collect();
        assert_eq!(texts, ["Moss care | Garden", "Moss", "Keep it damp."]);
        assert_eq!(layout.blocks[0].kind, BlockKind::Paragraph);
        // One that reads as the first heading is that heading.
        let layout = parse("<title>MOSS</title><h1>Moss</h1><p>Keep it damp.</p><h1>Ferns</h1>");
        assert_eq!(layout.title.as_deref(), Some("Moss"));
        assert_eq!(layout.text, "Moss\n\nKeep it damp.\n\nFerns");
        // A page of nothing but a title; a blank title is none.
        assert_eq!(parse("<title>Only</title>").text, "Only");
        let untitled = parse("<title> </title><p>Text.</p>");
        assert_eq!((untitled.title, untitled.text.as_str()), (None, "Text."));
    }

    #[test]
    fn tables_are_one_block_and_entities_decode() {
        let html =
            "<table><tr><th>a</th><th>b</th></tr><tr><td>1 &amp; 2</td><td>3</td></tr></table>";
        assert_eq!(
            blocks(html),
            [(BlockKind::Table, "a | b\n1 & 2 | 3".to_owned())]
        );
    }

    #[test]
    fn loose_text_in_containers_becomes_paragraphs() {
        let layout = parse("<div>first</div><div>second <span>part</span></div>");
        assert_eq!(layout.text, "first\n\nsecond part");
        assert_eq!(layout.blocks.len(), 2);
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let html = "<ul><li>x".repeat(5000);
        let layout = parse(&html);
        assert!(!layout.blocks.is_empty());
    }
}

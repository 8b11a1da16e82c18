//! Markdown layout: the file's bytes are stored unchanged; blocks point at
//! their content inside them, so `#` markers, bullets and fences stay outside.

use std::ops::Range;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::{Block, BlockKind, Layout, front_matter, trim_range};

/// An open container while walking the event stream.
enum Open {
    /// A block whose inline content becomes one layout block when it closes
    /// (or, for list items, when a nested block interrupts it).
    Owner {
        kind: BlockKind,
        content: Option<Range<usize>>,
    },
    /// A list; counts toward item depth.
    List,
    /// A block whose content flows into the enclosing owner (a paragraph inside a list item).
    Transparent,
    /// A table: emitted whole when it opens, its inner events are skipped.
    Table,
}

/// Parses Markdown (CommonMark with GFM tables, strikethrough and task
/// lists). YAML front matter (between `---` lines at the top) is the
/// document's metadata ([`front_matter`]); it stays in the stored text but
/// in no block.
pub fn parse(text: &str) -> Layout {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
    let mut walker = Walker {
        text,
        stack: Vec::new(),
        blocks: Vec::new(),
        list_depth: 0,
    };
    let (mut yaml, mut in_front_matter, mut seen) = (String::new(), false, false);
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        match &event {
            Event::Start(Tag::MetadataBlock(_)) => in_front_matter = !seen,
            Event::End(TagEnd::MetadataBlock(_)) => (in_front_matter, seen) = (false, true),
            Event::Text(part) if in_front_matter => yaml.push_str(part),
            _ => {}
        }
        walker.event(event, range);
    }
    Layout {
        text: text.to_owned(),
        blocks: walker.blocks,
        title: None,
        metadata: front_matter::metadata(&yaml),
    }
}

struct Walker<'t> {
    text: &'t str,
    stack: Vec<Open>,
    blocks: Vec<Block>,
    list_depth: u16,
}

impl Walker<'_> {
    fn in_table(&self) -> bool {
        matches!(self.stack.last(), Some(Open::Table))
    }

    fn event(&mut self, event: Event<'_>, range: Range<usize>) {
        if self.in_table() && !matches!(event, Event::End(TagEnd::Table)) {
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag, range),
            Event::End(tag) => self.end(tag, range),
            Event::Text(_)
            | Event::Code(_)
            | Event::InlineHtml(_)
            | Event::InlineMath(_)
            | Event::DisplayMath(_)
            | Event::FootnoteReference(_)
            | Event::TaskListMarker(_)
            | Event::Html(_) => self.extend_owner(range),
            Event::SoftBreak | Event::HardBreak | Event::Rule => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>, range: Range<usize>) {
        match tag {
            Tag::Heading { level, .. } => {
                self.interrupt_item();
                self.push_owner(BlockKind::Heading { level: level as u8 });
            }
            Tag::Paragraph | Tag::HtmlBlock => {
                if self.innermost_owner_is_item() {
                    self.stack.push(Open::Transparent);
                } else {
                    self.push_owner(BlockKind::Paragraph);
                }
            }
            Tag::CodeBlock(_) => {
                self.interrupt_item();
                self.push_owner(BlockKind::Code);
            }
            Tag::Table(_) => {
                self.interrupt_item();
                self.emit(BlockKind::Table, range);
                self.stack.push(Open::Table);
            }
            Tag::List(_) => {
                self.interrupt_item();
                self.list_depth += 1;
                self.stack.push(Open::List);
            }
            Tag::Item => {
                let depth = self.list_depth.saturating_sub(1);
                self.push_owner(BlockKind::ListItem { depth });
            }
            Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough
            | Tag::Superscript
            | Tag::Subscript
            | Tag::Link { .. }
            | Tag::Image { .. } => self.extend_owner(range),
            _ => self.stack.push(Open::Transparent),
        }
    }

    fn end(&mut self, tag: TagEnd, range: Range<usize>) {
        match tag {
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Link
            | TagEnd::Image => self.extend_owner(range),
            _ => {
                if let Some(open) = self.stack.pop() {
                    match open {
                        Open::Owner {
                            kind,
                            content: Some(content),
                        } => self.emit(kind, content),
                        Open::List => self.list_depth -= 1,
                        Open::Owner { content: None, .. } | Open::Transparent | Open::Table => {}
                    }
                }
            }
        }
    }

    fn push_owner(&mut self, kind: BlockKind) {
        self.stack.push(Open::Owner {
            kind,
            content: None,
        });
    }

    fn innermost_owner(&mut self) -> Option<&mut Open> {
        self.stack
            .iter_mut()
            .rev()
            .find(|open| matches!(open, Open::Owner { .. }))
    }

    fn innermost_owner_is_item(&mut self) -> bool {
        matches!(
            self.innermost_owner(),
            Some(Open::Owner {
                kind: BlockKind::ListItem { .. },
                ..
            })
        )
    }

    /// Grows the innermost owner's content to include `range`.
    fn extend_owner(&mut self, range: Range<usize>) {
        if let Some(Open::Owner { content, .. }) = self.innermost_owner() {
            *content = Some(match content.take() {
                Some(c) => c.start.min(range.start)..c.end.max(range.end),
                None => range,
            });
        }
    }

    /// A nested block starts inside a list item: the item's text so far
    /// becomes its block now, so blocks stay in document order.
    fn interrupt_item(&mut self) {
        let pending = match self.innermost_owner() {
            Some(Open::Owner {
                kind: kind @ BlockKind::ListItem { .. },
                content,
            }) => content.take().map(|c| (*kind, c)),
            _ => None,
        };
        if let Some((kind, content)) = pending {
            self.emit(kind, content);
        }
    }

    fn emit(&mut self, kind: BlockKind, range: Range<usize>) {
        let range = trim_range(self.text, range);
        let after_last = self
            .blocks
            .last()
            .is_none_or(|b| b.range.end <= range.start);
        if !range.is_empty() && after_last {
            self.blocks.push(Block { kind, range });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(text: &str) -> Vec<(BlockKind, &str)> {
        parse(text)
            .blocks
            .iter()
            .map(|b| (b.kind, &text[b.range.clone()]))
            .collect()
    }

    #[test]
    fn headings_paragraphs_and_markers_outside() {
        let md = "# Title\n\nFirst *para* here.\n\nSetext\n------\n\n### Deep ###\n";
        assert_eq!(
            blocks(md),
            vec![
                (BlockKind::Heading { level: 1 }, "Title"),
                (BlockKind::Paragraph, "First *para* here."),
                (BlockKind::Heading { level: 2 }, "Setext"),
                (BlockKind::Heading { level: 3 }, "Deep"),
            ]
        );
    }

    #[test]
    fn front_matter_is_metadata_kept_in_the_text_but_in_no_block() {
        let md = "---\ntitle: Moss care\ntags: [moss, shade]\n---\n\n# Moss\n\nKeep it damp.\n\n---\nnot: front matter\n---\n";
        let layout = parse(md);
        assert_eq!(layout.text, md);
        assert_eq!(
            layout.metadata.to_json(),
            serde_json::json!({"title": "Moss care", "tags": ["moss", "shade"]})
        );
        let texts: Vec<&str> = (layout.blocks.iter())
            .map(|b| &md[b.range.clone()])
            .collect();
        assert_eq!(texts[..2], ["Moss", "Keep it damp."]);
        assert!(
            texts
                .iter()
                .all(|t| !t.contains("title:") && !t.contains("tags:"))
        );
        // Only the top of the file is front matter; a file without any has none.
        assert!(parse("# Moss\n\nKeep it damp.\n").metadata.is_empty());
    }

    #[test]
    fn nested_list_items_are_separate_blocks_in_order() {
        let md = "- one\n  - *two*\n  - three\n- four\n\n1. five\n";
        assert_eq!(
            blocks(md),
            vec![
                (BlockKind::ListItem { depth: 0 }, "one"),
                (BlockKind::ListItem { depth: 1 }, "*two*"),
                (BlockKind::ListItem { depth: 1 }, "three"),
                (BlockKind::ListItem { depth: 0 }, "four"),
                (BlockKind::ListItem { depth: 0 }, "five"),
            ]
        );
    }

    #[test]
    fn code_and_tables_are_whole_blocks() {
        let md = "Text.\n\n```rust\nfn main() {}\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n";
        assert_eq!(
            blocks(md),
            vec![
                (BlockKind::Paragraph, "Text."),
                (BlockKind::Code, "fn main() {}"),
                (BlockKind::Table, "| a | b |\n|---|---|\n| 1 | 2 |"),
            ]
        );
    }

    #[test]
    fn empty_heading_is_skipped() {
        assert_eq!(
            blocks("#\n\n##   \n\nbody"),
            vec![(BlockKind::Paragraph, "body")]
        );
    }

    #[test]
    fn deeply_nested_lists_do_not_overflow() {
        let md: String = (0..10_000)
            .map(|i| format!("{}- item {i}\n", "  ".repeat(i % 40)))
            .collect();
        let layout = parse(&md);
        assert!(layout.blocks.len() >= 10_000 / 2);
        assert!(
            layout
                .blocks
                .windows(2)
                .all(|w| w[0].range.end <= w[1].range.start)
        );
    }
}

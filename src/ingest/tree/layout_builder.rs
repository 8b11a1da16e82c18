//! The default tree builder: structure from explicit layout (headings,
//! paragraphs, lists), then cohesion segments wherever a node would have
//! more than [`MAX_FANOUT`] direct children.

use crate::ingest::layout::BlockKind;
use crate::ingest::tree::builder::{BlockEdus, MAX_FANOUT, StructureInput, TreeBuilder};
use crate::ingest::tree::cohesion::{TermVector, cut_points};
use crate::ingest::tree::title::{extractive_title, one_line};
use crate::model::edu::Span;
use crate::model::tree::Tree;
use crate::model::tree::{Node, NodeKind};

/// Lists nested deeper than this are flattened into the deepest allowed list.
pub const MAX_LIST_DEPTH: u16 = 32;

/// Builds trees from layout blocks; see the module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct LayoutTreeBuilder;

/// A child of a draft node: another draft or one EDU.
#[derive(Debug, Clone, Copy)]
enum Item {
    Draft(usize),
    Edu(u32),
}

/// A node under construction; titles of headed sections are known early.
#[derive(Debug)]
struct Draft {
    kind: NodeKind,
    title: Option<String>,
    items: Vec<Item>,
}

impl TreeBuilder for LayoutTreeBuilder {
    fn build(&self, input: &StructureInput<'_>) -> Result<Tree, String> {
        if input.edus.is_empty() {
            return Err("no EDUs to structure".into());
        }
        let mut drafts = vec![Draft {
            kind: NodeKind::Document,
            title: None,
            items: Vec::new(),
        }];
        place_blocks(input, input.blocks, &mut drafts, 0);
        Ok(segmented(input, drafts))
    }
}

impl LayoutTreeBuilder {
    /// The tree whose sections are `outline`'s (a valid tree over the same
    /// EDUs, such as a language model's outline), with the layout's
    /// paragraphs, lists and headed sections placed inside them (blocks cut
    /// at section boundaries), and cohesion segments wherever a node would
    /// have more than [`MAX_FANOUT`] children. A section that is one
    /// paragraph holds its EDUs directly.
    pub fn within(&self, input: &StructureInput<'_>, outline: &Tree) -> Tree {
        let mut drafts = vec![Draft {
            kind: NodeKind::Document,
            title: None,
            items: Vec::new(),
        }];
        fill_sections(input, outline, &mut drafts);
        segmented(input, drafts)
    }
}

/// Places under the root draft what `outline` covers: each section as a
/// section draft, and between a section's children the layout blocks of
/// the EDUs no child covers (cut at the boundaries). Iterative, so any
/// depth of outline is safe.
fn fill_sections(input: &StructureInput<'_>, outline: &Tree, drafts: &mut Vec<Draft>) {
    let own = |range: std::ops::Range<u32>| -> Vec<BlockEdus> {
        (input.blocks.iter())
            .filter_map(|b| {
                let edus = b.edus.start.max(range.start)..b.edus.end.min(range.end);
                (!edus.is_empty()).then_some(BlockEdus { kind: b.kind, edus })
            })
            .collect()
    };
    // (outline node, its draft, next child to place, first EDU not placed)
    let mut stack = vec![(0usize, 0usize, 0usize, 0u32)];
    while let Some((node, draft, child, next)) = stack.pop() {
        let section = &outline.nodes[node];
        let end = section.span.last + 1;
        if node != 0 && section.children.is_empty() {
            let blocks = own(section.span.first..end);
            if let [only] = blocks.as_slice()
                && only.kind == BlockKind::Paragraph
            {
                drafts[draft]
                    .items
                    .extend((section.span.first..end).map(Item::Edu));
            } else {
                place_blocks(input, &blocks, drafts, draft);
            }
            continue;
        }
        let Some(&child_id) = section.children.get(child) else {
            place_blocks(input, &own(next..end), drafts, draft);
            continue;
        };
        let child_node = &outline.nodes[child_id as usize];
        place_blocks(input, &own(next..child_node.span.first), drafts, draft);
        drafts.push(Draft {
            kind: NodeKind::Section,
            title: Some(child_node.title.clone()),
            items: Vec::new(),
        });
        let index = drafts.len() - 1;
        drafts[draft].items.push(Item::Draft(index));
        stack.push((node, draft, child + 1, child_node.span.last + 1));
        stack.push((child_id as usize, index, 0, child_node.span.first));
    }
}

/// The tree of `drafts` after cohesion segmentation of every draft with
/// more than [`MAX_FANOUT`] items.
fn segmented(input: &StructureInput<'_>, mut drafts: Vec<Draft>) -> Tree {
    let unit_vectors: Vec<TermVector> = input
        .edus
        .iter()
        .map(|e| TermVector::from_text(&input.text[e.start as usize..e.end as usize]))
        .collect();
    for index in 0..drafts.len() {
        limit_fanout(index, &mut drafts, &unit_vectors);
    }
    finish(input, &drafts)
}

/// Places `blocks` under draft `root`, each under the section stack and
/// list stack it belongs to.
fn place_blocks(
    input: &StructureInput<'_>,
    blocks: &[BlockEdus],
    drafts: &mut Vec<Draft>,
    root: usize,
) {
    let mut sections: Vec<(u8, usize)> = vec![(0, root)];
    let mut lists: Vec<(u16, usize)> = Vec::new();
    let add = |drafts: &mut Vec<Draft>, parent: usize, draft: Draft| {
        drafts.push(draft);
        let index = drafts.len() - 1;
        drafts[parent].items.push(Item::Draft(index));
        index
    };
    let mut previous: Option<&BlockEdus> = None;
    for block in blocks {
        let caption = previous.and_then(|p| caption(input, p));
        previous = Some(block);
        let section = sections.last().map_or(root, |s| s.1);
        let edus = block.edus.clone().map(Item::Edu);
        match block.kind {
            BlockKind::Heading { level } => {
                lists.clear();
                while sections.last().is_some_and(|s| s.0 >= level && s.0 > 0) {
                    sections.pop();
                }
                let parent = sections.last().map_or(root, |s| s.1);
                let draft = Draft {
                    kind: NodeKind::Section,
                    title: Some(heading_title(input, block)),
                    items: edus.collect(),
                };
                let index = add(drafts, parent, draft);
                sections.push((level.max(1), index));
            }
            BlockKind::ListItem { depth } => {
                let depth = depth.min(MAX_LIST_DEPTH);
                while lists.last().is_some_and(|l| l.0 > depth) {
                    lists.pop();
                }
                if lists.is_empty() {
                    let list = Draft {
                        kind: NodeKind::List,
                        title: None,
                        items: Vec::new(),
                    };
                    lists.push((depth, add(drafts, section, list)));
                }
                while let Some(&(top_depth, top)) = lists.last().filter(|l| l.0 < depth) {
                    let list = Draft {
                        kind: NodeKind::List,
                        title: None,
                        items: Vec::new(),
                    };
                    lists.push((top_depth + 1, add(drafts, top, list)));
                }
                let list = lists.last().map_or(section, |l| l.1);
                drafts[list].items.extend(edus);
            }
            BlockKind::Paragraph | BlockKind::Table if block.edus.len() >= 2 => {
                lists.clear();
                let (kind, title) = match block.kind {
                    BlockKind::Table => (NodeKind::Table, caption),
                    _ => (NodeKind::Paragraph, None),
                };
                let draft = Draft {
                    kind,
                    title,
                    items: edus.collect(),
                };
                add(drafts, section, draft);
            }
            BlockKind::Paragraph | BlockKind::Code | BlockKind::Table => {
                lists.clear();
                drafts[section].items.extend(edus);
            }
        }
    }
}

/// Longest caption, in words.
const CAPTION_WORDS: usize = 15;

/// The text of heading `block`'s first EDU on one line: its section's
/// title.
fn heading_title(input: &StructureInput<'_>, block: &BlockEdus) -> String {
    let first = &input.edus[block.edus.start as usize];
    one_line(&input.text[first.start as usize..first.end as usize])
}

/// The title `block` gives a table right after it: a heading's own title
/// (the table is what the heading names, "Consolidated Statement of Cash
/// Flows"), or a paragraph of one short EDU (a caption).
fn caption(input: &StructureInput<'_>, block: &BlockEdus) -> Option<String> {
    match block.kind {
        BlockKind::Heading { .. } => Some(heading_title(input, block)),
        BlockKind::Paragraph if block.edus.len() == 1 => {
            let edu = &input.edus[block.edus.start as usize];
            let text = input.text[edu.start as usize..edu.end as usize].trim();
            (text.split_whitespace().count() <= CAPTION_WORDS).then(|| one_line(text))
        }
        _ => None,
    }
}

/// Groups the items of draft `index` into cohesion segments, recursively,
/// until no draft has more than [`MAX_FANOUT`] items.
fn limit_fanout(index: usize, drafts: &mut Vec<Draft>, unit_vectors: &[TermVector]) {
    let mut pending = vec![index];
    while let Some(index) = pending.pop() {
        let count = drafts[index].items.len();
        if count <= MAX_FANOUT {
            continue;
        }
        let groups = count.div_ceil(MAX_FANOUT).clamp(2, MAX_FANOUT);
        let (vectors, weights): (Vec<TermVector>, Vec<usize>) = drafts[index]
            .items
            .iter()
            .map(|&item| item_vector(item, drafts, unit_vectors))
            .unzip();
        let cuts = cut_points(&vectors, &weights, groups);
        let items = std::mem::take(&mut drafts[index].items);
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(cuts)
            .chain(std::iter::once(count))
            .collect();
        for run in bounds.windows(2) {
            let run_items = &items[run[0]..run[1]];
            if let [single] = run_items {
                drafts[index].items.push(*single);
                continue;
            }
            drafts.push(Draft {
                kind: NodeKind::Segment,
                title: None,
                items: run_items.to_vec(),
            });
            let segment = drafts.len() - 1;
            drafts[index].items.push(Item::Draft(segment));
            pending.push(segment);
        }
    }
}

/// The words under an item (its EDU's, or the sum over a draft's EDUs),
/// and how many EDUs that is.
fn item_vector(item: Item, drafts: &[Draft], unit_vectors: &[TermVector]) -> (TermVector, usize) {
    let mut edus = Vec::new();
    let mut stack = vec![item];
    while let Some(item) = stack.pop() {
        match item {
            Item::Edu(id) => edus.push(&unit_vectors[id as usize]),
            Item::Draft(d) => stack.extend(drafts[d].items.iter().copied()),
        }
    }
    let count = edus.len();
    (TermVector::sum(edus), count)
}

/// Emits drafts as a pre-order node list with spans, levels and titles.
fn finish(input: &StructureInput<'_>, drafts: &[Draft]) -> Tree {
    let mut order: Vec<(usize, Option<u32>, u16)> = Vec::with_capacity(drafts.len());
    let mut stack = vec![(0usize, None, 0u16)];
    while let Some((draft, parent, level)) = stack.pop() {
        let id = order.len() as u32;
        order.push((draft, parent, level));
        for item in drafts[draft].items.iter().rev() {
            if let Item::Draft(child) = item {
                stack.push((*child, Some(id), level + 1));
            }
        }
    }
    let mut spans: Vec<Option<Span>> = vec![None; drafts.len()];
    for &(draft, ..) in order.iter().rev() {
        let mut span: Option<Span> = None;
        for item in &drafts[draft].items {
            let item_span = match *item {
                Item::Edu(id) => Some(Span::new(id, id)),
                Item::Draft(child) => spans[child],
            };
            if let Some(s) = item_span {
                span = Some(span.map_or(s, |acc| {
                    Span::new(acc.first.min(s.first), acc.last.max(s.last))
                }));
            }
        }
        spans[draft] = span;
    }
    let mut nodes: Vec<Node> = Vec::with_capacity(order.len());
    let mut draft_to_node = vec![0u32; drafts.len()];
    for &(draft, parent, level) in &order {
        let id = nodes.len() as u32;
        draft_to_node[draft] = id;
        let span = if draft == 0 {
            Span::new(0, input.edus.len() as u32 - 1)
        } else {
            spans[draft].unwrap_or(Span::new(0, 0))
        };
        let title = drafts[draft]
            .title
            .clone()
            .unwrap_or_else(|| extractive_title(input.text, input.edus, span));
        let node = Node {
            id,
            kind: drafts[draft].kind,
            level,
            title,
            span,
            parent,
            children: Vec::new(),
        };
        if let Some(p) = parent {
            nodes[p as usize].children.push(id);
        }
        nodes.push(node);
    }
    retitle_root(&mut nodes);
    Tree { nodes }
}

/// A document whose top level is one headed section takes that heading as
/// its title, when the section starts it or holds at least half of its
/// EDUs (a preamble of badges or metadata lines before it aside; a lone
/// appendix after a long unheaded text does not title it).
fn retitle_root(nodes: &mut [Node]) {
    let edus = nodes[0].span.len();
    let top_sections: Vec<&Node> = nodes[0]
        .children
        .iter()
        .map(|&c| &nodes[c as usize])
        .filter(|n| n.kind == NodeKind::Section)
        .collect();
    if let [only] = top_sections.as_slice()
        && (only.span.first == 0 || 2 * only.span.len() >= edus)
    {
        nodes[0].title = only.title.clone();
    }
}

//! The default tree builder: structure from explicit layout (headings,
//! paragraphs, lists), then cohesion segments wherever a node would have
//! more than [`MAX_FANOUT`] direct children.

use crate::ingest::layout::BlockKind;
use crate::ingest::tree::builder::{MAX_FANOUT, StructureInput, TreeBuilder};
use crate::ingest::tree::cohesion::{TermVector, cut_points};
use crate::ingest::tree::title::extractive_title;
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
        place_blocks(input, &mut drafts);
        let unit_vectors: Vec<TermVector> = input
            .edus
            .iter()
            .map(|e| TermVector::from_text(&input.text[e.start as usize..e.end as usize]))
            .collect();
        for index in 0..drafts.len() {
            limit_fanout(index, &mut drafts, &unit_vectors);
        }
        Ok(finish(input, &drafts))
    }
}

/// Places every block under the section stack and list stack it belongs to.
fn place_blocks(input: &StructureInput<'_>, drafts: &mut Vec<Draft>) {
    let mut sections: Vec<(u8, usize)> = vec![(0, 0)];
    let mut lists: Vec<(u16, usize)> = Vec::new();
    let add = |drafts: &mut Vec<Draft>, parent: usize, draft: Draft| {
        drafts.push(draft);
        let index = drafts.len() - 1;
        drafts[parent].items.push(Item::Draft(index));
        index
    };
    for block in input.blocks {
        let section = sections.last().map_or(0, |s| s.1);
        let edus = block.edus.clone().map(Item::Edu);
        match block.kind {
            BlockKind::Heading { level } => {
                lists.clear();
                while sections.last().is_some_and(|s| s.0 >= level && s.0 > 0) {
                    sections.pop();
                }
                let parent = sections.last().map_or(0, |s| s.1);
                let first = &input.edus[block.edus.start as usize];
                let title = input.text[first.start as usize..first.end as usize].to_owned();
                let draft = Draft {
                    kind: NodeKind::Section,
                    title: Some(title),
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
            BlockKind::Paragraph if block.edus.len() >= 2 => {
                lists.clear();
                let draft = Draft {
                    kind: NodeKind::Paragraph,
                    title: None,
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

/// A document whose top level is one headed section takes that heading as its title.
fn retitle_root(nodes: &mut [Node]) {
    let top_sections: Vec<&Node> = nodes[0]
        .children
        .iter()
        .map(|&c| &nodes[c as usize])
        .filter(|n| n.kind == NodeKind::Section)
        .collect();
    if let [only] = top_sections.as_slice()
        && only.span.first == 0
    {
        nodes[0].title = only.title.clone();
    }
}

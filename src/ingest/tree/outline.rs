//! The outline format of LingoEDU's structuring model: one line per node,
//! `## [12-15] Title`, where the number of `#` is the level and `[a-b]` the
//! closed EDU span. An LLM-backed structurer emits this text; it is parsed
//! strictly here, so a model can never put spans into the tree that
//! the document does not have.

use crate::ingest::tree::builder::{StructureInput, TreeBuilder};
use crate::model::edu::Span;
use crate::model::tree::Tree;
use crate::model::tree::{Node, NodeKind};

/// A tree builder that takes its structure from an outline in LingoEDU's format.
#[derive(Debug, Clone)]
pub struct OutlineTreeBuilder {
    /// The outline text.
    pub outline: String,
    /// Whether spans count EDUs from 1 (as LingoEDU's model does) rather than 0.
    pub one_based: bool,
}

impl TreeBuilder for OutlineTreeBuilder {
    fn build(&self, input: &StructureInput<'_>) -> Result<Tree, String> {
        parse_outline(&self.outline, input.edus.len() as u32, self.one_based)
            .map_err(|e| e.to_string())
    }
}

/// Why an outline was rejected, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("outline line {line}, column {column}: {message}")]
pub struct OutlineError {
    /// 1-based line of the fault.
    pub line: usize,
    /// 1-based column of the fault.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses an outline over a document of `edu_count` EDUs into a validated tree
/// whose root is the document and whose other nodes are sections.
pub fn parse_outline(outline: &str, edu_count: u32, one_based: bool) -> Result<Tree, OutlineError> {
    let fail = |line: usize, column: usize, message: String| OutlineError {
        line: line + 1,
        column,
        message,
    };
    if edu_count == 0 {
        return Err(fail(0, 1, "the document has no EDUs".into()));
    }
    let root = Node {
        id: 0,
        kind: NodeKind::Document,
        level: 0,
        title: String::new(),
        span: Span::new(0, edu_count - 1),
        parent: None,
        children: Vec::new(),
    };
    let mut nodes = vec![root];
    let mut stack: Vec<usize> = vec![0];
    for (line_no, line) in outline.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let (level, span, title) =
            parse_line(line, one_based).map_err(|(col, msg)| fail(line_no, col, msg))?;
        if span.last >= edu_count {
            return Err(fail(
                line_no,
                level + 2,
                format!(
                    "span {span} is outside the document's EDUs [0-{}]",
                    edu_count - 1
                ),
            ));
        }
        while nodes[*stack.last().unwrap_or(&0)].level as usize >= level {
            stack.pop();
        }
        let parent = *stack.last().unwrap_or(&0);
        if level > nodes[parent].level as usize + 1 {
            return Err(fail(
                line_no,
                1,
                format!(
                    "level {level} skips a level below level {}",
                    nodes[parent].level
                ),
            ));
        }
        if !nodes[parent].span.contains(&span) {
            return Err(fail(
                line_no,
                level + 2,
                format!(
                    "span {span} is not inside its parent's span {}",
                    nodes[parent].span
                ),
            ));
        }
        if let Some(&sibling) = nodes[parent].children.last()
            && nodes[sibling as usize].span.last >= span.first
        {
            let previous = nodes[sibling as usize].span;
            return Err(fail(
                line_no,
                level + 2,
                format!("span {span} overlaps or precedes its previous sibling {previous}"),
            ));
        }
        let id = nodes.len() as u32;
        nodes[parent].children.push(id);
        nodes.push(Node {
            id,
            kind: NodeKind::Section,
            level: level as u16,
            title: title.to_owned(),
            span,
            parent: Some(parent as u32),
            children: Vec::new(),
        });
        stack.push(id as usize);
    }
    if let Some(first) = nodes[0].children.first() {
        nodes[0].title = nodes[*first as usize].title.clone();
    }
    let tree = Tree { nodes };
    tree.validate(edu_count)
        .map_err(|message| fail(0, 1, message))?;
    Ok(tree)
}

/// Splits `## [12-15] Title` into (level, span, title), or (column, message).
fn parse_line(line: &str, one_based: bool) -> Result<(usize, Span, &str), (usize, String)> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    if level == 0 {
        return Err((1, "expected `#` markers starting a node line".into()));
    }
    let rest = line[level..]
        .strip_prefix(' ')
        .ok_or((level + 1, "expected a space after the `#` markers".into()))?;
    let rest = rest
        .strip_prefix('[')
        .ok_or((level + 2, "expected `[first-last]`".into()))?;
    let close = rest
        .find(']')
        .ok_or((level + 2, "expected `]` closing the span".into()))?;
    let (first, last) = rest[..close].split_once('-').ok_or((
        level + 3,
        "expected `first-last` inside the brackets".into(),
    ))?;
    let number = |s: &str, col: usize| -> Result<u32, (usize, String)> {
        let n: u32 = s
            .trim()
            .parse()
            .map_err(|_| (col, format!("expected an EDU number, found {s:?}")))?;
        if one_based {
            n.checked_sub(1)
                .ok_or((col, "spans count from 1 in this outline".into()))
        } else {
            Ok(n)
        }
    };
    let first = number(first, level + 3)?;
    let last = number(last, level + 4 + first.to_string().len())?;
    if first > last {
        return Err((
            level + 3,
            format!("span [{first}-{last}] ends before it starts"),
        ));
    }
    let title = rest[close + 1..].trim();
    if title.is_empty() {
        return Err((level + close + 4, "expected a title after the span".into()));
    }
    Ok((level, Span::new(first, last), title))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_sections() {
        let tree = parse_outline(
            "# [1-10] Doc\n## [1-4] Intro\n## [5-10] Body\n### [6-7] Detail\n",
            10,
            true,
        )
        .unwrap();
        let titles: Vec<(&str, u16, Span)> = tree
            .nodes
            .iter()
            .map(|n| (n.title.as_str(), n.level, n.span))
            .collect();
        assert_eq!(
            titles,
            vec![
                ("Doc", 0, Span::new(0, 9)),
                ("Doc", 1, Span::new(0, 9)),
                ("Intro", 2, Span::new(0, 3)),
                ("Body", 2, Span::new(4, 9)),
                ("Detail", 3, Span::new(5, 6)),
            ]
        );
    }

    #[test]
    fn rejects_bad_outlines_with_positions() {
        let cases = [
            ("# [0-20] Too far", "outside"),
            ("# [0-3] A\n# [2-5] B", "overlaps"),
            ("# [0-3] A\n### [1-2] B", "skips a level"),
            ("# [0-3] A\n## [2-5] B", "not inside"),
            ("# [3-1] A", "ends before"),
            ("#[0-1] A", "space"),
            ("# [0-1]", "title"),
            ("# [x-1] A", "EDU number"),
        ];
        for (outline, needle) in cases {
            let err = parse_outline(outline, 10, false).unwrap_err();
            assert!(err.message.contains(needle), "{outline:?}: {err}");
        }
        assert_eq!(
            parse_outline("# [0-1] A\n# [1-2] B", 10, false)
                .unwrap_err()
                .line,
            2
        );
    }
}

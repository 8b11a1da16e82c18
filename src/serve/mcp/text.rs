//! The text a model reads in an MCP answer, written from the JSON answers
//! of [`Api`](super::Api) (the same whether the store is local or served):
//! spans with their coordinates, outlines of trees, one line per listed
//! document or session.

use std::fmt::Write;

use serde_json::Value;

/// `[doc · EDUs a–b · pages p–q]` of an item that carries `doc`, `edus`
/// and perhaps `pages`.
fn coordinates(item: &Value) -> String {
    let mut said = format!("[{}", item["doc"].as_str().unwrap_or("?"));
    if let Some([first, last]) = pair(&item["edus"]) {
        if first == last {
            let _ = write!(said, " · EDU {first}");
        } else {
            let _ = write!(said, " · EDUs {first}–{last}");
        }
    }
    if let Some([first, last]) = pair(&item["pages"]) {
        if first == last {
            let _ = write!(said, " · page {first}");
        } else {
            let _ = write!(said, " · pages {first}–{last}");
        }
    }
    said.push(']');
    said
}

/// A JSON `[a, b]` of whole numbers.
fn pair(value: &Value) -> Option<[u64; 2]> {
    Some([value.get(0)?.as_u64()?, value.get(1)?.as_u64()?])
}

/// A query's answer: each item's coordinates (and title, for a node) over
/// its text, then the tokens used; a plan when EXPLAIN asked for one; a
/// SHOW statement's answer as JSON.
pub(super) fn query(answer: &Value) -> String {
    let Some(items) = answer["results"].as_array() else {
        return serde_json::to_string_pretty(answer).unwrap_or_default();
    };
    let mut said = String::new();
    for item in items {
        said.push_str(&coordinates(item));
        if let Some(title) = item["title"].as_str().filter(|_| !item["node"].is_null()) {
            let _ = write!(said, " {title}");
        }
        let _ = writeln!(said, "\n{}\n", item["text"].as_str().unwrap_or_default());
    }
    if items.is_empty() {
        said.push_str("Nothing matched.\n");
    }
    let _ = write!(
        said,
        "{} spans, {} of {} tokens.",
        items.len(),
        answer["tokens_used"],
        answer["budget"]
    );
    if let Some(plan) = answer.get("plan") {
        let _ = write!(
            said,
            "\n\nplan:\n{}",
            serde_json::to_string_pretty(plan).unwrap_or_default()
        );
    }
    said
}

/// A session's context: each item's kind, turn and role over its text.
pub(super) fn context(answer: &Value) -> String {
    let mut said = String::new();
    let items = answer["items"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    for item in items {
        let _ = write!(
            said,
            "[{} · turn {} · {}",
            item["kind"].as_str().unwrap_or("item").replace('_', " "),
            item["turn"],
            item["role"].as_str().unwrap_or("?")
        );
        if let Some(at) = item["at"].as_str() {
            let _ = write!(said, " · {at}");
        }
        let _ = writeln!(said, "]\n{}\n", item["text"].as_str().unwrap_or_default());
    }
    if items.is_empty() {
        said.push_str("The session holds nothing yet.\n");
    }
    let _ = write!(
        said,
        "{} items, {} of {} tokens; {} path turns left out.",
        items.len(),
        answer["tokens_used"],
        answer["budget"],
        answer["path_turns_dropped"]
    );
    said
}

/// One line per document: id, title and size.
pub(super) fn documents(documents: &Value) -> String {
    lines(documents, "documents", |doc| {
        format!(
            "{}: {} ({} EDUs, {} tokens)",
            doc["id"].as_str().unwrap_or("?"),
            doc["title"].as_str().unwrap_or("untitled"),
            doc["edus"],
            doc["tokens"]
        )
    })
}

/// One line per session: id and its counts.
pub(super) fn sessions(sessions: &Value) -> String {
    lines(sessions, "sessions", |session| {
        format!(
            "{}: {} turns, {} topics, {} branches, {} tokens",
            session["id"].as_str().unwrap_or("?"),
            session["turns"],
            session["topics"],
            session["branches"],
            session["tokens"]
        )
    })
}

/// One line per element of a JSON array of `what`, or that the store
/// holds none.
fn lines(listed: &Value, what: &str, line: impl Fn(&Value) -> String) -> String {
    match listed.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        [] => format!("The store holds no {what}."),
        listed => listed.iter().map(|v| line(v) + "\n").collect(),
    }
}

/// A document's tree as an indented outline, to `depth` levels below the
/// root (all without one): each node's id, kind, EDU span and title.
pub(super) fn tree(root: &Value, depth: Option<u32>) -> String {
    let mut said = String::new();
    outline(&mut said, root, 0, depth);
    said
}

fn outline(said: &mut String, node: &Value, level: u32, depth: Option<u32>) {
    let span = pair(&node["span"]).map_or_else(String::new, |[a, b]| format!(" [{a}-{b}]"));
    let _ = writeln!(
        said,
        "{}#{} {}{} {}",
        "  ".repeat(level as usize),
        node["id"],
        node["kind"].as_str().unwrap_or("node"),
        span,
        node["title"].as_str().unwrap_or_default()
    );
    if depth.is_some_and(|d| level >= d) {
        return;
    }
    for child in node["children"].as_array().into_iter().flatten() {
        outline(said, child, level + 1, depth);
    }
}

/// `root` with the children below `depth` levels cut off.
pub(super) fn pruned(mut root: Value, depth: u32) -> Value {
    fn cut(node: &mut Value, level: u32, depth: u32) {
        if let Some(children) = node.get_mut("children").and_then(Value::as_array_mut) {
            if level >= depth {
                children.clear();
            }
            for child in children {
                cut(child, level + 1, depth);
            }
        }
    }
    cut(&mut root, 0, depth);
    root
}

/// EDUs read from a document, one per line under their coordinates.
pub(super) fn edus(doc: &str, edus: &[Value]) -> String {
    let mut said = String::new();
    for edu in edus {
        let _ = writeln!(
            said,
            "[{doc} · EDU {}] {}",
            edu["id"],
            edu["text"].as_str().unwrap_or_default()
        );
    }
    said
}

/// A session's dialogue tree: topics, their branches and turns.
pub(super) fn session(session: &Value) -> String {
    let mut said = format!(
        "session {} (current turn {}, {} tokens)\n",
        session["id"].as_str().unwrap_or("?"),
        session["current"],
        session["tokens"]
    );
    for topic in session["topics"].as_array().into_iter().flatten() {
        let active = if topic["active"] == true {
            " (active)"
        } else {
            ""
        };
        let _ = writeln!(said, "topic {}{active}", topic["id"]);
        for branch in topic["branches"].as_array().into_iter().flatten() {
            let active = if branch["active"] == true {
                " (active)"
            } else {
                ""
            };
            let _ = writeln!(said, "  branch {}{active}", branch["id"]);
            for turn in branch["turns"].as_array().into_iter().flatten() {
                let _ = writeln!(
                    said,
                    "    #{} {}: {}",
                    turn["number"],
                    turn["role"].as_str().unwrap_or("?"),
                    turn["summary"]["text"].as_str().unwrap_or("(forgotten)")
                );
            }
        }
    }
    said
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_query_answer_reads_as_cited_spans() {
        let answer = json!({
            "budget": 64, "tokens_used": 12,
            "results": [
                {"doc": "10k", "edus": [3, 5], "pages": [7, 8], "node": 2, "title": "Risk", "text": "Rates rose."},
                {"doc": "10k", "edus": [9, 9], "node": null, "title": null, "text": "Sales fell."},
            ],
        });
        assert_eq!(
            query(&answer),
            "[10k · EDUs 3–5 · pages 7–8] Risk\nRates rose.\n\n[10k · EDU 9]\nSales fell.\n\n2 spans, 12 of 64 tokens."
        );
    }

    #[test]
    fn a_tree_is_cut_at_its_depth_in_text_and_in_json() {
        let root = json!({"id": 0, "kind": "document", "span": [0, 9], "title": "T", "children": [
            {"id": 1, "kind": "section", "span": [0, 4], "title": "A", "children": [
                {"id": 2, "kind": "paragraph", "span": [1, 4], "title": "a", "children": []}]}]});
        assert_eq!(
            tree(&root, Some(1)),
            "#0 document [0-9] T\n  #1 section [0-4] A\n"
        );
        let cut = pruned(root, 1);
        assert_eq!(cut["children"][0]["children"], json!([]));
        assert_eq!(cut["children"][0]["title"], "A");
    }
}

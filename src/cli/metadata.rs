//! `meta`: a document's metadata shown or changed in place.

use std::io::Write;

use super::args::MetaChange;
use super::context::Context;
use super::failure::Failure;
use super::meta_values::assignment;
use super::render;

/// `meta DOC [set|unset …]`: prints the document's metadata (as JSON with
/// `--json`), after the change when one is given.
pub(super) fn run(
    context: &Context,
    out: &mut dyn Write,
    doc: &str,
    change: Option<&MetaChange>,
) -> Result<(), Failure> {
    let db = context.open_holding(doc)?;
    let metadata = match change {
        None => db.metadata(doc)?,
        Some(MetaChange::Set { pairs }) => {
            let set =
                (pairs.iter().map(|pair| assignment(pair))).collect::<edudb::Result<Vec<_>>>()?;
            db.update_metadata(doc, &set, &[])?
        }
        Some(MetaChange::Unset { keys }) => db.update_metadata(doc, &[], keys)?,
    };
    if context.cli.json {
        render::json(
            out,
            &serde_json::json!({ "id": doc, "metadata": metadata.to_json() }),
        )?;
    } else {
        for (key, value) in metadata.iter() {
            writeln!(out, "{key} = {}", value.to_json())?;
        }
    }
    Ok(())
}

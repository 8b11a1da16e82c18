//! `meta`: a document's metadata shown or changed in place, and the
//! `KEY=VALUE` form `ingest --meta` and `meta set` share.

use std::io::Write;
use std::path::Path;

use edudb::{Error, MetaValue, Metadata};

use super::args::MetaChange;
use super::context::Context;
use super::failure::Failure;
use super::render;

/// `meta DOC [set|unset …]`: prints the document's metadata (as JSON with
/// `--json`), after the change when one is given.
pub(super) fn run(
    context: &Context,
    out: &mut dyn Write,
    doc: &str,
    change: Option<&MetaChange>,
) -> Result<(), Failure> {
    let db = context.open(false)?;
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

/// The metadata `ingest` gives every document: the JSON object in
/// `json_file`, then each `KEY=VALUE` of `pairs` over it.
pub(super) fn given(pairs: &[String], json_file: Option<&Path>) -> edudb::Result<Metadata> {
    let mut metadata = match json_file {
        None => Metadata::default(),
        Some(path) => {
            let io = |source| Error::Io {
                path: path.to_owned(),
                source,
            };
            let text = std::fs::read_to_string(path).map_err(io)?;
            let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                Error::Usage(format!("--meta-json {}: not JSON: {e}", path.display()))
            })?;
            Metadata::from_json(&value)?
        }
    };
    for pair in pairs {
        let (key, value) = assignment(pair)?;
        metadata.set(&key, value)?;
    }
    Ok(metadata)
}

/// One `KEY=VALUE` (the value typed as [`MetaValue::from_command_line`]
/// says) or `KEY:=JSON`.
fn assignment(pair: &str) -> edudb::Result<(String, MetaValue)> {
    let Some((key, value)) = pair.split_once('=') else {
        return Err(Error::Usage(format!(
            "metadata {pair:?}: expected KEY=VALUE or KEY:=JSON"
        )));
    };
    edudb::model::metadata::check_key(key.strip_suffix(':').unwrap_or(key))?;
    let value = match key.strip_suffix(':') {
        Some(key) => {
            let json: serde_json::Value = serde_json::from_str(value).map_err(|e| {
                Error::Usage(format!(
                    "metadata {pair:?}: the value after := is not JSON: {e}"
                ))
            })?;
            return Ok((key.to_owned(), MetaValue::from_json(key, &json)?));
        }
        None => MetaValue::from_command_line(key, value)?,
    };
    Ok((key.to_owned(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_are_typed_and_json_values_given_with_colon_equals() {
        assert_eq!(
            assignment("year=2020").unwrap(),
            ("year".into(), MetaValue::Number(2020.0))
        );
        assert_eq!(
            assignment("form=10-K").unwrap(),
            ("form".into(), MetaValue::Text("10-K".into()))
        );
        assert_eq!(
            assignment("cik=0000320193").unwrap(),
            ("cik".into(), MetaValue::Text("0000320193".into()))
        );
        assert_eq!(
            assignment("note=a=b").unwrap(),
            ("note".into(), MetaValue::Text("a=b".into()))
        );
        assert_eq!(
            assignment(r#"tags:=["risk","cash"]"#).unwrap(),
            (
                "tags".into(),
                MetaValue::List(vec!["risk".into(), "cash".into()])
            )
        );
        for bad in ["year", "tags:=[1", "bad key=1", "n:={\"a\":1}"] {
            assert!(assignment(bad).is_err(), "{bad}");
        }
    }
}

//! Salvage: copying what can still be read out of a damaged store into a
//! new one, where `check` and `rm` cannot repair it in place (sled cannot
//! rewrite a page it cannot read). A store whose data log is damaged, or
//! which the engine cannot open at all, is first read page by page from
//! its data log into a scratch store inside it
//! ([`Store::rebuild_from_log`]), which is then salvaged.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use serde::Serialize;

use crate::engine::lock::StoreLock;
use crate::engine::reads::Damaged;
use crate::engine::write::Written;
use crate::engine::{Engine, FULLTEXT_DIR, OpenOptions, io_error};
use crate::error::{Error, Result};
use crate::model::cost::LlmCost;
use crate::model::dag::Dag;
use crate::model::dialogue::{Dialogue, Turn};
use crate::model::document::{Document, PackedVectors};
use crate::model::ids::parse_turn_id;
use crate::progress::{CancelToken, Progress};
use crate::storage::fulltext::FullText;
use crate::storage::store::{ENGINE_DIR, LogContents, LogRecovery, Store};

/// The prefix of the scratch store a salvage from the data log builds
/// inside the damaged store's directory (removed when it ends).
const SCRATCH_PREFIX: &str = "salvage-scratch.";

/// A document with its vectors and DAG: what one document's write holds.
type Record = (Document, PackedVectors, Dag);

/// How copying one document or session went.
#[derive(Debug)]
pub(super) enum Copied {
    /// It was copied whole.
    Whole,
    /// The store does not hold it.
    Absent,
    /// It does not read whole, for this reason; nothing was copied.
    Unreadable(Error),
}

/// What [`crate::Db::salvage`] copied and what it left behind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SalvageReport {
    /// Documents copied whole (session turns not counted).
    pub documents: usize,
    /// Sessions copied whole, each with every turn.
    pub sessions: usize,
    /// What could not be read whole and was left out, with why: a
    /// document id, or `session ID` for a session.
    pub skipped: Vec<Damaged>,
    /// Set when the store's data log was damaged, or its engine could
    /// not open the store at all, so its records were read from the log
    /// page by page: how that went. A record whose latest write did not
    /// read there is copied as its last version that did, so a document
    /// removed or replaced just before the damage may come back in its
    /// earlier form.
    pub from_log: Option<LogRecovery>,
}

impl Engine {
    /// The work of [`crate::Db::salvage_store`]. The data log is read page
    /// by page first, before the engine touches it: where damage shows,
    /// the engine would cut the log short at it on opening (and may reuse
    /// the space past the cut, or fail to open at all), so the store is
    /// salvaged from what that reading holds; where none shows, the
    /// engine opens the store as ever.
    pub(crate) fn salvage_store(
        from: &Path,
        to: &Path,
        options: &OpenOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<SalvageReport> {
        require_new(to)?;
        // Only a store's directory is locked and read (opening anything
        // else says what it is).
        if from.join(ENGINE_DIR).is_dir() {
            let lock = StoreLock::take(from, options.busy_timeout)?;
            if let Some(log) = Store::read_log(&from.join(ENGINE_DIR))?
                && log.recovery().damaged > 0
            {
                tracing::warn!(
                    "the data log of {} is damaged in {} places: salvaging from what it holds, read page by page",
                    from.display(),
                    log.recovery().damaged
                );
                return Engine::salvage_log(from, log, lock, to, options, progress, cancel);
            }
        }
        // The engine reports some damage it meets while recovering as a
        // failure to read, not as damage.
        let damage = match Engine::open(from, options) {
            Ok(engine) => return engine.salvage(to, progress, cancel),
            Err(err) if err.is_damage() || matches!(err, Error::Storage(_)) => err,
            Err(err) => return Err(err),
        };
        tracing::warn!("{damage}: salvaging from what its data log holds, read page by page");
        let lock = StoreLock::take(from, options.busy_timeout)?;
        let Some(log) = Store::read_log(&from.join(ENGINE_DIR))? else {
            return Err(damage);
        };
        Engine::salvage_log(from, log, lock, to, options, progress, cancel)
    }

    /// Salvages the store at `from`, whose `lock` is held, from `log`, its
    /// data log as read page by page: written into a scratch store inside
    /// `from` (removed at the end), which is salvaged into `to`.
    fn salvage_log(
        from: &Path,
        log: LogContents,
        _lock: StoreLock,
        to: &Path,
        options: &OpenOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<SalvageReport> {
        let scratch = tempfile::Builder::new()
            .prefix(SCRATCH_PREFIX)
            .tempdir_in(from)
            .map_err(io_error(from))?;
        let recovery = Store::rebuild_from_log(
            log,
            &from.join(ENGINE_DIR),
            &scratch.path().join(ENGINE_DIR),
            options.embedder.is_some() || options.custom_embedder.is_some(),
        )?;
        // The documents the damaged store's full-text index knows, so
        // that those the log lost are named among what was left out.
        let indexed = FullText::open(&from.join(FULLTEXT_DIR))
            .and_then(|index| index.reader().document_ids())
            .unwrap_or_else(|err| {
                tracing::warn!("the damaged store's full-text index does not read: {err}");
                Default::default()
            });
        let rebuilt = Engine::open(scratch.path(), options)?;
        let mut report = rebuilt.salvage_known(to, indexed, progress, cancel)?;
        report.from_log = Some(recovery);
        Ok(report)
    }

    /// The work of [`crate::Db::salvage`].
    pub(crate) fn salvage(
        &self,
        to: &Path,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<SalvageReport> {
        self.salvage_known(to, Default::default(), progress, cancel)
    }

    /// [`Engine::salvage`], naming also the documents of `known` (ids
    /// from elsewhere) among what was left out unless they are copied.
    fn salvage_known(
        &self,
        to: &Path,
        known: std::collections::BTreeSet<String>,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<SalvageReport> {
        require_new(to)?;
        let target = Engine::open(
            to,
            &OpenOptions {
                create: true,
                embedder: Some(self.embedder_config().clone()),
                ..Default::default()
            },
        )?;
        // The documents the store lists, and those only the full-text index
        // still knows (the store's scan ends at a page it cannot read).
        let mut ids = known;
        let mut report = SalvageReport::default();
        match self.store().ids() {
            Ok(listed) => ids.extend(listed),
            Err(err) => skip(&mut report, "the document list", &err),
        }
        ids.extend(self.reader.document_ids()?);
        let sessions = match self.store().session_ids() {
            Ok(sessions) => sessions,
            Err(err) => {
                skip(&mut report, "the session list", &err);
                Vec::new()
            }
        };
        let documents: Vec<String> = ids
            .into_iter()
            .filter(|id| parse_turn_id(id).is_none())
            .collect();
        progress.start("salvage", (documents.len() + sessions.len()) as u64);
        let result = self.copy_all(
            &target,
            &documents,
            &sessions,
            &mut report,
            progress,
            cancel,
        );
        progress.finish();
        result?;
        // What a damaged change log lost before this salvage is left out
        // too, and named with it.
        for lost in self.unrecovered_losses()? {
            skip(&mut report, &lost.doc, &lost.error);
        }
        Ok(report)
    }

    /// Copies each of `documents` and `sessions` that reads whole into
    /// `target`, each in one write; records the rest in `report`.
    fn copy_all(
        &self,
        target: &Engine,
        documents: &[String],
        sessions: &[String],
        report: &mut SalvageReport,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<()> {
        let costs = match self.costs_by_document() {
            Ok(costs) => costs,
            Err(err) => {
                skip(report, "the build costs", &err);
                Default::default()
            }
        };
        for id in documents {
            cancel.check()?;
            match self.copy_document(target, id, &costs)? {
                Copied::Whole => report.documents += 1,
                Copied::Absent => skip(report, id, &Error::NoSuchDocument(id.clone())),
                Copied::Unreadable(err) => skip(report, id, &err),
            }
            progress.advance(1, id);
        }
        for id in sessions {
            cancel.check()?;
            match self.copy_session(target, id)? {
                Copied::Whole => report.sessions += 1,
                Copied::Absent => skip(
                    report,
                    &format!("session {id}"),
                    &Error::NoSuchSession(id.clone()),
                ),
                Copied::Unreadable(err) => skip(report, &format!("session {id}"), &err),
            }
            progress.advance(1, id);
        }
        Ok(())
    }

    /// What a model cost to build each document (it goes with its copy).
    pub(super) fn costs_by_document(&self) -> Result<std::collections::HashMap<String, LlmCost>> {
        Ok(self.store().costs()?.into_iter().collect())
    }

    /// Copies document `id` into `target` in one write, with its cost from
    /// `costs`, when it reads whole.
    pub(super) fn copy_document(
        &self,
        target: &Engine,
        id: &str,
        costs: &std::collections::HashMap<String, LlmCost>,
    ) -> Result<Copied> {
        match self.readable_document(id) {
            Ok(Some(record)) => {
                target.write(|| {
                    let (doc, vectors, dag) = &record;
                    let cost = costs.get(id).copied().unwrap_or_default();
                    target.store().put(doc, vectors, dag, &cost)?;
                    Ok(((), written(vec![record.0.clone()])))
                })?;
                Ok(Copied::Whole)
            }
            Ok(None) => Ok(Copied::Absent),
            Err(err) if err.is_damage() => Ok(Copied::Unreadable(err)),
            Err(err) => Err(err),
        }
    }

    /// Copies session `id` into `target`, its dialogue with every turn in
    /// one write, when all of it reads whole.
    pub(super) fn copy_session(&self, target: &Engine, id: &str) -> Result<Copied> {
        match self.readable_session(id) {
            Ok((turns, dialogue)) => {
                target.write(|| {
                    target.store().put_turns(&turns, &dialogue)?;
                    let docs = turns.iter().map(|(doc, ..)| doc.clone()).collect();
                    Ok(((), written(docs)))
                })?;
                Ok(Copied::Whole)
            }
            Err(Error::NoSuchSession(_)) => Ok(Copied::Absent),
            Err(err) if err.is_damage() => Ok(Copied::Unreadable(err)),
            Err(err) => Err(err),
        }
    }

    /// Copies into `target` only the turns session `id` gained since
    /// `target`'s copy of it was made, with the session's dialogue as it is
    /// now, in one write; true when done that way. False, with nothing
    /// written, unless that is all that changed: the copy's turns not
    /// forgotten are the first of the session's now, as the copy recorded
    /// them and none among `changed` (the turn documents written since the
    /// copy), and none of the new turns is one the copy knows (so no turn
    /// was forgotten, and the session was not removed and begun again);
    /// false also when a new turn or the dialogue does not read whole.
    /// [`Engine::copy_session`] then copies it whole.
    pub(super) fn copy_session_tail(
        &self,
        target: &Engine,
        id: &str,
        changed: &BTreeSet<String>,
    ) -> Result<bool> {
        let (Ok(Some(now)), Ok(Some(copy))) =
            (self.store().dialogue(id), target.store().dialogue(id))
        else {
            return Ok(false);
        };
        let (now_said, copy_said) = (said_turns(&now), said_turns(&copy));
        let kept = copy_said.len();
        let a_prefix = now_said.len() >= kept
            && (now_said.iter().zip(&copy_said)).all(|(turn, copied)| {
                turn.doc == copied.doc && turn.edus == copied.edus && !changed.contains(&turn.doc)
            });
        let new = &now_said[kept.min(now_said.len())..];
        // Run with writers held: one set of the copy's turns, not a search
        // of them per new turn.
        let known: HashSet<&str> = copy.turns.iter().map(|turn| turn.doc.as_str()).collect();
        if !a_prefix || new.iter().any(|turn| known.contains(turn.doc.as_str())) {
            return Ok(false);
        }
        if new.is_empty() {
            return Ok(now == copy);
        }
        let records = match (new.iter())
            .map(|turn| self.readable_turn(id, turn))
            .collect::<Result<Vec<_>>>()
        {
            Ok(records) => records,
            Err(err) if err.is_damage() => return Ok(false),
            Err(err) => return Err(err),
        };
        let edus: HashMap<&str, u32> = (copy_said.iter())
            .map(|turn| (turn.doc.as_str(), turn.edus))
            .chain(
                records
                    .iter()
                    .map(|(doc, ..)| (doc.meta.id.as_str(), doc.meta.edus)),
            )
            .collect();
        if now.validate(&|doc| edus.get(doc).copied()).is_err() {
            return Ok(false);
        }
        target.write(|| {
            target.store().put_turns(&records, &now)?;
            let docs = records.iter().map(|(doc, ..)| doc.clone()).collect();
            Ok(((), written(docs)))
        })?;
        Ok(true)
    }

    /// Document `id` with its vectors and DAG, once they pass the checks
    /// `check` makes of a document ([`Store::checked_records`]); `None`
    /// when the store does not hold it.
    ///
    /// [`Store::checked_records`]: crate::storage::store::Store::checked_records
    fn readable_document(&self, id: &str) -> Result<Option<Record>> {
        let Some((doc, vectors, dag)) = self.store().checked_records(id)? else {
            return Ok(None);
        };
        Ok(Some((doc, vectors.to_packed()?, dag)))
    }

    /// Session `id`'s dialogue and every turn's records (a forgotten turn
    /// has none), each readable and the dialogue consistent with its
    /// turns, as `check` requires.
    fn readable_session(&self, id: &str) -> Result<(Vec<Record>, Dialogue)> {
        let dialogue = self
            .store()
            .dialogue(id)?
            .ok_or_else(|| Error::NoSuchSession(id.to_owned()))?;
        let turns = (dialogue.turns.iter())
            .filter(|turn| !turn.is_forgotten())
            .map(|turn| self.readable_turn(id, turn))
            .collect::<Result<Vec<_>>>()?;
        // The dialogue's own tree, as `check` validates it.
        let edus: HashMap<&str, u32> = (turns.iter())
            .map(|(doc, ..)| (doc.meta.id.as_str(), doc.meta.edus))
            .collect();
        dialogue
            .validate(&|doc| edus.get(doc).copied())
            .map_err(|message| Error::Invariant {
                doc: format!("session {id}"),
                message,
            })?;
        Ok((turns, dialogue))
    }

    /// The records of `turn` of session `id`, readable and as the turn
    /// records them.
    fn readable_turn(&self, id: &str, turn: &Turn) -> Result<Record> {
        let invariant = |message: String| Error::Invariant {
            doc: turn.doc.clone(),
            message,
        };
        let record = self.readable_document(&turn.doc)?.ok_or_else(|| {
            invariant(format!("session {id} lists it; the store does not hold it"))
        })?;
        turn.check_document(&record.0).map_err(invariant)?;
        Ok(record)
    }
}

/// `dialogue`'s turns not forgotten, in order.
fn said_turns(dialogue: &Dialogue) -> Vec<&Turn> {
    (dialogue.turns.iter())
        .filter(|turn| !turn.is_forgotten())
        .collect()
}

/// Documents written by one salvage step.
fn written(put: Vec<Document>) -> Written {
    Written {
        put,
        ..Written::default()
    }
}

/// Refuses a salvage or a backup into `to` unless it is absent or an
/// empty directory.
pub(super) fn require_new(to: &Path) -> Result<()> {
    if to.exists() && !to.is_dir() {
        return Err(Error::Usage(format!(
            "the copy needs a new store: {} is a file",
            to.display()
        )));
    }
    if std::fs::read_dir(to).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(Error::Usage(format!(
            "the copy needs a new store: {} is not empty",
            to.display()
        )));
    }
    Ok(())
}

/// Records `what` as left out of the salvage for `err`.
fn skip(report: &mut SalvageReport, what: &str, err: &Error) {
    report.skipped.push(Damaged {
        doc: what.to_owned(),
        problem: err.to_string(),
    });
}

#[cfg(test)]
mod tests {
    use crate::compute::embed::EmbedderConfig;
    use crate::engine::lock::StoreLock;
    use crate::engine::{Engine, OpenOptions, three_fruit_store};
    use crate::error::Error;
    use crate::model::metadata::MetaValue;
    use crate::progress::{CancelToken, NoProgress};
    use crate::storage::store::{ENGINE_DIR, Store};

    #[test]
    fn damaged_documents_are_left_out_and_named_and_the_rest_copied_whole() {
        let (dir, engine) = three_fruit_store();
        engine.store().damage("pears", false);
        engine.store().damage("plums", true);
        let to = dir.path().join("salvaged");
        let report = engine
            .salvage(&to, &NoProgress, &CancelToken::new())
            .unwrap();
        let skipped: Vec<&str> = report.skipped.iter().map(|d| d.doc.as_str()).collect();
        assert_eq!((report.documents, report.sessions), (1, 0));
        assert_eq!(skipped, ["pears", "plums"], "{report:?}");
        let copy = Engine::open(&to, &OpenOptions::default()).unwrap();
        assert!(copy.check().unwrap().damaged.is_empty());
        let original = engine.store().get("apples").unwrap().unwrap();
        let copied = copy.store().get("apples").unwrap().unwrap();
        assert_eq!(
            copied.to_document().unwrap(),
            original.to_document().unwrap()
        );
        assert_eq!(copy.search("orchards", 5).unwrap().len(), 1);
        // A store that is not new is refused, and left as it was.
        let again = engine.salvage(&to, &NoProgress, &CancelToken::new());
        assert!(matches!(again, Err(Error::Usage(_))), "{again:?}");
        drop(copy);
        let copy = Engine::open(&to, &OpenOptions::default()).unwrap();
        assert_eq!(copy.store().ids().unwrap(), ["apples"]);
    }

    #[test]
    fn a_log_that_lost_the_stores_own_records_is_salvaged_once_the_embedder_is_named() {
        let (dir, engine) = three_fruit_store();
        let orchard = [("orchard".to_owned(), MetaValue::text("north".into()))];
        engine.update_metadata("apples", &orchard, &[]).unwrap();
        drop(engine);
        let from = dir.path().join("db");
        let salvage = |to: &str, embedder: Option<EmbedderConfig>| {
            let mut log = Store::read_log(&from.join(ENGINE_DIR)).unwrap().unwrap();
            // The page of the format, embedder and metadata mark is lost.
            log.lose_store_records();
            let lock = StoreLock::take(&from, std::time::Duration::ZERO).unwrap();
            let options = OpenOptions {
                embedder,
                ..Default::default()
            };
            let to = dir.path().join(to);
            let report = Engine::salvage_log(
                &from,
                log,
                lock,
                &to,
                &options,
                &NoProgress,
                &CancelToken::new(),
            );
            (report, to)
        };
        // Unnamed, the embedder the vectors belong to is not guessed.
        let (refused, to) = salvage("unnamed", None);
        assert!(
            matches!(&refused, Err(Error::Corrupt { message, .. }) if message.contains("--embedder")),
            "{refused:?}"
        );
        assert!(!to.exists());
        let (report, to) = salvage("named", Some(EmbedderConfig::default()));
        let report = report.unwrap();
        assert_eq!(
            (report.documents, report.skipped.len()),
            (3, 0),
            "{report:?}"
        );
        let recovery = report.from_log.unwrap();
        assert!(
            recovery.format_assumed && recovery.embedder_named,
            "{recovery:?}"
        );
        let copy = Engine::open(&to, &OpenOptions::default()).unwrap();
        assert!(copy.check().unwrap().damaged.is_empty());
        assert_eq!(copy.embedder_config(), &EmbedderConfig::default());
        assert_eq!(
            copy.metadata("apples").unwrap().get("orchard"),
            Some(&MetaValue::text("north".into()))
        );
        assert_eq!(copy.search("orchards", 5).unwrap().len(), 1);
    }
}

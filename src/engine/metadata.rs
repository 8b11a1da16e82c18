//! Documents' metadata: read, changed in place (as the store's only
//! writer) and looked up through the store's metadata index.

use std::collections::BTreeSet;

use super::Engine;
use super::write::Written;
use crate::error::{Error, Result};
use crate::model::metadata::{MetaTest, MetaValue, Metadata};

impl Engine {
    /// The work of [`crate::Db::metadata`].
    pub(crate) fn metadata(&self, id: &str) -> Result<Metadata> {
        (self.store.metadata(id)?).ok_or_else(|| Error::NoSuchDocument(id.to_owned()))
    }

    /// The work of [`crate::Db::update_metadata`].
    pub(crate) fn update_metadata(
        &self,
        id: &str,
        set: &[(String, MetaValue)],
        unset: &[String],
    ) -> Result<Metadata> {
        self.write(|| {
            let mut metadata = self.metadata(id)?;
            for (key, value) in set {
                metadata.set(key, value.clone())?;
            }
            for key in unset {
                metadata.unset(key);
            }
            if !self.store.set_metadata(id, &metadata)? {
                return Err(Error::NoSuchDocument(id.to_owned()));
            }
            self.forget_cached(id);
            Ok((metadata, Written::default()))
        })
    }

    /// The documents whose metadata key `name` passes `test`.
    pub(crate) fn documents_matching(
        &self,
        name: &str,
        test: &MetaTest,
    ) -> Result<BTreeSet<String>> {
        self.store.documents_matching(name, test)
    }

    /// The work of [`crate::Db::all_metadata`].
    pub(crate) fn all_metadata(&self) -> Result<Vec<(String, Result<Metadata>)>> {
        self.store.all_metadata()
    }
}

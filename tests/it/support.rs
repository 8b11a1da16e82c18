//! Shared by the integration tests: the real evaluation data beside the
//! repository (`../shared/data`), which CI provides at the same place.

use std::path::PathBuf;

/// The Rust RFC corpus (Markdown files); panics with a clear message when
/// `../shared` is not beside the repository.
pub fn rfcs() -> PathBuf {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/rust_rfcs/text"
    ));
    assert!(
        dir.is_dir(),
        "test data missing: {} (../shared must sit beside the repository)",
        dir.display()
    );
    dir
}

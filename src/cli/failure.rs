//! How a command fails: [`Failure`] and the exit codes (1: bad input or
//! usage, 2: internal failure, 3: the store is busy, held by another
//! process past the busy timeout: retry).

use edudb::Error;

/// Exit code for bad input or usage.
pub const EXIT_USER: u8 = 1;
/// Exit code for internal failures.
pub const EXIT_INTERNAL: u8 = 2;
/// Exit code for a store another process holds ([`Error::is_busy`]).
pub const EXIT_BUSY: u8 = 3;

/// The exit code for a library error.
pub fn exit_code(err: &Error) -> u8 {
    if err.is_busy() {
        EXIT_BUSY
    } else if err.is_user_error() {
        EXIT_USER
    } else {
        EXIT_INTERNAL
    }
}

/// Why a command failed: the library refused, or the output could not be
/// written (a closed pipe, a full disk).
#[derive(Debug)]
pub enum Failure {
    /// The library's error.
    Db(Error),
    /// Writing to stdout or stderr failed.
    Output(std::io::Error),
}

impl From<Error> for Failure {
    fn from(err: Error) -> Failure {
        Failure::Db(err)
    }
}

impl From<std::io::Error> for Failure {
    fn from(err: std::io::Error) -> Failure {
        Failure::Output(err)
    }
}

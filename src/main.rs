//! The `edudb` command-line tool. Exit codes: 0 success, 1 bad input or
//! usage, 2 internal failure, 3 busy (the store is held by another process).

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}

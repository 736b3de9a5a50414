//! The GDL front end: KIF text to a checked [`Description`].
//!
//! [`parse`] is the one entry point: it reads the text and runs the static checks of the GDL
//! specification. Every error carries a line, a column and the source line.

mod ast;
mod check;
pub(crate) mod deps;
mod error;
mod modes;
mod parser;

pub use ast::{Atom, Description, Keywords, Literal, Rule, Span, Symbol, Symbols, Term};
pub use check::{MAX_EXPANSIONS, MAX_WARNINGS};
pub use error::{ErrorKind, ParseError};
pub use parser::{parse_syntax, MAX_NESTING};

/// Parses a game description and checks it against the restrictions of GDL.
pub fn parse(src: &str) -> Result<Description, ParseError> {
    let desc = parse_syntax(src)?;
    check::check(&desc, src)?;
    Ok(desc)
}

/// Why a game file could not be loaded by [`load`].
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The text is not a valid game description.
    #[error("{}: {source}", path.display())]
    Parse {
        /// The file.
        path: std::path::PathBuf,
        /// Where and why the text was refused.
        source: ParseError,
    },
}

/// Reads the game description in the file `path` and [`parse`]s it; every error names the file.
pub fn load(path: &std::path::Path) -> Result<Description, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|source| LoadError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// The warnings about a description that [`parse`] accepts: rules that are unsafe on their own
/// but accepted because they are never used or because every call binds what they need (such
/// rules must be evaluated top-down), the recursion restriction broken inside such rules, and
/// function symbols used with more than one arity. `src` is the text `desc` was parsed from.
///
/// At most [`MAX_WARNINGS`] are returned.
pub fn warnings(desc: &Description, src: &str) -> Vec<ParseError> {
    check::warnings(desc, src)
}

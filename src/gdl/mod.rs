//! The GDL front end: KIF text to a checked [`Description`].
//!
//! [`parse`] is the one entry point: it reads the text and runs the static checks of the GDL
//! specification. Every error carries a line, a column and the source line.

mod ast;
mod check;
mod error;
mod parser;

pub use ast::{Atom, Description, Keywords, Literal, Rule, Span, Symbol, Symbols, Term};
pub use error::{ErrorKind, ParseError};
pub use parser::{parse_syntax, MAX_NESTING};

/// Parses a game description and checks it against the restrictions of GDL.
pub fn parse(src: &str) -> Result<Description, ParseError> {
    let desc = parse_syntax(src)?;
    check::check(&desc, src)?;
    Ok(desc)
}

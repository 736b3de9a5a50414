//! The front end's error: what is wrong, and where, with the source line.

use super::ast::Span;
use std::fmt;

/// The kind of problem a description has.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum ErrorKind {
    /// The text is not well-formed KIF: unbalanced parentheses, a misplaced keyword, a variable
    /// where a name is required, and so on.
    Syntax,
    /// A rule is unsafe: a variable of its head, of a negated literal or of a `distinct` does not
    /// occur in a positive literal of its body.
    Unsafe,
    /// Negation is not stratified: a relation depends negatively on itself through a cycle.
    Unstratified,
    /// A relation or function is used with more than one arity.
    Arity,
    /// A GDL restriction on the keywords is broken (`true` or `does` as a rule head, `legal`
    /// depending on `does`, `role` defined by a rule, and so on).
    Restriction,
    /// The recursion restriction of GDL is broken: recursion could make the set of derivable
    /// facts infinite.
    Recursion,
    /// A size limit of the front end was hit (such as the nesting depth).
    Limit,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Syntax => "syntax error",
            ErrorKind::Unsafe => "unsafe rule",
            ErrorKind::Unstratified => "negation is not stratified",
            ErrorKind::Arity => "inconsistent arity",
            ErrorKind::Restriction => "GDL restriction",
            ErrorKind::Recursion => "recursion restriction",
            ErrorKind::Limit => "limit",
        })
    }
}

/// An error in a game description, with its position and source line.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ParseError {
    /// What kind of problem.
    pub kind: ErrorKind,
    /// What exactly is wrong, in a sentence.
    pub message: String,
    /// Where (1-based line and column).
    pub span: Span,
    /// The text of that source line, without its line break.
    pub source_line: String,
}

impl ParseError {
    /// An error at `span` of `source`.
    pub fn new(kind: ErrorKind, message: impl Into<String>, span: Span, source: &str) -> ParseError {
        let source_line = source_lines(source)
            .nth(span.line.saturating_sub(1) as usize)
            .unwrap_or("")
            .to_string();
        ParseError {
            kind,
            message: message.into(),
            span,
            source_line,
        }
    }
}

/// The lines of `source` without their line breaks, split the way the lexer counts lines: at
/// "\n", "\r\n" and a lone "\r".
pub(crate) fn source_lines(source: &str) -> impl Iterator<Item = &str> {
    source
        .split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "line {}, column {}: {}: {}",
            self.span.line, self.span.col, self.kind, self.message
        )?;
        let number = self.span.line.to_string();
        let pad = " ".repeat(number.len());
        // Tabs are kept so that the caret lines up under the same characters.
        let lead: String = self
            .source_line
            .chars()
            .take(self.span.col.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        writeln!(f, "{number} | {}", self.source_line)?;
        write!(f, "{pad} | {lead}^")
    }
}

impl std::error::Error for ParseError {}

//! KIF text to [`Description`]: a lexer, an s-expression reader, and the conversion of
//! s-expressions to rules. No static checks happen here (see `check`).

use super::ast::{Atom, Description, Keywords, Literal, Rule, Span, Symbol, Symbols, Term};
use super::error::{ErrorKind, ParseError};

/// The deepest nesting of parentheses accepted. Real games nest a handful of levels; the limit
/// keeps every recursive pass over the syntax tree far from the stack's end.
pub const MAX_NESTING: usize = 200;

enum Sexp<'a> {
    Word(&'a str, Span),
    List(Vec<Sexp<'a>>, Span),
}

impl Sexp<'_> {
    fn span(&self) -> Span {
        match self {
            Sexp::Word(_, s) | Sexp::List(_, s) => *s,
        }
    }
}

struct Reader<'a> {
    src: &'a str,
    pos: usize,
    line: u32,
    col: u32,
}

enum Token<'a> {
    Open(Span),
    Close(Span),
    Word(&'a str, Span),
}

fn is_delimiter(c: char) -> bool {
    c.is_whitespace() || c == '(' || c == ')' || c == ';'
}

impl<'a> Reader<'a> {
    fn bump(&mut self, c: char) {
        self.pos += c.len_utf8();
        // A line ends at "\n", at "\r\n" (counted at its "\n") and at a lone "\r", which is how
        // old Macintosh files end their lines.
        let lone_cr = c == '\r' && !self.src[self.pos..].starts_with('\n');
        if c == '\n' || lone_cr {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
    }

    fn next_token(&mut self) -> Option<Token<'a>> {
        loop {
            let c = self.src[self.pos..].chars().next()?;
            if c.is_whitespace() {
                self.bump(c);
            } else if c == ';' {
                while let Some(c) = self.src[self.pos..].chars().next() {
                    if c == '\n' || c == '\r' {
                        break;
                    }
                    self.bump(c);
                }
            } else {
                break;
            }
        }
        let span = Span {
            line: self.line,
            col: self.col,
        };
        let c = self.src[self.pos..].chars().next()?;
        match c {
            '(' => {
                self.bump(c);
                Some(Token::Open(span))
            }
            ')' => {
                self.bump(c);
                Some(Token::Close(span))
            }
            _ => {
                let start = self.pos;
                while let Some(c) = self.src[self.pos..].chars().next() {
                    if is_delimiter(c) {
                        break;
                    }
                    self.bump(c);
                }
                Some(Token::Word(&self.src[start..self.pos], span))
            }
        }
    }

    fn error(&self, message: impl Into<String>, span: Span) -> ParseError {
        ParseError::new(ErrorKind::Syntax, message, span, self.src)
    }

    /// Reads every top-level s-expression.
    fn read_all(&mut self) -> Result<Vec<Sexp<'a>>, ParseError> {
        let mut items = Vec::new();
        // A stack of open lists instead of recursion, so deep input cannot overflow the stack.
        let mut stack: Vec<(Vec<Sexp<'a>>, Span)> = Vec::new();
        while let Some(tok) = self.next_token() {
            match tok {
                Token::Open(span) => {
                    if stack.len() >= MAX_NESTING {
                        return Err(ParseError::new(
                            ErrorKind::Limit,
                            format!("parentheses nest deeper than {MAX_NESTING} levels"),
                            span,
                            self.src,
                        ));
                    }
                    stack.push((Vec::new(), span));
                }
                Token::Close(span) => {
                    let Some((list, open)) = stack.pop() else {
                        return Err(self.error("unmatched ')'", span));
                    };
                    let sexp = Sexp::List(list, open);
                    match stack.last_mut() {
                        Some((parent, _)) => parent.push(sexp),
                        None => items.push(sexp),
                    }
                }
                Token::Word(w, span) => match stack.last_mut() {
                    Some((parent, _)) => parent.push(Sexp::Word(w, span)),
                    None => items.push(Sexp::Word(w, span)),
                },
            }
        }
        if let Some((_, open)) = stack.last() {
            return Err(self.error("'(' is never closed", *open));
        }
        Ok(items)
    }
}

struct Builder<'a> {
    src: &'a str,
    symbols: Symbols,
}

/// Words that have a meaning of their own in sentences and cannot name a relation there.
const SENTENCE_KEYWORDS: [&str; 5] = ["<=", "not", "or", "distinct", "and"];

impl Builder<'_> {
    fn error(&self, message: impl Into<String>, span: Span) -> ParseError {
        ParseError::new(ErrorKind::Syntax, message, span, self.src)
    }

    fn symbol(&mut self, word: &str) -> Symbol {
        self.symbols.intern(&word.to_ascii_lowercase())
    }

    fn is_var(word: &str) -> bool {
        word.starts_with('?')
    }

    fn rule(&mut self, sexp: &Sexp) -> Result<Rule, ParseError> {
        if let Sexp::List(items, span) = sexp {
            if let Some(Sexp::Word(w, _)) = items.first() {
                if *w == "<=" {
                    let Some(head) = items.get(1) else {
                        return Err(self.error("a rule '(<= head body…)' needs a head", *span));
                    };
                    let head = self.atom(head, "a rule head")?;
                    let body = items[2..]
                        .iter()
                        .map(|l| self.literal(l))
                        .collect::<Result<_, _>>()?;
                    return Ok(Rule {
                        head,
                        body,
                        span: *span,
                    });
                }
            }
        }
        let head = self.atom(sexp, "a fact")?;
        Ok(Rule {
            head,
            body: Vec::new(),
            span: sexp.span(),
        })
    }

    /// An atomic sentence; `what` names the place for error messages.
    fn atom(&mut self, sexp: &Sexp, what: &str) -> Result<Atom, ParseError> {
        match sexp {
            Sexp::Word(w, span) => {
                self.check_relation_name(w, *span, what)?;
                Ok(Atom {
                    rel: self.symbol(w),
                    args: Vec::new(),
                    span: *span,
                })
            }
            Sexp::List(items, span) => {
                let Some(first) = items.first() else {
                    return Err(self.error(format!("'()' cannot be {what}"), *span));
                };
                let Sexp::Word(w, wspan) = first else {
                    return Err(self.error(
                        format!("{what} must start with a relation name, not a list"),
                        first.span(),
                    ));
                };
                self.check_relation_name(w, *wspan, what)?;
                // `(p)` is a relation of its own, distinct from the proposition `p`, as GDL
                // provers read it; its name keeps the parentheses so it prints back the same.
                let rel = if items.len() == 1 {
                    self.symbol(&format!("({w})"))
                } else {
                    self.symbol(w)
                };
                let args = items[1..]
                    .iter()
                    .map(|t| self.term(t))
                    .collect::<Result<_, _>>()?;
                Ok(Atom {
                    rel,
                    args,
                    span: *span,
                })
            }
        }
    }

    fn check_relation_name(&self, w: &str, span: Span, what: &str) -> Result<(), ParseError> {
        if Self::is_var(w) {
            return Err(self.error(format!("a variable ('{w}') cannot be {what}"), span));
        }
        let lower = w.to_ascii_lowercase();
        if SENTENCE_KEYWORDS.contains(&lower.as_str()) {
            return Err(self.error(format!("'{lower}' cannot be {what}"), span));
        }
        Ok(())
    }

    fn literal(&mut self, sexp: &Sexp) -> Result<Literal, ParseError> {
        if let Sexp::List(items, span) = sexp {
            if let Some(Sexp::Word(w, _)) = items.first() {
                match w.to_ascii_lowercase().as_str() {
                    "not" => {
                        if items.len() != 2 {
                            return Err(self.error("'not' takes exactly one sentence", *span));
                        }
                        return Ok(Literal::Not(Box::new(self.literal(&items[1])?), *span));
                    }
                    "or" => {
                        if items.len() < 2 {
                            return Err(self.error("'or' needs at least one sentence", *span));
                        }
                        let ls = items[1..]
                            .iter()
                            .map(|l| self.literal(l))
                            .collect::<Result<_, _>>()?;
                        return Ok(Literal::Or(ls, *span));
                    }
                    "distinct" => {
                        if items.len() != 3 {
                            return Err(self.error("'distinct' takes exactly two terms", *span));
                        }
                        let a = self.term(&items[1])?;
                        let b = self.term(&items[2])?;
                        return Ok(Literal::Distinct(a, b, *span));
                    }
                    "and" => {
                        if items.len() < 2 {
                            return Err(self.error("'and' needs at least one sentence", *span));
                        }
                        let ls = items[1..]
                            .iter()
                            .map(|l| self.literal(l))
                            .collect::<Result<_, _>>()?;
                        return Ok(Literal::And(ls, *span));
                    }
                    "<=" => return Err(self.error("a rule cannot be nested inside another rule", *span)),
                    _ => {}
                }
            }
        }
        Ok(Literal::Atom(self.atom(sexp, "a body literal")?))
    }

    fn term(&mut self, sexp: &Sexp) -> Result<Term, ParseError> {
        match sexp {
            Sexp::Word(w, span) => {
                if Self::is_var(w) {
                    if w.len() == 1 {
                        return Err(self.error("'?' needs a name", *span));
                    }
                    Ok(Term::Var(self.symbol(w)))
                } else {
                    if *w == "<=" {
                        return Err(self.error("'<=' cannot be a term", *span));
                    }
                    Ok(Term::Const(self.symbol(w)))
                }
            }
            Sexp::List(items, span) => {
                let Some(first) = items.first() else {
                    return Err(self.error("'()' is not a term", *span));
                };
                let Sexp::Word(w, wspan) = first else {
                    return Err(self.error(
                        "a function term must start with a function name, not a list",
                        first.span(),
                    ));
                };
                if Self::is_var(w) {
                    return Err(self.error(format!("a variable ('{w}') cannot name a function"), *wspan));
                }
                // As a bare word '<=' is no term either, so `(<=)` and `(<= a)` must not become
                // one: printed back, they would not read again.
                if *w == "<=" {
                    return Err(self.error("'<=' cannot name a function", *wspan));
                }
                if items.len() == 1 {
                    // `(f)`, a function of no arguments, is a constant distinct from `f`, as GDL
                    // provers read it; its name keeps the parentheses so it prints back the same.
                    return Ok(Term::Const(self.symbol(&format!("({w})"))));
                }
                let f = self.symbol(w);
                let args = items[1..]
                    .iter()
                    .map(|t| self.term(t))
                    .collect::<Result<_, _>>()?;
                Ok(Term::Func(f, args))
            }
        }
    }
}

/// Reads KIF text into rules, without the static checks.
pub fn parse_syntax(src: &str) -> Result<Description, ParseError> {
    let mut reader = Reader {
        src,
        pos: 0,
        line: 1,
        col: 1,
    };
    let sexps = reader.read_all()?;
    let mut symbols = Symbols::default();
    let keywords = Keywords::intern(&mut symbols);
    let mut builder = Builder { src, symbols };
    let rules = sexps.iter().map(|s| builder.rule(s)).collect::<Result<_, _>>()?;
    Ok(Description {
        symbols: builder.symbols,
        keywords,
        rules,
    })
}

//! The edge-case corpus in `tests/gdl/`: every file says in its header what the front end must
//! make of it, and this test holds it to that.
//!
//! Header lines, at the top of each file:
//!
//! - `; expect: ok` or `; expect: error KIND LINE:COL`, with KIND one of syntax, unsafe,
//!   unstratified, arity, restriction, recursion, limit (required, first line);
//! - `; what: ...`, what the file covers (required);
//! - `; warning: KIND LINE:COL`, once for each warning [`gdl::warnings`] must give, in its order
//!   (only for files that parse; none means no warnings).

use propjet::gdl::{self, ErrorKind, ParseError, Span};
use std::path::{Path, PathBuf};

/// What a file's header asks for.
struct Expectation {
    outcome: Result<(), (ErrorKind, Span)>,
    warnings: Vec<(ErrorKind, Span)>,
}

fn kind_from_name(name: &str) -> Option<ErrorKind> {
    Some(match name {
        "syntax" => ErrorKind::Syntax,
        "unsafe" => ErrorKind::Unsafe,
        "unstratified" => ErrorKind::Unstratified,
        "arity" => ErrorKind::Arity,
        "restriction" => ErrorKind::Restriction,
        "recursion" => ErrorKind::Recursion,
        "limit" => ErrorKind::Limit,
        _ => return None,
    })
}

/// Reads `KIND LINE:COL`.
fn kind_and_position(text: &str) -> Result<(ErrorKind, Span), String> {
    let mut parts = text.split_whitespace();
    let (Some(kind), Some(pos), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("expected 'KIND LINE:COL', found '{text}'"));
    };
    let kind = kind_from_name(kind).ok_or_else(|| format!("unknown error kind '{kind}'"))?;
    let (line, col) = pos
        .split_once(':')
        .ok_or_else(|| format!("expected LINE:COL, found '{pos}'"))?;
    let line = line.parse().map_err(|_| format!("bad line number '{line}'"))?;
    let col = col.parse().map_err(|_| format!("bad column number '{col}'"))?;
    Ok((kind, Span { line, col }))
}

/// The lines of a text, split at "\n", "\r\n" and a lone "\r" (the header of an old Macintosh
/// file is on lines ended by CR alone).
fn lines(src: &str) -> Vec<&str> {
    src.split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
        .collect()
}

fn read_header(src: &str) -> Result<Expectation, String> {
    let mut outcome = None;
    let mut what = false;
    let mut warnings = Vec::new();
    for (i, line) in lines(src).into_iter().enumerate() {
        let Some(rest) = line.strip_prefix(';') else { break };
        let rest = rest.trim();
        if let Some(e) = rest.strip_prefix("expect:") {
            if i != 0 {
                return Err("'; expect:' must be the first line".to_string());
            }
            let e = e.trim();
            outcome = Some(if e == "ok" {
                Ok(())
            } else if let Some(err) = e.strip_prefix("error ") {
                Err(kind_and_position(err)?)
            } else {
                return Err(format!(
                    "'; expect:' wants 'ok' or 'error KIND LINE:COL', not '{e}'"
                ));
            });
        } else if let Some(w) = rest.strip_prefix("what:") {
            if w.trim().is_empty() {
                return Err("'; what:' is empty".to_string());
            }
            what = true;
        } else if let Some(w) = rest.strip_prefix("warning:") {
            warnings.push(kind_and_position(w.trim())?);
        }
    }
    let Some(outcome) = outcome else {
        return Err("no '; expect:' header on the first line".to_string());
    };
    if !what {
        return Err("no '; what:' header".to_string());
    }
    if outcome.is_err() && !warnings.is_empty() {
        return Err("a file that must fail cannot also list warnings".to_string());
    }
    Ok(Expectation { outcome, warnings })
}

fn show(found: &[(ErrorKind, Span)]) -> String {
    let v: Vec<String> = found.iter().map(|(k, s)| format!("{k:?} {s}")).collect();
    format!("[{}]", v.join(", "))
}

/// Checks one file; `Err` says what is wrong.
fn check_file(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let src = String::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let want = read_header(&src)?;
    match (gdl::parse(&src), want.outcome) {
        (Ok(desc), Ok(())) => {
            let found: Vec<(ErrorKind, Span)> = gdl::warnings(&desc, &src)
                .iter()
                .map(|w| (w.kind, w.span))
                .collect();
            if found != want.warnings {
                return Err(format!(
                    "warnings {} but the header lists {}",
                    show(&found),
                    show(&want.warnings)
                ));
            }
            Ok(())
        }
        (Ok(_), Err((kind, span))) => Err(format!("parsed, but {kind:?} at {span} was expected")),
        (Err(e), Ok(())) => Err(format!("expected ok, got:\n{e}")),
        (Err(e), Err((kind, span))) => {
            if e.kind != kind || e.span != span {
                return Err(format!("expected {kind:?} at {span}, got:\n{e}"));
            }
            error_is_well_formed(&e, &src)
        }
    }
}

/// An error has a message and shows the line it points into.
fn error_is_well_formed(e: &ParseError, src: &str) -> Result<(), String> {
    if e.message.trim().is_empty() {
        return Err("the error has an empty message".to_string());
    }
    let line = (e.span.line as usize)
        .checked_sub(1)
        .and_then(|i| lines(src).get(i).copied())
        .ok_or_else(|| format!("the error's line {} is not in the text", e.span.line))?;
    if e.source_line != line {
        return Err(format!(
            "the error quotes '{}' but line {} is '{line}'",
            e.source_line, e.span.line
        ));
    }
    if e.to_string().lines().nth(1).is_none_or(|l| !l.contains(line)) {
        return Err(format!("the error's display does not show its source line:\n{e}"));
    }
    Ok(())
}

fn corpus_files() -> Vec<PathBuf> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gdl"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("tests/gdl is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "kif"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_edge_case_file_meets_its_header() {
    let files = corpus_files();
    // The corpus is meant to cover every check; a much smaller count means files went missing.
    assert!(files.len() >= 60, "only {} files in tests/gdl", files.len());
    let failures: Vec<String> = files
        .iter()
        .filter_map(|p| check_file(p).err().map(|e| format!("{}: {e}", p.display())))
        .collect();
    assert!(
        failures.is_empty(),
        "{} files fail:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_error_kind_appears_in_the_corpus() {
    let mut kinds = Vec::new();
    for path in corpus_files() {
        let src = std::fs::read_to_string(&path).expect("a corpus file is UTF-8");
        if let Ok(Expectation {
            outcome: Err((k, _)), ..
        }) = read_header(&src)
        {
            kinds.push(k);
        }
    }
    for k in [
        ErrorKind::Syntax,
        ErrorKind::Unsafe,
        ErrorKind::Unstratified,
        ErrorKind::Arity,
        ErrorKind::Restriction,
        ErrorKind::Recursion,
        ErrorKind::Limit,
    ] {
        assert!(kinds.contains(&k), "no file in tests/gdl expects a {k:?} error");
    }
}

/// The header reader itself: a wrong header must not pass as an empty expectation.
#[test]
fn header_reader_rejects_malformed_headers() {
    assert!(read_header("; what: x\n").is_err());
    assert!(read_header("; expect: ok\n").is_err());
    assert!(read_header("; expect: error unsafe 3\n; what: x\n").is_err());
    assert!(read_header("; expect: error nonsense 3:4\n; what: x\n").is_err());
    let e = read_header("; expect: error arity 3:4\r; what: x\r(role a)").expect("a valid CR header");
    assert_eq!(e.outcome, Err((ErrorKind::Arity, Span { line: 3, col: 4 })));
}

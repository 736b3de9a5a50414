//! The front end never panics, whatever it is fed, and every error points inside the text.
//!
//! The inputs are the corpus games cut short at many points and damaged by seeded random edits
//! (the same seed gives the same inputs, so a failure names its game and seed and can be
//! replayed). The number of variants per game shrinks with the game's size so that the whole run
//! stays near ten seconds.

use propjet::gdl::{self, ErrorKind, ParseError};
use propjet_runtime::Rng;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

mod common;

/// About how many bytes of each kind of variant one game gets (cuts, and separately edits).
const BYTES_PER_GAME: usize = 1_000_000;
/// The fewest and the most variants of each kind per game.
const MIN_VARIANTS: usize = 3;
const MAX_VARIANTS: usize = 100;

/// The lines of a text, split independently of the front end at "\n", "\r\n" and a lone "\r".
fn lines(src: &str) -> Vec<&str> {
    src.split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
        .collect()
}

/// `Err` if the problem's position is not inside `src` or it quotes the wrong line. A column
/// one past the last character is inside: that is where "never closed" errors at the end point.
fn points_inside(e: &ParseError, src: &str) -> Result<(), String> {
    let ls = lines(src);
    let (line, col) = (e.span.line as usize, e.span.col as usize);
    if line == 0 || line > ls.len() {
        return Err(format!("line {line} of a {}-line text: {e}", ls.len()));
    }
    let width = ls[line - 1].chars().count();
    if col == 0 || col > width + 1 {
        return Err(format!("column {col} of a {width}-character line: {e}"));
    }
    if e.source_line != ls[line - 1] {
        return Err(format!("quotes '{}' for line {line}: {e}", e.source_line));
    }
    Ok(())
}

/// What parsing one variant came to.
enum Outcome {
    Ok,
    Error(ErrorKind),
}

/// Parses `src` (and asks for warnings when it passes), catching panics; `Err` describes what
/// went wrong.
fn try_variant(src: &str) -> Result<Outcome, String> {
    let result = catch_unwind(AssertUnwindSafe(|| match gdl::parse(src) {
        Ok(desc) => Ok(gdl::warnings(&desc, src)),
        Err(e) => Err(e),
    }));
    match result {
        Err(_) => Err("the front end panicked".to_string()),
        Ok(Ok(warnings)) => {
            for w in &warnings {
                points_inside(w, src).map_err(|m| format!("warning {m}"))?;
            }
            Ok(Outcome::Ok)
        }
        Ok(Err(e)) => {
            points_inside(&e, src)?;
            Ok(Outcome::Error(e.kind))
        }
    }
}

/// Pieces of GDL worth splicing in: they turn a valid game into one that reaches the static
/// checks with something wrong, rather than only into syntax errors.
const SNIPPETS: [&str; 24] = [
    "(",
    ")",
    "?x",
    "?y",
    " ",
    "\n",
    "\r",
    "\t",
    ";",
    "(not ",
    "(or ",
    "(and ",
    "(distinct ?x ?y)",
    "(<= ",
    "(true ?x)",
    "(does ?x ?y)",
    "(init ",
    "(next ",
    "(role ?x)",
    "terminal",
    "(legal ?x)",
    "(f)",
    "é",
    "\u{2028}",
];

fn is_word_byte(b: u8) -> bool {
    !(b.is_ascii_whitespace() || b == b'(' || b == b')' || b == b';')
}

/// The word (symbol or variable) at or after `at`, as a byte range.
fn word_from(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let start = (at..bytes.len()).find(|&i| is_word_byte(bytes[i]))?;
    let end = (start..bytes.len())
        .find(|&i| !is_word_byte(bytes[i]))
        .unwrap_or(bytes.len());
    Some((start, end))
}

/// Applies one to eight random edits to `bytes`.
fn mutate(bytes: &mut Vec<u8>, rng: &mut Rng) {
    let edits = 1 + rng.below(8);
    for _ in 0..edits {
        let len = bytes.len() as u32;
        let at = if len == 0 { 0 } else { rng.below(len) } as usize;
        match rng.below(7) {
            // Replaces a word by another word of the text: the parentheses stay balanced, so
            // these edits mostly reach the static checks (unbound variables, arities, cycles).
            5 | 6 if len > 0 => {
                let from = rng.below(len) as usize;
                if let (Some((s, e)), Some((fs, fe))) = (word_from(bytes, at), word_from(bytes, from)) {
                    let word = bytes[fs..fe].to_vec();
                    bytes.splice(s..e, word);
                }
            }
            0 if len > 0 => bytes[at] = rng.below(256) as u8,
            1 if len > 0 => {
                let n = (1 + rng.below(16) as usize).min(bytes.len() - at);
                bytes.drain(at..at + n);
            }
            2 | 3 => {
                let s = SNIPPETS[rng.below(SNIPPETS.len() as u32) as usize];
                bytes.splice(at..at, s.bytes());
            }
            _ if len > 0 => {
                // Copies a stretch of the text elsewhere: whole rules, half rules, deeper nests.
                let n = (1 + rng.below(200) as usize).min(bytes.len() - at);
                let chunk: Vec<u8> = bytes[at..at + n].to_vec();
                let to = rng.below(len) as usize;
                bytes.splice(to..to, chunk);
            }
            _ => bytes.push(b'('),
        }
    }
}

#[test]
fn truncated_and_mutated_games_never_panic_and_errors_point_inside() {
    let Some(games) = common::corpus_games("the robustness test") else {
        return;
    };
    let start = std::time::Instant::now();
    let mut failures = Vec::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut variants = 0usize;
    let mut tally = |o: Outcome| {
        let key = match o {
            Outcome::Ok => "ok".to_string(),
            Outcome::Error(k) => format!("{k:?}"),
        };
        *outcomes.entry(key).or_default() += 1;
    };
    for (g, path) in games.iter().enumerate() {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let src = std::fs::read_to_string(path).expect("a corpus game is UTF-8");
        let count = (BYTES_PER_GAME / src.len().max(1)).clamp(MIN_VARIANTS, MAX_VARIANTS);

        // Cuts at evenly spread character boundaries, the first three right at the start.
        let boundaries: Vec<usize> = src.char_indices().map(|(i, _)| i).chain([src.len()]).collect();
        for c in 0..count {
            let index = if c < 3 {
                c + 1
            } else {
                (boundaries.len() - 1) * c / count
            };
            let at = boundaries[index.min(boundaries.len() - 1)];
            let cut = &src[..at];
            variants += 1;
            match try_variant(cut) {
                Ok(o) => tally(o),
                Err(m) => failures.push(format!("{name} cut at byte {at}: {m}")),
            }
        }

        // Seeded random edits; the seed is derived from the game's index and the variant's.
        for m in 0..count {
            let seed = (g as u64) << 32 | m as u64;
            let mut rng = Rng::new(seed);
            let mut bytes = src.as_bytes().to_vec();
            mutate(&mut bytes, &mut rng);
            let text = String::from_utf8_lossy(&bytes);
            variants += 1;
            match try_variant(&text) {
                Ok(o) => tally(o),
                Err(m) => failures.push(format!("{name} mutated with seed {seed:#x}: {m}")),
            }
        }
    }
    eprintln!(
        "{variants} variants in {:.1} s; outcomes: {outcomes:?}",
        start.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {variants} variants fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The variants must reach the static checks, not only the reader: otherwise this test
    // would say little about the checks' robustness.
    for kind in ["ok", "Syntax", "Arity", "Unsafe"] {
        assert!(
            outcomes.contains_key(kind),
            "no variant ended as {kind}: {outcomes:?}"
        );
    }
}

/// Cases that once were or easily could be trouble, checked by name.
#[test]
fn awkward_inputs_give_errors_inside_the_text() {
    let deep = "(".repeat(100_000);
    // A long chain of relations, reached from terminal and ending in a rule that is unsafe on
    // its own: the graph algorithms and the call analysis must not recurse along it.
    let mut long_chain: String = (0..20_000)
        .map(|i| format!("(<= (p{i} ?x) (p{} ?x))\n", i + 1))
        .collect();
    long_chain.push_str("(<= terminal (p0 a))\n(<= (p20000 ?x))\n");
    // Thousands of unsafe rules on a single long line: each problem quotes that line, so the
    // front end must not make a quoted copy for every one of them.
    let one_line: String = (0..20_000).map(|i| format!("(<= (q{i} ?x)) ")).collect();
    let cases: Vec<String> = vec![
        String::new(),
        "(".into(),
        ")".into(),
        "\r\r\r(".into(),
        "\r\n\r\n)".into(),
        "?".into(),
        "(<=)".into(),
        "(<= )".into(),
        "(())".into(),
        "((a) b)".into(),
        "(a (?x b))".into(),
        // Found by the fuzzer: `(<=)` in a term once read as the constant '<='.
        "(p (<=))".into(),
        "(not)".into(),
        "(distinct a b)".into(),
        "(<= (p ?x) (distinct ?x))".into(),
        "é(".into(),
        "\u{2028}(\u{2028}".into(),
        deep,
        long_chain,
        one_line.clone(),
    ];
    for src in &cases {
        if let Err(m) = try_variant(src) {
            let shown: String = src.chars().take(60).collect();
            panic!("{shown:?}: {m}");
        }
    }
    let desc = gdl::parse(&one_line).expect("unused unsafe rules are accepted");
    assert_eq!(gdl::warnings(&desc, &one_line).len(), gdl::MAX_WARNINGS);
}

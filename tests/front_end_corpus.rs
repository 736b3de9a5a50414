//! Every game of the shared corpus passes the front end, and the canonical text of its rules
//! reads back as the same rules.

use propjet::gdl::{self, Atom, Description, Literal, Rule, Term};
use std::path::PathBuf;

mod common;

/// The corpus games, checked against INDEX.tsv: a game missing from the directory would
/// otherwise go unnoticed.
fn indexed_games() -> Option<Vec<PathBuf>> {
    let games = common::corpus_games("the front-end corpus test")?;
    if std::env::var_os("PROPJET_GAMES").is_some() {
        return Some(games);
    }
    let dir = games[0].parent().expect("a game lies in a directory");
    let index = std::fs::read_to_string(dir.join("INDEX.tsv")).expect("the corpus has an INDEX.tsv");
    let listed = index.lines().skip(1).filter(|l| !l.trim().is_empty()).count();
    assert_eq!(
        games.len(),
        listed,
        "INDEX.tsv lists {listed} games, the directory has {}",
        games.len()
    );
    Some(games)
}

/// Whether two terms from two descriptions are the same, symbols compared by name.
fn same_term(a: &Description, s: &Term, b: &Description, t: &Term) -> bool {
    let name = |d: &Description, x| d.symbols.name(x).to_string();
    match (s, t) {
        (Term::Var(x), Term::Var(y)) | (Term::Const(x), Term::Const(y)) => name(a, *x) == name(b, *y),
        (Term::Func(f, xs), Term::Func(g, ys)) => {
            name(a, *f) == name(b, *g)
                && xs.len() == ys.len()
                && xs.iter().zip(ys).all(|(x, y)| same_term(a, x, b, y))
        }
        _ => false,
    }
}

fn same_atom(a: &Description, x: &Atom, b: &Description, y: &Atom) -> bool {
    a.symbols.name(x.rel) == b.symbols.name(y.rel)
        && x.args.len() == y.args.len()
        && x.args.iter().zip(&y.args).all(|(s, t)| same_term(a, s, b, t))
}

fn same_literal(a: &Description, x: &Literal, b: &Description, y: &Literal) -> bool {
    match (x, y) {
        (Literal::Atom(s), Literal::Atom(t)) => same_atom(a, s, b, t),
        (Literal::Not(s, _), Literal::Not(t, _)) => same_literal(a, s, b, t),
        (Literal::Distinct(s1, s2, _), Literal::Distinct(t1, t2, _)) => {
            same_term(a, s1, b, t1) && same_term(a, s2, b, t2)
        }
        (Literal::Or(xs, _), Literal::Or(ys, _)) | (Literal::And(xs, _), Literal::And(ys, _)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(s, t)| same_literal(a, s, b, t))
        }
        _ => false,
    }
}

/// Whether two rules are the same apart from where they stand in their texts.
fn same_rule(a: &Description, x: &Rule, b: &Description, y: &Rule) -> bool {
    same_atom(a, &x.head, b, &y.head)
        && x.body.len() == y.body.len()
        && x.body.iter().zip(&y.body).all(|(s, t)| same_literal(a, s, b, t))
}

/// The canonical text of a whole description, one rule a line.
fn canonical_text(desc: &Description) -> String {
    let rules: Vec<String> = desc.rules.iter().map(|r| desc.rule_text(r)).collect();
    rules.join("\n")
}

#[test]
fn every_corpus_game_passes_the_front_end() {
    let Some(games) = indexed_games() else { return };
    let mut failures = Vec::new();
    for path in &games {
        let src = std::fs::read_to_string(path).expect("a corpus game is UTF-8");
        if let Err(e) = gdl::parse(&src) {
            failures.push(format!("{}: {e}", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} games fail:\n{}",
        failures.len(),
        games.len(),
        failures.join("\n")
    );
}

#[test]
fn canonical_text_reads_back_as_the_same_rules() {
    let Some(games) = indexed_games() else { return };
    let mut failures = Vec::new();
    for path in &games {
        let src = std::fs::read_to_string(path).expect("a corpus game is UTF-8");
        let first = match gdl::parse(&src) {
            Ok(d) => d,
            Err(e) => {
                failures.push(format!("{}: does not parse:\n{e}", path.display()));
                continue;
            }
        };
        let text = canonical_text(&first);
        let second = match gdl::parse(&text) {
            Ok(d) => d,
            Err(e) => {
                failures.push(format!(
                    "{}: the canonical text does not parse:\n{e}",
                    path.display()
                ));
                continue;
            }
        };
        if first.rules.len() != second.rules.len() {
            failures.push(format!(
                "{}: {} rules became {}",
                path.display(),
                first.rules.len(),
                second.rules.len()
            ));
            continue;
        }
        if let Some((x, y)) = first
            .rules
            .iter()
            .zip(&second.rules)
            .find(|(x, y)| !same_rule(&first, x, &second, y))
        {
            failures.push(format!(
                "{}: {} reads back as {}",
                path.display(),
                first.rule_text(x),
                second.rule_text(y)
            ));
            continue;
        }
        // Printing is a fixed point: the second text is the first, byte for byte.
        if canonical_text(&second) != text {
            failures.push(format!("{}: the canonical text is not stable", path.display()));
            continue;
        }
        // The checks see the same description, so they warn about the same things.
        let kinds = |d: &Description, s: &str| -> Vec<gdl::ErrorKind> {
            gdl::warnings(d, s).iter().map(|w| w.kind).collect()
        };
        if kinds(&first, &src) != kinds(&second, &text) {
            failures.push(format!("{}: the warnings changed", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} games fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The comparison above must be able to fail: a changed constant, variable or literal is seen.
#[test]
fn rule_comparison_sees_differences() {
    let a = gdl::parse("(role r) (<= (legal r (go ?x)) (cell ?x) (not (true (x ?x))))").expect("valid");
    for other in [
        "(role r) (<= (legal r (go ?y)) (cell ?y) (not (true (x ?y))))",
        "(role r) (<= (legal r (go ?x)) (cell ?x) (true (x ?x)))",
        "(role r) (<= (legal r (stay ?x)) (cell ?x) (not (true (x ?x))))",
        "(role r) (<= (legal r (go ?x)) (cell ?x) (not (true (y ?x))))",
    ] {
        let b = gdl::parse(other).expect("valid");
        assert!(
            !same_rule(&a, &a.rules[1], &b, &b.rules[1]),
            "{other} compared equal"
        );
    }
    let c = gdl::parse("(ROLE r)\n(<= (LEGAL R (Go ?X))\n (CELL ?x) (not (TRUE (x ?X))))").expect("valid");
    assert!(same_rule(&a, &a.rules[1], &c, &c.rules[1]));
}

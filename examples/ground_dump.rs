//! Prints the ground program of a game, one rule a line: `head <= lit lit`, with `true`,
//! `does`, `next` and `legal` atoms written as the relation applied to their text.
//!
//! `cargo run --release --example ground_dump -- GAME.kif [--canonical]`
//!
//! With `--canonical` the dump does not depend on the order in which the grounder made
//! atoms and rules: atoms the program identifies (an atom whose only rule reads one other
//! atom, as an alias does) share one name, the least of their game atoms' names; an auxiliary
//! atom `(;aux N)` is named by a hash of its (canonical) rules instead of its number; the
//! literals of each body and the lines are sorted, without repeats. Two groundings that make
//! the same program in another order (another join order in the fixpoint, say), up to which
//! of two equal atoms is written as the alias of the other, print the same canonical dump.

use propjet::gdl;
use propjet::ground::{self, AtomKind, GroundLimits, Grounded};

fn name(g: &Grounded, a: ground::AtomId) -> String {
    let atom = &g.atoms[a.index()];
    let role = |r: u32| g.roles.get(r as usize).map(String::as_str).unwrap_or("?");
    match atom.kind {
        AtomKind::True => format!("(true {})", atom.text),
        AtomKind::Next => format!("(next {})", atom.text),
        AtomKind::Does { role: r } => format!("(does {} {})", role(r), atom.text),
        AtomKind::Legal { role: r } => format!("(legal {} {})", role(r), atom.text),
        _ => atom.text.clone(),
    }
}

/// The class of each atom under the identifications the program states: an atom whose only
/// rule has a single positive literal has that literal's value, so the two are one class. The
/// grounder writes an atom identified with an earlier one with equal rules that way (an alias),
/// and which of the two comes first depends on the order the atoms were made in.
fn classes(g: &Grounded, rules_of: &[Vec<usize>]) -> Vec<usize> {
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let n = g.atoms.len();
    let mut parent: Vec<usize> = (0..n).collect();
    for (h, rules) in rules_of.iter().enumerate() {
        if let [r] = rules[..] {
            if let [l] = g.rules.body(r) {
                if !l.negated() {
                    let (a, b) = (root(&mut parent, h), root(&mut parent, l.atom().index()));
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    (0..n).map(|i| root(&mut parent, i)).collect()
}

/// The canonical name of every atom (see the module's comment), by class (see [`classes`]): a
/// class with a game atom is named by the least of its game atoms' names; one of auxiliary
/// atoms only by a hash of the sorted bodies of its members' rules, written with the canonical
/// names of their atoms, so such a class is named once every class its rules read is. One on
/// a cycle of auxiliary atoms (the grounder makes none) keeps its number.
fn canonical_names(g: &Grounded) -> Vec<String> {
    let n = g.atoms.len();
    let is_aux = |i: usize| g.atoms[i].text.starts_with("(;aux ");
    let mut rules_of: Vec<Vec<usize>> = vec![Vec::new(); n];
    for r in 0..g.rules.len() {
        rules_of[g.rules.head(r).index()].push(r);
    }
    let class = classes(g, &rules_of);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in 0..n {
        members[class[i]].push(i);
    }
    let mut names: Vec<Option<String>> = vec![None; n];
    for (c, m) in members.iter().enumerate() {
        names[c] = m
            .iter()
            .filter(|&&i| !is_aux(i))
            .map(|&i| name(g, ground::AtomId::from_index(i)))
            .min();
    }
    let lit = |names: &[Option<String>], l: &ground::GroundLit| {
        let a = names[class[l.atom().index()]].as_deref()?;
        Some(if l.negated() {
            format!("(not {a})")
        } else {
            a.to_string()
        })
    };
    loop {
        let mut progress = false;
        for c in 0..n {
            if names[c].is_some() || members[c].is_empty() {
                continue;
            }
            let mut bodies = Vec::new();
            let mut ready = true;
            'members: for &i in &members[c] {
                for &r in &rules_of[i] {
                    let body = g.rules.body(r);
                    if let [l] = body {
                        if !l.negated() && class[l.atom().index()] == c {
                            continue;
                        }
                    }
                    let lits: Option<Vec<String>> = body.iter().map(|l| lit(&names, l)).collect();
                    let Some(mut lits) = lits else {
                        ready = false;
                        break 'members;
                    };
                    lits.sort();
                    bodies.push(lits.join(" "));
                }
            }
            if !ready {
                continue;
            }
            bodies.sort();
            bodies.dedup();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&bodies, &mut h);
            names[c] = Some(format!("(;aux #{:016x})", std::hash::Hasher::finish(&h)));
            progress = true;
        }
        if !progress {
            break;
        }
    }
    (0..n)
        .map(|i| {
            names[class[i]]
                .clone()
                .unwrap_or_else(|| name(g, ground::AtomId::from_index(i)))
        })
        .collect()
}

fn canonical_dump(g: &Grounded) {
    let names = canonical_names(g);
    let mut lines: Vec<String> = g
        .init
        .iter()
        .map(|i| format!("init {}", names[i.index()]))
        .collect();
    for r in &g.rules {
        let head = &names[r.head.index()];
        let mut lits: Vec<String> = r
            .body
            .iter()
            .map(|l| {
                let a = &names[l.atom().index()];
                if l.negated() {
                    format!("(not {a})")
                } else {
                    a.clone()
                }
            })
            .collect();
        // An identification within a class says nothing once the class has one name.
        if lits.len() == 1 && lits[0] == *head {
            continue;
        }
        lits.sort();
        lits.dedup();
        let mut line = format!("{head} <=");
        for l in &lits {
            line += " ";
            line += l;
        }
        lines.push(line);
    }
    lines.sort();
    lines.dedup();
    for l in &lines {
        println!("{l}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let canonical = args.iter().any(|a| a == "--canonical");
    let Some(path) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: ground_dump GAME.kif [--canonical]");
        std::process::exit(2);
    };
    let desc = match gdl::load(path.as_ref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let g = match ground::ground(&desc, &GroundLimits::default()) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if canonical {
        canonical_dump(&g);
        return;
    }
    for &i in &g.init {
        println!("init {}", name(&g, i));
    }
    for r in &g.rules {
        let mut line = format!("{} <=", name(&g, r.head));
        for l in r.body {
            if l.negated() {
                line += &format!(" (not {})", name(&g, l.atom()));
            } else {
                line += &format!(" {}", name(&g, l.atom()));
            }
        }
        println!("{line}");
    }
}

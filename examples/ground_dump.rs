//! Prints the ground program of a game, one rule a line: `head <= lit lit`, with `true`,
//! `does`, `next` and `legal` atoms written as the relation applied to their text.
//!
//! `cargo run --release --example ground_dump -- GAME.kif`

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

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: ground_dump GAME.kif");
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

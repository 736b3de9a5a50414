//! Grounds a game with some relations left opaque and reports what the net would look like
//! (see `doc/opaque.md`).
//!
//! `cargo run --release --example opaque_probe -- GAME.kif name/arity…` grounds the game with
//! the named relations opaque, prints the ground program's size and the opaque atoms by
//! relation, and then builds and optimizes a stand-in net in which every opaque atom is a base
//! proposition that holds initially. The runtime cannot fill opaque slots yet, so the stand-in
//! only estimates the size of the real net: a base that is read but never changed by the net
//! stands where the opaque slot will be, and the passes cannot fold it away.

use propjet::gdl;
use propjet::ground::{self, AtomKind, GroundLimits, GroundOptions};
use propjet::net::{self, NetLimits, NetStats};
use std::collections::BTreeMap;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((path, opaque)) = args.split_first() else {
        eprintln!("usage: opaque_probe GAME.kif name/arity…");
        std::process::exit(2);
    };
    let desc = match gdl::load(path.as_ref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let options = GroundOptions {
        opaque: opaque.to_vec(),
    };
    let clock = Instant::now();
    let (mut g, stats) = match ground::ground_with_options(&desc, &GroundLimits::default(), &options) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{path}: grounding: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "ground: {:.1} ms, {} atoms, {} rules, {} static and {} dynamic atoms in the fixpoint",
        clock.elapsed().as_secs_f64() * 1e3,
        g.atoms.len(),
        g.rules.len(),
        stats.static_atoms,
        stats.dynamic_atoms
    );
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_relation: BTreeMap<String, usize> = BTreeMap::new();
    for a in &g.atoms {
        let kind = format!("{:?}", a.kind);
        let kind = kind.split(' ').next().unwrap_or_default().to_string();
        *by_kind.entry(kind).or_default() += 1;
        if a.kind == AtomKind::Opaque {
            let name = a
                .text
                .trim_start_matches('(')
                .split(' ')
                .next()
                .unwrap_or_default();
            *by_relation.entry(name.to_string()).or_default() += 1;
        }
    }
    println!("atoms by kind: {by_kind:?}");
    println!("opaque atoms by relation: {by_relation:?}");
    let readers = g
        .rules
        .iter()
        .filter(|r| {
            r.body
                .iter()
                .any(|l| g.atoms[l.atom().index()].kind == AtomKind::Opaque)
        })
        .count();
    println!("ground rules reading an opaque atom: {readers}");

    // The stand-in: opaque atoms become bases that hold initially.
    for (i, a) in g.atoms.iter_mut().enumerate() {
        if a.kind == AtomKind::Opaque {
            a.kind = AtomKind::True;
            g.init.push(ground::AtomId::from_index(i));
        }
    }
    g.init.sort_unstable();
    let clock = Instant::now();
    let built = match net::build(&g, &NetLimits::default()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("{path}: net: {e}");
            std::process::exit(1);
        }
    };
    let before = NetStats::of(&built);
    let build_ms = clock.elapsed().as_secs_f64() * 1e3;
    let clock = Instant::now();
    let (optimized, _) = net::optimize(built, 8);
    let after = NetStats::of(&optimized);
    println!(
        "stand-in net: built in {build_ms:.1} ms, optimized in {:.1} ms",
        clock.elapsed().as_secs_f64() * 1e3
    );
    println!("  unoptimized: {before:?}");
    println!("  optimized:   {after:?}");
    println!(
        "components (propositions + gates + transitions): {} unoptimized, {} optimized",
        before.components(),
        after.components()
    );
}

//! Compile time of each phase on the shipped games, with criterion:
//! `cargo bench --bench compile`.

use criterion::{criterion_group, criterion_main, Criterion};
use propjet::compile::Options;
use propjet::{gdl, ground, net};
use std::hint::black_box;
use std::path::Path;

const GAMES: &[&str] = &["tictactoe", "connectfour", "breakthrough", "doubletictactoe"];

fn phases(c: &mut Criterion) {
    let options = Options::default();
    for game in GAMES {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("games")
            .join(format!("{game}.kif"));
        let text = std::fs::read_to_string(&path).expect("a shipped game is readable");
        let mut group = c.benchmark_group(*game);
        group.sample_size(20);
        group.bench_function("parse", |b| {
            b.iter(|| gdl::parse(black_box(&text)).expect("valid GDL"))
        });
        let desc = gdl::parse(&text).expect("valid GDL");
        group.bench_function("ground", |b| {
            b.iter(|| ground::ground(black_box(&desc), &options.ground).expect("grounds"))
        });
        let grounded = ground::ground(&desc, &options.ground).expect("grounds");
        group.bench_function("build", |b| {
            b.iter(|| net::build(black_box(&grounded), &options.net).expect("builds"))
        });
        let built = net::build(&grounded, &options.net).expect("builds");
        group.bench_function("optimize", |b| {
            b.iter(|| net::optimize(black_box(built.clone()), options.max_rounds))
        });
        let (optimized, _) = net::optimize(built.clone(), options.max_rounds);
        group.bench_function("order", |b| b.iter(|| net::order(black_box(&optimized))));
        group.finish();
    }
}

criterion_group!(benches, phases);
criterion_main!(benches);

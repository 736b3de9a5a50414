//! Asks the reference evaluator about one step of dresden_corridor's depth-first search in the
//! initial state (see doc/opaque-status.md): every literal of the recursive `dfs-aux` rule holds
//! with the bindings printed, and so does the recursive call, yet the rule's head is reported
//! false. Under the reference evaluator no `dfs` call that needs a step ever holds, so no wall
//! placement is ever legal.
//!
//! `cargo run --release --example corridor_dfs_probe [GAME.kif]` (default
//! ../shared/games/dresden_corridor.kif).

use propjet::reference::Reference;
use propjet_runtime::Machine;

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/games/dresden_corridor.kif"
        )
        .into()
    });
    let src = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let reference = match propjet::gdl::parse(&src)
        .map_err(|e| e.to_string())
        .and_then(|d| Reference::new(&d).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let state = reference.initial_state();
    let facts: Vec<String> = reference
        .state_facts(&state)
        .iter()
        .map(|&f| reference.fact_name(f))
        .collect();
    let facts: Vec<&str> = facts.iter().map(String::as_str).collect();
    let kids = "(cons (n h 5) (cons (n i 6) (cons (n i 4) nil)))";
    let wall = "(wall a b 1 2)";
    let queries = [
        // The head: a search from (n i 5) for column h, one step away.
        format!("(dfs-aux (cons (n i 5) nil) {wall} h nil)"),
        // The body of the recursive rule with ?top = (n i 5), ?rest = ?visited = nil.
        format!("(children (n i 5) {wall} {kids})"),
        format!("(set-difference {kids} nil {kids})"),
        format!("(append {kids} nil {kids})"),
        format!("(dfs-aux {kids} {wall} h (cons (n i 5) nil))"),
        // What the legal rules ask.
        format!("(dfs (n i 5) {wall} h)"),
        format!("(dfs (n i 5) {wall} i)"),
    ];
    for q in &queries {
        println!("{:<5} {q}", format!("{:?}", reference.holds_in(&facts, q)));
    }
}

//! Structure analysis of an optimized net: the action-independent part, latches, and factoring
//! into independent sub-games (see `doc/analysis.md`).
//!
//! [`analyze`] computes the dependency structure, proves latches, and looks for factors: the
//! connected components of the action-dependent transitions, joined wherever a condition of
//! conjunctive factorability couples them (a legal that reads two of them, or a role whose
//! moves in two of them are not independent choices). When two or more remain, each becomes a
//! [`Program`] of its own, and the [`Factoring`] says how the whole game's moves, terminal and
//! goals are made of the factors'. [`analyze_from`] does the same for the game as it continues
//! from a given state, with the latches that hold there folded in as constants.

mod deps;
mod factor;
pub mod latch;
pub mod report;

pub use latch::Latches;

use crate::net::{self, Node, NodeId, Propnet};
use propjet_runtime::Program;
use std::time::{Duration, Instant};

/// Why a game, or a set of candidate factors, does not factor.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Obstacle {
    /// No base depends on the moves: there is nothing to factor.
    NoActionDependentState,
    /// The action-dependent transitions form one connected component.
    OneComponent {
        /// How many action-dependent bases it holds.
        bases: usize,
    },
    /// The legal of an input reads several candidate factors in a part that is not a
    /// conjunction of parts of one factor each (legal partitionability fails); they were joined.
    LegalCouples {
        /// The role.
        role: String,
        /// The move.
        input: String,
        /// The candidate factors it reads, each named by its first bases.
        factors: Vec<String>,
    },
    /// A role's moves in these candidate factors are not independent choices: its moves do not
    /// combine into every pair (or tuple) of factor moves, as when a role moves on one board
    /// or the other but not on both; they were joined.
    MovesCouple {
        /// The role.
        role: String,
        /// The candidate factors, each named by its first bases.
        factors: Vec<String>,
        /// How many combinations of factor moves the role's moves make.
        combinations: usize,
        /// How many a product would make.
        product: usize,
    },
    /// In these candidate factors no role ever has a choice, or their bases keep their initial
    /// values in every reachable state (proven by induction): they are no sub-games and were
    /// joined to another candidate.
    Inert {
        /// The candidates, each named by its first bases.
        factors: Vec<String>,
    },
    /// A node that turns moves into transitions is not a function of one role's move alone.
    MoveNode {
        /// The node.
        node: String,
        /// What it reads besides.
        why: String,
    },
    /// The relation of terminal or goals to the factors has more nodes than the limit.
    RelationTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The net reads opaque atoms (`doc/opaque.md`), which factoring does not handle.
    Opaque(usize),
    /// The net has recursion built as loops (`Recursion::Loop`), which factoring does not
    /// handle.
    Loops(usize),
    /// A factor could not be built: a bug.
    Internal(String),
}

impl std::fmt::Display for Obstacle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Obstacle::NoActionDependentState => write!(f, "no base proposition depends on the moves"),
            Obstacle::OneComponent { bases } => write!(
                f,
                "the {bases} action-dependent base propositions form one connected component"
            ),
            Obstacle::LegalCouples { role, input, factors } => write!(
                f,
                "legal partitionability fails: (legal {role} {input}) reads {} together",
                factors.join(" and ")
            ),
            Obstacle::MovesCouple {
                role,
                factors,
                combinations,
                product,
            } => write!(
                f,
                "the moves of {role} are not a product over {}: they make {combinations} combinations of factor moves, not {product}",
                factors.join(" and ")
            ),
            Obstacle::Inert { factors } => write!(
                f,
                "{} offer no role a choice or never change, so they are no sub-games",
                factors.join(" and ")
            ),
            Obstacle::MoveNode { node, why } => write!(f, "move node {node} {why}"),
            Obstacle::RelationTooLarge { limit } => {
                write!(f, "the terminal and goal relations exceed {limit} nodes")
            }
            Obstacle::Opaque(n) => write!(f, "the net reads {n} opaque atoms, which factoring does not handle"),
            Obstacle::Loops(n) => write!(f, "the net has {n} loops, which factoring does not handle"),
            Obstacle::Internal(e) => write!(f, "internal error (a bug): {e}"),
        }
    }
}

/// A boolean function of the factors' atoms: how the whole game's terminal or a goal is made
/// of the factors'.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// A constant.
    Const(bool),
    /// Atom `i` of [`Factoring::atoms`].
    Atom(usize),
    /// Negation.
    Not(Box<Relation>),
    /// Conjunction.
    And(Vec<Relation>),
    /// Disjunction.
    Or(Vec<Relation>),
}

impl Relation {
    /// The value, given the value of each atom.
    pub fn eval(&self, atom: &dyn Fn(usize) -> bool) -> bool {
        match self {
            Relation::Const(c) => *c,
            Relation::Atom(a) => atom(*a),
            Relation::Not(x) => !x.eval(atom),
            Relation::And(xs) => xs.iter().all(|x| x.eval(atom)),
            Relation::Or(xs) => xs.iter().any(|x| x.eval(atom)),
        }
    }

    /// The relation seen from factor `g`: atoms of other factors dropped from the gate that
    /// reads them; `None` when nothing of it is left.
    pub fn project(&self, g: usize, atoms: &[Atom]) -> Option<Relation> {
        match self {
            Relation::Const(c) => Some(Relation::Const(*c)),
            Relation::Atom(a) => atoms[*a]
                .factor
                .is_none_or(|f| f == g)
                .then_some(Relation::Atom(*a)),
            Relation::Not(x) => x.project(g, atoms).map(|x| Relation::Not(Box::new(x))),
            Relation::And(xs) | Relation::Or(xs) => {
                let kept: Vec<Relation> = xs.iter().filter_map(|x| x.project(g, atoms)).collect();
                match kept.len() {
                    0 => None,
                    1 => kept.into_iter().next(),
                    _ => Some(if matches!(self, Relation::And(_)) {
                        Relation::And(kept)
                    } else {
                        Relation::Or(kept)
                    }),
                }
            }
        }
    }

    /// The relation in KIF-like text, atoms as `aI`.
    pub fn text(&self) -> String {
        match self {
            Relation::Const(c) => c.to_string(),
            Relation::Atom(a) => format!("a{a}"),
            Relation::Not(x) => format!("(not {})", x.text()),
            Relation::And(xs) | Relation::Or(xs) => format!(
                "({} {})",
                if matches!(self, Relation::And(_)) {
                    "and"
                } else {
                    "or"
                },
                xs.iter().map(|x| x.text()).collect::<Vec<_>>().join(" ")
            ),
        }
    }

    /// The top operator's name, for reports: `and`, `or`, `not`, `atom` or `const`.
    pub fn shape(&self) -> &'static str {
        match self {
            Relation::Const(_) => "const",
            Relation::Atom(_) => "atom",
            Relation::Not(_) => "not",
            Relation::And(_) => "and",
            Relation::Or(_) => "or",
        }
    }
}

/// A sub-function of terminal or a goal that reads one factor at most.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Atom {
    /// Its factor, or `None` when it reads the shared part only (then every factor has it).
    pub factor: Option<usize>,
    /// Its node in the analysed net.
    pub node: NodeId,
    /// The view or proposition that names it, or its node number.
    pub name: String,
    /// For each factor, the view bit of its program that computes the atom, if it has one.
    pub views: Vec<Option<u32>>,
}

/// A move of a factor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FactorInput {
    /// The factor's part of these whole-game inputs of `role`, which all act alike on it and
    /// have the same legal conjuncts in it.
    Projection {
        /// The role.
        role: usize,
        /// The whole game's inputs.
        whole: Vec<u32>,
    },
    /// A whole-game input that acts on no factor and whose legal reads only the shared part
    /// (a `noop`): every factor has it.
    Shared {
        /// The whole game's input.
        whole: u32,
    },
}

/// One independent sub-game.
#[derive(Clone, Debug)]
pub struct Factor {
    /// The program: its bases, then its inputs, legal, terminal and goals, with one view per
    /// atom it holds (see [`Atom::views`]).
    pub program: Program,
    /// For each base of the program, the whole game's base: the factor's own bases and the
    /// shared (action-independent) ones, in the whole game's order.
    pub bases: Vec<u32>,
    /// How many of `bases` are the factor's own (not shared).
    pub own_bases: usize,
    /// For each input of the program, the whole-game inputs it stands for.
    pub inputs: Vec<FactorInput>,
}

/// A game split into independent sub-games, and how the whole is made of them.
///
/// - State: the whole state is the union of the factors' states (the shared bases are in every
///   factor and agree).
/// - Moves: every whole input `x` is factor input `move_map[x][g]` of factor `g`. Shared inputs
///   are legal in the whole game exactly when they are in a factor (in any: they agree); any
///   other input is legal exactly when its factor input is legal in every factor. A role's
///   non-shared moves make every combination of its factor moves.
/// - Transitions: each factor's next state, for the factor inputs of a joint move, is the
///   whole game's next state restricted to the factor's bases.
/// - Terminal and goals: [`Factoring::terminal`] and [`Factoring::goals`] over the atoms, each
///   computed by a view of a factor program.
#[derive(Clone, Debug)]
pub struct Factoring {
    /// The factors.
    pub factors: Vec<Factor>,
    /// The action-independent bases, in every factor.
    pub shared_bases: Vec<u32>,
    /// The atoms of the relations.
    pub atoms: Vec<Atom>,
    /// The whole game's terminal as a function of the atoms.
    pub terminal: Relation,
    /// Each goal bit of the whole game as a function of the atoms.
    pub goals: Vec<Relation>,
    /// For each whole input, its factor input in each factor.
    pub move_map: Vec<Vec<u32>>,
    /// Whether each whole input is shared.
    pub shared_inputs: Vec<bool>,
}

impl Factoring {
    /// Evaluates an atom, given for each factor a function from its view bit to the value.
    pub fn atom_value(&self, atom: usize, view: &dyn Fn(usize, u32) -> bool) -> bool {
        let a = &self.atoms[atom];
        let g = a.factor.unwrap_or(0);
        let v = a.views[g].expect("an atom is a view of its factor");
        view(g, v)
    }
}

/// What the analysis found.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// Whether each base depends on the moves.
    pub action_dependent: Vec<bool>,
    /// How many connected components the action-dependent transitions form.
    pub components: usize,
    /// Latches proven one by one.
    pub latches: Latches,
    /// The factors, or why there are none.
    pub factoring: Result<Factoring, Vec<Obstacle>>,
    /// How long the analysis took.
    pub time: Duration,
}

/// Analyses `net`.
pub fn analyze(net: &Propnet) -> Analysis {
    let clock = Instant::now();
    let graph = deps::Graph::of(net);
    let cones = deps::Cones::of(net, &graph);
    let core = latch::Core::of(net, &graph);
    let latches = latch::single_latches(&core);
    let (comp, ncomp) = deps::components(net, &cones);
    let init: Vec<Option<bool>> = net.bases.iter().map(|b| Some(b.init)).collect();
    let inert = || -> Vec<bool> {
        latch::inductive_in(&core, &init)
            .iter()
            .map(Option::is_some)
            .collect()
    };
    let factoring = factor::factor(net, &cones, &comp, ncomp, &inert);
    Analysis {
        action_dependent: cones.action_dependent.clone(),
        components: ncomp,
        latches,
        factoring,
        time: clock.elapsed(),
    }
}

/// The game from a given state on, with the latches that hold there folded in.
#[derive(Clone, Debug)]
pub struct Contingent {
    /// The base facts fixed from the state on: the largest set of the state's values that is
    /// inductive (see [`latch::inductive`]), as names and values.
    pub fixed: Vec<(String, bool)>,
    /// The net with those bases replaced by constants, starting in the state, optimized again.
    pub net: Propnet,
    /// The analysis of that net.
    pub analysis: Analysis,
}

/// Why a state could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A fact of the state is not a base proposition of the game.
    #[error("{fact} is not a base proposition of the game (nor a fact that always holds)")]
    UnknownFact {
        /// The fact.
        fact: String,
    },
    /// The text is not a list of facts.
    #[error("the state is not a list of facts: {0}")]
    Syntax(String),
}

/// Reads a state: base facts in KIF, one after the other (one per line, or all inside one
/// list), each optionally wrapped in `(true …)`. Returns the value of each base.
pub fn parse_state(net: &Propnet, text: &str) -> Result<Vec<bool>, StateError> {
    let mut terms = split_terms(text)?;
    // A single list of lists is the list form.
    if terms.len() == 1 && terms[0].starts_with("((") {
        terms = split_terms(&terms[0][1..terms[0].len() - 1])?;
    }
    let mut state = vec![false; net.bases.len()];
    for term in terms {
        let fact = term
            .strip_prefix("(true ")
            .and_then(|t| t.strip_suffix(')'))
            .map(str::to_string)
            .unwrap_or(term);
        if let Some(b) = net.bases.iter().position(|b| b.name == fact) {
            state[b] = true;
        } else if net.constant_facts.binary_search(&fact).is_err() {
            return Err(StateError::UnknownFact { fact });
        }
    }
    Ok(state)
}

/// Splits text into top-level KIF terms in canonical form (lowercase, single spaces), skipping
/// `;` comments.
fn split_terms(text: &str) -> Result<Vec<String>, StateError> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    let mut gap = false;
    let mut comment = false;
    for c in text.chars() {
        if comment {
            comment = c != '\n';
            continue;
        }
        if c == ';' {
            comment = true;
            gap = true;
            continue;
        }
        if c.is_whitespace() {
            gap = true;
            if depth == 0 && !cur.is_empty() {
                terms.push(std::mem::take(&mut cur));
            }
            continue;
        }
        match c {
            '(' => {
                if depth == 0 && !cur.is_empty() {
                    terms.push(std::mem::take(&mut cur));
                }
                if gap && !cur.is_empty() && !cur.ends_with('(') {
                    cur.push(' ');
                }
                cur.push('(');
                depth += 1;
            }
            ')' => {
                if depth == 0 {
                    return Err(StateError::Syntax("a ')' without its '('".into()));
                }
                cur.push(')');
                depth -= 1;
                if depth == 0 {
                    terms.push(std::mem::take(&mut cur));
                }
            }
            _ => {
                if gap && !cur.is_empty() && !cur.ends_with('(') {
                    cur.push(' ');
                }
                cur.push(c.to_ascii_lowercase());
            }
        }
        gap = false;
    }
    if depth != 0 {
        return Err(StateError::Syntax("a '(' without its ')'".into()));
    }
    if !cur.is_empty() {
        terms.push(cur);
    }
    Ok(terms)
}

/// Analyses the game as it continues from `state` (a value per base): the largest inductive
/// set of the state's values is proven to hold from then on, those bases become constants (the
/// paper's latch modification), the net starts in `state` and is optimized again, and the
/// result is analysed.
pub fn analyze_from(net: &Propnet, state: &[bool], max_rounds: u32) -> Contingent {
    let assume: Vec<Option<bool>> = state.iter().map(|&v| Some(v)).collect();
    let kept = latch::inductive(net, &assume);
    let mut folded = net.clone();
    let mut fixed = Vec::new();
    for (b, k) in kept.iter().enumerate() {
        if let Some(v) = k {
            fixed.push((net.bases[b].name.clone(), *v));
        }
    }
    for node in folded.nodes.iter_mut() {
        if let Node::Base(b) = *node {
            if let Some(v) = kept[b as usize] {
                *node = Node::Const(v);
            }
        }
    }
    for (base, &v) in folded.bases.iter_mut().zip(state) {
        base.init = v;
    }
    let (folded, _) = net::optimize(folded, max_rounds);
    let analysis = analyze(&folded);
    Contingent {
        fixed,
        net: folded,
        analysis,
    }
}

#[cfg(test)]
mod tests;

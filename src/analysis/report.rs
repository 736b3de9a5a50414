//! What `propjet analyze` prints: the analysis by name, as text or as one JSON object.

use super::{Analysis, Factoring};
use crate::net::Propnet;
use std::fmt::Write;

/// One factor, by name.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FactorReport {
    /// Its own base propositions.
    pub bases: Vec<String>,
    /// How many shared bases it holds as well.
    pub shared_bases: usize,
    /// Its moves, per role (role name, move names).
    pub moves: Vec<(String, Vec<String>)>,
    /// The number of gates of its program.
    pub gates: usize,
    /// The number of inputs of its program.
    pub inputs: usize,
}

/// The report of one analysis.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// The game.
    pub game: String,
    /// Whether the game factors.
    pub factored: bool,
    /// The factors (empty when the game does not factor).
    pub factors: Vec<FactorReport>,
    /// The action-independent base propositions, shared by every factor.
    pub shared: Vec<String>,
    /// The number of base propositions of the analysed net.
    pub bases: usize,
    /// The number of inputs of the analysed net.
    pub inputs: usize,
    /// How many connected components the action-dependent transitions form.
    pub components: usize,
    /// Bases proven to stay true once true.
    pub positive_latches: Vec<String>,
    /// Bases proven to stay false once false.
    pub negative_latches: Vec<String>,
    /// The atoms of the relations: name and factor (`null` for the shared part).
    pub atoms: Vec<(String, Option<usize>)>,
    /// The whole terminal over the atoms.
    pub terminal: Option<String>,
    /// The whole goals over the atoms: role, value, relation.
    pub goals: Vec<(String, u32, String)>,
    /// Why the game does not factor, or which candidate factors were joined and why.
    pub obstacles: Vec<String>,
    /// With a state: the facts folded in as constants.
    pub fixed: Option<Vec<(String, bool)>>,
    /// The analysis time in milliseconds.
    pub analysis_ms: f64,
}

impl Report {
    /// The report of `analysis` of `net`; `fixed` the facts folded in from a state.
    pub fn new(game: &str, net: &Propnet, analysis: &Analysis, fixed: Option<&[(String, bool)]>) -> Report {
        let names =
            |bs: &[u32]| -> Vec<String> { bs.iter().map(|&b| net.bases[b as usize].name.clone()).collect() };
        let mut r = Report {
            game: game.to_string(),
            factored: analysis.factoring.is_ok(),
            factors: Vec::new(),
            shared: net
                .bases
                .iter()
                .zip(&analysis.action_dependent)
                .filter(|(_, d)| !**d)
                .map(|(b, _)| b.name.clone())
                .collect(),
            bases: net.bases.len(),
            inputs: net.inputs.len(),
            components: analysis.components,
            positive_latches: names(&analysis.latches.positive),
            negative_latches: names(&analysis.latches.negative),
            atoms: Vec::new(),
            terminal: None,
            goals: Vec::new(),
            obstacles: Vec::new(),
            fixed: fixed.map(|f| f.to_vec()),
            analysis_ms: analysis.time.as_secs_f64() * 1e3,
        };
        match &analysis.factoring {
            Ok(f) => r.fill(net, f),
            Err(obstacles) => r.obstacles = obstacles.iter().map(|o| o.to_string()).collect(),
        }
        r
    }

    fn fill(&mut self, net: &Propnet, f: &Factoring) {
        for factor in &f.factors {
            let layout = &factor.program.layout;
            let moves = layout
                .roles
                .iter()
                .zip(&layout.role_inputs)
                .map(|(role, range)| {
                    (
                        role.clone(),
                        layout.inputs[range.start as usize..range.end as usize]
                            .iter()
                            .map(|(_, n)| n.clone())
                            .collect(),
                    )
                })
                .collect();
            self.factors.push(FactorReport {
                bases: factor.bases[..]
                    .iter()
                    .filter(|b| !f.shared_bases.contains(b))
                    .map(|&b| net.bases[b as usize].name.clone())
                    .collect(),
                shared_bases: factor.bases.len() - factor.own_bases,
                moves,
                gates: factor.program.gates.len(),
                inputs: factor.program.num_inputs(),
            });
        }
        self.atoms = f.atoms.iter().map(|a| (a.name.clone(), a.factor)).collect();
        self.terminal = Some(f.terminal.text());
        self.goals = net
            .goals
            .iter()
            .zip(&f.goals)
            .map(|(g, rel)| (net.roles[g.role.index()].clone(), g.value, rel.text()))
            .collect();
    }

    /// The report as text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {} bases, {} inputs; {} action-dependent components",
            self.game, self.bases, self.inputs, self.components
        );
        if let Some(fixed) = &self.fixed {
            let _ = writeln!(s, "from the state: {} facts fixed by latches", fixed.len());
            for (name, v) in fixed.iter().take(20) {
                let _ = writeln!(s, "  {name} = {v}");
            }
        }
        let list = |v: &[String]| -> String {
            if v.len() > 12 {
                format!("{} … ({} in all)", v[..12].join(" "), v.len())
            } else {
                v.join(" ")
            }
        };
        let _ = writeln!(s, "shared (action-independent): {}", list(&self.shared));
        let _ = writeln!(
            s,
            "latches: {} positive: {}",
            self.positive_latches.len(),
            list(&self.positive_latches)
        );
        let _ = writeln!(
            s,
            "latches: {} negative: {}",
            self.negative_latches.len(),
            list(&self.negative_latches)
        );
        if self.factored {
            let _ = writeln!(s, "factors: {}", self.factors.len());
            for (i, f) in self.factors.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "  factor {i}: {} bases (+{} shared), {} inputs, {} gates: {}",
                    f.bases.len(),
                    f.shared_bases,
                    f.inputs,
                    f.gates,
                    list(&f.bases)
                );
                for (role, moves) in &f.moves {
                    let _ = writeln!(s, "    {role}: {}", list(moves));
                }
            }
            for (i, (name, factor)) in self.atoms.iter().enumerate() {
                let owner = factor.map_or("shared".to_string(), |f| format!("factor {f}"));
                let _ = writeln!(s, "  atom a{i} ({owner}): {name}");
            }
            if let Some(t) = &self.terminal {
                let _ = writeln!(s, "  terminal = {t}");
            }
            for (role, value, rel) in &self.goals {
                let _ = writeln!(s, "  goal {role} {value} = {rel}");
            }
            for o in &self.obstacles {
                let _ = writeln!(s, "  joined: {o}");
            }
        } else {
            let _ = writeln!(s, "does not factor:");
            for o in &self.obstacles {
                let _ = writeln!(s, "  {o}");
            }
        }
        s
    }
}

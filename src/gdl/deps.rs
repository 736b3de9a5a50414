//! The relation dependency graph of a description and its strongly connected components.
//!
//! A rule `(<= h b1 … bn)` gives an edge from the relation of `h` to the relation of every atom
//! in its body; the edge is negative when the atom sits under a `not`. `true` and `does` have no
//! rules, so `next` never reaches back to the current state through this graph, which is why
//! the graph of a game has no cycles through time.

use super::ast::{Description, Literal, Span, Symbol};
use std::collections::VecDeque;
use std::ops::Range;

/// One body atom of one rule, seen from the rule's head relation.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Edge {
    /// The relation of the body atom.
    pub to: Symbol,
    /// Whether the atom sits under a `not`.
    pub negative: bool,
    /// Where to point at: the atom, or for a negative edge the outermost `not` around it.
    pub span: Span,
}

/// The dependency graph, with nodes indexed by symbol number.
pub(crate) struct DepGraph {
    /// The outgoing edges of every symbol, in rule order and then body order.
    pub out: Vec<Vec<Edge>>,
    /// For every rule, the range of its edges in `out[head]`.
    pub by_rule: Vec<Range<usize>>,
    /// The strongly connected component of every symbol.
    pub scc: Vec<u32>,
}

impl DepGraph {
    /// Builds the graph of `desc` and computes its components.
    pub fn build(desc: &Description) -> DepGraph {
        let n = desc.symbols.len();
        let mut out: Vec<Vec<Edge>> = vec![Vec::new(); n];
        let mut by_rule = Vec::with_capacity(desc.rules.len());
        for rule in &desc.rules {
            let from = rule.head.rel.0 as usize;
            let start = out[from].len();
            for lit in &rule.body {
                collect_edges(lit, None, &mut out[from]);
            }
            by_rule.push(start..out[from].len());
        }
        let scc = components(&out);
        DepGraph { out, by_rule, scc }
    }

    /// The edges of rule `i` of `desc`, in body order.
    pub fn rule_edges(&self, desc: &Description, i: usize) -> &[Edge] {
        let head = desc.rules[i].head.rel.0 as usize;
        &self.out[head][self.by_rule[i].clone()]
    }

    /// Whether `a` and `b` lie in the same strongly connected component.
    pub fn same_component(&self, a: Symbol, b: Symbol) -> bool {
        self.scc[a.0 as usize] == self.scc[b.0 as usize]
    }

    /// For every symbol that reaches `target` through one or more edges, the next relation on a
    /// shortest path there; `None` for symbols that do not reach it. A breadth-first search
    /// backwards from `target` gives all of them at once.
    pub fn paths_to(&self, target: Symbol) -> Vec<Option<Symbol>> {
        let n = self.out.len();
        let mut into: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (from, edges) in self.out.iter().enumerate() {
            for e in edges {
                into[e.to.0 as usize].push(from as u32);
            }
        }
        let mut next: Vec<Option<Symbol>> = vec![None; n];
        let mut queue = VecDeque::new();
        queue.push_back(target.0);
        while let Some(node) = queue.pop_front() {
            for &pred in &into[node as usize] {
                if next[pred as usize].is_none() {
                    next[pred as usize] = Some(Symbol(node));
                    queue.push_back(pred);
                }
            }
        }
        next
    }

    /// A shortest path from `from` to `to` using only relations of their (common) component,
    /// both ends included; `None` if there is none.
    pub fn path_within_component(&self, from: Symbol, to: Symbol) -> Option<Vec<Symbol>> {
        let comp = self.scc[from.0 as usize];
        let mut prev: Vec<Option<u32>> = vec![None; self.out.len()];
        let mut seen = vec![false; self.out.len()];
        let mut queue = VecDeque::new();
        seen[from.0 as usize] = true;
        queue.push_back(from.0);
        while let Some(node) = queue.pop_front() {
            if node == to.0 {
                let mut path = vec![to];
                let mut cur = node;
                while let Some(p) = prev[cur as usize] {
                    path.push(Symbol(p));
                    cur = p;
                }
                path.reverse();
                return Some(path);
            }
            for e in &self.out[node as usize] {
                let t = e.to.0 as usize;
                if !seen[t] && self.scc[t] == comp {
                    seen[t] = true;
                    prev[t] = Some(node);
                    queue.push_back(e.to.0);
                }
            }
        }
        None
    }
}

fn collect_edges(lit: &Literal, under_not: Option<Span>, out: &mut Vec<Edge>) {
    match lit {
        Literal::Atom(a) => out.push(Edge {
            to: a.rel,
            negative: under_not.is_some(),
            span: under_not.unwrap_or(a.span),
        }),
        Literal::Not(inner, span) => collect_edges(inner, Some(under_not.unwrap_or(*span)), out),
        Literal::Distinct(..) => {}
        Literal::Or(ls, _) | Literal::And(ls, _) => {
            for l in ls {
                collect_edges(l, under_not, out);
            }
        }
    }
}

/// Tarjan's strongly connected components, with an explicit stack so that a long chain of
/// relations (easy to write, and easy for a fuzzer to find) cannot overflow the call stack.
fn components(out: &[Vec<Edge>]) -> Vec<u32> {
    const UNSEEN: u32 = u32::MAX;
    let n = out.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut comp = vec![UNSEEN; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut next_index = 0u32;
    let mut next_comp = 0u32;
    // Each frame is a node and how many of its edges have been followed so far.
    let mut frames: Vec<(u32, usize)> = Vec::new();
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        frames.push((root as u32, 0));
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root as u32);
        on_stack[root] = true;
        while let Some(frame) = frames.last_mut() {
            let v = frame.0 as usize;
            if let Some(e) = out[v].get(frame.1) {
                frame.1 += 1;
                let w = e.to.0 as usize;
                if index[w] == UNSEEN {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w as u32);
                    on_stack[w] = true;
                    frames.push((w as u32, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                let p = parent as usize;
                low[p] = low[p].min(low[v]);
            }
            if low[v] == index[v] {
                while let Some(w) = stack.pop() {
                    on_stack[w as usize] = false;
                    comp[w as usize] = next_comp;
                    if w as usize == v {
                        break;
                    }
                }
                next_comp += 1;
            }
        }
    }
    comp
}

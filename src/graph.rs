//! Strongly connected components, for the grounder (its relations, and the heads it settles)
//! and for the builder (the view propositions, whose cycles it must find); and the reader
//! lists of a graph given by its operand lists.

/// The reader lists of a graph of `n` nodes whose node `i` reads `operands(i)`, compressed:
/// node `x`'s readers are `readers[start[x]..start[x + 1]]`, ascending, once per operand
/// occurrence. Returns `(start, readers)`. `operands` is called twice for each node.
pub(crate) fn reverse<I: IntoIterator<Item = u32>>(
    n: usize,
    operands: impl Fn(usize) -> I,
) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; n + 1];
    for i in 0..n {
        for op in operands(i) {
            start[op as usize + 1] += 1;
        }
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut readers = vec![0u32; start[n] as usize];
    for i in 0..n {
        for op in operands(i) {
            readers[fill[op as usize] as usize] = i as u32;
            fill[op as usize] += 1;
        }
    }
    (start, readers)
}

/// A vertex of a graph of `n` vertices numbered from 0.
pub(crate) trait Vertex: Copy + Ord {
    /// The vertex's number, below the graph's `n`.
    fn index(self) -> usize;
}

impl Vertex for u32 {
    #[inline]
    fn index(self) -> usize {
        self as usize
    }
}

/// Hands each strongly connected component of the graph on `roots` and what they reach to
/// `emit`, its vertices sorted, after every component it has an edge to (what a vertex points
/// to comes first), and stops at the first error `emit` returns. `succ` appends a vertex's
/// successors to the vector it is given. Tarjan's algorithm, iterative, so that a long chain
/// of relations or a deep recursion in a game cannot overflow the stack; it allocates nothing
/// per vertex or per component (settling chess's check test splits 313,000 heads into
/// components of one, and chess's build finds 945,000 views' components).
pub(crate) fn components<V: Vertex, E>(
    n: usize,
    roots: impl IntoIterator<Item = V>,
    mut succ: impl FnMut(V, &mut Vec<V>),
    mut emit: impl FnMut(&[V]) -> Result<(), E>,
) -> Result<(), E> {
    assert!(n <= u32::MAX as usize, "a graph of at most 2^32 - 1 vertices");
    const UNVISITED: u32 = u32::MAX;
    let mut index = vec![UNVISITED; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<V> = Vec::new();
    let mut component: Vec<V> = Vec::new();
    let mut counter = 0u32;
    // Each frame: the vertex, and the position of its next successor to visit and the end of
    // its successors in `successors`. The frames' successors lie in one array, in the order of
    // the frames, so that a frame's are dropped with it (an allocation per vertex took a fifth
    // of the builder's search on alexChess's 218,000 heads).
    let mut frames: Vec<(V, usize, usize)> = Vec::new();
    let mut successors: Vec<V> = Vec::new();
    for root in roots {
        if index[root.index()] != UNVISITED {
            continue;
        }
        index[root.index()] = counter;
        low[root.index()] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root.index()] = true;
        succ(root, &mut successors);
        frames.push((root, 0, successors.len()));
        while let Some(frame) = frames.last_mut() {
            let v = frame.0;
            if frame.1 < frame.2 {
                let w = successors[frame.1];
                frame.1 += 1;
                if index[w.index()] == UNVISITED {
                    index[w.index()] = counter;
                    low[w.index()] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w.index()] = true;
                    let start = successors.len();
                    succ(w, &mut successors);
                    frames.push((w, start, successors.len()));
                } else if on_stack[w.index()] {
                    low[v.index()] = low[v.index()].min(index[w.index()]);
                }
                continue;
            }
            frames.pop();
            // Its successors are the last in the array: every frame above it is gone.
            let end = frames.last().map_or(0, |f| f.2);
            successors.truncate(end);
            if let Some(parent) = frames.last() {
                let p = parent.0;
                low[p.index()] = low[p.index()].min(low[v.index()]);
            }
            if low[v.index()] == index[v.index()] {
                component.clear();
                loop {
                    let w = stack.pop().expect("the component's root is on the stack");
                    on_stack[w.index()] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                component.sort_unstable();
                emit(&component)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::components;

    /// The components of `edges` on `n` vertices, every vertex a root.
    fn all(n: usize, edges: &[(u32, u32)]) -> Vec<Vec<u32>> {
        let mut out = Vec::new();
        components::<u32, ()>(
            n,
            0..n as u32,
            |v, to| to.extend(edges.iter().filter(|e| e.0 == v).map(|e| e.1)),
            |c| {
                out.push(c.to_vec());
                Ok(())
            },
        )
        .unwrap();
        out
    }

    #[test]
    fn components_come_after_what_they_point_to() {
        // 0 → 1 ⇄ 2 → 3, 4 alone, 5 → 5.
        let found = all(6, &[(0, 1), (1, 2), (2, 1), (2, 3), (5, 5)]);
        assert_eq!(found, vec![vec![3], vec![1, 2], vec![0], vec![4], vec![5]]);
    }

    /// `Out::settle` in the grounder skips the search for a graph without edges and takes the
    /// vertices one by one in the order of the roots, which is what the search gives.
    #[test]
    fn without_edges_every_vertex_is_a_component_in_the_order_of_the_roots() {
        let found = all(5, &[]);
        assert_eq!(found, vec![vec![0], vec![1], vec![2], vec![3], vec![4]]);
    }

    #[test]
    fn only_what_the_roots_reach_and_the_first_error_stops() {
        let edges = [(0u32, 1u32), (2, 3)];
        let mut seen = Vec::new();
        let r = components::<u32, ()>(
            4,
            [2u32],
            |v, to| to.extend(edges.iter().filter(|e| e.0 == v).map(|e| e.1)),
            |c| {
                seen.push(c.to_vec());
                Ok(())
            },
        );
        assert_eq!(r, Ok(()));
        assert_eq!(seen, vec![vec![3], vec![2]]);
        let mut calls = 0;
        let r = components::<u32, &str>(
            4,
            0..4u32,
            |v, to| to.extend(edges.iter().filter(|e| e.0 == v).map(|e| e.1)),
            |_| {
                calls += 1;
                Err("stop")
            },
        );
        assert_eq!((r, calls), (Err("stop"), 1));
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let n = 1_000_000u32;
        let mut count = 0;
        components::<u32, ()>(
            n as usize,
            0..n,
            |v, to| {
                if v + 1 < n {
                    to.push(v + 1)
                }
            },
            |c| {
                assert_eq!(c.len(), 1);
                count += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(count, n);
    }
}

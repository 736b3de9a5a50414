//! Hand-built Programs for the interpreter tests: a small builder and two games written with it.

#![allow(dead_code)]

use propjet_runtime::{Gate, Layout, Lit, Op, Program, RoleIdx};

/// Builds a Program gate by gate. Bases and inputs are fixed up front because the gate slots
/// come after them.
pub struct Builder {
    layout: Layout,
    gates: Vec<Gate>,
    operands: Vec<Lit>,
}

/// Everything but the gates: outputs and the initial state.
pub struct Outputs {
    pub init: Vec<usize>,
    pub legal: Vec<Lit>,
    pub goals: Vec<(RoleIdx, u32, Lit)>,
    pub terminal: Lit,
    pub next: Vec<Lit>,
    pub views: Vec<(String, Lit)>,
    pub constant_facts: Vec<String>,
}

impl Builder {
    /// `inputs` lists each role's actions, in role order.
    pub fn new(roles: &[&str], bases: &[String], inputs: &[Vec<String>]) -> Builder {
        let mut layout = Layout {
            roles: roles.iter().map(|r| r.to_string()).collect(),
            bases: bases.to_vec(),
            constant_facts: Vec::new(),
            inputs: Vec::new(),
            role_inputs: Vec::new(),
            goals: Vec::new(),
            views: Vec::new(),
        };
        for (r, actions) in inputs.iter().enumerate() {
            let start = layout.inputs.len() as u32;
            for a in actions {
                layout.inputs.push((RoleIdx(r as u32), a.clone()));
            }
            layout.role_inputs.push(start..layout.inputs.len() as u32);
        }
        Builder {
            layout,
            gates: Vec::new(),
            operands: Vec::new(),
        }
    }

    pub fn base(&self, name: &str) -> Lit {
        let i = self.layout.bases.iter().position(|b| b == name);
        Lit::pos(2 + i.unwrap_or_else(|| panic!("no base {name}")) as u32)
    }

    /// The input of `role` whose action is `action`.
    pub fn input(&self, role: usize, action: &str) -> Lit {
        let range = self.layout.role_inputs[role].clone();
        let i = range
            .clone()
            .find(|&i| self.layout.inputs[i as usize].1 == action)
            .unwrap_or_else(|| panic!("no input {action} of role {role}"));
        Lit::pos(2 + self.layout.bases.len() as u32 + i)
    }

    fn gate(&mut self, op: Op, operands: &[Lit]) -> Lit {
        let slot = 2 + self.layout.bases.len() + self.layout.inputs.len() + self.gates.len();
        self.gates.push(Gate {
            op,
            start: self.operands.len() as u32,
            len: operands.len() as u32,
        });
        self.operands.extend_from_slice(operands);
        Lit::pos(slot as u32)
    }

    pub fn and(&mut self, operands: &[Lit]) -> Lit {
        self.gate(Op::And, operands)
    }

    pub fn or(&mut self, operands: &[Lit]) -> Lit {
        self.gate(Op::Or, operands)
    }

    /// The finished Program, with its entry gate lists computed.
    pub fn finish(self, outputs: Outputs) -> Program {
        let mut layout = self.layout;
        let mut init = vec![0u64; Layout::words(layout.bases.len())];
        for b in outputs.init {
            init[b / 64] |= 1 << (b % 64);
        }
        layout.goals = outputs.goals.iter().map(|&(r, v, _)| (r, v)).collect();
        layout.views = outputs.views.iter().map(|(n, _)| n.clone()).collect();
        layout.constant_facts = outputs.constant_facts;
        let mut program = Program {
            layout,
            gates: self.gates,
            operands: self.operands,
            init,
            legal: outputs.legal,
            goals: outputs.goals.iter().map(|&(_, _, l)| l).collect(),
            terminal: outputs.terminal,
            next: outputs.next,
            views: outputs.views.into_iter().map(|(_, l)| l).collect(),
            entry_gates: Default::default(),
            opaque: Default::default(),
            loops: Default::default(),
        };
        program.compute_entry_gates();
        program
    }
}

/// The cells of the tic-tac-toe board, row-major: `(m, n)` for rows and columns 1 to 3.
pub fn cells() -> Vec<(usize, usize)> {
    (1..=3).flat_map(|m| (1..=3).map(move |n| (m, n))).collect()
}

/// The eight lines of three cells, as indices into [`cells`].
pub const LINES: [[usize; 3]; 8] = [
    [0, 1, 2],
    [3, 4, 5],
    [6, 7, 8],
    [0, 3, 6],
    [1, 4, 7],
    [2, 5, 8],
    [0, 4, 8],
    [2, 4, 6],
];

/// Tic-tac-toe as a propnet, built from these rules: the player in control marks a blank cell,
/// the other plays noop; control alternates; a marked cell keeps its mark; the game ends with a
/// line or a full board; a line wins 100, a draw gives both 50, a line of the opponent 0.
/// Views: `(line x)`, `(line o)` and `open`.
pub fn tictactoe() -> Program {
    let marks = ["x", "o"];
    let players = ["xplayer", "oplayer"];
    let mut bases: Vec<String> = Vec::new();
    for (m, n) in cells() {
        for mark in marks {
            bases.push(format!("(cell {m} {n} {mark})"));
        }
    }
    for p in players {
        bases.push(format!("(control {p})"));
    }
    let mut actions: Vec<String> = cells().iter().map(|(m, n)| format!("(mark {m} {n})")).collect();
    actions.push("noop".to_string());
    let mut b = Builder::new(&players, &bases, &[actions.clone(), actions]);

    let cell = |b: &Builder, c: usize, mark: &str| {
        let (m, n) = cells()[c];
        b.base(&format!("(cell {m} {n} {mark})"))
    };
    let control: Vec<Lit> = players
        .iter()
        .map(|p| b.base(&format!("(control {p})")))
        .collect();
    let blank: Vec<Lit> = (0..9)
        .map(|c| {
            let (x, o) = (cell(&b, c, "x"), cell(&b, c, "o"));
            b.and(&[x.negate(), o.negate()])
        })
        .collect();
    let line: Vec<Lit> = marks
        .iter()
        .map(|mark| {
            let lines: Vec<Lit> = LINES
                .iter()
                .map(|l| {
                    let three: Vec<Lit> = l.iter().map(|&c| cell(&b, c, mark)).collect();
                    b.and(&three)
                })
                .collect();
            b.or(&lines)
        })
        .collect();
    let open = b.or(&blank);
    let terminal = b.or(&[line[0], line[1], open.negate()]);

    let mut legal = Vec::new();
    for p in 0..2 {
        // One legal literal per input, in input order: the nine marks, then noop.
        for &cell_blank in &blank {
            legal.push(b.and(&[control[p], cell_blank]));
        }
        legal.push(control[1 - p]);
    }
    let mut next = Vec::new();
    for (c, (m, n)) in cells().into_iter().enumerate() {
        for (p, mark) in marks.iter().enumerate() {
            let does = b.input(p, &format!("(mark {m} {n})"));
            let marked = b.and(&[does, blank[c]]);
            next.push(b.or(&[cell(&b, c, mark), marked]));
        }
    }
    next.push(control[1]);
    next.push(control[0]);

    let mut goals = Vec::new();
    for p in 0..2 {
        let (mine, theirs) = (line[p], line[1 - p]);
        let draw = b.and(&[mine.negate(), theirs.negate()]);
        let lost = b.and(&[mine.negate(), theirs]);
        let role = RoleIdx(p as u32);
        goals.push((role, 100, mine));
        goals.push((role, 50, draw));
        goals.push((role, 0, lost));
    }
    let init = vec![bases.iter().position(|s| s == "(control xplayer)").unwrap()];
    b.finish(Outputs {
        init,
        legal,
        goals,
        terminal,
        next,
        views: vec![
            ("(line x)".to_string(), line[0]),
            ("(line o)".to_string(), line[1]),
            ("open".to_string(), open),
        ],
        constant_facts: Vec::new(),
    })
}

/// The highest count of [`counter`].
pub const COUNTER_MAX: usize = 4;

/// A two-role simultaneous counter, built from these rules: the count starts at 0; each role
/// plays `inc` (legal while the count is below the maximum) or `wait` (always legal); the count
/// grows by the number of `inc`s, capped at the maximum, where the game ends. `left` gets 100 at
/// the end and 0 before; `right` has the goal 50 twice over (two goal bits, both true) and also
/// 10 while the count is 0. `(step 1)` is a constant fact; the view `even` holds at even counts.
pub fn counter() -> Program {
    let bases: Vec<String> = (0..=COUNTER_MAX).map(|c| format!("(count {c})")).collect();
    let actions = vec!["inc".to_string(), "wait".to_string()];
    let mut b = Builder::new(&["left", "right"], &bases, &[actions.clone(), actions]);
    let count: Vec<Lit> = (0..=COUNTER_MAX)
        .map(|c| b.base(&format!("(count {c})")))
        .collect();
    let (li, ri) = (b.input(0, "inc"), b.input(1, "inc"));
    let neither = b.and(&[li.negate(), ri.negate()]);
    let left_only = b.and(&[li, ri.negate()]);
    let right_only = b.and(&[li.negate(), ri]);
    let one = b.or(&[left_only, right_only]);
    let both = b.and(&[li, ri]);
    let mut next = Vec::new();
    for c in 0..=COUNTER_MAX {
        let mut ways = vec![b.and(&[count[c], neither])];
        if c >= 1 {
            ways.push(b.and(&[count[c - 1], one]));
        }
        if c >= 2 {
            ways.push(b.and(&[count[c - 2], both]));
        }
        if c == COUNTER_MAX {
            // From one below the maximum, two increments overshoot and stop at the maximum;
            // at the maximum the count stays whatever is played.
            ways.push(b.and(&[count[c - 1], both]));
            ways.push(count[c]);
        }
        next.push(b.or(&ways));
    }
    let top = count[COUNTER_MAX];
    let even_counts: Vec<Lit> = (0..=COUNTER_MAX).step_by(2).map(|c| count[c]).collect();
    let even = b.or(&even_counts);
    b.finish(Outputs {
        init: vec![0],
        legal: vec![top.negate(), Lit::TRUE, top.negate(), Lit::TRUE],
        goals: vec![
            (RoleIdx(0), 100, top),
            (RoleIdx(0), 0, top.negate()),
            (RoleIdx(1), 50, Lit::TRUE),
            (RoleIdx(1), 50, Lit::FALSE.negate()),
            (RoleIdx(1), 10, count[0]),
        ],
        terminal: top,
        next,
        views: vec![("even".to_string(), even)],
        constant_facts: vec!["(step 1)".to_string()],
    })
}

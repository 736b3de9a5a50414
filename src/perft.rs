//! Perft: how many distinct states a game reaches at each depth, how many of them are terminal
//! and how many joint moves leave them, and the text format of the golden files that record
//! these counts for the games propjet ships (`games/NAME.perft`).
//!
//! The counts depend only on the game's rules, not on the engine, so every engine must give the
//! same rows; a change in a game or an engine that alters them shows up in review as a changed
//! golden file.

use propjet_runtime::{Machine, MachineError, MoveIdx, RoleIdx};
use std::collections::HashSet;
use std::fmt;

/// The counts at one depth.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PerftRow {
    /// The number of joint moves played from the initial state.
    pub depth: u32,
    /// The distinct states reached in exactly `depth` joint moves, terminal states not expanded.
    pub states: u64,
    /// How many of those states are terminal.
    pub terminal: u64,
    /// The joint moves leaving the non-terminal states: for each such state, the product over the
    /// roles of the number of legal moves, summed.
    pub joint_moves: u64,
}

impl fmt::Display for PerftRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {}",
            self.depth, self.states, self.terminal, self.joint_moves
        )
    }
}

/// Why a perft count stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PerftError {
    /// A non-terminal state leaves a role without a legal move, which a well-formed game never
    /// does; counting on would silently drop the state's successors.
    #[error("role {role} has no legal move in a non-terminal state at depth {depth}")]
    NoLegalMove {
        /// The role without a move.
        role: String,
        /// The depth of the state.
        depth: u32,
    },
    /// The machine refused to play a joint move made of legal moves: an engine bug.
    #[error("the engine failed on a legal joint move at depth {depth}: {source}")]
    Machine {
        /// The depth of the state the joint move was played in.
        depth: u32,
        /// The engine's error.
        #[source]
        source: MachineError,
    },
    /// The joint-move count of one depth does not fit in 64 bits.
    #[error("the number of joint moves at depth {depth} does not fit in 64 bits")]
    Overflow {
        /// The depth whose count overflowed.
        depth: u32,
    },
}

/// Counts the game of `machine` by depth, from the initial state to `max_depth` joint moves, and
/// returns one row per depth `0..=max_depth` (rows past the end of the game count zero).
///
/// States are deduplicated at each depth, so a state reached by several move orders counts once
/// and is expanded once; terminal states are counted but not expanded. A state reached at two
/// different depths counts at both.
pub fn perft<M: Machine + ?Sized>(machine: &M, max_depth: u32) -> Result<Vec<PerftRow>, PerftError> {
    let roles = machine.roles().len();
    let mut rows = Vec::with_capacity(max_depth as usize + 1);
    let mut layer: HashSet<M::State> = HashSet::from([machine.initial_state()]);
    for depth in 0..=max_depth {
        let expand = depth < max_depth;
        let mut next_layer: HashSet<M::State> = HashSet::new();
        let mut terminal = 0u64;
        let mut joint_moves = 0u64;
        let mut legal: Vec<Vec<MoveIdx>> = Vec::with_capacity(roles);
        for state in &layer {
            if machine.is_terminal(state) {
                terminal += 1;
                continue;
            }
            legal.clear();
            for r in 0..roles {
                let moves = machine.legal_moves(state, RoleIdx::from_index(r));
                if moves.is_empty() {
                    return Err(PerftError::NoLegalMove {
                        role: machine.roles()[r].clone(),
                        depth,
                    });
                }
                legal.push(moves);
            }
            let count = legal
                .iter()
                .try_fold(1u64, |acc, moves| acc.checked_mul(moves.len() as u64))
                .ok_or(PerftError::Overflow { depth })?;
            joint_moves = joint_moves
                .checked_add(count)
                .ok_or(PerftError::Overflow { depth })?;
            if expand {
                for_each_joint_move(&legal, |joint| {
                    let next = machine
                        .next_state_unchecked(state, joint)
                        .map_err(|source| PerftError::Machine { depth, source })?;
                    next_layer.insert(next);
                    Ok(())
                })?;
            }
        }
        rows.push(PerftRow {
            depth,
            states: layer.len() as u64,
            terminal,
            joint_moves,
        });
        layer = next_layer;
    }
    Ok(rows)
}

/// Calls `f` on every joint move that takes one move from each role's list, in odometer order
/// (the last role's move changes fastest). Stops at the first error.
fn for_each_joint_move<E>(
    legal: &[Vec<MoveIdx>],
    mut f: impl FnMut(&[MoveIdx]) -> Result<(), E>,
) -> Result<(), E> {
    if legal.iter().any(|moves| moves.is_empty()) {
        return Ok(());
    }
    let mut positions = vec![0usize; legal.len()];
    let mut joint: Vec<MoveIdx> = legal.iter().map(|moves| moves[0]).collect();
    loop {
        f(&joint)?;
        // Advance the odometer from the last role; when every position wraps, all joint moves
        // have been seen.
        let mut r = legal.len();
        loop {
            if r == 0 {
                return Ok(());
            }
            r -= 1;
            positions[r] += 1;
            if positions[r] < legal[r].len() {
                joint[r] = legal[r][positions[r]];
                break;
            }
            positions[r] = 0;
            joint[r] = legal[r][0];
        }
    }
}

/// A golden file: comment lines, then one row per depth from 0.
///
/// ```text
/// # Perft of games/buttons.kif.
/// # depth states terminal joint_moves
/// 0 1 0 2
/// 1 2 1 2
/// ```
///
/// Comments start with `#` and may only come before the first row, so that rewriting the rows
/// keeps every comment. Blank lines are ignored. Each row holds four unsigned integers separated
/// by white space, and the depths run 0, 1, 2, … without gaps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerftFile {
    /// The comment lines, without the `#` and the one space after it.
    pub header: Vec<String>,
    /// The rows, `rows[d].depth == d`.
    pub rows: Vec<PerftRow>,
}

/// A golden file that does not follow the format, with the 1-based line at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct PerftFileError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl PerftFile {
    /// Reads a golden file.
    pub fn parse(text: &str) -> Result<PerftFile, PerftFileError> {
        let mut header = Vec::new();
        let mut rows: Vec<PerftRow> = Vec::new();
        let mut last_line = 0;
        for (i, line) in text.lines().enumerate() {
            let number = i + 1;
            last_line = number;
            let err = |message: String| PerftFileError {
                line: number,
                message,
            };
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            if let Some(comment) = trimmed.strip_prefix('#') {
                if !rows.is_empty() {
                    return Err(err(
                        "a comment after the first row (comments belong in the header, before the rows)"
                            .to_string(),
                    ));
                }
                header.push(
                    comment
                        .strip_prefix(' ')
                        .unwrap_or(comment)
                        .trim_end()
                        .to_string(),
                );
                continue;
            }
            let fields: Vec<&str> = trimmed.split_whitespace().collect();
            if fields.len() != 4 {
                return Err(err(format!(
                    "a row needs 4 numbers (depth states terminal joint_moves), found {} fields",
                    fields.len()
                )));
            }
            let number_at = |k: usize, name: &str| -> Result<u64, PerftFileError> {
                fields[k].parse::<u64>().map_err(|_| {
                    err(format!(
                        "{name} must be an unsigned integer, found `{}`",
                        fields[k]
                    ))
                })
            };
            let depth = number_at(0, "depth")?;
            let row = PerftRow {
                depth: u32::try_from(depth)
                    .map_err(|_| err(format!("depth {depth} does not fit in 32 bits")))?,
                states: number_at(1, "states")?,
                terminal: number_at(2, "terminal")?,
                joint_moves: number_at(3, "joint_moves")?,
            };
            if row.depth as usize != rows.len() {
                return Err(err(format!(
                    "expected the row of depth {}, found depth {}",
                    rows.len(),
                    row.depth
                )));
            }
            if row.terminal > row.states {
                return Err(err(format!(
                    "{} terminal states out of only {} states",
                    row.terminal, row.states
                )));
            }
            rows.push(row);
        }
        if rows.is_empty() {
            return Err(PerftFileError {
                line: last_line.max(1),
                message: "no rows: a golden file needs at least the row of depth 0".to_string(),
            });
        }
        Ok(PerftFile { header, rows })
    }

    /// The deepest depth the file records.
    pub fn max_depth(&self) -> u32 {
        self.rows.last().map_or(0, |row| row.depth)
    }
}

impl fmt::Display for PerftFile {
    /// Writes the file in the form [`PerftFile::parse`] reads: `# ` and each header line, then
    /// one row per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.header {
            if line.is_empty() {
                writeln!(f, "#")?;
            } else {
                writeln!(f, "# {line}")?;
            }
        }
        for row in &self.rows {
            writeln!(f, "{row}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use propjet_runtime::FactIdx;

    /// Two roles each add 0, 1 or 2 to a shared total at every step, simultaneously. The game
    /// ends when the total reaches 4 or after 3 steps. With `broken`, the second role has no
    /// legal move when the total is 2, which a well-formed game must never allow.
    struct Adders {
        roles: Vec<String>,
        broken: bool,
    }

    impl Adders {
        fn new(broken: bool) -> Adders {
            Adders {
                roles: vec!["left".to_string(), "right".to_string()],
                broken,
            }
        }
    }

    /// The state is (steps played, total).
    type AddersState = (u32, u32);

    impl Machine for Adders {
        type State = AddersState;

        fn engine_name(&self) -> &'static str {
            "adders"
        }

        fn roles(&self) -> &[String] {
            &self.roles
        }

        fn initial_state(&self) -> AddersState {
            (0, 0)
        }

        fn state_facts(&self, state: &AddersState) -> Vec<FactIdx> {
            vec![FactIdx(state.0 * 100 + state.1)]
        }

        fn fact_name(&self, fact: FactIdx) -> String {
            format!("(at {} {})", fact.0 / 100, fact.0 % 100)
        }

        fn legal_moves(&self, state: &AddersState, role: RoleIdx) -> Vec<MoveIdx> {
            if role.index() >= 2 || (self.broken && role.index() == 1 && state.1 == 2) {
                return Vec::new();
            }
            (0..3).map(MoveIdx).collect()
        }

        fn move_name(&self, mv: MoveIdx) -> String {
            format!("(add {})", mv.0)
        }

        fn find_move(&self, role: RoleIdx, name: &str) -> Option<MoveIdx> {
            (0..3)
                .map(MoveIdx)
                .find(|&mv| role.index() < 2 && self.move_name(mv) == name)
        }

        fn next_state_unchecked(
            &self,
            state: &AddersState,
            joint: &[MoveIdx],
        ) -> Result<AddersState, MachineError> {
            if joint.len() != 2 {
                return Err(MachineError::WrongMoveCount {
                    expected: 2,
                    got: joint.len(),
                });
            }
            Ok((state.0 + 1, state.1 + joint[0].0 + joint[1].0))
        }

        fn is_terminal(&self, state: &AddersState) -> bool {
            state.1 >= 4 || state.0 == 3
        }

        fn goal_values(&self, _state: &AddersState, _role: RoleIdx) -> Vec<u32> {
            vec![0]
        }
    }

    fn row(depth: u32, states: u64, terminal: u64, joint_moves: u64) -> PerftRow {
        PerftRow {
            depth,
            states,
            terminal,
            joint_moves,
        }
    }

    #[test]
    fn perft_dedupes_states_and_does_not_expand_terminal_ones() {
        // Depth 1: the nine joint moves give totals 0..=4, one state each; total 4 is terminal.
        // Depth 2: the four open states give totals 0..=7 (8 would need the terminal state to be
        // expanded), 4..=7 terminal. Depth 3: the step limit makes all eight states terminal.
        let rows = perft(&Adders::new(false), 4).unwrap();
        assert_eq!(
            rows,
            vec![
                row(0, 1, 0, 9),
                row(1, 5, 1, 36),
                row(2, 8, 4, 36),
                row(3, 8, 8, 0),
                row(4, 0, 0, 0),
            ]
        );
    }

    #[test]
    fn perft_to_depth_zero_counts_the_moves_of_the_initial_state() {
        assert_eq!(perft(&Adders::new(false), 0).unwrap(), vec![row(0, 1, 0, 9)]);
    }

    #[test]
    fn perft_reports_a_role_without_legal_moves() {
        // A total of 2 is first reached at depth 1.
        let err = perft(&Adders::new(true), 3).unwrap_err();
        assert_eq!(
            err,
            PerftError::NoLegalMove {
                role: "right".to_string(),
                depth: 1
            }
        );
        assert!(err.to_string().contains("role right has no legal move"));
    }

    #[test]
    fn joint_moves_are_enumerated_in_odometer_order() {
        let legal = vec![
            vec![MoveIdx(1), MoveIdx(2)],
            vec![MoveIdx(7)],
            vec![MoveIdx(3), MoveIdx(4)],
        ];
        let mut seen = Vec::new();
        for_each_joint_move::<()>(&legal, |joint| {
            seen.push(joint.iter().map(|mv| mv.0).collect::<Vec<_>>());
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![vec![1, 7, 3], vec![1, 7, 4], vec![2, 7, 3], vec![2, 7, 4]]
        );
    }

    #[test]
    fn a_golden_file_round_trips() {
        let text =
            "# Perft of a game.\n#\n# depth states terminal joint_moves\n0 1 0 9\n1 9 0 72\n2 72 0 504\n";
        let file = PerftFile::parse(text).unwrap();
        assert_eq!(
            file.header,
            vec!["Perft of a game.", "", "depth states terminal joint_moves"]
        );
        assert_eq!(
            file.rows,
            vec![row(0, 1, 0, 9), row(1, 9, 0, 72), row(2, 72, 0, 504)]
        );
        assert_eq!(file.max_depth(), 2);
        assert_eq!(file.to_string(), text);
    }

    #[test]
    fn a_golden_file_may_have_blank_lines_and_extra_spaces() {
        let file = PerftFile::parse("\n#no space\n\n  0   1 0  2 \n\n1 2 1 2\n").unwrap();
        assert_eq!(file.header, vec!["no space"]);
        assert_eq!(file.rows, vec![row(0, 1, 0, 2), row(1, 2, 1, 2)]);
        assert_eq!(file.to_string(), "# no space\n0 1 0 2\n1 2 1 2\n");
    }

    fn parse_error(text: &str) -> PerftFileError {
        PerftFile::parse(text).unwrap_err()
    }

    #[test]
    fn a_golden_file_with_a_bad_row_is_an_error_with_its_line() {
        let e = parse_error("# h\n0 1 0\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("4 numbers"), "{e}");

        let e = parse_error("0 1 0 x9\n");
        assert_eq!(e.line, 1);
        assert!(
            e.message
                .contains("joint_moves must be an unsigned integer, found `x9`"),
            "{e}"
        );

        let e = parse_error("0 -1 0 9\n");
        assert!(e.message.contains("states must be an unsigned integer"), "{e}");

        let e = parse_error("0 1 0 9\n2 9 0 72\n");
        assert_eq!(e.line, 2);
        assert!(
            e.message.contains("expected the row of depth 1, found depth 2"),
            "{e}"
        );

        let e = parse_error("1 1 0 9\n");
        assert!(e.message.contains("expected the row of depth 0"), "{e}");

        let e = parse_error("0 1 2 9\n");
        assert!(e.message.contains("2 terminal states out of only 1"), "{e}");

        let e = parse_error("0 1 0 9\n1 99999999999999999999 0 0\n");
        assert!(e.message.contains("states must be an unsigned integer"), "{e}");

        let e = parse_error("4294967296 1 0 9\n");
        assert!(e.message.contains("does not fit in 32 bits"), "{e}");
    }

    #[test]
    fn a_comment_after_the_rows_is_an_error() {
        let e = parse_error("# h\n0 1 0 9\n# late\n");
        assert_eq!(e.line, 3);
        assert!(e.message.contains("comment after the first row"), "{e}");
        assert_eq!(e.to_string(), format!("line 3: {}", e.message));
    }

    #[test]
    fn a_golden_file_without_rows_is_an_error() {
        let e = parse_error("# only a header\n");
        assert_eq!(e.line, 1);
        assert!(e.message.contains("no rows"), "{e}");
        assert!(parse_error("").message.contains("no rows"));
    }
}

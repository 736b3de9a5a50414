//! Reading the reference traces.
//!
//! A trace file (`.jsonl`) holds seeded random playouts of one game, written by an independent
//! prover: one JSON object per line, a `header` line opening each playout, one `step` line per
//! non-terminal state and an `end` line at the last state. [`read_trace`] reads a file into typed
//! [`TracePlayout`]s and checks that the lines fit together (consecutive step numbers, one entry
//! per role, every playout closed), so that a replay can trust the shape and only compare
//! contents. Every error names the file and the line.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A whole trace file: its playouts in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Where the trace was read from (or the name it was given).
    pub source: PathBuf,
    /// The playouts, each closed by its end line.
    pub playouts: Vec<TracePlayout>,
}

/// One playout: its header, every non-terminal state with the joint move played there, and the
/// state it ended in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracePlayout {
    /// The line that opened the playout.
    pub header: Header,
    /// The 1-based line number of the header, for messages.
    pub line: usize,
    /// The states before the last, in order; `steps[k].t == k`.
    pub steps: Vec<Step>,
    /// The last state.
    pub end: End,
}

/// The header line of a playout.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Header {
    /// The game's name (the file name of its `.kif` without extension).
    pub game: String,
    /// The roles in the order of the game's `role` facts.
    pub roles: Vec<String>,
    /// The seed the prover drew the playout's moves with.
    pub seed: u64,
    /// The number of the playout within its seed run.
    pub playout: u32,
}

/// A non-terminal state and the joint move played in it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Step {
    /// The number of joint moves played before this state.
    pub t: u32,
    /// The base facts that hold, in canonical KIF without `true`, byte-order sorted.
    pub state: Vec<String>,
    /// Whether the state is terminal (always false on a step line, checked on reading).
    pub terminal: bool,
    /// For each role, every goal value that holds, sorted ascending.
    pub goals: Vec<Vec<u32>>,
    /// For each role, every legal move, byte-order sorted.
    pub legal: Vec<Vec<String>>,
    /// For each role, the move it played.
    pub joint: Vec<String>,
}

/// The last state of a playout.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct End {
    /// The number of joint moves played in the playout.
    pub t: u32,
    /// The base facts that hold, byte-order sorted.
    pub state: Vec<String>,
    /// Whether the state is terminal; false only when the prover's step cap was hit.
    pub terminal: bool,
    /// For each role, every goal value that holds, sorted ascending.
    pub goals: Vec<Vec<u32>>,
    /// Whether the prover stopped at its step cap instead of a terminal state.
    pub capped: bool,
}

/// The three kinds of line, told apart by their `type` field.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Line {
    Header(Header),
    Step(Step),
    End(End),
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read at all.
    #[error("cannot read trace {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A line is not a valid trace line, or does not fit with the lines before it.
    #[error("{}:{line}: {message}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The 1-based line number; for a problem at the end of the file, the last line plus one.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

/// Reads and checks the trace file at `path`.
pub fn read_trace(path: &Path) -> Result<Trace, TraceError> {
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_trace(&text, path)
}

/// Parses and checks trace text; `source` is only used to name the text in errors.
pub fn parse_trace(text: &str, source: &Path) -> Result<Trace, TraceError> {
    let malformed = |line: usize, message: String| TraceError::Malformed {
        path: source.to_path_buf(),
        line,
        message,
    };
    let mut playouts = Vec::new();
    // The playout being read: its header with the header's line number, and its steps so far.
    let mut open: Option<(Header, usize, Vec<Step>)> = None;
    let mut last_line = 0;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        last_line = n;
        if raw.trim().is_empty() {
            continue;
        }
        let line: Line =
            serde_json::from_str(raw).map_err(|e| malformed(n, format!("not a trace line: {e}")))?;
        match line {
            Line::Header(header) => {
                if let Some((_, start, _)) = &open {
                    return Err(malformed(
                        n,
                        format!(
                            "a header line inside the playout opened on line {start}, which has no end line"
                        ),
                    ));
                }
                if header.roles.is_empty() {
                    return Err(malformed(n, "the header lists no roles".to_string()));
                }
                open = Some((header, n, Vec::new()));
            }
            Line::Step(step) => {
                let Some((header, _, steps)) = &mut open else {
                    return Err(malformed(
                        n,
                        "a step line outside a playout (no header before it)".to_string(),
                    ));
                };
                check_step(&step, header.roles.len(), steps.len()).map_err(|m| malformed(n, m))?;
                steps.push(step);
            }
            Line::End(end) => {
                let Some((header, start, steps)) = open.take() else {
                    return Err(malformed(
                        n,
                        "an end line outside a playout (no header before it)".to_string(),
                    ));
                };
                check_end(&end, header.roles.len(), steps.len()).map_err(|m| malformed(n, m))?;
                playouts.push(TracePlayout {
                    header,
                    line: start,
                    steps,
                    end,
                });
            }
        }
    }
    if let Some((_, start, _)) = open {
        return Err(malformed(
            last_line + 1,
            format!("the file ends inside the playout opened on line {start}, which has no end line"),
        ));
    }
    if playouts.is_empty() {
        return Err(malformed(
            last_line.max(1),
            "the trace holds no playout".to_string(),
        ));
    }
    Ok(Trace {
        source: source.to_path_buf(),
        playouts,
    })
}

/// Checks that a step line fits its playout: it is the next step, non-terminal, has one entry
/// per role, and each role played one of its legal moves.
fn check_step(step: &Step, roles: usize, expected_t: usize) -> Result<(), String> {
    if step.t as usize != expected_t {
        return Err(format!("step t={} where t={expected_t} was expected", step.t));
    }
    if step.terminal {
        return Err(
            "a step line with terminal=true (the terminal state belongs on the end line)".to_string(),
        );
    }
    check_per_role("goals", step.goals.len(), roles)?;
    check_per_role("legal", step.legal.len(), roles)?;
    check_per_role("joint", step.joint.len(), roles)?;
    for (r, (mv, legal)) in step.joint.iter().zip(&step.legal).enumerate() {
        if !legal.contains(mv) {
            return Err(format!(
                "joint move {mv} of role {r} is not among that role's legal moves"
            ));
        }
    }
    Ok(())
}

/// Checks that an end line closes its playout: its number follows the last step, it has one goal
/// list per role, and it is terminal unless capped.
fn check_end(end: &End, roles: usize, steps: usize) -> Result<(), String> {
    if end.t as usize != steps {
        return Err(format!("end t={} after {steps} steps", end.t));
    }
    if end.terminal == end.capped {
        return Err(format!(
            "an end line must be terminal or capped, exactly one of them (terminal={}, capped={})",
            end.terminal, end.capped
        ));
    }
    check_per_role("goals", end.goals.len(), roles)
}

fn check_per_role(field: &str, got: usize, roles: usize) -> Result<(), String> {
    if got == roles {
        Ok(())
    } else {
        Err(format!("{field} has {got} entries for {roles} roles"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"header","game":"g","roles":["a","b"],"seed":5,"playout":0}"#;
    const STEP0: &str = r#"{"type":"step","t":0,"state":["(p 1)"],"terminal":false,"goals":[[],[]],"legal":[["x","y"],["noop"]],"joint":["y","noop"]}"#;
    const END1: &str = r#"{"type":"end","t":1,"state":["(p 2)"],"terminal":true,"goals":[[100],[0]],"capped":false,"wall_ms":1.5}"#;

    fn parse(lines: &[&str]) -> Result<Trace, TraceError> {
        parse_trace(&lines.join("\n"), Path::new("t.jsonl"))
    }

    fn error_at(lines: &[&str]) -> (usize, String) {
        match parse(lines) {
            Err(TraceError::Malformed { line, message, .. }) => (line, message),
            other => panic!("expected a malformed-trace error, got {other:?}"),
        }
    }

    #[test]
    fn reads_a_well_formed_playout() {
        let trace = parse(&[HEADER, STEP0, END1, ""]).unwrap();
        assert_eq!(trace.playouts.len(), 1);
        let p = &trace.playouts[0];
        assert_eq!(p.header.roles, ["a", "b"]);
        assert_eq!(p.header.seed, 5);
        assert_eq!(p.line, 1);
        assert_eq!(p.steps[0].joint, ["y", "noop"]);
        assert_eq!(p.end.goals, [vec![100], vec![0]]);
        assert!(p.end.terminal);
    }

    #[test]
    fn names_file_and_line_of_bad_json() {
        let err = parse(&[HEADER, "{not json", END1]).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("t.jsonl:2: not a trace line"), "{text}");
    }

    #[test]
    fn rejects_lines_that_do_not_fit_together() {
        let (line, msg) = error_at(&[STEP0]);
        assert_eq!(line, 1);
        assert!(msg.contains("no header"), "{msg}");

        let (line, msg) = error_at(&[HEADER, &STEP0.replace("\"t\":0", "\"t\":3"), END1]);
        assert_eq!(line, 2);
        assert!(msg.contains("t=3 where t=0"), "{msg}");

        let (line, msg) = error_at(&[
            HEADER,
            &STEP0.replace("[\"y\",\"noop\"]", "[\"z\",\"noop\"]"),
            END1,
        ]);
        assert_eq!(line, 2);
        assert!(msg.contains("joint move z"), "{msg}");

        let (line, msg) = error_at(&[HEADER, &STEP0.replace("[[],[]]", "[[]]"), END1]);
        assert_eq!(line, 2);
        assert!(msg.contains("goals has 1 entries for 2 roles"), "{msg}");

        let (line, msg) = error_at(&[HEADER, STEP0]);
        assert_eq!(line, 3);
        assert!(msg.contains("no end line"), "{msg}");

        let (line, msg) = error_at(&[HEADER, STEP0, HEADER]);
        assert_eq!(line, 3);
        assert!(msg.contains("opened on line 1"), "{msg}");

        let (line, msg) = error_at(&[HEADER, STEP0, &END1.replace("\"t\":1", "\"t\":4")]);
        assert_eq!(line, 3);
        assert!(msg.contains("end t=4 after 1 steps"), "{msg}");

        let (_, msg) = error_at(&[r#"{"type":"middle"}"#]);
        assert!(msg.contains("unknown variant"), "{msg}");

        let (_, msg) = error_at(&["", "  "]);
        assert!(msg.contains("no playout"), "{msg}");
    }

    #[test]
    fn a_missing_file_is_an_io_error_naming_it() {
        let err = read_trace(Path::new("/nonexistent/dir/x.jsonl")).unwrap_err();
        assert!(matches!(err, TraceError::Io { .. }));
        assert!(err.to_string().contains("/nonexistent/dir/x.jsonl"));
    }
}

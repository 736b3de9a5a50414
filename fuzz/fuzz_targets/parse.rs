//! Feeds arbitrary text to the GDL front end. Whatever the input, parsing must not panic, every
//! error and warning must point inside the text, and a description that passes must print to a
//! canonical text that passes again and prints the same.

#![no_main]

use libfuzzer_sys::fuzz_target;
use propjet::gdl::{self, Description, ParseError};

/// The lines of a text, split at "\n", "\r\n" and a lone "\r" independently of the front end.
fn lines(src: &str) -> Vec<&str> {
    src.split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
        .collect()
}

fn assert_inside(e: &ParseError, src: &str) {
    let ls = lines(src);
    let (line, col) = (e.span.line as usize, e.span.col as usize);
    assert!(line >= 1 && line <= ls.len(), "line {line} of {}: {e}", ls.len());
    let width = ls[line - 1].chars().count();
    assert!(col >= 1 && col <= width + 1, "column {col} of {width}: {e}");
    assert_eq!(e.source_line, ls[line - 1], "wrong source line: {e}");
}

fn canonical_text(desc: &Description) -> String {
    let rules: Vec<String> = desc.rules.iter().map(|r| desc.rule_text(r)).collect();
    rules.join("\n")
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    match gdl::parse(src) {
        Err(e) => assert_inside(&e, src),
        Ok(desc) => {
            for w in gdl::warnings(&desc, src) {
                assert_inside(&w, src);
            }
            let text = canonical_text(&desc);
            match gdl::parse(&text) {
                Ok(again) => assert_eq!(canonical_text(&again), text, "printing is not stable"),
                Err(e) => panic!("the canonical text {text:?} of a valid description fails:\n{e}"),
            }
        }
    }
});

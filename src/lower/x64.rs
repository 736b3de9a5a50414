//! The direct x86-64 code generator: each gate written as machine code from a fixed template,
//! without an intermediate representation (see `doc/native.md`).
//!
//! The functions have the same contract as the Cranelift ones: `void f(uint64_t *values)` in the
//! System V convention, the value array in `rdi`. They use only caller-saved registers (`rax`,
//! `rcx`, `rdx`, `rsi`, `r8`–`r11` and `xmm0`–`xmm15`), no stack, and every memory access is
//! `[rdi + disp]` for the slot of an operand or of the gate, so they need no prologue and end
//! in `ret`.
//!
//! A gate with positive operands `P` and negated operands `N` is `AND(P) & !OR(N)` (AND gate) or
//! `OR(P) | !AND(N)` (OR gate), as in the Cranelift lowering. Each group is folded into an
//! accumulator register with the operands as memory operands (`and r8, [rdi + d]`), one
//! instruction per operand; long groups use two or four accumulators, so that independent
//! chains of operations run side by side instead of one long chain. Each gate's result is
//! computed in the next register of a small ring (4 general registers, 11 vector ones) and
//! stored; a gate soon after that reads it takes the register instead of memory, which saves
//! the load, the store-to-load forwarding delay and code bytes. The 128-lane code does the same
//! with SSE2 on `xmm` registers (`pand`, `por`, `pandn`), which every x86-64 processor has; its
//! memory operands need 16-byte alignment, which the runtime checks.
//!
//! The generator is a few dozen bytes of encoding logic per instruction form, so it writes code
//! at memory speed: lowering time becomes negligible beside the rest of the compiler, where
//! Cranelift spends microseconds per gate.

use propjet_runtime::{Lit, Op, Program, Width};

/// A register number as the instruction encoding has it: 0–15, `rax`..`r15` or `xmm0`..`xmm15`.
type Reg = u8;

/// The register holding the value array, the first argument in the System V convention.
const RDI: Reg = 7;

/// Where an operand is read from.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Src {
    /// `[rdi + disp]`.
    Mem(i32),
    /// A register.
    Reg(Reg),
}

/// A bitwise operation that combines an accumulator with an operand.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Join {
    And,
    Or,
}

/// The registers one width uses. All are caller-saved in the System V convention, so the
/// functions save nothing.
struct Regs {
    /// Accumulates the negated operands of a gate that has both signs.
    neg: Reg,
    /// Further accumulators for long groups.
    extra: [Reg; 3],
    /// Each gate's result is computed in the next register of this ring and stays there until
    /// the ring comes round again, so that gates reading it soon after use the register.
    ring: &'static [Reg],
}

/// `rax`, then `rcx`, `rdx`, `rsi`; results in `r8`–`r11`.
const REGS64: Regs = Regs {
    neg: 0,
    extra: [1, 2, 6],
    ring: &[8, 9, 10, 11],
};

/// `xmm0`, then `xmm1`–`xmm3`; results in `xmm4`–`xmm14`; [`ONES`] in `xmm15`.
const REGS128: Regs = Regs {
    neg: 0,
    extra: [1, 2, 3],
    ring: &[4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
};

/// Holds all ones in the 128-lane code, set once at the start of the function.
const ONES: Reg = 15;

const PXOR: u8 = 0xEF;
const PANDN: u8 = 0xDF;
const PCMPEQD: u8 = 0x76;

/// A buffer of machine code being written for one width.
struct Asm {
    code: Vec<u8>,
    width: Width,
}

impl Asm {
    fn new(width: Width, capacity: usize) -> Asm {
        Asm {
            code: Vec::with_capacity(capacity),
            width,
        }
    }

    /// One instruction with a register operand `reg` (or an opcode extension) and a register
    /// or memory operand `src`: `REX.W opcode` for 64-bit integer instructions,
    /// `66 [REX] 0F opcode` for SSE2 ones.
    fn inst(&mut self, opcode: u8, reg: Reg, src: Src) {
        debug_assert!(reg < 16);
        let rm = match src {
            Src::Mem(_) => RDI,
            Src::Reg(r) => r,
        };
        let rex = (reg >> 3) << 2 | rm >> 3;
        match self.width {
            Width::X64 => self.code.extend_from_slice(&[0x48 | rex, opcode]),
            Width::X128 => {
                self.code.push(0x66);
                if rex != 0 {
                    self.code.push(0x40 | rex);
                }
                self.code.extend_from_slice(&[0x0F, opcode]);
            }
        }
        let (reg, rm) = (reg & 7, rm & 7);
        match src {
            // mod 00 with rm = rdi: no displacement (rdi is neither rsp nor rbp, so no SIB
            // byte and no RIP-relative meaning).
            Src::Mem(0) => self.code.push(reg << 3 | rm),
            Src::Mem(disp) => match i8::try_from(disp) {
                Ok(d) => self.code.extend_from_slice(&[0x40 | reg << 3 | rm, d as u8]),
                Err(_) => {
                    self.code.push(0x80 | reg << 3 | rm);
                    self.code.extend_from_slice(&disp.to_le_bytes());
                }
            },
            Src::Reg(_) => self.code.push(0xC0 | reg << 3 | rm),
        }
    }

    /// `dst = src`: `mov` or `movdqa`.
    fn copy(&mut self, dst: Reg, src: Src) {
        let opcode = match self.width {
            Width::X64 => 0x8B,
            Width::X128 => 0x6F,
        };
        self.inst(opcode, dst, src);
    }

    /// `dst = dst & src` or `dst = dst | src`: `and`/`or` or `pand`/`por`.
    fn join(&mut self, join: Join, dst: Reg, src: Src) {
        let opcode = match (self.width, join) {
            (Width::X64, Join::And) => 0x23,
            (Width::X64, Join::Or) => 0x0B,
            (Width::X128, Join::And) => 0xDB,
            (Width::X128, Join::Or) => 0xEB,
        };
        self.inst(opcode, dst, src);
    }

    /// `r = !r`: `not`, or `pxor` with all ones.
    fn negate(&mut self, r: Reg) {
        match self.width {
            Width::X64 => self.inst(0xF7, 2, Src::Reg(r)),
            Width::X128 => self.inst(PXOR, r, Src::Reg(ONES)),
        }
    }

    /// `[rdi + disp] = r`: `mov` or `movdqa`.
    fn store(&mut self, r: Reg, disp: i32) {
        let opcode = match self.width {
            Width::X64 => 0x89,
            Width::X128 => 0x7F,
        };
        self.inst(opcode, r, Src::Mem(disp));
    }

    /// `r = 0` or `r = !0`.
    fn constant(&mut self, r: Reg, ones: bool) {
        match (self.width, ones) {
            // xor r, r.
            (Width::X64, false) => self.inst(0x33, r, Src::Reg(r)),
            // mov r, -1 (a sign-extended 32-bit immediate).
            (Width::X64, true) => {
                self.inst(0xC7, 0, Src::Reg(r));
                self.code.extend_from_slice(&(-1i32).to_le_bytes());
            }
            (Width::X128, false) => self.inst(PXOR, r, Src::Reg(r)),
            (Width::X128, true) => self.inst(PCMPEQD, r, Src::Reg(r)),
        }
    }

    fn ret(&mut self) {
        self.code.push(0xC3);
    }
}

/// Whether the direct generator can address every slot of `program` at `width`: the byte offset
/// of the last slot must fit in a signed 32-bit displacement.
pub(super) fn fits(program: &Program, width: Width) -> bool {
    let bytes = program.num_slots() as u64 * width.words() as u64 * 8;
    bytes <= i32::MAX as u64
}

/// The byte offset of `slot` in the value array; [`fits`] checked that it fits.
fn disp(slot: u32, width: Width) -> i32 {
    (u64::from(slot) * width.words() as u64 * 8) as i32
}

/// How many accumulators fold a group of `n` operands: one for short groups; for long ones,
/// two or four independent chains, so that the processor runs them side by side instead of
/// waiting on one chain of dependent operations.
fn accumulators(n: usize) -> usize {
    match n {
        0..8 => 1,
        8..16 => 2,
        _ => 4,
    }
}

/// Folds `sources` (not empty) into `acc` with `join`, using `extra` for the further
/// accumulators of long groups.
fn fold(a: &mut Asm, join: Join, sources: &[Src], acc: Reg, extra: &[Reg; 3]) {
    let k = accumulators(sources.len());
    let accs = [acc, extra[0], extra[1], extra[2]];
    for (i, &src) in sources[..k].iter().enumerate() {
        a.copy(accs[i], src);
    }
    for (i, &src) in sources[k..].iter().enumerate() {
        a.join(join, accs[i % k], src);
    }
    if k == 4 {
        a.join(join, accs[0], Src::Reg(accs[1]));
        a.join(join, accs[2], Src::Reg(accs[3]));
        a.join(join, accs[0], Src::Reg(accs[2]));
    } else if k == 2 {
        a.join(join, accs[0], Src::Reg(accs[1]));
    }
}

/// The machine code of a function computing `gates` of `program` in order at `width`.
/// [`fits`] must hold for the program and width.
pub(super) fn emit(program: &Program, gates: &[u32], width: Width) -> Vec<u8> {
    let regs = match width {
        Width::X64 => &REGS64,
        Width::X128 => &REGS128,
    };
    let mut a = Asm::new(width, gates.len() * 24 + 16);
    if width == Width::X128 {
        a.constant(ONES, true);
    }
    // The slot whose value each ring register holds, if any.
    let mut held: Vec<Option<u32>> = vec![None; regs.ring.len()];
    let mut next_ring = 0;
    let (mut positive, mut negated) = (Vec::new(), Vec::new());
    for &g in gates {
        let g = g as usize;
        let gate = &program.gates[g];
        let target_index = next_ring;
        next_ring = (next_ring + 1) % regs.ring.len();
        let target = regs.ring[target_index];
        // The target is about to be overwritten, so operands it holds are read from memory,
        // where every gate's value was stored.
        held[target_index] = None;
        let source = |lit: &Lit| -> Src {
            match held.iter().position(|&h| h == Some(lit.slot())) {
                Some(i) => Src::Reg(regs.ring[i]),
                None => Src::Mem(disp(lit.slot(), width)),
            }
        };
        positive.clear();
        negated.clear();
        // The program validated, so every gate's operand run is in bounds.
        for lit in program.gate_operands(g).unwrap_or(&[]) {
            if lit.is_negated() {
                negated.push(source(lit));
            } else {
                positive.push(source(lit));
            }
        }
        // With `P` the positive and `N` the negated operands, an AND gate is
        // `AND(P) & !OR(N)` and an OR gate `OR(P) | !AND(N)` (De Morgan): within the negated
        // group the dual operation joins.
        let (join, dual) = match gate.op {
            Op::And => (Join::And, Join::Or),
            Op::Or => (Join::Or, Join::And),
        };
        match (positive.is_empty(), negated.is_empty()) {
            // AND() is true and OR() false.
            (true, true) => a.constant(target, gate.op == Op::And),
            (false, true) => fold(&mut a, join, &positive, target, &regs.extra),
            (true, false) => {
                fold(&mut a, dual, &negated, target, &regs.extra);
                a.negate(target);
            }
            (false, false) if width == Width::X128 && gate.op == Op::And => {
                // `pandn` computes `!dst & src` in one instruction.
                fold(&mut a, dual, &negated, target, &regs.extra);
                fold(&mut a, join, &positive, regs.neg, &regs.extra);
                a.inst(PANDN, target, Src::Reg(regs.neg));
            }
            (false, false) => {
                fold(&mut a, join, &positive, target, &regs.extra);
                fold(&mut a, dual, &negated, regs.neg, &regs.extra);
                a.negate(regs.neg);
                a.join(join, target, Src::Reg(regs.neg));
            }
        }
        let out = program.gate_slot(g);
        a.store(target, disp(out, width));
        held[target_index] = Some(out);
    }
    a.ret();
    a.code
}

#[cfg(test)]
mod tests {
    use super::*;

    // The expected bytes are the encodings of the Intel SDM's opcode tables (REX.W 8B /r,
    // REX.W 0B /r, 66 REX 0F DB /r, ...), each as GNU objdump decodes it in the comment.

    #[test]
    fn integer_forms_with_low_and_extended_registers() {
        let mut a = Asm::new(Width::X64, 0);
        a.copy(8, Src::Mem(0x750));
        a.join(Join::Or, 0, Src::Mem(0x758));
        a.join(Join::And, 1, Src::Mem(8));
        a.copy(6, Src::Mem(0));
        a.store(8, 0x1938);
        a.negate(0);
        a.join(Join::And, 8, Src::Reg(0));
        a.join(Join::Or, 0, Src::Reg(9));
        a.constant(11, true);
        a.constant(10, false);
        a.copy(1, Src::Reg(10));
        a.copy(0, Src::Mem(120));
        a.copy(0, Src::Mem(128));
        a.ret();
        #[rustfmt::skip]
        let expected = [
            0x4C, 0x8B, 0x87, 0x50, 0x07, 0x00, 0x00, // mov r8, [rdi+0x750]
            0x48, 0x0B, 0x87, 0x58, 0x07, 0x00, 0x00, // or rax, [rdi+0x758]
            0x48, 0x23, 0x4F, 0x08, // and rcx, [rdi+0x8]
            0x48, 0x8B, 0x37, // mov rsi, [rdi]
            0x4C, 0x89, 0x87, 0x38, 0x19, 0x00, 0x00, // mov [rdi+0x1938], r8
            0x48, 0xF7, 0xD0, // not rax
            0x4C, 0x23, 0xC0, // and r8, rax
            0x49, 0x0B, 0xC1, // or rax, r9
            0x49, 0xC7, 0xC3, 0xFF, 0xFF, 0xFF, 0xFF, // mov r11, -1
            0x4D, 0x33, 0xD2, // xor r10, r10
            0x49, 0x8B, 0xCA, // mov rcx, r10
            0x48, 0x8B, 0x47, 0x78, // mov rax, [rdi+0x78]: a signed 8-bit displacement
            0x48, 0x8B, 0x87, 0x80, 0x00, 0x00, 0x00, // mov rax, [rdi+0x80]: 128 needs 32 bits
            0xC3, // ret
        ];
        assert_eq!(a.code, expected);
    }

    #[test]
    fn sse_forms_with_low_and_extended_registers() {
        let mut a = Asm::new(Width::X128, 0);
        a.constant(ONES, true);
        a.copy(4, Src::Mem(0x1030));
        a.join(Join::And, 12, Src::Mem(0x20));
        a.join(Join::Or, 0, Src::Reg(14));
        a.inst(PANDN, 9, Src::Reg(0));
        a.negate(3);
        a.store(13, 0x3270);
        a.constant(2, false);
        #[rustfmt::skip]
        let expected = [
            0x66, 0x45, 0x0F, 0x76, 0xFF, // pcmpeqd xmm15, xmm15
            0x66, 0x0F, 0x6F, 0xA7, 0x30, 0x10, 0x00, 0x00, // movdqa xmm4, [rdi+0x1030]
            0x66, 0x44, 0x0F, 0xDB, 0x67, 0x20, // pand xmm12, [rdi+0x20]
            0x66, 0x41, 0x0F, 0xEB, 0xC6, // por xmm0, xmm14
            0x66, 0x44, 0x0F, 0xDF, 0xC8, // pandn xmm9, xmm0
            0x66, 0x41, 0x0F, 0xEF, 0xDF, // pxor xmm3, xmm15
            0x66, 0x44, 0x0F, 0x7F, 0xAF, 0x70, 0x32, 0x00, 0x00, // movdqa [rdi+0x3270], xmm13
            0x66, 0x0F, 0xEF, 0xD2, // pxor xmm2, xmm2
        ];
        assert_eq!(a.code, expected);
    }

    #[test]
    fn long_groups_fold_into_independent_accumulators() {
        assert_eq!(accumulators(1), 1);
        assert_eq!(accumulators(7), 1);
        assert_eq!(accumulators(8), 2);
        assert_eq!(accumulators(16), 4);
        // Sixteen operands: four loads, twelve joins round the four chains, three to combine.
        let sources: Vec<Src> = (0..16).map(|i| Src::Mem(8 * i)).collect();
        let mut a = Asm::new(Width::X64, 0);
        fold(&mut a, Join::Or, &sources, 8, &REGS64.extra);
        let mut b = Asm::new(Width::X64, 0);
        for (i, &acc) in [8, 1, 2, 6].iter().enumerate() {
            b.copy(acc, sources[i]);
        }
        for (i, &src) in sources[4..].iter().enumerate() {
            b.join(Join::Or, [8, 1, 2, 6][i % 4], src);
        }
        b.join(Join::Or, 8, Src::Reg(1));
        b.join(Join::Or, 2, Src::Reg(6));
        b.join(Join::Or, 8, Src::Reg(2));
        assert_eq!(a.code, b.code);
    }
}

//! The direct x86-64 code generator: each gate written as machine code from a fixed template,
//! without an intermediate representation (see `doc/native.md`).
//!
//! The functions have the same contract as the Cranelift ones: `void f(uint64_t *values)` in the
//! System V convention, the value array in `rdi`. They use only caller-saved registers (`rax`,
//! `rcx`, `rdx`, `rsi` and `xmm0`–`xmm7`), no stack, and every memory access is `[rdi + disp]`
//! for the slot of an operand or of the gate, so they need no prologue and end in `ret`.
//!
//! A gate with positive operands `P` and negated operands `N` is `AND(P) & !OR(N)` (AND gate) or
//! `OR(P) | !AND(N)` (OR gate), as in the Cranelift lowering. Each group is folded into an
//! accumulator register with the operands as memory operands (`and rax, [rdi + d]`), one
//! instruction per operand; groups of many operands use two accumulators, so that two chains of
//! dependent operations run side by side instead of one twice as long. The 128-lane code does
//! the same with SSE2 on `xmm` registers (`pand`, `por`, `pandn`), which every x86-64 processor
//! has; its memory operands need 16-byte alignment, which the runtime checks.
//!
//! The generator is a few dozen bytes of encoding logic per instruction form, so it writes code
//! at memory speed: lowering time becomes negligible beside the rest of the compiler, where
//! Cranelift spends microseconds per gate.

use propjet_runtime::{Lit, Op, Program, Width};

/// A general-purpose register, by its encoding (only the eight that need no REX extension).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
struct Gpr(u8);

const RAX: Gpr = Gpr(0);
const RCX: Gpr = Gpr(1);
const RDX: Gpr = Gpr(2);
const RSI: Gpr = Gpr(6);
/// The register holding the value array, the first argument in the System V convention.
const RDI: u8 = 7;

/// An SSE register, by its encoding (`xmm0`–`xmm7`, which need no REX prefix).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
struct Xmm(u8);

/// Holds all ones in the 128-lane code, set once at the start of the function.
const ONES: Xmm = Xmm(7);

/// A bitwise operation that combines an accumulator with an operand.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Join {
    And,
    Or,
}

/// A buffer of machine code being written.
#[derive(Default)]
struct Asm {
    code: Vec<u8>,
}

impl Asm {
    /// A ModRM byte (and displacement) addressing `[rdi + disp]` with `reg` in the reg field.
    fn mem(&mut self, reg: u8, disp: i32) {
        debug_assert!(reg < 8);
        if disp == 0 {
            // mod 00 with rm = rdi: no displacement (rdi is neither rsp nor rbp, so no SIB byte
            // and no RIP-relative meaning).
            self.code.push(reg << 3 | RDI);
        } else if let Ok(d) = i8::try_from(disp) {
            self.code.push(0x40 | reg << 3 | RDI);
            self.code.push(d as u8);
        } else {
            self.code.push(0x80 | reg << 3 | RDI);
            self.code.extend_from_slice(&disp.to_le_bytes());
        }
    }

    /// A ModRM byte for two registers.
    fn regs(&mut self, reg: u8, rm: u8) {
        debug_assert!(reg < 8 && rm < 8);
        self.code.push(0xC0 | reg << 3 | rm);
    }

    /// `mov r, [rdi + disp]` (64-bit).
    fn load(&mut self, r: Gpr, disp: i32) {
        self.code.extend_from_slice(&[0x48, 0x8B]);
        self.mem(r.0, disp);
    }

    /// `and r, [rdi + disp]` or `or r, [rdi + disp]` (64-bit).
    fn join_mem(&mut self, join: Join, r: Gpr, disp: i32) {
        let opcode = match join {
            Join::And => 0x23,
            Join::Or => 0x0B,
        };
        self.code.extend_from_slice(&[0x48, opcode]);
        self.mem(r.0, disp);
    }

    /// `and dst, src` or `or dst, src` (64-bit).
    fn join_reg(&mut self, join: Join, dst: Gpr, src: Gpr) {
        let opcode = match join {
            Join::And => 0x23,
            Join::Or => 0x0B,
        };
        self.code.extend_from_slice(&[0x48, opcode]);
        self.regs(dst.0, src.0);
    }

    /// `not r` (64-bit).
    fn not(&mut self, r: Gpr) {
        self.code.extend_from_slice(&[0x48, 0xF7]);
        self.regs(2, r.0);
    }

    /// `mov [rdi + disp], r` (64-bit).
    fn store(&mut self, r: Gpr, disp: i32) {
        self.code.extend_from_slice(&[0x48, 0x89]);
        self.mem(r.0, disp);
    }

    /// `r = 0` (`xor r32, r32`, which clears the whole register) or `r = !0` (`mov r64, -1`,
    /// sign-extended).
    fn constant(&mut self, r: Gpr, ones: bool) {
        if ones {
            self.code.extend_from_slice(&[0x48, 0xC7]);
            self.regs(0, r.0);
            self.code.extend_from_slice(&(-1i32).to_le_bytes());
        } else {
            self.code.push(0x31);
            self.regs(r.0, r.0);
        }
    }

    /// An SSE2 instruction `66 0F opcode` with a memory operand `[rdi + disp]`.
    fn sse_mem(&mut self, opcode: u8, x: Xmm, disp: i32) {
        self.code.extend_from_slice(&[0x66, 0x0F, opcode]);
        self.mem(x.0, disp);
    }

    /// An SSE2 instruction `66 0F opcode` on two registers.
    fn sse_regs(&mut self, opcode: u8, dst: Xmm, src: Xmm) {
        self.code.extend_from_slice(&[0x66, 0x0F, opcode]);
        self.regs(dst.0, src.0);
    }

    /// `movdqa x, [rdi + disp]`.
    fn vload(&mut self, x: Xmm, disp: i32) {
        self.sse_mem(0x6F, x, disp);
    }

    /// `movdqa [rdi + disp], x`.
    fn vstore(&mut self, x: Xmm, disp: i32) {
        self.sse_mem(0x7F, x, disp);
    }

    /// `pand x, [rdi + disp]` or `por x, [rdi + disp]`.
    fn vjoin_mem(&mut self, join: Join, x: Xmm, disp: i32) {
        self.sse_mem(vjoin_opcode(join), x, disp);
    }

    /// `pand dst, src` or `por dst, src`.
    fn vjoin_reg(&mut self, join: Join, dst: Xmm, src: Xmm) {
        self.sse_regs(vjoin_opcode(join), dst, src);
    }

    fn ret(&mut self) {
        self.code.push(0xC3);
    }
}

fn vjoin_opcode(join: Join) -> u8 {
    match join {
        Join::And => 0xDB,
        Join::Or => 0xEB,
    }
}

const PXOR: u8 = 0xEF;
const PANDN: u8 = 0xDF;
const PCMPEQD: u8 = 0x76;

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

/// Groups with at least this many operands are folded into two accumulators.
const SPLIT: usize = 8;

/// Folds the operand slots of one group into `acc` (and `spare`, for long groups), joined by
/// `join`, and leaves the result in `acc`. The group is not empty.
fn fold64(a: &mut Asm, join: Join, slots: &[u32], acc: Gpr, spare: Gpr) {
    let d = |s: u32| disp(s, Width::X64);
    a.load(acc, d(slots[0]));
    if slots.len() < SPLIT {
        for &s in &slots[1..] {
            a.join_mem(join, acc, d(s));
        }
        return;
    }
    a.load(spare, d(slots[1]));
    for (i, &s) in slots[2..].iter().enumerate() {
        a.join_mem(join, if i % 2 == 0 { acc } else { spare }, d(s));
    }
    a.join_reg(join, acc, spare);
}

/// The 128-lane [`fold64`].
fn fold128(a: &mut Asm, join: Join, slots: &[u32], acc: Xmm, spare: Xmm) {
    let d = |s: u32| disp(s, Width::X128);
    a.vload(acc, d(slots[0]));
    if slots.len() < SPLIT {
        for &s in &slots[1..] {
            a.vjoin_mem(join, acc, d(s));
        }
        return;
    }
    a.vload(spare, d(slots[1]));
    for (i, &s) in slots[2..].iter().enumerate() {
        a.vjoin_mem(join, if i % 2 == 0 { acc } else { spare }, d(s));
    }
    a.vjoin_reg(join, acc, spare);
}

/// The operand slots of a gate split by sign: the positive ones and the negated ones.
fn split(operands: &[Lit], positive: &mut Vec<u32>, negated: &mut Vec<u32>) {
    positive.clear();
    negated.clear();
    for lit in operands {
        if lit.is_negated() {
            negated.push(lit.slot());
        } else {
            positive.push(lit.slot());
        }
    }
}

/// The machine code of a function computing `gates` of `program` in order at `width`.
/// [`fits`] must hold for the program and width.
pub(super) fn emit(program: &Program, gates: &[u32], width: Width) -> Vec<u8> {
    let mut a = Asm {
        code: Vec::with_capacity(gates.len() * 24 + 16),
    };
    if width == Width::X128 {
        a.sse_regs(PCMPEQD, ONES, ONES);
    }
    let (mut positive, mut negated) = (Vec::new(), Vec::new());
    for &g in gates {
        let g = g as usize;
        let gate = &program.gates[g];
        // The program validated, so every gate's operand run is in bounds.
        split(
            program.gate_operands(g).unwrap_or(&[]),
            &mut positive,
            &mut negated,
        );
        // Within the positive group the gate's own operation joins; within the negated group,
        // the dual one (De Morgan).
        let (join, dual) = match gate.op {
            Op::And => (Join::And, Join::Or),
            Op::Or => (Join::Or, Join::And),
        };
        let out = program.gate_slot(g);
        match width {
            Width::X64 => {
                let result = match (positive.is_empty(), negated.is_empty()) {
                    (true, true) => {
                        a.constant(RAX, gate.op == Op::And);
                        RAX
                    }
                    (false, true) => {
                        fold64(&mut a, join, &positive, RAX, RDX);
                        RAX
                    }
                    (true, false) => {
                        fold64(&mut a, dual, &negated, RCX, RSI);
                        a.not(RCX);
                        RCX
                    }
                    (false, false) => {
                        fold64(&mut a, join, &positive, RAX, RDX);
                        fold64(&mut a, dual, &negated, RCX, RSI);
                        a.not(RCX);
                        a.join_reg(join, RAX, RCX);
                        RAX
                    }
                };
                a.store(result, disp(out, width));
            }
            Width::X128 => {
                let (p, n, p2, n2) = (Xmm(0), Xmm(1), Xmm(2), Xmm(3));
                let result = match (positive.is_empty(), negated.is_empty()) {
                    (true, true) => {
                        if gate.op == Op::And {
                            a.sse_regs(PCMPEQD, p, p);
                        } else {
                            a.sse_regs(PXOR, p, p);
                        }
                        p
                    }
                    (false, true) => {
                        fold128(&mut a, join, &positive, p, p2);
                        p
                    }
                    (true, false) => {
                        fold128(&mut a, dual, &negated, n, n2);
                        a.sse_regs(PXOR, n, ONES);
                        n
                    }
                    (false, false) => {
                        fold128(&mut a, join, &positive, p, p2);
                        fold128(&mut a, dual, &negated, n, n2);
                        match gate.op {
                            // n = !n & p.
                            Op::And => {
                                a.sse_regs(PANDN, n, p);
                                n
                            }
                            Op::Or => {
                                a.sse_regs(PXOR, n, ONES);
                                a.vjoin_reg(Join::Or, p, n);
                                p
                            }
                        }
                    }
                };
                a.vstore(result, disp(out, width));
            }
        }
    }
    a.ret();
    a.code
}

#[cfg(test)]
mod tests {
    use super::*;

    // The expected bytes below are the encodings given by the Intel SDM's opcode tables
    // (REX.W 8B /r, REX.W 0B /r, 66 0F DB /r, ...), as GNU objdump decodes them.

    #[test]
    fn loads_and_joins_address_rdi_with_the_shortest_displacement() {
        let mut a = Asm::default();
        a.load(RAX, 0x750);
        a.join_mem(Join::Or, RAX, 0x758);
        a.join_mem(Join::And, RCX, 8);
        a.load(RSI, 0);
        a.store(RAX, 0x1938);
        assert_eq!(
            a.code,
            [
                0x48, 0x8B, 0x87, 0x50, 0x07, 0x00, 0x00, // mov rax, [rdi+0x750]
                0x48, 0x0B, 0x87, 0x58, 0x07, 0x00, 0x00, // or rax, [rdi+0x758]
                0x48, 0x23, 0x4F, 0x08, // and rcx, [rdi+8]
                0x48, 0x8B, 0x37, // mov rsi, [rdi]
                0x48, 0x89, 0x87, 0x38, 0x19, 0x00, 0x00, // mov [rdi+0x1938], rax
            ]
        );
    }

    #[test]
    fn register_forms_and_constants() {
        let mut a = Asm::default();
        a.not(RCX);
        a.join_reg(Join::And, RAX, RCX);
        a.join_reg(Join::Or, RAX, RDX);
        a.constant(RAX, true);
        a.constant(RAX, false);
        a.ret();
        assert_eq!(
            a.code,
            [
                0x48, 0xF7, 0xD1, // not rcx
                0x48, 0x23, 0xC1, // and rax, rcx
                0x48, 0x0B, 0xC2, // or rax, rdx
                0x48, 0xC7, 0xC0, 0xFF, 0xFF, 0xFF, 0xFF, // mov rax, -1
                0x31, 0xC0, // xor eax, eax
                0xC3, // ret
            ]
        );
    }

    #[test]
    fn sse_forms() {
        let mut a = Asm::default();
        a.vload(Xmm(0), 0x1030);
        a.vjoin_mem(Join::And, Xmm(0), 0x20);
        a.vjoin_mem(Join::Or, Xmm(2), 0x1380);
        a.sse_regs(PANDN, Xmm(1), Xmm(0));
        a.sse_regs(PXOR, Xmm(1), ONES);
        a.sse_regs(PCMPEQD, ONES, ONES);
        a.vstore(Xmm(1), 0x3270);
        assert_eq!(
            a.code,
            [
                0x66, 0x0F, 0x6F, 0x87, 0x30, 0x10, 0x00, 0x00, // movdqa xmm0, [rdi+0x1030]
                0x66, 0x0F, 0xDB, 0x47, 0x20, // pand xmm0, [rdi+0x20]
                0x66, 0x0F, 0xEB, 0x97, 0x80, 0x13, 0x00, 0x00, // por xmm2, [rdi+0x1380]
                0x66, 0x0F, 0xDF, 0xC8, // pandn xmm1, xmm0
                0x66, 0x0F, 0xEF, 0xCF, // pxor xmm1, xmm7
                0x66, 0x0F, 0x76, 0xFF, // pcmpeqd xmm7, xmm7
                0x66, 0x0F, 0x7F, 0x8F, 0x70, 0x32, 0x00, 0x00, // movdqa [rdi+0x3270], xmm1
            ]
        );
    }

    #[test]
    fn negative_displacements_are_never_made() {
        // Offsets are byte offsets of slots, so never negative; one just below 128 still takes
        // the short form and 128 the long one (a disp8 is signed).
        let mut a = Asm::default();
        a.load(RAX, 120);
        a.load(RAX, 128);
        assert_eq!(
            a.code,
            [0x48, 0x8B, 0x47, 0x78, 0x48, 0x8B, 0x87, 0x80, 0x00, 0x00, 0x00]
        );
    }
}

//! Random loop bodies, branches and call bodies for the random-program generator.
//!
//! A body here is itself a random program, grown by the generator's own `step` (and more
//! often than at the top by the index arithmetic of `index.rs`), up to [`MAX_DEPTH`] bodies
//! deep: a scan inside a scan body, a cond inside a while body. Its inputs are the loop's
//! consts, carries and xs slices (or the branch's or call's operands); its outputs are random
//! values of the body of the right types (the new carries, the ys). Where a step needs a
//! fresh input (a `dot_general`'s other operand, gather indices), the body takes it as one
//! more const, which the enclosing program supplies: a value of its own or, in turn, a fresh
//! input of its own.
//!
//! - `scan`: 0 to 5 trips, forward or reversed, random consts, carries (an index carried
//!   from trip to trip among them) and xs; half of them `fori_loop`s as JAX prints them, with
//!   an `i32` counter carry `i` whose new value is `i + 1`;
//! - `while`: a counter `k` and random carries; the cond is a random body whose predicate is
//!   `k < min(n, limit)` (at most 4 trips), sometimes and-ed with a bool of its own;
//! - `cond`: 1 to 3 random branches over the same operands, its index computed as
//!   `lax.switch` computes one (a clamp) or taken as it is (out of range: the last branch);
//! - `jit` and `remat2` of a random body.

use std::sync::Arc;

use remat_ir::{
    Atom, Aval, BinaryOp, ClosedJaxpr, CompareOp, DType, DotDimensionNumbers, Jaxpr, MemorySpace, Primitive, UnaryOp,
    Var,
};

use super::{index, lit, step, value_of, Builder, Gen};

/// How deep bodies nest: the program's own equations are depth 0; a body at `MAX_DEPTH`
/// makes no random body of its own (the generator's fixed bodies still occur there).
pub(super) const MAX_DEPTH: usize = 2;

/// A small device value: a loop's const or carry.
fn small(a: &Aval) -> bool {
    a.memory_space == MemorySpace::Device && a.size() <= 256
}

/// A body under construction: its builder, and the variables of its interface (the inputs
/// the primitive defines; the fresh inputs its steps add come after them).
struct Body {
    b: Builder,
    interface: Vec<Var>,
}

impl Body {
    fn new(depth: usize, ins: &[Aval]) -> Body {
        let mut b = Builder { depth, ..Builder::new() };
        let interface = ins.iter().map(|a| b.input(a.clone())).collect();
        Body { b, interface }
    }

    /// `least` to `least + spread - 1` random steps, about a third of them index arithmetic.
    fn grow(&mut self, g: &mut Gen, least: usize, spread: usize) {
        let n = least + g.below(spread);
        let mut made = 0;
        for _ in 0..8 * n {
            if made >= n {
                break;
            }
            let ok = if g.chance(35) { index::step(&mut self.b, g) } else { step(&mut self.b, g) };
            made += usize::from(ok.is_some());
        }
    }

    /// Up to `n` random values of the body: the results of its own loops, a computed index
    /// (half of the time), values it computed rather than took.
    fn some_values(&mut self, g: &mut Gen, n: usize) -> Vec<Atom> {
        let mut outs: Vec<Atom> = Vec::new();
        for &r in &self.b.results {
            if outs.len() < n && g.chance(70) {
                outs.push(r.into());
            }
        }
        if !self.b.indices.is_empty() && g.chance(50) {
            outs.push(g.pick(&self.b.indices).into());
        }
        let computed = self.b.pool[self.interface.len()..].to_vec();
        while outs.len() < n {
            if !computed.is_empty() && g.chance(75) {
                outs.push(g.pick(&computed).into());
                continue;
            }
            match self.b.of(g, |a| a.memory_space == MemorySpace::Device) {
                Some(v) => outs.push(v.into()),
                None => break,
            }
        }
        outs
    }

    /// The new value of `carry`: `percent` of the time the carry combined with a value the
    /// body computed (an accumulation, as `c + x @ w` or a gradient's `add_any`), else a
    /// value of its type.
    fn carry_value(&mut self, g: &mut Gen, carry: Var, percent: usize) -> Option<Atom> {
        let aval = self.b.aval(carry);
        if aval.dtype.is_numeric() && g.chance(percent) {
            let computed: Vec<Var> = self.b.pool[self.interface.len()..]
                .iter()
                .copied()
                .filter(|&v| {
                    let a = self.b.aval(v);
                    a.dtype == aval.dtype && (a.shape == aval.shape || a.rank() == 0)
                })
                .collect();
            if !computed.is_empty() {
                let x = g.pick(&computed);
                let op = g.pick(&[BinaryOp::Add, BinaryOp::AddAny, BinaryOp::Max, BinaryOp::Mul, BinaryOp::Sub]);
                if let Some(v) = self.b.eqn(Primitive::Binary(op), vec![carry.into(), x.into()]) {
                    return Some(v[0].into());
                }
            }
        }
        value_of(&mut self.b, g, &aval)
    }

    /// The body returning `outs`, with the fresh inputs its steps added as invars at
    /// position `at` of its interface; and those inputs, which the caller supplies.
    fn finish(mut self, outs: Vec<Atom>, at: usize) -> (Jaxpr, Vec<Var>) {
        let extras: Vec<Var> = self.b.jaxpr.invars[self.interface.len()..].to_vec();
        let mut invars = self.interface;
        invars.splice(at..at, extras.iter().copied());
        self.b.jaxpr.invars = invars;
        self.b.jaxpr.outvars = outs;
        (self.b.jaxpr, extras)
    }
}

/// Operands of the enclosing builder `b` for a body's fresh inputs `extras` (of `body`): a
/// value of `b` of that type, or a fresh input of `b`.
fn supply(b: &mut Builder, g: &mut Gen, body: &Jaxpr, extras: &[Var]) -> Vec<Atom> {
    extras
        .iter()
        .map(|&v| {
            let aval = body.aval(v).clone();
            match b.of(g, |a| a.same_type(&aval)) {
                Some(x) if g.chance(40) => x.into(),
                _ => b.input(aval).into(),
            }
        })
        .collect()
}

/// The aval of a slice of `xs` along its leading axis.
fn slice_aval(a: &Aval) -> Aval {
    Aval::new(a.dtype, a.shape[1..].to_vec())
}

/// After a loop, a branch or a call: its integer scalar results are indices later steps
/// read again; one or two of its results are returned, so that it is not dead code.
fn after(b: &mut Builder, g: &mut Gen, outs: &[Var]) {
    for &v in outs {
        if b.aval(v) == Aval::scalar(DType::I32) {
            b.indices.push(v);
        }
    }
    for _ in 0..1 + g.below(2) {
        if !outs.is_empty() {
            let v = g.pick(outs);
            if b.aval(v).memory_space == MemorySpace::Device && !b.results.contains(&v) {
                b.results.push(v);
            }
        }
    }
}

/// A `scan` with a random body (`fori`: a `fori_loop`, its counter the first carry).
pub(super) fn scan(b: &mut Builder, g: &mut Gen, fori: bool) -> Option<()> {
    scan_over(b, g, fori, None)
}

/// The shape of an RNN cell `h' = tanh(x_t . U + h . W)`: `m` rows, `d` inputs, `n`
/// states.
#[derive(Clone, Copy)]
struct Cell {
    m: usize,
    d: usize,
    n: usize,
}

/// `a . b`, contracting `a`'s last axis with `b`'s first, accumulated in f32.
fn matmul(b: &mut Builder, x: Var, w: Var) -> Option<Var> {
    let last = b.aval(x).rank().checked_sub(1)?;
    let dn = DotDimensionNumbers {
        lhs_contracting: vec![last],
        rhs_contracting: vec![0],
        lhs_batch: vec![],
        rhs_batch: vec![],
    };
    let prim =
        Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type: Some(DType::F32), precision: None };
    b.eqn(prim, vec![x.into(), w.into()]).map(|v| v[0])
}

/// [`scan`], with `focus` (an input of rank > 0 being differentiated, `grad.rs`) as the
/// first const that the body indexes with its counter and accumulates into a float carry:
/// `fori_loop(0, n, lambda i, acc: acc + f(x[i]), 0.0)`. A quarter of the scans (and of
/// those with a focus) also hold an RNN cell, `h' = tanh(x_t . U + h . W)` with `x_t . U`
/// and `h'` stacked: the products the JIT moves out of the loop (`scan_hoist`), and whose
/// derivative accumulates weight gradients over the reversed loop.
pub(super) fn scan_over(b: &mut Builder, g: &mut Gen, fori: bool, focus: Option<Var>) -> Option<()> {
    if b.depth >= MAX_DEPTH {
        return None;
    }
    let length = g.pick(&[0, 1, 2, 3, 3, 4, 5]);
    let cell = g.chance(25).then(|| Cell { m: g.pick(&[1, 2, 3]), d: g.pick(&[1, 2, 4, 5]), n: g.pick(&[1, 3, 4]) });
    let mut consts: Vec<Atom> = focus.into_iter().map(Atom::from).collect();
    if let Some(Cell { d, n, .. }) = cell {
        consts.push(b.input(Aval::new(DType::F32, vec![d, n])).into());
        consts.push(b.input(Aval::new(DType::F32, vec![n, n])).into());
    }
    consts.extend((0..g.below(3)).filter_map(|_| b.of(g, small)).map(Atom::from));
    let mut carries: Vec<Atom> = Vec::new();
    if fori {
        carries.push(lit(DType::I32, g.pick(&[0.0, 0.0, 1.0, -2.0])));
    }
    if focus.is_some() {
        // The accumulator: a scalar, or a slice of the focus, from zeros.
        carries.push(lit(DType::F32, 0.0));
    }
    if let Some(Cell { m, n, .. }) = cell {
        let h = Aval::new(DType::F32, vec![m, n]);
        let h0 = match b.of(g, |a| a.same_type(&h)) {
            Some(v) if g.chance(50) => v,
            _ => b.input(h),
        };
        carries.push(h0.into());
    }
    carries.extend((0..g.below(3)).filter_map(|_| b.of(g, small)).map(Atom::from));
    if g.chance(30) {
        // An index carried from trip to trip.
        let i = match b.of(g, |a| a.dtype.is_integer() && a.rank() == 0) {
            Some(v) if g.chance(60) => v.into(),
            _ => lit(DType::I32, g.pick(&[0.0, 3.0, -1.0])),
        };
        carries.push(i);
    }
    let mut xs: Vec<Atom> = Vec::new();
    if let Some(Cell { m, d, .. }) = cell {
        xs.push(b.input(Aval::new(DType::F32, vec![length, m, d])).into());
    }
    xs.extend((0..g.below(3)).map(|_| match b.of(g, |a| a.shape.first() == Some(&length)) {
        Some(v) if g.chance(40) => Atom::from(v),
        _ => {
            let shape = [vec![length], g.shape()].concat();
            b.input(Aval::new(g.dtype(), shape)).into()
        }
    }));
    let aval = |b: &Builder, a: &Atom| b.jaxpr.atom_aval(a);
    let const_avals: Vec<Aval> = consts.iter().map(|a| aval(b, a)).collect();
    let carry_avals: Vec<Aval> = carries.iter().map(|a| aval(b, a)).collect();
    let x_avals: Vec<Aval> = xs.iter().map(|a| slice_aval(&aval(b, a))).collect();
    let ins = [const_avals.clone(), carry_avals.clone(), x_avals].concat();

    let mut body = Body::new(b.depth + 1, &ins);
    let nc = consts.len();
    let counter = fori.then(|| body.interface[nc]);
    if let Some(i) = counter {
        body.b.indices.push(i);
    }
    // JAX's fori_loop body computes `i + 1` first.
    let early = g.chance(50);
    let mut next = None;
    if let (Some(i), true) = (counter, early) {
        next = Some(body.b.eqn(Primitive::Binary(BinaryOp::Add), vec![i.into(), lit(DType::I32, 1.0)])?[0]);
    }
    if focus.is_some() {
        let x = body.interface[0];
        for _ in 0..1 + g.below(2) {
            let _ = index::step_on(&mut body.b, g, x);
        }
        // What the slices give, reduced to the accumulator's scalar now and then.
        if let Some(v) = body.b.pool.last().copied().filter(|&v| body.b.aval(v).dtype == DType::F32) {
            let axes: Vec<usize> = (0..body.b.aval(v).rank()).collect();
            let _ = body.b.eqn(Primitive::Reduce { op: remat_ir::ReduceOp::Sum, axes }, vec![v.into()]);
        }
    }
    // The cell: its consts after the focus, its state after the counter and accumulator,
    // its input the first xs.
    let (nf, nh) = (usize::from(focus.is_some()), usize::from(fori) + usize::from(focus.is_some()));
    let mut cell_out = None;
    if cell.is_some() {
        let (u, w) = (body.interface[nf], body.interface[nf + 1]);
        let (h, x) = (body.interface[nc + nh], body.interface[nc + carries.len()]);
        let p = matmul(&mut body.b, x, u)?;
        let q = matmul(&mut body.b, h, w)?;
        let s = body.b.eqn(Primitive::Binary(BinaryOp::Add), vec![p.into(), q.into()])?[0];
        let h1 = body.b.eqn(Primitive::Unary(UnaryOp::Tanh), vec![s.into()])?[0];
        cell_out = Some((p, h1));
    }
    body.grow(g, 1, 5);
    if let (Some(i), None) = (counter, next) {
        next = Some(body.b.eqn(Primitive::Binary(BinaryOp::Add), vec![i.into(), lit(DType::I32, 1.0)])?[0]);
    }
    let mut outs: Vec<Atom> = Vec::new();
    for k in 0..carry_avals.len() {
        outs.push(match (k, next) {
            (0, Some(i1)) => i1.into(),
            // The focus's accumulator (after the counter) accumulates.
            _ if focus.is_some() && k == usize::from(fori) => body.carry_value(g, body.interface[nc + k], 90)?,
            _ if k == nh && g.chance(80) && cell_out.is_some() => cell_out.map(|(_, h1)| h1.into())?,
            _ => body.carry_value(g, body.interface[nc + k], 45)?,
        });
    }
    if let Some((p, h1)) = cell_out {
        outs.extend([p, h1].into_iter().filter(|_| g.chance(70)).map(Atom::from));
    }
    let n_ys = g.below(4);
    outs.extend(body.some_values(g, n_ys));
    let (jaxpr, extras) = body.finish(outs, 0);
    let operands = [supply(b, g, &jaxpr, &extras), consts, carries, xs].concat();
    let prim = Primitive::Scan {
        jaxpr: ClosedJaxpr::new(Arc::new(jaxpr)),
        length,
        reverse: g.chance(30),
        num_consts: extras.len() + nc,
        num_carry: carry_avals.len(),
        unroll: 1,
    };
    let outs = b.eqn(prim, operands)?;
    after(b, g, &outs);
    Some(())
}

/// A `while` with a random cond and body: `k < min(n, limit)` bounds it to 4 trips.
pub(super) fn while_loop(b: &mut Builder, g: &mut Gen) -> Option<()> {
    if b.depth >= MAX_DEPTH {
        return None;
    }
    let n: Atom = match b.of(g, |a| a.dtype == DType::I32 && a.rank() == 0) {
        Some(v) if g.chance(50) => v.into(),
        _ => lit(DType::I32, g.pick(&[-1.0, 0.0, 2.0, 3.0, 9.0])),
    };
    let limit = g.pick(&[0.0, 1.0, 2.0, 3.0, 4.0]);
    // The counter starts at a literal: a value of the pool could be `i32::MIN`.
    let mut carries: Vec<Atom> = vec![lit(DType::I32, g.pick(&[0.0, 0.0, -1.0, 1.0]))];
    carries.extend((0..1 + g.below(3)).filter_map(|_| b.of(g, small)).map(Atom::from));
    let carry_avals: Vec<Aval> = carries.iter().map(|a| b.jaxpr.atom_aval(a)).collect();

    // cond: (n, extras, k, carries) -> k < min(n, limit) [and a bool of its own]
    let mut cond = Body::new(b.depth + 1, &[vec![Aval::scalar(DType::I32)], carry_avals.clone()].concat());
    cond.grow(g, 0, 3);
    let (nv, k) = (cond.interface[0], cond.interface[1]);
    let bound = cond.b.eqn(Primitive::Binary(BinaryOp::Min), vec![nv.into(), lit(DType::I32, limit)])?[0];
    let mut pred = cond.b.eqn(Primitive::Compare(CompareOp::Lt), vec![k.into(), bound.into()])?[0];
    if let Some(p) = cond.b.of(g, |a| a.dtype == DType::Bool && a.rank() == 0) {
        if g.chance(50) {
            pred = cond.b.eqn(Primitive::Binary(BinaryOp::And), vec![pred.into(), p.into()])?[0];
        }
    }
    let (cond_jaxpr, cond_extras) = cond.finish(vec![pred.into()], 1);

    // body: (consts, extras, k, carries) -> (k + 1, new carries)
    let consts: Vec<Atom> = (0..g.below(3)).filter_map(|_| b.of(g, small)).map(Atom::from).collect();
    let const_avals: Vec<Aval> = consts.iter().map(|a| b.jaxpr.atom_aval(a)).collect();
    let mut body = Body::new(b.depth + 1, &[const_avals, carry_avals.clone()].concat());
    let k = body.interface[consts.len()];
    body.b.indices.push(k);
    body.grow(g, 1, 5);
    let k1 = body.b.eqn(Primitive::Binary(BinaryOp::Add), vec![k.into(), lit(DType::I32, 1.0)])?[0];
    let mut outs: Vec<Atom> = vec![k1.into()];
    for k in 1..carry_avals.len() {
        outs.push(body.carry_value(g, body.interface[consts.len() + k], 45)?);
    }
    let (body_jaxpr, body_extras) = body.finish(outs, consts.len());

    let cond_ops = supply(b, g, &cond_jaxpr, &cond_extras);
    let body_ops = supply(b, g, &body_jaxpr, &body_extras);
    let prim = Primitive::While {
        cond_nconsts: 1 + cond_extras.len(),
        body_nconsts: consts.len() + body_extras.len(),
        cond_jaxpr: ClosedJaxpr::new(Arc::new(cond_jaxpr)),
        body_jaxpr: ClosedJaxpr::new(Arc::new(body_jaxpr)),
    };
    let operands = [vec![n], cond_ops, consts, body_ops, carries].concat();
    let outs = b.eqn(prim, operands)?;
    after(b, g, &outs);
    Some(())
}

/// A `cond` of 1 to 3 random branches over the same operands.
pub(super) fn cond(b: &mut Builder, g: &mut Gen) -> Option<()> {
    if b.depth >= MAX_DEPTH {
        return None;
    }
    let n_branches = 1 + g.below(3);
    let index = if g.chance(60) {
        // `lax.switch`: the index clamped into range.
        let i = index::index(b, g, n_branches);
        b.eqn(Primitive::Clamp, vec![lit(DType::I32, 0.0), i, lit(DType::I32, (n_branches - 1) as f64)])?[0].into()
    } else {
        index::index(b, g, n_branches)
    };
    let ops: Vec<Atom> = (0..1 + g.below(3)).filter_map(|_| b.of(g, small)).map(Atom::from).collect();
    let op_avals: Vec<Aval> = ops.iter().map(|a| b.jaxpr.atom_aval(a)).collect();
    let out_avals: Vec<Aval> = (0..1 + g.below(3))
        .filter_map(|_| {
            if g.chance(50) && !op_avals.is_empty() {
                Some(op_avals[g.below(op_avals.len())].clone())
            } else {
                b.of(g, |a| small(a) && a.dtype != DType::Key).map(|v| b.aval(v))
            }
        })
        .collect();
    let mut branches = Vec::new();
    for _ in 0..n_branches {
        let mut body = Body::new(b.depth + 1, &op_avals);
        body.grow(g, 0, 4);
        let outs = out_avals.iter().map(|a| value_of(&mut body.b, g, a)).collect::<Option<Vec<Atom>>>()?;
        branches.push(body.finish(outs, op_avals.len()));
    }
    // Every branch takes every branch's fresh inputs (those of the others unused).
    let mut operands = [vec![index], ops].concat();
    let all: Vec<(usize, Var)> =
        branches.iter().enumerate().flat_map(|(k, (_, extras))| extras.iter().map(move |&v| (k, v))).collect();
    for &(k, v) in &all {
        let aval = branches[k].0.aval(v).clone();
        operands.extend(supply(b, g, &branches[k].0, &[v]));
        for (j, (jaxpr, _)) in branches.iter_mut().enumerate() {
            if j != k {
                let unused = jaxpr.new_var(aval.clone());
                jaxpr.invars.push(unused);
            }
        }
    }
    // Each branch's own fresh inputs move to their place among all of them.
    for (k, (jaxpr, extras)) in branches.iter_mut().enumerate() {
        let n_ops = op_avals.len();
        let mut rest: Vec<Var> = jaxpr.invars.split_off(n_ops);
        let mut own = extras.iter().copied();
        let mut others = rest.drain(extras.len()..).collect::<Vec<Var>>().into_iter();
        for &(j, _) in &all {
            let v = if j == k { own.next() } else { others.next() };
            jaxpr.invars.push(v.expect("one invar per fresh input"));
        }
    }
    let branches: Vec<ClosedJaxpr> = branches.into_iter().map(|(j, _)| ClosedJaxpr::new(Arc::new(j))).collect();
    let outs = b.eqn(Primitive::Cond { branches, branches_platforms: None }, operands)?;
    after(b, g, &outs);
    Some(())
}

/// A `jit` or `remat2` of a random body.
pub(super) fn call(b: &mut Builder, g: &mut Gen) -> Option<()> {
    if b.depth >= MAX_DEPTH {
        return None;
    }
    let ops: Vec<Atom> = (0..1 + g.below(3)).filter_map(|_| b.of(g, small)).map(Atom::from).collect();
    let op_avals: Vec<Aval> = ops.iter().map(|a| b.jaxpr.atom_aval(a)).collect();
    let mut body = Body::new(b.depth + 1, &op_avals);
    body.grow(g, 1, 4);
    let n_outs = 1 + g.below(3);
    let outs = body.some_values(g, n_outs);
    let (jaxpr, extras) = body.finish(outs, op_avals.len());
    let operands = [ops, supply(b, g, &jaxpr, &extras)].concat();
    let prim = if g.chance(50) {
        Primitive::Jit { name: "body".into(), jaxpr: ClosedJaxpr::new(Arc::new(jaxpr)), options: Default::default() }
    } else {
        Primitive::Remat2 {
            jaxpr: Arc::new(jaxpr),
            prevent_cse: g.chance(70),
            differentiated: g.chance(30),
            policy: None,
        }
    };
    let outs = b.eqn(prim, operands)?;
    after(b, g, &outs);
    Some(())
}

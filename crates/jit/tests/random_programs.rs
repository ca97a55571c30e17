//! Random well-typed jaxprs, compiled by the JIT, agree with the interpreter.
//!
//! The generator builds programs through the IR's own shape rules (a candidate equation the
//! rules reject is redrawn), so every program verifies. It covers every primitive, all four
//! dtypes, 0-sized and 1-sized dimensions, scalar and unit-axis broadcasting, lengths that
//! are not multiples of 4, calls, scans, host round trips, convolutions and windows
//! (`random_programs/windows.rs`), and repeated equations (which
//! the JIT's CSE merges, within checkpoints and across them). Each program is compiled
//! under every CSE scope. Proptest draws the seeds: 1,024 programs per run.

mod common;
#[path = "random_programs/windows.rs"]
mod windows;

use std::sync::Arc;

use common::{check_bits, count_eqns, differential_by};
use proptest::prelude::*;
use remat_ir::{
    shape_rule, Atom, Aval, BinaryOp, ClosedJaxpr, CompareOp, CopySemantics, CumulativeOp, DType, DotDimensionNumbers,
    Eqn, FillValue, GatherDimensionNumbers, GatherScatterMode, Jaxpr, LitValue, Literal, MemorySpace, Primitive,
    ReduceOp, RoundingMethod, ScatterDimensionNumbers, ScatterOp, SourceInfo, UnaryDomain, UnaryOp, Var,
};
use remat_jit::{CseScope, Options};
use remat_testkit::Rng;

/// A small deterministic generator of choices.
struct Gen(u64);

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn dim(&mut self) -> usize {
        self.pick(&[1, 2, 3, 4, 5, 7, 9, 0, 1, 3, 6])
    }
    fn shape(&mut self) -> Vec<usize> {
        let rank = self.pick(&[0, 1, 1, 2, 2, 3]);
        (0..rank).map(|_| self.dim()).collect()
    }
    /// A value dtype: f32 most often, then every other one.
    fn dtype(&mut self) -> DType {
        self.pick(&[
            DType::F32,
            DType::F32,
            DType::F32,
            DType::F64,
            DType::I32,
            DType::Bool,
            DType::BF16,
            DType::BF16,
            DType::F16,
            DType::F16,
            DType::I8,
            DType::I16,
            DType::I64,
            DType::U8,
            DType::U32,
        ])
    }
}

/// A literal of `dtype` (`f32` for keys, which have none: the shape rules then reject the
/// equation).
fn lit(dtype: DType, x: f64) -> Atom {
    let value = LitValue::try_from_f64(dtype, x).unwrap_or(LitValue::F32(x as f32));
    Atom::Lit(Literal { value })
}

struct Builder {
    jaxpr: Jaxpr,
    /// Device values available as operands.
    pool: Vec<Var>,
}

impl Builder {
    fn input(&mut self, aval: Aval) -> Var {
        let v = self.jaxpr.new_var(aval);
        self.jaxpr.invars.push(v);
        self.pool.push(v);
        v
    }

    /// Adds `prim` on `ins` if the shape rules accept it.
    fn eqn(&mut self, prim: Primitive, ins: Vec<Atom>) -> Option<Vec<Var>> {
        let in_avals: Vec<Aval> = ins.iter().map(|a| self.jaxpr.atom_aval(a)).collect();
        let outs = shape_rule(&prim, &in_avals).ok()?;
        if outs.iter().any(|a| a.size() > 4096) {
            return None;
        }
        let vars: Vec<Var> = outs.into_iter().map(|a| self.jaxpr.new_var(a)).collect();
        self.jaxpr.eqns.push(Eqn::new(prim, ins, vars.clone(), SourceInfo::unknown()));
        for &v in &vars {
            if self.jaxpr.aval(v).memory_space == MemorySpace::Device {
                self.pool.push(v);
            }
        }
        Some(vars)
    }

    /// A jaxpr of the one equation `eqn` (its operands become the inputs).
    fn single(&self, eqn: &Eqn) -> Arc<Jaxpr> {
        let mut body = Jaxpr::default();
        let ins: Vec<Atom> = eqn
            .invars
            .iter()
            .map(|a| match a {
                Atom::Var(v) => {
                    let x = body.new_var(self.aval(*v));
                    body.invars.push(x);
                    x.into()
                }
                lit => *lit,
            })
            .collect();
        let outs: Vec<Var> = eqn.outvars.iter().map(|&v| body.new_var(self.aval(v))).collect();
        body.outvars = outs.iter().map(|&v| v.into()).collect();
        body.eqns.push(Eqn::new(eqn.primitive.clone(), ins, outs, SourceInfo::unknown()));
        Arc::new(body)
    }

    fn aval(&self, v: Var) -> Aval {
        self.jaxpr.aval(v).clone()
    }

    fn of(&self, g: &mut Gen, f: impl Fn(&Aval) -> bool) -> Option<Var> {
        let ok: Vec<Var> = self.pool.iter().copied().filter(|&v| f(self.jaxpr.aval(v))).collect();
        if ok.is_empty() {
            None
        } else {
            Some(ok[g.below(ok.len())])
        }
    }
}

/// A one-equation inner jaxpr `x -> op(x)` for calls and `(c, x) -> (c + x, sin c)` scans.
fn inner_unary(aval: &Aval, op: UnaryOp) -> Arc<Jaxpr> {
    let mut j = Jaxpr::default();
    let x = j.new_var(aval.clone());
    j.invars.push(x);
    let y = j.new_var(Aval::new(aval.dtype, aval.shape.clone()));
    j.eqns.push(Eqn::new(Primitive::Unary(op), vec![x.into()], vec![y], SourceInfo::unknown()));
    j.outvars = vec![y.into(), x.into()];
    Arc::new(j)
}

fn scan_body(carry: &Aval, x: &Aval) -> Arc<Jaxpr> {
    let mut j = Jaxpr::default();
    let k = j.new_var(Aval::scalar(DType::F32));
    let c = j.new_var(carry.clone());
    let xv = j.new_var(x.clone());
    j.invars = vec![k, c, xv];
    let kx = j.new_var(x.clone());
    j.eqns.push(Eqn::new(Primitive::Binary(BinaryOp::Mul), vec![k.into(), xv.into()], vec![kx], SourceInfo::unknown()));
    let c2 = j.new_var(carry.clone());
    j.eqns.push(Eqn::new(Primitive::Binary(BinaryOp::Add), vec![c.into(), kx.into()], vec![c2], SourceInfo::unknown()));
    let y = j.new_var(carry.clone());
    j.eqns.push(Eqn::new(Primitive::Unary(UnaryOp::Sin), vec![c.into()], vec![y], SourceInfo::unknown()));
    j.outvars = vec![c2.into(), y.into()];
    Arc::new(j)
}

/// `(n, k, x) -> k < min(n, 5)` (a bounded trip count whatever `n` is).
fn while_cond(x: &Aval) -> Arc<Jaxpr> {
    let mut j = Jaxpr::default();
    let (n, k, xv) = (j.new_var(Aval::scalar(DType::I32)), j.new_var(Aval::scalar(DType::I32)), j.new_var(x.clone()));
    j.invars = vec![n, k, xv];
    let m = j.new_var(Aval::scalar(DType::I32));
    j.eqns.push(Eqn::new(
        Primitive::Binary(BinaryOp::Min),
        vec![n.into(), lit(DType::I32, 5.0)],
        vec![m],
        SourceInfo::unknown(),
    ));
    let p = j.new_var(Aval::scalar(DType::Bool));
    j.eqns.push(Eqn::new(Primitive::Compare(CompareOp::Lt), vec![k.into(), m.into()], vec![p], SourceInfo::unknown()));
    j.outvars = vec![p.into()];
    Arc::new(j)
}

/// `(k, x) -> (k + 1, op(x))`.
fn while_body(x: &Aval, op: UnaryOp) -> Arc<Jaxpr> {
    let mut j = Jaxpr::default();
    let (k, xv) = (j.new_var(Aval::scalar(DType::I32)), j.new_var(x.clone()));
    j.invars = vec![k, xv];
    let k1 = j.new_var(Aval::scalar(DType::I32));
    j.eqns.push(Eqn::new(
        Primitive::Binary(BinaryOp::Add),
        vec![k.into(), lit(DType::I32, 1.0)],
        vec![k1],
        SourceInfo::unknown(),
    ));
    let y = j.new_var(x.clone());
    j.eqns.push(Eqn::new(Primitive::Unary(op), vec![xv.into()], vec![y], SourceInfo::unknown()));
    j.outvars = vec![k1.into(), y.into()];
    Arc::new(j)
}

/// Tries to add one random equation; returns the primitive family tried.
fn step(b: &mut Builder, g: &mut Gen) -> Option<()> {
    let is_num = |a: &Aval| a.dtype.is_numeric();
    let is_float = |a: &Aval| a.dtype.is_float();
    match g.below(39) {
        0 | 1 => {
            let op = g.pick(&UnaryOp::ALL);
            let mut x = b.of(g, |a| match op.domain() {
                UnaryDomain::Any => true,
                UnaryDomain::Number => is_num(a),
                UnaryDomain::IntOrBool => !a.dtype.is_float(),
                UnaryDomain::Float => a.dtype.is_float(),
            })?;
            if matches!(op, UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tan) {
                // Periodic functions of large arguments turn an allowed 1-ulp difference
                // upstream (near 150 one f32 ulp is 1.5e-5) into a different result, so
                // their operand is clamped; their whole range is checked on its own
                // (tests/libm_sweep.rs). A seed once drew sin(exp(pow(c, -1.5))).
                let d = b.aval(x).dtype;
                x = b.eqn(Primitive::Clamp, vec![lit(d, -4.0), x.into(), lit(d, 4.0)])?[0];
            }
            b.eqn(Primitive::Unary(op), vec![x.into()])?;
        }
        2 | 3 => {
            let op = g.pick(&BinaryOp::ALL);
            let x = match op {
                BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::Nextafter | BinaryOp::Polygamma => b.of(g, is_float)?,
                BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => b.of(g, |a| !a.dtype.is_float())?,
                BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic => {
                    b.of(g, |a| a.dtype == DType::I32)?
                }
                _ => b.of(g, is_num)?,
            };
            let xa = b.aval(x);
            let y: Atom = match g.below(3) {
                // For integers: 0 (division by zero), -1 (`MIN / -1`), large factors that
                // overflow.
                0 => lit(xa.dtype, g.pick(&[0.5, 2.0, -1.5, 3.0, -1.0, 1e6, 255.0, 65504.0])),
                1 if op == BinaryOp::Pow => lit(DType::I32, g.pick(&[2.0, -1.0, 3.0])),
                _ => b.of(g, |a| a.dtype == xa.dtype && (a.shape == xa.shape || a.rank() == 0))?.into(),
            };
            let (x, y) = if g.chance(30) { (y, Atom::from(x)) } else { (Atom::from(x), y) };
            b.eqn(Primitive::Binary(op), vec![x, y])?;
        }
        4 => {
            let x = b.of(g, |_| true)?;
            let xa = b.aval(x);
            let y = b.of(g, |a| a.dtype == xa.dtype && a.shape == xa.shape)?;
            b.eqn(Primitive::Compare(g.pick(&CompareOp::ALL)), vec![x.into(), y.into()])?;
        }
        5 => {
            let x = b.of(g, is_num)?;
            let y = g.pick(&[-2, -1, 0, 1, 2, 3, 5, 9]);
            b.eqn(Primitive::IntegerPow { y }, vec![x.into()])?;
        }
        6 => {
            let c = b.of(g, |_| true)?;
            let ca = b.aval(c);
            let d = b.of(g, |a| a.same_type(&ca)).unwrap_or(c);
            let pred: Atom = match g.below(3) {
                0 => lit(DType::Bool, 1.0),
                1 => b.of(g, |a| a.dtype == DType::Bool && a.shape == ca.shape)?.into(),
                _ => {
                    let p = b.of(g, |a| a.dtype == DType::I32 && a.shape == ca.shape)?;
                    return b.eqn(Primitive::SelectN, vec![p.into(), c.into(), d.into(), c.into()]).map(|_| ());
                }
            };
            b.eqn(Primitive::SelectN, vec![pred, c.into(), d.into()])?;
        }
        7 => {
            let x = b.of(g, is_num)?;
            let d = b.aval(x).dtype;
            b.eqn(Primitive::Clamp, vec![lit(d, -0.5), x.into(), lit(d, 0.75)])?;
        }
        8 => {
            let x = b.of(g, |_| true)?;
            b.eqn(Primitive::ConvertElementType { new_dtype: g.dtype(), weak_type: false }, vec![x.into()])?;
        }
        9 => {
            let x = b.of(g, is_float)?;
            let p = Primitive::ReducePrecision {
                exponent_bits: g.pick(&[5, 8, 11]),
                mantissa_bits: g.pick(&[2, 7, 10, 23]),
            };
            b.eqn(p, vec![x.into()])?;
        }
        10 => {
            let x = b.of(g, |a| a.rank() < 3)?;
            let xa = b.aval(x);
            let extra = g.below(2) + 1;
            let out_rank = xa.rank() + extra;
            let mut dims: Vec<usize> = (0..out_rank).collect();
            while dims.len() > xa.rank() {
                let i = g.below(dims.len());
                dims.remove(i);
            }
            let mut shape: Vec<usize> = (0..out_rank).map(|_| g.dim()).collect();
            for (k, &d) in dims.iter().enumerate() {
                shape[d] = if xa.shape[k] == 1 && g.chance(50) { g.dim() } else { xa.shape[k] };
            }
            b.eqn(Primitive::BroadcastInDim { shape, broadcast_dimensions: dims }, vec![x.into()])?;
        }
        11 => {
            let x = b.of(g, |_| true)?;
            let xa = b.aval(x);
            let n = xa.size();
            let new_sizes = match g.below(3) {
                0 => vec![n],
                1 if n.is_multiple_of(2) && n > 0 => vec![2, n / 2],
                _ => [&[1][..], &xa.shape[..], &[1][..]].concat(),
            };
            b.eqn(Primitive::Reshape { new_sizes, dimensions: None }, vec![x.into()])?;
        }
        12 => {
            let x = b.of(g, |a| a.rank() >= 2)?;
            let r = b.aval(x).rank();
            let mut perm: Vec<usize> = (0..r).collect();
            for i in (1..r).rev() {
                perm.swap(i, g.below(i + 1));
            }
            b.eqn(Primitive::Transpose { permutation: perm }, vec![x.into()])?;
        }
        13 => {
            let x = b.of(g, |a| a.shape.contains(&1))?;
            let dims: Vec<usize> =
                b.aval(x).shape.iter().enumerate().filter(|(_, &n)| n == 1).map(|(k, _)| k).collect();
            b.eqn(Primitive::Squeeze { dimensions: vec![g.pick(&dims)] }, vec![x.into()])?;
        }
        14 => {
            let x = b.of(g, |a| a.rank() < 3)?;
            let r = b.aval(x).rank();
            b.eqn(Primitive::ExpandDims { dimensions: vec![g.below(r + 1)] }, vec![x.into()])?;
        }
        15 => {
            let x = b.of(g, |a| a.rank() > 0)?;
            let xa = b.aval(x);
            let start: Vec<usize> = xa.shape.iter().map(|&d| g.below(d + 1)).collect();
            let limit: Vec<usize> = xa.shape.iter().zip(&start).map(|(&d, &s)| s + g.below(d - s + 1)).collect();
            let strides = if g.chance(50) { Some(xa.shape.iter().map(|_| g.below(3) + 1).collect()) } else { None };
            b.eqn(Primitive::Slice { start_indices: start, limit_indices: limit, strides }, vec![x.into()])?;
        }
        16 => {
            let x = b.of(g, |a| a.rank() > 0)?;
            let xa = b.aval(x);
            let cfg: Vec<(i64, i64, i64)> =
                xa.shape.iter().map(|_| (g.below(4) as i64 - 1, g.below(4) as i64 - 1, g.below(3) as i64)).collect();
            b.eqn(Primitive::Pad { padding_config: cfg }, vec![x.into(), lit(xa.dtype, 0.25)])?;
        }
        17 => {
            let x = b.of(g, |a| a.rank() > 0)?;
            let xa = b.aval(x);
            let d = g.below(xa.rank());
            let y = b.of(g, |a| {
                a.dtype == xa.dtype
                    && a.rank() == xa.rank()
                    && (0..a.rank()).all(|k| k == d || a.shape[k] == xa.shape[k])
            })?;
            b.eqn(Primitive::Concatenate { dimension: d }, vec![x.into(), y.into(), x.into()])?;
        }
        18 => {
            let x = b.of(g, |a| a.rank() > 0)?;
            let xa = b.aval(x);
            let sizes: Vec<usize> = xa.shape.iter().map(|&d| g.below(d + 1)).collect();
            let idx = index_atoms(b, g, xa.rank());
            b.eqn(Primitive::DynamicSlice { slice_sizes: sizes }, [vec![Atom::from(x)], idx].concat())?;
        }
        19 => {
            let x = b.of(g, |a| a.rank() > 0)?;
            let xa = b.aval(x);
            let limit: Vec<usize> = xa.shape.iter().map(|&d| g.below(d + 1)).collect();
            let upd = b.eqn(
                Primitive::Slice { start_indices: vec![0; xa.rank()], limit_indices: limit, strides: None },
                vec![x.into()],
            )?[0];
            let neg = b.eqn(Primitive::Unary(UnaryOp::StopGradient), vec![upd.into()])?[0];
            let idx = index_atoms(b, g, xa.rank());
            b.eqn(Primitive::DynamicUpdateSlice, [vec![Atom::from(x), neg.into()], idx].concat())?;
        }
        20 => {
            let mut shape = g.shape();
            if shape.is_empty() {
                shape.push(g.dim());
            }
            let dimension = g.below(shape.len());
            let dtype = match g.dtype() {
                DType::Bool => DType::U8, // iota is defined on numbers only
                DType::Key => DType::U32, // nor are there key literals (empty2's zero)
                d => d,
            };
            if g.chance(25) {
                // `empty2`, the other operand-free primitive: a zero scalar.
                b.eqn(Primitive::Empty2 { dtype, memory_space: MemorySpace::Device }, vec![])?;
                return Some(());
            }
            b.eqn(Primitive::Iota { dtype, shape, dimension }, vec![])?;
        }
        21 => {
            let op = g.pick(&[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min]);
            let x = b.of(g, |a| a.rank() > 0 && (op != ReduceOp::Sum || a.dtype != DType::Bool))?;
            let r = b.aval(x).rank();
            let axes: Vec<usize> = (0..r).filter(|_| g.chance(50)).collect();
            if g.chance(15) {
                let axis = g.below(r);
                return b
                    .eqn(Primitive::Argmax { axes: vec![axis], index_dtype: DType::I32 }, vec![x.into()])
                    .map(|_| ());
            }
            b.eqn(Primitive::Reduce { op, axes }, vec![x.into()])?;
        }
        22 => {
            // dot_general: a fresh rhs shaped to fit random batch and contracting axes.
            let x = b.of(g, |a| a.rank() > 0 && a.rank() <= 3)?;
            let xa = b.aval(x);
            let axes: Vec<usize> = (0..xa.rank()).collect();
            let lc: Vec<usize> = axes.iter().copied().filter(|_| g.chance(40)).collect();
            let lb: Vec<usize> = axes.iter().copied().filter(|k| !lc.contains(k) && g.chance(25)).collect();
            let free: Vec<usize> = (0..g.below(2) + 1).map(|_| g.dim()).collect();
            let mut rshape: Vec<usize> = lb.iter().map(|&k| xa.shape[k]).collect();
            rshape.extend(lc.iter().map(|&k| xa.shape[k]));
            rshape.extend(free);
            let n = lb.len();
            let dn = DotDimensionNumbers {
                lhs_contracting: lc.clone(),
                rhs_contracting: (n..n + lc.len()).collect(),
                lhs_batch: lb,
                rhs_batch: (0..n).collect(),
            };
            // A 16-bit float product sometimes accumulates to f32, sometimes with an f32
            // right operand (JAX's transposes); an integer one sometimes widens.
            let (ydtype, pref) = match xa.dtype {
                DType::Bool => (DType::Bool, None),
                d if d.is_narrow_float() => match g.below(3) {
                    0 => (d, Some(d)),
                    1 => (d, Some(DType::F32)),
                    _ => (DType::F32, Some(DType::F32)),
                },
                d if d.is_integer() && g.chance(30) => (d, Some(DType::I32)),
                d => (d, Some(d)),
            };
            let y = b.input(Aval::new(ydtype, rshape));
            b.eqn(
                Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type: pref },
                vec![x.into(), y.into()],
            )?;
        }
        23 => {
            let x = b.of(g, |_| true)?;
            let put = |m| Primitive::DevicePut { devices: vec![m], copy_semantics: vec![CopySemantics::AlwaysCopy] };
            let h = b.eqn(put(MemorySpace::Host), vec![x.into()])?[0];
            b.eqn(put(MemorySpace::Device), vec![h.into()])?;
            b.eqn(Primitive::Name { name: "n".into() }, vec![x.into()])?;
        }
        24 => {
            let x = b.of(g, is_float)?;
            let inner = inner_unary(&b.aval(x), g.pick(&[UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Neg, UnaryOp::Sin]));
            let prim = match g.below(4) {
                0 => Primitive::Jit { name: "f".into(), jaxpr: ClosedJaxpr::new(inner), options: Default::default() },
                3 => Primitive::CustomVjpCall {
                    name: "h".into(),
                    call_jaxpr: ClosedJaxpr::new(inner),
                    fwd: "h_fwd".into(),
                    bwd: "h_bwd".into(),
                    num_consts: 0,
                    symbolic_zeros: false,
                },
                1 => Primitive::CustomJvpCall {
                    name: "g".into(),
                    call_jaxpr: ClosedJaxpr::new(inner),
                    jvp: "jvp".into(),
                    num_consts: 0,
                    symbolic_zeros: false,
                },
                _ => Primitive::Remat2 { jaxpr: inner, prevent_cse: g.chance(70), differentiated: false, policy: None },
            };
            b.eqn(prim, vec![x.into()])?;
        }
        25 | 26 | 30 => {
            // An earlier equation again, on the same operands (or, for a call, with a
            // checkpoint around it): work for CSE.
            let earlier = b.jaxpr.eqns.get(g.below(b.jaxpr.eqns.len()))?.clone();
            if earlier.invars.iter().filter_map(Atom::as_var).any(|v| b.aval(v).memory_space != MemorySpace::Device) {
                return None;
            }
            let prim = if g.chance(40) && earlier.primitive.subjaxprs().is_empty() {
                let body = b.single(&earlier);
                Primitive::Remat2 { jaxpr: body, prevent_cse: g.chance(50), differentiated: true, policy: None }
            } else {
                earlier.primitive.clone()
            };
            b.eqn(prim, earlier.invars.clone())?;
        }
        27 => {
            let x = b.of(g, |a| a.rank() > 0)?;
            let r = b.aval(x).rank();
            let mut dimensions: Vec<usize> = (0..r).filter(|_| g.chance(50)).collect();
            if dimensions.is_empty() {
                dimensions.push(g.below(r));
            }
            b.eqn(Primitive::Rev { dimensions }, vec![x.into()])?;
        }
        28 => {
            let x = b.of(g, |a| a.dtype != DType::Bool)?;
            let prim = match b.aval(x).dtype {
                DType::F32 if g.chance(30) => Primitive::BitcastConvertType { new_dtype: DType::I32 },
                DType::I32 => Primitive::BitcastConvertType { new_dtype: DType::F32 },
                _ => Primitive::Round {
                    rounding_method: g.pick(&[RoundingMethod::AwayFromZero, RoundingMethod::ToNearestEven]),
                },
            };
            b.eqn(prim, vec![x.into()])?;
        }
        31 => windows::conv(b, g)?,
        32 => windows::window(b, g)?,
        33 => {
            // A cond on an index that may be out of range (the last branch runs), one
            // branch per op, and an empty2 (zeros) beside it.
            let x = b.of(g, is_float)?;
            let aval = b.aval(x);
            let ops = [UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Neg, UnaryOp::Sin];
            let branches: Vec<ClosedJaxpr> =
                (0..2 + g.below(2)).map(|_| ClosedJaxpr::new(inner_unary(&aval, g.pick(&ops)))).collect();
            let index = match b.of(g, |a| a.dtype == DType::I32 && a.rank() == 0) {
                Some(v) if g.chance(70) => v.into(),
                _ => lit(DType::I32, g.pick(&[-1.0, 0.0, 1.0, 2.0, 9.0])),
            };
            b.eqn(Primitive::Cond { branches }, vec![index, x.into()])?;
            b.eqn(Primitive::Empty2 { dtype: aval.dtype, memory_space: MemorySpace::Device }, vec![])?;
        }
        34 | 35 => {
            // `while k < n: (k, x) = (k + 1, op(x))`, with n an operand (a cond const).
            let x = b.of(g, is_float)?;
            let aval = b.aval(x);
            let op = g.pick(&[UnaryOp::Tanh, UnaryOp::Neg, UnaryOp::Sin]);
            let prim = Primitive::While {
                cond_jaxpr: ClosedJaxpr::new(while_cond(&aval)),
                body_jaxpr: ClosedJaxpr::new(while_body(&aval, op)),
                cond_nconsts: 1,
                body_nconsts: 0,
            };
            let n = match b.of(g, |a| a.dtype == DType::I32 && a.rank() == 0) {
                Some(v) if g.chance(50) => v.into(),
                _ => lit(DType::I32, g.pick(&[-1.0, 0.0, 1.0, 3.0])),
            };
            b.eqn(prim, vec![n, lit(DType::I32, 0.0), x.into()])?;
        }
        36 => {
            // Threefry: raw key words wrapped, split, folded, turned into bits, unwrapped;
            // or keys seeded from an integer.
            let n = g.pick(&[1usize, 2, 3]);
            let keys = if g.chance(70) {
                let raw = b.input(Aval::new(DType::U32, vec![n, 2]));
                b.eqn(Primitive::RandomWrap, vec![raw.into()])?[0]
            } else {
                let seeds = b.input(Aval::new(g.pick(&[DType::I32, DType::U32, DType::I64, DType::U8]), vec![n]));
                b.eqn(Primitive::RandomSeed, vec![seeds.into()])?[0]
            };
            let split = b.eqn(Primitive::RandomSplit { shape: vec![g.pick(&[1usize, 2, 4])] }, vec![keys.into()])?[0];
            let folded =
                b.eqn(Primitive::RandomFoldIn, vec![split.into(), lit(DType::I32, g.pick(&[0.0, 7.0, -1.0]))])?[0];
            let bits = Primitive::RandomBits { bit_width: g.pick(&[8, 32]), shape: vec![g.pick(&[1usize, 3, 5])] };
            b.eqn(bits, vec![folded.into()])?;
            b.eqn(Primitive::RandomUnwrap, vec![keys.into()])?;
        }
        _ if g.chance(50) => indexing(b, g)?,
        _ => {
            let c = b.of(g, |a| a.dtype == DType::F32 && a.rank() <= 2)?;
            let ca = b.aval(c);
            let length = g.pick(&[0, 1, 3, 4]);
            let xs = b.input(Aval::new(DType::F32, [&[length][..], &ca.shape].concat()));
            let body = ClosedJaxpr::new(scan_body(&ca, &ca));
            let prim =
                Primitive::Scan { jaxpr: body, length, reverse: g.chance(50), num_consts: 1, num_carry: 1, unroll: 1 };
            b.eqn(prim, vec![lit(DType::F32, 0.5), c.into(), xs.into()])?;
        }
    }
    Some(())
}

fn index_atoms(b: &mut Builder, g: &mut Gen, rank: usize) -> Vec<Atom> {
    (0..rank)
        .map(|_| match b.of(g, |a| a.dtype.is_integer() && a.rank() == 0) {
            Some(v) if g.chance(50) => v.into(),
            _ => lit(DType::I32, g.pick(&[-1.0, 0.0, 1.0, 2.0, 9.0])),
        })
        .collect()
}

fn program(seed: u64) -> Jaxpr {
    let mut g = Gen(seed);
    let mut b = Builder { jaxpr: Jaxpr::default(), pool: Vec::new() };
    for _ in 0..g.below(3) + 1 {
        let (dtype, shape) = (g.dtype(), g.shape());
        b.input(Aval::new(dtype, shape));
    }
    if g.chance(15) {
        let shape = g.shape();
        b.input(Aval::new(DType::Key, shape));
    }
    b.input(Aval::scalar(if g.chance(70) {
        DType::I32
    } else {
        g.pick(&[DType::I8, DType::U8, DType::I64, DType::U32])
    }));
    let mut made = 0;
    for _ in 0..40 {
        if made >= 2 + g.below(6) {
            break;
        }
        if step(&mut b, &mut g).is_some() {
            made += 1;
        }
    }
    let k = b.pool.len();
    let mut outs: Vec<Atom> = b.pool[k.saturating_sub(g.below(3) + 1)..].iter().map(|&v| v.into()).collect();
    // Sometimes also an early value: an output written long before the end, beside the late
    // ones whose memory the planner lends to values that die before they are written.
    if k > 0 && g.chance(30) {
        outs.insert(0, b.pool[g.below(k)].into());
    }
    b.jaxpr.outvars = outs;
    b.jaxpr
}

/// 1,024 programs, or `REMAT_RANDOM_CASES` for a longer search.
/// The run's seeds: a fixed sequence by default, so that CI checks the same programs every
/// time; `REMAT_RANDOM_SEED=N` explores another sequence (`random` a fresh one each run).
/// Exploration has found disagreements a fixed run does not reach (docs/jit.md, "Known
/// gaps").
fn rng_seed() -> proptest::test_runner::RngSeed {
    use proptest::test_runner::RngSeed;
    match std::env::var("REMAT_RANDOM_SEED").ok().as_deref() {
        Some("random") => RngSeed::Random,
        Some(n) => n.parse().map_or(RngSeed::Fixed(0), RngSeed::Fixed),
        None => RngSeed::Fixed(0x5eed_2026),
    }
}

fn cases() -> u32 {
    std::env::var("REMAT_RANDOM_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1024)
}

/// Whether the JIT computes every value of `jaxpr` with the same operations, in the same
/// order, as the interpreter: no transcendentals (inline polynomials, within 2 ulp of libm),
/// no `pow`, no float sums or products (summed in other orders). Such programs must agree
/// bit for bit, integers, 16-bit floats and keys included.
fn exact(jaxpr: &Jaxpr) -> bool {
    jaxpr.eqns.iter().all(|e| {
        let float_in = || e.invars.first().is_some_and(|a| jaxpr.atom_aval(a).dtype.is_float());
        let ok = match &e.primitive {
            Primitive::Unary(op) => {
                !(matches!(
                    op,
                    UnaryOp::Exp
                        | UnaryOp::Log
                        | UnaryOp::Log1p
                        | UnaryOp::Expm1
                        | UnaryOp::Sin
                        | UnaryOp::Cos
                        | UnaryOp::Tan
                        | UnaryOp::Tanh
                        | UnaryOp::Logistic
                ) || (remat_math::UNARY_OPS.contains(op) && float_in()))
            }
            Primitive::Binary(BinaryOp::Pow) => false,
            // The special functions are one library for both backends, but a 16-bit
            // result may round from a 1-ulp different f32 one; compared within tolerance.
            Primitive::Binary(op) if remat_math::BINARY_OPS.contains(op) && float_in() => false,
            // Float accumulations: the backends may sum in different orders.
            Primitive::Reduce { op: ReduceOp::Sum, .. }
            | Primitive::DotGeneral { .. }
            | Primitive::ConvGeneralDilated(_)
            | Primitive::ReduceWindow { op: ReduceOp::Sum, .. }
            | Primitive::SelectAndScatterAdd { .. }
            | Primitive::Cumulative { .. }
            | Primitive::Scatter { .. } => !float_in(),
            _ => true,
        };
        ok && e.primitive.subjaxprs().into_iter().all(|j| exact(j))
    })
}

/// Within float tolerance: f32/f64 (and integers) at `rel 1e-4, abs 1e-5`, the 16-bit
/// floats at about one ulp of their own (a 2-ulp f32 difference of a transcendental can
/// round to neighbouring narrow values).
fn close(what: &str, got: &[remat_ir::Array], want: &[remat_ir::Array]) -> Result<(), String> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (rel, abs) = match w.dtype() {
            DType::BF16 => (1.0 / 64.0, 1e-3),
            DType::F16 => (1.0 / 512.0, 1e-4),
            _ => (1e-4, 1e-5),
        };
        let what = format!("{what} {i}");
        remat_testkit::check_close(&what, std::slice::from_ref(g), std::slice::from_ref(w), rel, abs)?;
    }
    Ok(())
}

/// An argument with some elements replaced by the values where dtypes differ: NaN, ±inf,
/// -0, subnormals and the largest finite values of the floats; the ends of every integer
/// range (overflow, `MIN / -1`, unsigned values near the top).
fn with_specials(a: remat_ir::Array, g: &mut Gen) -> remat_ir::Array {
    use remat_ir::{bf16, f16, Array};
    fn sprinkle<T: Copy>(x: ndarray::ArrayD<T>, g: &mut Gen, percent: usize, sp: &[T]) -> ndarray::ArrayD<T> {
        x.mapv(|v| if g.chance(percent) { g.pick(sp) } else { v })
    }
    match a {
        Array::F32(x) => {
            Array::F32(sprinkle(x, g, 4, &[f32::NAN, f32::INFINITY, -0.0, 1e-40, 3e38, 1.0 + 1.0 / 256.0]))
        }
        Array::F64(x) => Array::F64(sprinkle(x, g, 4, &[f64::NAN, f64::NEG_INFINITY, -0.0, 1e300, 1e-310])),
        Array::BF16(x) => Array::BF16(sprinkle(
            x,
            g,
            10,
            &[bf16::NAN, bf16::INFINITY, bf16::NEG_ZERO, bf16::from_bits(1), bf16::MAX, bf16::from_f32(1.0078125)],
        )),
        Array::F16(x) => Array::F16(sprinkle(
            x,
            g,
            10,
            &[f16::NAN, f16::NEG_INFINITY, f16::NEG_ZERO, f16::from_bits(1), f16::MAX, f16::MIN_POSITIVE],
        )),
        Array::I8(x) => Array::I8(sprinkle(x, g, 20, &[i8::MIN, i8::MAX, -1, 0])),
        Array::I16(x) => Array::I16(sprinkle(x, g, 20, &[i16::MIN, i16::MAX, -1, 0])),
        Array::I32(x) => Array::I32(sprinkle(x, g, 20, &[i32::MIN, i32::MAX, -1, 0])),
        Array::I64(x) => Array::I64(sprinkle(x, g, 20, &[i64::MIN, i64::MAX, -1, 0])),
        Array::U8(x) => Array::U8(sprinkle(x, g, 20, &[u8::MAX, u8::MAX - 1, 128, 0])),
        Array::U32(x) => Array::U32(sprinkle(x, g, 20, &[u32::MAX, u32::MAX - 1, 1 << 31, 0])),
        other @ (Array::Bool(_) | Array::Key(_)) => other,
    }
}

/// `a` with its floats beyond `1e30` in magnitude (the largest finite specials of `f32`
/// and `bf16`) replaced by 1.
fn without_largest(a: remat_ir::Array) -> remat_ir::Array {
    use remat_ir::{bf16, Array};
    let big = |x: f32| x.is_finite() && x.abs() > 1e30;
    match a {
        Array::F32(x) => Array::F32(x.mapv(|v| if big(v) { 1.0 } else { v })),
        Array::BF16(x) => Array::BF16(x.mapv(|v| if big(v.to_f32()) { bf16::ONE } else { v })),
        other => other,
    }
}

fn check(seed: u64) -> Result<(), String> {
    let jaxpr = program(seed);
    remat_ir::verify(&jaxpr).map_err(|e| format!("seed {seed}: generated program does not verify: {e}"))?;
    let mut rng = Rng(seed);
    let mut g = Gen(seed ^ 0x5eed);
    // A convolution's sums run in another order in the JIT (a GEMM's): near the top of the
    // f32 range one order overflows where the other does not (`inf` against a finite sum,
    // or `inf - inf` against `inf`). Its programs keep every other special (NaN and `inf`
    // meet padding and dilation holes), but not the largest finite values.
    let has_conv = count_eqns(&jaxpr, &|p| matches!(p, Primitive::ConvGeneralDilated(_))) > 0;
    let args: Vec<remat_ir::Array> = jaxpr
        .in_avals()
        .iter()
        .map(|a| with_specials(rng.array(a), &mut g))
        .map(|a| if has_conv { without_largest(a) } else { a })
        .collect();
    let scopes = [CseScope::Off, CseScope::Auto, CseScope::AcrossCheckpoints];
    let options: Vec<Options> = scopes.into_iter().map(|cse| Options { cse, ..Options::default() }).collect();
    let compare = if exact(&jaxpr) { check_bits } else { close };
    differential_by(&format!("seed {seed}"), &jaxpr, &args, &options, &compare)
        .map_err(|e| format!("{e}\n{}", remat_ir::pp_jaxpr(&jaxpr)))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        rng_seed: rng_seed(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_programs_agree_with_the_interpreter(seed in any::<u64>()) {
        if std::env::var_os("REMAT_RANDOM_TRACE").is_some() {
            // Each seed before its run: names the program when a run aborts the process.
            eprintln!("seed {seed}");
        }
        check(seed).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn the_generator_covers_every_primitive() {
    let mut seen = std::collections::HashSet::new();
    for seed in 0..3000u64 {
        for e in &program(seed).eqns {
            seen.insert(e.primitive.name());
        }
    }
    let sizes: Vec<usize> = (0..1024u64).map(|s| program(s).eqns.len()).collect();
    let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
    assert!(mean >= 3.0, "programs are too small: {mean} equations on average");
    let missing: Vec<&str> = Primitive::all_names().into_iter().filter(|n| !seen.contains(n)).collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
}

/// Every dtype occurs as a value, and as a conversion's source and target; most programs
/// must agree bit for bit (no transcendental or float sum in them).
#[test]
fn the_generator_covers_every_dtype_and_conversion() {
    let (mut values, mut conversions) = (std::collections::HashSet::new(), std::collections::HashSet::new());
    let mut exact_programs = 0;
    for seed in 0..3000u64 {
        let j = program(seed);
        exact_programs += usize::from(exact(&j));
        values.extend(j.vars.iter().map(|d| d.aval.dtype));
        for e in &j.eqns {
            if let Primitive::ConvertElementType { new_dtype, .. } = e.primitive {
                conversions.insert((j.atom_aval(&e.invars[0]).dtype, new_dtype));
            }
        }
    }
    let missing: Vec<DType> = DType::ALL.into_iter().filter(|d| !values.contains(d)).collect();
    assert!(missing.is_empty(), "dtypes never generated: {missing:?}");
    let value_dtypes = DType::ALL.len() - 1;
    assert!(
        conversions.len() >= value_dtypes * value_dtypes * 3 / 4,
        "only {} of {} conversion pairs generated",
        conversions.len(),
        value_dtypes * value_dtypes
    );
    assert!(exact_programs >= 1500, "only {exact_programs} of 3000 programs are checked bit for bit");
}

/// The equations that compute (calls not counted), bodies included: inlining keeps the
/// count, merging lowers it.
fn eqn_count(jaxpr: &Jaxpr) -> usize {
    count_eqns(jaxpr, &|p| p.subjaxprs().is_empty())
}

/// The repeated equations give the CSE real work: it merges equations in many programs, and
/// merges more across checkpoints than within them in some.
#[test]
fn the_generator_gives_cse_work_within_and_across_checkpoints() {
    let (mut within, mut across) = (0, 0);
    for seed in 0..1000u64 {
        let jaxpr = program(seed);
        let w = remat_jit::cse(&jaxpr, CseScope::WithinCheckpoints).expect("cse");
        let a = remat_jit::cse(&jaxpr, CseScope::AcrossCheckpoints).expect("cse");
        remat_ir::verify(&w).expect("verifies");
        remat_ir::verify(&a).expect("verifies");
        within += usize::from(eqn_count(&w) < eqn_count(&jaxpr));
        across += usize::from(eqn_count(&a) < eqn_count(&w));
    }
    eprintln!("merged within checkpoints in {within} programs, more across them in {across}");
    assert!(within >= 100, "CSE merged equations in only {within} of 1000 programs");
    assert!(across >= 20, "CSE across checkpoints did more in only {across} of 1000 programs");
}

/// The programs give the planner's output lending real work: in some of them a value that
/// dies before an output is written lives in that output's memory (and the differential
/// check above runs them into garbage-filled outputs too).
#[test]
fn the_generator_gives_values_that_live_in_outputs() {
    let lent = (0..300u64)
        .filter(|&seed| {
            let compiled = remat_jit::compile(&program(seed)).expect("compiles");
            compiled.plan().buffers_in_outputs > 0
        })
        .count();
    eprintln!("values in outputs' memory in {lent} of 300 programs");
    assert!(lent >= 15, "only {lent} of 300 programs keep a value in an output's memory");
}

/// One indexing, sorting or cumulative equation on a random operand (index inputs hold
/// -4..=4, so every out-of-bounds mode is exercised).
fn indexing(b: &mut Builder, g: &mut Gen) -> Option<()> {
    let x = b.of(g, |a| a.rank() > 0)?;
    let xa = b.aval(x);
    let (r, axis) = (xa.rank(), g.below(xa.rank()));
    let n = xa.shape[axis];
    let others: Vec<usize> = (0..r).filter(|&d| d != axis).collect();
    let mode = g.pick(&[GatherScatterMode::Clip, GatherScatterMode::FillOrDrop, GatherScatterMode::PromiseInBounds]);
    match g.below(7) {
        0 => {
            let first = g.below(n + 1);
            b.eqn(Primitive::Split { axis, sizes: vec![first, n - first] }, vec![x.into()])?;
        }
        1 | 2 => {
            // `take` along `axis` (offset dims the others), or `take_along_axis` (the
            // others batching dims).
            let along = g.chance(50);
            let k = g.dim();
            let (idx_shape, dn, slice_sizes) = if along {
                let mut shape = xa.shape.clone();
                shape[axis] = k;
                shape.push(1);
                let dn = GatherDimensionNumbers {
                    offset_dims: Vec::new(),
                    collapsed_slice_dims: vec![axis],
                    start_index_map: vec![axis],
                    operand_batching_dims: others.clone(),
                    start_indices_batching_dims: others.clone(),
                };
                (shape, dn, vec![1; r])
            } else {
                let mut sizes = xa.shape.clone();
                sizes[axis] = 1;
                let dn = GatherDimensionNumbers {
                    offset_dims: (1..r).collect(),
                    collapsed_slice_dims: vec![axis],
                    start_index_map: vec![axis],
                    ..Default::default()
                };
                (vec![k, 1], dn, sizes)
            };
            let idx = b.input(Aval::new(DType::I32, idx_shape));
            let fill_value = if g.chance(50) { None } else { Some(FillValue::Int(1)) };
            let prim = Primitive::Gather {
                dimension_numbers: dn,
                fill_value,
                indices_are_sorted: false,
                mode,
                slice_sizes,
                unique_indices: false,
            };
            b.eqn(prim, vec![x.into(), idx.into()])?;
        }
        3 => {
            let op = g.pick(&ScatterOp::ALL);
            let k = g.dim();
            let idx = b.input(Aval::new(DType::I32, vec![k, 1]));
            let mut upd = vec![k];
            upd.extend(others.iter().map(|&d| xa.shape[d]));
            let updates = b.input(Aval::new(xa.dtype, upd));
            let dn = ScatterDimensionNumbers {
                update_window_dims: (1..r).collect(),
                inserted_window_dims: vec![axis],
                scatter_dims_to_operand_dims: vec![axis],
                ..Default::default()
            };
            let prim = Primitive::Scatter {
                op,
                dimension_numbers: dn,
                indices_are_sorted: false,
                mode,
                unique_indices: false,
                update_jaxpr: None,
            };
            b.eqn(prim, vec![x.into(), idx.into(), updates.into()])?;
        }
        4 => {
            let y = b.input(Aval::new(g.dtype(), xa.shape.clone()));
            let num_keys = g.pick(&[1, 1, 2]);
            b.eqn(Primitive::Sort { dimension: axis, is_stable: true, num_keys }, vec![x.into(), y.into()])?;
        }
        5 => {
            if n > 0 && g.chance(50) {
                b.eqn(Primitive::Argmin { axes: vec![axis], index_dtype: DType::I32 }, vec![x.into()])?;
            } else {
                b.eqn(Primitive::TopK { axis, k: g.below(n + 1) }, vec![x.into()])?;
            }
        }
        _ => {
            let op = g.pick(&CumulativeOp::ALL);
            b.eqn(Primitive::Cumulative { op, axis, reverse: g.chance(50) }, vec![x.into()])?;
        }
    }
    Some(())
}

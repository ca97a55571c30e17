//! The random-program generator and the JIT-vs-interpreter comparison, shared by the
//! differential test (`tests/random_programs.rs`) and the fuzz harness
//! (`examples/fuzz_programs.rs`), which include this file by path.
//!
//! The generator builds programs through the IR's own shape rules (a candidate equation the
//! rules reject is redrawn), so every program verifies. It covers every primitive, every
//! dtype, 0-sized and 1-sized dimensions, scalar and unit-axis broadcasting, lengths that
//! are not multiples of 4, calls, scans, host round trips, convolutions and windows
//! (`windows.rs`), and repeated equations (which the JIT's CSE merges, within checkpoints
//! and across them). Loop bodies, cond branches and call bodies are random programs of the
//! same steps, nested up to two deep (`loops.rs`); integer indices are computed as JAX
//! computes a traced index and feed the indexing primitives, carried and stacked by loops
//! (`index.rs`); one program in five is a whole value-and-grad program made by remat's
//! autodiff (`grad.rs`). [`check`] compiles a program under every CSE scope and compares each
//! run with the interpreter's: bit for bit where the operations are exact ([`exact`]),
//! within the bounds [`close`] documents where they are not.

#[path = "compare.rs"]
pub(crate) mod compare;
#[path = "grad.rs"]
mod grad;
#[path = "index.rs"]
mod index;
#[path = "loops.rs"]
mod loops;
#[path = "windows.rs"]
mod windows;

use std::sync::Arc;

use crate::common::{check_bits, count_eqns, differential_by};
pub(crate) use compare::{close, exact};
use remat_ir::{
    shape_rule, Atom, Aval, BinaryOp, ClosedJaxpr, CompareOp, CopySemantics, CumulativeOp, DType, DotDimensionNumbers,
    Eqn, FftType, FillValue, GatherDimensionNumbers, GatherScatterMode, Jaxpr, LitValue, Literal, MemorySpace,
    Primitive, ReduceOp, RoundingMethod, ScatterDimensionNumbers, ScatterOp, SourceInfo, UnaryDomain, UnaryOp, Var,
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
    /// A conversion's target: a value dtype, or (one time in four) a complex one.
    fn conversion_dtype(&mut self) -> DType {
        match self.chance(25) {
            true => self.pick(&[DType::C64, DType::C128]),
            false => self.dtype(),
        }
    }
}

/// A literal of `dtype` (`f32` for keys, which have none: the shape rules then reject the
/// equation).
fn lit(dtype: DType, x: f64) -> Atom {
    let value = LitValue::try_from_f64(dtype, x).unwrap_or(LitValue::F32(x as f32));
    Atom::Lit(Literal::new(value))
}

struct Builder {
    jaxpr: Jaxpr,
    /// Device values available as operands.
    pool: Vec<Var>,
    /// How many bodies deep this jaxpr is (0: the program itself; see `loops.rs`).
    depth: usize,
    /// The `i32[]` indices computed so far (`index.rs`), which later steps read again and
    /// loop bodies return as carries and stacked outputs.
    indices: Vec<Var>,
    /// Results of loops, branches and calls that the jaxpr returns (they would be dead code
    /// otherwise, which the JIT never runs).
    results: Vec<Var>,
    /// Complex values (`c64`, `c128`): kept out of `pool`, read only by [`complex_step`]
    /// and conversions, so that they never become a loop's carry (the JIT refuses those).
    complex: Vec<Var>,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            jaxpr: Jaxpr::default(),
            pool: Vec::new(),
            depth: 0,
            indices: Vec::new(),
            results: Vec::new(),
            complex: Vec::new(),
        }
    }

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
            if self.jaxpr.aval(v).dtype.is_complex() {
                self.complex.push(v);
            } else if self.jaxpr.aval(v).memory_space == MemorySpace::Device {
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

/// `(n, k, x) -> k < min(n, 5)` (a bounded trip count whatever `n` is); `n` and `k` of
/// shape `batch` (a batched predicate, one trip count per row of `x`, when not empty).
fn while_cond(x: &Aval, batch: &[usize]) -> Arc<Jaxpr> {
    let mut j = Jaxpr::default();
    let counter = Aval::new(DType::I32, batch.to_vec());
    let (n, k, xv) = (j.new_var(counter.clone()), j.new_var(counter.clone()), j.new_var(x.clone()));
    j.invars = vec![n, k, xv];
    let m = j.new_var(counter);
    j.eqns.push(Eqn::new(
        Primitive::Binary(BinaryOp::Min),
        vec![n.into(), lit(DType::I32, 5.0)],
        vec![m],
        SourceInfo::unknown(),
    ));
    let p = j.new_var(Aval::new(DType::Bool, batch.to_vec()));
    j.eqns.push(Eqn::new(Primitive::Compare(CompareOp::Lt), vec![k.into(), m.into()], vec![p], SourceInfo::unknown()));
    j.outvars = vec![p.into()];
    Arc::new(j)
}

/// `(k, x) -> (k + 1, op(x))`, `k` of shape `batch`.
fn while_body(x: &Aval, op: UnaryOp, batch: &[usize]) -> Arc<Jaxpr> {
    let mut j = Jaxpr::default();
    let counter = Aval::new(DType::I32, batch.to_vec());
    let (k, xv) = (j.new_var(counter.clone()), j.new_var(x.clone()));
    j.invars = vec![k, xv];
    let k1 = j.new_var(counter);
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
    match g.below(47) {
        0 | 1 => {
            let op = g.pick(&UnaryOp::ALL);
            let mut x = b.of(g, |a| match op.domain() {
                UnaryDomain::Any => true,
                UnaryDomain::Number => is_num(a),
                UnaryDomain::IntOrBool => !a.dtype.is_float(),
                UnaryDomain::Int => a.dtype.is_integer(),
                UnaryDomain::Float | UnaryDomain::FloatOrComplex => a.dtype.is_float(),
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
                BinaryOp::Pow
                | BinaryOp::Atan2
                | BinaryOp::Nextafter
                | BinaryOp::Polygamma
                | BinaryOp::Igamma
                | BinaryOp::Igammac
                | BinaryOp::IgammaGradA
                | BinaryOp::Zeta => b.of(g, is_float)?,
                BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => b.of(g, |a| !a.dtype.is_float())?,
                BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic => {
                    b.of(g, |a| a.dtype == DType::I32)?
                }
                BinaryOp::Mulhi => b.of(g, |a| a.dtype.is_integer())?,
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
            if d.is_float() && g.chance(25) {
                // regularized_incomplete_beta of scalar a and b at x clamped into [0, 1].
                let u = b.eqn(Primitive::Clamp, vec![lit(d, 0.0), x.into(), lit(d, 1.0)])?[0];
                let (a, bb) = (lit(d, g.pick(&[0.5, 2.0, 30.0])), lit(d, g.pick(&[1.0, 3.5])));
                b.eqn(Primitive::RegularizedIncompleteBeta, vec![a, bb, u.into()])?;
            } else {
                b.eqn(Primitive::Clamp, vec![lit(d, -0.5), x.into(), lit(d, 0.75)])?;
            }
        }
        8 => {
            let x = match b.complex.is_empty() || g.chance(60) {
                true => b.of(g, |_| true)?,
                false => b.complex[g.below(b.complex.len())],
            };
            let y = b.eqn(
                Primitive::ConvertElementType { new_dtype: g.conversion_dtype(), weak_type: false },
                vec![x.into()],
            )?[0];
            // A complex value goes back to a real one that later steps read (complex values
            // stay out of the pool, and an unread one is dead code).
            if b.aval(y).dtype.is_complex() {
                b.eqn(Primitive::ConvertElementType { new_dtype: g.dtype(), weak_type: false }, vec![y.into()])?;
            }
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
            let op = g.pick(&ReduceOp::ALL);
            let x = b.of(g, |a| {
                a.rank() > 0
                    && match op {
                        ReduceOp::Sum | ReduceOp::Prod => a.dtype != DType::Bool,
                        ReduceOp::Max | ReduceOp::Min => true,
                        ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => !a.dtype.is_float(),
                    }
            })?;
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
                Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type: pref, precision: None },
                vec![x.into(), y.into()],
            )?;
        }
        23 => {
            let x = b.of(g, |_| true)?;
            let put = |m| Primitive::DevicePut { devices: vec![m], copy_semantics: vec![CopySemantics::AlwaysCopy] };
            let h = b.eqn(put(Some(MemorySpace::Host)), vec![x.into()])?[0];
            // `jax.device_put(h)` without a target: it stays in host memory.
            let h = b.eqn(put(None), vec![h.into()])?[0];
            b.eqn(put(Some(MemorySpace::Device)), vec![h.into()])?;
            b.eqn(Primitive::Name { name: "n".into() }, vec![x.into()])?;
        }
        24 => {
            let x = b.of(g, is_float)?;
            let op = g.pick(&[UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Neg, UnaryOp::Sin]);
            let inner = inner_unary(&b.aval(x), op);
            let prim = match g.below(4) {
                // A `closed_call` where the body negates or takes a sine (chosen without a
                // draw, so the other programs stay as they were).
                0 if matches!(op, UnaryOp::Neg | UnaryOp::Sin) => {
                    Primitive::ClosedCall { call_jaxpr: ClosedJaxpr::new(inner) }
                }
                // A `composite` where the body takes a tanh.
                0 if op == UnaryOp::Tanh => Primitive::Composite {
                    name: "my.tanh".into(),
                    attributes: remat_ir::Param::Tuple(vec![]),
                    version: 0,
                    jaxpr: ClosedJaxpr::new(inner),
                },
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
        25 | 26 | 30 | 45 => {
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
            if g.chance(20) {
                // `jnp.diagonal`'s selection by platform: a `platform_index` over entries
                // for other platforms, `cpu` and the default, in some order.
                let n = branches.len();
                let mut platforms: Vec<Option<Vec<String>>> = (0..n)
                    .map(|i| Some(vec![g.pick(&["mosaic", "cuda", "rocm"]).to_string(), format!("p{i}")]))
                    .collect();
                platforms[g.below(n)] = if g.chance(50) { Some(vec!["cpu".to_string()]) } else { None };
                let index = b.eqn(Primitive::PlatformIndex { platforms: platforms.clone() }, vec![])?[0];
                let prim = Primitive::Cond { branches, branches_platforms: Some(platforms) };
                b.eqn(prim, vec![index.into(), x.into()])?;
                return Some(());
            }
            let index = match b.of(g, |a| a.dtype == DType::I32 && a.rank() == 0) {
                Some(v) if g.chance(70) => v.into(),
                _ => lit(DType::I32, g.pick(&[-1.0, 0.0, 1.0, 2.0, 9.0])),
            };
            b.eqn(Primitive::Cond { branches, branches_platforms: None }, vec![index, x.into()])?;
            b.eqn(Primitive::Empty2 { dtype: aval.dtype, memory_space: MemorySpace::Device }, vec![])?;
        }
        34 | 35 => {
            // `while k < n: (k, x) = (k + 1, op(x))`, with n an operand (a cond const); or,
            // for a rank > 0 x, the batched predicate `vmap` makes: one counter per row,
            // rows that are done keep their value.
            let x = b.of(g, is_float)?;
            let aval = b.aval(x);
            let op = g.pick(&[UnaryOp::Tanh, UnaryOp::Neg, UnaryOp::Sin]);
            let batch: Vec<usize> = if aval.rank() > 0 && g.chance(40) { vec![aval.shape[0]] } else { vec![] };
            let prim = Primitive::While {
                cond_jaxpr: ClosedJaxpr::new(while_cond(&aval, &batch)),
                body_jaxpr: ClosedJaxpr::new(while_body(&aval, op, &batch)),
                cond_nconsts: 1,
                body_nconsts: 0,
            };
            let (n, k) = if batch.is_empty() {
                let n = match b.of(g, |a| a.dtype == DType::I32 && a.rank() == 0) {
                    Some(v) if g.chance(50) => v.into(),
                    _ => lit(DType::I32, g.pick(&[-1.0, 0.0, 1.0, 3.0])),
                };
                (n, lit(DType::I32, 0.0))
            } else {
                let counter = Aval::new(DType::I32, batch.clone());
                let n = b.input(counter.clone());
                let zeros = Primitive::BroadcastInDim { shape: batch.clone(), broadcast_dimensions: vec![] };
                let k = b.eqn(zeros, vec![lit(DType::I32, 0.0)])?[0];
                (n.into(), k.into())
            };
            b.eqn(prim, vec![n, k, x.into()])?;
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
            let folded = b.eqn(Primitive::RandomClone, vec![folded.into()])?[0];
            let bits = Primitive::RandomBits { bit_width: g.pick(&[8, 32]), shape: vec![g.pick(&[1usize, 3, 5])] };
            b.eqn(bits, vec![folded.into()])?;
            let words = b.eqn(Primitive::RandomUnwrap, vec![keys.into()])?[0];
            // Threefry's parts on the words (no draw, so the rest of the program is as before):
            // the row-major counters of `u32[n,2]` hashed under the words.
            let counts = b.eqn(Primitive::Iota2x32Shape { shape: vec![n, 2] }, vec![])?;
            b.eqn(Primitive::Threefry2x32, vec![words.into(), counts[1].into(), counts[0].into(), words.into()])?;
        }
        37 => {
            // Linear algebra: a Cholesky factor of a batch of square matrices, a triangular
            // solve against it or against the matrices themselves, an LU decomposition of a
            // batch of (possibly rectangular) matrices and the permutation its pivots make,
            // a QR decomposition of the same matrices and an eigendecomposition of the
            // square ones, a singular value decomposition and a symmetric product of the
            // rectangular ones, their geqrf (and the product of its reflectors for the tall
            // ones, and their q applied to a matrix), and a tridiagonal solve.
            let dt = g.pick(&[DType::F32, DType::F64]);
            let n = g.pick(&[1usize, 2, 3]);
            let batch: Vec<usize> = if g.chance(30) { vec![2] } else { vec![] };
            let a = b.input(Aval::new(dt, [&batch[..], &[n, n]].concat()));
            let l = b.eqn(Primitive::Cholesky, vec![a.into()])?[0];
            let t = remat_ir::TriangularSolve {
                left_side: g.chance(50),
                lower: g.chance(50),
                transpose_a: g.chance(50),
                conjugate_a: false,
                unit_diagonal: g.chance(30),
            };
            let k = g.pick(&[1usize, 2]);
            let rhs = if t.left_side { [&batch[..], &[n, k]].concat() } else { [&batch[..], &[k, n]].concat() };
            let rhs = b.input(Aval::new(dt, rhs));
            let tri = if g.chance(50) { l } else { a };
            b.eqn(Primitive::TriangularSolve(t), vec![tri.into(), rhs.into()])?;
            let rows = g.pick(&[1usize, 2, 3, 4]);
            let cols = g.pick(&[1usize, 2, 3, 4]);
            let m = b.input(Aval::new(dt, [&batch[..], &[rows, cols]].concat()));
            let pivots = b.eqn(Primitive::Lu, vec![m.into()])?[1];
            let size = rows + g.pick(&[0usize, 2]);
            b.eqn(Primitive::LuPivotsToPermutation { permutation_size: size }, vec![pivots.into()])?;
            let params = remat_ir::Qr { full_matrices: g.chance(50), pivoting: g.chance(30), use_magma: None };
            b.eqn(Primitive::Qr(params), vec![m.into()])?;
            let params =
                remat_ir::Eigh { lower: g.chance(50), sort_eigenvalues: true, subset_by_index: None, algorithm: None };
            b.eqn(Primitive::Eigh(params), vec![a.into()])?;
            let params = remat_ir::Svd {
                full_matrices: g.chance(50),
                compute_uv: g.chance(70),
                subset_by_index: None,
                algorithm: None,
            };
            b.eqn(Primitive::Svd(params), vec![m.into()])?;
            let factored = b.eqn(Primitive::Geqrf, vec![m.into()])?;
            if rows >= cols {
                b.eqn(Primitive::HouseholderProduct, vec![factored[0].into(), factored[1].into()])?;
            }
            let (left, transpose) = (g.chance(50), g.chance(50));
            let side = if left { [&batch[..], &[rows, k]].concat() } else { [&batch[..], &[k, rows]].concat() };
            let c = b.input(Aval::new(dt, side));
            let prim = Primitive::Ormqr { left, transpose };
            b.eqn(prim, vec![factored[0].into(), factored[1].into(), c.into()])?;
            let diag = Aval::new(dt, [&batch[..], &[n]].concat());
            let (dl, d, du) = (b.input(diag.clone()), b.input(diag.clone()), b.input(diag));
            let rhs = b.input(Aval::new(dt, [&batch[..], &[n, k]].concat()));
            let prim = Primitive::TridiagonalSolve { perturb_singular: false };
            b.eqn(prim, vec![dl.into(), d.into(), du.into(), rhs.into()])?;
            let c = b.input(Aval::new(dt, [&batch[..], &[rows, rows]].concat()));
            let (alpha, beta) = (FillValue::Float(g.pick(&[1.0, 0.5])), FillValue::Int(g.pick(&[0, 2])));
            b.eqn(Primitive::SymmetricProduct { alpha, beta }, vec![m.into(), c.into()])?;
        }
        // Random bodies (`loops.rs`) and index arithmetic (`index.rs`).
        39 => loops::scan(b, g, false)?,
        40 => loops::scan(b, g, true)?,
        41 => loops::while_loop(b, g)?,
        42 => loops::cond(b, g)?,
        43 => loops::call(b, g)?,
        44 => index::step(b, g)?,
        46 => complex_step(b, g)?,
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

/// Complex arithmetic: a complex value made of two floats (or a converted one, or an
/// `rfft` of a float), one of the operations JAX defines on complex numbers (`fft` among
/// them), and a real result (`real`, `imag`, `abs`, `irfft`) for later steps.
fn complex_step(b: &mut Builder, g: &mut Gen) -> Option<()> {
    let z = match b.complex.is_empty() || g.chance(50) {
        true if g.chance(20) => {
            let x = b.of(g, |a| matches!(a.dtype, DType::F32 | DType::F64) && a.rank() >= 1)?;
            let n = b.aval(x).shape.len().min(g.pick(&[1, 2, 3]));
            let fft_lengths = b.aval(x).shape[b.aval(x).rank() - n..].to_vec();
            b.eqn(Primitive::Fft { fft_type: FftType::Rfft, fft_lengths }, vec![x.into()])?[0]
        }
        true => {
            let x = b.of(g, |a| matches!(a.dtype, DType::F32 | DType::F64))?;
            let xa = b.aval(x);
            let y = b.of(g, |a| a.dtype == xa.dtype && (a.shape == xa.shape || a.rank() == 0))?;
            b.eqn(Primitive::Complex, vec![x.into(), y.into()])?[0]
        }
        false => b.complex[g.below(b.complex.len())],
    };
    let za = b.aval(z);
    let w = match g.below(5) {
        0 => {
            let op = g.pick(&[BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow]);
            let other = match b.complex.iter().copied().find(|&v| b.aval(v).same_type(&za)) {
                Some(v) if g.chance(50) => v.into(),
                _ => lit(za.dtype, g.pick(&[0.5, -2.0, 0.0])),
            };
            b.eqn(Primitive::Binary(op), vec![z.into(), other])?[0]
        }
        1 => {
            let op = g.pick(&[
                UnaryOp::Neg,
                UnaryOp::Exp,
                UnaryOp::Log,
                UnaryOp::Sin,
                UnaryOp::Cos,
                UnaryOp::Tanh,
                UnaryOp::Sqrt,
                UnaryOp::Square,
                UnaryOp::Sign,
                UnaryOp::Expm1,
                UnaryOp::Log1p,
            ]);
            b.eqn(Primitive::Unary(op), vec![z.into()])?[0]
        }
        2 => b.eqn(Primitive::Conj { input_dtype: za.dtype }, vec![z.into()])?[0],
        3 => b.eqn(Primitive::IntegerPow { y: g.pick(&[2, 3, -1]) }, vec![z.into()])?[0],
        4 if za.rank() >= 1 => {
            let n = za.rank().min(g.pick(&[1, 2, 3]));
            let fft_lengths = za.shape[za.rank() - n..].to_vec();
            let fft_type = g.pick(&[FftType::Fft, FftType::Ifft]);
            b.eqn(Primitive::Fft { fft_type, fft_lengths }, vec![z.into()])?[0]
        }
        _ => z,
    };
    let wa = b.aval(w);
    if wa.rank() >= 1 && g.chance(25) {
        // `irfft` back to a real value: the last length n has n / 2 + 1 terms.
        let m = wa.shape[wa.rank() - 1];
        let last = if m <= 1 { 1 } else { 2 * (m - 1) + g.below(2) };
        b.eqn(Primitive::Fft { fft_type: FftType::Irfft, fft_lengths: vec![last] }, vec![w.into()])?;
        return Some(());
    }
    let back = [Primitive::Real, Primitive::Imag, Primitive::Unary(UnaryOp::Abs)][g.below(3)].clone();
    b.eqn(back, vec![w.into()])?;
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

/// A value of type `aval` for a body's output or an update: one of the builder's (a
/// computed index first, where one fits), else a constant (`broadcast_in_dim` of a literal,
/// or the literal itself for a scalar).
fn value_of(b: &mut Builder, g: &mut Gen, aval: &Aval) -> Option<Atom> {
    let same: Vec<Var> = b.pool.iter().copied().filter(|&v| b.jaxpr.aval(v).same_type(aval)).collect();
    let indices: Vec<Var> = same.iter().copied().filter(|v| b.indices.contains(v)).collect();
    if !indices.is_empty() && g.chance(60) {
        return Some(g.pick(&indices).into());
    }
    if !same.is_empty() && (g.chance(85) || aval.dtype == DType::Key) {
        // The latest values most often: what the body computed last.
        let k = if g.chance(50) { same.len() - 1 - g.below(same.len().min(3)) } else { g.below(same.len()) };
        return Some(same[k].into());
    }
    if aval.dtype == DType::Key {
        return None;
    }
    let x = lit(aval.dtype, g.pick(&[0.0, 1.0, 2.0]));
    if aval.rank() == 0 && g.chance(50) {
        return Some(x);
    }
    let zeros = Primitive::BroadcastInDim { shape: aval.shape.clone(), broadcast_dimensions: vec![] };
    Some(b.eqn(zeros, vec![x]).map_or(x, |v| v[0].into()))
}

pub(crate) fn program(seed: u64) -> Jaxpr {
    made(seed).0
}

/// Program `seed`, and whether it is a value-and-grad (or vjp) program (`grad.rs`).
pub(crate) fn made(seed: u64) -> (Jaxpr, bool) {
    let mut g = Gen(seed);
    // One program in five is a whole value-and-grad program (`grad.rs`), of a program that
    // starts with a `fori_loop` over an f32 input.
    let vg = g.chance(20);
    let mut b = Builder::new();
    let focus = vg.then(|| {
        let shape = [vec![g.pick(&[1, 2, 3, 5])], g.shape()].concat();
        b.input(Aval::new(DType::F32, shape))
    });
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
    if vg {
        // A failed draw leaves inputs behind; the steps below use them.
        let _ = loops::scan_over(&mut b, &mut g, true, focus);
    }
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
    for &r in &b.results {
        if g.chance(80) && !outs.contains(&r.into()) {
            outs.push(r.into());
        }
    }
    b.jaxpr.outvars = outs;
    if vg {
        if let Some(whole) = grad::differentiated(&b.jaxpr, &mut g) {
            return (whole, true);
        }
    }
    (b.jaxpr, false)
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
        other @ (Array::Bool(_) | Array::Key(_) | Array::C64(_) | Array::C128(_)) => other,
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

pub(crate) fn check(seed: u64) -> Result<Verdict, String> {
    check_jaxpr(&program(seed), seed)
}

/// [`check`] of any program, its arguments drawn from `seed` (the harness's `--file`).
pub(crate) fn check_jaxpr(jaxpr: &Jaxpr, seed: u64) -> Result<Verdict, String> {
    let jaxpr = jaxpr.clone();
    remat_ir::verify(&jaxpr).map_err(|e| format!("seed {seed}: the program does not verify: {e}"))?;
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
    let what = format!("seed {seed}");
    if exact(&jaxpr) {
        differential_by(&what, &jaxpr, &args, &options, &check_bits)
            .map(|()| Verdict::Agrees)
            .map_err(|e| format!("{e}\n{}", remat_ir::pp_jaxpr(&jaxpr)))
    } else {
        match differential_by(&what, &jaxpr, &args, &options, &close) {
            Ok(()) => Ok(Verdict::Agrees),
            Err(e) => match compare::locate(&jaxpr, &args) {
                Ok(why) => Ok(Verdict::WithinBounds(format!("{e}\n{why}"))),
                Err(located) => Err(format!("{e}\n{located}\n{}", remat_ir::pp_jaxpr(&jaxpr))),
            },
        }
    }
}

/// How a program that is not a finding compared.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Bit for bit, or within [`close`]'s tolerance.
    Agrees,
    /// Beyond that tolerance, by differences each equation is permitted (`compare.rs`).
    WithinBounds(String),
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
        0 => match g.below(8) {
            // Sharding annotations: the identity on values (a replicated spec on a mesh of
            // two devices, or the parameterless `reshard`).
            5 => {
                let mesh = remat_ir::Mesh {
                    axes: vec![remat_ir::MeshAxis { name: "x".into(), size: 2, axis_type: remat_ir::AxisType::Auto }],
                    abstract_devices: None,
                };
                let sharding = remat_ir::Sharding::Named {
                    mesh,
                    spec: remat_ir::PartitionSpec::default(),
                    memory_kind: Some("device".into()),
                };
                let c = remat_ir::ShardingConstraint {
                    sharding,
                    context_mesh: remat_ir::Mesh::default(),
                    unconstrained_dims: Vec::new(),
                };
                b.eqn(Primitive::ShardingConstraint(Box::new(c)), vec![x.into()])?;
            }
            6 => {
                b.eqn(Primitive::Reshard, vec![x.into()])?;
            }
            // `shard_alike` of the operand and a value of its shape (or itself).
            7 => {
                let y = b.of(g, |a| a.shape == xa.shape && a.dtype == xa.dtype).unwrap_or(x);
                b.eqn(Primitive::ShardAlike, vec![x.into(), y.into()])?;
            }
            // `optimization_barrier` of the operand and any other value.
            4 => {
                let y = b.of(g, |_| true).unwrap_or(x);
                b.eqn(Primitive::OptimizationBarrier, vec![x.into(), y.into()])?;
            }
            // `stack` with a value of the same type (or itself) at any of the r + 1 places.
            1 => {
                let y = b.of(g, |a| a.same_type(&xa)).unwrap_or(x);
                b.eqn(Primitive::Stack { axis: g.below(r + 1) }, vec![x.into(), y.into(), x.into()])?;
            }
            2 if (1..=4).contains(&n) => {
                b.eqn(Primitive::Unstack { axis }, vec![x.into()])?;
            }
            3 => {
                let reps: Vec<usize> = (0..r).map(|_| g.below(3) + 1).collect();
                b.eqn(Primitive::Tile { reps }, vec![x.into()])?;
            }
            _ => {
                let first = g.below(n + 1);
                b.eqn(Primitive::Split { axis, sizes: vec![first, n - first] }, vec![x.into()])?;
            }
        },
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
        5 if g.chance(25) => {
            // `approx_top_k`: exact on CPU, the largest (`top_k`) or the smallest (a sort).
            let prim = Primitive::ApproxTopK {
                k: g.below(n + 1),
                reduction_dimension: axis as i64 - if g.chance(50) { r as i64 } else { 0 },
                recall_target: remat_ir::Param::Float(0.95),
                is_max_k: g.chance(50),
                reduction_input_size_override: -1,
                aggregate_to_topk: true,
            };
            b.eqn(prim, vec![x.into()])?;
        }
        5 if g.chance(20) => {
            // `rng_bit_generator` on a fresh key, u8 or u32 bits of the operand's shape.
            let key = b.input(Aval::new(DType::U32, vec![4]));
            let algorithm = g.pick(&remat_ir::RngAlgorithm::ALL);
            let dtype = g.pick(&[DType::U8, DType::U32]);
            b.eqn(Primitive::RngBitGenerator { algorithm, dtype, shape: xa.shape.clone() }, vec![key.into()])?;
        }
        5 => {
            if n > 0 && g.chance(50) {
                b.eqn(Primitive::Argmin { axes: vec![axis], index_dtype: DType::I32 }, vec![x.into()])?;
            } else {
                b.eqn(Primitive::TopK { axis, k: g.below(n + 1) }, vec![x.into()])?;
            }
        }
        _ if g.chance(25) => {
            // The generic `reduce` with the monoid ab + a + b (numbers only: the combiner's
            // `mul` refuses bool) over `axis`, or over every axis, from 0.
            if !xa.dtype.is_numeric() {
                return None;
            }
            let dimensions = if g.chance(50) { vec![axis] } else { (0..r).collect() };
            let prim = Primitive::GenericReduce {
                computation: remat_ir::Param::Opaque("<function odot at 0xXXXXXXXXXXXX>".into()),
                dimensions,
                jaxpr: Arc::new(odot(xa.dtype)),
            };
            let init = Atom::Lit(Literal::new(LitValue::try_from_f64(xa.dtype, 0.0)?));
            b.eqn(prim, vec![x.into(), init])?;
        }
        _ if g.chance(25) => {
            // The generic `reduce_window` with the same monoid from 1 (not its identity, so
            // skipped padding shows): windows of 1 or 2, strides of 1 or 2, a padded edge.
            if !xa.dtype.is_numeric() {
                return None;
            }
            let rank = xa.rank();
            let window = remat_ir::Window {
                window_dimensions: (0..rank).map(|_| g.below(2) + 1).collect(),
                window_strides: (0..rank).map(|_| g.below(2) + 1).collect(),
                padding: (0..rank).map(|_| (g.below(2) as i64, 0)).collect(),
                base_dilation: vec![1; rank],
                window_dilation: vec![1; rank],
            };
            let prim = Primitive::GenericReduceWindow { jaxpr: Arc::new(odot(xa.dtype)), window };
            let init = Atom::Lit(Literal::new(LitValue::try_from_f64(xa.dtype, 1.0)?));
            b.eqn(prim, vec![x.into(), init])?;
        }
        _ => {
            let op = g.pick(&CumulativeOp::ALL);
            b.eqn(Primitive::Cumulative { op, axis, reverse: g.chance(50) }, vec![x.into()])?;
        }
    }
    Some(())
}

/// `ab + a + b` over scalars of `dtype`: a combiner for the generic `reduce`.
fn odot(dtype: DType) -> Jaxpr {
    let mut j = Jaxpr::default();
    let scalar = Aval::scalar(dtype);
    let (a, b2) = (j.new_var(scalar.clone()), j.new_var(scalar.clone()));
    let (p, q, r) = (j.new_var(scalar.clone()), j.new_var(scalar.clone()), j.new_var(scalar));
    let eqn =
        |prim, x: Var, y: Var, out: Var| Eqn::new(prim, vec![x.into(), y.into()], vec![out], SourceInfo::unknown());
    j.eqns.push(eqn(Primitive::Binary(BinaryOp::Mul), a, b2, p));
    j.eqns.push(eqn(Primitive::Binary(BinaryOp::Add), p, a, q));
    j.eqns.push(eqn(Primitive::Binary(BinaryOp::Add), q, b2, r));
    j.invars = vec![a, b2];
    j.outvars = vec![r.into()];
    j
}

/// The seed of program `i` of the run `run` (splitmix64 of their sum): a run is
/// reproducible from its seed, and each program from its own.
pub(crate) fn program_seed(run: u64, i: u64) -> u64 {
    let mut z = run.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The primitives a program uses, each with the dtype it computes on (its first operand's,
/// or its first result's when it has none), bodies included.
pub(crate) fn coverage(jaxpr: &Jaxpr, counts: &mut std::collections::BTreeMap<(&'static str, String), u64>) {
    for e in &jaxpr.eqns {
        let dtype = match (e.invars.first(), e.outvars.first()) {
            (Some(a), _) => jaxpr.atom_aval(a).dtype,
            (None, Some(&v)) => jaxpr.aval(v).dtype,
            (None, None) => continue,
        };
        *counts.entry((e.primitive.name(), dtype.to_string())).or_default() += 1;
        for body in e.primitive.subjaxprs() {
            coverage(body, counts);
        }
    }
}

/// What a fuzzing run found: programs checked, coverage, and each failing program's seed
/// with its report (the disagreement or panic, and the printed program).
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub programs: u64,
    pub coverage: std::collections::BTreeMap<(&'static str, String), u64>,
    pub findings: Vec<(u64, String)>,
    /// Programs beyond `close`'s tolerance by permitted per-equation differences.
    pub within_bounds: Vec<(u64, String)>,
}

/// Checks programs `program_seed(run, 0)`, `program_seed(run, 1)`, ... while `more(n)` (with
/// `n` programs checked) says so; with `only`, just those that use that primitive (the
/// others are drawn and skipped). `trace` names each program before it runs (on stderr), so
/// that a process abort names its program. A panic is a finding like a disagreement.
pub(crate) fn fuzz(run: u64, only: Option<&str>, trace: bool, mut more: impl FnMut(u64) -> bool) -> Report {
    let mut report = Report::default();
    let mut drawn = 0;
    while more(report.programs) {
        let seed = program_seed(run, drawn);
        drawn += 1;
        // Making a program runs autodiff (`grad.rs`), whose panics are findings too.
        let jaxpr = match std::panic::catch_unwind(|| program(seed)) {
            Ok(jaxpr) => jaxpr,
            Err(p) => {
                report.findings.push((seed, format!("seed {seed}: panic making the program: {}", panic_message(&*p))));
                report.programs += 1;
                continue;
            }
        };
        if only.is_some_and(|name| count_eqns(&jaxpr, &|p| p.name() == name) == 0) {
            continue;
        }
        if trace {
            eprintln!("program {seed}");
        }
        coverage(&jaxpr, &mut report.coverage);
        let result = std::panic::catch_unwind(|| check(seed)).unwrap_or_else(|p| {
            Err(format!("seed {seed}: panic: {}\n{}", panic_message(&*p), remat_ir::pp_jaxpr(&jaxpr)))
        });
        match result {
            Ok(Verdict::Agrees) => {}
            Ok(Verdict::WithinBounds(why)) => report.within_bounds.push((seed, why)),
            Err(e) => report.findings.push((seed, e)),
        }
        report.programs += 1;
    }
    report
}

/// The message a panic carried.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

//! Fused elementwise expressions and the strided views they read.
//!
//! An [`Expr`] is evaluated at every point of one index space (a kernel's loop nest). Its
//! leaves are [`View`]s: a buffer, an element offset and one stride per loop dimension,
//! plus dynamic offsets read at run time (`dynamic_slice` starts, a scan's counter). Layout
//! primitives that only move elements (`broadcast_in_dim`, `transpose`, `slice`, `squeeze`,
//! `expand_dims`, unit-axis `reshape`) are [`IndexMap`]s applied to an expression: they
//! rewrite the strides of its leaves and never touch memory.
//!
//! What it keeps true: a view's `strides` has exactly one entry per dimension of the index
//! space the expression is evaluated in, and every index a view can produce for that space
//! lies inside its buffer (the lowering only builds views from shapes the verifier checked).

use remat_ir::{BinaryOp, CompareOp, DType, LitValue, RoundingMethod, UnaryOp};

/// A buffer of the lowered program (`program`), as views name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BufId(pub u32);

/// A run-time offset: `clamp(*index, 0, max) * stride` elements, `index` an `i32` scalar.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DynTerm {
    pub index: BufId,
    pub max: i64,
    pub stride: i64,
}

/// A strided window onto a buffer, in elements of `dtype`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct View {
    pub buf: BufId,
    pub dtype: DType,
    pub offset: i64,
    pub strides: Vec<i64>,
    pub dynamic: Vec<DynTerm>,
}

impl View {
    /// The whole of a row-major buffer of `shape`.
    pub fn contiguous(buf: BufId, dtype: DType, shape: &[usize]) -> View {
        View { buf, dtype, offset: 0, strides: row_major_strides(shape), dynamic: Vec::new() }
    }

    /// Whether this view reads `shape` row-major from its offset (dynamic terms aside).
    pub fn is_row_major(&self, shape: &[usize]) -> bool {
        let want = row_major_strides(shape);
        self.strides.iter().zip(&want).zip(shape).all(|((s, w), &n)| n <= 1 || s == w)
    }
}

pub(crate) fn row_major_strides(shape: &[usize]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for k in (0..shape.len()).rev() {
        strides[k] = acc;
        acc *= shape[k] as i64;
    }
    strides
}

/// `base + sum(coeffs[j] * index[j])`: the value of an `iota` after index maps.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Affine {
    pub base: i64,
    pub coeffs: Vec<i64>,
}

/// The most nodes an expression recomputed by each of its readers has
/// ([`Expr::is_cheap_derivation`]).
pub(crate) const CHEAP_DERIVATION_NODES: usize = 5;

/// An elementwise expression; every node knows its dtype.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    Load(View),
    Lit(LitValue),
    Iota(DType, Affine),
    /// The dtype is the operand's (the result's, but `bool` for `is_finite`).
    Unary(UnaryOp, DType, Box<Expr>),
    /// The dtype is the result's (a `pow` exponent may be `i32`).
    Binary(BinaryOp, DType, Box<Expr>, Box<Expr>),
    /// The dtype is the operands'; the result is `bool`.
    Compare(CompareOp, DType, Box<Expr>, Box<Expr>),
    IntegerPow(i32, DType, Box<Expr>),
    /// `select_n pred cases...` (dtype of the cases).
    Select(DType, Box<Expr>, Vec<Expr>),
    /// `clamp lo x hi`.
    Clamp(DType, Box<Expr>, Box<Expr>, Box<Expr>),
    Convert {
        from: DType,
        to: DType,
        x: Box<Expr>,
    },
    ReducePrecision {
        dtype: DType,
        exponent_bits: u32,
        mantissa_bits: u32,
        x: Box<Expr>,
    },
    /// `round[rounding_method=m] x` on a float.
    Round(RoundingMethod, DType, Box<Expr>),
    /// `bitcast_convert_type` between dtypes of one width: the same bits.
    Bitcast {
        from: DType,
        to: DType,
        x: Box<Expr>,
    },
    /// A subexpression that occurs more than once in one loop body and is computed once per
    /// point: every occurrence carries the same id and an equal expression (`lower::share`).
    Shared(u32, Box<Expr>),
}

impl Expr {
    pub fn dtype(&self) -> DType {
        match self {
            Expr::Load(v) => v.dtype,
            Expr::Lit(l) => l.dtype(),
            Expr::Unary(UnaryOp::IsFinite, ..) => DType::Bool,
            Expr::Iota(d, _)
            | Expr::Unary(_, d, _)
            | Expr::Binary(_, d, _, _)
            | Expr::IntegerPow(_, d, _)
            | Expr::Select(d, _, _)
            | Expr::Clamp(d, _, _, _)
            | Expr::ReducePrecision { dtype: d, .. }
            | Expr::Round(_, d, _) => *d,
            Expr::Compare(..) => DType::Bool,
            Expr::Convert { to, .. } | Expr::Bitcast { to, .. } => *to,
            Expr::Shared(_, x) => x.dtype(),
        }
    }

    /// Whether the JIT evaluates it over `f32x4` vectors: `f32` throughout, no integer
    /// index arithmetic (`iota`), conversions or precision reductions.
    pub fn vectorizable(&self) -> bool {
        let mut ok = self.dtype() == DType::F32;
        self.visit(&mut |n| {
            ok &= match n {
                Expr::Load(v) => v.dtype == DType::F32,
                Expr::Lit(l) => l.dtype() == DType::F32,
                Expr::Iota(..)
                | Expr::Convert { .. }
                | Expr::ReducePrecision { .. }
                | Expr::Round(..)
                | Expr::Bitcast { .. } => false,
                // Library functions are called one element at a time.
                Expr::Unary(op, d, _) => *d == DType::F32 && op.vectorizable(),
                Expr::IntegerPow(_, d, _) | Expr::Clamp(d, ..) => *d == DType::F32,
                Expr::Binary(op, d, _, y) => *d == DType::F32 && y.dtype() == DType::F32 && op.vectorizable(),
                // The total-order compares work on the bits, in scalar code.
                Expr::Compare(op, d, _, _) => {
                    *d == DType::F32 && !matches!(op, CompareOp::EqTo | CompareOp::LeTo | CompareOp::LtTo)
                }
                Expr::Select(d, p, cases) => *d == DType::F32 && p.dtype() == DType::Bool && cases.len() == 2,
                Expr::Shared(..) => true,
            };
        });
        ok
    }

    /// Whether evaluating it costs nothing beyond reading memory (no arithmetic nodes).
    pub fn is_trivial(&self) -> bool {
        matches!(self, Expr::Load(_) | Expr::Lit(_) | Expr::Iota(..))
    }

    /// Whether this is a short arithmetic function of one view (at most
    /// [`CHEAP_DERIVATION_NODES`] nodes: loads of a single view, literals, `add`, `sub`,
    /// `mul`, `max`, `min`, `neg`, `abs`, `integer_pow`, conversions). A value like that read
    /// more than once is recomputed by each reader instead of being kept in a buffer of its
    /// own (as XLA duplicates cheap elementwise producers into their consumers' fusions):
    /// its view is read anyway, and a kept copy would hold memory until its last reader
    /// (in a value-and-grad program, the backward half).
    pub fn is_cheap_derivation(&self) -> bool {
        let mut view: Option<View> = None;
        let (mut ok, mut nodes) = (true, 0);
        self.visit(&mut |e| {
            nodes += 1;
            match e {
                Expr::Load(v) => match &view {
                    Some(w) if w != v => ok = false,
                    Some(_) => {}
                    None => view = Some(v.clone()),
                },
                Expr::Lit(_) | Expr::Convert { .. } | Expr::IntegerPow(..) => {}
                Expr::Binary(op, ..) => {
                    ok &= matches!(op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min)
                }
                Expr::Unary(op, ..) => ok &= matches!(op, UnaryOp::Neg | UnaryOp::Abs),
                _ => ok = false,
            }
        });
        ok && view.is_some() && nodes <= CHEAP_DERIVATION_NODES
    }

    /// The number of nodes, to bound the size of one fused loop body.
    pub fn size(&self) -> usize {
        let mut n = 0;
        self.visit(&mut |_| n += 1);
        n
    }

    /// Whether the expression reads `buf` (through a load or a load's dynamic offset).
    pub fn reads(&self, buf: BufId) -> bool {
        let mut hit = false;
        self.visit(&mut |n| {
            if let Expr::Load(v) = n {
                hit |= v.buf == buf || v.dynamic.iter().any(|d| d.index == buf);
            }
        });
        hit
    }

    /// Calls `f` on every node, parents before children, operands left to right (a shared
    /// subexpression at each of its occurrences, as evaluation walks the leaves).
    pub fn visit(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Load(_) | Expr::Lit(_) | Expr::Iota(..) => {}
            Expr::Unary(_, _, x)
            | Expr::IntegerPow(_, _, x)
            | Expr::Convert { x, .. }
            | Expr::ReducePrecision { x, .. }
            | Expr::Round(_, _, x)
            | Expr::Bitcast { x, .. }
            | Expr::Shared(_, x) => x.visit(f),
            Expr::Binary(_, _, a, b) | Expr::Compare(_, _, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Expr::Select(_, p, cases) => {
                p.visit(f);
                cases.iter().for_each(|c| c.visit(f));
            }
            Expr::Clamp(_, lo, x, hi) => {
                lo.visit(f);
                x.visit(f);
                hi.visit(f);
            }
        }
    }

    /// The expression with every load replaced by `f(view)` (inside shared nodes too).
    pub fn map_loads(&self, f: &impl Fn(&View) -> Expr) -> Expr {
        self.map_leaves(&|leaf| match leaf {
            Expr::Load(v) => f(v),
            other => other.clone(),
        })
    }

    /// The expression evaluated through `map`: its value at new index `o` is the old value
    /// at `map.apply(o)`.
    pub fn remap(&self, map: &IndexMap) -> Expr {
        self.map_leaves(&|leaf| match leaf {
            Expr::Load(v) => {
                let (offset, strides) = map.compose(v.offset, &v.strides);
                Expr::Load(View { buf: v.buf, dtype: v.dtype, offset, strides, dynamic: v.dynamic.clone() })
            }
            Expr::Iota(d, a) => {
                let (base, coeffs) = map.compose(a.base, &a.coeffs);
                Expr::Iota(*d, Affine { base, coeffs })
            }
            other => other.clone(),
        })
    }

    /// The expression with each leaf (`Load`, `Lit`, `Iota`) replaced by `f(leaf)` and
    /// every inner node kept.
    fn map_leaves(&self, f: &impl Fn(&Expr) -> Expr) -> Expr {
        let r = |e: &Expr| Box::new(e.map_leaves(f));
        match self {
            Expr::Load(_) | Expr::Lit(_) | Expr::Iota(..) => f(self),
            Expr::Unary(op, d, x) => Expr::Unary(*op, *d, r(x)),
            Expr::Binary(op, d, a, b) => Expr::Binary(*op, *d, r(a), r(b)),
            Expr::Compare(op, d, a, b) => Expr::Compare(*op, *d, r(a), r(b)),
            Expr::IntegerPow(y, d, x) => Expr::IntegerPow(*y, *d, r(x)),
            Expr::Select(d, p, cases) => Expr::Select(*d, r(p), cases.iter().map(|c| c.map_leaves(f)).collect()),
            Expr::Clamp(d, lo, x, hi) => Expr::Clamp(*d, r(lo), r(x), r(hi)),
            Expr::Convert { from, to, x } => Expr::Convert { from: *from, to: *to, x: r(x) },
            Expr::ReducePrecision { dtype, exponent_bits, mantissa_bits, x } => Expr::ReducePrecision {
                dtype: *dtype,
                exponent_bits: *exponent_bits,
                mantissa_bits: *mantissa_bits,
                x: r(x),
            },
            Expr::Round(m, d, x) => Expr::Round(*m, *d, r(x)),
            Expr::Bitcast { from, to, x } => Expr::Bitcast { from: *from, to: *to, x: r(x) },
            Expr::Shared(id, x) => Expr::Shared(*id, r(x)),
        }
    }
}

/// Which ops the vector code evaluates (the others call `remat-math` per element, or are
/// integer or `bool` operations, which vector code never sees).
trait Vectorizable {
    fn vectorizable(self) -> bool;
}

impl Vectorizable for UnaryOp {
    fn vectorizable(self) -> bool {
        !remat_math::UNARY_OPS.contains(&self) && self != UnaryOp::IsFinite && self != UnaryOp::Not
    }
}

impl Vectorizable for BinaryOp {
    fn vectorizable(self) -> bool {
        matches!(
            self,
            BinaryOp::Add
                | BinaryOp::AddAny
                | BinaryOp::Sub
                | BinaryOp::Mul
                | BinaryOp::Div
                | BinaryOp::Pow
                | BinaryOp::Max
                | BinaryOp::Min
        )
    }
}

/// An affine map from a new index space to an old one, one old dimension at a time:
/// `old[k] = base[k] + coef[k] * new[dim[k]]`, or just `base[k]` when `dim[k]` is `None`.
#[derive(Clone, Debug)]
pub(crate) struct IndexMap {
    pub new_rank: usize,
    pub old: Vec<(i64, Option<(usize, i64)>)>,
}

impl IndexMap {
    /// Rewrites an affine form over the old index (`offset + sum strides[k] * old[k]`) as one
    /// over the new index.
    fn compose(&self, offset: i64, strides: &[i64]) -> (i64, Vec<i64>) {
        let mut new_offset = offset;
        let mut new_strides = vec![0i64; self.new_rank];
        for (&(base, dim), &s) in self.old.iter().zip(strides) {
            new_offset += base * s;
            if let Some((j, coef)) = dim {
                new_strides[j] += coef * s;
            }
        }
        (new_offset, new_strides)
    }

    /// `broadcast_in_dim`: operand axis k goes to output axis `dims[k]` (extent-1 axes stay at 0).
    pub fn broadcast(in_shape: &[usize], out_rank: usize, dims: &[usize]) -> IndexMap {
        let old = in_shape.iter().zip(dims).map(|(&n, &d)| (0, if n == 1 { None } else { Some((d, 1)) })).collect();
        IndexMap { new_rank: out_rank, old }
    }

    /// `transpose`: output axis j is operand axis `perm[j]`.
    pub fn transpose(perm: &[usize]) -> IndexMap {
        let mut old = vec![(0, None); perm.len()];
        for (j, &k) in perm.iter().enumerate() {
            old[k] = (0, Some((j, 1)));
        }
        IndexMap { new_rank: perm.len(), old }
    }

    /// `rev`: operand index `n - 1 - out` on the reversed axes of `shape`, `out` elsewhere
    /// (a view with negative strides there).
    pub fn rev(shape: &[usize], dimensions: &[usize]) -> IndexMap {
        let old = shape
            .iter()
            .enumerate()
            .map(|(k, &n)| if dimensions.contains(&k) { (n as i64 - 1, Some((k, -1))) } else { (0, Some((k, 1))) })
            .collect();
        IndexMap { new_rank: shape.len(), old }
    }

    /// `slice`: operand index `start + stride * out` on every axis.
    pub fn slice(start: &[usize], strides: &[usize]) -> IndexMap {
        let old =
            start.iter().zip(strides).enumerate().map(|(k, (&s, &st))| (s as i64, Some((k, st as i64)))).collect();
        IndexMap { new_rank: start.len(), old }
    }

    /// Operand axes that are kept go, in order, to the output axes marked `true` in `kept_out`;
    /// other operand axes (extent 1) stay at 0. Serves `squeeze`, `expand_dims` and unit-axis
    /// `reshape`.
    pub fn regroup(in_kept: &[bool], kept_out: &[bool]) -> IndexMap {
        let mut outs = kept_out.iter().enumerate().filter(|(_, &k)| k).map(|(j, _)| j);
        let old = in_kept.iter().map(|&k| (0, if k { outs.next().map(|j| (j, 1)) } else { None })).collect();
        IndexMap { new_rank: kept_out.len(), old }
    }
}

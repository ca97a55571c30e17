//! The jaxpr builder every transformation writes through: it declares variables, emits
//! equations whose binder avals come from the IR's shape rules, and offers the small
//! helpers JAX's rules are written in (`mul`, `full_like`, `_unbroadcast`, ...).
//!
//! What it keeps true: every equation it emits has binders of exactly the avals
//! [`shape_rule`] gives (or, for a copied equation, the avals the original binders had),
//! so a jaxpr finished by a builder verifies whenever its operands were well typed. The
//! helpers skip the identity cases JAX's `lax` wrappers skip (a reshape to the same shape,
//! a transpose by the identity permutation, a broadcast to the same shape), because the
//! printed programs and the saved residuals depend on it.
//!
//! Old-to-new variable maps ([`VarMap`]) are explicit: a transformation reads an old
//! jaxpr and writes a new one, and never re-traces; `inline_jaxpr` copies a whole jaxpr
//! into the one being built (the call a transformation makes when it splices a body in).

use std::sync::atomic::{AtomicU32, Ordering};

use remat_ir::{
    shape_rule, Array, Atom, Aval, BinaryOp, CompareOp, DType, DotDimensionNumbers, Eqn, Jaxpr, LitOrigin, LitValue,
    Literal, Precision, Primitive, ReduceOp, SourceInfo, UnaryOp, Var, VarDecl,
};

use crate::AdError;

/// A map from the variables of an old jaxpr to atoms of the jaxpr being built.
#[derive(Clone, Debug)]
pub struct VarMap {
    slots: Vec<Option<Atom>>,
}

impl VarMap {
    /// An empty map for the variables of `old`.
    pub fn new(old: &Jaxpr) -> VarMap {
        VarMap { slots: vec![None; old.vars.len()] }
    }

    pub fn set(&mut self, old: Var, new: impl Into<Atom>) {
        self.slots[old.index()] = Some(new.into());
    }

    /// The new atom for an old atom: literals map to themselves. Panics on an unmapped
    /// variable, which is a bug in the transformation (its input verified).
    pub fn get(&self, old: &Atom) -> Atom {
        match old {
            Atom::Lit(l) => Atom::Lit(*l),
            Atom::Var(v) => self.slots[v.index()].unwrap_or_else(|| panic!("variable {v:?} is not mapped")),
        }
    }

    pub fn try_get(&self, old: Var) -> Option<Atom> {
        self.slots[old.index()]
    }

    pub fn get_all(&self, olds: &[Atom]) -> Vec<Atom> {
        olds.iter().map(|a| self.get(a)).collect()
    }

    pub fn get_vars(&self, olds: &[Var]) -> Vec<Atom> {
        olds.iter().map(|v| self.get(&Atom::Var(*v))).collect()
    }
}

/// Copies `inner`'s equations into `b` with its constvars bound to `consts` and its invars
/// to `args`; returns its outvars' atoms.
pub(crate) fn inline_jaxpr(b: &mut Builder, inner: &Jaxpr, consts: &[Atom], args: &[Atom]) -> Vec<Atom> {
    let mut map = VarMap::new(inner);
    for (&c, &a) in inner.constvars.iter().zip(consts) {
        map.set(c, a);
    }
    for (&v, &a) in inner.invars.iter().zip(args) {
        map.set(v, a);
    }
    for eqn in &inner.eqns {
        b.copy_eqn(inner, eqn, &mut map);
    }
    map.get_all(&inner.outvars)
}

/// Builds one jaxpr. Equations get the builder's current source location.
#[derive(Debug, Default)]
pub struct Builder {
    jaxpr: Jaxpr,
    source: Option<SourceInfo>,
    /// The values of the constvars [`Builder::const_array`] declared, in order.
    const_values: Vec<Array>,
}

/// The next [`LitOrigin::Staged`] id: process-wide, so staged constants of jaxprs built
/// separately and inlined into one another never share an id.
static NEXT_STAGED: AtomicU32 = AtomicU32::new(0);

/// A scalar literal atom.
pub fn lit(dtype: DType, x: f64) -> Atom {
    Atom::Lit(Literal::new(LitValue::from_f64(dtype, x)))
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// A builder with `f`'s constvars and invars (fresh, same avals), and the map from
    /// `f`'s to them: where a rewrite of `f` equation by equation starts.
    pub fn with_signature_of(f: &Jaxpr) -> (Builder, VarMap) {
        let mut b = Builder::new();
        let mut map = VarMap::new(f);
        for &c in &f.constvars {
            let v = b.constvar(f.aval(c).clone());
            map.set(c, v);
        }
        for &v in &f.invars {
            let nv = b.invar(f.aval(v).clone());
            map.set(v, nv);
        }
        (b, map)
    }

    pub fn new_var(&mut self, aval: Aval) -> Var {
        self.jaxpr.new_var(aval)
    }

    pub fn invar(&mut self, aval: Aval) -> Var {
        let v = self.jaxpr.new_var(aval);
        self.jaxpr.invars.push(v);
        v
    }

    pub fn constvar(&mut self, aval: Aval) -> Var {
        let v = self.jaxpr.new_var(aval);
        self.jaxpr.constvars.push(v);
        v
    }

    /// A constvar holding `value`: a constant a rule makes (JAX's `np.array([], 'int32')`,
    /// the start indices of a rank-0 `dynamic_slice` under `vmap`), declared after every
    /// other constvar; [`Builder::take_const_values`] gives the values back in order.
    pub fn const_array(&mut self, value: Array) -> Atom {
        let v = self.constvar(value.aval());
        self.const_values.push(value);
        Atom::Var(v)
    }

    /// The values of the constvars [`Builder::const_array`] declared (the last ones).
    pub fn take_const_values(&mut self) -> Vec<Array> {
        std::mem::take(&mut self.const_values)
    }

    /// Appends an already declared variable to the invars (for binders declared early).
    pub fn push_invar(&mut self, v: Var) {
        self.jaxpr.invars.push(v);
    }

    pub fn aval(&self, a: &Atom) -> Aval {
        self.jaxpr.atom_aval(a)
    }

    pub fn var_aval(&self, v: Var) -> &Aval {
        self.jaxpr.aval(v)
    }

    pub fn num_eqns(&self) -> usize {
        self.jaxpr.eqns.len()
    }

    /// The source location given to the equations emitted from now on; returns the old one.
    pub fn set_source(&mut self, source: Option<SourceInfo>) -> Option<SourceInfo> {
        std::mem::replace(&mut self.source, source)
    }

    fn current_source(&self) -> SourceInfo {
        self.source.clone().unwrap_or_else(SourceInfo::unknown)
    }

    /// Gives the current source location to the equations from index `from` on: to every
    /// one if `all`, else to those that have none.
    pub fn give_source_from(&mut self, from: usize, all: bool) {
        let source = self.current_source();
        for e in &mut self.jaxpr.eqns[from..] {
            if all || e.source.is_unknown() {
                e.source = source.clone();
            }
        }
    }

    /// Emits `prim` on `ins`, with binders typed by the shape rule.
    pub fn bind(&mut self, prim: Primitive, ins: Vec<Atom>) -> Result<Vec<Var>, AdError> {
        let in_avals: Vec<Aval> = ins.iter().map(|a| self.aval(a)).collect();
        let out_avals = shape_rule(&prim, &in_avals).map_err(|e| AdError::Internal(format!("emitting {e}")))?;
        let outs: Vec<Var> = out_avals.into_iter().map(|a| self.jaxpr.new_var(a)).collect();
        let source = self.current_source();
        self.jaxpr.eqns.push(Eqn::new(prim, ins, outs.clone(), source));
        Ok(outs)
    }

    /// [`Builder::bind`] for a single-result primitive.
    pub fn bind1(&mut self, prim: Primitive, ins: Vec<Atom>) -> Result<Atom, AdError> {
        let outs = self.bind(prim, ins)?;
        Ok(Atom::Var(outs[0]))
    }

    /// Emits an equation with given binders (declared by the caller).
    pub fn push_eqn(&mut self, eqn: Eqn) {
        self.jaxpr.eqns.push(eqn);
    }

    /// Copies `eqn` of an old jaxpr with its operands mapped through `map`; its binders get
    /// fresh variables of the original binders' avals, recorded in `map`. The copy keeps
    /// the equation's own source location and parameter spelling.
    pub fn copy_eqn(&mut self, old: &Jaxpr, eqn: &Eqn, map: &mut VarMap) -> Vec<Var> {
        let ins = map.get_all(&eqn.invars);
        let outs: Vec<Var> = eqn
            .outvars
            .iter()
            .map(|&v| {
                let decl = &old.vars[v.index()];
                let nv = self.jaxpr.new_var(decl.aval.clone());
                map.set(v, nv);
                nv
            })
            .collect();
        let mut e = Eqn::new(eqn.primitive.clone(), ins, outs.clone(), eqn.source.clone());
        e.spelling = eqn.spelling.clone();
        self.jaxpr.eqns.push(e);
        outs
    }

    /// Emits a copy of `eqn` (primitive, source, spelling) on operands `ins` of the new
    /// jaxpr, with fresh binders of the original binders' avals.
    pub fn copy_eqn_with(&mut self, old: &Jaxpr, eqn: &Eqn, ins: Vec<Atom>) -> Vec<Var> {
        let outs: Vec<Var> = eqn.outvars.iter().map(|&v| self.jaxpr.new_var(old.aval(v).clone())).collect();
        let mut e = Eqn::new(eqn.primitive.clone(), ins, outs.clone(), eqn.source.clone());
        e.spelling = eqn.spelling.clone();
        self.jaxpr.eqns.push(e);
        outs
    }

    /// Spells parameter `key` of the equation just emitted as `text` (JAX's `np.int64(..)`
    /// for integers it computed with NumPy; see `remat_ir::Spelling`).
    pub fn spell_last_param(&mut self, key: &str, text: String) {
        if let Some(e) = self.jaxpr.eqns.last_mut() {
            e.spelling.params.push((key.to_string(), text));
        }
    }

    /// Appends `spelling` to the spelling of the equation emitted last (if any was emitted
    /// since there were `since` equations): a rewritten equation keeps how its unchanged
    /// parameters and literals were written (the printer ignores a spelling that no longer
    /// denotes the value, and prefers the ones given first).
    pub fn keep_spelling(&mut self, since: usize, spelling: &remat_ir::Spelling) {
        if self.jaxpr.eqns.len() > since {
            if let Some(e) = self.jaxpr.eqns.last_mut() {
                e.spelling.params.extend(spelling.params.iter().cloned());
                e.spelling.literals.extend(spelling.literals.iter().cloned());
            }
        }
    }

    /// Replaces the invars (for binders declared before the order was known).
    pub fn set_invars(&mut self, invars: Vec<Var>) {
        self.jaxpr.invars = invars;
    }

    /// Finishes the jaxpr with the given outvars.
    pub fn finish(mut self, outvars: Vec<Atom>) -> Jaxpr {
        self.jaxpr.outvars = outvars;
        self.jaxpr
    }

    /// Marks variables that are bound but never read as dropped (`_`), as JAX prints them.
    pub fn mark_unused_dropped(j: &mut Jaxpr) {
        let mut used = vec![false; j.vars.len()];
        for e in &j.eqns {
            for a in &e.invars {
                if let Atom::Var(v) = a {
                    used[v.index()] = true;
                }
            }
        }
        for a in &j.outvars {
            if let Atom::Var(v) = a {
                used[v.index()] = true;
            }
        }
        for e in &j.eqns {
            for v in &e.outvars {
                j.vars[v.index()] = VarDecl { aval: j.vars[v.index()].aval.clone(), dropped: !used[v.index()] };
            }
        }
    }

    // ---- helpers: one per `lax` function JAX's rules call --------------------------------

    pub fn unary(&mut self, op: UnaryOp, x: Atom) -> Result<Atom, AdError> {
        self.bind1(Primitive::Unary(op), vec![x])
    }

    pub fn binary(&mut self, op: BinaryOp, x: Atom, y: Atom) -> Result<Atom, AdError> {
        self.bind1(Primitive::Binary(op), vec![x, y])
    }

    pub fn compare(&mut self, op: CompareOp, x: Atom, y: Atom) -> Result<Atom, AdError> {
        self.bind1(Primitive::Compare(op), vec![x, y])
    }

    pub fn neg(&mut self, x: Atom) -> Result<Atom, AdError> {
        self.unary(UnaryOp::Neg, x)
    }

    pub fn add(&mut self, x: Atom, y: Atom) -> Result<Atom, AdError> {
        self.binary(BinaryOp::Add, x, y)
    }

    pub fn add_any(&mut self, x: Atom, y: Atom) -> Result<Atom, AdError> {
        self.binary(BinaryOp::AddAny, x, y)
    }

    pub fn sub(&mut self, x: Atom, y: Atom) -> Result<Atom, AdError> {
        self.binary(BinaryOp::Sub, x, y)
    }

    pub fn mul(&mut self, x: Atom, y: Atom) -> Result<Atom, AdError> {
        self.binary(BinaryOp::Mul, x, y)
    }

    pub fn div(&mut self, x: Atom, y: Atom) -> Result<Atom, AdError> {
        self.binary(BinaryOp::Div, x, y)
    }

    pub fn integer_pow(&mut self, x: Atom, y: i32) -> Result<Atom, AdError> {
        self.bind1(Primitive::IntegerPow { y }, vec![x])
    }

    pub fn select_n(&mut self, pred: Atom, cases: Vec<Atom>) -> Result<Atom, AdError> {
        let mut ins = vec![pred];
        ins.extend(cases);
        self.bind1(Primitive::SelectN, ins)
    }

    /// `lax.convert_element_type`: no equation when the dtype already matches.
    pub fn convert(&mut self, x: Atom, dtype: DType) -> Result<Atom, AdError> {
        if self.aval(&x).dtype == dtype {
            return Ok(x);
        }
        self.bind1(Primitive::ConvertElementType { new_dtype: dtype, weak_type: false }, vec![x])
    }

    /// `lax.full_like(x, value)`: a literal for a scalar, else a `broadcast_in_dim` of one
    /// (an error for a dtype without literals: keys).
    pub fn full(&mut self, aval: &Aval, value: f64) -> Result<Atom, AdError> {
        let value = LitValue::try_from_f64(aval.dtype, value)
            .ok_or_else(|| AdError::Internal(format!("full: no literal {value} of dtype {}", aval.dtype)))?;
        let l = Atom::Lit(Literal::new(value));
        if aval.rank() == 0 {
            return Ok(l);
        }
        self.bind1(Primitive::BroadcastInDim { shape: aval.shape.clone(), broadcast_dimensions: Vec::new() }, vec![l])
    }

    /// Zeros of a device aval, as a constant written inline (a transpose's zeros, a rule
    /// JAX traced to a jaxpr before running it, zeros JAX makes on the tangent side).
    ///
    /// Keys have no literal: their zero is the key of zero words, `random_wrap` of `u32`
    /// zeros. It is what the vjp gives as the gradient of a key input (a dropout's or a
    /// sampler's key beside the floats), where JAX gives a `float0` array; remat's
    /// gradients of non-float inputs are zeros of their own dtype, as for integers.
    pub fn zeros(&mut self, aval: &Aval) -> Result<Atom, AdError> {
        if aval.dtype == DType::Key {
            let words = self.full(&Aval::new(DType::U32, [&aval.shape[..], &[2]].concat()), 0.0)?;
            return self.bind1(Primitive::RandomWrap, vec![words]);
        }
        self.full(&Aval::new(aval.dtype, aval.shape.clone()), 0.0)
    }

    /// `lax.full(shape, value)` run by a jvp rule on the primal side: JAX stages the value
    /// (`_convert_element_type` of a Python scalar ends in `stage`), so it is a value of the
    /// primal trace, and a tangent equation that reads it makes it a residual. A
    /// non-scalar is a `broadcast_in_dim` equation, which partial evaluation already treats
    /// so; a scalar is a literal marked [`LitOrigin::Staged`] with an id of its own.
    pub fn staged_full(&mut self, aval: &Aval, value: f64) -> Result<Atom, AdError> {
        if aval.rank() > 0 {
            return self.full(aval, value);
        }
        let id = NEXT_STAGED.fetch_add(1, Ordering::Relaxed);
        Ok(Atom::Lit(Literal { value: LitValue::from_f64(aval.dtype, value), origin: LitOrigin::Staged(id) }))
    }

    /// Zeros made by a jvp rule on the primal side (JAX's `instantiate_zeros`,
    /// `zeros_like_aval` and `_zeros` inside a rule): see [`Builder::staged_full`].
    pub fn staged_zeros(&mut self, aval: &Aval) -> Result<Atom, AdError> {
        self.staged_full(&Aval::new(aval.dtype, aval.shape.clone()), 0.0)
    }

    /// `lax.broadcast_in_dim`, skipping the identity.
    pub fn broadcast_in_dim(&mut self, x: Atom, shape: &[usize], dims: &[usize]) -> Result<Atom, AdError> {
        let aval = self.aval(&x);
        if aval.shape == shape && dims.iter().copied().eq(0..aval.rank()) {
            return Ok(x);
        }
        self.bind1(Primitive::BroadcastInDim { shape: shape.to_vec(), broadcast_dimensions: dims.to_vec() }, vec![x])
    }

    /// `lax.reshape`, skipping a reshape of a non-scalar to its own shape.
    pub fn reshape(&mut self, x: Atom, shape: &[usize]) -> Result<Atom, AdError> {
        let aval = self.aval(&x);
        if aval.rank() > 0 && aval.shape == shape {
            return Ok(x);
        }
        self.bind1(Primitive::Reshape { new_sizes: shape.to_vec(), dimensions: None }, vec![x])
    }

    /// `lax.transpose`, skipping the identity permutation.
    pub fn transpose(&mut self, x: Atom, perm: &[usize]) -> Result<Atom, AdError> {
        if perm.iter().copied().eq(0..perm.len()) {
            return Ok(x);
        }
        self.bind1(Primitive::Transpose { permutation: perm.to_vec() }, vec![x])
    }

    pub fn reduce_sum(&mut self, x: Atom, axes: &[usize]) -> Result<Atom, AdError> {
        self.bind1(Primitive::Reduce { op: ReduceOp::Sum, axes: axes.to_vec() }, vec![x])
    }

    /// `lax.expand_dims`: a `broadcast_in_dim` inserting unit axes at `dims` of the output.
    pub fn expand_dims(&mut self, x: Atom, dims: &[usize]) -> Result<Atom, AdError> {
        let aval = self.aval(&x);
        let out_rank = aval.rank() + dims.len();
        let mut shape = aval.shape.clone();
        let mut sorted = dims.to_vec();
        sorted.sort_unstable();
        for &d in &sorted {
            shape.insert(d, 1);
        }
        let kept: Vec<usize> = (0..out_rank).filter(|d| !dims.contains(d)).collect();
        self.broadcast_in_dim(x, &shape, &kept)
    }

    pub fn dot_general(
        &mut self,
        x: Atom,
        y: Atom,
        dimension_numbers: DotDimensionNumbers,
        preferred_element_type: Option<DType>,
        precision: Option<(Precision, Precision)>,
    ) -> Result<Atom, AdError> {
        self.bind1(Primitive::DotGeneral { dimension_numbers, preferred_element_type, precision }, vec![x, y])
    }

    /// JAX's `_unbroadcast(aval, x)`: sums `x` down to `aval`'s shape, for the transpose of
    /// an operand that was broadcast (a scalar, or size-1 dimensions).
    pub fn unbroadcast(&mut self, aval: &Aval, x: Atom) -> Result<Atom, AdError> {
        let x_aval = self.aval(&x);
        if x_aval.shape == aval.shape {
            return Ok(x);
        }
        if aval.rank() == 0 {
            let axes: Vec<usize> = (0..x_aval.rank()).collect();
            return self.reduce_sum(x, &axes);
        }
        let dims: Vec<usize> = (0..x_aval.rank()).filter(|&i| x_aval.shape[i] != aval.shape[i]).collect();
        let summed = self.reduce_sum(x, &dims)?;
        self.reshape(summed, &aval.shape)
    }

    /// JAX's `_maybe_broadcast(shape, x)`: broadcasts `x` (a scalar or an operand with
    /// size-1 dimensions) to `shape`.
    pub fn maybe_broadcast(&mut self, shape: &[usize], x: Atom) -> Result<Atom, AdError> {
        let x_aval = self.aval(&x);
        if x_aval.shape == shape {
            return Ok(x);
        }
        if x_aval.rank() == 0 {
            return self.broadcast_in_dim(x, shape, &[]);
        }
        let dims: Vec<usize> = (0..x_aval.rank()).filter(|&i| x_aval.shape[i] == shape[i]).collect();
        let squeezed: Vec<usize> = dims.iter().map(|&i| x_aval.shape[i]).collect();
        let r = self.reshape(x, &squeezed)?;
        self.broadcast_in_dim(r, shape, &dims)
    }
}

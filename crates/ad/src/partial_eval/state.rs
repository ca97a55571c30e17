//! The state of one partial evaluation, behind the words of JAX's
//! `_partial_eval_jaxpr_custom_cached`: every old variable is `read` as `(unknown,
//! instantiated)` and `write`n with its known value, its staged value, or both; the staged
//! half reads a known value through `ensure_instantiated`, which makes it a `residual`.
//!
//! What it keeps true: the known half's extra outputs and the staged half's leading
//! inputs are the same residuals, in the same order (order of first use), so `finish`
//! gives a split that `remat_ir::check_split` accepts. Its fields are private: the rules
//! (the driver, calls, `scan`) only use the methods below.

use std::collections::HashMap;

use remat_ir::{Atom, Aval, Eqn, Jaxpr, LitOrigin, Primitive, SourceInfo, Var};

use super::PeMode;
use crate::builder::{inline_jaxpr, Builder, VarMap};
use crate::AdError;

/// What makes two reads the same residual: the known variable, or the staged constant's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ResKey {
    Var(Var),
    Staged(u32),
}

/// One partial evaluation of `old` under way: its two halves and where each old variable
/// went.
pub(crate) struct Pe<'a> {
    old: &'a Jaxpr,
    mode: PeMode<'a>,
    /// The known half and the old variables' values in it.
    known: Builder,
    known_map: VarMap,
    /// The staged half and the old variables' values in it.
    staged: Builder,
    staged_map: VarMap,
    /// `(unknown, instantiated)` of each old variable.
    env: Vec<(bool, bool)>,
    /// The residuals: known-half values (variables, or staged constants as plain
    /// literals), and the staged half's binders for them.
    res_known: Vec<Atom>,
    res_staged: Vec<Var>,
    res_index: HashMap<ResKey, usize>,
    /// The staged half's inputs after the residuals (the instantiated old invars).
    staged_ins: Vec<Var>,
}

impl<'a> Pe<'a> {
    pub fn new(old: &'a Jaxpr, mode: PeMode<'a>) -> Pe<'a> {
        Pe {
            old,
            mode,
            known: Builder::new(),
            known_map: VarMap::new(old),
            staged: Builder::new(),
            staged_map: VarMap::new(old),
            env: vec![(false, false); old.vars.len()],
            res_known: Vec::new(),
            res_staged: Vec::new(),
            res_index: HashMap::new(),
            staged_ins: Vec::new(),
        }
    }

    /// The jaxpr being split.
    pub fn old(&self) -> &'a Jaxpr {
        self.old
    }

    pub fn mode(&self) -> PeMode<'a> {
        self.mode
    }

    // ---- inputs ------------------------------------------------------------------------

    /// A constvar of the old jaxpr: a constvar of the known half, and of the staged half
    /// too when `instantiate`.
    pub fn constvar(&mut self, c: Var, instantiate: bool) {
        let aval = self.old.aval(c).clone();
        let k = self.known.constvar(aval.clone());
        self.known_map.set(c, k);
        if instantiate {
            let s = self.staged.constvar(aval);
            self.staged_map.set(c, s);
        }
        self.env[c.index()] = (false, instantiate);
    }

    /// An invar of the old jaxpr: an input of the known half unless `unknown`, an input of
    /// the staged half (after the residuals) when `instantiate`.
    pub fn invar(&mut self, v: Var, unknown: bool, instantiate: bool) {
        let aval = self.old.aval(v).clone();
        if !unknown {
            let k = self.known.invar(aval.clone());
            self.known_map.set(v, k);
        }
        if instantiate {
            let s = self.staged.new_var(aval);
            self.staged_map.set(v, s);
            self.staged_ins.push(s);
        }
        self.env[v.index()] = (unknown, instantiate);
    }

    // ---- reading old values ------------------------------------------------------------

    /// JAX's `read`: `(unknown, instantiated)`. A literal is known and available to both
    /// halves (a staged constant too: the staged half reads it through
    /// [`Pe::ensure_instantiated`], which decides whether it is a residual).
    pub fn read(&self, a: &Atom) -> (bool, bool) {
        match a {
            Atom::Lit(_) => (false, true),
            Atom::Var(v) => self.env[v.index()],
        }
    }

    pub fn is_unknown(&self, a: &Atom) -> bool {
        self.read(a).0
    }

    /// A known old value as the known half holds it (a literal inline: its provenance is
    /// used up here).
    pub fn known_value(&self, a: &Atom) -> Result<Atom, AdError> {
        match a {
            Atom::Lit(l) => Ok(Atom::Lit(l.inline())),
            Atom::Var(v) => self
                .known_map
                .try_get(*v)
                .ok_or_else(|| AdError::Internal(format!("partial eval: {v:?} has no known value"))),
        }
    }

    /// The known values of the `atoms` not marked in `unknown`, in order (what the known
    /// half passes to a call, or returns).
    pub fn known_values(&self, atoms: &[Atom], unknown: &[bool]) -> Result<Vec<Atom>, AdError> {
        atoms.iter().zip(unknown).filter(|(_, &u)| !u).map(|(a, _)| self.known_value(a)).collect()
    }

    /// JAX's `ensure_instantiated`: an old value as the staged half reads it, its staged
    /// copy if it has one, else its known value made a residual. A literal is inlined,
    /// except a constant a jvp rule staged on the primal side, which at the top of a
    /// linearization (JAX's `LinearizeTrace`, where the rule's value is a tracer of the
    /// primal trace) is a residual; inside a checkpoint (`partial_eval_jaxpr_custom` on a
    /// traced jvp, where it became a literal) it is inlined like any literal.
    pub fn ensure_instantiated(&mut self, a: &Atom) -> Result<Atom, AdError> {
        match a {
            Atom::Lit(l) => match l.origin {
                LitOrigin::Staged(id) if self.mode.is_linearize() => {
                    Ok(self.residual_of(ResKey::Staged(id), Atom::Lit(l.inline())))
                }
                LitOrigin::Staged(_) | LitOrigin::Inline => Ok(Atom::Lit(l.inline())),
            },
            Atom::Var(v) => match self.staged_map.try_get(*v) {
                Some(s) => Ok(s),
                None => {
                    let k = self.known_value(a)?;
                    Ok(self.residual(k))
                }
            },
        }
    }

    /// A known-half atom as the staged half reads it: a literal as it is, a variable as a
    /// residual (an output of the known half and an input of the staged half, made on
    /// first use).
    pub fn residual(&mut self, known: Atom) -> Atom {
        match known {
            Atom::Var(k) => self.residual_of(ResKey::Var(k), known),
            Atom::Lit(l) => Atom::Lit(l.inline()),
        }
    }

    /// The staged binder of residual `key`, whose known-half value is `known`.
    fn residual_of(&mut self, key: ResKey, known: Atom) -> Atom {
        if let Some(&i) = self.res_index.get(&key) {
            return Atom::Var(self.res_staged[i]);
        }
        let s = self.staged.new_var(self.known.aval(&known));
        self.res_index.insert(key, self.res_known.len());
        self.res_known.push(known);
        self.res_staged.push(s);
        Atom::Var(s)
    }

    // ---- writing -----------------------------------------------------------------------

    /// JAX's `write`: old variable `v` has the known value `known` (none: it is unknown)
    /// and the staged value `staged` (some: it is instantiated).
    pub fn write(&mut self, v: Var, known: Option<Atom>, staged: Option<Atom>) {
        if let Some(k) = known {
            self.known_map.set(v, k);
        }
        if let Some(s) = staged {
            self.staged_map.set(v, s);
        }
        self.env[v.index()] = (known.is_none(), staged.is_some());
    }

    /// Copies an old equation whose operands are all known into the known half; returns
    /// its binders there.
    pub fn copy_known(&mut self, eqn: &Eqn) -> Result<Vec<Atom>, AdError> {
        let ins = eqn.invars.iter().map(|a| self.known_value(a)).collect::<Result<_, _>>()?;
        Ok(self.known.copy_eqn_with(self.old, eqn, ins).into_iter().map(Atom::Var).collect())
    }

    /// Copies an old equation into the staged half on operands `ins` of the staged half.
    pub fn copy_staged(&mut self, eqn: &Eqn, ins: Vec<Atom>) -> Vec<Atom> {
        self.staged.copy_eqn_with(self.old, eqn, ins).into_iter().map(Atom::Var).collect()
    }

    /// The type of a known-half atom.
    pub fn known_aval(&self, a: &Atom) -> Aval {
        self.known.aval(a)
    }

    /// Emits `prim` on known-half operands, at `source`.
    pub fn emit_known(&mut self, prim: Primitive, ins: Vec<Atom>, source: SourceInfo) -> Result<Vec<Atom>, AdError> {
        emit(&mut self.known, prim, ins, source)
    }

    /// Emits `prim` on staged-half operands, at `source`.
    pub fn emit_staged(&mut self, prim: Primitive, ins: Vec<Atom>, source: SourceInfo) -> Result<Vec<Atom>, AdError> {
        emit(&mut self.staged, prim, ins, source)
    }

    /// Inlines `jaxpr` (without constvars) into the known half on `args`.
    pub fn inline_known(&mut self, jaxpr: &Jaxpr, args: &[Atom]) -> Vec<Atom> {
        inline_jaxpr(&mut self.known, jaxpr, &[], args)
    }

    /// Zeros of `aval` made in the staged half.
    pub fn staged_zeros(&mut self, aval: &Aval) -> Result<Atom, AdError> {
        self.staged.zeros(aval)
    }

    // ---- finishing ---------------------------------------------------------------------

    /// The two halves: `known : (known ins) -> (known_outs, residuals)` and
    /// `staged : (residuals, instantiated ins) -> (staged_outs)`, and the residual count.
    pub fn finish(self, known_outs: Vec<Atom>, staged_outs: Vec<Atom>) -> (Jaxpr, Jaxpr, usize) {
        let num_res = self.res_known.len();
        let mut known_outs = known_outs;
        known_outs.extend(self.res_known);
        let mut staged_invars = self.res_staged;
        staged_invars.extend(self.staged_ins);
        let mut staged = self.staged;
        staged.set_invars(staged_invars);
        (self.known.finish(known_outs), staged.finish(staged_outs), num_res)
    }
}

/// Binds `prim` in `b` at `source`, restoring the builder's source after.
fn emit(b: &mut Builder, prim: Primitive, ins: Vec<Atom>, source: SourceInfo) -> Result<Vec<Atom>, AdError> {
    let saved = b.set_source(Some(source));
    let outs = b.bind(prim, ins);
    b.set_source(saved);
    Ok(outs?.into_iter().map(Atom::Var).collect())
}

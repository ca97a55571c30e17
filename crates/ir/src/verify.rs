//! The verifier: checks that a jaxpr is well formed and well typed, and reports every
//! problem it finds with the equation it is in.
//!
//! Invariants checked, for the jaxpr and, recursively, every jaxpr nested in its
//! equations' parameters (each with its own variable space):
//!
//! 1. Every variable (constvar, invar, equation operand and binder, outvar) is an index
//!    into the jaxpr's `vars` table.
//! 2. Every variable is bound exactly once, as a constvar, an invar or an equation binder.
//! 3. Every variable is bound before it is read: an equation reads only constvars, invars
//!    and binders of earlier equations.
//! 4. The jaxpr's outvars are bound.
//! 5. A dropped binder (`_`, [`VarDecl::dropped`](crate::VarDecl)) is never read, by an
//!    equation or as an outvar.
//! 6. Each equation's binders have exactly the avals (dtype, shape and memory space) that
//!    [`shape_rule`] gives for its primitive and operand avals; this includes that a call's
//!    operands match its nested jaxpr's invars and a closed jaxpr's consts its constvars.
//! 7. Only `device_put` and calls (`jit`, `custom_jvp_call`, `remat2`, `scan`) read an
//!    operand in host memory (`f32<host>[5]`); everything else computes on the device.
//! 8. Every bound variable's aval (constvars, invars, binders, in nested jaxprs too) has an
//!    element count and byte size that do not overflow, and takes at most
//!    [`max_value_bytes`](crate::max_value_bytes) bytes (64 GiB unless
//!    `REMAT_MAX_VALUE_BYTES` says otherwise), so that every size computed from it is exact
//!    and every allocation of it is one a user meant.
//! 9. Literals are scalars. [`Literal`](crate::Literal) can only hold a scalar, so this
//!    holds by construction and needs no check.
//!
//! A nested jaxpr shared by several equations (one `Arc`) is verified once, and its
//! problems are reported at its first reference. [`verify_closed`] also checks that a
//! closed jaxpr's consts have its constvars' types.
//!
//! [`check_split`] checks the seam between the two halves of a partial evaluation
//! (autodidax's `typecheck_partial_eval_jaxpr`):
//!
//! 10. The residuals a known jaxpr returns (its last `num_res` outputs) are the ones its
//!     staged jaxpr takes (its first `num_res` inputs): as many, in the same order, each of
//!     the same aval (dtype, shape and memory space).

use std::collections::HashSet;
use std::fmt;

use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, Var};
use crate::param::Param;
use crate::primitive::{shape_rule, Primitive};
use crate::types::{max_value_bytes, Aval, MemorySpace, MAX_VALUE_BYTES_VAR};

/// One problem: where it is and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// `eqn 3 (dot_general) at f.jaxpr:7:5`, `outvars`, or for a nested jaxpr
    /// `in eqn 2 (remat2) param jaxpr, eqn 0 (sin) at f.jaxpr:4:11`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem the verifier found, in program order. Displays one per line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct VerifyError {
    pub problems: Vec<Problem>,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// Checks every invariant in this module's documentation.
pub fn verify(jaxpr: &Jaxpr) -> Result<(), VerifyError> {
    let mut v = Verifier::new();
    v.jaxpr(jaxpr);
    v.finish()
}

/// [`verify`], and that `c.consts` have the types of the constvars they are bound to.
pub fn verify_closed(c: &ClosedJaxpr) -> Result<(), VerifyError> {
    let mut v = Verifier::new();
    let constvars = &c.jaxpr.constvars;
    if c.consts.len() != constvars.len() {
        v.report("consts", format!("{} consts for {} constvars", c.consts.len(), constvars.len()));
    }
    for (i, (value, var)) in c.consts.iter().zip(constvars).enumerate() {
        let Some(decl) = c.jaxpr.vars.get(var.index()) else {
            continue;
        };
        if value.dtype() != decl.aval.dtype || value.shape() != decl.aval.shape.as_slice() {
            let value_aval = Aval::new(value.dtype(), value.shape().to_vec());
            let message = format!("const {i} is {value_aval} but constvar {var:?} is {}", decl.aval);
            v.report("consts", message);
        }
    }
    v.jaxpr(&c.jaxpr);
    v.finish()
}

/// Invariant 10: `known` and `staged` are the halves of a partial evaluation with `num_res`
/// residuals, laid out as JAX lays them out:
///
/// ```text
/// known  : (known ins)             -> (known outs, residuals)
/// staged : (residuals, staged ins) -> (staged outs)
/// ```
///
/// Every residual that disagrees is reported by index (`residual 2`), with the type each
/// side gives it, or with the side that has no value for it.
pub fn check_split(known: &Jaxpr, staged: &Jaxpr, num_res: usize) -> Result<(), VerifyError> {
    let (n_out, n_in) = (known.outvars.len(), staged.invars.len());
    let mut problems = Vec::new();
    for i in 0..num_res {
        // Residual i is known's output `n_out - num_res + i` and staged's input `i`.
        let produced = (n_out + i).checked_sub(num_res).map(|j| known.atom_aval(&known.outvars[j]));
        let taken = staged.invars.get(i).map(|&v| staged.aval(v).clone());
        let message = match (produced, taken) {
            (Some(p), Some(t)) if p == t => continue,
            (Some(p), Some(t)) => format!("the known jaxpr returns {p} but the staged jaxpr takes {t}"),
            (Some(p), None) => {
                format!(
                    "the known jaxpr returns {p} but the staged jaxpr has only {n_in} inputs for {num_res} residuals"
                )
            }
            (None, Some(t)) => {
                format!(
                    "the staged jaxpr takes {t} but the known jaxpr has only {n_out} outputs for {num_res} residuals"
                )
            }
            (None, None) => format!("neither jaxpr has a value for it ({n_out} outputs, {n_in} inputs)"),
        };
        problems.push(Problem { path: format!("residual {i}"), message });
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(VerifyError { problems })
    }
}

struct Verifier {
    problems: Vec<Problem>,
    /// Nested jaxprs already verified, by address.
    seen: HashSet<*const Jaxpr>,
    /// The equations and parameters leading to the jaxpr being verified:
    /// `eqn 2 (remat2) param jaxpr`.
    context: Vec<String>,
    /// [`max_value_bytes`]; `None` if it is misconfigured (reported once, at the start).
    limit: Option<usize>,
}

/// Where a variable was bound, for "bound twice" messages.
#[derive(Clone, Copy)]
enum Site {
    Constvar(usize),
    Invar(usize),
    Eqn(usize),
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Constvar(i) => write!(f, "constvar {i}"),
            Site::Invar(i) => write!(f, "invar {i}"),
            Site::Eqn(i) => write!(f, "eqn {i}"),
        }
    }
}

/// Where an equation is, for messages: `eqn 3 (mul) at f.py:2`.
struct EqnPlace<'a> {
    i: usize,
    name: &'a str,
    eqn: &'a Eqn,
}

impl fmt::Display for EqnPlace<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "eqn {} ({})", self.i, self.name)?;
        if !self.eqn.source.is_unknown() {
            write!(f, " at {}", self.eqn.source)?;
        }
        Ok(())
    }
}

/// One jaxpr's variables: where each is bound, so far.
struct Scope<'j> {
    jaxpr: &'j Jaxpr,
    bound: Vec<Option<Site>>,
}

impl Verifier {
    fn new() -> Verifier {
        let mut v = Verifier { problems: Vec::new(), seen: HashSet::new(), context: Vec::new(), limit: None };
        match max_value_bytes() {
            Ok(limit) => v.limit = Some(limit),
            Err(e) => v.report(MAX_VALUE_BYTES_VAR, e),
        }
        v
    }

    fn finish(self) -> Result<(), VerifyError> {
        if self.problems.is_empty() {
            Ok(())
        } else {
            Err(VerifyError { problems: self.problems })
        }
    }

    fn report(&mut self, what: impl fmt::Display, message: impl Into<String>) {
        let path =
            if self.context.is_empty() { what.to_string() } else { format!("in {}, {what}", self.context.join(", ")) };
        self.problems.push(Problem { path, message: message.into() });
    }

    fn jaxpr(&mut self, j: &Jaxpr) {
        let mut scope = Scope { jaxpr: j, bound: vec![None; j.vars.len()] };
        for (i, &v) in j.constvars.iter().enumerate() {
            self.bind(&mut scope, v, Site::Constvar(i), &"constvars");
        }
        for (i, &v) in j.invars.iter().enumerate() {
            self.bind(&mut scope, v, Site::Invar(i), &"invars");
        }
        for (i, eqn) in j.eqns.iter().enumerate() {
            self.eqn(&mut scope, i, eqn);
        }
        for a in &j.outvars {
            self.read(&scope, a, &"outvars");
        }
    }

    fn eqn(&mut self, scope: &mut Scope<'_>, i: usize, eqn: &Eqn) {
        let name = eqn.primitive.name();
        // Formatted only if a problem is reported (a string per equation would be most of
        // the verifier's time on a valid program).
        let here = EqnPlace { i, name, eqn };
        let here: &dyn fmt::Display = &here;

        let in_avals: Vec<Option<Aval>> = eqn.invars.iter().map(|a| self.read(scope, a, here)).collect();
        if !reads_host_memory(&eqn.primitive) {
            for (k, aval) in in_avals.iter().enumerate() {
                if aval.as_ref().is_some_and(|a| a.memory_space == MemorySpace::Host) {
                    self.report(here, format!("operand {k} in host memory; only device_put can read it"));
                }
            }
        }
        let in_avals: Option<Vec<Aval>> = in_avals.into_iter().collect();
        if let Some(in_avals) = in_avals {
            self.check_types(scope.jaxpr, eqn, &in_avals, here);
        }
        for &v in &eqn.outvars {
            self.bind(scope, v, Site::Eqn(i), here);
        }

        for (key, param) in eqn.primitive.params() {
            if matches!(param, Param::Jaxpr(_) | Param::Tuple(_) | Param::List(_)) {
                self.nested(&param, &format!("eqn {i} ({name}) param {key}"));
            }
        }
    }

    /// Verifies the jaxprs in a parameter: itself, or inside a tuple (`cond`'s `branches`;
    /// these went unverified until issue 22's fuzzer reached autodiff with a branch
    /// holding a `mul` of no operands).
    fn nested(&mut self, param: &Param, label: &str) {
        match param {
            Param::Jaxpr(sub) if self.seen.insert(std::sync::Arc::as_ptr(sub)) => {
                self.context.push(label.to_string());
                self.jaxpr(sub);
                self.context.pop();
            }
            Param::Tuple(items) | Param::List(items) => {
                for (k, item) in items.iter().enumerate() {
                    self.nested(item, &format!("{label}[{k}]"));
                }
            }
            _ => {}
        }
    }

    /// Invariant 6: the binders' avals are what the shape rule gives.
    fn check_types(&mut self, j: &Jaxpr, eqn: &Eqn, in_avals: &[Aval], here: &dyn fmt::Display) {
        let out_avals = match shape_rule(&eqn.primitive, in_avals) {
            Ok(out) => out,
            Err(e) => return self.report(here, e.message),
        };
        if out_avals.len() != eqn.outvars.len() {
            let message = format!(
                "{} binds {} variables but gives {} results",
                eqn.primitive.name(),
                eqn.outvars.len(),
                out_avals.len()
            );
            return self.report(here, message);
        }
        for (k, (v, want)) in eqn.outvars.iter().zip(&out_avals).enumerate() {
            let Some(decl) = j.vars.get(v.index()) else {
                continue;
            };
            // A `shard_map` body with `check_vma=False` types no value as varying: a binder
            // without varying axes where the rule gives some is that body's type.
            let untracked = decl.aval.vma.is_empty() && decl.aval == want.clone().with_vma(Default::default());
            if decl.aval != *want && !untracked {
                let message =
                    format!("binder {k} ({v:?}) has type {} but {} gives {want}", decl.aval, eqn.primitive.name());
                self.report(here, message);
            }
        }
    }

    /// Invariants 1, 2, 8: binds `v` at `site`.
    fn bind(&mut self, scope: &mut Scope<'_>, v: Var, site: Site, here: &dyn fmt::Display) {
        let Some(slot) = scope.bound.get_mut(v.index()) else {
            return self.report(here, format!("variable {v:?} is out of range ({} variables)", scope.jaxpr.vars.len()));
        };
        let aval = &scope.jaxpr.vars[v.index()].aval;
        if let Err(why) = self.limit.map_or(Ok(0), |limit| aval.bytes_within(limit)) {
            self.report(here, format!("variable {v:?}:{aval} {why}"));
        }
        match *slot {
            Some(first) => self.report(here, format!("variable {v:?} is bound again; it was bound by {first}")),
            None => *slot = Some(site),
        }
    }

    /// Invariants 1, 3, 5: reads an operand or outvar, giving its aval where it has one.
    fn read(&mut self, scope: &Scope<'_>, a: &Atom, here: &dyn fmt::Display) -> Option<Aval> {
        let v = match a {
            Atom::Lit(l) => return Some(l.aval()),
            Atom::Var(v) => *v,
        };
        let Some(decl) = scope.jaxpr.vars.get(v.index()) else {
            self.report(here, format!("variable {v:?} is out of range ({} variables)", scope.jaxpr.vars.len()));
            return None;
        };
        if scope.bound[v.index()].is_none() {
            self.report(here, format!("variable {v:?}:{} is read before it is bound", decl.aval));
        }
        if decl.dropped {
            self.report(here, format!("variable {v:?}:{} is a dropped binder (`_`) but is read", decl.aval));
        }
        Some(decl.aval.clone())
    }
}

/// Whether `prim` may read an operand that lives in host memory: only `device_put`, which
/// moves it, and calls, whose inner jaxpr then has an invar in host memory.
fn reads_host_memory(prim: &Primitive) -> bool {
    matches!(prim, Primitive::DevicePut { .. }) || !prim.subjaxprs().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_jaxpr;

    #[test]
    fn a_clean_jaxpr_verifies() {
        let j =
            parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[] = reduce_sum[axes=(0,)] b in (c,) }", "t")
                .unwrap();
        assert_eq!(verify(&j), Ok(()));
    }

    #[test]
    fn errors_display_one_per_line() {
        let e = VerifyError {
            problems: vec![
                Problem { path: "eqn 0 (sin)".into(), message: "one".into() },
                Problem { path: "outvars".into(), message: "two".into() },
            ],
        };
        assert_eq!(e.to_string(), "eqn 0 (sin): one\noutvars: two");
    }

    fn problems(text: &str) -> Vec<String> {
        let j = parse_jaxpr(text, "t").unwrap();
        match verify(&j) {
            Ok(()) => Vec::new(),
            Err(e) => e.problems.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn an_aval_too_large_or_overflowing_is_named_with_its_size() {
        // 2^64 elements: the product overflows.
        assert_eq!(
            problems("{ lambda ; a:f32[4294967296,4294967296]. let  in (a,) }"),
            ["invars: variable %0:f32[4294967296,4294967296] needs more than 2^63 bytes; the limit is 64.0 GiB (REMAT_MAX_VALUE_BYTES)"]
        );
        // 2^62 + 1 rows of 4: the element count wraps to 4 in release builds.
        let text = "{ lambda ; a:f32[]. let b:f32[4611686018427387905,4] = broadcast_in_dim[broadcast_dimensions=() shape=(4611686018427387905, 4) sharding=None] a in (b,) }";
        assert_eq!(
            problems(text),
            ["eqn 0 (broadcast_in_dim) at t:1:25: variable %1:f32[4611686018427387905,4] needs more than 2^63 bytes; the limit is 64.0 GiB (REMAT_MAX_VALUE_BYTES)"]
        );
        // Fits in 64 bits, but 909.5 TiB is beyond the limit.
        let text = "{ lambda ; a:f32[]. let b:f32[250000000000000] = broadcast_in_dim[broadcast_dimensions=() shape=(250000000000000,) sharding=None] a in (a,) }";
        assert_eq!(
            problems(text),
            ["eqn 0 (broadcast_in_dim) at t:1:25: variable %1:f32[250000000000000] needs 909.5 TiB; the limit is 64.0 GiB (REMAT_MAX_VALUE_BYTES)"]
        );
        // Exactly the limit is allowed; a byte more is not.
        assert_eq!(problems("{ lambda ; a:bool[68719476736]. let  in (a,) }"), Vec::<String>::new());
        assert_eq!(
            problems("{ lambda ; a:bool[68719476737]. let  in (a,) }"),
            ["invars: variable %0:bool[68719476737] needs 68719476737 bytes; the limit is 68719476736 bytes (REMAT_MAX_VALUE_BYTES)"]
        );
        // In a nested jaxpr.
        let text = "{ lambda ; a:f32[]. let b:f32[] = jit[name=f jaxpr={ lambda ; c:f32[]. let d:f32[99999999999999] = broadcast_in_dim[broadcast_dimensions=() shape=(99999999999999,) sharding=None] c; e:f32[] = reduce_sum[axes=(0,)] d in (e,) }] a in (b,) }";
        let got = problems(text);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("in eqn 0 (jit) param jaxpr, eqn 0 (broadcast_in_dim"), "{got:?}");
        assert!(
            got[0].ends_with(
                "variable %1:f32[99999999999999] needs 363.8 TiB; the limit is 64.0 GiB (REMAT_MAX_VALUE_BYTES)"
            ),
            "{got:?}"
        );
    }

    #[test]
    fn byte_counts_read_in_binary_units() {
        use crate::format_bytes;
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(64 << 30), "64.0 GiB");
        assert_eq!(format_bytes(u64::MAX as u128), "16.0 EiB");
    }

    /// A known half returning `d` and the residuals `a`, `b`, `c`.
    const KNOWN: &str = "{ lambda ; a:f32[3] b:f32[2,3] c:i32[]. let d:f32[3] = sin a in (d, a, b, c) }";

    /// `check_split(KNOWN, staged, num_res)`, as the problems' lines.
    fn split_problems(staged: &str, num_res: usize) -> Vec<String> {
        let known = parse_jaxpr(KNOWN, "known").unwrap();
        let staged = parse_jaxpr(staged, "staged").unwrap();
        match check_split(&known, &staged, num_res) {
            Ok(()) => Vec::new(),
            Err(e) => e.problems.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn a_matching_split_passes() {
        let staged = "{ lambda ; r:f32[3] s:f32[2,3] t:i32[] u:f32[3]. let v:f32[3] = mul r u in (v,) }";
        assert_eq!(split_problems(staged, 3), Vec::<String>::new());
        // No residuals: nothing to compare.
        assert_eq!(split_problems("{ lambda ; u:f32[3]. let  in (u,) }", 0), Vec::<String>::new());
    }

    #[test]
    fn a_split_with_too_few_residuals_names_the_missing_one() {
        let staged = "{ lambda ; r:f32[3] s:f32[2,3]. let  in (r,) }";
        assert_eq!(
            split_problems(staged, 3),
            ["residual 2: the known jaxpr returns i32[] but the staged jaxpr has only 2 inputs for 3 residuals"]
        );
        // Five residuals claimed where each side has four values: residual 1 (`d` against
        // `r`) happens to agree; the rest are shifted or missing.
        let staged = "{ lambda ; q:f32[] r:f32[3] s:f32[2,3] t:i32[]. let  in (r,) }";
        assert_eq!(
            split_problems(staged, 5),
            [
                "residual 0: the staged jaxpr takes f32[] but the known jaxpr has only 4 outputs for 5 residuals",
                "residual 2: the known jaxpr returns f32[3] but the staged jaxpr takes f32[2,3]",
                "residual 3: the known jaxpr returns f32[2,3] but the staged jaxpr takes i32[]",
                "residual 4: the known jaxpr returns i32[] but the staged jaxpr has only 4 inputs for 5 residuals",
            ]
        );
    }

    #[test]
    fn a_split_with_residuals_swapped_names_both() {
        let staged = "{ lambda ; s:f32[2,3] r:f32[3] t:i32[] u:f32[3]. let v:f32[3] = mul r u in (v,) }";
        assert_eq!(
            split_problems(staged, 3),
            [
                "residual 0: the known jaxpr returns f32[3] but the staged jaxpr takes f32[2,3]",
                "residual 1: the known jaxpr returns f32[2,3] but the staged jaxpr takes f32[3]",
            ]
        );
    }

    #[test]
    fn a_split_with_a_wrong_dtype_shape_or_memory_space_names_the_residual() {
        let staged = "{ lambda ; r:f32[3] s:f32[2,3] t:f32[] u:f32[3]. let  in (u,) }";
        assert_eq!(
            split_problems(staged, 3),
            ["residual 2: the known jaxpr returns i32[] but the staged jaxpr takes f32[]"]
        );
        let staged = "{ lambda ; r:f32[3] s:f32[3,2] t:i32[] u:f32[3]. let  in (u,) }";
        assert_eq!(
            split_problems(staged, 3),
            ["residual 1: the known jaxpr returns f32[2,3] but the staged jaxpr takes f32[3,2]"]
        );
        let staged = "{ lambda ; r:f32<host>[3] s:f32[2,3] t:i32[] u:f32[3]. let  in (u,) }";
        assert_eq!(
            split_problems(staged, 3),
            ["residual 0: the known jaxpr returns f32[3] but the staged jaxpr takes f32<host>[3]"]
        );
    }
}

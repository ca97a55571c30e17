//! Calls and loops, the primitives that hold a nested jaxpr: `jit`, `closed_call`,
//! `composite`, `custom_jvp_call`, `remat2` (`checkpoint`) and `scan`.
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, the
//! `key=value` pairs in printing order; `parse_*`, the same read back) and its shape rule
//! (`*_shape`, from `jax/_src/pjit.py`, `custom_derivatives.py`, `ad_checkpoint.py` and
//! `control_flow/loops.py`). An operand matches an inner invar when dtype, shape and
//! memory space are all equal; a malformed inner jaxpr (a variable out of range) is an
//! error, never a panic.

use std::sync::Arc;

use super::params::{ParamReader, Params};
use super::Primitive;
use crate::jaxpr::{Atom, ClosedJaxpr, Jaxpr, JitOptions, Var};
use crate::param::Param;
use crate::policy::Policy;
use crate::shape::{bail, ensure, ShapeError};
use crate::sharding::Sharding;
use crate::types::Aval;

// `jit[name=relu compiler_options_kvs=... ctx_mesh=... donated_invars=(True,) jaxpr={...}
// keep_unused=True]`: `name` first, then sorted, the defaults hidden.

pub(super) fn jit_params(name: &str, jaxpr: &ClosedJaxpr, options: &JitOptions) -> Params {
    let mut ps = vec![("name", Param::Word(name.to_string()))];
    if let Some(kvs) = &options.compiler_options_kvs {
        ps.push(("compiler_options_kvs", kvs.clone()));
    }
    if let Some(mesh) = &options.ctx_mesh {
        ps.push(("ctx_mesh", mesh.clone()));
    }
    if options.donated_invars.iter().any(|&d| d) {
        ps.push(("donated_invars", Param::Tuple(options.donated_invars.iter().map(|&d| Param::Bool(d)).collect())));
    }
    let specified = |s: &[Sharding]| s.iter().any(|s| *s != Sharding::Unspecified);
    if specified(&options.in_shardings) {
        ps.push(("in_shardings", super::sharded::shardings_param(&options.in_shardings)));
    }
    ps.push(("jaxpr", Param::Jaxpr(jaxpr.jaxpr.clone())));
    if options.keep_unused {
        ps.push(("keep_unused", Param::Bool(true)));
    }
    if specified(&options.out_shardings) {
        ps.push(("out_shardings", super::sharded::shardings_param(&options.out_shardings)));
    }
    ps
}

pub(super) fn parse_jit(p: &mut ParamReader) -> Result<Primitive, String> {
    let name = p.word("name")?;
    let jaxpr = ClosedJaxpr::new(p.jaxpr("jaxpr")?);
    let donated_invars = if p.has("donated_invars") {
        p.seq("donated_invars")?
            .into_iter()
            .map(|d| match d {
                Param::Bool(b) => Ok(b),
                other => Err(format!("jit: `donated_invars` holds {}, not True or False", other.repr())),
            })
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let keep_unused = if p.has("keep_unused") { p.bool("keep_unused")? } else { false };
    let ctx_mesh = if p.has("ctx_mesh") { Some(p.take("ctx_mesh")?) } else { None };
    let in_shardings = if p.has("in_shardings") {
        super::sharded::shardings_of(&p.take("in_shardings")?).map_err(|e| format!("jit: in_shardings: {e}"))?
    } else {
        Vec::new()
    };
    let out_shardings = if p.has("out_shardings") {
        super::sharded::shardings_of(&p.take("out_shardings")?).map_err(|e| format!("jit: out_shardings: {e}"))?
    } else {
        Vec::new()
    };
    let compiler_options_kvs = if p.has("compiler_options_kvs") { Some(p.take("compiler_options_kvs")?) } else { None };
    // `inline` is not printed by JAX; read and dropped if a text has it.
    if p.has("inline") {
        p.bool("inline")?;
    }
    Ok(Primitive::Jit {
        name,
        jaxpr,
        options: JitOptions {
            donated_invars,
            keep_unused,
            ctx_mesh,
            compiler_options_kvs,
            in_shardings,
            out_shardings,
        },
    })
}

pub(crate) fn jit_shape(jaxpr: &ClosedJaxpr, options: &JitOptions, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let n = options.donated_invars.len();
    ensure!(n == 0 || n == in_avals.len(), "jit", "donated_invars has {n} flags for {} operands", in_avals.len());
    let n = options.in_shardings.len();
    ensure!(n == 0 || n == in_avals.len(), "jit", "in_shardings has {n} shardings for {} operands", in_avals.len());
    let n = options.out_shardings.len();
    let outs = jaxpr.jaxpr.outvars.len();
    ensure!(n == 0 || n == outs, "jit", "out_shardings has {n} shardings for {outs} results");
    call("jit", in_avals, jaxpr)
}

// `closed_call[call_jaxpr={...}]`: the one parameter.

pub(super) fn closed_call_params(call_jaxpr: &ClosedJaxpr) -> Params {
    vec![("call_jaxpr", Param::Jaxpr(call_jaxpr.jaxpr.clone()))]
}

pub(super) fn parse_closed_call(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::ClosedCall { call_jaxpr: ClosedJaxpr::new(p.jaxpr("call_jaxpr")?) })
}

// `composite[attributes=(('axis', (0,), PyTreeDef(*)),) jaxpr={...} name=my.softmax
// version=0]`: sorted; every parameter printed.

pub(super) fn composite_params(name: &str, attributes: &Param, version: i64, jaxpr: &ClosedJaxpr) -> Params {
    vec![
        ("attributes", attributes.clone()),
        ("jaxpr", Param::Jaxpr(jaxpr.jaxpr.clone())),
        ("name", Param::Word(name.to_string())),
        ("version", Param::Int(version)),
    ]
}

pub(super) fn parse_composite(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Composite {
        attributes: p.take("attributes")?,
        jaxpr: ClosedJaxpr::new(p.jaxpr("jaxpr")?),
        name: p.word("name")?,
        version: p.int("version")?,
    })
}

// `custom_jvp_call[name=relu call_jaxpr={...} jvp=jvp num_consts=1 symbolic_zeros=False]`:
// `name` first; `num_consts` hidden when 0.

pub(super) fn custom_jvp_call_params(
    name: &str,
    call_jaxpr: &ClosedJaxpr,
    jvp: &str,
    num_consts: usize,
    symbolic_zeros: bool,
) -> Params {
    let mut ps = vec![
        ("name", Param::Word(name.to_string())),
        ("call_jaxpr", Param::Jaxpr(call_jaxpr.jaxpr.clone())),
        ("jvp", Param::Word(jvp.to_string())),
    ];
    if num_consts != 0 {
        ps.push(("num_consts", Param::Int(num_consts as i64)));
    }
    ps.push(("symbolic_zeros", Param::Bool(symbolic_zeros)));
    ps
}

pub(super) fn parse_custom_jvp_call(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::CustomJvpCall {
        name: p.word("name")?,
        call_jaxpr: ClosedJaxpr::new(p.jaxpr("call_jaxpr")?),
        jvp: p.word("jvp")?,
        num_consts: if p.has("num_consts") { p.usize("num_consts")? } else { 0 },
        symbolic_zeros: p.bool("symbolic_zeros")?,
    })
}

pub(crate) fn custom_jvp_call_shape(
    call_jaxpr: &ClosedJaxpr,
    num_consts: usize,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "custom_jvp_call";
    ensure!(num_consts <= in_avals.len(), name, "num_consts={num_consts} but only {} operands", in_avals.len());
    call(name, in_avals, call_jaxpr)
}

// `remat2[differentiated=False jaxpr={...} policy=None prevent_cse=True]`.

pub(super) fn remat2_params(
    jaxpr: &Arc<Jaxpr>,
    prevent_cse: bool,
    differentiated: bool,
    policy: Option<&Policy>,
) -> Params {
    vec![
        ("differentiated", Param::Bool(differentiated)),
        ("jaxpr", Param::Jaxpr(jaxpr.clone())),
        ("policy", policy.map_or(Param::None, Policy::to_param)),
        ("prevent_cse", Param::Bool(prevent_cse)),
    ]
}

pub(super) fn parse_remat2(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Remat2 {
        jaxpr: p.jaxpr("jaxpr")?,
        prevent_cse: p.bool("prevent_cse")?,
        differentiated: p.bool("differentiated")?,
        policy: Policy::from_param(&p.take("policy")?)?,
    })
}

pub(crate) fn remat2_shape(jaxpr: &Jaxpr, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "remat2";
    ensure!(
        jaxpr.constvars.is_empty(),
        name,
        "the inner jaxpr has {} constvars; remat2 takes a jaxpr whose constants are invars",
        jaxpr.constvars.len()
    );
    check_operands(name, in_avals, &inner_avals(name, jaxpr, &jaxpr.invars)?)?;
    inner_out_avals(name, jaxpr)
}

// `scan[jaxpr={...} length=2 num_carry=1 num_consts=0 reverse=False unroll=1]`.

pub(super) fn scan_params(
    jaxpr: &ClosedJaxpr,
    length: usize,
    reverse: bool,
    num_consts: usize,
    num_carry: usize,
    unroll: usize,
) -> Params {
    vec![
        ("jaxpr", Param::Jaxpr(jaxpr.jaxpr.clone())),
        ("length", Param::Int(length as i64)),
        ("num_carry", Param::Int(num_carry as i64)),
        ("num_consts", Param::Int(num_consts as i64)),
        ("reverse", Param::Bool(reverse)),
        ("unroll", Param::Int(unroll as i64)),
    ]
}

pub(super) fn parse_scan(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Scan {
        jaxpr: ClosedJaxpr::new(p.jaxpr("jaxpr")?),
        length: p.usize("length")?,
        reverse: p.bool("reverse")?,
        num_consts: p.usize("num_consts")?,
        num_carry: p.usize("num_carry")?,
        unroll: p.usize("unroll")?,
    })
}

/// `scan`: operands are consts, carries and xs; the body maps (consts, carries, x slices)
/// to (carries, y slices); the results are the final carries and the stacked ys.
pub(crate) fn scan_shape(
    body: &ClosedJaxpr,
    length: usize,
    num_consts: usize,
    num_carry: usize,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "scan";
    check_consts(name, body)?;
    ensure!(
        num_consts + num_carry <= in_avals.len(),
        name,
        "num_consts={num_consts} and num_carry={num_carry} but only {} operands",
        in_avals.len()
    );
    let (consts_and_carries, xs) = in_avals.split_at(num_consts + num_carry);
    let carries = &consts_and_carries[num_consts..];
    let mut body_in = consts_and_carries.to_vec();
    for (i, x) in xs.iter().enumerate() {
        ensure!(
            x.shape.first() == Some(&length),
            name,
            "xs operand {i} is {x}; its leading dimension must be length={length}"
        );
        body_in.push(Aval {
            dtype: x.dtype,
            shape: x.shape[1..].to_vec(),
            memory_space: x.memory_space,
            vma: x.vma.clone(),
        });
    }
    check_operands(name, &body_in, &inner_avals(name, &body.jaxpr, &body.jaxpr.invars)?)?;
    let body_out = inner_out_avals(name, &body.jaxpr)?;
    ensure!(body_out.len() >= num_carry, name, "the body has {} outputs for num_carry={num_carry}", body_out.len());
    let (carry_out, ys) = body_out.split_at(num_carry);
    for (i, (c_in, c_out)) in carries.iter().zip(carry_out).enumerate() {
        ensure!(c_in == c_out, name, "carry {i} enters the body as {c_in} but leaves it as {c_out}");
    }
    let mut out = carries.to_vec();
    out.extend(ys.iter().map(|y| {
        let mut shape = vec![length];
        shape.extend(&y.shape);
        Aval { dtype: y.dtype, shape, memory_space: y.memory_space, vma: y.vma.clone() }
    }));
    Ok(out)
}

// Shared by the shape rules above.

/// `jit`, `closed_call` and `custom_jvp_call`: operands match the invars, results are the outvars.
pub(super) fn call(name: &str, in_avals: &[Aval], c: &ClosedJaxpr) -> Result<Vec<Aval>, ShapeError> {
    check_consts(name, c)?;
    check_operands(name, in_avals, &inner_avals(name, &c.jaxpr, &c.jaxpr.invars)?)?;
    inner_out_avals(name, &c.jaxpr)
}

/// The avals of `vars` in a nested jaxpr, or an error if one is out of range.
pub(super) fn inner_avals(name: &str, j: &Jaxpr, vars: &[Var]) -> Result<Vec<Aval>, ShapeError> {
    vars.iter()
        .map(|v| match j.vars.get(v.index()) {
            Some(decl) => Ok(decl.aval.clone()),
            None => bail!(name, "the inner jaxpr's variable {v:?} is out of range"),
        })
        .collect()
}

pub(super) fn inner_out_avals(name: &str, j: &Jaxpr) -> Result<Vec<Aval>, ShapeError> {
    j.outvars
        .iter()
        .map(|a| match a {
            Atom::Var(v) => inner_avals(name, j, &[*v]).map(|mut avals| avals.remove(0)),
            Atom::Lit(l) => Ok(l.aval()),
        })
        .collect()
}

/// A closed jaxpr's consts have its constvars' types.
pub(super) fn check_consts(name: &str, c: &ClosedJaxpr) -> Result<(), ShapeError> {
    let const_avals = inner_avals(name, &c.jaxpr, &c.jaxpr.constvars)?;
    ensure!(
        c.consts.len() == const_avals.len(),
        name,
        "the closed jaxpr has {} consts for {} constvars",
        c.consts.len(),
        const_avals.len()
    );
    for (i, (value, aval)) in c.consts.iter().zip(&const_avals).enumerate() {
        ensure!(
            value.dtype() == aval.dtype && value.shape() == aval.shape.as_slice(),
            name,
            "const {i} is {} but its constvar is {aval}",
            Aval::new(value.dtype(), value.shape().to_vec())
        );
    }
    Ok(())
}

/// Operands against a nested jaxpr's invars: same count, and equal avals including the
/// memory space.
pub(super) fn check_operands(name: &str, in_avals: &[Aval], invars: &[Aval]) -> Result<(), ShapeError> {
    ensure!(
        in_avals.len() == invars.len(),
        name,
        "{} operands for an inner jaxpr with {} invars",
        in_avals.len(),
        invars.len()
    );
    for (i, (x, want)) in in_avals.iter().zip(invars).enumerate() {
        ensure!(x == want, name, "operand {i} is {x} but the inner jaxpr's invar {i} is {want}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::parse::parse_jaxpr;
    use crate::print::pp_jaxpr;
    use crate::verify::verify;

    /// As JAX prints `jax.jit(f, donate_argnums=0, keep_unused=True)` called in a function.
    const DONATING: &str = "{ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = jit[
      name=<lambda>
      donated_invars=(True, False)
      jaxpr={ lambda ; a:f32[3] b:f32[3]. let
          c:f32[3] = mul a 2.0:f32[]
        in (c,) }
      keep_unused=True
    ] a b
    d:f32[3] = add c 1.0:f32[]
    e:f32[] = reduce_sum[axes=(0,) out_sharding=None] d
  in (e,) }";

    /// As JAX prints the known half of a scan inside a checkpoint (`_scan_partial_eval_custom`).
    const CLOSED_CALL: &str = "{ lambda ; a:f32[4] b:f32[4,4]. let
    c:f32[4] d:f32[3,4] = closed_call[
      call_jaxpr={ lambda ; e:f32[4,4] f:f32[4]. let
          g:f32[4] h:f32[3,4] = scan[
            jaxpr={ lambda ; i:f32[4,4] j:f32[4]. let
                k:f32[4] = dot_general[
                  dimension_numbers=(([0], [0]), ([], []))
                  preferred_element_type=float32
                ] j i
                l:f32[4] = sin k
              in (l, k) }
            length=3
            num_carry=1
            num_consts=1
            reverse=False
            unroll=1
          ] e f
        in (g, h) }
    ] b a
    m:f32[] = reduce_sum[axes=(0,) out_sharding=None] c
  in (m, a, b, d) }";

    #[test]
    fn closed_call_prints_back_and_is_checked() {
        let j = parse_jaxpr(CLOSED_CALL, "c.jaxpr").unwrap();
        verify(&j).unwrap();
        assert_eq!(j.eqns[0].primitive.name(), "closed_call");
        assert_eq!(pp_jaxpr(&j), CLOSED_CALL);
        // The operands must match the call jaxpr's invars.
        let swapped = CLOSED_CALL.replace("] b a\n", "] a b\n");
        let e = verify(&parse_jaxpr(&swapped, "c.jaxpr").unwrap()).unwrap_err().to_string();
        assert!(e.contains("closed_call: operand 0 is f32[4] but the inner jaxpr's invar 0 is f32[4,4]"), "{e}");
        let other = CLOSED_CALL.replace("call_jaxpr=", "jaxpr=");
        let e = parse_jaxpr(&other, "c.jaxpr").unwrap_err().to_string();
        assert!(e.contains("call_jaxpr"), "{e}");
    }

    #[test]
    fn jit_options_print_back_and_are_checked() {
        let j = parse_jaxpr(DONATING, "j.jaxpr").unwrap();
        verify(&j).unwrap();
        assert_eq!(pp_jaxpr(&j), DONATING);
        let wrong = DONATING.replace("donated_invars=(True, False)", "donated_invars=(True,)");
        let e = verify(&parse_jaxpr(&wrong, "j.jaxpr").unwrap()).unwrap_err().to_string();
        assert!(e.contains("donated_invars has 1 flags for 2 operands"), "{e}");
        let opaque = DONATING.replace(
            "name=<lambda>",
            "name=<lambda>\n      compiler_options_kvs=(('xla_cpu_enable_fast_math', False),)",
        );
        assert_eq!(pp_jaxpr(&parse_jaxpr(&opaque, "j.jaxpr").unwrap()), opaque);
    }
}

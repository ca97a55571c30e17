//! Control flow and custom-vjp calls: `cond`, `while` and `custom_vjp_call`.
//!
//! For each primitive, as in `call.rs`: its parameters' text form (`*_params`, the
//! `key=value` pairs in printing order; `parse_*`, the same read back) and its shape rule
//! (`*_shape`, from `jax/_src/lax/control_flow/conditionals.py`, `loops.py` and
//! `custom_derivatives.py`). `cond`'s branches are one parameter, a tuple of jaxprs that
//! JAX prints one per line (`branches=(`, see `print.rs`).

use super::call::{call, check_consts, check_operands, inner_avals, inner_out_avals};
use super::params::{ParamReader, Params};
use super::Primitive;
use crate::jaxpr::ClosedJaxpr;
use crate::param::Param;
use crate::param_types::BranchesPlatforms;
use crate::shape::{bail, ensure, ShapeError};
use crate::types::{Aval, DType};

// `cond[branches=(...)] index op0 op1 ...`: the branches, and `branches_platforms` when
// the cond selects by platform (`branches_platforms=(('mosaic',), None)`).

pub(super) fn cond_params(branches: &[ClosedJaxpr], branches_platforms: Option<&BranchesPlatforms>) -> Params {
    let mut ps = vec![("branches", Param::Tuple(branches.iter().map(|b| Param::Jaxpr(b.jaxpr.clone())).collect()))];
    if let Some(platforms) = branches_platforms {
        ps.push(("branches_platforms", platforms_param(platforms)));
    }
    ps
}

/// `(('mosaic',), None)`: a tuple of tuples of platform names or `None`.
pub(super) fn platforms_param(platforms: &BranchesPlatforms) -> Param {
    Param::Tuple(
        platforms
            .iter()
            .map(|p| match p {
                None => Param::None,
                Some(names) => Param::Tuple(names.iter().map(|s| Param::Str(s.clone())).collect()),
            })
            .collect(),
    )
}

pub(super) fn parse_platforms(p: &mut ParamReader, key: &str) -> Result<BranchesPlatforms, String> {
    let v = p.take(key)?;
    let wrong =
        || format!("{}: `{key}` must be a tuple of tuples of platform names or None, found {}", p.prim(), v.repr());
    let Param::Tuple(items) = &v else { return Err(wrong()) };
    items
        .iter()
        .map(|item| match item {
            Param::None => Ok(None),
            Param::Tuple(names) => names
                .iter()
                .map(|n| if let Param::Str(s) = n { Ok(s.clone()) } else { Err(wrong()) })
                .collect::<Result<Vec<String>, String>>()
                .map(Some),
            _ => Err(wrong()),
        })
        .collect()
}

/// `platform_index`: no operands, an `i32[]` result; some entry must be for `cpu` or the
/// default, or the program has no branch to run here.
pub(crate) fn platform_index_shape(platforms: &BranchesPlatforms, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "platform_index";
    ensure!(in_avals.is_empty(), name, "takes no operands, found {}", in_avals.len());
    ensure!(
        crate::param_types::platform_index(platforms).is_some(),
        name,
        "none of the platforms {platforms:?} is `{}` and none is the default (None)",
        crate::param_types::PLATFORM
    );
    Ok(vec![Aval::scalar(DType::I32)])
}

pub(super) fn parse_cond(p: &mut ParamReader) -> Result<Primitive, String> {
    // One branch reads back as a bare parenthesised jaxpr, several as a tuple.
    let branches = match p.take("branches")? {
        Param::Jaxpr(j) => vec![ClosedJaxpr::new(j)],
        Param::Tuple(items) if !items.is_empty() => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item {
                Param::Jaxpr(j) => Ok(ClosedJaxpr::new(j)),
                other => Err(format!("cond: branch {i} of `branches` is {}, not a jaxpr", other.repr())),
            })
            .collect::<Result<_, _>>()?,
        other => return Err(format!("cond: `branches` must be a tuple of jaxprs, got {}", other.repr())),
    };
    let branches_platforms =
        if p.has("branches_platforms") { Some(parse_platforms(p, "branches_platforms")?) } else { None };
    Ok(Primitive::Cond { branches, branches_platforms })
}

/// `cond`: an `i32[]` index (as JAX's `_cond_typecheck` requires), then the operands every branch takes;
/// every branch returns the same types, which are the results.
pub(crate) fn cond_shape(
    branches: &[ClosedJaxpr],
    branches_platforms: Option<&BranchesPlatforms>,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "cond";
    ensure!(!branches.is_empty(), name, "a cond needs at least one branch");
    if let Some(platforms) = branches_platforms {
        ensure!(
            platforms.len() == branches.len(),
            name,
            "branches_platforms has {} entries for {} branches",
            platforms.len(),
            branches.len()
        );
    }
    let Some((index, ops)) = in_avals.split_first() else { bail!(name, "a cond needs an index operand") };
    ensure!(
        index.shape.is_empty() && index.dtype == DType::I32,
        name,
        "the index must be an i32[] scalar, got {index}"
    );
    let out = call(name, ops, &branches[0])?;
    for (i, b) in branches.iter().enumerate().skip(1) {
        let outs = call(name, ops, b).map_err(|e| ShapeError::new(name, format!("branch {i}: {}", e.message)))?;
        ensure!(outs == out, name, "branch {i} returns {} but branch 0 returns {}", avals(&outs), avals(&out));
    }
    Ok(out)
}

fn avals(xs: &[Aval]) -> String {
    format!("({})", xs.iter().map(Aval::to_string).collect::<Vec<_>>().join(", "))
}

// `while[body_jaxpr={...} body_nconsts=1 cond_jaxpr={...} cond_nconsts=1] cconsts bconsts init`.

pub(super) fn while_params(
    cond_jaxpr: &ClosedJaxpr,
    body_jaxpr: &ClosedJaxpr,
    cond_nconsts: usize,
    body_nconsts: usize,
) -> Params {
    vec![
        ("body_jaxpr", Param::Jaxpr(body_jaxpr.jaxpr.clone())),
        ("body_nconsts", Param::Int(body_nconsts as i64)),
        ("cond_jaxpr", Param::Jaxpr(cond_jaxpr.jaxpr.clone())),
        ("cond_nconsts", Param::Int(cond_nconsts as i64)),
    ]
}

pub(super) fn parse_while(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::While {
        body_jaxpr: ClosedJaxpr::new(p.jaxpr("body_jaxpr")?),
        body_nconsts: p.usize("body_nconsts")?,
        cond_jaxpr: ClosedJaxpr::new(p.jaxpr("cond_jaxpr")?),
        cond_nconsts: p.usize("cond_nconsts")?,
    })
}

/// `while`: operands are the cond consts, the body consts, then the initial carries;
/// `cond_jaxpr(cond consts, carries) -> bool[..]`, `body_jaxpr(body consts, carries) -> carries`.
///
/// A predicate of rank > 0 is JAX's batched predicate (what `vmap` makes of a predicate
/// the batch reaches): its shape is a prefix of every carry's shape, the loop runs while
/// any element is true, and each trip updates only the carries' slices whose predicate
/// element is true (JAX's `_while_lowering`: `reduce_or` of the predicate in the cond, a
/// `select_n` per carry in the body).
pub(crate) fn while_shape(
    cond_jaxpr: &ClosedJaxpr,
    body_jaxpr: &ClosedJaxpr,
    cond_nconsts: usize,
    body_nconsts: usize,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "while";
    ensure!(
        cond_nconsts + body_nconsts <= in_avals.len(),
        name,
        "cond_nconsts={cond_nconsts} and body_nconsts={body_nconsts} but only {} operands",
        in_avals.len()
    );
    let (cconsts, rest) = in_avals.split_at(cond_nconsts);
    let (bconsts, carries) = rest.split_at(body_nconsts);
    check_consts(name, cond_jaxpr)?;
    check_consts(name, body_jaxpr)?;
    let cond_in: Vec<Aval> = cconsts.iter().chain(carries).cloned().collect();
    check_operands(name, &cond_in, &inner_avals(name, &cond_jaxpr.jaxpr, &cond_jaxpr.jaxpr.invars)?)?;
    let pred = inner_out_avals(name, &cond_jaxpr.jaxpr)?;
    ensure!(
        pred.len() == 1 && pred[0].dtype == DType::Bool,
        name,
        "cond_jaxpr must return one bool[] (or a batched bool predicate), got {}",
        avals(&pred)
    );
    let batch = &pred[0].shape;
    ensure!(
        carries.iter().all(|c| c.shape.starts_with(batch)),
        name,
        "a batched predicate {} must have a shape that prefixes every carry's, got carries {}",
        pred[0],
        avals(carries)
    );
    let body_in: Vec<Aval> = bconsts.iter().chain(carries).cloned().collect();
    check_operands(name, &body_in, &inner_avals(name, &body_jaxpr.jaxpr, &body_jaxpr.jaxpr.invars)?)?;
    let body_out = inner_out_avals(name, &body_jaxpr.jaxpr)?;
    ensure!(
        body_out.len() == carries.len() && body_out.iter().zip(carries).all(|(o, c)| o == c),
        name,
        "body_jaxpr returns {} for carries {}",
        avals(&body_out),
        avals(carries)
    );
    Ok(carries.to_vec())
}

// `custom_vjp_call[name=f bwd=f_bwd call_jaxpr={...} fwd=f_fwd num_consts=1 symbolic_zeros=False]`:
// `name` first, then sorted; `num_consts` hidden when 0.

pub(super) fn custom_vjp_call_params(
    name: &str,
    call_jaxpr: &ClosedJaxpr,
    fwd: &str,
    bwd: &str,
    num_consts: usize,
    symbolic_zeros: bool,
) -> Params {
    let mut ps = vec![
        ("name", Param::Word(name.to_string())),
        ("bwd", Param::Word(bwd.to_string())),
        ("call_jaxpr", Param::Jaxpr(call_jaxpr.jaxpr.clone())),
        ("fwd", Param::Word(fwd.to_string())),
    ];
    if num_consts != 0 {
        ps.push(("num_consts", Param::Int(num_consts as i64)));
    }
    ps.push(("symbolic_zeros", Param::Bool(symbolic_zeros)));
    ps
}

pub(super) fn parse_custom_vjp_call(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::CustomVjpCall {
        name: p.word("name")?,
        bwd: p.word("bwd")?,
        call_jaxpr: ClosedJaxpr::new(p.jaxpr("call_jaxpr")?),
        fwd: p.word("fwd")?,
        num_consts: if p.has("num_consts") { p.usize("num_consts")? } else { 0 },
        symbolic_zeros: p.bool("symbolic_zeros")?,
    })
}

pub(crate) fn custom_vjp_call_shape(
    call_jaxpr: &ClosedJaxpr,
    num_consts: usize,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "custom_vjp_call";
    ensure!(num_consts <= in_avals.len(), name, "num_consts={num_consts} but only {} operands", in_avals.len());
    call(name, in_avals, call_jaxpr)
}

// `empty2[dtype=float32 memory_space=MemorySpace.Device]`: no operands, a scalar result.
// (The minimum `cond`'s partial evaluation needs; wt-parse adds `empty2` as well.)

/// The branch a `cond` with `num_branches` branches runs for `index`: XLA's `Case`
/// semantics, where an index out of range, negative included, runs the last branch (the
/// front ends clamp first, so only hand-written jaxprs reach it).
pub fn cond_branch(index: i64, num_branches: usize) -> usize {
    match usize::try_from(index) {
        Ok(i) if i < num_branches => i,
        _ => num_branches.saturating_sub(1),
    }
}

#[cfg(test)]
mod tests {
    use super::cond_branch;
    use crate::parse::parse_jaxpr;
    use crate::print::pp_jaxpr;
    use crate::verify::verify;

    #[test]
    fn an_index_out_of_range_runs_the_last_branch() {
        assert_eq!([0, 1, 2, 3, 9, -1, i64::MIN].map(|i| cond_branch(i, 3)), [0, 1, 2, 2, 2, 2, 2]);
    }

    /// `pp_jaxprs`: the branches one per line at +2 when they do not fit on one; a while's
    /// parameters sorted. (The texts are JAX's.)
    #[test]
    fn control_flow_prints_as_jax_does() {
        for text in [
            // Printed by JAX for `lax.switch(i, [lambda x: x, lambda x: -x], x)`.
            "{ lambda ; a:i32[] b:f32[]. let
    c:i32[] = convert_element_type[new_dtype=int32 weak_type=False] a
    d:i32[] = clamp 0:i32[] c 1:i32[]
    e:f32[] = cond[
      branches=(
        { lambda ; f:f32[]. let  in (f,) }
        { lambda ; g:f32[]. let h:f32[] = neg g in (h,) }
      )
    ] d b
  in (e,) }",
            "{ lambda ; a:i32[] b:f32[3]. let
    c:f32[3] = cond[
      branches=(
        { lambda ; d:f32[3]. let e:f32[3] = cos d; f:f32[3] = sub e d in (f,) }
        { lambda ; g:f32[3]. let
            h:f32[3] = sin g
            i:f32[3] = mul h 2.0:f32[]
          in (i,) }
      )
    ] a b
  in (c,) }",
            "{ lambda ; a:f32[3] b:i32[]. let
    _:i32[] _:i32[] c:f32[3] = while[
      body_jaxpr={ lambda ; d:i32[] e:i32[] f:f32[3]. let
          g:i32[] = add d 1:i32[]
          h:f32[3] = mul f 2.0:f32[]
        in (g, e, h) }
      body_nconsts=0
      cond_jaxpr={ lambda ; i:i32[] j:i32[] k:f32[3]. let
          l:bool[] = lt i j
        in (l,) }
      cond_nconsts=0
    ] 0:i32[] b a
  in (c,) }",
            // `jax.vmap` of a while whose predicate the batch reaches: a `bool[4]` predicate.
            "{ lambda ; a:i32[4] b:f32[4,3]. let
    c:i32[4] = broadcast_in_dim 0:i32[]
    d:i32[4] e:f32[4,3] = while[
      body_jaxpr={ lambda ; f:f32[4,3] g:i32[4] h:f32[4,3]. let
          i:i32[4] = add g 1:i32[]
          j:f32[4,3] = mul h f
        in (i, j) }
      body_nconsts=1
      cond_jaxpr={ lambda ; k:i32[4] l:i32[4] m:f32[4,3]. let
          n:bool[4] = lt l k
        in (n,) }
      cond_nconsts=1
    ] a b c b
  in (d, e) }",
        ] {
            let j = parse_jaxpr(text, "t.jaxpr").unwrap();
            verify(&j).unwrap();
            assert_eq!(pp_jaxpr(&j), text);
        }
    }

    #[test]
    fn malformed_whiles_are_errors() {
        let bad_pred = "{ lambda ; a:f32[]. let
    b:f32[] = while[
      body_jaxpr={ lambda ; c:f32[]. let  in (c,) }
      body_nconsts=0
      cond_jaxpr={ lambda ; d:f32[]. let  in (d,) }
      cond_nconsts=0
    ] a
  in (b,) }";
        let e = verify(&parse_jaxpr(bad_pred, "w.jaxpr").unwrap()).unwrap_err().to_string();
        assert!(e.contains("cond_jaxpr must return one bool[] (or a batched bool predicate), got (f32[])"), "{e}");
        let bad_batch = "{ lambda ; a:f32[3] b:bool[4]. let
    c:f32[3] = while[
      body_jaxpr={ lambda ; d:f32[3]. let  in (d,) }
      body_nconsts=0
      cond_jaxpr={ lambda ; e:bool[4] f:f32[3]. let  in (e,) }
      cond_nconsts=1
    ] b a
  in (c,) }";
        let e = verify(&parse_jaxpr(bad_batch, "w.jaxpr").unwrap()).unwrap_err().to_string();
        assert!(e.contains("a batched predicate bool[4] must have a shape that prefixes every carry's"), "{e}");
        let too_few = bad_pred.replace("body_nconsts=0", "body_nconsts=2");
        let e = verify(&parse_jaxpr(&too_few, "w.jaxpr").unwrap()).unwrap_err().to_string();
        assert!(e.contains("body_nconsts=2 but only 1 operands"), "{e}");
    }
}

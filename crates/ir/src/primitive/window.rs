//! Convolutions and windowed reductions: `conv_general_dilated`, `reduce_window_sum`,
//! `reduce_window_max`, `reduce_window_min`, `select_and_scatter_add` and
//! `select_and_gather_add` (JAX's `lax/convolution.py` and `lax/windowed_reductions.py`).
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, the
//! `key=value` pairs in printing order; `parse_*`, the same read back) and its shape rule
//! (`*_shape`). What it keeps true: every per-axis parameter has one entry per (spatial or
//! operand) axis, strides and dilations are at least 1, and a window never has a negative
//! extent, so evaluation and lowering can index without checks of their own.

use std::sync::Arc;

use super::params::{dtype_param, ParamReader, Params};
use super::Primitive;
use crate::jaxpr::{Atom, ConvParams, Eqn, Jaxpr, LitValue, Literal, SourceInfo, Var};
use crate::param::Param;
use crate::param_types::{CompareOp, ConvDimensionNumbers, Window, WindowOp};
use crate::shape::{arity, bail, device, ensure, ShapeError};
use crate::types::{Aval, DType};

/// `0` for an empty axis, else `(n - 1) * d + 1`: an extent after inserting `d - 1` holes
/// (saturating, so absurd parameters give absurd sizes rather than overflow).
pub fn dilated(n: usize, d: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n - 1).saturating_mul(d).saturating_add(1)
    }
}

/// JAX's `reduce_window_shape_tuple` / `conv_shape_tuple` for one axis:
/// `max(0, (dil(n, base) + lo + hi - dil(w, wdil)) // stride + 1)`, computed without
/// overflow for any parameters.
pub fn window_out_extent(n: usize, w: usize, stride: usize, (lo, hi): (i64, i64), base: usize, wdil: usize) -> usize {
    let padded = dilated(n, base) as i128 + lo as i128 + hi as i128;
    let window = dilated(w, wdil) as i128;
    if padded < window || stride == 0 {
        0
    } else {
        usize::try_from((padded - window) / stride as i128 + 1).unwrap_or(usize::MAX)
    }
}

fn pairs_param(ps: &[(i64, i64)]) -> Param {
    Param::Tuple(ps.iter().map(|&(lo, hi)| Param::Tuple(vec![Param::Int(lo), Param::Int(hi)])).collect())
}

fn read_pairs(p: &mut ParamReader, prim: &str, key: &str) -> Result<Vec<(i64, i64)>, String> {
    let v = p.take(key)?;
    let bad = || format!("{prim}: parameter `{key}` must be a tuple of (low, high) pairs, found {v}");
    let entries = v.as_seq().ok_or_else(bad)?;
    entries
        .iter()
        .map(|e| match e.as_seq() {
            Some([lo, hi]) => Some((lo.as_int()?, hi.as_int()?)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)
}

fn read_positive(p: &mut ParamReader, prim: &str, key: &str) -> Result<Vec<usize>, String> {
    let v = p.usizes(key)?;
    if v.contains(&0) {
        return Err(format!("{prim}: parameter `{key}` must be positive, found {v:?}"));
    }
    Ok(v)
}

fn optional_dtype(p: &mut ParamReader, key: &str) -> Result<Option<DType>, String> {
    if !p.has(key) || p.is_none(key) {
        p.optional_none(key)?;
        Ok(None)
    } else {
        Ok(Some(p.dtype(key)?))
    }
}

fn select_prim(p: &mut ParamReader, prim: &str) -> Result<CompareOp, String> {
    let w = p.word("select_prim")?;
    CompareOp::from_name(&w).ok_or_else(|| format!("{prim}: select_prim must be a comparison such as ge, found {w}"))
}

/// Checks that each per-axis parameter has `rank` entries.
fn check_lengths(name: &str, rank: usize, what: &str, lens: &[(&str, usize)]) -> Result<(), ShapeError> {
    for &(key, len) in lens {
        ensure!(len == rank, name, "{key} has {len} entries for {rank} {what}");
    }
    Ok(())
}

// `conv_general_dilated[batch_group_count=1 dimension_numbers=ConvDimensionNumbers(...)
// feature_group_count=1 lhs_dilation=(1, 1) out_sharding=None padding=((1, 1), (1, 1))
// precision=None preferred_element_type=None rhs_dilation=(1, 1) window_strides=(1, 1)] lhs rhs`:
// conv has no custom printer, so all ten print.

pub(super) fn conv_params(c: &ConvParams) -> Params {
    let spec = |s: &[usize]| Param::ints(s.iter().copied());
    let dn = &c.dimension_numbers;
    let kwargs = vec![
        ("lhs_spec".to_string(), spec(&dn.lhs_spec)),
        ("rhs_spec".to_string(), spec(&dn.rhs_spec)),
        ("out_spec".to_string(), spec(&dn.out_spec)),
    ];
    vec![
        ("batch_group_count", Param::Int(c.batch_group_count as i64)),
        ("dimension_numbers", Param::Call { func: "ConvDimensionNumbers".into(), args: Vec::new(), kwargs }),
        ("feature_group_count", Param::Int(c.feature_group_count as i64)),
        ("lhs_dilation", Param::ints(c.lhs_dilation.iter().copied())),
        ("out_sharding", Param::None),
        ("padding", pairs_param(&c.padding)),
        ("precision", c.precision.clone()),
        ("preferred_element_type", c.preferred_element_type.map_or(Param::None, dtype_param)),
        ("rhs_dilation", Param::ints(c.rhs_dilation.iter().copied())),
        ("window_strides", Param::ints(c.window_strides.iter().copied())),
    ]
}

pub(super) fn parse_conv(p: &mut ParamReader) -> Result<Primitive, String> {
    let name = "conv_general_dilated";
    p.optional_none("out_sharding")?;
    let dn = p.take("dimension_numbers")?;
    let bad = || {
        format!(
            "{name}: dimension_numbers must be ConvDimensionNumbers(lhs_spec=(...), rhs_spec=(...), out_spec=(...)), found {dn}"
        )
    };
    let Param::Call { func, args, kwargs } = &dn else { return Err(bad()) };
    if func != "ConvDimensionNumbers" || !args.is_empty() || kwargs.len() != 3 {
        return Err(bad());
    }
    let spec = |key: &str| -> Option<Vec<usize>> {
        let (_, v) = kwargs.iter().find(|(k, _)| k == key)?;
        super::params::usizes_of(v)
    };
    let (lhs_spec, rhs_spec, out_spec) = match (spec("lhs_spec"), spec("rhs_spec"), spec("out_spec")) {
        (Some(l), Some(r), Some(o)) => (l, r, o),
        _ => return Err(bad()),
    };
    let precision = if p.has("precision") { p.take("precision")? } else { Param::None };
    let precision_ok = |q: &Param| matches!(q, Param::None | Param::Word(_));
    let ok = match &precision {
        Param::Tuple(xs) => xs.len() == 2 && xs.iter().all(precision_ok),
        q => precision_ok(q),
    };
    if !ok {
        return Err(format!("{name}: precision must be None, a Precision or a pair of them, found {precision}"));
    }
    let group = |p: &mut ParamReader, key: &str| -> Result<usize, String> {
        let g = p.usize(key)?;
        if g == 0 {
            return Err(format!("{name}: {key} must be positive"));
        }
        Ok(g)
    };
    Ok(Primitive::ConvGeneralDilated(Box::new(ConvParams {
        window_strides: read_positive(p, name, "window_strides")?,
        padding: read_pairs(p, name, "padding")?,
        lhs_dilation: read_positive(p, name, "lhs_dilation")?,
        rhs_dilation: read_positive(p, name, "rhs_dilation")?,
        dimension_numbers: ConvDimensionNumbers { lhs_spec, rhs_spec, out_spec },
        feature_group_count: group(p, "feature_group_count")?,
        batch_group_count: group(p, "batch_group_count")?,
        precision,
        preferred_element_type: optional_dtype(p, "preferred_element_type")?,
    })))
}

/// JAX's `_conv_general_dilated_shape_rule` and dtype rule.
pub(crate) fn conv_shape(c: &ConvParams, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "conv_general_dilated";
    let [lhs, rhs] = arity(name, in_avals)?;
    ensure!(lhs.dtype == rhs.dtype, name, "operand dtypes differ: {lhs} and {rhs}");
    ensure!(lhs.dtype != DType::Bool, name, "operands must be numbers, found {lhs}");
    let rank = lhs.rank();
    ensure!(rank >= 2 && rhs.rank() == rank, name, "operands must have one rank of at least 2, found {lhs} and {rhs}");
    let dn = &c.dimension_numbers;
    for (key, spec) in [("lhs_spec", &dn.lhs_spec), ("rhs_spec", &dn.rhs_spec), ("out_spec", &dn.out_spec)] {
        let mut sorted = spec.clone();
        sorted.sort_unstable();
        ensure!(sorted == (0..rank).collect::<Vec<_>>(), name, "{key} {spec:?} is not a permutation of 0..{rank}");
    }
    let ns = rank - 2;
    check_lengths(
        name,
        ns,
        "spatial axes",
        &[
            ("window_strides", c.window_strides.len()),
            ("padding", c.padding.len()),
            ("lhs_dilation", c.lhs_dilation.len()),
            ("rhs_dilation", c.rhs_dilation.len()),
        ],
    )?;
    let (g, b) = (c.feature_group_count, c.batch_group_count);
    ensure!(g >= 1 && b >= 1, name, "group counts must be positive");
    ensure!(g == 1 || b == 1, name, "feature_group_count {g} and batch_group_count {b} cannot both exceed 1");
    let (n, ch) = (lhs.shape[dn.lhs_spec[0]], lhs.shape[dn.lhs_spec[1]]);
    let (o, i) = (rhs.shape[dn.rhs_spec[0]], rhs.shape[dn.rhs_spec[1]]);
    ensure!(ch % g == 0, name, "lhs feature dimension {ch} is not a multiple of feature_group_count {g}");
    ensure!(
        ch / g == i,
        name,
        "lhs feature dimension {ch} / feature_group_count {g} must equal the rhs input feature dimension {i}"
    );
    ensure!(o % g == 0, name, "rhs output feature dimension {o} is not a multiple of feature_group_count {g}");
    ensure!(n % b == 0, name, "lhs batch dimension {n} is not a multiple of batch_group_count {b}");
    ensure!(o % b == 0, name, "rhs output feature dimension {o} is not a multiple of batch_group_count {b}");
    let mut out = vec![0; rank];
    out[dn.out_spec[0]] = n / b;
    out[dn.out_spec[1]] = o;
    for s in 0..ns {
        let x = lhs.shape[dn.lhs_spec[2 + s]];
        let k = rhs.shape[dn.rhs_spec[2 + s]];
        out[dn.out_spec[2 + s]] =
            window_out_extent(x, k, c.window_strides[s], c.padding[s], c.lhs_dilation[s], c.rhs_dilation[s]);
    }
    Ok(device(c.preferred_element_type.unwrap_or(lhs.dtype), out))
}

// `reduce_window_max[base_dilation=(1, 1) padding=((0, 0), (0, 0)) window_dilation=(1, 1)
// window_dimensions=(2, 2) window_strides=(2, 2)] x`, likewise `_sum` and `_min`.

pub(super) fn window_params(w: &Window) -> Params {
    vec![
        ("base_dilation", Param::ints(w.base_dilation.iter().copied())),
        ("padding", pairs_param(&w.padding)),
        ("window_dilation", Param::ints(w.window_dilation.iter().copied())),
        ("window_dimensions", Param::ints(w.window_dimensions.iter().copied())),
        ("window_strides", Param::ints(w.window_strides.iter().copied())),
    ]
}

fn parse_window(p: &mut ParamReader, name: &str) -> Result<Window, String> {
    Ok(Window {
        base_dilation: read_positive(p, name, "base_dilation")?,
        padding: read_pairs(p, name, "padding")?,
        window_dilation: read_positive(p, name, "window_dilation")?,
        window_dimensions: p.usizes("window_dimensions")?,
        window_strides: read_positive(p, name, "window_strides")?,
    })
}

/// The primitive's name: `reduce_window_sum`, `reduce_window_max` or `reduce_window_min`.
pub fn reduce_window_name(op: WindowOp) -> &'static str {
    op.name()
}

pub(super) fn parse_reduce_window(op: WindowOp, p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::ReduceWindow { op, window: parse_window(p, reduce_window_name(op))? })
}

/// The output shape of `window` over `x`, after checking its per-axis parameters.
fn windowed_shape(name: &str, w: &Window, x: &Aval) -> Result<Vec<usize>, ShapeError> {
    check_lengths(
        name,
        x.rank(),
        "operand axes",
        &[
            ("window_dimensions", w.window_dimensions.len()),
            ("window_strides", w.window_strides.len()),
            ("padding", w.padding.len()),
            ("base_dilation", w.base_dilation.len()),
            ("window_dilation", w.window_dilation.len()),
        ],
    )?;
    let positive = w.window_strides.iter().chain(&w.base_dilation).chain(&w.window_dilation).all(|&s| s >= 1);
    ensure!(positive, name, "strides and dilations must be positive");
    Ok((0..x.rank())
        .map(|k| {
            window_out_extent(
                x.shape[k],
                w.window_dimensions[k],
                w.window_strides[k],
                w.padding[k],
                w.base_dilation[k],
                w.window_dilation[k],
            )
        })
        .collect())
}

pub(crate) fn reduce_window_shape(op: WindowOp, w: &Window, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = reduce_window_name(op);
    let [x] = arity(name, in_avals)?;
    if op == WindowOp::Sum {
        ensure!(x.dtype.is_numeric(), name, "operand must be a number, found {x}");
    }
    ensure!(x.dtype != DType::Key, name, "operand must be a number or boolean, found {x}");
    let shape = windowed_shape(name, w, x)?;
    Ok(device(x.dtype, shape))
}

// `reduce_window[base_dilation=(1, 1) consts=() jaxpr={...} padding=((0, 0), (0, 0))
// window_dilation=(1, 1) window_dimensions=(2, 2) window_strides=(1, 1)] xs... inits...`.

pub(super) fn generic_reduce_window_params(jaxpr: &Arc<Jaxpr>, w: &Window) -> Params {
    let mut ps = window_params(w);
    ps.insert(1, ("consts", Param::Tuple(Vec::new())));
    ps.insert(2, ("jaxpr", Param::Jaxpr(jaxpr.clone())));
    ps
}

pub(super) fn parse_generic_reduce_window(p: &mut ParamReader) -> Result<Primitive, String> {
    let name = "reduce_window";
    match p.take("consts")? {
        Param::Tuple(c) if c.is_empty() => {}
        _ => return Err(format!("{name}: a combiner that closes over constants (`consts`) is not supported")),
    }
    Ok(Primitive::GenericReduceWindow { jaxpr: p.jaxpr("jaxpr")?, window: parse_window(p, name)? })
}

/// JAX's `_reduce_window_abstract_eval_rule`: the generic `reduce`'s operand, init and
/// combiner checks, then the window's output shape.
pub(crate) fn generic_reduce_window_shape(
    jaxpr: &Jaxpr,
    w: &Window,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "reduce_window";
    // The generic reduce over no dimensions checks the operands, inits and combiner.
    let avals = super::reduction::generic_reduce_shape(&[], jaxpr, in_avals)
        .map_err(|e| ShapeError { message: e.message.replacen("reduce:", "reduce_window:", 1) })?;
    let shape = windowed_shape(name, w, &in_avals[0])?;
    Ok(avals.iter().map(|a| Aval::new(a.dtype, shape.clone())).collect())
}

/// The generic `reduce_window` of `in_avals` (operands, then inits) as a jaxpr with the same
/// operands and results over the generic `reduce`: each operand padded (and dilated) with its
/// init, a `bool` mask padded alike with `false`, the strided slice at each window offset (in
/// row-major order) stacked on a new last axis, and that axis reduced by the combiner masked
/// to keep the accumulator where the mask is `false`: XLA skips padding and dilation holes
/// rather than combining the init value. The interpreter and the JIT both evaluate a
/// generic `reduce_window` as this jaxpr.
pub fn generic_reduce_window_as_reduce(
    w: &Window,
    combiner: &Arc<Jaxpr>,
    in_avals: &[Aval],
) -> Result<Jaxpr, ShapeError> {
    let outs = generic_reduce_window_shape(combiner, w, in_avals)?;
    let n = in_avals.len() / 2;
    let x0 = &in_avals[0];
    let rank = x0.rank();
    let out_shape = outs[0].shape.clone();
    let mut j = Jaxpr::default();
    let unknown = SourceInfo::unknown;
    let push = |j: &mut Jaxpr, prim: Primitive, ins: Vec<Atom>, aval: Aval| -> Var {
        let v = j.new_var(aval);
        j.eqns.push(Eqn::new(prim, ins, vec![v], unknown()));
        v
    };
    let invars: Vec<Var> = in_avals.iter().map(|a| j.new_var(a.clone())).collect();
    j.invars = invars.clone();
    let lit = |dtype: DType, x: f64| Atom::Lit(Literal::new(LitValue::from_f64(dtype, x)));
    let windows: usize = w.window_dimensions.iter().product();
    if windows == 0 || out_shape.contains(&0) {
        // No element in any window: every result is its init value.
        j.outvars = (0..n)
            .map(|i| {
                let prim = Primitive::BroadcastInDim { shape: out_shape.clone(), broadcast_dimensions: Vec::new() };
                Atom::Var(push(&mut j, prim, vec![Atom::Var(invars[n + i])], outs[i].clone()))
            })
            .collect();
        return Ok(j);
    }
    let config: Vec<(i64, i64, i64)> =
        (0..rank).map(|k| (w.padding[k].0, w.padding[k].1, w.base_dilation[k] as i64 - 1)).collect();
    let padded_shape: Vec<usize> = (0..rank)
        .map(|k| (dilated(x0.shape[k], w.base_dilation[k]) as i64 + w.padding[k].0 + w.padding[k].1).max(0) as usize)
        .collect();
    let all_true = push(
        &mut j,
        Primitive::BroadcastInDim { shape: x0.shape.clone(), broadcast_dimensions: Vec::new() },
        vec![lit(DType::Bool, 1.0)],
        Aval::new(DType::Bool, x0.shape.clone()),
    );
    let mut padded = Vec::with_capacity(n + 1);
    for i in 0..n {
        let dtype = in_avals[i].dtype;
        let prim = Primitive::Pad { padding_config: config.clone() };
        let ins = vec![Atom::Var(invars[i]), Atom::Var(invars[n + i])];
        padded.push((push(&mut j, prim, ins, Aval::new(dtype, padded_shape.clone())), dtype));
    }
    let prim = Primitive::Pad { padding_config: config.clone() };
    let mask =
        push(&mut j, prim, vec![Atom::Var(all_true), lit(DType::Bool, 0.0)], Aval::new(DType::Bool, padded_shape));
    padded.push((mask, DType::Bool));
    let strided = w.window_strides.iter().any(|&s| s != 1);
    let mut stacked_shape = out_shape.clone();
    stacked_shape.push(windows);
    let mut stacked = Vec::with_capacity(n + 1);
    for &(a, dtype) in &padded {
        let mut slices = Vec::with_capacity(windows);
        for flat in 0..windows {
            // The window offset of `flat` in row-major order.
            let mut offset = vec![0; rank];
            let mut rest = flat;
            for k in (0..rank).rev() {
                offset[k] = rest % w.window_dimensions[k];
                rest /= w.window_dimensions[k];
            }
            let start: Vec<usize> = (0..rank).map(|k| offset[k] * w.window_dilation[k]).collect();
            let limit: Vec<usize> =
                (0..rank).map(|k| start[k] + (out_shape[k] - 1) * w.window_strides[k] + 1).collect();
            let prim = Primitive::Slice {
                start_indices: start,
                limit_indices: limit,
                strides: strided.then(|| w.window_strides.clone()),
            };
            slices.push(Atom::Var(push(&mut j, prim, vec![Atom::Var(a)], Aval::new(dtype, out_shape.clone()))));
        }
        let prim = Primitive::Stack { axis: rank };
        stacked.push(Atom::Var(push(&mut j, prim, slices, Aval::new(dtype, stacked_shape.clone()))));
    }
    let mut reduce_ins = stacked;
    reduce_ins.extend((0..n).map(|i| Atom::Var(invars[n + i])));
    reduce_ins.push(lit(DType::Bool, 1.0));
    let prim = Primitive::GenericReduce {
        computation: Param::Opaque("<function reduce_window at 0xXXXXXXXXXXXX>".into()),
        dimensions: vec![rank],
        jaxpr: Arc::new(masked_combiner(combiner, n)),
    };
    let results: Vec<Var> = (0..=n)
        .map(|i| {
            let dtype = if i < n { in_avals[i].dtype } else { DType::Bool };
            j.new_var(Aval::new(dtype, out_shape.clone()))
        })
        .collect();
    j.eqns.push(Eqn::new(prim, reduce_ins, results.clone(), unknown()));
    j.outvars = results[..n].iter().map(|&v| Atom::Var(v)).collect();
    Ok(j)
}

/// `combiner` `(accs..., xs...) -> accs...` as `(accs..., acc_mask, xs..., x_mask) -> (x_mask ?
/// combiner(accs, xs) : accs..., acc_mask)`.
fn masked_combiner(combiner: &Jaxpr, n: usize) -> Jaxpr {
    let mut j = combiner.clone();
    let scalar = Aval::scalar(DType::Bool);
    let (acc_mask, x_mask) = (j.new_var(scalar.clone()), j.new_var(scalar));
    let accs: Vec<Var> = combiner.invars[..n].to_vec();
    let xs: Vec<Var> = combiner.invars[n..].to_vec();
    let mut outs = Vec::with_capacity(n + 1);
    for (i, out) in combiner.outvars.iter().enumerate() {
        let v = j.new_var(combiner.aval(accs[i]).clone());
        let ins = vec![Atom::Var(x_mask), Atom::Var(accs[i]), *out];
        j.eqns.push(Eqn::new(Primitive::SelectN, ins, vec![v], SourceInfo::unknown()));
        outs.push(Atom::Var(v));
    }
    outs.push(Atom::Var(acc_mask));
    j.invars = accs.into_iter().chain([acc_mask]).chain(xs).chain([x_mask]).collect();
    j.outvars = outs;
    j
}

// `select_and_gather_add[base_dilation=(1, 1) padding=((0, 0), (0, 0)) select_prim=ge
// window_dilation=(1, 1) window_dimensions=(2, 2) window_strides=(1, 2)] tangent operand`.

pub(super) fn select_and_gather_add_params(select_prim: CompareOp, w: &Window) -> Params {
    let mut ps = window_params(w);
    ps.insert(2, ("select_prim", Param::Word(select_prim.name().to_string())));
    ps
}

pub(super) fn parse_select_and_gather_add(p: &mut ParamReader) -> Result<Primitive, String> {
    let name = "select_and_gather_add";
    Ok(Primitive::SelectAndGatherAdd { select_prim: select_prim(p, name)?, window: parse_window(p, name)? })
}

pub(crate) fn select_and_gather_add_shape(w: &Window, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "select_and_gather_add";
    let [t, x] = arity(name, in_avals)?;
    ensure!(t.shape == x.shape, name, "tangent {t} and operand {x} have different shapes");
    ensure!(
        t.dtype == x.dtype && t.dtype != DType::Bool,
        name,
        "tangent {t} and operand {x} must be numbers of one dtype"
    );
    let shape = windowed_shape(name, w, x)?;
    Ok(device(t.dtype, shape))
}

// `select_and_scatter_add[padding=((0, 0), (0, 0)) select_prim=ge window_dimensions=(2, 2)
// window_strides=(2, 2)] source operand`: no dilations.

pub(super) fn select_and_scatter_add_params(
    select_prim: CompareOp,
    window_dimensions: &[usize],
    window_strides: &[usize],
    padding: &[(i64, i64)],
) -> Params {
    vec![
        ("padding", pairs_param(padding)),
        ("select_prim", Param::Word(select_prim.name().to_string())),
        ("window_dimensions", Param::ints(window_dimensions.iter().copied())),
        ("window_strides", Param::ints(window_strides.iter().copied())),
    ]
}

pub(super) fn parse_select_and_scatter_add(p: &mut ParamReader) -> Result<Primitive, String> {
    let name = "select_and_scatter_add";
    Ok(Primitive::SelectAndScatterAdd {
        padding: read_pairs(p, name, "padding")?,
        select_prim: select_prim(p, name)?,
        window_dimensions: p.usizes("window_dimensions")?,
        window_strides: read_positive(p, name, "window_strides")?,
    })
}

/// The window of a `select_and_scatter_add` (no dilations).
pub fn scatter_window(window_dimensions: &[usize], window_strides: &[usize], padding: &[(i64, i64)]) -> Window {
    let ones = vec![1; window_dimensions.len()];
    Window {
        window_dimensions: window_dimensions.to_vec(),
        window_strides: window_strides.to_vec(),
        padding: padding.to_vec(),
        base_dilation: ones.clone(),
        window_dilation: ones,
    }
}

pub(crate) fn select_and_scatter_add_shape(w: &Window, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "select_and_scatter_add";
    let [source, x] = arity(name, in_avals)?;
    ensure!(
        source.dtype == x.dtype && x.dtype != DType::Bool,
        name,
        "source {source} and operand {x} must be numbers of one dtype"
    );
    ensure!(w.padding.iter().all(|&(lo, hi)| lo >= 0 && hi >= 0), name, "padding {:?} must not be negative", w.padding);
    let windows = windowed_shape(name, w, x)?;
    if windows != source.shape {
        bail!(name, "source {source} must have the shape of the windows of {x}, {windows:?}");
    }
    Ok(device(x.dtype, x.shape.clone()))
}

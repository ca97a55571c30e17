//! Convolutions and windowed reductions: `conv_general_dilated`, `reduce_window_sum`,
//! `reduce_window_max`, `reduce_window_min`, `select_and_scatter_add` and
//! `select_and_gather_add` (JAX's `lax/convolution.py` and `lax/windowed_reductions.py`).
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, the
//! `key=value` pairs in printing order; `parse_*`, the same read back) and its shape rule
//! (`*_shape`). What it keeps true: every per-axis parameter has one entry per (spatial or
//! operand) axis, strides and dilations are at least 1, and a window never has a negative
//! extent, so evaluation and lowering can index without checks of their own.

use super::params::{dtype_param, ParamReader, Params};
use super::Primitive;
use crate::jaxpr::ConvParams;
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

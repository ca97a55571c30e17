//! Convolutions and windowed reductions: `conv_general_dilated`, `reduce_window_*`,
//! `select_and_gather_add` and `select_and_scatter_add`, by direct loops (the meaning, not a
//! fast path).
//!
//! A window position is read from the operand after base dilation (`d - 1` holes between
//! elements) and padding: `q = p * stride + k * window_dilation - lo`, a real element when
//! `q >= 0`, `q % base_dilation == 0` and `q / base_dilation < n`. Holes and padding hold the
//! reduction's identity (0 for sums, `-inf` for `max`, `+inf` for `min`, and for the
//! selections `-inf` under `ge`/`gt`, `+inf` under `le`/`lt`). A convolution skips them, as
//! XLA's HLO evaluator does: no product is formed there, so an `inf` in the kernel meets no
//! `0` of the padding (`0 * inf` would be NaN).
//!
//! Sums of 16-bit floats (`reduce_window_sum`, a convolution with a 16-bit result)
//! accumulate in `f32` and round once, as `reduce_sum` and `dot_general`;
//! `select_and_scatter_add` adds in the operand's dtype, rounding after each addition.
//!
//! Selections walk a window in row-major order from its first position and move to the next
//! element `e` whenever `select(current, e)` is false: with `ge`, ties keep the first maximum.
//! `select_and_scatter_add` adds, for each window offset in row-major order and then each
//! window in row-major order, the window's source value at its selected position (the order
//! the JIT adds in, so both round alike).

use ndarray::{ArrayD, IxDyn};
use remat_ir::{window_out_extent, Array, CompareOp, ConvParams, DType, Window, WindowOp};
use remat_math::element::Element;

use crate::elem::{checked_size, num_dtype, operands, typed, Elem, Num};
use crate::elementwise::{comparison, convert_element_type};

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// The multi-index of flat position `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[usize], out: &mut [usize]) {
    for k in (0..shape.len()).rev() {
        let n = shape[k].max(1);
        out[k] = flat % n;
        flat /= n;
    }
}

/// Where window position `k` of output position `p` falls in an operand axis of extent `n`.
fn source_index(p: usize, k: usize, stride: usize, wdil: usize, lo: i64, base: usize, n: usize) -> Option<usize> {
    let q = p as i128 * stride as i128 + k as i128 * wdil as i128 - lo as i128;
    if q < 0 || q % base as i128 != 0 {
        return None;
    }
    let q = q / base as i128;
    (q < n as i128).then_some(q as usize)
}

/// The standard-layout data of `a` with its axes in `order`.
fn permuted<T: Elem>(a: &ArrayD<T>, order: &[usize]) -> (Vec<T>, Vec<usize>) {
    let v = a.view().permuted_axes(IxDyn(order));
    (v.iter().copied().collect(), v.shape().to_vec())
}

fn check_window(w: &Window, shape: &[usize]) -> Result<Vec<usize>, String> {
    let rank = shape.len();
    let lens = [
        w.window_dimensions.len(),
        w.window_strides.len(),
        w.padding.len(),
        w.base_dilation.len(),
        w.window_dilation.len(),
    ];
    if lens.iter().any(|&l| l != rank) {
        return Err(format!("window parameters must have {rank} entries each, found {lens:?}"));
    }
    if w.window_strides.iter().chain(&w.base_dilation).chain(&w.window_dilation).any(|&s| s == 0) {
        return Err("strides and dilations must be positive".to_string());
    }
    let out: Vec<usize> = (0..rank)
        .map(|k| {
            window_out_extent(
                shape[k],
                w.window_dimensions[k],
                w.window_strides[k],
                w.padding[k],
                w.base_dilation[k],
                w.window_dilation[k],
            )
        })
        .collect();
    checked_size(&out)?;
    checked_size(&w.window_dimensions)?;
    Ok(out)
}

/// Calls `f(out_flat, window_flat, source)` for every output position and window position,
/// windows in row-major order, where `source` is the operand's flat index or `None` for a
/// hole or padding.
fn for_each_window(w: &Window, shape: &[usize], out: &[usize], mut f: impl FnMut(usize, usize, Option<usize>)) {
    let rank = shape.len();
    let in_strides = strides(shape);
    let (n_out, n_win): (usize, usize) = (out.iter().product(), w.window_dimensions.iter().product());
    let (mut p, mut k) = (vec![0; rank], vec![0; rank]);
    for o in 0..n_out {
        unravel(o, out, &mut p);
        for j in 0..n_win {
            unravel(j, &w.window_dimensions, &mut k);
            let mut src = Some(0);
            for d in 0..rank {
                let q = source_index(
                    p[d],
                    k[d],
                    w.window_strides[d],
                    w.window_dilation[d],
                    w.padding[d].0,
                    w.base_dilation[d],
                    shape[d],
                );
                src = match (src, q) {
                    (Some(s), Some(q)) => Some(s + q * in_strides[d]),
                    _ => None,
                };
            }
            f(o, j, src);
        }
    }
}

pub(crate) fn reduce_window(op: WindowOp, w: &Window, args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let out = check_window(w, x.shape())?;
    fn run<T: Elem>(x: &Array, w: &Window, out: &[usize], init: T, f: fn(T, T) -> T) -> Result<Array, String> {
        let a = typed::<T>(x)?;
        let data: Vec<T> = a.iter().copied().collect();
        let mut acc = vec![init; out.iter().product()];
        for_each_window(w, a.shape(), out, |o, _, src| acc[o] = f(acc[o], src.map_or(init, |s| data[s])));
        Ok(T::wrap(ArrayD::from_shape_vec(IxDyn(out), acc).map_err(|e| e.to_string())?))
    }
    match op {
        WindowOp::Sum if x.dtype().is_narrow_float() => {
            // A 16-bit float sum accumulates in f32 and rounds once, as `reduce_sum`.
            let wide = convert_element_type(DType::F32, &[x])?;
            let sum = run::<f32>(&wide, w, &out, 0.0, <f32 as Num>::add)?;
            convert_element_type(x.dtype(), &[&sum])
        }
        WindowOp::Sum => num_dtype!(x.dtype(), T => run::<T>(x, w, &out, T::ZERO, <T as Num>::add),
            bool => Err("reduce_window_sum is not defined on bool".to_string())),
        WindowOp::Max => remat_math::with_dtype!(x.dtype(), T => run::<T>(x, w, &out, T::LOWEST, T::max_nan)),
        WindowOp::Min => remat_math::with_dtype!(x.dtype(), T => run::<T>(x, w, &out, T::HIGHEST, T::min_nan)),
    }
}

/// The value holes and padding hold for a selection: it is never selected over a real element.
fn select_init<T: Elem>(select_prim: CompareOp) -> T {
    match select_prim {
        CompareOp::Ge | CompareOp::Gt => T::LOWEST,
        CompareOp::Le
        | CompareOp::Lt
        | CompareOp::Eq
        | CompareOp::Ne
        | CompareOp::EqTo
        | CompareOp::LeTo
        | CompareOp::LtTo => T::HIGHEST,
    }
}

/// For each window, the window offset the selection walk ends on and its source index.
fn selections<T: Elem>(
    select_prim: CompareOp,
    w: &Window,
    data: &[T],
    shape: &[usize],
    out: &[usize],
) -> Vec<(usize, Option<usize>)> {
    let select = comparison::<T>(select_prim);
    let init = select_init::<T>(select_prim);
    let mut best: Vec<(T, usize, Option<usize>)> = vec![(init, 0, None); out.iter().product()];
    for_each_window(w, shape, out, |o, j, src| {
        let v = src.map_or(init, |s| data[s]);
        // The selection compares as every compare does in XLA's float environment: a
        // subnormal reads as zero (for bf16 too, which XLA compares in f32).
        if j == 0 || !select(best[o].0.daz(), v.daz()) {
            best[o] = (v, j, src);
        }
    });
    best.into_iter().map(|(_, j, src)| (j, src)).collect()
}

pub(crate) fn select_and_gather_add(select_prim: CompareOp, w: &Window, args: &[&Array]) -> Result<Array, String> {
    let [t, x] = operands(args)?;
    if t.aval() != x.aval() {
        return Err(format!("tangent {} and operand {} must have one type", t.aval(), x.aval()));
    }
    let out = check_window(w, x.shape())?;
    fn run<T: Num>(select_prim: CompareOp, w: &Window, t: &Array, x: &Array, out: &[usize]) -> Result<Array, String> {
        let (ta, xa) = (typed::<T>(t)?, typed::<T>(x)?);
        let (td, xd): (Vec<T>, Vec<T>) = (ta.iter().copied().collect(), xa.iter().copied().collect());
        let sel = selections(select_prim, w, &xd, xa.shape(), out);
        let res: Vec<T> = sel.into_iter().map(|(_, src)| src.map_or(T::ZERO, |s| td[s])).collect();
        Ok(T::wrap(ArrayD::from_shape_vec(IxDyn(out), res).map_err(|e| e.to_string())?))
    }
    num_dtype!(x.dtype(), T => run::<T>(select_prim, w, t, x, &out),
        bool => Err("select_and_gather_add is not defined on bool".to_string()))
}

pub(crate) fn select_and_scatter_add(select_prim: CompareOp, w: &Window, args: &[&Array]) -> Result<Array, String> {
    let [source, x] = operands(args)?;
    if source.dtype() != x.dtype() {
        return Err(format!("source {} and operand {} have different dtypes", source.aval(), x.aval()));
    }
    let out = check_window(w, x.shape())?;
    if source.shape() != out.as_slice() {
        return Err(format!("source {} must have the windows' shape {out:?}", source.aval()));
    }
    fn run<T: Num>(select_prim: CompareOp, w: &Window, s: &Array, x: &Array, out: &[usize]) -> Result<Array, String> {
        let (sa, xa) = (typed::<T>(s)?, typed::<T>(x)?);
        let (sd, xd): (Vec<T>, Vec<T>) = (sa.iter().copied().collect(), xa.iter().copied().collect());
        let sel = selections(select_prim, w, &xd, xa.shape(), out);
        let mut res = vec![T::ZERO; xd.len()];
        let n_win: usize = w.window_dimensions.iter().product();
        for k in 0..n_win {
            for (o, &(j, src)) in sel.iter().enumerate() {
                if let (true, Some(at)) = (j == k, src) {
                    res[at] = res[at].add(sd[o]);
                }
            }
        }
        Ok(T::wrap(ArrayD::from_shape_vec(IxDyn(xa.shape()), res).map_err(|e| e.to_string())?))
    }
    num_dtype!(x.dtype(), T => run::<T>(select_prim, w, source, x, &out),
        bool => Err("select_and_scatter_add is not defined on bool".to_string()))
}

/// `conv_general_dilated` (see `docs/ir.md`): operands are converted to the result dtype,
/// brought to `[N, C, spatial...]` and `[O, I, spatial...]`, and each output element sums
/// its window over the input features of its group.
pub(crate) fn conv(c: &ConvParams, args: &[&Array]) -> Result<Array, String> {
    let [lhs, rhs] = operands(args)?;
    let shapes =
        remat_ir::shape_rule(&remat_ir::Primitive::ConvGeneralDilated(Box::new(c.clone())), &[lhs.aval(), rhs.aval()])
            .map_err(|e| e.message.trim_start_matches("conv_general_dilated: ").to_string())?;
    let out_dtype = shapes[0].dtype;
    let to = |d: DType, a: &Array| if a.dtype() == d { Ok(a.clone()) } else { convert_element_type(d, &[a]) };
    let (l, r) = (to(out_dtype, lhs)?, to(out_dtype, rhs)?);
    if out_dtype.is_narrow_float() {
        // 16-bit floats multiply and accumulate in f32 and round once at the end, as
        // `dot_general` and XLA's CPU backend (which runs a bf16 convolution in f32).
        let (l, r) = (to(DType::F32, &l)?, to(DType::F32, &r)?);
        let wide = conv_typed::<f32>(c, typed::<f32>(&l)?, typed::<f32>(&r)?)?;
        return convert_element_type(out_dtype, &[&wide]);
    }
    num_dtype!(out_dtype, T => conv_typed::<T>(c, typed::<T>(&l)?, typed::<T>(&r)?),
        bool => Err("conv_general_dilated is not defined on bool".to_string()))
}

fn conv_typed<T: Num>(c: &ConvParams, lhs: &ArrayD<T>, rhs: &ArrayD<T>) -> Result<Array, String> {
    let dn = &c.dimension_numbers;
    let (l, ls) = permuted(lhs, &dn.lhs_spec);
    let (r, rs) = permuted(rhs, &dn.rhs_spec);
    let ns = ls.len() - 2;
    let (g, b) = (c.feature_group_count, c.batch_group_count);
    let (n_out, o_all, i_feat) = (ls[0] / b, rs[0], rs[1]);
    let (og, ob) = (o_all / g, o_all / b);
    let (sp_in, kern) = (&ls[2..], &rs[2..]);
    let sp_out: Vec<usize> = (0..ns)
        .map(|s| {
            window_out_extent(
                sp_in[s],
                kern[s],
                c.window_strides[s],
                c.padding[s],
                c.lhs_dilation[s],
                c.rhs_dilation[s],
            )
        })
        .collect();
    let mut out_shape = vec![n_out, o_all];
    out_shape.extend(&sp_out);
    checked_size(&out_shape)?;
    let (l_st, r_st) = (strides(&ls), strides(&rs));
    let n_sp: usize = sp_out.iter().product();
    let n_k: usize = kern.iter().product();
    let mut out = Vec::with_capacity(n_out * o_all * n_sp);
    let (mut p, mut k) = (vec![0; ns], vec![0; ns]);
    for n in 0..n_out {
        for o in 0..o_all {
            let (gf, gb) = (o / og.max(1), o / ob.max(1));
            let nb = gb * n_out + n;
            for ps in 0..n_sp {
                unravel(ps, &sp_out, &mut p);
                let mut acc = T::ZERO;
                for i in 0..i_feat {
                    let l_base = nb * l_st[0] + (gf * i_feat + i) * l_st[1];
                    let r_base = o * r_st[0] + i * r_st[1];
                    for ks in 0..n_k {
                        unravel(ks, kern, &mut k);
                        let mut at = Some(l_base);
                        for s in 0..ns {
                            let q = source_index(
                                p[s],
                                k[s],
                                c.window_strides[s],
                                c.rhs_dilation[s],
                                c.padding[s].0,
                                c.lhs_dilation[s],
                                sp_in[s],
                            );
                            at = at.zip(q).map(|(a, q)| a + q * l_st[2 + s]);
                        }
                        if let Some(a) = at {
                            let r_at = r_base + (0..ns).map(|s| k[s] * r_st[2 + s]).sum::<usize>();
                            acc = acc.add(l[a].mul(r[r_at]));
                        }
                    }
                }
                out.push(acc);
            }
        }
    }
    let logical = ArrayD::from_shape_vec(IxDyn(&out_shape), out).map_err(|e| e.to_string())?;
    // Logical axis j is array axis out_spec[j]: array axis a is logical axis argsort(out_spec)[a].
    let mut inv = vec![0; dn.out_spec.len()];
    for (j, &a) in dn.out_spec.iter().enumerate() {
        inv[a] = j;
    }
    let arranged = logical.permuted_axes(IxDyn(&inv));
    Ok(T::wrap(arranged.as_standard_layout().into_owned()))
}

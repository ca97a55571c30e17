//! Every dtype in the JIT against the interpreter, bit for bit, on the values where dtypes
//! differ: integer overflow and the ends of each range, unsigned values near the top,
//! division by zero and `MIN / -1`, NaN, ±inf, ±0, subnormals and rounding ties of the
//! 16-bit floats.
//!
//! One test per conversion pair (every pair of the 11 value dtypes); one per dtype for its
//! elementwise arithmetic (every unary, binary and comparison the shape rules accept, on all
//! pairs of its special values); reductions, `argmax`, `dot_general` (narrow, mixed and
//! integer) and the structural moves of keys; `max`/`min`/`clamp` with literal operands.

use remat_ir::{
    bf16, c128, c64, f16, shape_rule, Array, Atom, Aval, BinaryOp, CompareOp, DType, DotDimensionNumbers, Eqn, Jaxpr,
    LitValue, Literal, Primitive, PrngKey, ReduceOp, SourceInfo, UnaryOp,
};

/// The value dtypes (everything but keys).
const VALUES: [DType; 11] = [
    DType::F32,
    DType::F64,
    DType::BF16,
    DType::F16,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U32,
    DType::Bool,
];

/// The interesting values of every dtype, as f64 (converted with the dtype's own rule).
fn specials_f64() -> Vec<f64> {
    vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -1.5,
        2.5,
        3.0,
        7.0,
        -7.0,
        127.9,
        128.5,
        255.5,
        256.0,
        -129.0,
        300.0,
        65504.0,
        65519.0,
        65520.0,
        1.0 + 1.0 / 256.0,
        1.0 + 3.0 / 256.0,
        1.0 + 1.0 / 2048.0,
        1.0 + 1.0 / 2048.0 + 1.0 / 65536.0,
        16777217.0,
        2147483647.0,
        2147483648.0,
        -2147483649.0,
        3e9,
        -3e9,
        4294967295.0,
        1e19,
        -1e19,
        3.4e38,
        1e300,
        1e-8,
        6e-8,
        3e-5,
        1e-39,
        1e-45,
        1e-310,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ]
}

fn v<T>(x: Vec<T>) -> ndarray::ArrayD<T> {
    ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[x.len()]), x).expect("1-d")
}

/// The special values of `d`: the f64 ones converted, plus each integer type's own ends.
fn specials(d: DType) -> Array {
    let xs = specials_f64();
    let ints: Vec<i64> = vec![0, 1, -1, 2, -2, 5, 127, 128, 255, 256, 300, -128, -129, 32767, -32768, 65535];
    match d {
        DType::F32 => {
            Array::F32(v(xs.iter().map(|&x| x as f32).chain([f32::from_bits(1), f32::MIN_POSITIVE]).collect()))
        }
        DType::F64 => Array::F64(v(xs.clone())),
        DType::BF16 => Array::BF16(v(xs
            .iter()
            .map(|&x| bf16::from_f32(x as f32))
            .chain([bf16::from_bits(1), bf16::from_bits(0x8001), bf16::from_bits(0x7f7f), bf16::from_bits(0xffc1)])
            .collect())),
        DType::F16 => Array::F16(v(xs
            .iter()
            .map(|&x| f16::from_f32(x as f32))
            .chain([f16::from_bits(1), f16::from_bits(0x83ff), f16::from_bits(0x7bff), f16::from_bits(0xfe01)])
            .collect())),
        DType::I8 => Array::I8(v(ints.iter().map(|&x| x as i8).chain([i8::MIN, i8::MAX]).collect())),
        DType::I16 => Array::I16(v(ints.iter().map(|&x| x as i16).chain([i16::MIN, i16::MAX]).collect())),
        DType::I32 => Array::I32(v(ints.iter().map(|&x| x as i32).chain([i32::MIN, i32::MAX, i32::MIN + 1]).collect())),
        DType::I64 => Array::I64(v(ints.iter().copied().chain([i64::MIN, i64::MAX, 1 << 53, (1 << 53) + 1]).collect())),
        DType::U8 => Array::U8(v(ints.iter().map(|&x| x as u8).chain([u8::MAX - 1]).collect())),
        DType::U32 => Array::U32(v(ints.iter().map(|&x| x as u32).chain([u32::MAX - 1, 0x8000_0000]).collect())),
        DType::Bool => Array::Bool(v(vec![false, true, true, false])),
        DType::Key => Array::Key(v(vec![PrngKey([0, 1]), PrngKey([u32::MAX, 7]), PrngKey([3, u32::MAX])])),
        DType::C64 => {
            Array::C64(v(xs.iter().zip(xs.iter().rev()).map(|(&a, &b)| c64::new(a as f32, b as f32)).collect()))
        }
        DType::C128 => Array::C128(v(xs.iter().zip(xs.iter().rev()).map(|(&a, &b)| c128::new(a, b)).collect())),
    }
}

/// `x` repeated so that `(tile(x, n), repeat(x, n))` pairs every element with every other.
fn pairs(x: &Array) -> (Array, Array) {
    let n = x.shape()[0];
    remat_ir::for_each_array!(x, a => {
        let tiled: Vec<_> = (0..n * n).map(|i| a[i % n]).collect();
        let repeated: Vec<_> = (0..n * n).map(|i| a[i / n]).collect();
        let mk = |v: Vec<_>| ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[n * n]), v).expect("1-d");
        (wrap_like(x, mk(tiled)), wrap_like(x, mk(repeated)))
    })
}

/// Wraps `a` in the variant of `like` (the element types agree by construction).
fn wrap_like<T: Clone + 'static>(like: &Array, a: ndarray::ArrayD<T>) -> Array {
    use std::any::Any;
    let any: Box<dyn Any> = Box::new(a);
    match like {
        Array::F32(_) => Array::F32(*any.downcast().expect("f32")),
        Array::F64(_) => Array::F64(*any.downcast().expect("f64")),
        Array::BF16(_) => Array::BF16(*any.downcast().expect("bf16")),
        Array::F16(_) => Array::F16(*any.downcast().expect("f16")),
        Array::I8(_) => Array::I8(*any.downcast().expect("i8")),
        Array::I16(_) => Array::I16(*any.downcast().expect("i16")),
        Array::I32(_) => Array::I32(*any.downcast().expect("i32")),
        Array::I64(_) => Array::I64(*any.downcast().expect("i64")),
        Array::U8(_) => Array::U8(*any.downcast().expect("u8")),
        Array::U32(_) => Array::U32(*any.downcast().expect("u32")),
        Array::Bool(_) => Array::Bool(*any.downcast().expect("bool")),
        Array::Key(_) => Array::Key(*any.downcast().expect("key")),
        Array::C64(_) => Array::C64(*any.downcast().expect("c64")),
        Array::C128(_) => Array::C128(*any.downcast().expect("c128")),
    }
}

/// A jaxpr of one equation `prim` on fresh inputs of `in_avals`, or `None` if the shape
/// rules reject it.
fn one_eqn(prim: Primitive, in_avals: &[Aval]) -> Option<Jaxpr> {
    let outs = shape_rule(&prim, in_avals).ok()?;
    let mut j = Jaxpr::default();
    let ins: Vec<Atom> = in_avals
        .iter()
        .map(|a| {
            let v = j.new_var(a.clone());
            j.invars.push(v);
            v.into()
        })
        .collect();
    let outs: Vec<_> = outs.into_iter().map(|a| j.new_var(a)).collect();
    j.outvars = outs.iter().map(|&v| v.into()).collect();
    j.eqns.push(Eqn::new(prim, ins, outs, SourceInfo::unknown()));
    Some(j)
}

/// Bits of every element, NaNs of one dtype all equal (payloads may differ between `f32`
/// instruction sequences; the narrow floats' are checked by `narrow_nan_payloads`).
fn bits(a: &Array) -> Vec<u64> {
    let nan = u64::MAX;
    match a {
        Array::F32(x) => x.iter().map(|v| if v.is_nan() { nan } else { v.to_bits() as u64 }).collect(),
        Array::F64(x) => x.iter().map(|v| if v.is_nan() { nan } else { v.to_bits() }).collect(),
        Array::BF16(x) => x.iter().map(|v| if v.is_nan() { nan } else { v.to_bits() as u64 }).collect(),
        Array::F16(x) => x.iter().map(|v| if v.is_nan() { nan } else { v.to_bits() as u64 }).collect(),
        Array::I8(x) => x.iter().map(|&v| v as u64).collect(),
        Array::I16(x) => x.iter().map(|&v| v as u64).collect(),
        Array::I32(x) => x.iter().map(|&v| v as u64).collect(),
        Array::I64(x) => x.iter().map(|&v| v as u64).collect(),
        Array::U8(x) => x.iter().map(|&v| v as u64).collect(),
        Array::U32(x) => x.iter().map(|&v| v as u64).collect(),
        Array::Bool(x) => x.iter().map(|&v| v as u64).collect(),
        Array::Key(x) => x.iter().map(|k| (k.0[1] as u64) << 32 | k.0[0] as u64).collect(),
        Array::C64(x) => {
            x.iter().flat_map(|z| [z.re, z.im].map(|v| if v.is_nan() { nan } else { v.to_bits() as u64 })).collect()
        }
        Array::C128(x) => {
            x.iter().flat_map(|z| [z.re, z.im].map(|v| if v.is_nan() { nan } else { v.to_bits() })).collect()
        }
    }
}

/// Runs `jaxpr` with both backends and requires equal dtypes, shapes and bits.
fn same(what: &str, jaxpr: &Jaxpr, args: &[Array]) -> Result<(), String> {
    let want = remat_interp::eval_jaxpr(jaxpr, &[], args).map_err(|e| format!("{what}: interpreter: {e}"))?;
    let compiled = remat_jit::compile(jaxpr).map_err(|e| format!("{what}: compile: {e}"))?;
    let got = compiled.run(args).map_err(|e| format!("{what}: run: {e}"))?;
    for (g, w) in got.iter().zip(&want) {
        if g.aval() != w.aval() {
            return Err(format!("{what}: got {}, expected {}", g.aval(), w.aval()));
        }
        let (gb, wb) = (bits(g), bits(w));
        if let Some(i) = (0..gb.len()).find(|&i| gb[i] != wb[i]) {
            let inputs: Vec<String> = args.iter().map(|a| format!("{:?}", a.to_f64_vec().get(i))).collect();
            return Err(format!(
                "{what}: element {i} (inputs {inputs:?}): got {:?} ({:#x}), expected {:?} ({:#x})",
                g.to_f64_vec()[i],
                gb[i],
                w.to_f64_vec()[i],
                wb[i]
            ));
        }
    }
    Ok(())
}

#[test]
fn every_conversion_pair_agrees_bit_for_bit() {
    let mut errors = Vec::new();
    for from in VALUES {
        for to in VALUES {
            let x = specials(from);
            let prim = Primitive::ConvertElementType { new_dtype: to, weak_type: false };
            let j = one_eqn(prim, &[x.aval()]).expect("every value dtype converts");
            if let Err(e) = same(&format!("{from} -> {to}"), &j, &[x]) {
                errors.push(e);
            }
        }
    }
    assert!(errors.is_empty(), "{} conversion pairs differ:\n{}", errors.len(), errors.join("\n"));
}

/// The unary ops whose `f32` results the JIT computes exactly as the interpreter does
/// (the transcendentals are within 2 ulp, `tests/libm_sweep.rs`).
fn exact_unary(op: UnaryOp) -> bool {
    matches!(op, UnaryOp::Neg | UnaryOp::Sign | UnaryOp::Abs | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Square)
}

#[test]
fn elementwise_arithmetic_of_every_dtype_agrees_bit_for_bit() {
    let mut errors = Vec::new();
    let mut checked = 0;
    for d in VALUES {
        let x = specials(d);
        let (a, b) = pairs(&x);
        for op in UnaryOp::ALL.into_iter().filter(|&op| exact_unary(op) || d == DType::F64) {
            if let Some(j) = one_eqn(Primitive::Unary(op), &[x.aval()]) {
                checked += 1;
                if let Err(e) = same(&format!("{} {d}", op.name()), &j, std::slice::from_ref(&x)) {
                    errors.push(e);
                }
            }
        }
        for op in BinaryOp::ALL.into_iter().filter(|&op| op != BinaryOp::Pow || d == DType::F64) {
            if let Some(j) = one_eqn(Primitive::Binary(op), &[a.aval(), b.aval()]) {
                checked += 1;
                if let Err(e) = same(&format!("{} {d}", op.name()), &j, &[a.clone(), b.clone()]) {
                    errors.push(e);
                }
            }
        }
        for op in CompareOp::ALL {
            if let Some(j) = one_eqn(Primitive::Compare(op), &[a.aval(), b.aval()]) {
                checked += 1;
                if let Err(e) = same(&format!("{op:?} {d}"), &j, &[a.clone(), b.clone()]) {
                    errors.push(e);
                }
            }
        }
        for y in [-3, -1, 0, 2, 3, 7] {
            if let Some(j) = one_eqn(Primitive::IntegerPow { y }, &[x.aval()]) {
                checked += 1;
                if let Err(e) = same(&format!("integer_pow {y} {d}"), &j, std::slice::from_ref(&x)) {
                    errors.push(e);
                }
            }
        }
        if let Some(j) = one_eqn(Primitive::Clamp, &[b.aval(), a.aval(), b.aval()]) {
            checked += 1;
            if let Err(e) = same(&format!("clamp {d}"), &j, &[b.clone(), a.clone(), b.clone()]) {
                errors.push(e);
            }
        }
        for (e, m) in [(5, 10), (8, 7), (4, 3), (8, 23)] {
            let p = Primitive::ReducePrecision { exponent_bits: e, mantissa_bits: m };
            if let Some(j) = one_eqn(p, &[x.aval()]) {
                checked += 1;
                if let Err(err) = same(&format!("reduce_precision {e} {m} {d}"), &j, std::slice::from_ref(&x)) {
                    errors.push(err);
                }
            }
        }
    }
    assert!(checked > 150, "only {checked} programs checked");
    assert!(errors.is_empty(), "{} programs differ:\n{}", errors.len(), errors.join("\n"))
}

/// `max` and `min` with a literal operand on either side (the JIT's shortcut for literals
/// that win ties of zeros: relu's `max(x, 0.0)`, a clamp's lower bound) and `clamp` with
/// literal bounds, for every float dtype and every special value as the literal (zeros of
/// both signs, subnormals, infinities, NaN): the interpreter's bits (XLA's `max`/`min`:
/// `-0 < +0`, subnormals as zeros, NaN first).
#[test]
fn max_and_min_with_a_literal_agree_bit_for_bit() {
    let mut errors = Vec::new();
    for d in [DType::F32, DType::F64, DType::BF16, DType::F16] {
        let x = specials(d);
        for c in specials_f64() {
            let lit = |v: f64| Atom::Lit(Literal::new(LitValue::from_f64(d, v)));
            let mut j = Jaxpr::default();
            let a = j.new_var(x.aval());
            j.invars.push(a);
            let (a, k) = (Atom::from(a), lit(c));
            let programs = [
                (Primitive::Binary(BinaryOp::Max), vec![a, k]),
                (Primitive::Binary(BinaryOp::Max), vec![k, a]),
                (Primitive::Binary(BinaryOp::Min), vec![a, k]),
                (Primitive::Binary(BinaryOp::Min), vec![k, a]),
                (Primitive::Clamp, vec![k, a, lit(1.0)]),
                (Primitive::Clamp, vec![lit(-0.0), a, k]),
            ];
            for (prim, ins) in programs {
                let out = j.new_var(x.aval());
                j.outvars.push(out.into());
                j.eqns.push(Eqn::new(prim, ins, vec![out], SourceInfo::unknown()));
            }
            if let Err(e) = same(&format!("max/min {d} with {c:e}"), &j, std::slice::from_ref(&x)) {
                errors.push(e);
            }
        }
    }
    assert!(errors.is_empty(), "{} programs differ:\n{}", errors.len(), errors.join("\n"));
}

#[test]
fn reductions_and_argmax_of_every_dtype_agree() {
    let mut errors = Vec::new();
    for d in VALUES {
        let x = specials(d);
        let n = x.shape()[0];
        // Two rows (the second reversed), reduced along either axis or both.
        let (a, _) = pairs(&x);
        let rows = remat_ir::map_array!(a, v => v.slice_move(ndarray::s![..2 * n]).into_shape_with_order(ndarray::IxDyn(&[2, n])).expect("2 rows"));
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
            for axes in [vec![0], vec![1], vec![0, 1]] {
                if let Some(j) = one_eqn(Primitive::Reduce { op, axes: axes.clone() }, &[rows.aval()]) {
                    if let Err(e) = same(&format!("reduce {op:?} {axes:?} {d}"), &j, std::slice::from_ref(&rows)) {
                        errors.push(e);
                    }
                }
            }
        }
        for axis in [0, 1] {
            if let Some(j) = one_eqn(Primitive::Argmax { axes: vec![axis], index_dtype: DType::I32 }, &[rows.aval()]) {
                if let Err(e) = same(&format!("argmax {axis} {d}"), &j, std::slice::from_ref(&rows)) {
                    errors.push(e);
                }
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// A narrow sum accumulates in f32 and rounds once (3000 bf16 ones: 3008, XLA's figure).
#[test]
fn a_narrow_sum_rounds_once() {
    let x = Array::BF16(ndarray::ArrayD::from_elem(ndarray::IxDyn(&[3000]), bf16::ONE));
    let j = one_eqn(Primitive::Reduce { op: ReduceOp::Sum, axes: vec![0] }, &[x.aval()]).expect("sums");
    let got = remat_jit::compile(&j).expect("compiles").run(std::slice::from_ref(&x)).expect("runs");
    assert_eq!(got[0].to_f64_vec(), vec![3008.0]);
    same("sum of bf16 ones", &j, &[x]).expect("agrees");
}

fn dot(lhs: &Aval, rhs: &Aval, pref: Option<DType>) -> Option<Jaxpr> {
    let dn = DotDimensionNumbers {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        lhs_batch: vec![],
        rhs_batch: vec![],
    };
    one_eqn(
        Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type: pref, precision: None },
        &[lhs.clone(), rhs.clone()],
    )
}

/// Products of every value dtype, small (a loop) and large (the GEMM path), mixed narrow
/// and f32 operands with a preferred f32 result, and narrow operands with an f32 result.
#[test]
fn dot_general_of_every_dtype_agrees() {
    let mut rng = remat_testkit::Rng(7);
    let mut errors = Vec::new();
    let mut cases = Vec::new();
    for (m, k, n) in [(3, 5, 2), (24, 40, 16)] {
        for d in VALUES.into_iter().filter(|&d| d != DType::Bool) {
            cases.push((Aval::new(d, vec![m, k]), Aval::new(d, vec![k, n]), None));
            cases.push((Aval::new(d, vec![m, k]), Aval::new(d, vec![k, n]), Some(d)));
        }
        for (l, r) in
            [(DType::F32, DType::BF16), (DType::BF16, DType::F32), (DType::BF16, DType::BF16), (DType::F16, DType::F16)]
        {
            cases.push((Aval::new(l, vec![m, k]), Aval::new(r, vec![k, n]), Some(DType::F32)));
        }
        cases.push((Aval::new(DType::I8, vec![m, k]), Aval::new(DType::I8, vec![k, n]), Some(DType::I32)));
    }
    for (l, r, pref) in cases {
        let Some(j) = dot(&l, &r, pref) else {
            errors.push(format!("{l} . {r} -> {pref:?} rejected by the shape rules"));
            continue;
        };
        // Integer operands cycle through their specials (ends of the range), so products
        // overflow; floats are random.
        let big = |a: &Aval, rng: &mut remat_testkit::Rng| {
            if !a.dtype.is_integer() {
                return rng.array(a);
            }
            let s = specials(a.dtype);
            let len = s.shape()[0];
            let skew = rng.array(&Aval::scalar(DType::U8)).to_f64_vec()[0] as usize;
            remat_ir::map_array!(s, v => ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&a.shape), |ix| v[(ix[0] * 7 + ix[1] * 3 + skew) % len]))
        };
        let args = [big(&l, &mut rng), big(&r, &mut rng)];
        let want = remat_interp::eval_jaxpr(&j, &[], &args).expect("interpreter");
        let got = remat_jit::compile(&j).expect("compiles").run(&args).expect("runs");
        // Integer products wrap the same way in any order; float ones are summed in
        // different orders by the two GEMMs.
        let what = format!("{l} . {r} -> {pref:?}");
        let rel = if want[0].dtype().is_narrow_float() { 1e-2 } else { 1e-5 };
        if !l.dtype.is_float() {
            if bits(&got[0]) != bits(&want[0]) || got[0].aval() != want[0].aval() {
                errors.push(format!("{what}: {:?} vs {:?}", got[0].to_f64_vec(), want[0].to_f64_vec()));
            }
        } else if let Err(e) = remat_testkit::check_close(&what, &got, &want, rel, 1e-5) {
            errors.push(e);
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// One equation of each structural primitive over the elements `k(n)` makes (`n` of them, all
/// distinct): views, written pieces, selections, dynamic slices, comparisons for equality.
fn structural_programs(k: impl Fn(usize) -> Array) -> Vec<(Primitive, Vec<Array>)> {
    let keys = remat_ir::map_array!(k(12), x => x.into_shape_with_order(ndarray::IxDyn(&[3, 4])).expect("3x4"));
    let other = remat_ir::map_array!(k(13), x => x.slice_move(ndarray::s![1..]).into_shape_with_order(ndarray::IxDyn(&[3, 4])).expect("3x4"));
    let pred = Array::Bool(ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[3, 4]), |ix| (ix[0] + ix[1]) % 2 == 0));
    let idx = |i: i32| Array::I32(ndarray::arr0(i).into_dyn());
    vec![
        (Primitive::Transpose { permutation: vec![1, 0] }, vec![keys.clone()]),
        (Primitive::Reshape { new_sizes: vec![2, 6], dimensions: None }, vec![keys.clone()]),
        (Primitive::BroadcastInDim { shape: vec![2, 3, 4], broadcast_dimensions: vec![1, 2] }, vec![keys.clone()]),
        (
            Primitive::Slice { start_indices: vec![1, 0], limit_indices: vec![3, 4], strides: Some(vec![1, 2]) },
            vec![keys.clone()],
        ),
        (Primitive::Rev { dimensions: vec![1] }, vec![keys.clone()]),
        (Primitive::ExpandDims { dimensions: vec![0] }, vec![keys.clone()]),
        (Primitive::Concatenate { dimension: 1 }, vec![keys.clone(), other.clone()]),
        (Primitive::SelectN, vec![pred, keys.clone(), other.clone()]),
        (Primitive::DynamicSlice { slice_sizes: vec![2, 2] }, vec![keys.clone(), idx(2), idx(-1)]),
        (
            Primitive::DynamicUpdateSlice,
            vec![keys.clone(), k(1).clone(), idx(1), idx(3)]
                .into_iter()
                .enumerate()
                .map(|(i, x)| {
                    if i == 1 {
                        remat_ir::map_array!(x, y => y.into_shape_with_order(ndarray::IxDyn(&[1, 1])).expect("1x1"))
                    } else {
                        x
                    }
                })
                .collect(),
        ),
        (Primitive::Compare(CompareOp::Eq), vec![keys.clone(), other.clone()]),
        (Primitive::Compare(CompareOp::Ne), vec![keys.clone(), keys.clone()]),
    ]
}

/// Keys are 8-byte elements that every structural primitive moves unchanged: through
/// views, written pieces, selections, dynamic slices, a scan's carry, arguments and outputs.
#[test]
fn keys_move_through_every_structural_primitive() {
    let k = |n: usize| {
        let keys: Vec<PrngKey> = (0..n as u32).map(|i| PrngKey([i.wrapping_mul(0x9e37_79b9), !i])).collect();
        Array::Key(v(keys))
    };
    let programs = structural_programs(k);
    let mut errors = Vec::new();
    for (prim, args) in programs {
        let avals: Vec<Aval> = args.iter().map(Array::aval).collect();
        let name = prim.name();
        match one_eqn(prim, &avals) {
            Some(j) => {
                if let Err(e) = same(&format!("{name} of keys"), &j, &args) {
                    errors.push(e);
                }
            }
            None => errors.push(format!("{name} of {avals:?} rejected by the shape rules")),
        }
    }
    // A scan whose carry is a key row, rotated each step, and whose ys are the carries.
    let mut body = Jaxpr::default();
    let c = body.new_var(Aval::new(DType::Key, vec![4]));
    body.invars.push(c);
    let r = body.new_var(Aval::new(DType::Key, vec![4]));
    body.eqns.push(Eqn::new(Primitive::Rev { dimensions: vec![0] }, vec![c.into()], vec![r], SourceInfo::unknown()));
    body.outvars = vec![r.into(), c.into()];
    let scan = Primitive::Scan {
        jaxpr: remat_ir::ClosedJaxpr::new(std::sync::Arc::new(body)),
        length: 3,
        reverse: false,
        num_consts: 0,
        num_carry: 1,
        unroll: 1,
    };
    let row = remat_ir::map_array!(k(4), x => x);
    match one_eqn(scan, &[row.aval()]) {
        Some(j) => {
            if let Err(e) = same("scan with a key carry", &j, &[row]) {
                errors.push(e);
            }
        }
        None => errors.push("the key scan is rejected by the shape rules".to_string()),
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// Complex elements (8 and 16 bytes) move through every structural primitive as the bits of
/// their parts, as keys do: the JIT lowers these equations itself (`complex_route`'s
/// `Inline`), and they must give the interpreter's bits, a complex padding value included.
#[test]
fn complex_values_move_through_every_structural_primitive() {
    fn parts(i: usize) -> (f64, f64) {
        (i as f64 * 1.25 - 3.0, -(i as f64) * 0.5 + 1e-3)
    }
    type Maker = fn(usize) -> Array;
    let makers: [(&str, Maker); 2] = [
        ("c64", |n| Array::C64(v((0..n).map(|i| c64::new(parts(i).0 as f32, parts(i).1 as f32)).collect()))),
        ("c128", |n| Array::C128(v((0..n).map(|i| c128::new(parts(i).0, parts(i).1)).collect()))),
    ];
    let mut errors = Vec::new();
    for (dtype, k) in &makers {
        let x = remat_ir::map_array!(k(12), x => x.into_shape_with_order(ndarray::IxDyn(&[3, 4])).expect("3x4"));
        let pad_value = remat_ir::map_array!(k(1), x => x.into_shape_with_order(ndarray::IxDyn(&[])).expect("scalar"));
        let mut programs = structural_programs(*k);
        programs.push((Primitive::Pad { padding_config: vec![(1, 2, 0), (0, -1, 1)] }, vec![x.clone(), pad_value]));
        programs.push((
            Primitive::Squeeze { dimensions: vec![0] },
            vec![remat_ir::map_array!(k(4), x => x.into_shape_with_order(ndarray::IxDyn(&[1, 4])).expect("1x4"))],
        ));
        for (prim, args) in programs {
            let avals: Vec<Aval> = args.iter().map(Array::aval).collect();
            let name = prim.name();
            match one_eqn(prim, &avals) {
                Some(j) => {
                    if let Err(e) = same(&format!("{name} of {dtype}"), &j, &args) {
                        errors.push(e);
                    }
                }
                None => errors.push(format!("{name} of {avals:?} rejected by the shape rules")),
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// A complex equation the JIT has no native step for is refused by name, not run wrongly.
#[test]
fn complex_equations_without_a_native_step_are_refused_by_name() {
    let z = Aval::new(DType::C64, vec![4]);
    let j = one_eqn(Primitive::ReducePrecision { exponent_bits: 5, mantissa_bits: 10 }, &[z]).expect("verified");
    let Err(err) = remat_jit::compile(&j) else { panic!("a complex reduce_precision compiled") };
    let err = err.to_string();
    assert!(err.contains("reduce_precision") && err.contains("complex form is not compiled"), "{err}");
}

/// Loops and conditionals carry complex values (moved as the bits of their parts), with
/// the arithmetic in their bodies as native steps: a `while` (JAX's text for
/// `while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * c[1] + z), (0, z))`, whose
/// value JAX 0.10.2 gives as `[0.1433258+1.6049805j, -0.12994993+0.24651456j,
/// 0.6429645-0.40688196j]` at `z = [0.5+0.25j, -0.1+0.3j, 0.2-0.7j]`), on `c64` and `c128`,
/// equal to the interpreter's bits.
#[test]
fn loops_carry_complex_values() {
    let text = "{ lambda ; a:c64[3]. let
    _:i32[] b:c64[3] = while[
      body_jaxpr={ lambda ; c:c64[3] d:i32[] e:c64[3]. let
          f:i32[] = add d 1:i32[]
          g:c64[3] = mul e e
          h:c64[3] = add g c
        in (f, h) }
      body_nconsts=1
      cond_jaxpr={ lambda ; i:i32[] j:c64[3]. let
          k:bool[] = lt i 3:i32[]
        in (k,) }
      cond_nconsts=0
    ] a 0:i32[] a
  in (b,) }";
    let parts = [(0.5, 0.25), (-0.1, 0.3), (0.2, -0.7)];
    let z64 = Array::C64(v(parts.iter().map(|&(re, im)| c64::new(re as f32, im as f32)).collect()));
    let z128 = Array::C128(v(parts.iter().map(|&(re, im)| c128::new(re, im)).collect()));
    for (text, z) in [(text.to_string(), z64.clone()), (text.replace("c64", "c128"), z128)] {
        let j = remat_ir::parse_jaxpr(&text, "while.jaxpr").expect("parses");
        same(&format!("while of {}", z.dtype().numpy_name()), &j, &[z]).unwrap();
    }
    let j = remat_ir::parse_jaxpr(text, "while.jaxpr").expect("parses");
    let got = remat_jit::compile(&j).expect("compiles").run(&[z64]).expect("runs");
    let Array::C64(got) = &got[0] else { panic!("c64") };
    let jax = [(0.1433258, 1.6049805), (-0.12994993, 0.24651456), (0.6429645, -0.40688196)];
    for (g, (re, im)) in got.iter().zip(jax) {
        assert!((g.re - re).abs() < 1e-6 && (g.im - im).abs() < 1e-6, "{g:?} against JAX's ({re}, {im})");
    }
}

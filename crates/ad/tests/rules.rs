//! Every jvp rule against central finite differences (in f64), and every transpose rule by
//! the dot-product test `<ct, J t> = <J^T ct, t>` on random inputs: for each program
//! below, the jvp's tangent matches the finite difference, and the linear half of its
//! linearization transposes consistently.

use std::sync::Arc;

use ndarray::{ArrayD, IxDyn};
use remat_ad::{jvp_jaxpr, linearize, transpose_jaxpr, Builder};
use remat_interp::eval_jaxpr;
use remat_ir::{
    Array, Atom, Aval, BinaryOp, ClosedJaxpr, CompareOp, CopySemantics, CumulativeOp, DType, DotDimensionNumbers,
    FillValue, GatherDimensionNumbers, GatherScatterMode, Jaxpr, LitValue, Literal, MemorySpace, Policy, Primitive,
    ReduceOp, RoundingMethod, ScatterDimensionNumbers, ScatterOp, UnaryDomain, UnaryOp,
};
use remat_testkit::within;

#[path = "rules/windows.rs"]
mod windows;

/// How an input is drawn.
#[derive(Clone, Copy)]
enum Dist {
    Normal,
    /// |normal| + 0.5: for logs, square roots and divisors.
    Positive,
    /// Uniform in (-0.9, 0.9): for asin, acos, atanh, erf_inv.
    Unit,
    /// |normal| + 1.5: for acosh.
    AboveOne,
    /// Small integers in `0..n`.
    Int(i32),
}

struct Program {
    name: String,
    jaxpr: Jaxpr,
    dists: Vec<Dist>,
}

fn f64a(shape: &[usize]) -> Aval {
    Aval::new(DType::F64, shape.to_vec())
}

fn lit(x: f64) -> Atom {
    Atom::Lit(Literal::new(LitValue::F64(x)))
}

/// Builds a program from input avals and a body.
fn program(name: &str, inputs: &[(Aval, Dist)], body: impl FnOnce(&mut Builder, &[Atom]) -> Vec<Atom>) -> Program {
    let mut b = Builder::new();
    let ins: Vec<Atom> = inputs.iter().map(|(a, _)| Atom::Var(b.invar(a.clone()))).collect();
    let outs = body(&mut b, &ins);
    let jaxpr = b.finish(outs);
    remat_ir::verify(&jaxpr).unwrap_or_else(|e| panic!("{name}: {e}"));
    Program { name: name.to_string(), jaxpr, dists: inputs.iter().map(|(_, d)| *d).collect() }
}

fn n(shape: &[usize]) -> (Aval, Dist) {
    (f64a(shape), Dist::Normal)
}

fn pos(shape: &[usize]) -> (Aval, Dist) {
    (f64a(shape), Dist::Positive)
}

fn int(k: i32) -> (Aval, Dist) {
    (Aval::scalar(DType::I32), Dist::Int(k))
}

fn bind1(b: &mut Builder, p: Primitive, ins: Vec<Atom>) -> Atom {
    b.bind1(p, ins).unwrap()
}

fn dot(lc: &[usize], rc: &[usize], lb: &[usize], rb: &[usize]) -> Primitive {
    Primitive::DotGeneral {
        dimension_numbers: DotDimensionNumbers {
            lhs_contracting: lc.to_vec(),
            rhs_contracting: rc.to_vec(),
            lhs_batch: lb.to_vec(),
            rhs_batch: rb.to_vec(),
        },
        preferred_element_type: Some(DType::F64),
        precision: None,
    }
}

fn sub_jaxpr(inputs: &[Aval], body: impl FnOnce(&mut Builder, &[Atom]) -> Vec<Atom>) -> Jaxpr {
    let mut b = Builder::new();
    let ins: Vec<Atom> = inputs.iter().map(|a| Atom::Var(b.invar(a.clone()))).collect();
    let outs = body(&mut b, &ins);
    b.finish(outs)
}

fn programs() -> Vec<Program> {
    let mut ps = windows::programs();
    let s = [2, 3];
    // Every unary op on floats (`not`, `population_count` and `clz` on integers are below).
    for op in UnaryOp::ALL.into_iter().filter(|&op| !matches!(op.domain(), UnaryDomain::IntOrBool | UnaryDomain::Int)) {
        let dist = match op {
            UnaryOp::Log | UnaryOp::Log1p | UnaryOp::Sqrt | UnaryOp::Rsqrt => Dist::Positive,
            UnaryOp::Lgamma | UnaryOp::Digamma => Dist::Positive,
            UnaryOp::Asin | UnaryOp::Acos | UnaryOp::Atanh | UnaryOp::ErfInv => Dist::Unit,
            UnaryOp::Acosh => Dist::AboveOne,
            _ => Dist::Normal,
        };
        ps.push(program(op.name(), &[(f64a(&s), dist)], |b, x| vec![b.unary(op, x[0]).unwrap()]));
    }
    // Every binary op on floats but `polygamma` (differentiable in x only, below) and
    // `nextafter` (no derivative); the integer ones are below.
    let float_binary = BinaryOp::ALL.into_iter().filter(|op| {
        !matches!(
            op,
            BinaryOp::Polygamma
                | BinaryOp::Nextafter
                | BinaryOp::IgammaGradA
                | BinaryOp::Zeta
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::ShiftLeft
                | BinaryOp::ShiftRightLogical
                | BinaryOp::ShiftRightArithmetic
                | BinaryOp::Mulhi
        )
    });
    for op in float_binary {
        let (dx, dy) = match op {
            BinaryOp::Div | BinaryOp::Rem => (Dist::Normal, Dist::Positive),
            BinaryOp::Pow => (Dist::Positive, Dist::Normal),
            BinaryOp::Igamma | BinaryOp::Igammac => (Dist::Positive, Dist::Positive),
            _ => (Dist::Normal, Dist::Normal),
        };
        ps.push(program(op.name(), &[(f64a(&s), dx), (f64a(&s), dy)], |b, x| vec![b.binary(op, x[0], x[1]).unwrap()]));
        // One operand broadcast: a scalar, or size-1 dimensions against each other.
        ps.push(program(&format!("{}_scalar", op.name()), &[(f64a(&[]), dx), (f64a(&s), dy)], |b, x| {
            vec![b.binary(op, x[0], x[1]).unwrap()]
        }));
        ps.push(program(&format!("{}_unit_dims", op.name()), &[(f64a(&[3, 1]), dx), (f64a(&[1, 4]), dy)], |b, x| {
            vec![b.binary(op, x[0], x[1]).unwrap()]
        }));
    }
    // regularized_incomplete_beta in x (JAX's only differentiable operand), at x in (0, 1).
    ps.push(program("regularized_incomplete_beta_x", &[n(&s)], |b, x| {
        let u = b.unary(UnaryOp::Logistic, x[0]).unwrap();
        vec![bind1(b, Primitive::RegularizedIncompleteBeta, vec![lit(2.5), lit(0.7), u])]
    }));
    for m in [1.0, 2.0] {
        ps.push(program(&format!("polygamma_{m}"), &[pos(&s)], |b, x| {
            vec![b.binary(BinaryOp::Polygamma, lit(m), x[0]).unwrap()]
        }));
    }
    ps.push(program("round_floor_bitcast_zero_tangents", &[n(&s)], |b, x| {
        let r = bind1(b, Primitive::Round { rounding_method: RoundingMethod::ToNearestEven }, vec![x[0]]);
        // Bits of a value constant near x (they change with every f32 ulp of x itself).
        let fl = b.unary(UnaryOp::Floor, x[0]).unwrap();
        let single = b.convert(fl, DType::F32).unwrap();
        let i = bind1(b, Primitive::BitcastConvertType { new_dtype: DType::I32 }, vec![single]);
        let f = b.convert(i, DType::F64).unwrap();
        let f = b.mul(f, lit(1e-9)).unwrap();
        let y = b.add(r, f).unwrap();
        vec![b.mul(y, x[0]).unwrap()]
    }));
    ps.push(program(
        "bitwise_and_shift_zero_tangents",
        &[n(&s), (Aval::new(DType::I32, s.to_vec()), Dist::Int(40))],
        |b, x| {
            let scaled = b.mul(x[0], lit(100.0)).unwrap();
            let i = b.convert(scaled, DType::I32).unwrap();
            let mut acc = b.unary(UnaryOp::Not, i).unwrap();
            for op in [
                BinaryOp::And,
                BinaryOp::Or,
                BinaryOp::Xor,
                BinaryOp::ShiftLeft,
                BinaryOp::ShiftRightLogical,
                BinaryOp::ShiftRightArithmetic,
                BinaryOp::Rem,
                BinaryOp::Mulhi,
            ] {
                let r = b.binary(op, i, x[1]).unwrap();
                acc = b.add(acc, r).unwrap();
            }
            for op in [UnaryOp::PopulationCount, UnaryOp::Clz] {
                let r = b.unary(op, i).unwrap();
                acc = b.add(acc, r).unwrap();
            }
            // The total-order compares and the bitwise reductions: integer and boolean
            // results without tangents.
            for op in [CompareOp::EqTo, CompareOp::LeTo, CompareOp::LtTo] {
                let c = b.compare(op, x[0], lit(0.25)).unwrap();
                let c = b.convert(c, DType::I32).unwrap();
                acc = b.add(acc, c).unwrap();
            }
            for op in [ReduceOp::And, ReduceOp::Or, ReduceOp::Xor] {
                let r = bind1(b, Primitive::Reduce { op, axes: vec![1] }, vec![i]);
                let r = b.broadcast_in_dim(r, &s, &[0]).unwrap();
                acc = b.add(acc, r).unwrap();
            }
            let f = b.convert(acc, DType::F64).unwrap();
            vec![b.mul(f, x[0]).unwrap()]
        },
    ));
    ps.push(program("max_literal", &[n(&s)], |b, x| vec![b.binary(BinaryOp::Max, x[0], lit(0.1)).unwrap()]));
    ps.push(program("pow_int_exponent", &[pos(&s), (Aval::new(DType::I32, s.to_vec()), Dist::Int(4))], |b, x| {
        vec![b.binary(BinaryOp::Pow, x[0], x[1]).unwrap()]
    }));
    for y in [0, 1, 2, 3, -2] {
        ps.push(program(&format!("integer_pow_{y}"), &[pos(&s)], |b, x| vec![b.integer_pow(x[0], y).unwrap()]));
    }
    ps.push(program("compare_zero_tangent", &[n(&s), n(&s)], |b, x| {
        let c = b.compare(CompareOp::Gt, x[0], x[1]).unwrap();
        let f = b.convert(c, DType::F64).unwrap();
        vec![b.mul(f, x[0]).unwrap()]
    }));
    ps.push(program("select_n_bool", &[n(&s), n(&s)], |b, x| {
        let p = b.compare(CompareOp::Gt, x[0], x[1]).unwrap();
        vec![b.select_n(p, vec![x[0], x[1]]).unwrap()]
    }));
    ps.push(program(
        "select_n_int",
        &[(Aval::new(DType::I32, s.to_vec()), Dist::Int(3)), n(&s), n(&s), n(&s)],
        |b, x| vec![b.select_n(x[0], vec![x[1], x[2], x[3]]).unwrap()],
    ));
    ps.push(program("select_n_one_case_constant", &[n(&s)], |b, x| {
        let p = b.compare(CompareOp::Gt, x[0], lit(0.0)).unwrap();
        let z = b.full(&f64a(&s), 0.5).unwrap();
        vec![b.select_n(p, vec![z, x[0]]).unwrap()]
    }));
    ps.push(program("clamp", &[n(&[]), n(&s), n(&[])], |b, x| {
        let lo = b.sub(x[0], lit(1.0)).unwrap();
        let hi = b.add(x[2], lit(1.0)).unwrap();
        vec![bind1(b, Primitive::Clamp, vec![lo, x[1], hi])]
    }));
    ps.push(program("convert_f64_f32_f64", &[n(&s)], |b, x| {
        let c = bind1(b, Primitive::ConvertElementType { new_dtype: DType::F32, weak_type: false }, vec![x[0]]);
        vec![bind1(b, Primitive::ConvertElementType { new_dtype: DType::F64, weak_type: false }, vec![c])]
    }));
    ps.push(program("convert_to_int", &[n(&s)], |b, x| {
        let c = bind1(b, Primitive::ConvertElementType { new_dtype: DType::I32, weak_type: false }, vec![x[0]]);
        let f = b.convert(c, DType::F64).unwrap();
        vec![b.add(f, x[0]).unwrap()]
    }));
    ps.push(program("reduce_precision", &[n(&s)], |b, x| {
        vec![bind1(b, Primitive::ReducePrecision { exponent_bits: 11, mantissa_bits: 52 }, vec![x[0]])]
    }));
    ps.push(program("broadcast_in_dim", &[n(&[3]), n(&[1, 3]), n(&[])], |b, x| {
        vec![
            b.broadcast_in_dim(x[0], &[2, 3], &[1]).unwrap(),
            b.broadcast_in_dim(x[1], &[4, 3], &[0, 1]).unwrap(),
            b.broadcast_in_dim(x[2], &[2, 2], &[]).unwrap(),
        ]
    }));
    ps.push(program("reshape_transpose", &[n(&[2, 3, 4])], |b, x| {
        let r = b.reshape(x[0], &[6, 4]).unwrap();
        let t = b.transpose(x[0], &[2, 0, 1]).unwrap();
        vec![r, t]
    }));
    ps.push(program("squeeze_expand_dims", &[n(&[1, 3, 1])], |b, x| {
        let sq = bind1(b, Primitive::Squeeze { dimensions: vec![0, 2] }, vec![x[0]]);
        let ex = bind1(b, Primitive::ExpandDims { dimensions: vec![1] }, vec![sq]);
        vec![sq, ex]
    }));
    ps.push(program("slice", &[n(&[6, 5])], |b, x| {
        let p1 = Primitive::Slice { start_indices: vec![1, 0], limit_indices: vec![5, 5], strides: None };
        let p2 = Primitive::Slice { start_indices: vec![0, 1], limit_indices: vec![6, 5], strides: Some(vec![2, 3]) };
        vec![bind1(b, p1, vec![x[0]]), bind1(b, p2, vec![x[0]])]
    }));
    ps.push(program("pad", &[n(&[3, 4]), n(&[])], |b, x| {
        let p = Primitive::Pad { padding_config: vec![(1, 2, 1), (-1, 0, 0)] };
        vec![bind1(b, p, vec![x[0], x[1]])]
    }));
    ps.push(program("concatenate", &[n(&[2, 3]), n(&[2, 1]), n(&[2, 2])], |b, x| {
        vec![bind1(b, Primitive::Concatenate { dimension: 1 }, x.to_vec())]
    }));
    ps.push(program("dynamic_slice", &[n(&[5, 4]), int(3), int(2)], |b, x| {
        vec![bind1(b, Primitive::DynamicSlice { slice_sizes: vec![2, 3] }, x.to_vec())]
    }));
    ps.push(program("dynamic_update_slice", &[n(&[5, 4]), n(&[2, 3]), int(3), int(2)], |b, x| {
        vec![bind1(b, Primitive::DynamicUpdateSlice, x.to_vec())]
    }));
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod] {
        ps.push(program(op.name(), &[n(&[3, 4, 2])], |b, x| {
            let r1 = bind1(b, Primitive::Reduce { op, axes: vec![0, 2] }, vec![x[0]]);
            let r2 = bind1(b, Primitive::Reduce { op, axes: vec![0, 1, 2] }, vec![x[0]]);
            vec![r1, r2]
        }));
    }
    // `reduce_prod`'s tree: odd lengths (a pad of 1.0), axes out of order (a permuting
    // reshape), an empty axis (ones) and a zero among the factors.
    ps.push(program("reduce_prod_trees", &[n(&[3, 5, 2]), n(&[0, 3])], |b, x| {
        let r1 = bind1(b, Primitive::Reduce { op: ReduceOp::Prod, axes: vec![1] }, vec![x[0]]);
        let r2 = bind1(b, Primitive::Reduce { op: ReduceOp::Prod, axes: vec![2, 0] }, vec![x[0]]);
        let zero = b.mul(x[0], lit(0.0)).unwrap();
        let with_zero = bind1(b, Primitive::Concatenate { dimension: 1 }, vec![x[0], zero]);
        let r3 = bind1(b, Primitive::Reduce { op: ReduceOp::Prod, axes: vec![1] }, vec![with_zero]);
        let r4 = bind1(b, Primitive::Reduce { op: ReduceOp::Prod, axes: vec![0] }, vec![x[1]]);
        vec![r1, r2, r3, r4]
    }));
    ps.push(program("argmax_iota", &[n(&[3, 4])], |b, x| {
        let a = bind1(b, Primitive::Argmax { axes: vec![1], index_dtype: DType::I32 }, vec![x[0]]);
        let af = b.convert(a, DType::F64).unwrap();
        let io = bind1(b, Primitive::Iota { dtype: DType::F64, shape: vec![3], dimension: 0 }, vec![]);
        let s = bind1(b, Primitive::Reduce { op: ReduceOp::Sum, axes: vec![1] }, vec![x[0]]);
        let t = b.mul(s, io).unwrap();
        vec![b.add(t, af).unwrap()]
    }));
    ps.push(program("dot_matmul", &[n(&[3, 4]), n(&[4, 2])], |b, x| {
        vec![bind1(b, dot(&[1], &[0], &[], &[]), x.to_vec())]
    }));
    ps.push(program("dot_batched", &[n(&[2, 3, 4]), n(&[2, 5, 4])], |b, x| {
        vec![bind1(b, dot(&[2], &[2], &[0], &[0]), x.to_vec())]
    }));
    ps.push(program("dot_transposed_batch", &[n(&[4, 2, 3]), n(&[3, 2, 5])], |b, x| {
        vec![bind1(b, dot(&[2], &[0], &[1], &[1]), x.to_vec())]
    }));
    ps.push(program("dot_outer_and_vector", &[n(&[3]), n(&[4]), n(&[3])], |b, x| {
        vec![bind1(b, dot(&[], &[], &[], &[]), vec![x[0], x[1]]), bind1(b, dot(&[0], &[0], &[], &[]), vec![x[0], x[2]])]
    }));
    ps.push(program("name", &[n(&s)], |b, x| {
        let nm = bind1(b, Primitive::Name { name: "a".into() }, vec![x[0]]);
        vec![b.unary(UnaryOp::Sin, nm).unwrap()]
    }));
    ps.push(program("device_put", &[n(&s)], |b, x| {
        let put =
            |ms| Primitive::DevicePut { devices: vec![Some(ms)], copy_semantics: vec![CopySemantics::AlwaysCopy] };
        let h = bind1(b, put(MemorySpace::Host), vec![x[0]]);
        let d = bind1(b, put(MemorySpace::Device), vec![h]);
        vec![b.mul(d, d).unwrap()]
    }));
    let inner = Arc::new(sub_jaxpr(&[f64a(&s), f64a(&s)], |b, x| {
        let s = b.unary(UnaryOp::Sin, x[0]).unwrap();
        vec![b.mul(s, x[1]).unwrap(), b.unary(UnaryOp::Exp, x[1]).unwrap()]
    }));
    let jit = Primitive::Jit { name: "f".into(), jaxpr: ClosedJaxpr::new(inner.clone()), options: Default::default() };
    ps.push(program("jit", &[n(&s), n(&s)], |b, x| {
        b.bind(jit, x.to_vec()).unwrap().into_iter().map(Atom::Var).collect()
    }));
    let relu = Arc::new(sub_jaxpr(&[f64a(&s)], |b, x| vec![b.binary(BinaryOp::Max, x[0], lit(0.0)).unwrap()]));
    let cj = Primitive::CustomJvpCall {
        name: "relu".into(),
        call_jaxpr: ClosedJaxpr::new(relu),
        jvp: "jvp".into(),
        num_consts: 0,
        symbolic_zeros: false,
    };
    ps.push(program("custom_jvp_call", &[n(&s)], |b, x| vec![bind1(b, cj, x.to_vec())]));
    for policy in [None, Some(Policy::EverythingSaveable), Some(Policy::DotsSaveable { only_if_no_batch_dims: true })] {
        let remat = Primitive::Remat2 {
            jaxpr: inner.clone(),
            prevent_cse: true,
            differentiated: false,
            policy: policy.clone(),
        };
        ps.push(program(&format!("remat2_{policy:?}"), &[n(&s), n(&s)], |b, x| {
            b.bind(remat, x.to_vec()).unwrap().into_iter().map(Atom::Var).collect()
        }));
    }
    // scan: consts (w), carries (c, k), xs (xs) -> carries, ys; forward and reverse.
    let body = Arc::new(sub_jaxpr(&[f64a(&[3]), f64a(&[3]), f64a(&[]), f64a(&[3])], |b, x| {
        let (w, c, k, xi) = (x[0], x[1], x[2], x[3]);
        let wc = b.mul(w, c).unwrap();
        let s = b.unary(UnaryOp::Sin, wc).unwrap();
        let c2 = b.add(s, xi).unwrap();
        let sum = bind1(b, Primitive::Reduce { op: ReduceOp::Sum, axes: vec![0] }, vec![xi]);
        let k2 = b.mul(k, lit(0.9)).unwrap();
        let k2 = b.add(k2, sum).unwrap();
        let y = b.mul(c2, k).unwrap();
        vec![c2, k2, y]
    }));
    for reverse in [false, true] {
        let scan = Primitive::Scan {
            jaxpr: ClosedJaxpr::new(body.clone()),
            length: 4,
            reverse,
            num_consts: 1,
            num_carry: 2,
            unroll: 1,
        };
        ps.push(program(&format!("scan_reverse_{reverse}"), &[n(&[3]), n(&[3]), n(&[]), n(&[4, 3])], |b, x| {
            b.bind(scan, x.to_vec()).unwrap().into_iter().map(Atom::Var).collect()
        }));
    }
    // A scan whose carry tangent is zero on entry but not on exit (the jvp fixpoint).
    let body2 = Arc::new(sub_jaxpr(&[f64a(&[2]), f64a(&[2])], |b, x| {
        let c = b.mul(x[0], x[1]).unwrap();
        let c = b.add(c, x[1]).unwrap();
        vec![c, b.unary(UnaryOp::Cos, c).unwrap()]
    }));
    let scan2 = Primitive::Scan {
        jaxpr: ClosedJaxpr::new(body2),
        length: 3,
        reverse: false,
        num_consts: 0,
        num_carry: 1,
        unroll: 1,
    };
    ps.push(program("scan_carry_fixpoint", &[n(&[3, 2])], |b, x| {
        let zero = b.full(&f64a(&[2]), 1.0).unwrap();
        b.bind(scan2, vec![zero, x[0]]).unwrap().into_iter().map(Atom::Var).collect()
    }));
    ps.extend(indexing_programs());
    ps
}

/// Integers in `0..k` of `shape`.
fn ints(shape: &[usize], k: i32) -> (Aval, Dist) {
    (Aval::new(DType::I32, shape.to_vec()), Dist::Int(k))
}

fn all_outs(b: &mut Builder, p: Primitive, ins: Vec<Atom>) -> Vec<Atom> {
    b.bind(p, ins).unwrap().into_iter().map(Atom::Var).collect()
}

/// `split`, `gather`, `scatter-add`, `sort`, `top_k` and the cumulative reductions, with
/// indices out of bounds where the mode allows them.
fn indexing_programs() -> Vec<Program> {
    let mut ps = Vec::new();
    ps.push(program("split", &[n(&[3, 5])], |b, x| {
        all_outs(b, Primitive::Split { axis: 1, sizes: vec![2, 0, 3] }, x.to_vec())
    }));
    let take = |mode, fill_value| Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims: vec![1],
            collapsed_slice_dims: vec![0],
            start_index_map: vec![0],
            ..Default::default()
        },
        fill_value,
        indices_are_sorted: false,
        mode,
        slice_sizes: vec![1, 4],
        unique_indices: false,
    };
    for (name, mode, k) in [
        ("gather_take", GatherScatterMode::PromiseInBounds, 6),
        ("gather_take_clip", GatherScatterMode::Clip, 9),
        ("gather_take_fill", GatherScatterMode::FillOrDrop, 9),
    ] {
        let prim = take(mode, Some(FillValue::Float(0.5)));
        ps.push(program(name, &[n(&[6, 4]), ints(&[5, 1], k)], |b, x| vec![bind1(b, prim, x.to_vec())]));
    }
    let along = Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims: vec![],
            collapsed_slice_dims: vec![1],
            start_index_map: vec![1],
            operand_batching_dims: vec![0],
            start_indices_batching_dims: vec![0],
        },
        fill_value: None,
        indices_are_sorted: false,
        mode: GatherScatterMode::FillOrDrop,
        slice_sizes: vec![1, 1],
        unique_indices: false,
    };
    ps.push(program("gather_take_along_axis", &[n(&[3, 5]), ints(&[3, 4, 1], 5)], |b, x| {
        vec![bind1(b, along, x.to_vec())]
    }));
    for (name, op, mode) in [
        ("scatter_add_drop", ScatterOp::Add, GatherScatterMode::FillOrDrop),
        ("scatter_add_clip", ScatterOp::Add, GatherScatterMode::Clip),
        ("scatter_sub_drop", ScatterOp::Sub, GatherScatterMode::FillOrDrop),
        ("scatter_sub_clip", ScatterOp::Sub, GatherScatterMode::Clip),
    ] {
        let prim = Primitive::Scatter {
            op,
            dimension_numbers: ScatterDimensionNumbers {
                update_window_dims: vec![1],
                inserted_window_dims: vec![0],
                scatter_dims_to_operand_dims: vec![0],
                ..Default::default()
            },
            indices_are_sorted: false,
            mode,
            unique_indices: false,
            update_jaxpr: None,
        };
        ps.push(program(name, &[n(&[6, 4]), ints(&[5, 1], 9), n(&[5, 4])], |b, x| {
            let s = b.unary(UnaryOp::Sin, x[2]).unwrap();
            vec![bind1(b, prim, vec![x[0], x[1], s])]
        }));
    }
    // `.at[].set`: repeated indices (the id trick), then unique ones (an iota).
    let set = |unique_indices, mode| Primitive::Scatter {
        op: ScatterOp::Set,
        dimension_numbers: ScatterDimensionNumbers {
            update_window_dims: vec![1],
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            ..Default::default()
        },
        indices_are_sorted: false,
        mode,
        unique_indices,
        update_jaxpr: None,
    };
    for (name, mode) in
        [("scatter_set_repeated", GatherScatterMode::FillOrDrop), ("scatter_set_clip", GatherScatterMode::Clip)]
    {
        let prim = set(false, mode);
        ps.push(program(name, &[n(&[4, 3]), ints(&[6, 1], 5), n(&[6, 3])], |b, x| {
            let s = b.unary(UnaryOp::Sin, x[0]).unwrap();
            vec![bind1(b, prim, vec![s, x[1], x[2]])]
        }));
    }
    let prim = set(true, GatherScatterMode::FillOrDrop);
    ps.push(program("scatter_set_unique", &[n(&[5, 3]), n(&[4, 3])], |b, x| {
        let idx = bind1(b, Primitive::Iota { dtype: DType::I32, shape: vec![4, 1], dimension: 0 }, vec![]);
        vec![bind1(b, prim, vec![x[0], idx, x[1]])]
    }));
    // `.at[].mul`: in the operand with repeated indices, in both with unique ones.
    let mul = |unique_indices| match set(unique_indices, GatherScatterMode::FillOrDrop) {
        Primitive::Scatter { dimension_numbers, indices_are_sorted, mode, .. } => Primitive::Scatter {
            op: ScatterOp::Mul,
            dimension_numbers,
            indices_are_sorted,
            mode,
            unique_indices,
            update_jaxpr: None,
        },
        other => other,
    };
    let prim = mul(false);
    ps.push(program("scatter_mul_repeated", &[n(&[4, 3]), ints(&[6, 1], 5)], |b, x| {
        let s = b.unary(UnaryOp::Sin, x[0]).unwrap();
        let updates = b.full(&f64a(&[6, 3]), 1.5).unwrap();
        vec![bind1(b, prim, vec![s, x[1], updates])]
    }));
    let prim = mul(true);
    ps.push(program("scatter_mul_unique", &[n(&[5, 3]), n(&[4, 3])], |b, x| {
        let idx = bind1(b, Primitive::Iota { dtype: DType::I32, shape: vec![4, 1], dimension: 0 }, vec![]);
        let s = b.unary(UnaryOp::Sin, x[1]).unwrap();
        vec![bind1(b, prim, vec![x[0], idx, s])]
    }));
    // `.at[].min` / `.at[].max` with repeated indices.
    for op in [ScatterOp::Min, ScatterOp::Max] {
        let prim = match set(false, GatherScatterMode::FillOrDrop) {
            Primitive::Scatter { dimension_numbers, indices_are_sorted, mode, unique_indices, .. } => {
                Primitive::Scatter {
                    op,
                    dimension_numbers,
                    indices_are_sorted,
                    mode,
                    unique_indices,
                    update_jaxpr: None,
                }
            }
            other => other,
        };
        ps.push(program(op.name(), &[n(&[4, 3]), ints(&[6, 1], 5), n(&[6, 3])], |b, x| {
            let s = b.unary(UnaryOp::Sin, x[0]).unwrap();
            vec![bind1(b, prim, vec![s, x[1], x[2]])]
        }));
    }
    ps.push(program("sort", &[n(&[3, 5])], |b, x| {
        all_outs(b, Primitive::Sort { dimension: 1, is_stable: true, num_keys: 1 }, x.to_vec())
    }));
    ps.push(program("sort_two_operands", &[n(&[4, 3]), n(&[4, 3])], |b, x| {
        all_outs(b, Primitive::Sort { dimension: 0, is_stable: true, num_keys: 1 }, x.to_vec())
    }));
    ps.push(program("top_k", &[n(&[3, 5])], |b, x| all_outs(b, Primitive::TopK { axis: 1, k: 3 }, x.to_vec())));
    for op in CumulativeOp::ALL {
        for (axis, reverse) in [(1, false), (0, true), (1, true)] {
            let prim = Primitive::Cumulative { op, axis, reverse };
            ps.push(program(&format!("{}_{axis}_{reverse}", op.name()), &[n(&[3, 5])], |b, x| {
                vec![bind1(b, prim, x.to_vec())]
            }));
        }
    }
    // The generic `reduce`: the monoid ab + a + b over an odd length (the tree pads with the
    // init value) and over two axes, and a variadic max carrying a payload.
    for (name, text) in [("reduce_odot", GENERIC_REDUCE), ("reduce_pair", GENERIC_REDUCE_PAIR)] {
        let jaxpr = remat_ir::parse_jaxpr(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let dists = vec![Dist::Normal; jaxpr.invars.len()];
        ps.push(Program { name: name.to_string(), jaxpr, dists });
    }
    ps
}

const GENERIC_REDUCE: &str = "{ lambda ; a:f64[3,5] b:f64[2,3,3]. let
    c:f64[3,5] = mul a 0.25:f64[]
    d:f64[3] = reduce[
      computation=<function odot at 0xXXXXXXXXXXXX>
      dimensions=(1,)
      jaxpr={ lambda ; e:f64[] f:f64[]. let
          g:f64[] = mul e f
          h:f64[] = add g e
          i:f64[] = add h f
        in (i,) }
    ] c 0.0:f64[]
    j:f64[2,3,3] = mul b 0.25:f64[]
    k:f64[3] = reduce[
      computation=<function odot at 0xXXXXXXXXXXXX>
      dimensions=(0, 2)
      jaxpr={ lambda ; e:f64[] f:f64[]. let
          g:f64[] = mul e f
          h:f64[] = add g e
          i:f64[] = add h f
        in (i,) }
    ] j 0.0:f64[]
  in (d, k) }";

/// `lax.reduce_window(x, 0, odot, (2, 2), (1, 1), 'VALID')` as JAX 0.10.2 prints it.
const GENERIC_REDUCE_WINDOW: &str = "{ lambda ; a:f32[3,4]. let
    b:f32[2,3] = reduce_window[
      base_dilation=(1, 1)
      consts=()
      jaxpr={ lambda ; c:f32[] d:f32[]. let
          e:f32[] = mul c d
          f:f32[] = add e c
          g:f32[] = add f d
        in (g,) }
      padding=((0, 0), (0, 0))
      window_dilation=(1, 1)
      window_dimensions=(2, 2)
      window_strides=(1, 1)
    ] a 0.0:f32[]
  in (b,) }";

/// The generic `reduce_window`'s jvp is JAX's (`make_jaxpr(lambda x, t: jax.jvp(f, (x,),
/// (t,)))` of the program above, JAX 0.10.2's text) and computes JAX's values at x =
/// arange(12) / 10, t = 1.
#[test]
fn generic_reduce_window_jvp_is_jax_s() {
    let rw = remat_ir::parse_jaxpr(GENERIC_REDUCE_WINDOW, "reduce_window.jaxpr").expect("parses");
    let jvp = jvp_jaxpr(&rw, &[true], &[true]).unwrap().jaxpr;
    let want = "{ lambda ; a:f32[3,4] b:f32[3,4]. let
    c:f32[2,3] d:f32[2,3] = reduce_window[
      base_dilation=(1, 1)
      consts=()
      jaxpr={ lambda ; e:f32[] f:f32[] g:f32[] h:f32[]. let
          i:f32[] = mul e g
          j:f32[] = mul f g
          k:f32[] = mul e h
          l:f32[] = add_any j k
          m:f32[] = add i e
          n:f32[] = add l f
          o:f32[] = add m g
          p:f32[] = add n h
        in (o, p) }
      padding=((0, 0), (0, 0))
      window_dilation=(1, 1)
      window_dimensions=(2, 2)
      window_strides=(1, 1)
    ] a b 0.0:f32[] 0.0:f32[]
  in (c, d) }";
    assert_eq!(jvp.to_string(), want);
    let x = Array::F32(ArrayD::from_shape_fn(IxDyn(&[3, 4]), |i| (i[0] * 4 + i[1]) as f32 / 10.0));
    let t = Array::F32(ArrayD::from_elem(IxDyn(&[3, 4]), 1.0));
    let out = eval_jaxpr(&jvp, &[], &[x, t]).unwrap();
    let primal = [1.3100001, 2.1680002, 3.2432, 6.182, 8.120001, 10.424001];
    let tangent = [7.6, 9.6119995, 11.948001, 17.688, 21.14, 25.012001];
    for (got, want) in [(&out[0], &primal), (&out[1], &tangent)] {
        for (g, w) in values(got).iter().zip(want.iter()) {
            assert!(within(*g, *w, 1e-6, 1e-6), "{g} vs JAX's {w}");
        }
    }
}

const GENERIC_REDUCE_PAIR: &str = "{ lambda ; a:f64[3,4] b:f64[3,4]. let
    c:f64[3] d:f64[3] = reduce[
      computation=<function pair at 0xXXXXXXXXXXXX>
      dimensions=(1,)
      jaxpr={ lambda ; e:f64[] f:f64[] g:f64[] h:f64[]. let
          i:bool[] = gt e g
          j:f64[] = select_n i g e
          k:f64[] = select_n i h f
        in (j, k) }
    ] a b -inf:f64[] 0.0:f64[]
  in (c, d) }";

/// A deterministic generator (xorshift) of normal samples.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (self.next_f64().max(1e-12), self.next_f64());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    fn array(&mut self, aval: &Aval, dist: Dist) -> Array {
        let shape = IxDyn(&aval.shape);
        let count = aval.size();
        match aval.dtype {
            DType::F64 => {
                let data: Vec<f64> = (0..count)
                    .map(|_| match dist {
                        Dist::Positive => self.normal().abs() + 0.5,
                        Dist::Unit => (self.next_f64() * 2.0 - 1.0) * 0.9,
                        Dist::AboveOne => self.normal().abs() + 1.5,
                        Dist::Normal | Dist::Int(_) => self.normal(),
                    })
                    .collect();
                Array::F64(ArrayD::from_shape_vec(shape, data).unwrap())
            }
            DType::I32 => {
                let k = if let Dist::Int(k) = dist { k } else { 3 };
                let data: Vec<i32> = (0..count).map(|_| (self.next_f64() * k as f64) as i32).collect();
                Array::I32(ArrayD::from_shape_vec(shape, data).unwrap())
            }
            other => panic!("no inputs of {other}"),
        }
    }
}

fn values(a: &Array) -> Vec<f64> {
    a.to_f64_vec()
}

fn axpy(x: &Array, t: &Array, eps: f64) -> Array {
    match (x, t) {
        (Array::F64(x), Array::F64(t)) => Array::F64(x + &(t * eps)),
        _ => x.clone(),
    }
}

#[test]
fn every_jvp_rule_matches_finite_differences() {
    let mut failures = Vec::new();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let ps = programs();
    for p in &ps {
        let j = &p.jaxpr;
        let avals = j.in_avals();
        let xs: Vec<Array> = avals.iter().zip(&p.dists).map(|(a, d)| rng.array(a, *d)).collect();
        let nonzeros: Vec<bool> = avals.iter().map(|a| a.dtype.is_float()).collect();
        let ts: Vec<Array> = avals.iter().filter(|a| a.dtype.is_float()).map(|a| rng.array(a, Dist::Normal)).collect();
        let jvp = jvp_jaxpr(j, &nonzeros, &vec![true; j.outvars.len()]).unwrap();
        let mut args = xs.clone();
        args.extend(ts.iter().cloned());
        let out = eval_jaxpr(&jvp.jaxpr, &[], &args).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        let tangents = &out[j.outvars.len()..];
        // Central difference along t (wider for the round trip through f32).
        let eps = if p.name.contains("f32") { 1e-3 } else { 1e-6 };
        let mut ti = ts.iter();
        let (plus, minus): (Vec<Array>, Vec<Array>) = xs
            .iter()
            .zip(&avals)
            .map(|(x, a)| {
                if a.dtype.is_float() {
                    let t = ti.next().unwrap();
                    (axpy(x, t, eps), axpy(x, t, -eps))
                } else {
                    (x.clone(), x.clone())
                }
            })
            .unzip();
        let fp = eval_jaxpr(j, &[], &plus).unwrap();
        let fm = eval_jaxpr(j, &[], &minus).unwrap();
        let tol = if p.name.contains("f32") { 1e-3 } else { 1e-6 };
        // stop_gradient's derivative is zero by definition.
        let zero_by_definition = p.name == "stop_gradient";
        for (o, ((t, a), bm)) in tangents.iter().zip(&fp).zip(&fm).enumerate() {
            let fd: Vec<f64> = values(a).iter().zip(values(bm)).map(|(a, b)| (a - b) / (2.0 * eps)).collect();
            let is_float = a.dtype().is_float();
            for (k, (got, want)) in values(t).iter().zip(&fd).enumerate() {
                let want = if is_float && !zero_by_definition { *want } else { 0.0 };
                if !within(*got, want, tol, tol) {
                    failures.push(format!("{}: output {o} element {k}: jvp {got}, finite difference {want}", p.name));
                    break;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} programs:\n{}", failures.len(), ps.len(), failures.join("\n"));
    assert!(ps.len() > 70);
}

/// JAX has no derivative of `nextafter` nor of `polygamma` in its order: asking for one is
/// an error that names the primitive, not a panic or a wrong tangent.
#[test]
fn derivatives_jax_does_not_define_are_errors() {
    let s = [2];
    let next = program("nextafter", &[n(&s), n(&s)], |b, x| vec![b.binary(BinaryOp::Nextafter, x[0], x[1]).unwrap()]);
    let err = jvp_jaxpr(&next.jaxpr, &[true, false], &[true]).unwrap_err().to_string();
    assert!(err.starts_with("nextafter:"), "{err}");
    let pg = program("polygamma", &[pos(&s), pos(&s)], |b, x| vec![b.binary(BinaryOp::Polygamma, x[0], x[1]).unwrap()]);
    let err = jvp_jaxpr(&pg.jaxpr, &[true, false], &[true]).unwrap_err().to_string();
    assert!(err.contains("polygamma gradient with respect to m is not supported"), "{err}");
    // Without a tangent for m, the order is only an operand.
    assert!(jvp_jaxpr(&pg.jaxpr, &[false, true], &[true]).is_ok());
    // regularized_incomplete_beta: in x only.
    let beta = program("betainc", &[pos(&s), pos(&s), pos(&s)], |b, x| {
        vec![bind1(b, Primitive::RegularizedIncompleteBeta, vec![x[0], x[1], x[2]])]
    });
    for wrt in [[true, false, false], [false, true, false]] {
        let err = jvp_jaxpr(&beta.jaxpr, &wrt, &[true]).unwrap_err().to_string();
        assert!(err.contains("Betainc gradient with respect to a and b not supported."), "{err}");
    }
    assert!(jvp_jaxpr(&beta.jaxpr, &[false, false, true], &[true]).is_ok());
    // Neither igamma_grad_a nor zeta has a derivative in JAX 0.10.2, in either operand.
    for op in [BinaryOp::IgammaGradA, BinaryOp::Zeta] {
        let p = program(op.name(), &[pos(&s), pos(&s)], |b, x| vec![b.binary(op, x[0], x[1]).unwrap()]);
        for wrt in [[true, false], [false, true]] {
            let err = jvp_jaxpr(&p.jaxpr, &wrt, &[true]).unwrap_err().to_string();
            assert!(err.contains(&format!("Differentiation rule for '{}' not implemented", op.name())), "{err}");
        }
    }
    // The generic reduce: JAX's `_reduce_jvp_rule` takes no init value's tangent, and its
    // `_reduce_jvp` fails on an operand without a tangent beside one with a tangent.
    let text = "{ lambda ; a:f64[3,4] b:f64[]. let
    c:f64[3] = reduce[
      computation=<function odot at 0xXXXXXXXXXXXX>
      dimensions=(1,)
      jaxpr={ lambda ; e:f64[] f:f64[]. let g:f64[] = mul e f in (g,) }
    ] a b
  in (c,) }";
    let r = remat_ir::parse_jaxpr(text, "reduce_init.jaxpr").expect("parses");
    let err = jvp_jaxpr(&r, &[false, true], &[true]).unwrap_err().to_string();
    assert!(err.contains("non-zero tangents for initial values"), "{err}");
    assert!(jvp_jaxpr(&r, &[true, false], &[true]).is_ok());
    let r = remat_ir::parse_jaxpr(GENERIC_REDUCE_PAIR, "reduce_pair.jaxpr").expect("parses");
    let err = jvp_jaxpr(&r, &[true, false], &[true, true]).unwrap_err().to_string();
    assert!(err.contains("JAX's `_reduce_jvp` fails on it"), "{err}");
    // The generic reduce_window: forward mode only (JAX's jvp reduces primals and tangents
    // in one `reduce_window`, which partial evaluation cannot split).
    let rw = remat_ir::parse_jaxpr(GENERIC_REDUCE_WINDOW, "reduce_window.jaxpr").expect("parses");
    let err = linearize(&rw).unwrap_err().to_string();
    assert!(err.contains("Linearization failed to produce known values for all output primals"), "{err}");
    // An init value's tangent: JAX's TypeError.
    let text =
        GENERIC_REDUCE_WINDOW.replace("a:f32[3,4]. let", "a:f32[3,4] z:f32[]. let").replace("] a 0.0:f32[]", "] a z");
    let rwz = remat_ir::parse_jaxpr(&text, "reduce_window_init.jaxpr").expect("parses");
    let err = jvp_jaxpr(&rwz, &[false, true], &[true]).unwrap_err().to_string();
    assert!(err.contains("reduce_window jvp does not support non-zero init_value_tangent."), "{err}");
    // composite: no jvp (JAX's `composite_jvp`) and no batching rule; without a tangent it
    // is only evaluated.
    let text = "{ lambda ; a:f32[4]. let\n    b:f32[4] = composite[\n      attributes=()\n      jaxpr={ lambda ; c:f32[4]. let d:f32[4] = sin c in (d,) }\n      name=my.sin\n      version=0\n    ] a\n  in (b,) }";
    let comp = remat_ir::parse_jaxpr(text, "composite.jaxpr").expect("parses");
    let err = jvp_jaxpr(&comp, &[true], &[true]).unwrap_err().to_string();
    assert!(err.contains("JVP rule for composite not implemented"), "{err}");
    assert!(jvp_jaxpr(&comp, &[false], &[false]).is_ok());
    let closed = ClosedJaxpr::new(Arc::new(comp.clone()));
    let err = remat_ad::batch_jaxpr(&closed, 3, &[Some(0)], &[Some(0)]).unwrap_err().to_string();
    assert!(err.contains("Batching rule for 'composite' not implemented"), "{err}");
}

#[test]
fn every_transpose_rule_passes_the_dot_product_test() {
    let mut failures = Vec::new();
    let mut rng = Rng(0x2545f4914f6cdd1d);
    let ps = programs();
    for p in &ps {
        let j = &p.jaxpr;
        let avals = j.in_avals();
        let xs: Vec<Array> = avals.iter().zip(&p.dists).map(|(a, d)| rng.array(a, *d)).collect();
        let lin = linearize(j).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        let fwd = eval_jaxpr(&lin.primal, &[], &xs).unwrap();
        let res = &fwd[j.outvars.len()..];
        let tan_avals: Vec<Aval> = avals.iter().filter(|a| a.dtype.is_float()).cloned().collect();
        let ts: Vec<Array> = tan_avals.iter().map(|a| rng.array(a, Dist::Normal)).collect();
        let mut args = res.to_vec();
        args.extend(ts.iter().cloned());
        let jt = eval_jaxpr(&lin.tangent, &[], &args).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        let cts: Vec<Array> = jt.iter().map(|y| rng.array(&y.aval(), Dist::Normal)).collect();
        let mut linear = vec![false; lin.num_res];
        linear.extend(vec![true; ts.len()]);
        let t = transpose_jaxpr(&lin.tangent, &linear).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        let mut targs = res.to_vec();
        targs.extend(cts.iter().cloned());
        let jtct = eval_jaxpr(&t.jaxpr, &[], &targs).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        let dotp = |a: &[Array], b: &[Array]| -> f64 {
            a.iter().zip(b).map(|(x, y)| values(x).iter().zip(values(y)).map(|(p, q)| p * q).sum::<f64>()).sum()
        };
        let lhs = dotp(&cts, &jt);
        let rhs = dotp(&jtct, &ts);
        let tol = if p.name.contains("f32") { 1e-6 } else { 1e-9 };
        if !within(lhs, rhs, tol, tol) {
            failures.push(format!("{}: <ct, J t> = {lhs} but <J^T ct, t> = {rhs}", p.name));
        }
    }
    assert!(failures.is_empty(), "{} of {} programs:\n{}", failures.len(), ps.len(), failures.join("\n"));
}

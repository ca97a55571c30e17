//! `remat_trace::lax` against JAX itself: each case of `tests/data/lax_oracle.json`
//! (recorded by `gen_lax.py` from JAX 0.10.2) has a Rust twin here of the same name. The
//! twin's traced jaxpr must print as JAX's, character for character, evaluate with the
//! interpreter to JAX's outputs, and (where JAX differentiates it) have JAX's gradient of
//! the output's sum, through remat-ad's `grad`, within rel 1e-4 / abs 1e-5.

mod oracle;

use oracle::{check_oracle, p, Program};

use std::collections::BTreeMap;

use remat_ir::{Aval, DType, RngAlgorithm};
use remat_trace::lax::{
    self, ConvOptions, FillValue, GatherDimensionNumbers, GatherOptions, GatherScatterMode, Padding,
    ScatterDimensionNumbers, ScatterOptions,
};
use remat_trace::linalg::{self, TriangularSolve};
use remat_trace::{make_jaxpr, numpy, Arg, Tensor};

type Branch = dyn Fn(Tensor) -> Tensor;

fn nhwc() -> ConvOptions {
    ConvOptions::default().dimension_numbers("NHWC", "HWIO", "NHWC")
}

/// `ab + a + b`: the generic `reduce`'s combiner of the `reduce_generic` case.
fn odot(a: &[Tensor], b: &[Tensor]) -> Vec<Tensor> {
    vec![&(&(&a[0] * &b[0]) + &a[0]) + &b[0]]
}

/// The larger value with its payload: the `reduce_generic_pair` case's combiner.
fn pair(a: &[Tensor], b: &[Tensor]) -> Vec<Tensor> {
    let p = a[0].gt(&b[0]);
    vec![lax::select_n(&p, &[&b[0], &a[0]]), lax::select_n(&p, &[&b[1], &a[1]])]
}

/// The Rust twin of each oracle case.
fn programs() -> BTreeMap<&'static str, Program> {
    let mut m: BTreeMap<&'static str, Program> = BTreeMap::new();
    let mut add = |name: &'static str, f: Program| {
        assert!(m.insert(name, f).is_none(), "{name} twice");
    };
    add(
        "conv_nchw_valid",
        p(|a| lax::conv_general_dilated(&a[0], &a[1], &[1, 1], Padding::Valid, ConvOptions::default())),
    );
    add("conv_nhwc_same_stride2", p(|a| lax::conv_general_dilated(&a[0], &a[1], &[2, 2], Padding::Same, nhwc())));
    add("conv_same_lower", p(|a| lax::conv_general_dilated(&a[0], &a[1], &[2, 2], Padding::SameLower, nhwc())));
    add(
        "conv_explicit_dilated",
        p(|a| {
            let options =
                ConvOptions { lhs_dilation: Some(vec![2, 2]), rhs_dilation: Some(vec![1, 2]), ..Default::default() };
            lax::conv_general_dilated(&a[0], &a[1], &[1, 1], Padding::Explicit(vec![(1, 2), (0, 1)]), options)
        }),
    );
    add(
        "conv_depthwise",
        p(|a| {
            let options = ConvOptions { feature_group_count: 3, ..nhwc() };
            lax::conv_general_dilated(&a[0], &a[1], &[1, 1], Padding::Same, options)
        }),
    );
    add(
        "conv_1d_nwc",
        p(|a| {
            let options = ConvOptions::default().dimension_numbers("NWC", "WIO", "NWC");
            lax::conv_general_dilated(&a[0], &a[1], &[1], Padding::Same, options)
        }),
    );
    add("conv_helper", p(|a| lax::conv(&a[0], &a[1], &[1, 1], Padding::Same)));
    add(
        "conv_transpose_same_kernel",
        p(|a| {
            let options = lax::ConvTransposeOptions { transpose_kernel: true, ..Default::default() };
            lax::conv_transpose(&a[0], &a[1], &[2, 2], Padding::Same, options)
        }),
    );
    add("conv_transpose_valid", p(|a| lax::conv_transpose(&a[0], &a[1], &[2, 2], Padding::Valid, Default::default())));
    add(
        "conv_transpose_explicit",
        p(|a| lax::conv_transpose(&a[0], &a[1], &[2], Padding::Explicit(vec![(1, 2)]), Default::default())),
    );
    add(
        "conv_transpose_consistent_dilated",
        p(|a| {
            let options = lax::ConvTransposeOptions {
                rhs_dilation: Some(vec![1, 2]),
                dimension_numbers: Some(("NCHW".into(), "OIHW".into(), "NCHW".into())),
                use_consistent_padding: true,
                ..Default::default()
            };
            lax::conv_transpose(&a[0], &a[1], &[2, 1], Padding::Explicit(vec![(1, 1), (0, 1)]), options)
        }),
    );
    add("reduce_window_max_valid", p(|a| lax::reduce_window_max(&a[0], &[1, 2, 2, 1], &[1, 2, 2, 1], Padding::Valid)));
    add("reduce_window_sum_same", p(|a| lax::reduce_window_sum(&a[0], &[1, 3, 3, 1], &[1, 2, 2, 1], Padding::Same)));
    add("reduce_window_min", p(|a| lax::reduce_window_min(&a[0], &[2, 2], &[1, 1], Padding::Valid)));
    add("max_pool", p(|a| lax::max_pool(&a[0], &[2, 2], Some(&[2, 2]), Padding::Valid)));
    add("avg_pool", p(|a| lax::avg_pool(&a[0], &[2, 2], Some(&[2, 2]), Padding::Valid)));
    add("sum_pool_same", p(|a| lax::sum_pool(&a[0], &[3, 3], None, Padding::Same)));
    for name in ["cond", "cond_false"] {
        add(name, p(|a| lax::cond(&a[0], |x: Tensor| x.sin(), |x: Tensor| x.cos(), a[1].clone())));
    }
    add(
        "cond_capture",
        p(|a| {
            let (y, z) = (a[2].clone(), a[3].clone());
            lax::cond(&a[0].gt(0.0), |x: Tensor| &x * &y, |x: Tensor| &x + &(&y * &z), a[1].clone())
        }),
    );
    for name in ["switch", "switch_clamped"] {
        add(
            name,
            p(|a| {
                let (s, c, d): (&Branch, &Branch, &Branch) = (&|x| x.sin(), &|x| x.cos(), &|x| x * 2.0);
                lax::switch(&a[0], [s, c, d], a[1].clone())
            }),
        );
    }
    add(
        "while",
        p(|a| {
            let (_, x) = lax::while_loop(
                |(i, _): (Tensor, Tensor)| i.lt(10),
                |(i, x): (Tensor, Tensor)| (i + 1, x * 1.5),
                (a[0].clone(), a[1].clone()),
            );
            x
        }),
    );
    add(
        "while_consts",
        p(|a| {
            let y = a[1].clone();
            lax::while_loop(|c: Tensor| c.sum().lt(&y), |c: Tensor| c * 2.0 + &y, a[0].clone())
        }),
    );
    add("fori_static", p(|a| lax::fori_loop(0, 5, |i, c: Tensor| c * 1.5 + i, a[0].clone())));
    add("fori_dynamic", p(|a| lax::fori_loop(0, &a[0], |i, c: Tensor| c * 1.5 + i, a[1].clone())));
    add("stop_gradient", p(|a| &a[0] * lax::stop_gradient(&a[0])));
    add("dynamic_slice", p(|a| lax::dynamic_slice(&a[0], &[Arg::from(&a[1]), 1.into()], &[2, 2])));
    add(
        "map",
        p(|a| {
            let w = a[1].clone();
            lax::map(|x: Tensor| x.sin().matmul(&w), a[0].clone())
        }),
    );
    add("map_tuple", p(|a| lax::map(|(x, y): (Tensor, Tensor)| x * y.sum(), (a[0].clone(), a[1].clone()))));
    add("cummax", p(|a| lax::cummax(&a[0], 1, false)));
    add("cummin_reverse", p(|a| lax::cummin(&a[0], 0, true)));
    add("cumlogsumexp", p(|a| lax::cumlogsumexp(&a[0], 0, false)));
    add(
        "while_literal_carry",
        p(|a| {
            let cond = |(_, i): (Tensor, Tensor)| i.lt(5);
            let body = |(x, i): (Tensor, Tensor)| (x * 1.5, i + 1);
            lax::while_loop(cond, body, (a[0].clone(), numpy::int32(0))).0
        }),
    );
    add(
        "while_literal_float",
        p(|a| {
            let cond = |(x, limit): (Tensor, Tensor)| x.sum().lt(&limit);
            let body = |(x, limit): (Tensor, Tensor)| (x * 2.0, limit);
            lax::while_loop(cond, body, (a[0].clone(), numpy::float32(40.0))).0
        }),
    );
    let rows = || GatherDimensionNumbers {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        operand_batching_dims: vec![],
        start_indices_batching_dims: vec![],
    };
    let gdn = |offset: &[usize], collapsed: &[usize], map: &[usize]| GatherDimensionNumbers {
        offset_dims: offset.to_vec(),
        collapsed_slice_dims: collapsed.to_vec(),
        start_index_map: map.to_vec(),
        operand_batching_dims: vec![],
        start_indices_batching_dims: vec![],
    };
    let srows = || ScatterDimensionNumbers {
        update_window_dims: vec![1],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        operand_batching_dims: vec![],
        scatter_indices_batching_dims: vec![],
    };
    add("gather_rows", p(move |a| lax::gather(&a[0], &a[1], rows(), &[1, 6], GatherOptions::default())));
    add(
        "gather_clip_sorted",
        p(move |a| {
            let options =
                GatherOptions { mode: Some(GatherScatterMode::Clip), indices_are_sorted: true, ..Default::default() };
            lax::gather(&a[0], &a[1], rows(), &[1, 6], options)
        }),
    );
    add(
        "gather_fill",
        p(move |a| {
            let options = GatherOptions {
                mode: Some(GatherScatterMode::FillOrDrop),
                fill_value: Some(FillValue::Float(-1.0)),
                ..Default::default()
            };
            lax::gather(&a[0], &a[1], rows(), &[1, 6], options)
        }),
    );
    add(
        "gather_2d_windows",
        p(move |a| lax::gather(&a[0], &a[1], gdn(&[1, 2], &[], &[0, 1]), &[2, 3], GatherOptions::default())),
    );
    add(
        "gather_points",
        p(move |a| {
            let options = GatherOptions { unique_indices: true, ..Default::default() };
            lax::gather(&a[0], &a[1], gdn(&[], &[0, 1], &[1, 0]), &[1, 1], options)
        }),
    );
    add(
        "gather_batched",
        p(move |a| {
            let dn = GatherDimensionNumbers {
                operand_batching_dims: vec![0],
                start_indices_batching_dims: vec![0],
                ..gdn(&[1], &[1], &[1])
            };
            lax::gather(&a[0], &a[1], dn, &[1, 1, 4], GatherOptions::default())
        }),
    );
    add("scatter_add_rows", p(move |a| lax::scatter_add(&a[0], &a[1], &a[2], srows(), ScatterOptions::default())));
    add(
        "scatter_set_rows",
        p(move |a| {
            let options = ScatterOptions { unique_indices: true, ..Default::default() };
            lax::scatter(&a[0], &a[1], &a[2], srows(), options)
        }),
    );
    add(
        "scatter_mul_drop",
        p(move |a| {
            let options = ScatterOptions {
                mode: Some(GatherScatterMode::FillOrDrop),
                unique_indices: true,
                ..Default::default()
            };
            lax::scatter_mul(&a[0], &a[1], &a[2], srows(), options)
        }),
    );
    add(
        "scatter_min_max",
        p(move |a| {
            let low = lax::scatter_min(&a[0], &a[1], &a[2], srows(), ScatterOptions::default());
            lax::scatter_max(&low, &a[1], &(&a[2] * 2.0), srows(), ScatterOptions::default())
        }),
    );
    add(
        "scatter_add_points_clip",
        p(|a| {
            let dn = ScatterDimensionNumbers {
                update_window_dims: vec![],
                inserted_window_dims: vec![0, 1],
                scatter_dims_to_operand_dims: vec![0, 1],
                operand_batching_dims: vec![],
                scatter_indices_batching_dims: vec![],
            };
            let options =
                ScatterOptions { mode: Some(GatherScatterMode::Clip), indices_are_sorted: true, ..Default::default() };
            lax::scatter_add(&a[0], &a[1], &a[2], dn, options)
        }),
    );
    add("sort_two_operands", Box::new(|a| lax::sort(&[&a[0], &a[1]], 0, true, 1)));
    add("sort_two_keys_unstable", Box::new(|a| lax::sort(&[&a[0], &a[1]], 1, false, 2)));
    add("sort_one", p(|a| lax::sort(&[&a[0]], 0, true, 1).remove(0)));
    add("select_n_bool", p(|a| lax::select_n(&a[0], &[&a[1], &a[2]])));
    add("select_n_three", p(|a| lax::select_n(&a[0], &[&a[1], &a[2], &a[3]])));
    add("reduce_prod_axis", p(|a| lax::reduce_prod(&a[0], &[1])));
    add(
        "reduce_and_or_xor",
        Box::new(|a| vec![lax::reduce_and(&a[0], &[0]), lax::reduce_or(&a[0], &[1]), lax::reduce_xor(&a[0], &[0, 1])]),
    );
    add("population_count_clz", p(|a| lax::population_count(&a[0]) + lax::clz(&a[0])));
    add("mulhi", p(|a| lax::mulhi(&a[0], &a[1])));
    add("optimization_barrier", Box::new(|a| lax::optimization_barrier(&[&a[0].sin(), &a[1]])));
    add("bessel_i0e_i1e", p(|a| lax::bessel_i0e(&a[0]) * lax::bessel_i1e(&a[0])));
    add("igamma_igammac", p(|a| lax::igamma(&a[0], &a[1]) + lax::igammac(&a[1], &a[0])));
    add("betainc", p(|a| lax::betainc(&a[0], &a[1], &a[2])));
    add("igamma_grad_a_zeta", p(|a| lax::igamma_grad_a(&a[0], &a[1]) + lax::zeta(&a[0] + 1.5, &a[1])));
    add(
        "complex_parts",
        p(|a| {
            let (x, y) = (&a[0], &a[1]);
            lax::real(&(lax::complex(x, y) * lax::complex(y, x)))
                + lax::imag(&(lax::conj(&lax::complex(x, y)) * lax::complex(x, x)))
        }),
    );
    add(
        "reduce_generic",
        p(|a| {
            let x = &a[0] * 0.25;
            let s = lax::reduce(&[&x], &[0.0], odot, &[1]).remove(0);
            s + lax::reduce(&[&a[1].tanh()], &[0.0], odot, &[0, 2]).remove(0)
        }),
    );
    add(
        "reduce_generic_pair",
        p(|a| {
            let r = lax::reduce(&[&a[0], &a[1]], &[f64::NEG_INFINITY, 0.0], pair, &[1]);
            &r[0] * &r[1]
        }),
    );
    add(
        "rng_bit_generator",
        p(|a| {
            let key = &(&numpy::arange(4, DType::U32) * numpy::uint32(0x9E3779B9)) + numpy::uint32(7);
            let (k1, bits) = lax::rng_bit_generator(&key, &[2, 3], DType::U32, RngAlgorithm::Default);
            let (_, small) = lax::rng_bit_generator(&k1, &[2, 3], DType::U8, RngAlgorithm::ThreeFry);
            &a[0] * bits.astype(DType::F32) + small.astype(DType::F32)
        }),
    );
    add(
        "approx_top_k",
        p(|a| {
            let (v, i) = lax::approx_max_k(&a[0], 3, -1, 0.95);
            let (w, j) = lax::approx_min_k(&a[1].sin(), 2, 0, 0.9);
            (&v * &v).sum() + (&w * j.astype(DType::F32)).sum() + i.astype(DType::F32).sum()
        }),
    );
    add("linalg_cholesky", p(|a| linalg::cholesky(&(a[0].matmul(&a[0].t()) + 3.0), true)));
    add(
        "linalg_cholesky_batched",
        p(|a| {
            let s = numpy::einsum("bij,bkj->bik", &[&a[0], &a[0]]) + 3.0;
            linalg::cholesky(&s, false)
        }),
    );
    let lower_t =
        TriangularSolve { left_side: false, lower: true, transpose_a: true, conjugate_a: false, unit_diagonal: false };
    add("linalg_triangular_solve", p(move |a| linalg::triangular_solve(&(&a[0] + 4.0), &a[1], lower_t)));
    add("linalg_lu_factors", p(|a| linalg::lu(&a[0]).0));
    add(
        "linalg_lu_all",
        Box::new(|a| {
            let (lu, pivots, perm) = linalg::lu(&a[0]);
            let again = linalg::lu_pivots_to_permutation(&pivots, 4);
            vec![lu, pivots, perm, again]
        }),
    );
    add(
        "linalg_qr",
        p(|a| {
            let (q, r) = linalg::qr(&a[0], false);
            q.sin().matmul(&r)
        }),
    );
    add("linalg_eigh_eigenvalues", p(|a| linalg::eigh(&a[0], true, true).1));
    add("linalg_svd_values", p(|a| linalg::singular_values(&a[0])));
    add(
        "linalg_svd_polar",
        p(|a| {
            let (u, s, vt) = linalg::svd(&a[0], false);
            u.matmul(&vt).sin() * s.sum()
        }),
    );
    add(
        "linalg_geqrf_householder_product",
        p(|a| {
            let (f, taus) = linalg::geqrf(&a[0]);
            linalg::householder_product(&f, &taus) + f
        }),
    );
    add(
        "linalg_ormqr",
        p(|a| {
            let (f, taus) = linalg::geqrf(&a[0]);
            let left = linalg::ormqr(&f, &taus, &a[1], true, true);
            let right = linalg::ormqr(&f, &taus, &a[1].t(), false, false);
            left + right.t()
        }),
    );
    add("linalg_tridiagonal_solve", p(|a| linalg::tridiagonal_solve(&a[0], &a[1], &a[2], &a[3])));
    add(
        "linalg_symmetric_product",
        p(|a| linalg::symmetric_product(&a[0], &a[1], FillValue::Float(2.0), FillValue::Int(3))),
    );
    m
}

#[test]
fn every_lax_case_prints_evaluates_and_differentiates_as_jax_does() {
    check_oracle("lax_oracle.json", &programs());
}

#[test]
fn reverse_mode_through_a_while_loop_is_jax_error() {
    let traced = make_jaxpr(
        |x: Tensor| lax::while_loop(|c: Tensor| c.sum().lt(10.0), |c: Tensor| c * 2.0, x).sum(),
        &Aval::new(DType::F32, vec![3]),
    )
    .unwrap();
    let e = remat_ad::grad(&traced.jaxpr.jaxpr, &[0]).expect_err("while is forward-only").to_string();
    assert!(e.contains("Reverse-mode differentiation does not work for lax.while_loop"), "{e}");
}

#[test]
fn differentiating_symmetric_product_is_jax_error() {
    let a = Aval::new(DType::F32, vec![3, 2]);
    let c = Aval::new(DType::F32, vec![3, 3]);
    let traced = make_jaxpr(
        |(a, c): (Tensor, Tensor)| {
            linalg::symmetric_product(&a, &c, FillValue::Float(1.0), FillValue::Float(0.0)).sum()
        },
        &(a, c),
    )
    .unwrap();
    let e = remat_ad::grad(&traced.jaxpr.jaxpr, &[0]).expect_err("JAX defines no jvp").to_string();
    assert!(e.contains("Differentiation rule for 'symmetric_product' not implemented"), "{e}");
}

#[test]
fn differentiating_geqrf_householder_product_and_a_full_wide_svd_is_jax_error() {
    let x = Aval::new(DType::F32, vec![4, 3]);
    let grad_error = |f: fn(Tensor) -> Tensor| {
        let traced = make_jaxpr(f, &x).unwrap();
        remat_ad::grad(&traced.jaxpr.jaxpr, &[0]).expect_err("JAX refuses").to_string()
    };
    let e = grad_error(|x| linalg::geqrf(&x).0.sum());
    assert!(e.contains("Differentiation rule for 'geqrf' not implemented"), "{e}");
    let e = grad_error(|x| {
        let (a, taus) = linalg::geqrf(&lax::stop_gradient(&x));
        linalg::householder_product(&(a * x), &taus).sum()
    });
    assert!(e.contains("Differentiation rule for 'householder_product' not implemented"), "{e}");
    let e = grad_error(|x| linalg::svd(&x, true).1.sum());
    assert!(e.contains("Singular value decomposition JVP not implemented for full matrices"), "{e}");
}

fn trace_error(f: impl FnOnce(Vec<Tensor>) -> Tensor, avals: Vec<Aval>) -> String {
    let e = make_jaxpr(f, &avals).map(|t| t.to_string()).expect_err("a tracing error").to_string();
    // Every error is located at the user's call, not inside the library.
    assert!(e.starts_with("crates/trace/tests/lax.rs:"), "{e}");
    e
}

#[test]
fn wrong_inputs_are_located_errors() {
    let f32s = |s: &[usize]| Aval::new(DType::F32, s.to_vec());
    let i32s = |s: &[usize]| Aval::new(DType::I32, s.to_vec());
    let e = trace_error(|a| lax::sort(&[&a[0], &a[0]], 0, true, 3).remove(0), vec![f32s(&[4])]);
    assert!(e.ends_with("sort: num_keys 3 must be between 1 and the 2 operands"), "{e}");
    let e = trace_error(|a| lax::sort(&[&a[0]], 2, true, 1).remove(0), vec![f32s(&[4, 2])]);
    assert!(e.ends_with("sort: dimension 2 is out of bounds for f32[4,2]"), "{e}");
    let e = trace_error(|a| lax::select_n(&a[0], &[&a[0], &a[0]]), vec![f32s(&[4])]);
    assert!(e.starts_with("crates/trace/tests/lax.rs:") && e.contains("select_n"), "{e}");
    // A slice larger than the operand, a collapsed axis whose slice is not 1, an update
    // window wider than the operand: each the shape rule's words, at the caller's line.
    let rows = |collapsed: usize| GatherDimensionNumbers {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![collapsed],
        start_index_map: vec![0],
        operand_batching_dims: vec![],
        start_indices_batching_dims: vec![],
    };
    for (dn, sizes) in [(rows(0), [1, 7]), (rows(1), [1, 6])] {
        let e = trace_error(
            move |a| lax::gather(&a[0], &a[1], dn.clone(), &sizes, GatherOptions::default()),
            vec![f32s(&[4, 6]), i32s(&[3, 1])],
        );
        assert!(e.starts_with("crates/trace/tests/lax.rs:") && e.contains("gather"), "{e}");
    }
    let e = trace_error(
        |a| {
            let dn = ScatterDimensionNumbers {
                update_window_dims: vec![1],
                inserted_window_dims: vec![0],
                scatter_dims_to_operand_dims: vec![0],
                operand_batching_dims: vec![],
                scatter_indices_batching_dims: vec![],
            };
            lax::scatter_add(&a[0], &a[1], &a[2], dn, ScatterOptions::default())
        },
        vec![f32s(&[4, 6]), i32s(&[3, 1]), f32s(&[3, 7])],
    );
    assert!(e.starts_with("crates/trace/tests/lax.rs:") && e.contains("scatter-add"), "{e}");
    let e = trace_error(
        |a| {
            let options = ConvOptions { lhs_dilation: Some(vec![2, 2]), ..Default::default() };
            lax::conv_general_dilated(&a[0], &a[1], &[1, 1], Padding::Same, options)
        },
        vec![f32s(&[1, 3, 5, 5]), f32s(&[4, 3, 3, 3])],
    );
    assert!(
        e.starts_with("crates/trace/tests/lax.rs:")
            && e.contains("string padding is not implemented for transposed convolution"),
        "{e}"
    );
    let e = trace_error(
        |a| {
            lax::conv_general_dilated(
                &a[0],
                &a[1],
                &[1, 1],
                Padding::Valid,
                ConvOptions::default().dimension_numbers("NHWC", "HWIO", "NCHX"),
            )
        },
        vec![f32s(&[1, 5, 5, 3]), f32s(&[3, 3, 3, 4])],
    );
    assert!(
        e.contains("conv_general_dilated: dimension number \"NCHX\" must have the kernel's spatial letters"),
        "{e}"
    );
    let e = trace_error(
        |a| lax::conv(&a[0], &a[1], &[1, 1], Padding::Valid),
        vec![f32s(&[1, 3, 5, 5]), f32s(&[4, 2, 3, 3])],
    );
    assert!(e.contains("conv_general_dilated"), "{e}");
    let e = trace_error(
        |a| lax::conv_transpose(&a[0], &a[1], &[2], Padding::Same, Default::default()),
        vec![f32s(&[1, 4, 4, 3]), f32s(&[3, 3, 3, 5])],
    );
    assert!(
        e.starts_with("crates/trace/tests/lax.rs:")
            && e.contains(
                "conv_transpose: strides [2] and rhs_dilation [1, 1] must have one entry per spatial axis (2)"
            ),
        "{e}"
    );
    let e = trace_error(
        |a| {
            let options = lax::ConvTransposeOptions { use_consistent_padding: true, ..Default::default() };
            lax::conv_transpose(&a[0], &a[1], &[2, 2], Padding::SameLower, options)
        },
        vec![f32s(&[1, 4, 4, 3]), f32s(&[3, 3, 3, 5])],
    );
    assert!(e.contains("conv_transpose: SAME_LOWER is not a padding mode of a transposed convolution"), "{e}");
    let e = trace_error(
        |a| lax::conv_transpose(&a[0], &a[1], &[1, 1, 1, 1], Padding::Valid, Default::default()),
        vec![f32s(&[1, 2, 2, 2, 2, 2]), f32s(&[1, 1, 1, 1, 2, 2])],
    );
    assert!(e.contains("conv_transpose: no default dimension numbers for rank 6"), "{e}");
    let e = trace_error(|a| lax::max_pool(&a[0], &[2, 2], None, Padding::Valid), vec![f32s(&[5, 5])]);
    assert!(e.contains("reduce_window: window_dimensions [1, 2, 2, 1]"), "{e}");
    let e = trace_error(|a| lax::cond(&a[0], |x: Tensor| x.sin(), |x: Tensor| x.sum(), a[0].clone()), vec![f32s(&[3])]);
    assert!(e.ends_with("cond: the predicate must be a bool scalar, found f32[3]"), "{e}");
    let e = trace_error(
        |a| lax::cond(&a[0].sum().gt(0.0), |x: Tensor| x.sin(), |x: Tensor| x.sum(), a[0].clone()),
        vec![f32s(&[3])],
    );
    assert!(
        e.ends_with(
            "cond: branch 1 returns (f32[]) but branch 0 returns (f32[3]); every branch must return the same types"
        ),
        "{e}"
    );
    let e = trace_error(
        |a| lax::while_loop(|c: Tensor| c.sum().lt(1.0), |c: Tensor| c.sum(), a[0].clone()),
        vec![f32s(&[3])],
    );
    assert!(
        e.ends_with("while_loop: the body receives a carry (f32[3]) but returns (f32[]); a carry must keep its types"),
        "{e}"
    );
    let e = trace_error(|a| lax::fori_loop(0, 2.5, |_, c: Tensor| c, a[0].clone()), vec![f32s(&[3])]);
    assert!(e.ends_with("fori_loop: the bounds must be integer scalars, found the f32 scalar 2.5"), "{e}");
}

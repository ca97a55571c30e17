//! Convolutions and windowed reductions in the IR: the zoo's printed forms round-trip, and
//! malformed parameters or operands give located errors that say what is wrong (never a
//! panic).

const CONV_PARAMS: &str = "batch_group_count=1
      dimension_numbers=ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
      feature_group_count=1
      lhs_dilation=(1, 1)
      out_sharding=None
      padding=((1, 1), (1, 1))
      precision=None
      preferred_element_type=None
      rhs_dilation=(1, 1)
      window_strides=(1, 1)";

fn conv_text(params: &str, lhs: &str, rhs: &str, out: &str) -> String {
    format!("{{ lambda ; a:{lhs} b:{rhs}. let\n    c:{out} = conv_general_dilated[\n      {params}\n    ] a b\n  in (c,) }}")
}

const POOL: &str = "{ lambda ; a:f32[4,8,8,8]. let
    b:f32[4,4,4,8] = reduce_window_max[
      base_dilation=(1, 1, 1, 1)
      padding=((0, 0), (0, 0), (0, 0), (0, 0))
      window_dilation=(1, 1, 1, 1)
      window_dimensions=(1, 2, 2, 1)
      window_strides=(1, 2, 2, 1)
    ] a
    c:f32[4,8,8,8] = select_and_scatter_add[
      padding=((0, 0), (0, 0), (0, 0), (0, 0))
      select_prim=ge
      window_dimensions=(1, 2, 2, 1)
      window_strides=(1, 2, 2, 1)
    ] b a
    d:f32[4,4,4,8] = select_and_gather_add[
      base_dilation=(1, 1, 1, 1)
      padding=((0, 0), (0, 0), (0, 0), (0, 0))
      select_prim=ge
      window_dilation=(1, 1, 1, 1)
      window_dimensions=(1, 2, 2, 1)
      window_strides=(1, 2, 2, 1)
    ] c a
    e:f32[4,3,3,8] = reduce_window_sum[
      base_dilation=(1, 2, 1, 1)
      padding=((0, 0), (1, -1), (0, 0), (0, 0))
      window_dilation=(1, 1, 2, 1)
      window_dimensions=(1, 2, 2, 1)
      window_strides=(1, 5, 2, 1)
    ] a
  in (d, e) }";

fn parse(text: &str) -> Result<remat_ir::Jaxpr, String> {
    remat_ir::parse_jaxpr(text, "w.jaxpr").map_err(|e| e.to_string())
}

fn verified(text: &str) -> Result<remat_ir::Jaxpr, String> {
    let j = parse(text)?;
    remat_ir::verify(&j).map_err(|e| e.to_string())?;
    Ok(j)
}

#[test]
fn printed_forms_round_trip() {
    let conv = conv_text(CONV_PARAMS, "f32[4,8,8,3]", "f32[3,3,3,8]", "f32[4,8,8,8]");
    for text in [conv.as_str(), POOL] {
        let j = verified(text).unwrap();
        assert_eq!(remat_ir::pp_jaxpr(&j), text);
    }
}

#[test]
fn malformed_parameters_are_located_errors() {
    let cases = [
        ("padding=((1, 1), (1, 1))", "padding=((1, 1), 1)", "`padding` must be a tuple of (low, high) pairs"),
        ("window_strides=(1, 1)", "window_strides=(0, 1)", "`window_strides` must be positive"),
        ("feature_group_count=1", "feature_group_count=0", "feature_group_count must be positive"),
        ("precision=None", "precision=3", "precision must be None, a Precision or a pair"),
        ("lhs_spec=(0, 3, 1, 2), ", "", "dimension_numbers must be ConvDimensionNumbers"),
        ("preferred_element_type=None", "preferred_element_type=float7", "unsupported dtype `float7`"),
        ("out_sharding=None", "out_sharding=1", "out_sharding: expected a sharding (NamedSharding"),
    ];
    for (from, to, want) in cases {
        let text = conv_text(&CONV_PARAMS.replace(from, to), "f32[4,8,8,3]", "f32[3,3,3,8]", "f32[4,8,8,8]");
        let err = parse(&text).expect_err(to);
        assert!(err.contains(want) && err.contains("line 2"), "{to}: {err}");
    }
    let bad_select = POOL.replace("select_prim=ge\n      window_dilation", "select_prim=max\n      window_dilation");
    let err = parse(&bad_select).expect_err("select_prim=max");
    assert!(err.contains("select_prim must be a comparison"), "{err}");
    let missing = POOL.replace("      window_dilation=(1, 1, 2, 1)\n", "");
    assert!(parse(&missing).expect_err("missing").contains("missing parameter `window_dilation`"));
}

#[test]
fn ill_typed_operands_are_verifier_errors() {
    let cases = [
        // Groups that do not divide the features.
        (
            CONV_PARAMS.replace("feature_group_count=1", "feature_group_count=2"),
            "f32[4,8,8,3]",
            "f32[3,3,3,8]",
            "not a multiple of feature_group_count 2",
        ),
        // Both group counts above 1.
        (
            CONV_PARAMS
                .replace("feature_group_count=1", "feature_group_count=2")
                .replace("batch_group_count=1", "batch_group_count=2"),
            "f32[4,8,8,4]",
            "f32[3,3,2,8]",
            "cannot both exceed 1",
        ),
        // A spec that is not a permutation.
        (
            CONV_PARAMS.replace("out_spec=(0, 3, 1, 2)", "out_spec=(0, 3, 1, 1)"),
            "f32[4,8,8,3]",
            "f32[3,3,3,8]",
            "is not a permutation",
        ),
        // One spatial entry too few.
        (
            CONV_PARAMS.replace("lhs_dilation=(1, 1)", "lhs_dilation=(1,)"),
            "f32[4,8,8,3]",
            "f32[3,3,3,8]",
            "lhs_dilation has 1 entries for 2 spatial axes",
        ),
        // Mixed dtypes, and bools.
        (CONV_PARAMS.to_string(), "f32[4,8,8,3]", "f64[3,3,3,8]", "operand dtypes differ"),
        (CONV_PARAMS.to_string(), "bool[4,8,8,3]", "bool[3,3,3,8]", "operands must be numbers"),
        // Feature sizes that do not match.
        (CONV_PARAMS.to_string(), "f32[4,8,8,5]", "f32[3,3,3,8]", "must equal the rhs input feature dimension"),
    ];
    for (params, lhs, rhs, want) in cases {
        let err = verified(&conv_text(&params, lhs, rhs, "f32[4,8,8,8]")).expect_err(want);
        assert!(err.contains(want) && err.contains("conv_general_dilated"), "{want}: {err}");
    }
    // A window with too few entries, a source of the wrong shape, and negative padding in a
    // selection.
    let short = POOL.replace(
        "window_dimensions=(1, 2, 2, 1)\n      window_strides=(1, 2, 2, 1)\n    ] a\n    c",
        "window_dimensions=(1, 2, 2)\n      window_strides=(1, 2, 2, 1)\n    ] a\n    c",
    );
    assert!(verified(&short).expect_err("short").contains("window_dimensions has 3 entries for 4 operand axes"));
    let bad_source = POOL.replace("] b a", "] a a");
    assert!(verified(&bad_source).expect_err("source").contains("must have the shape of the windows"));
    let negative = POOL.replacen(
        "padding=((0, 0), (0, 0), (0, 0), (0, 0))\n      select_prim=ge\n      window_dimensions",
        "padding=((0, 0), (-1, 0), (0, 0), (0, 0))\n      select_prim=ge\n      window_dimensions",
        1,
    );
    assert!(verified(&negative).expect_err("negative").contains("must not be negative"));
}

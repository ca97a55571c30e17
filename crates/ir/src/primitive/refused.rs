//! The primitives JAX 0.10.2 defines that remat does not take, each with the reason the
//! parser gives. A name here is never "unknown": the parser says that JAX defines it and why
//! remat refuses it ([`refusal`]). The coverage table in docs/ir.md lists every name of
//! JAX's registry (`tests/data/registry`) as working (a [`PrimitiveKind`](super::PrimitiveKind))
//! or refused for one of these reasons, and a test keeps the three in step.

/// Why remat refuses a primitive JAX defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Shardings, `shard_map` and collectives: programs over a mesh of devices.
    Sharded,
    /// A call back into Python.
    PythonCallback,
    /// A call of native code registered with XLA.
    ForeignCall,
    /// A kernel that only accelerators run (cuDNN fusions and attention, fp8 scaled matmuls).
    Accelerator,
    /// JAX's mutable references and boxes (`jax.new_ref`, `run_state`, hijax boxes).
    State,
    /// Shape polymorphism and `jax.export`: symbolic dimensions and exported modules.
    ShapePolymorphism,
    /// Tokens, checkify's checks and the other primitives JAX's own transformations make and
    /// remove before a program is printed or lowered.
    Internal,
    /// Random values drawn from a generator state that lives in XLA's process, not in the
    /// program: the same program gives other values on each call.
    HiddenState,
    /// A primitive remat is meant to take (issue 45's list) but does not take yet.
    NotYet,
}

impl Refusal {
    /// What the parser says after the name.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Sharded => {
                "a sharding or collective primitive remat does not take yet (it reads jit with shardings, \
                 sharding_constraint, reshard, shard_map and psum, pmax, pmin, pvary, all_gather, reduce_scatter, \
                 ppermute, axis_index, pbroadcast)"
            }
            Refusal::PythonCallback => "it calls back into Python, which remat cannot run",
            Refusal::ForeignCall => "it calls native code registered with XLA, which remat cannot call",
            Refusal::Accelerator => "an accelerator-only kernel (GPU or TPU): JAX's CPU backend does not run it either",
            Refusal::State => {
                "a mutable reference or box: remat's programs are pure (JAX discharges them with `run_state`)"
            }
            Refusal::ShapePolymorphism => "shape polymorphism: remat's shapes are static",
            Refusal::Internal => "internal to JAX's transformations: it does not appear in a program JAX runs",
            Refusal::HiddenState => {
                "its random values come from a generator state hidden in XLA's process (each call gives other values), which the text does not carry"
            }
            Refusal::NotYet => "remat does not implement it yet",
        }
    }

    /// The reason's short name in docs/ir.md's coverage table.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Sharded => "sharded",
            Refusal::PythonCallback => "Python callback",
            Refusal::ForeignCall => "foreign call",
            Refusal::Accelerator => "accelerator",
            Refusal::State => "state",
            Refusal::ShapePolymorphism => "shape polymorphism",
            Refusal::Internal => "internal",
            Refusal::HiddenState => "hidden state",
            Refusal::NotYet => "not yet",
        }
    }

    /// Every reason, in the order the coverage table lists them.
    pub const ALL: [Refusal; 9] = [
        Refusal::NotYet,
        Refusal::Sharded,
        Refusal::PythonCallback,
        Refusal::ForeignCall,
        Refusal::Accelerator,
        Refusal::State,
        Refusal::ShapePolymorphism,
        Refusal::Internal,
        Refusal::HiddenState,
    ];

    /// The names refused for this reason.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Refusal::Sharded => &[
                "all_gather_done",
                "all_gather_reduced",
                "all_gather_reduced_start",
                "all_gather_start",
                "all_to_all_done",
                "all_to_all_start",
                "custom_partitioning",
                "inspect_sharding",
                "layout_constraint",
                "pbroadcast_done",
                "pbroadcast_start",
                "ppermute_done",
                "ppermute_start",
                "precv",
                "preduced",
                "psend",
                "psum_done",
                "psum_invariant_start",
                "psum_start",
                "ragged_all_to_all",
                "reduce_scatter_done",
                "reduce_scatter_start",
                "reduced_vary_cast_p",
                "unreduced_psum",
                "unreduced_psum_start",
                "unreduced_reduce_scatter",
                "unreduced_reduce_scatter_start",
                "vary_unreduced_cast_p",
            ],
            Refusal::PythonCallback => {
                &["buffer_callback", "debug_callback", "debug_print", "io_callback", "pure_callback"]
            }
            Refusal::ForeignCall => &["ffi_call"],
            Refusal::Accelerator => &[
                "cudnn_fusion",
                "dot_product_attention_bwd",
                "dot_product_attention_bwd_wrapper",
                "dot_product_attention_fp8_bwd",
                "dot_product_attention_fp8_bwd_wrapper",
                "dot_product_attention_fp8_fwd",
                "dot_product_attention_fp8_fwd_wrapper",
                "dot_product_attention_fwd",
                "dot_product_attention_fwd_wrapper",
                "scaled_matmul",
                "scaled_matmul_wrapper",
            ],
            Refusal::State => &[
                "accum_grad_in_ref",
                "addupdate",
                "box_get",
                "box_set",
                "broadcast_to",
                "create_linear",
                "empty_ref",
                "free_ref",
                "freeze",
                "get",
                "log_extend",
                "log_read",
                "new_box",
                "new_log",
                "new_ref",
                "pin",
                "run_state",
                "swap",
                "unpin",
            ],
            Refusal::ShapePolymorphism => &["call_exported", "dim_as_value", "dimension_size", "shape_assertion"],
            Refusal::Internal => &[
                "after_all",
                "call_hi_primitive",
                "call_hi_primitive_linearized",
                "check",
                "create_token",
                "custom_jvp_call_jaxpr",
                "custom_lin",
                "dce_sink",
                "empty",
                "eval_jaxpr",
                "from_edtype",
                // Bound only by JAX's lowering of `select_and_scatter_add`
                // (`_select_and_scatter_add_impl`); `make_jaxpr` never prints it.
                "select_and_scatter",
                "stage",
                "tie",
                "to_edtype",
                "unreachable",
                "xla_metadata_value",
                "zeros_like",
            ],
            Refusal::HiddenState => &["rng_uniform"],
            Refusal::NotYet => &[
                "call",
                "cholesky_update",
                "compute_on",
                "custom_linear_solve",
                "custom_vmap_call",
                "eig",
                "geqp3",
                "hessenberg",
                "linear_call",
                "philox2x32",
                "philox4x32",
                "ragged_dot_general",
                "random_gamma",
                "remat_opt",
                "scaled_dot",
                "schur",
                "threefry4x32",
                "tridiagonal",
            ],
        }
    }
}

/// Why remat refuses `name`, if JAX defines a primitive of that name that remat does not take.
pub fn refusal(name: &str) -> Option<Refusal> {
    Refusal::ALL.into_iter().find(|r| r.names().contains(&name))
}

//! The closed set of primitives. Each variant carries its parameters; every rule over
//! primitives (shape rules, evaluation, jvp, transpose, lowering) is one exhaustive match.
//!
//! This file also says how each primitive's parameters are written in JAX's text form:
//! [`Primitive::params`] gives the `key=value` pairs in printing order (defaults JAX hides
//! are left out) and [`Primitive::from_params`] reads them back.

use std::fmt;
use std::sync::Arc;

use crate::jaxpr::{ClosedJaxpr, Jaxpr};
use crate::param::Param;
use crate::policy::Policy;
use crate::types::{Aval, DType, MemorySpace};

/// Elementwise functions of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Sign,
    Abs,
    Exp,
    Log,
    Log1p,
    Expm1,
    Sin,
    Cos,
    Tan,
    Tanh,
    Logistic,
    Sqrt,
    Rsqrt,
    Square,
    StopGradient,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 16] = [
        UnaryOp::Neg,
        UnaryOp::Sign,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Log1p,
        UnaryOp::Expm1,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tan,
        UnaryOp::Tanh,
        UnaryOp::Logistic,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Square,
        UnaryOp::StopGradient,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Sign => "sign",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Expm1 => "expm1",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tan => "tan",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Logistic => "logistic",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Square => "square",
            UnaryOp::StopGradient => "stop_gradient",
        }
    }

    /// Whether the operand must be a float (transcendentals) rather than any number.
    pub fn float_only(self) -> bool {
        match self {
            UnaryOp::Neg | UnaryOp::Sign | UnaryOp::Abs | UnaryOp::Square | UnaryOp::StopGradient => false,
            UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Expm1
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tan
            | UnaryOp::Tanh
            | UnaryOp::Logistic
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt => true,
        }
    }
}

/// Elementwise arithmetic of two operands of one dtype (a scalar operand broadcasts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    AddAny,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 8] = [
        BinaryOp::Add,
        BinaryOp::AddAny,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::AddAny => "add_any",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
        }
    }
}

/// Elementwise comparisons; the result is `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    pub const ALL: [CompareOp; 6] =
        [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge];

    pub fn name(self) -> &'static str {
        match self {
            CompareOp::Eq => "eq",
            CompareOp::Ne => "ne",
            CompareOp::Lt => "lt",
            CompareOp::Le => "le",
            CompareOp::Gt => "gt",
            CompareOp::Ge => "ge",
        }
    }
}

/// Reductions over a set of axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

impl ReduceOp {
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "reduce_sum",
            ReduceOp::Max => "reduce_max",
            ReduceOp::Min => "reduce_min",
        }
    }
}

/// `dot_general`'s `dimension_numbers=((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct DotDimensionNumbers {
    pub lhs_contracting: Vec<usize>,
    pub rhs_contracting: Vec<usize>,
    pub lhs_batch: Vec<usize>,
    pub rhs_batch: Vec<usize>,
}

/// `device_put`'s `copy_semantics` entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopySemantics {
    AlwaysCopy,
    ReuseInput,
    DonateInput,
}

impl CopySemantics {
    fn param_name(self) -> &'static str {
        match self {
            CopySemantics::AlwaysCopy => "ArrayCopySemantics.ALWAYS_COPY",
            CopySemantics::ReuseInput => "ArrayCopySemantics.REUSE_INPUT",
            CopySemantics::DonateInput => "ArrayCopySemantics.DONATE_INPUT",
        }
    }
}

/// A primitive with its parameters.
#[derive(Clone, Debug)]
pub enum Primitive {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CompareOp),
    IntegerPow {
        y: i32,
    },
    /// `select_n pred case0 case1 ...`: picks `cases[pred]` elementwise.
    SelectN,
    /// `clamp lo x hi`.
    Clamp,
    ConvertElementType {
        new_dtype: DType,
        weak_type: bool,
    },
    /// Rounds floats to `exponent_bits`/`mantissa_bits`; an identity at f32's own 8/23.
    ReducePrecision {
        exponent_bits: u32,
        mantissa_bits: u32,
    },
    /// `shape` is not printed (the binder's aval gives it).
    BroadcastInDim {
        shape: Vec<usize>,
        broadcast_dimensions: Vec<usize>,
    },
    Reshape {
        new_sizes: Vec<usize>,
    },
    Transpose {
        permutation: Vec<usize>,
    },
    Squeeze {
        dimensions: Vec<usize>,
    },
    /// Inserts size-1 axes at `dimensions` (positions in the output).
    ExpandDims {
        dimensions: Vec<usize>,
    },
    Slice {
        start_indices: Vec<usize>,
        limit_indices: Vec<usize>,
        strides: Option<Vec<usize>>,
    },
    /// `pad operand padding_value`; each entry is (low, high, interior), low/high may be negative.
    Pad {
        padding_config: Vec<(i64, i64, i64)>,
    },
    Concatenate {
        dimension: usize,
    },
    /// `dynamic_slice operand i0 i1 ...` with scalar integer start indices (clamped as XLA does).
    DynamicSlice {
        slice_sizes: Vec<usize>,
    },
    /// `dynamic_update_slice operand update i0 i1 ...`.
    DynamicUpdateSlice,
    Iota {
        dtype: DType,
        shape: Vec<usize>,
        dimension: usize,
    },
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
    },
    Argmax {
        axes: Vec<usize>,
        index_dtype: DType,
    },
    DotGeneral {
        dimension_numbers: DotDimensionNumbers,
        preferred_element_type: Option<DType>,
    },
    /// `checkpoint_name`: an identity that names its operand for policies.
    Name {
        name: String,
    },
    /// Moves values between memory spaces, one destination per operand.
    DevicePut {
        devices: Vec<MemorySpace>,
        copy_semantics: Vec<CopySemantics>,
    },
    Jit {
        name: String,
        jaxpr: ClosedJaxpr,
    },
    CustomJvpCall {
        name: String,
        call_jaxpr: ClosedJaxpr,
        jvp: String,
        num_consts: usize,
        symbolic_zeros: bool,
    },
    Remat2 {
        jaxpr: Arc<Jaxpr>,
        prevent_cse: bool,
        differentiated: bool,
        policy: Option<Policy>,
    },
    /// Operands: `num_consts` consts, `num_carry` carries, then the scanned-over xs.
    Scan {
        jaxpr: ClosedJaxpr,
        length: usize,
        reverse: bool,
        num_consts: usize,
        num_carry: usize,
        unroll: usize,
    },
}

impl Primitive {
    /// The primitive's name as JAX prints it.
    pub fn name(&self) -> &'static str {
        match self {
            Primitive::Unary(op) => op.name(),
            Primitive::Binary(op) => op.name(),
            Primitive::Compare(op) => op.name(),
            Primitive::IntegerPow { .. } => "integer_pow",
            Primitive::SelectN => "select_n",
            Primitive::Clamp => "clamp",
            Primitive::ConvertElementType { .. } => "convert_element_type",
            Primitive::ReducePrecision { .. } => "reduce_precision",
            Primitive::BroadcastInDim { .. } => "broadcast_in_dim",
            Primitive::Reshape { .. } => "reshape",
            Primitive::Transpose { .. } => "transpose",
            Primitive::Squeeze { .. } => "squeeze",
            Primitive::ExpandDims { .. } => "expand_dims",
            Primitive::Slice { .. } => "slice",
            Primitive::Pad { .. } => "pad",
            Primitive::Concatenate { .. } => "concatenate",
            Primitive::DynamicSlice { .. } => "dynamic_slice",
            Primitive::DynamicUpdateSlice => "dynamic_update_slice",
            Primitive::Iota { .. } => "iota",
            Primitive::Reduce { op, .. } => op.name(),
            Primitive::Argmax { .. } => "argmax",
            Primitive::DotGeneral { .. } => "dot_general",
            Primitive::Name { .. } => "name",
            Primitive::DevicePut { .. } => "device_put",
            Primitive::Jit { .. } => "jit",
            Primitive::CustomJvpCall { .. } => "custom_jvp_call",
            Primitive::Remat2 { .. } => "remat2",
            Primitive::Scan { .. } => "scan",
        }
    }

    /// Every primitive name the parser knows, for error messages and docs.
    pub fn all_names() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        names.extend(UnaryOp::ALL.iter().map(|op| op.name()));
        names.extend(BinaryOp::ALL.iter().map(|op| op.name()));
        names.extend(CompareOp::ALL.iter().map(|op| op.name()));
        names.extend([
            "integer_pow",
            "select_n",
            "clamp",
            "convert_element_type",
            "reduce_precision",
            "broadcast_in_dim",
            "reshape",
            "transpose",
            "squeeze",
            "expand_dims",
            "slice",
            "pad",
            "concatenate",
            "dynamic_slice",
            "dynamic_update_slice",
            "iota",
            "reduce_sum",
            "reduce_max",
            "reduce_min",
            "argmax",
            "dot_general",
            "name",
            "device_put",
            "jit",
            "custom_jvp_call",
            "remat2",
            "scan",
        ]);
        names
    }

    /// The nested jaxprs this primitive calls, in parameter order.
    pub fn subjaxprs(&self) -> Vec<&Arc<Jaxpr>> {
        match self {
            Primitive::Jit { jaxpr, .. } | Primitive::Scan { jaxpr, .. } => vec![&jaxpr.jaxpr],
            Primitive::CustomJvpCall { call_jaxpr, .. } => vec![&call_jaxpr.jaxpr],
            Primitive::Remat2 { jaxpr, .. } => vec![jaxpr],
            Primitive::Unary(_)
            | Primitive::Binary(_)
            | Primitive::Compare(_)
            | Primitive::IntegerPow { .. }
            | Primitive::SelectN
            | Primitive::Clamp
            | Primitive::ConvertElementType { .. }
            | Primitive::ReducePrecision { .. }
            | Primitive::BroadcastInDim { .. }
            | Primitive::Reshape { .. }
            | Primitive::Transpose { .. }
            | Primitive::Squeeze { .. }
            | Primitive::ExpandDims { .. }
            | Primitive::Slice { .. }
            | Primitive::Pad { .. }
            | Primitive::Concatenate { .. }
            | Primitive::DynamicSlice { .. }
            | Primitive::DynamicUpdateSlice
            | Primitive::Iota { .. }
            | Primitive::Reduce { .. }
            | Primitive::Argmax { .. }
            | Primitive::DotGeneral { .. }
            | Primitive::Name { .. }
            | Primitive::DevicePut { .. } => Vec::new(),
        }
    }

    /// The `name` parameter JAX's printer uses to name a hoisted sub-jaxpr (only `jit`'s
    /// raw parameters carry one).
    pub fn hoist_name(&self) -> Option<&str> {
        match self {
            Primitive::Jit { name, .. } => Some(name),
            Primitive::Unary(_)
            | Primitive::Binary(_)
            | Primitive::Compare(_)
            | Primitive::IntegerPow { .. }
            | Primitive::SelectN
            | Primitive::Clamp
            | Primitive::ConvertElementType { .. }
            | Primitive::ReducePrecision { .. }
            | Primitive::BroadcastInDim { .. }
            | Primitive::Reshape { .. }
            | Primitive::Transpose { .. }
            | Primitive::Squeeze { .. }
            | Primitive::ExpandDims { .. }
            | Primitive::Slice { .. }
            | Primitive::Pad { .. }
            | Primitive::Concatenate { .. }
            | Primitive::DynamicSlice { .. }
            | Primitive::DynamicUpdateSlice
            | Primitive::Iota { .. }
            | Primitive::Reduce { .. }
            | Primitive::Argmax { .. }
            | Primitive::DotGeneral { .. }
            | Primitive::Name { .. }
            | Primitive::DevicePut { .. }
            | Primitive::CustomJvpCall { .. }
            | Primitive::Remat2 { .. }
            | Primitive::Scan { .. } => None,
        }
    }

    /// The parameters in printing order, leaving out what JAX's printer hides.
    pub fn params(&self) -> Vec<(&'static str, Param)> {
        let dtype = |d: DType| Param::Word(d.numpy_name().to_string());
        match self {
            Primitive::Unary(_)
            | Primitive::Binary(_)
            | Primitive::Compare(_)
            | Primitive::SelectN
            | Primitive::Clamp
            | Primitive::DynamicUpdateSlice => Vec::new(),
            Primitive::IntegerPow { y } => vec![("y", Param::Int(*y as i64))],
            Primitive::ConvertElementType { new_dtype, weak_type } => {
                vec![("new_dtype", dtype(*new_dtype)), ("weak_type", Param::Bool(*weak_type))]
            }
            Primitive::ReducePrecision { exponent_bits, mantissa_bits } => vec![
                ("exponent_bits", Param::Int(*exponent_bits as i64)),
                ("mantissa_bits", Param::Int(*mantissa_bits as i64)),
            ],
            Primitive::BroadcastInDim { broadcast_dimensions, .. } => {
                if broadcast_dimensions.is_empty() {
                    Vec::new()
                } else {
                    vec![("broadcast_dimensions", Param::ints(broadcast_dimensions.iter().copied()))]
                }
            }
            Primitive::Reshape { new_sizes } => vec![
                ("dimensions", Param::None),
                ("new_sizes", Param::ints(new_sizes.iter().copied())),
                ("sharding", Param::None),
            ],
            Primitive::Transpose { permutation } => vec![("permutation", Param::ints(permutation.iter().copied()))],
            Primitive::Squeeze { dimensions } | Primitive::ExpandDims { dimensions } => {
                vec![("dimensions", Param::ints(dimensions.iter().copied()))]
            }
            Primitive::Slice { start_indices, limit_indices, strides } => vec![
                ("limit_indices", Param::ints(limit_indices.iter().copied())),
                ("start_indices", Param::ints(start_indices.iter().copied())),
                ("strides", strides.as_ref().map_or(Param::None, |s| Param::ints(s.iter().copied()))),
            ],
            Primitive::Pad { padding_config } => vec![(
                "padding_config",
                Param::Tuple(
                    padding_config
                        .iter()
                        .map(|&(lo, hi, interior)| {
                            Param::Tuple(vec![Param::Int(lo), Param::Int(hi), Param::Int(interior)])
                        })
                        .collect(),
                ),
            )],
            Primitive::Concatenate { dimension } => vec![("dimension", Param::Int(*dimension as i64))],
            Primitive::DynamicSlice { slice_sizes } => vec![("slice_sizes", Param::ints(slice_sizes.iter().copied()))],
            Primitive::Iota { dtype: d, shape, dimension } => vec![
                ("dimension", Param::Int(*dimension as i64)),
                ("dtype", dtype(*d)),
                ("shape", Param::ints(shape.iter().copied())),
                ("sharding", Param::None),
            ],
            Primitive::Reduce { op, axes } => {
                let mut ps = vec![("axes", Param::ints(axes.iter().copied()))];
                match op {
                    ReduceOp::Sum => ps.push(("out_sharding", Param::None)),
                    ReduceOp::Max | ReduceOp::Min => {}
                }
                ps
            }
            Primitive::Argmax { axes, index_dtype } => {
                vec![("axes", Param::ints(axes.iter().copied())), ("index_dtype", dtype(*index_dtype))]
            }
            Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type } => {
                let mut ps = vec![(
                    "dimension_numbers",
                    Param::Tuple(vec![
                        Param::Tuple(vec![
                            Param::int_list(dn.lhs_contracting.iter().copied()),
                            Param::int_list(dn.rhs_contracting.iter().copied()),
                        ]),
                        Param::Tuple(vec![
                            Param::int_list(dn.lhs_batch.iter().copied()),
                            Param::int_list(dn.rhs_batch.iter().copied()),
                        ]),
                    ]),
                )];
                if let Some(t) = preferred_element_type {
                    ps.push(("preferred_element_type", dtype(*t)));
                }
                ps
            }
            Primitive::Name { name } => vec![("name", Param::Word(name.clone()))],
            Primitive::DevicePut { devices, copy_semantics } => vec![
                (
                    "copy_semantics",
                    Param::Tuple(copy_semantics.iter().map(|c| Param::Word(c.param_name().to_string())).collect()),
                ),
                (
                    "devices",
                    Param::Tuple(
                        devices.iter().map(|d| Param::Word(format!("MemorySpace.{}", d.param_name()))).collect(),
                    ),
                ),
                ("srcs", Param::Tuple(devices.iter().map(|_| Param::None).collect())),
            ],
            Primitive::Jit { name, jaxpr } => {
                vec![("name", Param::Word(name.clone())), ("jaxpr", Param::Jaxpr(jaxpr.jaxpr.clone()))]
            }
            Primitive::CustomJvpCall { name, call_jaxpr, jvp, num_consts, symbolic_zeros } => {
                let mut ps =
                    vec![("name", Param::Word(name.clone())), ("call_jaxpr", Param::Jaxpr(call_jaxpr.jaxpr.clone()))];
                ps.push(("jvp", Param::Word(jvp.clone())));
                if *num_consts != 0 {
                    ps.push(("num_consts", Param::Int(*num_consts as i64)));
                }
                ps.push(("symbolic_zeros", Param::Bool(*symbolic_zeros)));
                ps
            }
            Primitive::Remat2 { jaxpr, prevent_cse, differentiated, policy } => vec![
                ("differentiated", Param::Bool(*differentiated)),
                ("jaxpr", Param::Jaxpr(jaxpr.clone())),
                ("policy", policy.as_ref().map_or(Param::None, Policy::to_param)),
                ("prevent_cse", Param::Bool(*prevent_cse)),
            ],
            Primitive::Scan { jaxpr, length, reverse, num_consts, num_carry, unroll } => vec![
                ("jaxpr", Param::Jaxpr(jaxpr.jaxpr.clone())),
                ("length", Param::Int(*length as i64)),
                ("num_carry", Param::Int(*num_carry as i64)),
                ("num_consts", Param::Int(*num_consts as i64)),
                ("reverse", Param::Bool(*reverse)),
                ("unroll", Param::Int(*unroll as i64)),
            ],
        }
    }

    /// Builds a primitive from its name and the parameters as read. `out_avals` are the
    /// equation's binder types (some parameters JAX does not print, such as
    /// `broadcast_in_dim`'s `shape`, come from them). Errors say which parameter is wrong.
    pub fn from_params(name: &str, params: Vec<(String, Param)>, out_avals: &[Aval]) -> Result<Primitive, String> {
        let mut p = ParamReader { prim: name, params, used: Vec::new() };
        let prim = match name {
            _ if UnaryOp::ALL.iter().any(|op| op.name() == name) => {
                p.optional_none("accuracy")?;
                Primitive::Unary(*UnaryOp::ALL.iter().find(|op| op.name() == name).unwrap())
            }
            _ if BinaryOp::ALL.iter().any(|op| op.name() == name) => {
                p.optional_none("out_dtype")?;
                Primitive::Binary(*BinaryOp::ALL.iter().find(|op| op.name() == name).unwrap())
            }
            _ if CompareOp::ALL.iter().any(|op| op.name() == name) => {
                Primitive::Compare(*CompareOp::ALL.iter().find(|op| op.name() == name).unwrap())
            }
            "integer_pow" => {
                let y = p.int("y")?;
                Primitive::IntegerPow {
                    y: i32::try_from(y).map_err(|_| format!("integer_pow: y={y} is out of range"))?,
                }
            }
            "select_n" => Primitive::SelectN,
            "clamp" => Primitive::Clamp,
            "convert_element_type" => {
                p.optional_none("sharding")?;
                Primitive::ConvertElementType { new_dtype: p.dtype("new_dtype")?, weak_type: p.bool("weak_type")? }
            }
            "reduce_precision" => Primitive::ReducePrecision {
                exponent_bits: p.usize("exponent_bits")? as u32,
                mantissa_bits: p.usize("mantissa_bits")? as u32,
            },
            "broadcast_in_dim" => {
                p.optional_none("sharding")?;
                let broadcast_dimensions =
                    if p.has("broadcast_dimensions") { p.usizes("broadcast_dimensions")? } else { Vec::new() };
                let shape = match (p.has("shape"), out_avals.first()) {
                    (true, _) => p.usizes("shape")?,
                    (false, Some(aval)) => aval.shape.clone(),
                    (false, None) => return Err("broadcast_in_dim needs an output binder".into()),
                };
                Primitive::BroadcastInDim { shape, broadcast_dimensions }
            }
            "reshape" => {
                p.optional_none("dimensions")?;
                p.optional_none("sharding")?;
                Primitive::Reshape { new_sizes: p.usizes("new_sizes")? }
            }
            "transpose" => Primitive::Transpose { permutation: p.usizes("permutation")? },
            "squeeze" => Primitive::Squeeze { dimensions: p.usizes("dimensions")? },
            "expand_dims" => Primitive::ExpandDims { dimensions: p.usizes("dimensions")? },
            "slice" => Primitive::Slice {
                start_indices: p.usizes("start_indices")?,
                limit_indices: p.usizes("limit_indices")?,
                strides: if p.is_none("strides") {
                    p.optional_none("strides")?;
                    None
                } else {
                    Some(p.usizes("strides")?)
                },
            },
            "pad" => {
                let cfg = p.take("padding_config")?;
                let entries = cfg.as_seq().ok_or("pad: padding_config must be a tuple of (low, high, interior)")?;
                let mut padding_config = Vec::new();
                for e in entries {
                    match e.as_seq().map(|t| t.iter().map(Param::as_int).collect::<Option<Vec<i64>>>()) {
                        Some(Some(t)) if t.len() == 3 && t[2] >= 0 => padding_config.push((t[0], t[1], t[2])),
                        _ => return Err(format!("pad: bad padding_config entry {e}")),
                    }
                }
                Primitive::Pad { padding_config }
            }
            "concatenate" => Primitive::Concatenate { dimension: p.usize("dimension")? },
            "dynamic_slice" => Primitive::DynamicSlice { slice_sizes: p.usizes("slice_sizes")? },
            "dynamic_update_slice" => Primitive::DynamicUpdateSlice,
            "iota" => {
                p.optional_none("sharding")?;
                Primitive::Iota {
                    dtype: p.dtype("dtype")?,
                    shape: p.usizes("shape")?,
                    dimension: p.usize("dimension")?,
                }
            }
            "reduce_sum" | "reduce_max" | "reduce_min" => {
                p.optional_none("out_sharding")?;
                let op = match name {
                    "reduce_sum" => ReduceOp::Sum,
                    "reduce_max" => ReduceOp::Max,
                    _ => ReduceOp::Min,
                };
                Primitive::Reduce { op, axes: p.usizes("axes")? }
            }
            "argmax" => Primitive::Argmax { axes: p.usizes("axes")?, index_dtype: p.dtype("index_dtype")? },
            "dot_general" => {
                p.optional_none("precision")?;
                p.optional_none("out_sharding")?;
                let dn = p.take("dimension_numbers")?;
                let bad = || {
                    format!("dot_general: dimension_numbers must be ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), found {dn}")
                };
                let pair = |q: &Param| -> Option<(Vec<usize>, Vec<usize>)> {
                    let s = q.as_seq()?;
                    if s.len() != 2 {
                        return None;
                    }
                    Some((usizes_of(&s[0])?, usizes_of(&s[1])?))
                };
                let outer = dn.as_seq().filter(|s| s.len() == 2).ok_or_else(bad)?;
                let (lc, rc) = pair(&outer[0]).ok_or_else(bad)?;
                let (lb, rb) = pair(&outer[1]).ok_or_else(bad)?;
                let preferred_element_type = if p.is_none("preferred_element_type") || !p.has("preferred_element_type")
                {
                    p.optional_none("preferred_element_type")?;
                    None
                } else {
                    Some(p.dtype("preferred_element_type")?)
                };
                Primitive::DotGeneral {
                    dimension_numbers: DotDimensionNumbers {
                        lhs_contracting: lc,
                        rhs_contracting: rc,
                        lhs_batch: lb,
                        rhs_batch: rb,
                    },
                    preferred_element_type,
                }
            }
            "name" => Primitive::Name { name: p.word("name")? },
            "device_put" => {
                let devices = p
                    .seq("devices")?
                    .iter()
                    .map(|d| match d {
                        Param::Word(w) if w == "MemorySpace.Device" => Ok(MemorySpace::Device),
                        Param::Word(w) if w == "MemorySpace.Host" => Ok(MemorySpace::Host),
                        other => Err(format!("device_put: unsupported device {other}")),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let copy_semantics = p
                    .seq("copy_semantics")?
                    .iter()
                    .map(|c| match c {
                        Param::Word(w) if w == "ArrayCopySemantics.ALWAYS_COPY" => Ok(CopySemantics::AlwaysCopy),
                        Param::Word(w) if w == "ArrayCopySemantics.REUSE_INPUT" => Ok(CopySemantics::ReuseInput),
                        Param::Word(w) if w == "ArrayCopySemantics.DONATE_INPUT" => Ok(CopySemantics::DonateInput),
                        other => Err(format!("device_put: unknown copy semantics {other}")),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let srcs = p.seq("srcs")?;
                if srcs.iter().any(|s| !matches!(s, Param::None)) {
                    return Err("device_put: only srcs=(None, ...) is supported".into());
                }
                if srcs.len() != devices.len() || copy_semantics.len() != devices.len() {
                    return Err("device_put: devices, srcs and copy_semantics must have one entry per operand".into());
                }
                Primitive::DevicePut { devices, copy_semantics }
            }
            "jit" => Primitive::Jit { name: p.word("name")?, jaxpr: ClosedJaxpr::new(p.jaxpr("jaxpr")?) },
            "custom_jvp_call" => Primitive::CustomJvpCall {
                name: p.word("name")?,
                call_jaxpr: ClosedJaxpr::new(p.jaxpr("call_jaxpr")?),
                jvp: p.word("jvp")?,
                num_consts: if p.has("num_consts") { p.usize("num_consts")? } else { 0 },
                symbolic_zeros: p.bool("symbolic_zeros")?,
            },
            "remat2" => Primitive::Remat2 {
                jaxpr: p.jaxpr("jaxpr")?,
                prevent_cse: p.bool("prevent_cse")?,
                differentiated: p.bool("differentiated")?,
                policy: Policy::from_param(&p.take("policy")?)?,
            },
            "scan" => Primitive::Scan {
                jaxpr: ClosedJaxpr::new(p.jaxpr("jaxpr")?),
                length: p.usize("length")?,
                reverse: p.bool("reverse")?,
                num_consts: p.usize("num_consts")?,
                num_carry: p.usize("num_carry")?,
                unroll: p.usize("unroll")?,
            },
            _ => return Err(format!("unknown primitive `{name}`")),
        };
        p.finish()?;
        Ok(prim)
    }
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn usizes_of(p: &Param) -> Option<Vec<usize>> {
    p.as_seq()?.iter().map(|x| x.as_int().and_then(|x| usize::try_from(x).ok())).collect()
}

/// Takes named parameters off a parsed list, remembering which were used so that an
/// unexpected parameter is an error rather than silently dropped.
struct ParamReader<'a> {
    prim: &'a str,
    params: Vec<(String, Param)>,
    used: Vec<String>,
}

impl ParamReader<'_> {
    fn has(&self, key: &str) -> bool {
        self.params.iter().any(|(k, _)| k == key)
    }

    fn take(&mut self, key: &str) -> Result<Param, String> {
        self.used.push(key.to_string());
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("{} is missing parameter `{key}`", self.prim))
    }

    fn is_none(&self, key: &str) -> bool {
        self.params.iter().any(|(k, v)| k == key && matches!(v, Param::None))
    }

    /// A parameter JAX prints only when it is not `None`; only `None` is supported.
    fn optional_none(&mut self, key: &str) -> Result<(), String> {
        if !self.has(key) {
            return Ok(());
        }
        match self.take(key)? {
            Param::None => Ok(()),
            other => Err(format!("{}: only {key}=None is supported, found {other}", self.prim)),
        }
    }

    fn wrong(&self, key: &str, want: &str, got: &Param) -> String {
        format!("{}: parameter `{key}` must be {want}, found {got}", self.prim)
    }

    fn int(&mut self, key: &str) -> Result<i64, String> {
        let v = self.take(key)?;
        v.as_int().ok_or_else(|| self.wrong(key, "an integer", &v))
    }

    fn usize(&mut self, key: &str) -> Result<usize, String> {
        let v = self.take(key)?;
        v.as_int().and_then(|x| usize::try_from(x).ok()).ok_or_else(|| self.wrong(key, "a non-negative integer", &v))
    }

    fn usizes(&mut self, key: &str) -> Result<Vec<usize>, String> {
        let v = self.take(key)?;
        usizes_of(&v).ok_or_else(|| self.wrong(key, "a tuple of non-negative integers", &v))
    }

    fn seq(&mut self, key: &str) -> Result<Vec<Param>, String> {
        let v = self.take(key)?;
        v.as_seq().map(<[Param]>::to_vec).ok_or_else(|| self.wrong(key, "a tuple", &v))
    }

    fn bool(&mut self, key: &str) -> Result<bool, String> {
        match self.take(key)? {
            Param::Bool(b) => Ok(b),
            v => Err(self.wrong(key, "True or False", &v)),
        }
    }

    fn word(&mut self, key: &str) -> Result<String, String> {
        match self.take(key)? {
            // `<lambda>` is how JAX names an anonymous Python function.
            Param::Word(w) | Param::Opaque(w) => Ok(w),
            Param::Str(s) => Ok(s),
            v => Err(self.wrong(key, "a name", &v)),
        }
    }

    fn dtype(&mut self, key: &str) -> Result<DType, String> {
        match self.take(key)? {
            Param::Word(w) => DType::from_numpy_name(&w).ok_or_else(|| {
                format!("{}: unsupported dtype `{w}` for `{key}` (float32, float64, int32, bool)", self.prim)
            }),
            v => Err(self.wrong(key, "a dtype", &v)),
        }
    }

    fn jaxpr(&mut self, key: &str) -> Result<Arc<Jaxpr>, String> {
        match self.take(key)? {
            Param::Jaxpr(j) => Ok(j),
            v => Err(self.wrong(key, "a jaxpr", &v)),
        }
    }

    fn finish(self) -> Result<(), String> {
        for (k, _) in &self.params {
            if !self.used.iter().any(|u| u == k) {
                return Err(format!("{} has no parameter `{k}`", self.prim));
            }
        }
        Ok(())
    }
}

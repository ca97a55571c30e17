//! The jaxpr data structures: variables, literals, equations, primitives with their
//! parameters, jaxprs and closed jaxprs.
//!
//! Variables are dense `u32` indices into their jaxpr's `vars` table; a variable means
//! nothing outside the jaxpr that declares it. Nested jaxprs (parameters of `jit`,
//! `remat2`, `scan`, `custom_jvp_call`) are shared through `Arc`, and sharing is
//! meaningful: the printer hoists a jaxpr referenced twice as `let jaxpr = {...} in`.
//!
//! A jaxpr is one recursive definition: a [`Jaxpr`] holds equations, an [`Eqn`] a
//! [`Primitive`], a primitive its parameters, among them nested jaxprs ([`ClosedJaxpr`])
//! and values kept as JAX printed them ([`Param`], which may hold a jaxpr again). The
//! types of that cycle are declared here, together, and nowhere else, with what follows
//! from their shape alone (which parameters are nested jaxprs: [`Primitive::subjaxprs`],
//! [`Primitive::map_subjaxprs`]). What a primitive means is above this module, in
//! `primitive/` (names, parameters' text form, shape rules), as what a parameter value
//! prints as is in `param.rs`; the parameter types that hold no jaxpr (`UnaryOp`,
//! dimension numbers, windows) are below it, in `param_types.rs`, and so is the remat
//! [`Policy`].

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;

use crate::array::Array;
use crate::param_types::{
    AllReduceOp, BinaryOp, BranchesPlatforms, CompareOp, ConvDimensionNumbers, CopySemantics, CumulativeOp,
    DotDimensionNumbers, Eigh, FillValue, GatherDimensionNumbers, GatherScatterMode, Precision, Qr, ReduceOp,
    RoundingMethod, ScatterDimensionNumbers, ScatterOp, Svd, TriangularSolve, UnaryOp, Window, WindowOp,
};
use crate::policy::Policy;
use crate::sharding::{Mesh, PartitionSpec, Sharding, ShardingConstraint};
use crate::types::{Aval, DType, MemorySpace};

/// A variable of one jaxpr: an index into [`Jaxpr::vars`]. Prints as `%N` in debug output;
/// the jaxpr printer gives it JAX's alphabetic name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(pub u32);

impl Var {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// What the `vars` table knows of a variable.
#[derive(Clone, Debug, PartialEq)]
pub struct VarDecl {
    pub aval: Aval,
    /// A binder JAX wrote as `_`: its value is never read.
    pub dropped: bool,
}

/// A scalar literal value. Floats keep their own precision; `f32` literals print through
/// `f64` exactly as Python prints `np.float32(x).item()`. There are no key literals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LitValue {
    F32(f32),
    F64(f64),
    BF16(half::bf16),
    F16(half::f16),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U32(u32),
    Bool(bool),
    /// `(2+1j):c64[]`, printed as Python's repr of the complex number.
    C64(crate::array::c64),
    C128(crate::array::c128),
}

impl LitValue {
    pub fn dtype(self) -> DType {
        match self {
            LitValue::F32(_) => DType::F32,
            LitValue::F64(_) => DType::F64,
            LitValue::BF16(_) => DType::BF16,
            LitValue::F16(_) => DType::F16,
            LitValue::I8(_) => DType::I8,
            LitValue::I16(_) => DType::I16,
            LitValue::I32(_) => DType::I32,
            LitValue::I64(_) => DType::I64,
            LitValue::U8(_) => DType::U8,
            LitValue::U32(_) => DType::U32,
            LitValue::Bool(_) => DType::Bool,
            LitValue::C64(_) => DType::C64,
            LitValue::C128(_) => DType::C128,
        }
    }

    /// The value as an `f64` (booleans are 0 or 1; `i64` beyond 2^53 rounds; a complex
    /// number's real part).
    pub fn as_f64(self) -> f64 {
        match self {
            LitValue::F32(x) => x as f64,
            LitValue::F64(x) => x,
            LitValue::BF16(x) => x.to_f64(),
            LitValue::F16(x) => x.to_f64(),
            LitValue::I8(x) => x as f64,
            LitValue::I16(x) => x as f64,
            LitValue::I32(x) => x as f64,
            LitValue::I64(x) => x as f64,
            LitValue::U8(x) => x as f64,
            LitValue::U32(x) => x as f64,
            LitValue::Bool(b) => b as u8 as f64,
            LitValue::C64(z) => z.re as f64,
            LitValue::C128(z) => z.re,
        }
    }

    /// The imaginary part (0 for a real literal).
    pub fn imag_f64(self) -> f64 {
        match self {
            LitValue::C64(z) => z.im as f64,
            LitValue::C128(z) => z.im,
            LitValue::F32(_)
            | LitValue::F64(_)
            | LitValue::BF16(_)
            | LitValue::F16(_)
            | LitValue::I8(_)
            | LitValue::I16(_)
            | LitValue::I32(_)
            | LitValue::I64(_)
            | LitValue::U8(_)
            | LitValue::U32(_)
            | LitValue::Bool(_) => 0.0,
        }
    }

    /// A literal of `dtype` holding `x` converted as `convert_element_type` would (floats
    /// round to nearest, integers truncate and saturate, NaN gives 0). `None` for keys.
    pub fn try_from_f64(dtype: DType, x: f64) -> Option<LitValue> {
        Some(match dtype {
            DType::F32 => LitValue::F32(x as f32),
            DType::F64 => LitValue::F64(x),
            DType::BF16 => LitValue::BF16(half::bf16::from_f64(x)),
            DType::F16 => LitValue::F16(half::f16::from_f64(x)),
            DType::I8 => LitValue::I8(x as i8),
            DType::I16 => LitValue::I16(x as i16),
            DType::I32 => LitValue::I32(x as i32),
            DType::I64 => LitValue::I64(x as i64),
            DType::U8 => LitValue::U8(x as u8),
            DType::U32 => LitValue::U32(x as u32),
            DType::Bool => LitValue::Bool(x != 0.0),
            DType::C64 => LitValue::C64(crate::array::c64::new(x as f32, 0.0)),
            DType::C128 => LitValue::C128(crate::array::c128::new(x, 0.0)),
            DType::Key => return None,
        })
    }

    /// [`LitValue::try_from_f64`] for a dtype that has literals.
    ///
    /// # Panics
    /// On `DType::Key`, which has no literals: callers build literals of value dtypes.
    pub fn from_f64(dtype: DType, x: f64) -> LitValue {
        LitValue::try_from_f64(dtype, x).unwrap_or_else(|| panic!("no literal of dtype {dtype}"))
    }
}

/// A scalar literal operand, `2.0:f32[]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Literal {
    pub value: LitValue,
    /// Where the literal came from; not part of the text (the printer ignores it and the
    /// parser gives [`LitOrigin::Inline`]).
    pub origin: LitOrigin,
}

/// Where a literal came from. Only partial evaluation at the top of a linearization reads
/// it; every other pass treats a literal as its value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LitOrigin {
    /// Written in the program, or a constant a rule writes inline (a Python scalar in
    /// JAX's rule): inlined wherever it is read.
    #[default]
    Inline,
    /// A constant a jvp rule made on the primal side with `lax.full` or
    /// `instantiate_zeros`, which JAX stages as a value of the primal trace: a tangent
    /// equation that reads it under `linearize` makes it a residual (one per id, as JAX's
    /// tracer is one value however often it is read).
    Staged(u32),
}

impl Literal {
    /// A literal written in the program.
    pub fn new(value: LitValue) -> Literal {
        Literal { value, origin: LitOrigin::Inline }
    }

    /// The same value, inlined wherever it is read.
    pub fn inline(self) -> Literal {
        Literal::new(self.value)
    }

    pub fn aval(&self) -> Aval {
        Aval::scalar(self.value.dtype())
    }
}

/// An equation operand: a variable or a literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Atom {
    Var(Var),
    Lit(Literal),
}

impl From<Var> for Atom {
    fn from(v: Var) -> Atom {
        Atom::Var(v)
    }
}

impl From<Literal> for Atom {
    fn from(l: Literal) -> Atom {
        Atom::Lit(l)
    }
}

impl Atom {
    pub fn as_var(&self) -> Option<Var> {
        match self {
            Atom::Var(v) => Some(*v),
            Atom::Lit(_) => None,
        }
    }
}

/// Where an equation came from: a user's Rust source line, or a position in a parsed file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceInfo {
    pub file: Arc<str>,
    pub line: u32,
    pub column: u32,
    /// The user's function, where known: printed as `file:line:col (function)`.
    pub function: Option<Arc<str>>,
}

impl SourceInfo {
    pub fn unknown() -> SourceInfo {
        SourceInfo { file: Arc::from(""), line: 0, column: 0, function: None }
    }

    pub fn is_unknown(&self) -> bool {
        self.file.is_empty() && self.line == 0
    }
}

impl fmt::Display for SourceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_unknown() {
            return Ok(());
        }
        write!(f, "{}:{}:{}", self.file, self.line, self.column)?;
        if let Some(func) = &self.function {
            write!(f, " ({func})")?;
        }
        Ok(())
    }
}

/// One equation: `outvars = prim[params] invars`.
#[derive(Clone, Debug)]
pub struct Eqn {
    pub primitive: Primitive,
    pub invars: Vec<Atom>,
    pub outvars: Vec<Var>,
    pub source: SourceInfo,
    /// Text as it was read where it differs from the canonical spelling of the same value
    /// (see [`Spelling`]), so that a round trip is exact.
    pub spelling: Spelling,
}

/// How JAX wrote some values of one equation, where the text differs from the canonical
/// spelling of the same value. The printer uses a spelling only while it still denotes
/// the current value, so transformations may copy it freely.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spelling {
    /// `(key, text)` of parameters written otherwise than their canonical form: integers as
    /// NumPy scalars (JAX prints `np.int64(0)` for `0` where it computed a parameter with
    /// NumPy), and a result's sharding where JAX's rules give one (`sharding=` and
    /// `out_sharding=` inside `shard_map`'s transposes), which the primitive reads as `None`.
    pub params: Vec<(String, String)>,
    /// `(operand index, value text)` of literal operands whose text is not the repr of
    /// their value in their dtype: a weak-typed Python float JAX never rounded, such as
    /// `0.1:f32[]` (the `f32` value's repr is `0.10000000149011612`).
    pub literals: Vec<(usize, String)>,
    /// Of a jaxpr read from text: jaxprs of one group were written identically (up to
    /// layout), which is how JAX prints distinct jaxprs that share their variables (a
    /// `jit`'s cached body under two calls whose outer jaxprs were rebuilt): JAX names a
    /// variable once per variable object, so the second prints with the first's names.
    /// The printer names the variables of a group's jaxprs alike; `None` elsewhere.
    pub var_group: Option<u32>,
}

impl Eqn {
    pub fn new(primitive: Primitive, invars: Vec<Atom>, outvars: Vec<Var>, source: SourceInfo) -> Eqn {
        Eqn { primitive, invars, outvars, source, spelling: Spelling::default() }
    }
}

/// A jaxpr: `{ lambda constvars ; invars . let eqns in (outvars) }`.
#[derive(Clone, Debug, Default)]
pub struct Jaxpr {
    /// Declarations of every variable used in this jaxpr, indexed by [`Var`].
    pub vars: Vec<VarDecl>,
    pub constvars: Vec<Var>,
    pub invars: Vec<Var>,
    pub eqns: Vec<Eqn>,
    pub outvars: Vec<Atom>,
    /// How the text this jaxpr was read from wrote its literal outputs, where not
    /// canonically (`in (0.1:f32[],)`: only [`Spelling::literals`] is used, by output index).
    pub spelling: Spelling,
}

impl Jaxpr {
    pub fn new_var(&mut self, aval: Aval) -> Var {
        let v = Var(u32::try_from(self.vars.len()).expect("more than u32::MAX variables"));
        self.vars.push(VarDecl { aval, dropped: false });
        v
    }

    pub fn aval(&self, v: Var) -> &Aval {
        &self.vars[v.index()].aval
    }

    pub fn atom_aval(&self, a: &Atom) -> Aval {
        match a {
            Atom::Var(v) => self.aval(*v).clone(),
            Atom::Lit(l) => l.aval(),
        }
    }

    /// The distinct names of the program's `checkpoint_name`s (`name[name=...]`
    /// equations), nested jaxprs included, in the order they first appear.
    pub fn checkpoint_names(&self) -> Vec<String> {
        fn walk(j: &Jaxpr, out: &mut Vec<String>) {
            for e in &j.eqns {
                if let Primitive::Name { name } = &e.primitive {
                    if !out.contains(name) {
                        out.push(name.clone());
                    }
                }
                e.primitive.subjaxprs().into_iter().for_each(|sub| walk(sub, out));
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

    pub fn in_avals(&self) -> Vec<Aval> {
        self.invars.iter().map(|v| self.aval(*v).clone()).collect()
    }

    pub fn out_avals(&self) -> Vec<Aval> {
        self.outvars.iter().map(|a| self.atom_aval(a)).collect()
    }

    pub fn const_avals(&self) -> Vec<Aval> {
        self.constvars.iter().map(|v| self.aval(*v).clone()).collect()
    }
}

/// A jaxpr with values for its constvars.
#[derive(Clone, Debug)]
pub struct ClosedJaxpr {
    pub jaxpr: Arc<Jaxpr>,
    pub consts: Vec<Array>,
}

impl ClosedJaxpr {
    /// Closes a jaxpr that has no constvars.
    pub fn new(jaxpr: Arc<Jaxpr>) -> ClosedJaxpr {
        ClosedJaxpr { jaxpr, consts: Vec::new() }
    }
}

/// A primitive with its parameters. Variants are grouped by family; each group's
/// parameters text form and shape rules are in the module its comment names.
#[derive(Clone, Debug)]
pub enum Primitive {
    // Elementwise: `primitive/elementwise.rs`.
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
    /// `regularized_incomplete_beta a b x`: I_x(a, b) elementwise over three floats of one
    /// dtype (a scalar broadcasts).
    RegularizedIncompleteBeta,
    /// `complex x y`: `x + i y` from two floats of one dtype (a scalar broadcasts).
    Complex,
    /// `real z`, `imag z`: a complex number's parts.
    Real,
    Imag,
    /// `conj[input_dtype=complex64] z`: the complex conjugate (of a real operand too, whose
    /// result is complex; `input_dtype` is the operand's dtype).
    Conj {
        input_dtype: DType,
    },
    /// `fft[fft_lengths=(8,) fft_type=0] x`: a discrete Fourier transform over the last
    /// `fft_lengths.len()` (1 to 3) axes.
    Fft {
        fft_type: crate::param_types::FftType,
        fft_lengths: Vec<usize>,
    },
    ConvertElementType {
        new_dtype: DType,
        weak_type: bool,
    },
    /// Rounds floats to `exponent_bits`/`mantissa_bits`; an identity at f32's own 8/23.
    ReducePrecision {
        exponent_bits: u32,
        mantissa_bits: u32,
    },
    /// `round[rounding_method=m]`.
    Round {
        rounding_method: RoundingMethod,
    },
    /// `bitcast_convert_type[new_dtype=d]`: the operand's bits read as `new_dtype`.
    BitcastConvertType {
        new_dtype: DType,
    },

    // Shapes and indexing: `primitive/structural.rs`.
    /// `shape` is not printed (the binder's aval gives it).
    BroadcastInDim {
        shape: Vec<usize>,
        broadcast_dimensions: Vec<usize>,
    },
    /// `dimensions`, when given, permutes the operand's axes before the reshape.
    Reshape {
        new_sizes: Vec<usize>,
        dimensions: Option<Vec<usize>>,
    },
    Transpose {
        permutation: Vec<usize>,
    },
    /// Reverses the order of the elements along `dimensions`.
    Rev {
        dimensions: Vec<usize>,
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

    // Reductions and contractions: `primitive/reduction.rs`.
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
    },
    Argmax {
        axes: Vec<usize>,
        index_dtype: DType,
    },
    /// `reduce[computation=<function ...> dimensions=(1,) jaxpr={...}] xs... inits...`:
    /// JAX's generic `lax.reduce`, the operands reduced over `dimensions` by the scalar
    /// combiner `jaxpr` (`(accs..., xs...) -> accs...`) from the init values; `computation` is
    /// the Python function's repr, kept for printing. The combiner is data (as `scatter`'s
    /// `update_jaxpr`): passes do not walk into it.
    GenericReduce {
        computation: Param,
        dimensions: Vec<usize>,
        jaxpr: Arc<Jaxpr>,
    },
    DotGeneral {
        dimension_numbers: DotDimensionNumbers,
        preferred_element_type: Option<DType>,
        /// `precision=(lhs, rhs)`, or `None` (JAX's default, not printed).
        precision: Option<(Precision, Precision)>,
    },

    // Names and memory: `primitive/memory.rs`.
    /// `checkpoint_name`: an identity that names its operand for policies.
    Name {
        name: String,
    },
    /// Moves values between memory spaces, one destination per operand: `None` (JAX's
    /// `devices=(None,)`, a `jax.device_put(x)` without a target) leaves it where it is.
    DevicePut {
        devices: Vec<Option<MemorySpace>>,
        copy_semantics: Vec<CopySemantics>,
    },
    /// `empty2[dtype=float32 memory_space=MemorySpace.Device]`: an uninitialised scalar
    /// (JAX's placeholder for a cond branch's residual it does not compute); remat's value
    /// is zero, as XLA's lowering gives.
    Empty2 {
        dtype: DType,
        memory_space: MemorySpace,
    },

    // Convolutions and windows: `primitive/window.rs`.
    /// `conv_general_dilated lhs rhs` (boxed: ten parameters).
    ConvGeneralDilated(Box<ConvParams>),
    /// `reduce_window_sum`, `reduce_window_max`, `reduce_window_min`: `op` over each window.
    ReduceWindow {
        op: WindowOp,
        window: Window,
    },
    /// `reduce_window[base_dilation consts=() jaxpr={...} padding window_dilation
    /// window_dimensions window_strides] xs... inits...`: JAX's generic `lax.reduce_window`,
    /// each window of the operands reduced by the scalar combiner `jaxpr` (as the generic
    /// `reduce`'s, data that passes do not walk into) from the init values; padding and
    /// dilation holes are skipped, as XLA does.
    GenericReduceWindow {
        jaxpr: Arc<Jaxpr>,
        window: Window,
    },
    /// `select_and_scatter_add source operand`: each window's `source` value added at the
    /// position `select_prim` picks in the operand's window.
    SelectAndScatterAdd {
        select_prim: CompareOp,
        window_dimensions: Vec<usize>,
        window_strides: Vec<usize>,
        padding: Vec<(i64, i64)>,
    },
    /// `select_and_gather_add tangent operand`: each window's tangent at the position
    /// `select_prim` picks in the operand's window.
    SelectAndGatherAdd {
        select_prim: CompareOp,
        window: Window,
    },

    // PRNG keys and bits (threefry): `primitive/random.rs`.
    /// `random_seed[impl=fry] seeds`: integer seeds to keys of the same shape.
    RandomSeed,
    /// `random_wrap[impl=fry] data`: `u32[K,2]` to `key<fry>[K]`.
    RandomWrap,
    /// `random_unwrap keys`: `key<fry>[K]` to `u32[K,2]`.
    RandomUnwrap,
    /// `random_split[shape=S] keys`: `key<fry>[K]` to `key<fry>[K,*S]`.
    RandomSplit {
        shape: Vec<usize>,
    },
    /// `random_fold_in keys msgs`: each key folded with an integer message (broadcasting).
    RandomFoldIn,
    /// `random_bits[bit_width=W shape=S] keys`: `key<fry>[K]` to `uW[K,*S]`.
    RandomBits {
        bit_width: u32,
        shape: Vec<usize>,
    },
    /// `random_clone x`: the same keys (or a legacy key's words: any value), a copy JAX's
    /// optimizations cannot elide.
    RandomClone,
    /// `threefry2x32 k1 k2 x1 x2`: the threefry-2x32 hash of the counters `(x1, x2)` under
    /// the keys `(k1, k2)`, elementwise over `u32` operands (broadcasting); two `u32` results.
    Threefry2x32,
    /// `iota_2x32_shape[shape=S]`: the row-major index of each element of `S` as a 64-bit
    /// count, in two `u32[S]` results (high word, low word).
    Iota2x32Shape {
        shape: Vec<usize>,
    },
    /// `rng_bit_generator[algorithm=RNG_DEFAULT dtype=uint32 out_sharding=None shape=(2, 3)]
    /// key`: XLA's `RngBitGenerator` on a `u32[4]` key, the new key and `dtype` bits of
    /// `shape` (`primitive/random.rs`).
    RngBitGenerator {
        algorithm: crate::param_types::RngAlgorithm,
        dtype: DType,
        shape: Vec<usize>,
    },

    // Sharding and collectives: `primitive/sharded.rs`.
    /// `sharding_constraint[context_mesh layout sharding unconstrained_dims] x`: the identity
    /// on values; asks XLA's partitioner to lay `x` out as `sharding` says.
    ShardingConstraint(Box<ShardingConstraint>),
    /// `reshard x`: the identity on values; moves `x` to the sharding its type names (JAX
    /// prints no parameters: on `Auto` meshes the type carries none).
    Reshard,
    /// `shard_map[...] args`: its body once per device of the mesh, on that device's block
    /// of each operand; the results' blocks are assembled by `out_specs`.
    ShardMap(Box<ShardMap>),
    /// `psum[axes=('model',) axis_index_groups=None] x` and its kin: `x` reduced across the
    /// devices that differ only along `axes`.
    AllReduce {
        op: AllReduceOp,
        axes: Vec<String>,
    },
    /// `pvary[axes=('data',)] x`: the identity on values; from here on `x` is typed as varying
    /// over `axes` too (JAX inserts it where an invariant value meets a varying one).
    Pvary {
        axes: Vec<String>,
    },
    /// `all_gather[all_gather_dimension axis_index_groups=None axis_name axis_size tiled] x`:
    /// the blocks of the devices along `axis_name`, stacked at `all_gather_dimension` (or
    /// concatenated along it when `tiled`).
    AllGather {
        axis_name: Vec<String>,
        all_gather_dimension: usize,
        axis_size: usize,
        tiled: bool,
        /// `all_gather_invariant` (`lax.all_gather(..., to='invarying')`): the same values,
        /// the result the same on every device of `axis_name` (its varying axes drop
        /// them); it transposes to a `dynamic_slice` at this device's index.
        invariant: bool,
    },
    /// `all_to_all[axis_index_groups=None axis_name=model concat_axis=0 split_axis=1
    /// tiled=True] x`: each device splits its block along `split_axis` into as many chunks
    /// as `axis_name` has devices, sends chunk `j` to the `j`th, and concatenates what it
    /// receives along `concat_axis` in device order. JAX prints no axis size: it is the
    /// enclosing `shard_map` mesh's (`axis_size`, filled in when the `shard_map` is read;
    /// 0 outside one).
    AllToAll {
        axis_name: Vec<String>,
        /// `axis_name=model` (a name) rather than `axis_name=('model',)`.
        bare_name: bool,
        split_axis: usize,
        concat_axis: usize,
        tiled: bool,
        axis_size: usize,
    },
    /// `shard_alike x y`: `x` and `y` unchanged, laid out alike (a sharding hint).
    ShardAlike,
    /// `reduce_scatter[axis_index_groups=None axis_name axis_size scatter_dimension tiled] x`
    /// (`lax.psum_scatter`): the sum across `axis_name`, of which each device keeps its
    /// slice of `scatter_dimension`.
    ReduceScatter {
        axis_name: Vec<String>,
        scatter_dimension: usize,
        axis_size: usize,
        tiled: bool,
    },
    /// `ppermute[axis_name perm] x`: device `src` along `axis_name` sends its block to `dst`
    /// for each `(src, dst)` of `perm`; a device no pair sends to gets zeros.
    Ppermute {
        axis_name: Vec<String>,
        perm: Vec<(usize, usize)>,
    },
    /// `axis_index[axis_name=model]`: this device's index along the axis, as `i32[]`.
    AxisIndex {
        axis_name: String,
    },
    /// `pbroadcast[axis_name source] x`: the block of the device at index `source` along
    /// `axis_name`, on every device along it.
    Pbroadcast {
        axis_name: Vec<String>,
        source: usize,
    },

    // Calls and loops: `primitive/call.rs`.
    Jit {
        name: String,
        jaxpr: ClosedJaxpr,
        options: JitOptions,
    },
    /// `closed_call[call_jaxpr={...}] args`: a call of a closed jaxpr with no other
    /// parameter (JAX's `core.closed_call_p`); JAX's scan partial-evaluation rule emits one
    /// as the known half of a scan under a checkpoint (`_scan_partial_eval_custom`).
    ClosedCall {
        call_jaxpr: ClosedJaxpr,
    },
    /// `composite[attributes=(...) jaxpr={...} name=my.op version=0] args`: a named call
    /// whose body is its meaning (`lax.composite`); `attributes` are the keyword arguments
    /// as JAX prints them, kept as written.
    Composite {
        name: String,
        attributes: Param,
        version: i64,
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

    // Indexing, sorting and scans: `primitive/indexing.rs`, `primitive/sorting.rs`.
    /// Splits the operand along `axis` into pieces of `sizes`: one result per piece.
    Split {
        axis: usize,
        sizes: Vec<usize>,
    },
    /// `stack[axis=k] x0 x1 ...`: the operands (of one shape) along a new axis `k`.
    Stack {
        axis: usize,
    },
    /// `unstack[axis=k] x`: one result per index of axis `k`, without that axis.
    Unstack {
        axis: usize,
    },
    /// `tile[reps=(...)] x`: `x` repeated `reps[k]` times along each axis `k`.
    Tile {
        reps: Vec<usize>,
    },
    /// `gather operand indices`: XLA's gather, the index vector the indices' last axis.
    Gather {
        dimension_numbers: GatherDimensionNumbers,
        /// The value of an out-of-bounds slice under `FILL_OR_DROP`; `None` is NaN for
        /// floats and the lowest value for integers (JAX's default).
        fill_value: Option<FillValue>,
        indices_are_sorted: bool,
        mode: GatherScatterMode,
        slice_sizes: Vec<usize>,
        unique_indices: bool,
    },
    /// `scatter* operand indices updates`: XLA's scatter combining with `op`;
    /// `update_jaxpr` is JAX's scalar combiner, kept for printing (`op` says what it does).
    Scatter {
        op: ScatterOp,
        dimension_numbers: ScatterDimensionNumbers,
        indices_are_sorted: bool,
        mode: GatherScatterMode,
        unique_indices: bool,
        update_jaxpr: Option<Arc<Jaxpr>>,
    },
    /// Sorts every operand along `dimension` by the first `num_keys` (NaNs last).
    Sort {
        dimension: usize,
        is_stable: bool,
        num_keys: usize,
    },
    /// The lower Cholesky factor of each matrix (`primitive/linalg.rs`).
    Cholesky,
    /// `x` with `op(a) x = b` or `x op(a) = b` for triangular `a` (`primitive/linalg.rs`).
    TriangularSolve(TriangularSolve),
    /// The LU decomposition with partial pivoting of each matrix: the factors, the pivots and
    /// the permutation (`primitive/linalg.rs`).
    Lu,
    /// The permutation that a sequence of row swaps makes (`primitive/linalg.rs`).
    LuPivotsToPermutation {
        permutation_size: usize,
    },
    /// The Householder QR decomposition of each matrix: `q`, `r` and, with pivoting, the
    /// column permutation (`primitive/linalg.rs`).
    Qr(Qr),
    /// The eigenvectors and ascending eigenvalues of each symmetric matrix
    /// (`primitive/linalg.rs`).
    Eigh(Eigh),
    /// The singular values (descending) and, with `compute_uv`, the singular vectors of
    /// each matrix (`primitive/linalg.rs`).
    Svd(Svd),
    /// LAPACK's `geqrf` of each matrix: the factored matrix (`r` and the reflectors) and the
    /// `tau`s (`primitive/linalg.rs`).
    Geqrf,
    /// LAPACK's `orgqr`: the product of the Householder reflectors `a` and `taus` describe
    /// (`primitive/linalg.rs`).
    HouseholderProduct,
    /// LAPACK's `ormqr`: `c` multiplied by the `q` (or `qᵀ`) of Householder reflectors, on
    /// the left or the right (`primitive/linalg.rs`).
    Ormqr {
        left: bool,
        transpose: bool,
    },
    /// `x` with `T x = b` for the tridiagonal `T` of each `(dl, d, du)` (`primitive/linalg.rs`).
    TridiagonalSolve {
        perturb_singular: bool,
    },
    /// `alpha a aᵀ + beta c` for each matrix pair (`primitive/linalg.rs`); `alpha` and
    /// `beta` are the Python numbers JAX prints.
    SymmetricProduct {
        alpha: FillValue,
        beta: FillValue,
    },
    /// The `k` largest elements along `axis` and their i32 indices.
    TopK {
        axis: usize,
        k: usize,
    },
    /// `approx_top_k[aggregate_to_topk=True is_max_k=True k=5 recall_target=0.95
    /// reduction_dimension=-1 reduction_input_size_override=-1] x`: `lax.approx_max_k` and
    /// `approx_min_k`; on CPU XLA's fallback is exact (`primitive/sorting.rs`).
    ApproxTopK {
        k: usize,
        reduction_dimension: i64,
        recall_target: Param,
        is_max_k: bool,
        reduction_input_size_override: i64,
        aggregate_to_topk: bool,
    },
    /// The index of the first minimum along one axis.
    Argmin {
        axes: Vec<usize>,
        index_dtype: DType,
    },
    /// `cumsum`, `cumprod`, ... along `axis`, from the end when `reverse`.
    Cumulative {
        op: CumulativeOp,
        axis: usize,
        reverse: bool,
    },

    // Control flow and custom-vjp calls: `primitive/control.rs`.
    /// `cond index ops...`: runs `branches[clamp(index, 0, n - 1)]` on `ops`.
    Cond {
        branches: Vec<ClosedJaxpr>,
        /// `branches_platforms`, printed when present: the cond a `platform_index` selects
        /// in (`jnp.diagonal`'s); remat runs the branch for `cpu` through the index.
        branches_platforms: Option<BranchesPlatforms>,
    },
    /// `optimization_barrier x y ...`: the operands unchanged (XLA may not move
    /// computations across it).
    OptimizationBarrier,
    /// `platform_index[platforms=(('mosaic',), None)]`: the `i32[]` index of the entry for
    /// the platform the program runs on (`cpu`, see [`crate::platform_index`]).
    PlatformIndex {
        platforms: BranchesPlatforms,
    },
    /// Operands: `cond_nconsts` cond consts, `body_nconsts` body consts, then the carries.
    While {
        cond_jaxpr: ClosedJaxpr,
        body_jaxpr: ClosedJaxpr,
        cond_nconsts: usize,
        body_nconsts: usize,
    },
    /// The fwd/bwd rules are known only by name; evaluation uses `call_jaxpr`.
    CustomVjpCall {
        name: String,
        call_jaxpr: ClosedJaxpr,
        fwd: String,
        bwd: String,
        num_consts: usize,
        symbolic_zeros: bool,
    },
}

/// `conv_general_dilated`'s parameters; spatial parameters have one entry per spatial axis.
#[derive(Clone, Debug)]
pub struct ConvParams {
    pub window_strides: Vec<usize>,
    pub padding: Vec<(i64, i64)>,
    pub lhs_dilation: Vec<usize>,
    pub rhs_dilation: Vec<usize>,
    pub dimension_numbers: ConvDimensionNumbers,
    pub feature_group_count: usize,
    pub batch_group_count: usize,
    /// `None`, a name such as `Precision.HIGHEST`, or a pair of them; CPU ignores it.
    pub precision: Param,
    pub preferred_element_type: Option<DType>,
}

/// `shard_map`'s parameters: the body, the mesh, how each operand is split into blocks
/// (`in_specs`) and each result assembled from them (`out_specs`), whether the body's types
/// track varying axes (`check_vma`), and the mesh axes the body is manual over
/// (`newly_manual_axes`, sorted as JAX prints them).
#[derive(Clone, Debug)]
pub struct ShardMap {
    pub jaxpr: Arc<Jaxpr>,
    pub mesh: Mesh,
    pub in_specs: Vec<PartitionSpec>,
    pub out_specs: Vec<PartitionSpec>,
    pub check_vma: bool,
    pub manual_axes: Vec<String>,
}

impl ShardMap {
    /// The mesh of the manual axes (in the mesh's order): its devices are the body's runs.
    pub fn manual_mesh(&self) -> Mesh {
        let axes = self.mesh.axes.iter().filter(|a| self.manual_axes.contains(&a.name)).cloned().collect();
        Mesh { axes, abstract_devices: None }
    }
}

impl Jaxpr {
    /// Whether this jaxpr (or a jaxpr it calls) holds a collective.
    pub fn has_collective(&self) -> bool {
        self.eqns.iter().any(|e| {
            e.primitive.as_collective().is_some() || e.primitive.subjaxprs().into_iter().any(|b| b.has_collective())
        })
    }
}

/// `jit`'s parameters that JAX's printer (`_pjit_pp_rule`) shows only when they are not
/// their defaults. (`inline` is never printed; layouts are not kept.)
#[derive(Clone, Debug, Default)]
pub struct JitOptions {
    /// One flag per operand when some operand is donated (`donated_invars=(True,)`), else
    /// empty. A pass that changes the call's operands drops it (donation is a hint).
    pub donated_invars: Vec<bool>,
    /// `keep_unused=True`: dead-code elimination keeps every operand.
    pub keep_unused: bool,
    /// `ctx_mesh=...` and `compiler_options_kvs=...` as written (they do not change what
    /// the call computes).
    pub ctx_mesh: Option<Param>,
    pub compiler_options_kvs: Option<Param>,
    /// One sharding per operand when some operand has one (`in_shardings=(...)`), else
    /// empty; and one per result (`out_shardings`). They say where blocks live and change
    /// no value; a pass that changes the call's operands or results drops them.
    pub in_shardings: Vec<Sharding>,
    pub out_shardings: Vec<Sharding>,
}

impl JitOptions {
    /// The shardings of `s` (one per operand, or per result, of a `jit`; or none) at the
    /// positions where `mask` is `want`: what a pass that keeps those operands or results
    /// keeps of them (JAX's pjit rules filter them so). Empty when `s` says nothing or does
    /// not match `mask`.
    pub fn shardings_where(s: &[Sharding], mask: &[bool], want: bool) -> Vec<Sharding> {
        match s.len() == mask.len() {
            true => s.iter().zip(mask).filter(|(_, &m)| m == want).map(|(x, _)| x.clone()).collect(),
            false => Vec::new(),
        }
    }
}

/// One parameter value, as JAX prints it (its text form is in `param.rs`).
#[derive(Clone, Debug)]
pub enum Param {
    None,
    Bool(bool),
    Int(i64),
    /// A Python float that is not an integer literal: `1.5`, `-inf` (`nan` reads as a word).
    Float(f64),
    /// A quoted Python string: `'device'`.
    Str(String),
    /// An unquoted word: a name (`relu`, `_where`), a dtype (`float32`), or a dotted
    /// enum member (`MemorySpace.Host`).
    Word(String),
    Tuple(Vec<Param>),
    List(Vec<Param>),
    /// `frozenset({'a', 'b'})`, `frozenset({0})`: strings or integers, in the order they
    /// were written. (As a parameter's whole value JAX prints it `frozenset({...})` even
    /// when empty; inside a repr it is Python's `frozenset()`.)
    FrozenSet(Vec<Param>),
    /// `'data': 4`: a key and its value, as a mesh's repr lists its axes
    /// (`Mesh('data': 4, 'model': 2, axis_types=(Auto, Auto))`).
    Entry(Box<Param>, Box<Param>),
    /// `Name(arg, key=value, ...)`: policy reprs and `np.int64(3)`.
    Call {
        func: String,
        args: Vec<Param>,
        kwargs: Vec<(String, Param)>,
    },
    /// An opaque repr in angle brackets, `<function nothing_saveable at 0xXXXXXXXXXXXX>`.
    Opaque(String),
    /// A nested jaxpr (printed by the jaxpr printer, which owns variable naming).
    Jaxpr(Arc<Jaxpr>),
}

impl Primitive {
    /// Every jaxpr among the parameters, as JAX's `jaxprs_in_params` finds them for
    /// printing: the bodies of [`Primitive::subjaxprs`] and also `scatter`'s scalar
    /// `update_jaxpr`, which is data (no pass runs it) but is hoisted like a body when two
    /// scatters share it.
    pub fn jaxprs_in_params(&self) -> Vec<&Arc<Jaxpr>> {
        let mut all = self.subjaxprs();
        if let Primitive::Scatter { update_jaxpr: Some(j), .. }
        | Primitive::GenericReduce { jaxpr: j, .. }
        | Primitive::GenericReduceWindow { jaxpr: j, .. } = self
        {
            all.push(j);
        }
        all
    }

    /// The nested jaxprs this primitive calls, in the order of JAX's params dict (the
    /// order `bind` received them, not the sorted printing order: `while` gives
    /// `cond_jaxpr` then `body_jaxpr`; `cond` its `branches` in order). The printer's
    /// hoisting walk (`core.pp_toplevel_jaxpr`) visits them in this order, which decides
    /// the order and names of hoisted jaxprs.
    pub fn subjaxprs(&self) -> Vec<&Arc<Jaxpr>> {
        match self {
            Primitive::Jit { jaxpr, .. } | Primitive::Scan { jaxpr, .. } => vec![&jaxpr.jaxpr],
            Primitive::CustomJvpCall { call_jaxpr, .. }
            | Primitive::ClosedCall { call_jaxpr }
            | Primitive::Composite { jaxpr: call_jaxpr, .. } => vec![&call_jaxpr.jaxpr],
            Primitive::Remat2 { jaxpr, .. } => vec![jaxpr],
            Primitive::ShardMap(sm) => vec![&sm.jaxpr],
            Primitive::Cond { branches, .. } => branches.iter().map(|b| &b.jaxpr).collect(),
            Primitive::While { cond_jaxpr, body_jaxpr, .. } => vec![&body_jaxpr.jaxpr, &cond_jaxpr.jaxpr],
            Primitive::CustomVjpCall { call_jaxpr, .. } => vec![&call_jaxpr.jaxpr],
            Primitive::Unary(_)
            | Primitive::Binary(_)
            | Primitive::Compare(_)
            | Primitive::IntegerPow { .. }
            | Primitive::SelectN
            | Primitive::Clamp
            | Primitive::RegularizedIncompleteBeta
            | Primitive::Complex
            | Primitive::Real
            | Primitive::Imag
            | Primitive::Conj { .. }
            | Primitive::Fft { .. }
            | Primitive::ConvertElementType { .. }
            | Primitive::ReducePrecision { .. }
            | Primitive::Round { .. }
            | Primitive::BitcastConvertType { .. }
            | Primitive::BroadcastInDim { .. }
            | Primitive::Reshape { .. }
            | Primitive::Transpose { .. }
            | Primitive::Rev { .. }
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
            | Primitive::Empty2 { .. }
            | Primitive::Split { .. }
            | Primitive::PlatformIndex { .. }
            | Primitive::OptimizationBarrier
            | Primitive::Stack { .. }
            | Primitive::Unstack { .. }
            | Primitive::Tile { .. }
            | Primitive::Gather { .. }
            | Primitive::Scatter { .. }
            | Primitive::Sort { .. }
            | Primitive::TopK { .. }
            | Primitive::ApproxTopK { .. }
            | Primitive::Cholesky
            | Primitive::TriangularSolve(_)
            | Primitive::Lu
            | Primitive::LuPivotsToPermutation { .. }
            | Primitive::Qr(_)
            | Primitive::Eigh(_)
            | Primitive::Svd(_)
            | Primitive::Geqrf
            | Primitive::HouseholderProduct
            | Primitive::Ormqr { .. }
            | Primitive::TridiagonalSolve { .. }
            | Primitive::SymmetricProduct { .. }
            | Primitive::Argmin { .. }
            | Primitive::Cumulative { .. }
            | Primitive::GenericReduce { .. }
            | Primitive::GenericReduceWindow { .. }
            | Primitive::ConvGeneralDilated(_)
            | Primitive::ReduceWindow { .. }
            | Primitive::SelectAndScatterAdd { .. }
            | Primitive::SelectAndGatherAdd { .. }
            | Primitive::RandomSeed
            | Primitive::RandomWrap
            | Primitive::RandomUnwrap
            | Primitive::RandomSplit { .. }
            | Primitive::RandomFoldIn
            | Primitive::RandomBits { .. }
            | Primitive::RandomClone
            | Primitive::Threefry2x32
            | Primitive::Iota2x32Shape { .. }
            | Primitive::ShardingConstraint(_)
            | Primitive::Reshard
            | Primitive::AllReduce { .. }
            | Primitive::Pvary { .. }
            | Primitive::AllGather { .. }
            | Primitive::ReduceScatter { .. }
            | Primitive::Ppermute { .. }
            | Primitive::AxisIndex { .. }
            | Primitive::Pbroadcast { .. }
            | Primitive::AllToAll { .. }
            | Primitive::ShardAlike
            | Primitive::RngBitGenerator { .. } => Vec::new(),
        }
    }

    /// The same primitive with each nested jaxpr replaced by `f` of it, in
    /// [`subjaxprs`](Primitive::subjaxprs) order; every other parameter is unchanged. A
    /// `ClosedJaxpr` (`jit`, `closed_call`, `custom_jvp_call`, `scan`) keeps its consts, so `f` must keep
    /// the constvars' number and types (the shape rule and the verifier check them);
    /// `remat2` holds a bare jaxpr, which must stay without constvars. A primitive without
    /// nested jaxprs comes back as a clone and `f` is not called.
    ///
    /// This is how a pass rebuilds a call with a transformed body:
    /// `eqn.primitive.map_subjaxprs(|body| Arc::new(dce(body)))`.
    pub fn map_subjaxprs(&self, mut f: impl FnMut(&Arc<Jaxpr>) -> Arc<Jaxpr>) -> Primitive {
        match self.try_map_subjaxprs(|j| Ok::<_, Infallible>(f(j))) {
            Ok(prim) => prim,
            Err(never) => match never {},
        }
    }

    /// [`map_subjaxprs`](Primitive::map_subjaxprs) with a fallible `f`: the first error
    /// is returned and no primitive is built.
    pub fn try_map_subjaxprs<E>(
        &self,
        mut f: impl FnMut(&Arc<Jaxpr>) -> Result<Arc<Jaxpr>, E>,
    ) -> Result<Primitive, E> {
        let mut prim = self.clone();
        match &mut prim {
            Primitive::Jit { jaxpr, options, .. } => {
                jaxpr.jaxpr = f(&jaxpr.jaxpr)?;
                // Donation is per operand: a body with other invars donates nothing.
                if options.donated_invars.len() != jaxpr.jaxpr.invars.len() {
                    options.donated_invars.clear();
                }
                // So are shardings: a body with other invars or outvars has none.
                if options.in_shardings.len() != jaxpr.jaxpr.invars.len() {
                    options.in_shardings.clear();
                }
                if options.out_shardings.len() != jaxpr.jaxpr.outvars.len() {
                    options.out_shardings.clear();
                }
            }
            Primitive::Scan { jaxpr, .. } => jaxpr.jaxpr = f(&jaxpr.jaxpr)?,
            Primitive::CustomJvpCall { call_jaxpr, .. }
            | Primitive::ClosedCall { call_jaxpr }
            | Primitive::Composite { jaxpr: call_jaxpr, .. } => call_jaxpr.jaxpr = f(&call_jaxpr.jaxpr)?,
            Primitive::Remat2 { jaxpr, .. } => *jaxpr = f(jaxpr)?,
            Primitive::ShardMap(sm) => sm.jaxpr = f(&sm.jaxpr)?,
            Primitive::Cond { branches, .. } => {
                for b in branches {
                    b.jaxpr = f(&b.jaxpr)?;
                }
            }
            Primitive::While { cond_jaxpr, body_jaxpr, .. } => {
                body_jaxpr.jaxpr = f(&body_jaxpr.jaxpr)?;
                cond_jaxpr.jaxpr = f(&cond_jaxpr.jaxpr)?;
            }
            Primitive::CustomVjpCall { call_jaxpr, .. } => call_jaxpr.jaxpr = f(&call_jaxpr.jaxpr)?,
            Primitive::Unary(_)
            | Primitive::Binary(_)
            | Primitive::Compare(_)
            | Primitive::IntegerPow { .. }
            | Primitive::SelectN
            | Primitive::Clamp
            | Primitive::RegularizedIncompleteBeta
            | Primitive::Complex
            | Primitive::Real
            | Primitive::Imag
            | Primitive::Conj { .. }
            | Primitive::Fft { .. }
            | Primitive::ConvertElementType { .. }
            | Primitive::ReducePrecision { .. }
            | Primitive::Round { .. }
            | Primitive::BitcastConvertType { .. }
            | Primitive::BroadcastInDim { .. }
            | Primitive::Reshape { .. }
            | Primitive::Transpose { .. }
            | Primitive::Rev { .. }
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
            | Primitive::Empty2 { .. }
            | Primitive::Split { .. }
            | Primitive::PlatformIndex { .. }
            | Primitive::OptimizationBarrier
            | Primitive::Stack { .. }
            | Primitive::Unstack { .. }
            | Primitive::Tile { .. }
            | Primitive::Gather { .. }
            | Primitive::Scatter { .. }
            | Primitive::Sort { .. }
            | Primitive::TopK { .. }
            | Primitive::ApproxTopK { .. }
            | Primitive::Cholesky
            | Primitive::TriangularSolve(_)
            | Primitive::Lu
            | Primitive::LuPivotsToPermutation { .. }
            | Primitive::Qr(_)
            | Primitive::Eigh(_)
            | Primitive::Svd(_)
            | Primitive::Geqrf
            | Primitive::HouseholderProduct
            | Primitive::Ormqr { .. }
            | Primitive::TridiagonalSolve { .. }
            | Primitive::SymmetricProduct { .. }
            | Primitive::Argmin { .. }
            | Primitive::Cumulative { .. }
            | Primitive::GenericReduce { .. }
            | Primitive::GenericReduceWindow { .. }
            | Primitive::ConvGeneralDilated(_)
            | Primitive::ReduceWindow { .. }
            | Primitive::SelectAndScatterAdd { .. }
            | Primitive::SelectAndGatherAdd { .. }
            | Primitive::RandomSeed
            | Primitive::RandomWrap
            | Primitive::RandomUnwrap
            | Primitive::RandomSplit { .. }
            | Primitive::RandomFoldIn
            | Primitive::RandomBits { .. }
            | Primitive::RandomClone
            | Primitive::Threefry2x32
            | Primitive::Iota2x32Shape { .. }
            | Primitive::ShardingConstraint(_)
            | Primitive::Reshard
            | Primitive::AllReduce { .. }
            | Primitive::Pvary { .. }
            | Primitive::AllGather { .. }
            | Primitive::ReduceScatter { .. }
            | Primitive::Ppermute { .. }
            | Primitive::AxisIndex { .. }
            | Primitive::Pbroadcast { .. }
            | Primitive::AllToAll { .. }
            | Primitive::ShardAlike
            | Primitive::RngBitGenerator { .. } => {}
        }
        Ok(prim)
    }
}

//! The Cranelift JIT: jaxprs compiled to native code with static buffer planning.
//!
//! ```text
//! Jaxpr --lower--> Program (kernels over buffers) --plan--> Layout (arena offsets)
//!       --codegen--> Cranelift functions, one module --native--> fn(arena, table)
//! ```
//!
//! - `lower`: calls inlined, scans as loops, elementwise chains fused into one expression
//!   per loop (broadcasts, transposes and slices folded into index arithmetic).
//! - `plan`: buffers laid out in one arena by liveness; host-memory values in a separate pool.
//! - `codegen`: loop nests over `f32x4` with scalar tails, inline f32 transcendentals,
//!   `dot_general` through faer's `matmul`.
//! - `native`: the only `unsafe` code (entering JIT code, the GEMM call, page advice).
//!
//! Architecture invariant: this is the only crate that names Cranelift types, and the
//! reference interpreter (`remat-interp`) defines what every compiled program must compute.

mod codegen;
mod cse;
mod device;
mod expr;
mod lower;
mod native;
mod plan;
mod profile;
mod program;
mod spmd;

use std::borrow::Borrow;
use std::sync::{Arc, Mutex};

use remat_ir::{Array, Aval, ClosedJaxpr, Jaxpr};

use crate::program::NativeDesc;

pub use cse::{cse, CseScope};
pub use device::{device_program, is_sharded, DeviceProgram};
pub use profile::{memory_profile, BufferHome, BufferProfile, MemoryProfile, Peak};
pub use program::DotDesc;

/// `shard_map` and the primitives that exist only inside its body, which the JIT compiles
/// unrolled over the mesh's devices (`spmd.rs`) and its random-program generator does not
/// build; the sharded conformance cases compile them (issue 46).
pub const SHARD_MAP_ONLY: &[&str] = &[
    "shard_map",
    "psum",
    "psum_invariant",
    "pmax",
    "pmin",
    "pvary",
    "all_gather",
    "reduce_scatter",
    "ppermute",
    "axis_index",
    "pbroadcast",
    "all_gather_invariant",
    "all_to_all",
];

/// Why a jaxpr could not be compiled or run.
#[derive(Debug, thiserror::Error)]
pub enum JitError {
    /// The jaxpr does not verify (or is otherwise malformed).
    #[error("invalid jaxpr: {0}")]
    Invalid(String),
    /// A primitive (or a form of one) the JIT does not lower.
    #[error("{primitive}: not supported by the JIT: {reason}")]
    Unsupported { primitive: &'static str, reason: String },
    /// Cranelift rejected the generated code (a bug in the JIT).
    #[error("code generation failed: {0}")]
    Codegen(String),
    #[error("expected {expected} arguments, got {given}")]
    ArgCount { expected: usize, given: usize },
    #[error("argument {index}: expected {expected}, got {given}")]
    ArgType { index: usize, expected: Aval, given: Aval },
    #[error("expected {expected} constants, got {given}")]
    ConstCount { expected: usize, given: usize },
    /// `run_into` was given the wrong number of output arrays.
    #[error("expected {expected} output arrays, got {given}")]
    OutCount { expected: usize, given: usize },
    /// An output array of `run_into` has the wrong dtype or shape, or is not row-major.
    #[error("output {index}: expected a row-major {expected}, got {given}")]
    OutType { index: usize, expected: Aval, given: String },
    /// The planned arena is larger than one allocation may be
    /// ([`remat_ir::max_value_bytes`]), or that limit is misconfigured.
    #[error("{0}")]
    TooLarge(String),
    /// The allocator refused a run's arena or an output (`what`), of `bytes` bytes.
    #[error("cannot allocate {bytes} bytes for {what}: out of memory")]
    OutOfMemory { what: String, bytes: usize },
}

/// What the static plan decided: memory and code sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Peak bytes of the device arena: every intermediate buffer, laid out by liveness,
    /// except those that live in an output's memory before that output is written (see
    /// `buffers_in_outputs`). A run's memory is this arena, the host pool, the arguments
    /// and the outputs.
    pub peak_bytes: usize,
    /// Bytes in host memory: the host pool of intermediate values moved there by
    /// `device_put`, plus arguments and outputs whose avals are in host memory (the
    /// offloaded residuals a forward half returns).
    pub host_bytes: usize,
    /// Bytes of the device-memory arguments and outputs, which live outside the arena.
    pub io_bytes: usize,
    /// The number of arena buffers before sharing.
    pub buffers: usize,
    /// How many of them live in the memory of an output that the program writes after
    /// they die (a gradient program's activations in the weight gradients written last),
    /// and so take no arena space.
    pub buffers_in_outputs: usize,
    /// The number of compiled functions (kernels plus the entry).
    pub functions: usize,
    /// The number of steps (fused loops and reductions) large enough to be split over the
    /// worker threads.
    pub parallel_steps: usize,
    /// The number of pairs of adjacent one-thread products that run at once, one on each
    /// of two cores (independent in memory: a layer's weight and input gradients).
    pub paired_steps: usize,
    /// The CSE scope the program was compiled under: what [`Options::cse`] asked for, with
    /// `Auto` resolved to the choice made (`AcrossCheckpoints` when a checkpoint's
    /// recompute was merged with the forward pass, `WithinCheckpoints` when it was kept).
    pub cse: CseScope,
}

/// A compiled jaxpr: native code, its constants and its buffer plan.
#[derive(Debug)]
pub struct Compiled {
    code: native::NativeCode,
    in_avals: Vec<Aval>,
    out_avals: Vec<Aval>,
    consts: Vec<Array>,
    plan: Plan,
    flops: u64,
    arena_bytes: usize,
    /// The arena and pointer table of the last run, reused by the next (a concurrent run
    /// allocates its own), so a repeated call allocates only its outputs.
    scratch: Mutex<Scratch>,
    /// Owned here because the code holds their addresses.
    _dots: Box<[DotDesc]>,
    /// Owned here because the code holds their addresses.
    _pair_sites: Box<[native::PairSite]>,
    /// The native steps' descriptors, which compiled code points into.
    _natives: Box<[NativeDesc]>,
}

/// What the front end made of a program under one CSE scope.
struct Front {
    prog: program::Program,
    consts: Vec<Array>,
    layout: plan::Layout,
    /// The merged jaxpr that was lowered, with its provenance.
    merged: cse::Traced,
}

/// The front end under one CSE scope: merged, verified, lowered and planned.
fn front(jaxpr: &Jaxpr, consts: &[Array], options: &Options, scope: CseScope) -> Result<Front, JitError> {
    let merged = cse::cse_traced(jaxpr, scope)?;
    check_cse(&merged.jaxpr)?;
    let (prog, consts) = lower::lower_program(&merged.jaxpr, consts, options)?;
    let layout = plan::plan(&prog);
    Ok(Front { prog, consts, layout, merged })
}

/// [`front`] reduced to the layout's device and host bytes: the merged jaxpr and the
/// lowered program are dropped as soon as they are planned (the memory planner keeps
/// nothing else of them).
fn front_bytes(
    jaxpr: &Jaxpr,
    consts: &[Array],
    options: &Options,
    scope: CseScope,
) -> Result<(usize, usize), JitError> {
    let merged = cse::cse_traced(jaxpr, scope)?.jaxpr;
    check_cse(&merged)?;
    let (prog, _) = lower::lower_program(&merged, consts, options)?;
    drop(merged);
    let layout = plan::plan(&prog);
    Ok((layout.device_bytes, layout.host_bytes))
}

/// Verifies CSE's output in debug builds (and so in every test), as `remat-ad` verifies
/// each pass's: CSE keeps a verified program verified, so in release builds only the
/// program given to the compiler is verified (once, [`checked_front`]).
fn check_cse(merged: &Jaxpr) -> Result<(), JitError> {
    if cfg!(debug_assertions) {
        remat_ir::verify(merged).map_err(|e| JitError::Invalid(format!("after cse (a bug in the JIT): {e}")))?;
    }
    Ok(())
}

/// Compiles a jaxpr without constvars.
pub fn compile(jaxpr: &Jaxpr) -> Result<Compiled, JitError> {
    if !jaxpr.constvars.is_empty() {
        return Err(JitError::ConstCount { expected: jaxpr.constvars.len(), given: 0 });
    }
    compile_with_consts(jaxpr, &[])
}

/// Compiles a closed jaxpr; its constants are copied into the compiled program.
pub fn compile_closed(closed: &ClosedJaxpr) -> Result<Compiled, JitError> {
    compile_with_consts(&closed.jaxpr, &closed.consts)
}

/// Choices of the code generator that are tuning, not semantics. `Options::default()` is
/// what [`compile`] uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// `dot_general`s of at most this many multiply-adds (`batch*m*n*k`) become loops
    /// compiled for their shape; larger ones call the tuned GEMM. The default is the
    /// measured crossover on the reference machine (docs/jit.md).
    pub small_dot_macs: usize,
    /// Where equal equations are merged before lowering (see [`cse`]). The default,
    /// [`CseScope::Auto`], merges a checkpoint's recompute with the forward pass (as XLA
    /// does on CPU) only when the planned peak memory does not grow;
    /// [`CseScope::WithinCheckpoints`] always does the recompute, as JAX means
    /// `prevent_cse`; [`CseScope::AcrossCheckpoints`] always merges.
    pub cse: CseScope,
    /// Whether a kernel that writes a buffer live at the planned peak may fold into its
    /// only consumer past the fusion size limit (up to twice it), when the consumer reads
    /// every input of the kernel anyway and the fold lowers the planned peak. It can cost a
    /// little time (a `tanh` computed inside the consumer's loop rather than by its own
    /// widest-vector kernel). The memory planner of the facade searches with it off, so
    /// that a candidate's peak follows its residual bytes; the program it compiles with it
    /// on has at most the peak the planner measured.
    pub fold_at_peak: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { small_dot_macs: lower::SMALL_DOT_MACS, cse: CseScope::default(), fold_at_peak: true }
    }
}

/// Compiles `jaxpr` with `consts` bound to its constvars.
pub fn compile_with_consts(jaxpr: &Jaxpr, consts: &[Array]) -> Result<Compiled, JitError> {
    compile_with_options(jaxpr, consts, &Options::default())
}

/// What the buffer planner decides for a program, without generating code: the same
/// numbers [`Compiled::plan`] reports for the same jaxpr, constants and options (the same
/// CSE choice, the same layout), at the cost of lowering and planning only. The memory
/// planner of the facade evaluates candidate programs with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    /// As [`Plan::peak_bytes`]: the device arena.
    pub peak_bytes: usize,
    /// As [`Plan::host_bytes`].
    pub host_bytes: usize,
    /// As [`Plan::io_bytes`].
    pub io_bytes: usize,
    /// As [`Plan::cse`].
    pub cse: CseScope,
}

/// Lowers and plans `jaxpr` as [`compile_with_options`] would, without generating code. For
/// a sharded program ([`is_sharded`]) the plan is one device's: that of the program device
/// 0 runs ([`device_program`]), while the compiled program simulates every device.
/// (Under `Auto` it plans the two scopes one after the other and keeps only their bytes,
/// so that one lowered program at a time is held.)
pub fn memory_plan(jaxpr: &Jaxpr, consts: &[Array], options: &Options) -> Result<MemoryPlan, JitError> {
    check_input(jaxpr, consts)?;
    // A sharded program's memory is one device's: the program device 0 runs
    // (`device.rs`), planned as any program is.
    if is_sharded(jaxpr) {
        let dp = device_program(jaxpr)?;
        return plan_bytes(&dp.jaxpr, consts, options);
    }
    plan_bytes(jaxpr, consts, options)
}

/// [`memory_plan`] of an unsharded program.
fn plan_bytes(jaxpr: &Jaxpr, consts: &[Array], options: &Options) -> Result<MemoryPlan, JitError> {
    let (scope, (device, host)) =
        choose_scope(jaxpr, options, |scope| front_bytes(jaxpr, consts, options, scope), |&bytes| bytes)?;
    let (io_bytes, host_io) = io_bytes(jaxpr);
    Ok(MemoryPlan { peak_bytes: device, host_bytes: host + host_io, io_bytes, cse: scope })
}

/// Memory plans already made, by program: [`memory_plan_cached`] plans a program equal to
/// one planned before (the same jaxpr, constants and options) once. A planner that
/// evaluates many candidate programs, some of them the same (a built-in policy's program
/// and a plan's), holds one.
#[derive(Debug, Default)]
pub struct MemoryPlanCache {
    /// Two independently keyed hashers: a program is known by its two 64-bit digests
    /// (and its description's length), so two different programs are taken for one only
    /// with a probability of about `2^-128` per pair.
    keys: (std::collections::hash_map::RandomState, std::collections::hash_map::RandomState),
    plans: Mutex<std::collections::HashMap<ProgramKey, Arc<std::sync::OnceLock<Option<MemoryPlan>>>>>,
}

/// A program's two digests and its description's length ([`MemoryPlanCache`]).
type ProgramKey = (u64, u64, usize);

/// Feeds formatted text to two hashers without building the text.
struct Digest {
    hashers: (std::hash::DefaultHasher, std::hash::DefaultHasher),
    len: usize,
}

impl std::fmt::Write for Digest {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        use std::hash::Hasher;
        self.hashers.0.write(s.as_bytes());
        self.hashers.1.write(s.as_bytes());
        self.len += s.len();
        Ok(())
    }
}

impl MemoryPlanCache {
    /// How many distinct programs were planned through the cache.
    pub fn len(&self) -> usize {
        self.plans.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key of a program: the digests of its full description (`Debug`: every
    /// variable, equation, parameter and nested jaxpr), its constants' values and the
    /// options.
    fn key(&self, jaxpr: &Jaxpr, consts: &[Array], options: &Options) -> ProgramKey {
        use std::fmt::Write;
        use std::hash::{BuildHasher, Hasher};
        let mut d = Digest { hashers: (self.keys.0.build_hasher(), self.keys.1.build_hasher()), len: 0 };
        // Writing into a digest cannot fail.
        let _ = write!(d, "{options:?}\n{jaxpr:?}");
        for c in consts {
            let _ = write!(d, "\n{}:", c.aval());
            let bytes = c.to_le_bytes();
            d.hashers.0.write(&bytes);
            d.hashers.1.write(&bytes);
            d.len += bytes.len();
        }
        (d.hashers.0.finish(), d.hashers.1.finish(), d.len)
    }
}

/// [`memory_plan`], planning each distinct program once per `cache` (the plan of a program
/// equal to one planned before is that one's; the same program planned at once by two
/// threads is planned by one while the other waits).
pub fn memory_plan_cached(
    jaxpr: &Jaxpr,
    consts: &[Array],
    options: &Options,
    cache: &MemoryPlanCache,
) -> Result<MemoryPlan, JitError> {
    let key = cache.key(jaxpr, consts, options);
    let slot = {
        let mut plans = cache.plans.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(plans.entry(key).or_default())
    };
    match slot.get_or_init(|| memory_plan(jaxpr, consts, options).ok()) {
        Some(plan) => Ok(plan.clone()),
        // A program that failed fails again, with its error.
        None => memory_plan(jaxpr, consts, options),
    }
}

/// The bytes of the arguments and outputs in device memory and in host memory.
pub(crate) fn io_bytes(jaxpr: &Jaxpr) -> (usize, usize) {
    let (ins, outs) = (jaxpr.in_avals(), jaxpr.out_avals());
    let io = |host: bool| -> usize {
        ins.iter()
            .chain(&outs)
            .filter(|a| (a.memory_space == remat_ir::MemorySpace::Host) == host)
            .map(Aval::size_in_bytes)
            .sum()
    };
    (io(false), io(true))
}

/// Verifies `jaxpr` and its constants, and runs the front end under the CSE scope
/// `options` resolves to (for `Auto`, the merged program only if its plan is no larger).
fn checked_front(jaxpr: &Jaxpr, consts: &[Array], options: &Options) -> Result<(CseScope, Front), JitError> {
    check_input(jaxpr, consts)?;
    choose_scope(
        jaxpr,
        options,
        |scope| front(jaxpr, consts, options, scope),
        |f: &Front| (f.layout.device_bytes, f.layout.host_bytes),
    )
}

/// Verifies `jaxpr` and its constants.
fn check_input(jaxpr: &Jaxpr, consts: &[Array]) -> Result<(), JitError> {
    remat_ir::verify(jaxpr).map_err(|e| JitError::Invalid(e.to_string()))?;
    if consts.len() != jaxpr.constvars.len() {
        return Err(JitError::ConstCount { expected: jaxpr.constvars.len(), given: consts.len() });
    }
    for (c, &v) in consts.iter().zip(&jaxpr.constvars) {
        if !c.aval().same_type(jaxpr.aval(v)) {
            return Err(JitError::Invalid(format!("constant {v:?} is {} but declared {}", c.aval(), jaxpr.aval(v))));
        }
    }
    Ok(())
}

/// Runs the front end (`run`, whose planned device and host bytes `bytes` reads) under the
/// CSE scope `options` resolves to: for `Auto` with a barrier both scopes, keeping the
/// merged one if its plan is no larger.
fn choose_scope<T>(
    jaxpr: &Jaxpr,
    options: &Options,
    mut run: impl FnMut(CseScope) -> Result<T, JitError>,
    bytes: impl Fn(&T) -> (usize, usize),
) -> Result<(CseScope, T), JitError> {
    Ok(match options.cse {
        CseScope::Auto if cse::has_barrier(jaxpr) => {
            let strict = run(CseScope::WithinCheckpoints)?;
            let merged = run(CseScope::AcrossCheckpoints)?;
            let ((sd, sh), (md, mh)) = (bytes(&strict), bytes(&merged));
            if md <= sd && mh <= sh {
                (CseScope::AcrossCheckpoints, merged)
            } else {
                (CseScope::WithinCheckpoints, strict)
            }
        }
        // Without a barrier the two scopes are the same pass.
        CseScope::Auto => (CseScope::WithinCheckpoints, run(CseScope::WithinCheckpoints)?),
        scope => (scope, run(scope)?),
    })
}

/// Compiles `jaxpr` with `consts` bound to its constvars, under `options`.
pub fn compile_with_options(jaxpr: &Jaxpr, consts: &[Array], options: &Options) -> Result<Compiled, JitError> {
    // What the lowering computes of constants, it computes as the program would.
    let _env = remat_math::XlaFloatEnv::enter();
    // A `shard_map` runs unrolled over the devices of its mesh (`spmd.rs`).
    let lowered;
    let jaxpr = if spmd::has_shard_map(jaxpr) {
        remat_ir::verify(jaxpr).map_err(|e| JitError::Invalid(e.to_string()))?;
        lowered = spmd::lower(jaxpr)?;
        &lowered
    } else {
        jaxpr
    };
    let (scope, Front { prog, consts, layout, .. }) = checked_front(jaxpr, consts, options)?;
    if std::env::var_os("REMAT_JIT_STEPS").is_some() {
        // Debugging aid: the lowered steps (what each kernel computes) on stderr.
        for (i, step) in prog.steps.iter().enumerate() {
            eprintln!("step {i}: {}", program::describe(step, &prog));
        }
    }
    let flops = dot_flops(&prog.steps, &prog.dots);
    let dots: Box<[DotDesc]> = prog.dots.clone().into_boxed_slice();
    let dot_addrs: Vec<usize> = dots.iter().map(|d| d as *const DotDesc as usize).collect();
    let natives: Box<[NativeDesc]> = prog.natives.clone().into_boxed_slice();
    let native_addrs: Vec<usize> = natives.iter().map(|d| d as *const NativeDesc as usize).collect();
    let pair_sites: Box<[native::PairSite]> =
        (0..codegen::pair_candidates(&prog.steps)).map(|_| native::PairSite::default()).collect();
    let pair_addrs: Vec<usize> = pair_sites.iter().map(|s| s as *const native::PairSite as usize).collect();
    let built = codegen::build(&prog, &layout, &dot_addrs, &native_addrs, &pair_addrs)?;
    let in_avals = jaxpr.in_avals();
    let out_avals = jaxpr.out_avals();
    let (io_bytes, host_io) = io_bytes(jaxpr);
    let buffers = prog.buffers.iter().filter(|b| matches!(b.storage, program::Storage::Arena { .. })).count();
    let plan = Plan {
        peak_bytes: layout.device_bytes,
        host_bytes: layout.host_bytes + host_io,
        io_bytes,
        buffers,
        buffers_in_outputs: layout.buffers_in_outputs(),
        functions: built.code_functions,
        parallel_steps: built.parallel_steps,
        paired_steps: built.paired_steps,
        cse: scope,
    };
    let arena_bytes = layout.device_bytes.saturating_add(layout.host_bytes);
    let limit = remat_ir::max_value_bytes().map_err(JitError::TooLarge)?;
    if arena_bytes > limit {
        return Err(JitError::TooLarge(format!(
            "the plan's arena needs {}; {}",
            remat_ir::format_bytes(arena_bytes as u128),
            remat_ir::types::limit_words(limit)
        )));
    }
    Ok(Compiled {
        code: native::NativeCode::new(built.module, built.entry),
        in_avals,
        out_avals,
        consts: consts.into_iter().map(standard_layout).collect(),
        plan,
        flops,
        arena_bytes,
        scratch: Mutex::new(Scratch::default()),
        _dots: dots,
        _natives: natives,
        _pair_sites: pair_sites,
    })
}

/// What a run needs besides its arguments and outputs.
#[derive(Debug, Default)]
struct Scratch {
    arena: Vec<u8>,
    table: Vec<usize>,
}

/// Floating-point operations of the products (`2*m*n*k` per GEMM), loops counted per trip.
fn dot_flops(steps: &[program::Step], dots: &[DotDesc]) -> u64 {
    steps
        .iter()
        .map(|s| match s {
            program::Step::Dot { desc, .. } => {
                let d = &dots[*desc];
                let batch: usize = d.batch.iter().map(|b| b.0).product();
                2 * (batch * d.m * d.n * d.k) as u64
            }
            program::Step::Loop { length, body, .. } => *length as u64 * dot_flops(body, dots),
            // The most expensive branch; one trip of a while loop (its count is dynamic).
            program::Step::Switch { branches, .. } => branches.iter().map(|b| dot_flops(b, dots)).max().unwrap_or(0),
            program::Step::While { cond, body, .. } => dot_flops(cond, dots) + dot_flops(body, dots),
            _ => 0,
        })
        .sum()
}

fn standard_layout(a: Array) -> Array {
    remat_ir::map_array!(a, x => x.as_standard_layout().into_owned())
}

fn data_ptr(a: &Array) -> usize {
    remat_ir::for_each_array!(a, x => x.as_ptr() as usize)
}

fn data_ptr_mut(a: &mut Array) -> usize {
    remat_ir::for_each_array!(a, x => x.as_mut_ptr() as usize)
}

fn is_standard(a: &Array) -> bool {
    remat_ir::for_each_array!(a, x => x.is_standard_layout())
}

impl Compiled {
    /// Runs the program. Every argument's dtype and shape is checked before native code runs.
    /// The outputs are fresh arrays; [`Compiled::run_into`] writes into existing ones. An
    /// output of 2 MiB or more starts on a 2 MiB boundary inside its allocation, advised onto
    /// transparent huge pages on Linux, so that writing it costs a few page faults instead of
    /// one per 4 KiB (`ndarray`'s `into_raw_vec_and_offset` gives its offset). A smaller
    /// output is allocated without zeroing, since the run writes every element: where the
    /// allocator hands back memory a previous call's outputs freed, it costs nothing more.
    /// Arguments may be given as owned arrays or references (`&[Array]` or `&[&Array]`).
    pub fn run<A: Borrow<Array>>(&self, args: &[A]) -> Result<Vec<Array>, JitError> {
        self.check_args(args)?;
        let outs: Vec<native::Fresh> = self.out_avals.iter().map(native::fresh_output).collect::<Result<_, _>>()?;
        self.run_checked(args, outs.iter().map(|o| o.ptr))?;
        // The run returned, having written every element of every output.
        Ok(outs.into_iter().map(native::Fresh::written).collect())
    }

    /// Runs the program writing its results into `outs`, which must have the output avals
    /// (`out_avals`) in row-major layout, for example the arrays a previous `run` returned.
    /// With the arena reused too, a repeated call allocates nothing: a training loop keeps
    /// its gradient arrays, and no page of them is faulted in again on each step. Their old
    /// contents are never read: before writing an output, the program may keep intermediate
    /// values in its memory (`Plan::buffers_in_outputs`).
    pub fn run_into<A: Borrow<Array>>(&self, args: &[A], outs: &mut [Array]) -> Result<(), JitError> {
        self.check_args(args)?;
        if outs.len() != self.out_avals.len() {
            return Err(JitError::OutCount { expected: self.out_avals.len(), given: outs.len() });
        }
        for (index, (o, expected)) in outs.iter().zip(&self.out_avals).enumerate() {
            if o.dtype() != expected.dtype || o.shape() != expected.shape.as_slice() || !is_standard(o) {
                let layout = if is_standard(o) { "" } else { " (not row-major)" };
                return Err(JitError::OutType {
                    index,
                    expected: expected.clone(),
                    given: format!("{}{layout}", o.aval()),
                });
            }
        }
        self.run_checked(args, outs.iter_mut().map(data_ptr_mut))
    }

    fn check_args<A: Borrow<Array>>(&self, args: &[A]) -> Result<(), JitError> {
        if args.len() != self.in_avals.len() {
            return Err(JitError::ArgCount { expected: self.in_avals.len(), given: args.len() });
        }
        for (index, (a, expected)) in args.iter().zip(&self.in_avals).enumerate() {
            let a: &Array = a.borrow();
            if a.dtype() != expected.dtype || a.shape() != expected.shape.as_slice() {
                return Err(JitError::ArgType { index, expected: expected.clone(), given: a.aval() });
            }
        }
        Ok(())
    }

    /// Runs on checked arguments, writing the outputs at `outs` (each large enough for its
    /// aval, row-major). The outputs are distinct owned allocations, so they overlap
    /// neither each other nor an argument.
    fn run_checked<A: Borrow<Array>>(&self, args: &[A], outs: impl Iterator<Item = usize>) -> Result<(), JitError> {
        // Non-contiguous inputs are copied; the code reads row-major memory. (No other
        // allocation on this path: a repeated `run_into` allocates nothing.)
        let args = || args.iter().map(Borrow::borrow);
        let owned: Vec<Option<Array>> = if args().all(is_standard) {
            Vec::new()
        } else {
            args().map(|a| if is_standard(a) { None } else { Some(standard_layout(a.clone())) }).collect()
        };
        let mut fresh = Scratch::default();
        let mut guard = self.scratch.try_lock().ok();
        let scratch: &mut Scratch = match guard.as_deref_mut() {
            Some(s) => s,
            None => &mut fresh,
        };
        let table = &mut scratch.table;
        table.clear();
        table.extend(args().enumerate().map(|(i, a)| data_ptr(owned.get(i).and_then(Option::as_ref).unwrap_or(a))));
        table.extend(self.consts.iter().map(data_ptr));
        table.extend(outs);

        let need = self.arena_bytes + plan::ALIGN;
        let arena = &mut scratch.arena;
        if arena.len() < need {
            *arena = native::try_zeroed(need)
                .ok_or_else(|| JitError::OutOfMemory { what: "the arena".into(), bytes: need })?;
        }
        let skew = (arena.as_ptr() as usize).wrapping_neg() % plan::ALIGN;
        self.code.call(&mut arena[skew..skew + self.arena_bytes], table);
        Ok(())
    }

    /// Floating-point operations one run spends in `dot_general` (`2*m*n*k` per product),
    /// for reporting GFLOP/s.
    pub fn dot_flops(&self) -> u64 {
        self.flops
    }

    /// The static memory plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn in_avals(&self) -> &[Aval] {
        &self.in_avals
    }

    pub fn out_avals(&self) -> &[Aval] {
        &self.out_avals
    }
}

#[cfg(test)]
mod tests {
    use remat_ir::parse_jaxpr;

    use super::*;

    /// The memory a run takes is the plan's figure: the arena is allocated once, at the
    /// planned size (plus the alignment slack), and reused by the next run.
    #[test]
    fn a_run_allocates_the_planned_arena_once() {
        let text = "{ lambda ; a:f32[8,16] b:f32[16,4]. let
    c:f32[8,4] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] a b
    d:f32[8,4] = tanh c
    e:f32[8,4] = mul d d
    f:f32[4] = reduce_sum[axes=(0,) out_sharding=None] e
  in (f,) }";
        let jaxpr = parse_jaxpr(text, "t").expect("parses");
        let c = compile(&jaxpr).expect("compiles");
        let args = [Array::zeros(&jaxpr.in_avals()[0]), Array::zeros(&jaxpr.in_avals()[1])];
        c.run(&args).expect("runs");
        let ptr = c.scratch.lock().expect("not poisoned").arena.as_ptr();
        c.run(&args).expect("runs");
        let arena = &c.scratch.lock().expect("not poisoned").arena;
        assert_eq!(arena.len(), c.plan().peak_bytes + c.plan.host_bytes + plan::ALIGN);
        assert_eq!(arena.as_ptr(), ptr);
        assert!(c.plan().peak_bytes > 0);
    }

    /// Fresh outputs of half a huge page or more (`b`: 1.07 MiB) start on a huge-page
    /// boundary and are ordinary row-major arrays holding the right values, also when their
    /// size is not a multiple of the page; smaller ones are plain arrays (allocated unzeroed: the run writes every
    /// element). Either kind is accepted by `run_into`.
    #[test]
    fn fresh_outputs_of_half_a_huge_page_or_more_start_on_a_huge_page() {
        let text = "{ lambda ; a:f32[3,200003] b:f64[140001] c:i32[700001] d:f32[5]. let
    e:f32[3,200003] = mul a a
    f:f64[140001] = neg b
    g:i32[700001] = add c c
    h:f32[5] = sin d
  in (e, f, g, h) }";
        let jaxpr = parse_jaxpr(text, "t").expect("parses");
        let c = compile(&jaxpr).expect("compiles");
        let avals = jaxpr.in_avals();
        let a = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&avals[0].shape), |i| (i[0] * 7 + i[1] % 13) as f32);
        let b = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&avals[1].shape), |i| i[0] as f64);
        let cc = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&avals[2].shape), |i| i[0] as i32 - 9);
        let d = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&avals[3].shape), |i| i[0] as f32);
        let args = [Array::F32(a.clone()), Array::F64(b.clone()), Array::I32(cc.clone()), Array::F32(d.clone())];
        let mut outs = c.run(&args).expect("runs");
        for _ in 0..2 {
            assert!(outs.iter().all(is_standard));
            assert_eq!(outs[0], Array::F32(a.mapv(|x| x * x)));
            assert_eq!(outs[1], Array::F64(b.mapv(|x| -x)));
            assert_eq!(outs[2], Array::I32(cc.mapv(|x| x + x)));
            assert_eq!(outs[3], Array::F32(d.mapv(f32::sin)));
            if cfg!(target_os = "linux") {
                for o in &outs[..3] {
                    assert_eq!(data_ptr(o) % (2 << 20), 0, "{} starts on a huge page", o.aval());
                }
            }
            c.run_into(&args, &mut outs).expect("runs into the fresh outputs");
        }
    }
}

//! The back end: a planned [`Program`] becomes native code through Cranelift.
//!
//! Every step except a loop is one Cranelift function `fn(bases)`, where `bases` points at
//! the base addresses of the step's buffers in `Step::canonical_buffers` order; steps with
//! the same `Step::code_key` (the same loop over different buffers: every layer of an MLP)
//! share one function. The entry function `fn(arena, table)` computes every buffer's base
//! address once, then for each step stores the step's bases into a stack slot and calls
//! its function, and runs loops natively (`counter <- i; call body kernels`). A step with
//! enough work to split over threads (`kernel::parallel_split`) is instead a range function
//! `fn(bases, lo, hi)` that runs one slice of its split dimension (plus, for a reduction,
//! a serial prologue `fn(bases)` that fills the destination); the entry hands its address
//! to the runtime's `parallel_for`. `arena` is the base of the planned arena (the host
//! pool follows the device part), `table` points at the pointers of the arguments,
//! constants and outputs, in that order. All functions are defined in one module and
//! finalized once.
//!
//! What it keeps true: generated code addresses only buffers of the plan (arena offsets
//! below the planned size, table pointers to arrays of the planned sizes); every index it
//! computes stays inside its view, dynamic offsets included, because dynamic starts are
//! clamped. With `debug_assertions` (tests, debug builds) Cranelift's verifier runs on
//! every function.

mod bits;
mod convert;
mod eval;
mod int;
mod kernel;
mod math;
mod math32;
mod narrow;

use std::collections::HashMap;

use cranelift_codegen::ir::{
    types, AbiParam, FuncRef, InstBuilder, MemFlagsData, Signature, StackSlot, StackSlotData, StackSlotKind, Type,
    UserFuncName, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use remat_ir::DType;

use crate::native::{Import, ImportSig};
use crate::plan::{Home, Layout};
use crate::program::{BufId, Program, Step, Storage};
use crate::JitError;

/// The finished module and its entry point.
pub(crate) struct Built {
    pub module: JITModule,
    pub entry: FuncId,
    pub code_functions: usize,
    pub parallel_steps: usize,
    pub paired_steps: usize,
}

fn codegen_err(e: impl std::fmt::Display) -> JitError {
    JitError::Codegen(e.to_string())
}

/// What every function emitter shares.
pub(crate) struct Env<'a> {
    pub prog: &'a Program,
    pub layout: &'a Layout,
    pub imports: HashMap<Import, FuncId>,
    pub fma: bool,
    /// Addresses of the dot descriptors (owned by the compiled program).
    pub dot_descs: &'a [usize],
    /// Addresses of the native steps' descriptors (owned by the compiled program).
    pub native_descs: &'a [usize],
    /// Addresses of the pair sites (`native::PairSite`, owned by the compiled program),
    /// at least [`pair_candidates`] of them, and the next one to hand out.
    pub pair_sites: &'a [usize],
    pub next_pair_site: std::cell::Cell<usize>,
}

pub(crate) fn build(
    prog: &Program,
    layout: &Layout,
    dot_descs: &[usize],
    native_descs: &[usize],
    pair_sites: &[usize],
) -> Result<Built, JitError> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(codegen_err)?;
    flags.set("enable_verifier", if cfg!(debug_assertions) { "true" } else { "false" }).map_err(codegen_err)?;
    flags.set("is_pic", "false").map_err(codegen_err)?;
    flags.set("use_colocated_libcalls", "false").map_err(codegen_err)?;
    let isa_builder = cranelift_native::builder().map_err(codegen_err)?;
    let isa = isa_builder.finish(settings::Flags::new(flags)).map_err(codegen_err)?;
    let fma = isa.has_native_fma();
    let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
    for imp in Import::ALL {
        jb.symbol(imp.name(), imp.address());
    }
    let mut module = JITModule::new(jb);
    let mut imports = HashMap::new();
    for imp in Import::ALL {
        let sig = import_signature(&module, imp.signature());
        let id = module.declare_function(imp.name(), Linkage::Import, &sig).map_err(codegen_err)?;
        imports.insert(imp, id);
    }
    let next_pair_site = std::cell::Cell::new(0);
    let env = Env { prog, layout, imports, fma, dot_descs, native_descs, pair_sites, next_pair_site };
    let mut fctx = FunctionBuilderContext::new();
    let mut count = 0usize;
    let mut compiled = HashMap::new();
    let kernels = define_kernels(&mut module, &env, &mut fctx, &prog.steps, &mut count, &mut compiled)?;
    // The entry runs the steps in chunks of at most `ENTRY_CHUNK_STEPS`, each chunk a
    // function of its own, so no function grows with the program: Cranelift's passes
    // (register allocation above all) are superlinear in a function's size.
    let chunks = entry_chunks(&prog.steps, ENTRY_CHUNK_STEPS);
    let run_steps = |fx: &mut Fx, range: std::ops::Range<usize>| {
        // Room for two steps' bases: a pair of steps run at once (`pair_with_next`).
        let widest = max_buffers(&prog.steps[range.clone()]);
        let size = (2 * widest.max(1) * 8) as u32;
        let slot = fx.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, size, 3));
        fx.emit_steps(&prog.steps[range.clone()], &kernels[range], slot);
    };
    let entry = if chunks.len() <= 1 {
        define_function(
            &mut module,
            &mut fctx,
            "entry",
            FnKind::Entry,
            &[],
            |fx| {
                run_steps(fx, 0..prog.steps.len());
                Ok(())
            },
            &env,
        )?
    } else {
        let mut parts = Vec::with_capacity(chunks.len());
        for (i, range) in chunks.iter().enumerate() {
            let name = format!("entry part {i} (steps {}..{})", range.start, range.end);
            parts.push(define_function(
                &mut module,
                &mut fctx,
                &name,
                FnKind::Entry,
                &[],
                |fx| {
                    run_steps(fx, range.clone());
                    Ok(())
                },
                &env,
            )?);
            count += 1;
        }
        define_function(
            &mut module,
            &mut fctx,
            "entry",
            FnKind::Entry,
            &[],
            |fx| {
                let Addressing::Entry { arena, table } = fx.addressing else { unreachable!("the entry's addressing") };
                for &part in &parts {
                    let fr = fx.func_ref(part);
                    fx.b.ins().call(fr, &[arena, table]);
                }
                Ok(())
            },
            &env,
        )?
    };
    module.finalize_definitions().map_err(codegen_err)?;
    let parallel_steps = count_parallel(&kernels);
    // Each pair the entry emitted took one site.
    let paired_steps = env.next_pair_site.get();
    Ok(Built { module, entry, code_functions: count + 1, parallel_steps, paired_steps })
}

fn import_signature(module: &JITModule, sig: ImportSig) -> Signature {
    let mut s = module.make_signature();
    let (params, ret): (&[Type], Option<Type>) = match sig {
        ImportSig::F32ToF32 => (&[types::F32], Some(types::F32)),
        ImportSig::F64ToF64 => (&[types::F64], Some(types::F64)),
        ImportSig::F64F64ToF64 => (&[types::F64, types::F64], Some(types::F64)),
        ImportSig::Dot => (&[types::I64; 4], None),
        ImportSig::ParallelFor => (&[types::I64; 4], None),
        ImportSig::Pair => (&[types::I64; 5], None),
        ImportSig::Slice | ImportSig::Native => (&[types::I64; 2], None),
        ImportSig::AddRow => (&[types::I64; 5], None),
        ImportSig::OpF32ToF32 => (&[types::I32, types::F32], Some(types::F32)),
        ImportSig::OpF64ToF64 => (&[types::I32, types::F64], Some(types::F64)),
        ImportSig::OpF32F32ToF32 => (&[types::I32, types::F32, types::F32], Some(types::F32)),
        ImportSig::OpF64F64ToF64 => (&[types::I32, types::F64, types::F64], Some(types::F64)),
    };
    s.params.extend(params.iter().map(|&t| AbiParam::new(t)));
    s.returns.extend(ret.map(AbiParam::new));
    s
}

/// The most steps (loop bodies and branches counted in) one entry function runs.
const ENTRY_CHUNK_STEPS: usize = 256;

/// The top-level steps cut into consecutive ranges of at most `limit` steps each, counting
/// the steps nested in loops and branches; a step larger than `limit` is a range of its own.
fn entry_chunks(steps: &[Step], limit: usize) -> Vec<std::ops::Range<usize>> {
    let mut chunks = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, step) in steps.iter().enumerate() {
        let n = step_count(step);
        if size > 0 && size + n > limit {
            chunks.push(start..i);
            (start, size) = (i, 0);
        }
        size += n;
    }
    if start < steps.len() {
        chunks.push(start..steps.len());
    }
    chunks
}

/// A step and every step nested in it.
fn step_count(step: &Step) -> usize {
    1 + match step {
        Step::Loop { body, .. } => body.iter().map(step_count).sum(),
        Step::Switch { branches, .. } => branches.iter().flatten().map(step_count).sum(),
        Step::While { cond, body, .. } => cond.iter().chain(body).map(step_count).sum(),
        Step::Kernel { .. } | Step::Reduce { .. } | Step::Argmax { .. } | Step::Dot { .. } | Step::Native { .. } => 0,
    }
}

/// The widest base-address array any step needs.
fn max_buffers(steps: &[Step]) -> usize {
    steps
        .iter()
        .map(|s| match s {
            Step::Loop { body, .. } => max_buffers(body),
            Step::Switch { branches, .. } => branches.iter().map(|b| max_buffers(b)).max().unwrap_or(0),
            Step::While { cond, body, .. } => max_buffers(cond).max(max_buffers(body)),
            Step::Dot { .. } | Step::Native { .. } => s.canonical_buffers().len() + 1,
            _ => s.canonical_buffers().len(),
        })
        .max()
        .unwrap_or(0)
}

/// The kernel functions of `steps` (loops recurse into their bodies), by step position.
/// `compiled` maps a step's code key to the functions already compiled for it.
fn define_kernels(
    module: &mut JITModule,
    env: &Env,
    fctx: &mut FunctionBuilderContext,
    steps: &[Step],
    count: &mut usize,
    compiled: &mut HashMap<String, Kernels>,
) -> Result<Vec<Kernels>, JitError> {
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        if let Step::Loop { body, .. } = step {
            out.push(Kernels::Loop(define_kernels(module, env, fctx, body, count, compiled)?));
            continue;
        }
        let nested: Option<Vec<&Vec<Step>>> = match step {
            Step::Switch { branches, .. } => Some(branches.iter().collect()),
            Step::While { cond, body, .. } => Some(vec![cond, body]),
            _ => None,
        };
        if let Some(lists) = nested {
            let inner = lists
                .into_iter()
                .map(|l| define_kernels(module, env, fctx, l, count, compiled))
                .collect::<Result<Vec<_>, _>>()?;
            out.push(Kernels::Nested(inner));
            continue;
        }
        let split = kernel::parallel_split(step);
        let desc = match step {
            Step::Dot { desc, .. } => Some(&env.prog.dots[*desc]),
            _ => None,
        };
        let key = format!("{}|{split:?}|{desc:?}", step.code_key());
        if let Some(k) = compiled.get(&key) {
            out.push(k.clone());
            continue;
        }
        let canon = step.canonical_buffers();
        // The name says what the function computes: Cranelift's JIT writes it to the perf
        // map (`/tmp/perf-PID.map`) when run under `perf record`, and errors quote it.
        let (id, what) = (*count, crate::program::describe(step, env.prog));
        let name = format!("k{id} {what}");
        *count += 1;
        let kernels = match split {
            None => Kernels::Func(define_function(
                module,
                fctx,
                &name,
                FnKind::Kernel,
                &canon,
                |fx| fx.emit_step(step),
                env,
            )?),
            Some(split) => {
                let prologue = match step {
                    Step::Reduce { op, space, axes, dst, src, accumulate: false } => {
                        let fill = |fx: &mut Fx| {
                            fx.load_bases(&[*dst]);
                            fx.reduce_fill(*op, space, axes, *dst, src.dtype());
                            Ok(())
                        };
                        *count += 1;
                        let name = format!("k{id}_fill {what}");
                        Some(define_function(module, fctx, &name, FnKind::Kernel, &canon, fill, env)?)
                    }
                    _ => None,
                };
                let func = define_function(module, fctx, &name, FnKind::Range, &canon, |fx| fx.emit_step(step), env)?;
                Kernels::Parallel { prologue, func, split }
            }
        };
        compiled.insert(key, kernels.clone());
        out.push(kernels);
    }
    Ok(out)
}

/// Two adjacent steps run at once, and which thread runs which.
struct Pair<'s> {
    here: (&'s Step, FuncId),
    helper: (&'s Step, FuncId),
}

/// Whether step `i` may run at once with step `i + 1` (`remat_pair`, which decides by timing
/// both ways): two adjacent products that each run on one thread (`native::dot_pairs`) and
/// are independent in memory (neither writes bytes the other reads or writes, by the
/// layout's places), so each computes what it computes alone. (A layer's weight and input
/// gradients in a small MLP's backward.)
///
/// The step whose result the step after the pair reads runs on this thread, the other on
/// the helper: on this machine moving a freshly written 8 KiB result between cores costs
/// about what the product does (mlp_small ran 34 -> 45 us with the input gradient on the
/// helper, 34 -> 28 us with the weight gradient there).
fn pair_with_next<'s>(env: &Env, steps: &'s [Step], kernels: &[Kernels], i: usize) -> Option<Pair<'s>> {
    let (Kernels::Func(fa), Kernels::Func(fb)) = (kernels.get(i)?, kernels.get(i + 1)?) else {
        return None;
    };
    let pairs = |s: &Step| matches!(s, Step::Dot { desc, .. } if crate::native::dot_pairs(&env.prog.dots[*desc]));
    let (a, b) = (&steps[i], &steps[i + 1]);
    if !pairs(a) || !pairs(b) {
        return None;
    }
    let (mut wa, mut wb, mut ta, mut tb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    a.writes(&mut wa);
    b.writes(&mut wb);
    a.buffers(&mut ta);
    b.buffers(&mut tb);
    let clash =
        |ws: &[BufId], ts: &[BufId]| ws.iter().any(|&w| ts.iter().any(|&t| env.layout.may_overlap(env.prog, w, t)));
    if clash(&wa, &tb) || clash(&wb, &ta) {
        return None;
    }
    let read_next = |ws: &[BufId]| steps.get(i + 2).is_some_and(|n| ws.iter().any(|&w| n.touches(w)));
    Some(if read_next(&wa) && !read_next(&wb) {
        Pair { here: (a, *fa), helper: (b, *fb) }
    } else {
        Pair { here: (b, *fb), helper: (a, *fa) }
    })
}

/// An upper bound on the pairs `pair_with_next` finds (in `steps` and every step list nested
/// in them): the adjacent products.
pub(crate) fn pair_candidates(steps: &[Step]) -> usize {
    let adjacent = steps.windows(2).filter(|w| matches!(w, [Step::Dot { .. }, Step::Dot { .. }])).count();
    let nested: usize = steps
        .iter()
        .map(|s| match s {
            Step::Loop { body, .. } => pair_candidates(body),
            Step::Switch { branches, .. } => branches.iter().map(|b| pair_candidates(b)).sum(),
            Step::While { cond, body, .. } => pair_candidates(cond) + pair_candidates(body),
            _ => 0,
        })
        .sum();
    adjacent + nested
}

fn count_parallel(kernels: &[Kernels]) -> usize {
    kernels
        .iter()
        .map(|k| match k {
            Kernels::Func(_) => 0,
            Kernels::Parallel { .. } => 1,
            Kernels::Loop(inner) => count_parallel(inner),
            Kernels::Nested(lists) => lists.iter().map(|l| count_parallel(l)).sum(),
        })
        .sum()
}

/// The compiled form of a step list, mirroring its structure.
#[derive(Clone)]
pub(crate) enum Kernels {
    Func(FuncId),
    /// A range function run by `parallel_for` over `0..split.total`, after `prologue`.
    Parallel {
        prologue: Option<FuncId>,
        func: FuncId,
        split: kernel::Split,
    },
    Loop(Vec<Kernels>),
    /// A switch's branches, or a while loop's cond and body.
    Nested(Vec<Vec<Kernels>>),
}

/// What a compiled function is: the entry `fn(arena, table)`, a step `fn(bases)`, or a
/// step's range function `fn(bases, lo, hi)`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FnKind {
    Entry,
    Kernel,
    Range,
}

/// Defines one function; `canon` is the step's base-address layout (empty for the entry).
fn define_function(
    module: &mut JITModule,
    fctx: &mut FunctionBuilderContext,
    name: &str,
    kind: FnKind,
    canon: &[BufId],
    body: impl FnOnce(&mut Fx) -> Result<(), JitError>,
    env: &Env,
) -> Result<FuncId, JitError> {
    let mut sig = module.make_signature();
    let params = match kind {
        FnKind::Entry => 2,
        FnKind::Kernel => 1,
        FnKind::Range => 3,
    };
    sig.params.extend((0..params).map(|_| AbiParam::new(types::I64)));
    let id = module.declare_function(name, Linkage::Local, &sig).map_err(codegen_err)?;
    let mut ctx = module.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let config = module.target_config();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let block = b.create_block();
        b.append_block_params_for_function_params(block);
        b.switch_to_block(block);
        let p = b.block_params(block).to_vec();
        let step = |bases| Addressing::Step { bases, slots: canon.iter().enumerate().map(|(i, &b)| (b, i)).collect() };
        let (addressing, range) = match kind {
            FnKind::Entry => (Addressing::Entry { arena: p[0], table: p[1] }, None),
            FnKind::Kernel => (step(p[0]), None),
            FnKind::Range => (step(p[0]), Some((p[1], p[2]))),
        };
        let mut fx = Fx {
            b,
            module: &mut *module,
            env,
            frefs: HashMap::new(),
            addressing,
            range,
            bases: HashMap::new(),
            shared: HashMap::new(),
        };
        body(&mut fx)?;
        fx.b.ins().return_(&[]);
        fx.b.seal_all_blocks();
        let Fx { b, .. } = fx;
        b.finalize(config);
    }
    if cfg!(debug_assertions) {
        cranelift_codegen::verify_function(&ctx.func, module.isa().flags())
            .map_err(|e| JitError::Codegen(format!("verifier: {name}: {e}\n{}", ctx.func.display())))?;
    }
    let dump = std::env::var_os("REMAT_JIT_DUMP").is_some();
    ctx.set_disasm(dump);
    module.define_function(id, &mut ctx).map_err(|e| JitError::Codegen(format!("{name}: {e:?}")))?;
    if dump {
        // Debugging aid: the machine code (VCode) of every function on stderr.
        let vcode = ctx.compiled_code().and_then(|c| c.vcode.clone()).unwrap_or_default();
        eprintln!("function {name}:\n{vcode}");
    }
    module.clear_context(&mut ctx);
    Ok(id)
}

/// One function being emitted.
pub(crate) struct Fx<'a, 'b> {
    pub b: FunctionBuilder<'b>,
    module: &'a mut JITModule,
    pub env: &'a Env<'a>,
    frefs: HashMap<FuncId, FuncRef>,
    addressing: Addressing,
    /// In a range function, the slice `lo..hi` of the split dimension to run.
    pub range: Option<(Value, Value)>,
    bases: HashMap<BufId, Value>,
    /// Shared subexpressions evaluated at the current point: value and number of leaves.
    shared: HashMap<u32, (Value, usize)>,
}

/// Where a function finds its buffers' base addresses.
enum Addressing {
    /// The entry: the arena base (plus each buffer's planned offset) and the pointer table.
    Entry { arena: Value, table: Value },
    /// A step's function: the array of its buffers' base addresses (`bases`), with each
    /// buffer's position in it (`slots`: `Step::canonical_buffers` order).
    Step { bases: Value, slots: HashMap<BufId, usize> },
}

/// Memory flags for the buffers of the plan: never trapping, alignment not claimed.
pub(crate) fn mem() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// The register type of a dtype's values: 16-bit floats compute in `f32` (their memory form
/// is 16 bits: `Fx::load_elem`/`Fx::store_elem`), unsigned integers share the registers of
/// the signed ones, `bool` is an `i8` 0 or 1, and a key is one opaque 8-byte word.
pub(crate) fn clif_type(d: DType) -> Type {
    match d {
        DType::F32 | DType::BF16 | DType::F16 => types::F32,
        DType::F64 => types::F64,
        DType::I8 | DType::U8 | DType::Bool => types::I8,
        DType::I16 => types::I16,
        DType::I32 | DType::U32 => types::I32,
        // A complex value is moved as the bits of its parts (its arithmetic is native steps).
        DType::I64 | DType::Key | DType::C64 => types::I64,
        DType::C128 => types::I128,
    }
}

impl<'a, 'b> Fx<'a, 'b> {
    pub fn iconst(&mut self, x: i64) -> Value {
        self.b.ins().iconst(types::I64, x)
    }

    /// A reference to a module function from the function being emitted.
    fn func_ref(&mut self, id: FuncId) -> FuncRef {
        match self.frefs.get(&id) {
            Some(&f) => f,
            None => {
                let f = self.module.declare_func_in_func(id, self.b.func);
                self.frefs.insert(id, f);
                f
            }
        }
    }

    /// Calls a runtime function.
    pub fn call(&mut self, imp: Import, args: &[Value]) -> Option<Value> {
        let fr = self.func_ref(self.env.imports[&imp]);
        let inst = self.b.ins().call(fr, args);
        self.b.inst_results(inst).first().copied()
    }

    /// Loads the base addresses of `bufs` (call at function entry, so they dominate).
    pub fn load_bases(&mut self, bufs: &[BufId]) {
        for &buf in bufs {
            if !self.bases.contains_key(&buf) {
                let addr = self.address_of(buf);
                self.bases.insert(buf, addr);
            }
        }
    }

    /// Computes `buf`'s base address here. The entry functions compute each address where
    /// a step needs it rather than once for all: an address kept from the first block to
    /// the last step would be one long live range per buffer, and register allocation
    /// grows faster than linearly with those.
    fn address_of(&mut self, buf: BufId) -> Value {
        let storage = self.env.prog.buffers[buf.0 as usize].storage;
        match (&self.addressing, storage) {
            (Addressing::Step { bases, slots }, _) => {
                let i = slots[&buf];
                self.b.ins().load(types::I64, mem(), *bases, (i * 8) as i32)
            }
            (&Addressing::Entry { arena, .. }, Storage::Arena { host }) => {
                match self.env.layout.places[buf.0 as usize] {
                    Some((Home::Out(out), off)) => {
                        // Inside an output's memory, before the output is written.
                        let base = self.address_of(out);
                        self.b.ins().iadd_imm_s(base, off as i64)
                    }
                    place => {
                        let off = place.map_or(0, |(_, off)| off);
                        let off = if host { off + self.env.layout.device_bytes } else { off };
                        self.b.ins().iadd_imm_s(arena, off as i64)
                    }
                }
            }
            (&Addressing::Entry { table, .. }, Storage::Arg(_) | Storage::Const(_) | Storage::Out { .. }) => {
                let slot = self.env.prog.table_slot(storage).unwrap_or(0);
                self.b.ins().load(types::I64, mem(), table, (slot * 8) as i32)
            }
        }
    }

    pub fn base(&self, buf: BufId) -> Value {
        self.bases[&buf]
    }

    fn emit_step(&mut self, step: &Step) -> Result<(), JitError> {
        let mut bufs = Vec::new();
        step.buffers(&mut bufs);
        self.load_bases(&bufs);
        match step {
            Step::Kernel { space, dst, src } => self.kernel(space, dst, src),
            Step::Reduce { op, space, axes, dst, src, accumulate } => {
                self.reduce(*op, space, axes, *dst, src, *accumulate)?
            }
            Step::Argmax { space, axis, dst, src } => self.argmax(space, *axis, *dst, src)?,
            Step::Dot { desc, lhs, rhs, dst } => {
                let size = self.env.prog.dots[*desc].dtype.size_in_bytes() as i64;
                let l = self.view_address(lhs, size);
                let r = self.view_address(rhs, size);
                let o = self.view_address(dst, size);
                // The descriptor's address follows the buffers' in the base array, so
                // products of the same shape share this function.
                let Addressing::Step { bases, slots } = &self.addressing else {
                    unreachable!("steps are compiled as step functions")
                };
                let dptr = self.b.ins().load(types::I64, mem(), *bases, (slots.len() * 8) as i32);
                self.call(Import::Dot, &[dptr, l, r, o]);
            }
            Step::Native { .. } => {
                // The descriptor's address follows the buffers' in the base array, which
                // the runtime reads whole.
                let Addressing::Step { bases, slots } = &self.addressing else {
                    unreachable!("steps are compiled as step functions")
                };
                let bases = *bases;
                let dptr = self.b.ins().load(types::I64, mem(), bases, (slots.len() * 8) as i32);
                self.call(Import::Native, &[dptr, bases]);
            }
            Step::Loop { .. } | Step::Switch { .. } | Step::While { .. } => {
                unreachable!("loops and branches are emitted by the entry function")
            }
        }
        Ok(())
    }

    /// Stores `step`'s base addresses into `slot` and returns the slot's address.
    fn step_bases(&mut self, step: &Step, slot: StackSlot) -> Value {
        self.step_bases_at(step, slot, 0)
    }

    /// Stores `step`'s base addresses into `slot` from byte `at` on and returns their address.
    fn step_bases_at(&mut self, step: &Step, slot: StackSlot, at: usize) -> Value {
        let canon = step.canonical_buffers();
        for (i, &b) in canon.iter().enumerate() {
            let addr = self.address_of(b);
            self.b.ins().stack_store(types::I64, addr, slot, (at + i * 8) as i32);
        }
        if let Step::Dot { desc, .. } = step {
            let d = self.iconst(self.env.dot_descs[*desc] as i64);
            self.b.ins().stack_store(types::I64, d, slot, (at + canon.len() * 8) as i32);
        }
        if let Step::Native { desc, .. } = step {
            let d = self.iconst(self.env.native_descs[*desc] as i64);
            self.b.ins().stack_store(types::I64, d, slot, (at + canon.len() * 8) as i32);
        }
        self.b.ins().stack_addr(types::I64, slot, at as i32)
    }

    /// Runs two one-thread step functions at once (`remat_pair`): `here` on this thread,
    /// `helper` on a helper thread; `slot` holds the first's bases in its first half and the
    /// second's in its other.
    fn emit_pair(&mut self, here: (&Step, FuncId), helper: (&Step, FuncId), slot: StackSlot, half: usize) {
        let site = self.env.next_pair_site.get();
        self.env.next_pair_site.set(site + 1);
        let mut args = vec![self.iconst(self.env.pair_sites[site] as i64)];
        for ((step, f), at) in [(here, 0), (helper, half)] {
            let bases = self.step_bases_at(step, slot, at);
            let f = self.func_ref(f);
            args.push(self.b.ins().func_addr(types::I64, f));
            args.push(bases);
        }
        self.call(Import::Pair, &args);
    }

    fn emit_steps(&mut self, steps: &[Step], kernels: &[Kernels], slot: StackSlot) {
        let mut i = 0;
        while i < steps.len() {
            let (step, k) = (&steps[i], &kernels[i]);
            i += 1;
            if let Some(Pair { here, helper }) = pair_with_next(self.env, steps, kernels, i - 1) {
                // The entry sized the slot for two steps' bases (`build`).
                let half = self.b.func.sized_stack_slots[slot].size as usize / 2;
                self.emit_pair(here, helper, slot, half);
                i += 1;
                continue;
            }
            match (step, k) {
                (Step::Loop { length, reverse, counter, body }, Kernels::Loop(inner)) => {
                    let cbase = self.address_of(*counter);
                    let (length, reverse) = (*length as i64, *reverse);
                    self.for_range(0, length, 1, |fx, i| {
                        let j = if reverse {
                            let last = fx.iconst(length - 1);
                            fx.b.ins().isub(last, i)
                        } else {
                            i
                        };
                        let j32 = fx.b.ins().ireduce(types::I32, j);
                        fx.b.ins().store(mem(), j32, cbase, 0);
                        fx.emit_steps(body, inner, slot);
                    });
                }
                (_, Kernels::Func(id)) => {
                    let bases = self.step_bases(step, slot);
                    let fr = self.func_ref(*id);
                    self.b.ins().call(fr, &[bases]);
                }
                (_, Kernels::Parallel { prologue, func, split }) => {
                    let bases = self.step_bases(step, slot);
                    if let Some(p) = prologue {
                        let fr = self.func_ref(*p);
                        self.b.ins().call(fr, &[bases]);
                    }
                    let fr = self.func_ref(*func);
                    let addr = self.b.ins().func_addr(types::I64, fr);
                    let (total, grain) = (self.iconst(split.total), self.iconst(split.grain));
                    self.call(Import::ParallelFor, &[addr, bases, total, grain]);
                }
                (Step::Switch { index, branches }, Kernels::Nested(inner)) => {
                    self.emit_switch(*index, branches, inner, slot);
                }
                (Step::While { cond, pred, body }, Kernels::Nested(inner)) => {
                    self.emit_while(cond, *pred, body, inner, slot);
                }
                (_, Kernels::Loop(_) | Kernels::Nested(_)) => unreachable!("kernels mirror the steps"),
            }
        }
    }

    /// A switch: the branch for the `i32` in `index` (out of range: the last), each branch
    /// a block, tested in order.
    fn emit_switch(&mut self, index: BufId, branches: &[Vec<Step>], kernels: &[Vec<Kernels>], slot: StackSlot) {
        use cranelift_codegen::ir::condcodes::IntCC;
        let n = branches.len() as i64;
        let ibase = self.address_of(index);
        let i = self.b.ins().load(types::I32, mem(), ibase, 0);
        let i = self.b.ins().sextend(types::I64, i);
        // Unsigned: a negative index is out of range too.
        let in_range = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, i, n);
        let last = self.iconst(n - 1);
        let k = self.b.ins().select(in_range, i, last);
        let merge = self.b.create_block();
        for (j, (steps, inner)) in branches.iter().zip(kernels).enumerate() {
            let here = self.b.create_block();
            if j + 1 < branches.len() {
                let next = self.b.create_block();
                let is_j = self.b.ins().icmp_imm_s(IntCC::Equal, k, j as i64);
                self.b.ins().brif(is_j, here, &[], next, &[]);
                self.b.switch_to_block(here);
                self.emit_steps(steps, inner, slot);
                self.b.ins().jump(merge, &[]);
                self.b.switch_to_block(next);
            } else {
                self.b.ins().jump(here, &[]);
                self.b.switch_to_block(here);
                self.emit_steps(steps, inner, slot);
                self.b.ins().jump(merge, &[]);
            }
        }
        self.b.switch_to_block(merge);
    }

    /// A while loop: `cond`'s steps, a test of the `bool` in `pred`, `body`'s steps, again.
    fn emit_while(&mut self, cond: &[Step], pred: BufId, body: &[Step], kernels: &[Vec<Kernels>], slot: StackSlot) {
        let header = self.b.create_block();
        let body_block = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        self.emit_steps(cond, &kernels[0], slot);
        let pbase = self.address_of(pred);
        let p = self.b.ins().load(types::I8, mem(), pbase, 0);
        self.b.ins().brif(p, body_block, &[], exit, &[]);
        self.b.switch_to_block(body_block);
        self.emit_steps(body, &kernels[1], slot);
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(exit);
    }

    /// `for i in (start..end).step_by(step)` with `i` an `i64` value; constant bounds.
    pub fn for_range(&mut self, start: i64, end: i64, step: i64, mut body: impl FnMut(&mut Self, Value)) {
        if start >= end {
            return;
        }
        let (s, e) = (self.iconst(start), self.iconst(end));
        self.for_range_dyn(s, e, step, &mut body);
    }

    /// `for i in (start..end).step_by(step)` with both bounds known only at run time (the
    /// loop runs while `i < end`).
    pub fn for_range_dyn(&mut self, start: Value, end: Value, step: i64, body: &mut impl FnMut(&mut Self, Value)) {
        let header = self.b.create_block();
        let body_block = self.b.create_block();
        let exit = self.b.create_block();
        self.b.append_block_param(header, types::I64);
        self.b.ins().jump(header, &[start.into()]);
        self.b.switch_to_block(header);
        let i = self.b.block_params(header)[0];
        let cond = self.b.ins().icmp(cranelift_codegen::ir::condcodes::IntCC::SignedLessThan, i, end);
        self.b.ins().brif(cond, body_block, &[], exit, &[]);
        self.b.switch_to_block(body_block);
        body(self, i);
        let next = self.b.ins().iadd_imm_s(i, step);
        self.b.ins().jump(header, &[next.into()]);
        self.b.switch_to_block(exit);
    }

    /// The address of a view's first element (static offset plus clamped dynamic terms).
    pub fn view_address(&mut self, v: &crate::expr::View, elem: i64) -> Value {
        let off = self.view_offset(v);
        self.element_address(v.buf, off, elem)
    }

    /// The address of element `off` of `buf`, whose elements are `elem` bytes.
    pub fn element_address(&mut self, buf: BufId, off: Value, elem: i64) -> Value {
        let bytes = self.b.ins().imul_imm_s(off, elem);
        let base = self.base(buf);
        self.b.ins().iadd(base, bytes)
    }

    /// A view's element offset: `offset + sum(clamp(index, 0, max) * stride)`.
    pub fn view_offset(&mut self, v: &crate::expr::View) -> Value {
        let mut off = self.iconst(v.offset);
        for d in &v.dynamic {
            let base = self.base(d.index);
            let i = self.b.ins().load(types::I32, mem(), base, 0);
            let i = self.b.ins().sextend(types::I64, i);
            let zero = self.iconst(0);
            let max = self.iconst(d.max);
            let i = self.b.ins().smax(i, zero);
            let i = self.b.ins().smin(i, max);
            let t = self.b.ins().imul_imm_s(i, d.stride);
            off = self.b.ins().iadd(off, t);
        }
        off
    }

    pub fn fma_available(&self) -> bool {
        self.env.fma
    }
}

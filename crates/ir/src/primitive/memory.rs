//! Names and memory: `name` (`checkpoint_name`), `device_put` and `empty2`.
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, the
//! `key=value` pairs in printing order; `parse_*`, the same read back) and its shape rule
//! (`*_shape`). `device_put` is the only primitive that moves a value between memory
//! spaces.

use super::params::{dtype_param, ParamReader, Params};
use super::Primitive;
use crate::param::Param;
use crate::param_types::CopySemantics;
use crate::shape::{arity, device, ensure, ShapeError};
use crate::types::{Aval, DType, MemorySpace};

// `name[name=a] x`: an identity that names its operand for policies.

pub(super) fn name_params(name: &str) -> Params {
    vec![("name", Param::Word(name.to_string()))]
}

pub(super) fn parse_name(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Name { name: p.word("name")? })
}

pub(crate) fn name_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let [x] = arity("name", in_avals)?;
    Ok(device(x.dtype, x.shape.clone()))
}

impl CopySemantics {
    /// How `device_put` prints this `copy_semantics` entry.
    fn param_name(self) -> &'static str {
        match self {
            CopySemantics::AlwaysCopy => "ArrayCopySemantics.ALWAYS_COPY",
            CopySemantics::ReuseInput => "ArrayCopySemantics.REUSE_INPUT",
            CopySemantics::DonateInput => "ArrayCopySemantics.DONATE_INPUT",
        }
    }
}

// `device_put[copy_semantics=(ArrayCopySemantics.ALWAYS_COPY,) devices=(MemorySpace.Host,)
// srcs=(None,)] x0 ...`: one entry per operand in each; a device `None` keeps the operand's
// memory space.

pub(super) fn device_put_params(devices: &[Option<MemorySpace>], copy_semantics: &[CopySemantics]) -> Params {
    let words = |ws: Vec<String>| Param::Tuple(ws.into_iter().map(Param::Word).collect());
    vec![
        ("copy_semantics", words(copy_semantics.iter().map(|c| c.param_name().to_string()).collect())),
        ("devices", Param::Tuple(devices.iter().map(|&d| d.map_or(Param::None, memory_space_param)).collect())),
        ("srcs", Param::Tuple(devices.iter().map(|_| Param::None).collect())),
    ]
}

pub(super) fn parse_device_put(p: &mut ParamReader) -> Result<Primitive, String> {
    let devices = p
        .seq("devices")?
        .iter()
        .map(|d| match d {
            Param::None => Ok(None),
            d => memory_space_of(d).map(Some).ok_or_else(|| format!("device_put: unsupported device {d}")),
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
    Ok(Primitive::DevicePut { devices, copy_semantics })
}

pub(crate) fn device_put_shape(devices: &[Option<MemorySpace>], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    ensure!(
        in_avals.len() == devices.len(),
        "device_put",
        "{} operands for {} devices; device_put takes one device per operand",
        in_avals.len(),
        devices.len()
    );
    Ok(in_avals
        .iter()
        .zip(devices)
        .map(|(x, &ms)| Aval::new(x.dtype, x.shape.clone()).with_memory_space(ms.unwrap_or(x.memory_space)))
        .collect())
}

/// `MemorySpace.Device` or `MemorySpace.Host` as a parameter value.
fn memory_space_param(ms: MemorySpace) -> Param {
    Param::Word(format!("MemorySpace.{}", ms.param_name()))
}

fn memory_space_of(p: &Param) -> Option<MemorySpace> {
    match p {
        Param::Word(w) if w == "MemorySpace.Device" => Some(MemorySpace::Device),
        Param::Word(w) if w == "MemorySpace.Host" => Some(MemorySpace::Host),
        _ => None,
    }
}

// `empty2[dtype=float32 memory_space=MemorySpace.Device] `: no operands, one scalar.

pub(super) fn empty2_params(dtype: DType, memory_space: MemorySpace) -> Params {
    vec![("dtype", dtype_param(dtype)), ("memory_space", memory_space_param(memory_space))]
}

pub(super) fn parse_empty2(p: &mut ParamReader) -> Result<Primitive, String> {
    let dtype = p.dtype("dtype")?;
    let ms = p.take("memory_space")?;
    let memory_space = memory_space_of(&ms)
        .ok_or_else(|| format!("empty2: memory_space must be MemorySpace.Device or MemorySpace.Host, found {ms}"))?;
    Ok(Primitive::Empty2 { dtype, memory_space })
}

/// JAX's `_empty2_abstract_eval`: a scalar of `dtype` in `memory_space`.
pub(crate) fn empty2_shape(
    dtype: DType,
    memory_space: MemorySpace,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let [] = arity("empty2", in_avals)?;
    // A key has no zero value to stand for "uninitialized" (JAX's cond never fills a key
    // residual this way: keys are not differentiated).
    ensure!(dtype != DType::Key, "empty2", "no empty2 of a key dtype");
    Ok(vec![Aval::scalar(dtype).with_memory_space(memory_space)])
}

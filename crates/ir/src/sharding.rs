//! Meshes, partition specs and shardings, as JAX 0.10.2 prints them in the parameters of
//! sharded programs (`jit`'s `in_shardings`/`out_shardings`, `sharding_constraint`,
//! `shard_map`):
//!
//! - `Mesh('data': 4, 'model': 2, axis_types=(Auto, Auto))`, and `Mesh()` for no mesh;
//! - `P(None, 'model')`, `P(('data', 'model'),)`, `P(UNCONSTRAINED, 'model')`, `P()`;
//! - `NamedSharding(mesh=..., spec=..., memory_kind=device)`,
//!   `SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)`, `UnspecifiedValue`.
//!
//! These are data: sharding annotations do not change what a program computes. They say how
//! values are laid out over the devices of a mesh, which is what per-device memory is made
//! of. The text form of each type is its `Display`; reading them from parameter values is
//! in `primitive/sharded.rs`. (This module imports nothing of the crate: the jaxpr, which
//! holds them in its primitives, points to it.)

use std::fmt;

/// How a mesh axis is used: JAX's `AxisType`. remat reads meshes whose axes are `Auto`
/// (XLA's partitioner decides) and the `Manual` axes of a `shard_map`; an `Explicit` axis
/// puts shardings into types (`f32[8@data]`), which the parser refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AxisType {
    Auto,
    Explicit,
    Manual,
}

impl AxisType {
    pub const ALL: [AxisType; 3] = [AxisType::Auto, AxisType::Explicit, AxisType::Manual];

    pub fn name(self) -> &'static str {
        match self {
            AxisType::Auto => "Auto",
            AxisType::Explicit => "Explicit",
            AxisType::Manual => "Manual",
        }
    }

    pub fn from_name(s: &str) -> Option<AxisType> {
        AxisType::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// A named axis of a device mesh.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MeshAxis {
    pub name: String,
    pub size: usize,
    pub axis_type: AxisType,
}

/// A device mesh: named axes with sizes; its devices are the product of the sizes, numbered
/// in row-major order of the axes (the last axis varies fastest), as `jax.make_mesh` lays
/// them out. `Mesh()` (no axes) is the empty context mesh JAX prints outside `set_mesh`.
/// An abstract mesh (`AbstractMesh(..., device_kind=cpu, num_cores=None, platform=cpu)`,
/// what JAX's rules put in shardings inside `shard_map`) has the same axes and no devices.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Mesh {
    pub axes: Vec<MeshAxis>,
    pub abstract_devices: Option<AbstractDevices>,
}

/// What an `AbstractMesh` says of its devices instead of listing them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AbstractDevices {
    pub device_kind: String,
    pub num_cores: Option<i64>,
    pub platform: String,
}

impl Mesh {
    pub fn is_empty(&self) -> bool {
        self.axes.is_empty()
    }

    /// The number of devices: the product of the axis sizes (1 for the empty mesh).
    pub fn devices(&self) -> usize {
        self.axes.iter().map(|a| a.size).product()
    }

    pub fn axis_names(&self) -> Vec<String> {
        self.axes.iter().map(|a| a.name.clone()).collect()
    }

    pub fn axis(&self, name: &str) -> Option<&MeshAxis> {
        self.axes.iter().find(|a| a.name == name)
    }

    /// The product of the sizes of `names` (each an axis of this mesh).
    pub fn size_of(&self, names: &[String]) -> Option<usize> {
        names.iter().map(|n| self.axis(n).map(|a| a.size)).product()
    }

    /// A device's coordinate along each axis, in axis order (row-major numbering).
    pub fn coords(&self, device: usize) -> Vec<usize> {
        let mut rest = device;
        let mut coords = vec![0; self.axes.len()];
        for (i, a) in self.axes.iter().enumerate().rev() {
            coords[i] = rest % a.size.max(1);
            rest /= a.size.max(1);
        }
        coords
    }

    /// The device at `coords` (one per axis).
    pub fn device_at(&self, coords: &[usize]) -> usize {
        self.axes.iter().zip(coords).fold(0, |d, (a, &c)| d * a.size + c)
    }

    /// The devices that differ from `device` only along `axes`, ordered by their index along
    /// them: the group a collective over `axes` exchanges within.
    pub fn group(&self, device: usize, axes: &[String]) -> Vec<usize> {
        let coords = self.coords(device);
        let mut members: Vec<usize> = (0..self.devices())
            .filter(|&e| {
                let c = self.coords(e);
                self.axes.iter().enumerate().all(|(i, a)| axes.contains(&a.name) || c[i] == coords[i])
            })
            .collect();
        members.sort_by_key(|&e| self.index_along(e, axes));
        members
    }

    /// A device's index along the combined axes `names` (major to minor, as a partition spec
    /// entry `('data', 'model')` splits a dimension): the position of its block.
    pub fn index_along(&self, device: usize, names: &[String]) -> usize {
        let coords = self.coords(device);
        names.iter().fold(0, |idx, n| match self.axes.iter().position(|a| &a.name == n) {
            Some(i) => idx * self.axes[i].size + coords[i],
            None => idx,
        })
    }
}

impl fmt::Display for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let func = if self.abstract_devices.is_some() { "AbstractMesh" } else { "Mesh" };
        if self.axes.is_empty() && self.abstract_devices.is_none() {
            return f.write_str("Mesh()");
        }
        write!(f, "{func}(")?;
        for a in &self.axes {
            write!(f, "'{}': {}, ", a.name, a.size)?;
        }
        f.write_str("axis_types=(")?;
        for (i, a) in self.axes.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(a.axis_type.name())?;
        }
        if self.axes.len() == 1 {
            f.write_str(",")?;
        }
        f.write_str(")")?;
        if let Some(d) = &self.abstract_devices {
            let cores = d.num_cores.map_or("None".to_string(), |n| n.to_string());
            write!(f, ", device_kind={}, num_cores={cores}, platform={}", d.device_kind, d.platform)?;
        }
        f.write_str(")")
    }
}

/// One entry of a partition spec: how one dimension of an array is split.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SpecEntry {
    /// `None`: not split (every device holds the whole dimension).
    Replicated,
    /// `UNCONSTRAINED`: the partitioner decides (in `sharding_constraint`).
    Unconstrained,
    /// `'data'` or `('data', 'model')`: split over these mesh axes, major to minor.
    Axes(Vec<String>),
}

/// A partition spec, `P(...)`: one entry per leading dimension of an array; dimensions past
/// the last entry are not split.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PartitionSpec(pub Vec<SpecEntry>);

impl PartitionSpec {
    /// The mesh axes dimension `dim` is split over (none past the entries).
    pub fn axes_of(&self, dim: usize) -> &[String] {
        match self.0.get(dim) {
            Some(SpecEntry::Axes(names)) => names,
            Some(SpecEntry::Replicated | SpecEntry::Unconstrained) | None => &[],
        }
    }

    /// Every mesh axis named, in order.
    pub fn all_axes(&self) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|e| match e {
                SpecEntry::Axes(names) => names.clone(),
                SpecEntry::Replicated | SpecEntry::Unconstrained => Vec::new(),
            })
            .collect()
    }
}

impl fmt::Display for PartitionSpec {
    /// `P` and the entries as a Python tuple: `P()`, `P('stage',)`, `P(None, 'model')`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("P(")?;
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match e {
                SpecEntry::Replicated => f.write_str("None")?,
                SpecEntry::Unconstrained => f.write_str("UNCONSTRAINED")?,
                SpecEntry::Axes(names) if names.len() == 1 => write!(f, "'{}'", names[0])?,
                SpecEntry::Axes(names) => {
                    f.write_str("(")?;
                    for (k, n) in names.iter().enumerate() {
                        if k > 0 {
                            f.write_str(", ")?;
                        }
                        write!(f, "'{n}'")?;
                    }
                    if names.len() == 1 {
                        f.write_str(",")?;
                    }
                    f.write_str(")")?;
                }
            }
        }
        if self.0.len() == 1 {
            f.write_str(",")?;
        }
        f.write_str(")")
    }
}

/// A sharding: where each block of an array lives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Sharding {
    /// `NamedSharding(mesh=..., spec=..., memory_kind=device)`; JAX leaves `memory_kind` out
    /// when it is not set (inside `shard_map`'s rules).
    Named { mesh: Mesh, spec: PartitionSpec, memory_kind: Option<String> },
    /// `SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)`: the whole array on
    /// one device.
    SingleDevice { device: usize, memory_kind: String },
    /// `UnspecifiedValue`: the partitioner decides (an argument `jit` was given no sharding).
    Unspecified,
}

impl Sharding {
    /// How many ways dimension `dim` of a value with this sharding is split (1 if not).
    pub fn split_of(&self, dim: usize) -> usize {
        match self {
            Sharding::Named { mesh, spec, .. } => mesh.size_of(spec.axes_of(dim)).unwrap_or(1),
            Sharding::SingleDevice { .. } | Sharding::Unspecified => 1,
        }
    }
}

impl fmt::Display for Sharding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sharding::Named { mesh, spec, memory_kind: Some(kind) } => {
                write!(f, "NamedSharding(mesh={mesh}, spec={spec}, memory_kind={kind})")
            }
            Sharding::Named { mesh, spec, memory_kind: None } => write!(f, "NamedSharding(mesh={mesh}, spec={spec})"),
            Sharding::SingleDevice { device, memory_kind } => {
                write!(f, "SingleDeviceSharding(device=CpuDevice(id={device}), memory_kind={memory_kind})")
            }
            Sharding::Unspecified => f.write_str("UnspecifiedValue"),
        }
    }
}

/// `sharding_constraint`'s parameters (`layout` is always `None` in what remat reads).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardingConstraint {
    pub sharding: Sharding,
    /// `Mesh()` outside `jax.set_mesh`.
    pub context_mesh: Mesh,
    /// The dimensions the spec leaves `UNCONSTRAINED`, sorted.
    pub unconstrained_dims: Vec<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mesh() -> Mesh {
        Mesh {
            axes: vec![
                MeshAxis { name: "data".into(), size: 4, axis_type: AxisType::Auto },
                MeshAxis { name: "model".into(), size: 2, axis_type: AxisType::Auto },
            ],
            abstract_devices: None,
        }
    }

    #[test]
    fn print_as_jax() {
        assert_eq!(mesh().to_string(), "Mesh('data': 4, 'model': 2, axis_types=(Auto, Auto))");
        assert_eq!(Mesh::default().to_string(), "Mesh()");
        let one = Mesh {
            axes: vec![MeshAxis { name: "stage".into(), size: 4, axis_type: AxisType::Auto }],
            abstract_devices: None,
        };
        assert_eq!(one.to_string(), "Mesh('stage': 4, axis_types=(Auto,))");
        let p = PartitionSpec(vec![SpecEntry::Replicated, SpecEntry::Axes(vec!["model".into()])]);
        assert_eq!(p.to_string(), "P(None, 'model')");
        let p = PartitionSpec(vec![SpecEntry::Axes(vec!["data".into(), "model".into()])]);
        assert_eq!(p.to_string(), "P(('data', 'model'),)");
        assert_eq!(PartitionSpec::default().to_string(), "P()");
        let s = Sharding::Named { mesh: mesh(), spec: p, memory_kind: Some("device".into()) };
        assert_eq!(
            s.to_string(),
            "NamedSharding(mesh=Mesh('data': 4, 'model': 2, axis_types=(Auto, Auto)), spec=P(('data', 'model'),), \
             memory_kind=device)"
        );
        assert_eq!(s.split_of(0), 8);
        assert_eq!(s.split_of(1), 1);
    }

    #[test]
    fn devices_are_row_major() {
        let m = mesh();
        assert_eq!(m.devices(), 8);
        assert_eq!(m.coords(5), vec![2, 1]);
        assert_eq!(m.device_at(&[2, 1]), 5);
        assert_eq!(m.index_along(5, &["data".into(), "model".into()]), 5);
        assert_eq!(m.index_along(5, &["model".into()]), 1);
        assert_eq!(m.index_along(5, &["model".into(), "data".into()]), 6);
    }
}

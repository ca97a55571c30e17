//! The program one device runs (`remat_jit::device_program`), which the memory planner,
//! `remat explain` and `remat report` plan for a sharded program: on every recorded sharded
//! case (tests/data/sharded, JAX 0.10.2 on 8 simulated CPU devices) and under each recorded
//! policy, the device program of the value-and-grad program verifies, holds no sharding,
//! and takes its arguments at the bytes XLA's per-device memory analysis gives them; and on
//! small programs, its exact text.

use remat_ir::{parse_jaxpr, pp_jaxpr, Jaxpr};
use remat_jit::{device_program, is_sharded, memory_plan, Options};
use remat_testkit::sharded_cases;

/// The vjp as one program (forward then backward, as `remat explain` plans it): its
/// arguments are the primals, then the cotangent of the loss; and the number of primals.
fn value_and_grad(text: &str, what: &str) -> (Jaxpr, usize) {
    let j = parse_jaxpr(text, what).unwrap_or_else(|e| panic!("{what}: {e}"));
    (remat_ad::vjp_program(&j, &[]).unwrap_or_else(|e| panic!("{what}: {e}")).jaxpr, j.invars.len())
}

fn bytes(avals: &[remat_ir::Aval]) -> u64 {
    avals.iter().map(|a| a.size_in_bytes() as u64).sum()
}

/// Every case and policy: the device program verifies (in `device_program`, debug builds),
/// is not sharded, and its arguments hold what XLA's memory analysis says one device's
/// arguments hold; its results hold XLA's output bytes less XLA's table of output
/// pointers (8 bytes per output, which remat has not).
#[test]
fn device_programs_of_the_sharded_cases_take_xlas_argument_bytes() {
    let cases = sharded_cases();
    assert_eq!(cases.len(), 8);
    for (name, case) in cases {
        let mut programs = vec![("as written".to_string(), case["jaxpr"].clone(), case["xla_memory"].clone())];
        for p in case["policies"].as_array().unwrap() {
            programs.push((p["policy"].as_str().unwrap().to_string(), p["jaxpr"].clone(), p["xla_memory"].clone()));
        }
        for (label, text, xla) in programs {
            let what = format!("{name} ({label})");
            let (vg, primals) = value_and_grad(text.as_str().unwrap(), &what);
            assert!(is_sharded(&vg), "{what}");
            let dp = device_program(&vg).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(!is_sharded(&dp.jaxpr), "{what}: {}", pp_jaxpr(&dp.jaxpr));
            assert_eq!(dp.eqn_origin.len(), dp.jaxpr.eqns.len(), "{what}");
            assert!(dp.eqn_origin.iter().all(|&e| e < vg.eqns.len()), "{what}");
            let ins = dp.jaxpr.in_avals();
            let args = bytes(&ins[..primals]);
            assert_eq!(args, xla["argument_size_in_bytes"].as_u64().unwrap(), "{what}: argument bytes");
            let outs = dp.jaxpr.out_avals();
            let xla_outs = xla["output_size_in_bytes"].as_u64().unwrap();
            assert_eq!(bytes(&outs) + 8 * outs.len() as u64, xla_outs, "{what}: output bytes");
            // The planner's figure is the device program's.
            let plan = memory_plan(&vg, &[], &Options::default()).unwrap();
            assert_eq!(plan.io_bytes as u64, bytes(&ins) + bytes(&outs), "{what}");
        }
    }
}

const DP: &str = "{ lambda ; a:f32[8,4] b:f32[4,4]. let
    c:f32[8,4] = jit[
      name=f
      in_shardings=(NamedSharding(mesh=Mesh('data': 4, axis_types=(Auto,)), spec=P('data', None), memory_kind=device), NamedSharding(mesh=Mesh('data': 4, axis_types=(Auto,)), spec=P(), memory_kind=device))
      jaxpr={ lambda ; d:f32[8,4] e:f32[4,4]. let
          f:f32[8,4] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] d e
          g:f32[8,4] = sin f
        in (g,) }
      out_shardings=(UnspecifiedValue,)
    ] a b
    h:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] c
  in (h,) }";

/// A batch split over 4 devices: each device's dot and `sin` run on its quarter of the
/// rows, the replicated weight whole, and the sum of the rows is a partial sum on each
/// device (a scalar).
#[test]
fn a_data_parallel_jit_runs_on_a_quarter_of_the_rows() {
    let j = parse_jaxpr(DP, "dp").unwrap();
    let dp = device_program(&j).unwrap();
    let text = pp_jaxpr(&dp.jaxpr);
    assert!(text.starts_with("{ lambda ; a:f32[2,4] b:f32[4,4]. let"), "{text}");
    assert!(text.contains("f32[2,4] = sin"), "{text}");
    assert!(!text.contains("f32[8,4]"), "{text}");
    // Every equation comes from the jit (0) or the sum (1).
    assert!(dp.eqn_origin.iter().all(|&e| e <= 1), "{:?}", dp.eqn_origin);
}

const TP: &str = "{ lambda ; a:f32[16,8] b:f32[8,4]. let
    c:f32[16,4] = shard_map[
      check_vma=True
      in_specs=(P('data', None), P(None, 'model'))
      jaxpr={ lambda ; d:f32[4,8]{V:data} e:f32[8,2]{V:model}. let
          f:f32[4,8]{V:(data,model)} = pvary[axes=('model',)] d
          g:f32[8,2]{V:(data,model)} = pvary[axes=('data',)] e
          h:f32[4,2]{V:(data,model)} = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] f g
          i:f32[4,4]{V:data} = all_gather[all_gather_dimension=1 axis_index_groups=None axis_name=('model',) axis_size=2 tiled=True] h
        in (i,) }
      mesh=Mesh('data': 4, 'model': 2, axis_types=(Auto, Auto))
      newly_manual_axes=frozenset({'data', 'model'})
      out_specs=(P('data', None),)
    ] a b
    j:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] c
  in (j,) }";

/// A shard_map body runs once, on device 0's blocks, with no varying axes; the arguments
/// are laid out as the specs ask; an `all_gather` becomes an equation of the gathered
/// block's shape on device 0.
#[test]
fn a_shard_map_body_runs_once_on_device_zeros_blocks() {
    let j = parse_jaxpr(TP, "tp").unwrap();
    let dp = device_program(&j).unwrap();
    let text = pp_jaxpr(&dp.jaxpr);
    assert!(text.starts_with("{ lambda ; a:f32[4,8] b:f32[8,2]. let"), "{text}");
    assert!(!text.contains("{V:") && !text.contains("shard_map") && !text.contains("all_gather"), "{text}");
    assert!(text.contains("f32[4,2] = dot_general"), "{text}");
    assert!(text.contains("f32[4,4] = pad"), "{text}");
}

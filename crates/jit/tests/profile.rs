//! The memory profile: on every benchmark, conformance and zoo program, its numbers are
//! `memory_plan`'s, its buffers keep the planner's invariants, and the buffers live at the
//! peak explain the peak exactly.

use remat_ir::{parse_jaxpr, Jaxpr};
use remat_jit::{memory_plan, memory_profile, BufferHome, CseScope, MemoryProfile, Options};

fn check(name: &str, jaxpr: &Jaxpr, options: &Options) -> MemoryProfile {
    let profile = memory_profile(jaxpr, &[], options).unwrap_or_else(|e| panic!("{name}: {e}"));
    let plan = memory_plan(jaxpr, &[], options).expect("plans");
    assert_eq!(profile.plan, plan, "{name}: the profile's plan is memory_plan's");
    let peak = plan.peak_bytes;
    let bufs = &profile.buffers;
    for b in bufs {
        assert!(b.first <= b.last && b.last <= profile.positions, "{name}: {b:?}");
        assert_eq!(b.offset % 64, 0, "{name}: aligned");
        if b.home == BufferHome::Arena {
            assert!(b.offset + b.extent() <= peak, "{name}: {b:?} ends inside the arena of {peak}");
        }
    }
    // Two arena buffers alive at once never overlap.
    let arena: Vec<_> = bufs.iter().filter(|b| b.home == BufferHome::Arena).collect();
    for (i, a) in arena.iter().enumerate() {
        for b in &arena[i + 1..] {
            let alive_together = a.first <= b.last && b.first <= a.last;
            let overlap = a.offset < b.offset + b.extent() && b.offset < a.offset + a.extent();
            let in_place = a.handed_over_at == Some(b.first) || b.handed_over_at == Some(a.first);
            assert!(!(alive_together && overlap) || in_place, "{name}: {a:?} and {b:?} overlap");
        }
    }
    // The peak: its buffers are live at its position, they reach the arena's end, and
    // their bytes plus the holes are the peak; no position holds more.
    let p = &profile.peak;
    let live = profile.live_bytes();
    assert_eq!(p.live_bytes + p.unused_bytes, peak, "{name}");
    if peak > 0 {
        assert!(p.live.iter().all(|&i| bufs[i].holds_at(p.position) && bufs[i].home == BufferHome::Arena));
        let top = p.live.iter().map(|&i| bufs[i].offset + bufs[i].extent()).max().expect("live buffers");
        assert_eq!(top.div_ceil(64) * 64, peak, "{name}: the live buffers reach the peak");
        assert_eq!(live[p.position], p.live_bytes, "{name}");
        assert_eq!(p.live.len(), arena.iter().filter(|b| b.holds_at(p.position)).count(), "{name}");
        // What the peak's buffers hold is disjoint.
        for (i, &x) in p.live.iter().enumerate() {
            for &y in &p.live[i + 1..] {
                let (a, b) = (&bufs[x], &bufs[y]);
                assert!(a.offset + a.extent() <= b.offset || b.offset + b.extent() <= a.offset, "{name}");
            }
        }
    }
    assert!(live.iter().all(|&l| l <= peak), "{name}: live bytes never exceed the arena");
    // Positions belong to the equations in program order; only the final copies into
    // the outputs belong to none.
    assert_eq!(profile.step_eqns.len(), profile.positions);
    let eqns: Vec<usize> = profile.step_eqns.iter().flatten().copied().collect();
    assert!(eqns.windows(2).all(|w| w[0] <= w[1]), "{name}: steps in equation order");
    assert!(eqns.iter().all(|&e| e < jaxpr.eqns.len()));
    let first_copy = profile.step_eqns.iter().position(Option::is_none).unwrap_or(profile.positions);
    assert!(profile.step_eqns[first_copy..].iter().all(Option::is_none), "{name}: copies come last");
    for b in bufs {
        if let (Some(v), Some(e)) = (b.var, b.eqn) {
            assert!(v.index() < jaxpr.vars.len() && e < jaxpr.eqns.len(), "{name}");
        }
    }
    profile
}

#[test]
fn the_profile_explains_the_peak_of_every_benchmark_program() {
    for path in remat_testkit::data_files("bench", "jaxpr") {
        let text = std::fs::read_to_string(&path).expect("reads");
        let name = path.display().to_string();
        let jaxpr = parse_jaxpr(&text, &name).expect("parses");
        for cse in [CseScope::Auto, CseScope::Off] {
            let profile = check(&name, &jaxpr, &Options { cse, ..Options::default() });
            assert!(profile.buffers.iter().any(|b| b.eqn.is_some() && b.var.is_some()), "{name}: named buffers");
        }
    }
}

#[test]
fn the_profile_explains_the_peak_of_every_conformance_and_zoo_program() {
    let cases = remat_testkit::conformance_cases().into_iter().chain(remat_testkit::zoo_cases());
    for (name, case) in cases {
        let jaxpr = remat_testkit::case_jaxpr(&case);
        check(&name, &jaxpr, &Options::default());
    }
}

/// A small program whose buffers are known by hand: `sin` feeds two consumers, so it is
/// materialized by equation 0 and named `b`; the product by equation 2, named `d`.
#[test]
fn buffers_name_their_equation_and_variable() {
    let text = "{ lambda ; a:f32[64,64]. let
    b:f32[64,64] = sin a
    c:f32[64,64] = cos b
    d:f32[64,64] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] b c
    e:f32[64,64] = mul d b
    f:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] e
  in (f,) }";
    let jaxpr = parse_jaxpr(text, "t").expect("parses");
    let profile = check("t", &jaxpr, &Options::default());
    let (b, d) = (jaxpr.eqns[0].outvars[0], jaxpr.eqns[2].outvars[0]);
    let named: Vec<(Option<usize>, Option<remat_ir::Var>)> = profile.buffers.iter().map(|x| (x.eqn, x.var)).collect();
    assert!(named.contains(&(Some(0), Some(b))), "{named:?}");
    assert!(named.contains(&(Some(2), Some(d))), "{named:?}");
    // At the product, `sin`'s buffer (read again by `mul`), `cos`'s and the product's own
    // are live: the peak holds all three.
    let p = &profile.peak;
    let at_peak: Vec<Option<remat_ir::Var>> = p.live.iter().map(|&i| profile.buffers[i].var).collect();
    assert!(at_peak.contains(&Some(b)) && at_peak.contains(&Some(d)), "{p:?} {named:?}");
    assert_eq!(p.live_bytes, 3 * 64 * 64 * 4, "{p:?}");
    assert_eq!(profile.step_eqns.iter().flatten().max(), Some(&4));
}

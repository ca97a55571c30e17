//! Snapshots of what the seed examples save and how they split: `print_saved_residuals`
//! and the forward and backward jaxprs, for every seed program under the policy it uses
//! (their two-column layout is tested in `crates/remat/tests/pretty.rs`). Source locations point into the case's jaxpr text
//! (`case.jaxpr:line:col`). Regenerate with `INSTA_UPDATE=always cargo test -p remat-ad`.

use remat_ad::{fwd_bwd_strings, print_saved_residuals};
use remat_testkit::{arg_names, case_jaxpr, conformance_cases};

#[test]
fn seed_examples() {
    for (name, case) in conformance_cases() {
        if !name.starts_with("seed_") {
            continue;
        }
        let jaxpr = case_jaxpr(&case);
        let residuals = print_saved_residuals(&jaxpr, &arg_names(&case)).unwrap();
        insta::assert_snapshot!(format!("{name}__residuals"), residuals);
        let (fwd, bwd) = fwd_bwd_strings(&jaxpr).unwrap();
        insta::assert_snapshot!(format!("{name}__fwd"), fwd);
        insta::assert_snapshot!(format!("{name}__bwd"), bwd);
    }
}

//! Snapshots of what the seed examples save and how they split: `print_saved_residuals`
//! and the forward and backward jaxprs, for every seed program under the policy it uses
//! (their two-column layout is tested in `crates/remat/tests/pretty.rs`). Source locations point into the case's jaxpr text
//! (`case.jaxpr:line:col`). Regenerate with `INSTA_UPDATE=always cargo test -p remat-ad`.

<<<<<<< HEAD
mod common;

use common::*;
use remat_ad::{fwd_bwd_strings, print_saved_residuals};
=======
use remat_ad::{fwd_bwd_strings, print_saved_residuals, side_by_side};
use remat_testkit::{arg_names, case_jaxpr, conformance_case, conformance_cases};
>>>>>>> wt-kit

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
<<<<<<< HEAD
=======

#[test]
fn fwd_bwd_side_by_side() {
    let jaxpr = case_jaxpr(&conformance_case("seed_checkpoint_each_layer"));
    let (fwd, bwd) = fwd_bwd_strings(&jaxpr).unwrap();
    insta::assert_snapshot!("seed_checkpoint_each_layer__columns", side_by_side(&fwd, &bwd, None));
    // Fitted to a narrow terminal, each column wraps at half the width.
    let narrow = side_by_side(&fwd, &bwd, Some(100));
    assert!(narrow.lines().all(|l| l.chars().count() <= 100), "{narrow}");
    insta::assert_snapshot!("seed_checkpoint_each_layer__columns_100", narrow);
}
>>>>>>> wt-kit

//! One module per subcommand.

pub mod eval;
pub mod print;

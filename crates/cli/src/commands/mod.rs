//! One module per subcommand.

pub mod bench;
pub mod eval;
pub mod print;

pub mod a;
pub mod new_mod;

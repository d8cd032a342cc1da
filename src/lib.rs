//! native-redis-lock: a pure lock engine (`core`) and its thin Node-API binding (`binding`).

pub mod binding;
pub mod core;

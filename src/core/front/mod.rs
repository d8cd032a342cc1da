//! One thin front per public API: its options and defaults, its naming, the record of what
//! an instance holds, and which operation each call is and which way it goes. No lock
//! decision is made here (they are the operations'), and nothing here knows who called: a
//! call is answered through the `Reply` its caller gave.

pub mod auto_refresh;
pub mod connection;
pub mod distributed_lock;
pub mod exclusive_lock;
pub mod granted;
pub mod handle;
pub mod lock_service;
pub mod reply;
pub mod syncguard;
pub mod syncguard_calls;
pub mod syncguard_eval;
pub mod syncguard_slots;
pub mod win;

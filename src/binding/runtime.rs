/// One small named runtime for the whole process, installed when the addon loads. One worker
/// is enough: every Redis call is I/O on a multiplexed socket, and on a 2-core machine a
/// second worker only competes with Node and Redis for the CPU.
#[napi_derive::module_init]
fn init() {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(1)
        .thread_name("native-redis-lock")
        .enable_all();
    // With the LIFO slot, the connection's writer task runs right after each call that woke
    // it and writes one command per syscall; without it, the calls that are ready run first
    // and the writer sends them in one write (bench (b): +20 % pairs/s, -20 % CPU per pair).
    // The switch is tokio-unstable, enabled in .cargo/config.toml.
    #[cfg(tokio_unstable)]
    builder.disable_lifo_slot();
    // If the OS refuses the thread, napi falls back to its own default runtime, which the
    // core's background work then runs on too.
    if let Ok(runtime) = builder.build() {
        napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
    }
    let napi_runtime =
        napi::bindgen_prelude::within_runtime_if_available(tokio::runtime::Handle::try_current);
    if let Ok(handle) = napi_runtime {
        crate::core::basics::background::install(handle);
    }
}

/// One small named runtime for the whole process, installed when the addon loads. One worker
/// is enough: every Redis call is I/O on a multiplexed socket, and on a 2-core machine a
/// second worker only competes with Node and Redis for the CPU.
#[napi_derive::module_init]
fn init() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("native-redis-lock")
        .enable_all()
        .build();
    // If the OS refuses the thread, napi falls back to its own default runtime.
    if let Ok(runtime) = runtime {
        napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
    }
}

//! One lock's keys as syncguard's scheme names them with its default prefix, for the tests
//! of syncguard's engine on one server and on a Redlock (each adds what it plants).

use native_redis_lock::core::api::SyncguardCall;

pub struct Keys {
    pub key: String,
    pub lock: Vec<u8>,
    pub index: Vec<u8>,
    pub fence: Vec<u8>,
    pub id: String,
}

impl Keys {
    pub fn new(key: &str, n: u8) -> Self {
        let id = format!("{:A>22}", n);
        Keys {
            key: key.to_owned(),
            lock: format!("syncguard:{key}").into_bytes(),
            index: format!("syncguard:id:{id}").into_bytes(),
            fence: format!("syncguard:fence:syncguard:{key}").into_bytes(),
            id,
        }
    }

    pub fn call(&self) -> SyncguardCall<'_> {
        SyncguardCall {
            key: &self.key,
            lock_key: &self.lock,
            index_key: &self.index,
            fence_key: &self.fence,
            lock_id: &self.id,
        }
    }
}

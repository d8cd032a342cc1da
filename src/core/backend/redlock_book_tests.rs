//! What one node's listener passes on to the Redlock's shared one.
use super::*;

#[derive(Default)]
struct SharedHeard {
    unsubscribed: Mutex<Vec<Vec<u8>>>,
}

impl Listener for SharedHeard {
    fn message(&self, _: &[u8], _: &[u8]) {}
    fn connection_lost(&self, _: LostScope) {}
    fn unsubscribed(&self, channel: &[u8]) {
        self.unsubscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(channel.to_vec());
    }
}

#[test]
fn a_channel_the_server_dropped_leaves_the_node_and_reaches_the_shared_listener() {
    let heard = Arc::new(SharedHeard::default());
    let node = NodeListener {
        inner: heard.clone(),
        node: 0,
        book: Arc::new(NodeBook::default()),
        lost: Arc::new(Drops::default()),
    };
    node.book.channels().insert(b"moved".to_vec());
    node.book.channels().insert(b"kept".to_vec());
    node.unsubscribed(b"moved");
    assert!(!node.book.channels().contains(b"moved".as_slice()));
    assert!(node.book.channels().contains(b"kept".as_slice()));
    let unsubscribed = heard.unsubscribed.lock().unwrap().clone();
    assert_eq!(unsubscribed, vec![b"moved".to_vec()]);
}

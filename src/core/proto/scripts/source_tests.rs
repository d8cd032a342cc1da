use super::*;

#[test]
fn each_script_is_sent_whole_as_its_own_text() {
    for script in every() {
        let source = source_of(script).unwrap_or_default();
        assert_eq!(Script::new(source).get_hash(), script.get_hash());
    }
}

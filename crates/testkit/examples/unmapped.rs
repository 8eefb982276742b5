//! Prints the source files docs/architecture.md does not name.
fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md");
    for f in nodewarden_testkit::code_map::unmapped(&root, &map) {
        println!("{f}");
    }
}

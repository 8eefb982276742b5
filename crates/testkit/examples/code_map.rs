//! Prints what is wrong with docs/architecture.md as a map: crates without
//! a section, named paths that do not exist, too many lines.
fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md");
    for problem in nodewarden_testkit::code_map::problems(&root, &map) {
        println!("{problem}");
    }
}

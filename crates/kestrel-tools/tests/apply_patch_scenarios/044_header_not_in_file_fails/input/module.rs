fn main() {
    go();
}

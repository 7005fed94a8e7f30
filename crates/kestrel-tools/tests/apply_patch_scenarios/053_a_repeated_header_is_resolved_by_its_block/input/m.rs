mod a {
    fn run() {}
}
mod a {
    fn stop() {}
}

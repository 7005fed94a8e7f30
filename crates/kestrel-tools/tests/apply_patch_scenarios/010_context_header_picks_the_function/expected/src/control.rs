fn start() {
    run(1);
}

fn stop() {
    run(0);
}

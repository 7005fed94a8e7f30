function f() {
	if (ok) {
  stop();
	}
}

function f() {
	if (ok) {
		go();
	}
}

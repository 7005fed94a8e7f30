pub fn hi() {}

#[test] fn builds() {}

//! Built-in tools: each normalizes model input into actions and runs only authorized ones.

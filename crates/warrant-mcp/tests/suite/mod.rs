pub mod client;
mod interop;
pub mod peers;
mod redirect;
mod tls;

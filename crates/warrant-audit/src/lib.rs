//! Versioned audit records, hash chain, Ed25519 signatures, the JSONL sink and verification.

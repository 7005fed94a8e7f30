//! Test support for Kestrel: a scripted model server that speaks the three wire APIs
//! exactly as the real providers do, with a request log and fault injection.

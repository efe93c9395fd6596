//! bunka's byte-crunching kernels (LZ4's block codec and snappy's), compiled to WebAssembly and run inside
//! the broker (src/protocol/records/kernels.ts loads them; docs/architecture.md, "Codecs and kernels",
//! says why).
//!
//! Each function here has a TypeScript twin in src/protocol/records/ that gives the same result for every
//! input: the twin is the reference, used where WebAssembly is unavailable, and the tests compare the two
//! on random and hostile inputs. The kernels take offsets into the module's own linear memory, where the
//! caller has copied the input; they allocate nothing and never read or write outside the ranges the
//! caller describes plus 32 bytes after each, which the caller reserves.
//!
//! No standard library: the module needs no imports, and a panic (which would be a bug) traps.
#![no_std]

mod lz4;
mod snappy;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

// The caller reserves 32 bytes after every input and output range (KERNEL_SLACK_BYTES in kernels.ts): the
// LZ4 decoder copies literals and matches 16 bytes at a time.

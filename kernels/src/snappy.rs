//! Snappy raw blocks: the element decoder and the fragment compressor of src/protocol/records/snappy.ts,
//! element for element (the compressor writes exactly the bytes the TypeScript one writes). The block
//! header (the length varint) and the xerial framing stay in TypeScript.

/// What the decoder returns for malformed elements (the caller asks the TypeScript decoder for the reason).
const MALFORMED: isize = -2;

const MIN_HASH_BITS: u32 = 8;
const MAX_HASH_BITS: u32 = 14;
const HASH_MULTIPLIER: u32 = 0x1e35_a7bd;
/// Below this a fragment is one literal: the scan reads up to 15 bytes past a candidate.
const INPUT_MARGIN_BYTES: usize = 15;

#[inline(always)]
unsafe fn copy8(dst: *mut u8, src: *const u8) {
    (dst as *mut u64).write_unaligned((src as *const u64).read_unaligned());
}

#[inline(always)]
unsafe fn load32(p: *const u8) -> u32 {
    (p as *const u32).read_unaligned()
}

/// Decodes the elements memory[src, src + src_len) into memory[out, out + length). Copies may reach back
/// to `out` and no further. Returns 0 when the elements produce exactly `length` bytes and use up the
/// input, MALFORMED otherwise. Literals of up to 16 bytes and copies at offsets of 8 or more are moved 8
/// bytes at a time, which may write up to 16 bytes past the cursor (and read as far past the input):
/// those bytes are overwritten by what follows, or land in the slack.
#[no_mangle]
pub unsafe extern "C" fn snappy_decode_elements(src: *const u8, src_len: usize, out: *mut u8, length: usize) -> isize {
    let end = src_len;
    let mut at = 0usize;
    let mut o = 0usize;
    while at < end {
        let tag = *src.add(at) as usize;
        at += 1;
        let kind = tag & 3;
        if kind == 0 {
            // `n` is the literal's length minus one (it may be 2^32 - 1, so the comparisons keep the -1).
            let mut n = tag >> 2;
            if n >= 60 {
                let extra = n - 59;
                if extra > end - at {
                    return MALFORMED;
                }
                n = 0;
                let mut i = 0;
                while i < extra {
                    n |= (*src.add(at + i) as usize) << (8 * i);
                    i += 1;
                }
                at += extra;
            }
            if n >= end - at || n >= length - o {
                return MALFORMED;
            }
            let n = n + 1;
            let dst = out.add(o);
            if n <= 16 {
                copy8(dst, src.add(at));
                copy8(dst.add(8), src.add(at + 8));
            } else {
                core::ptr::copy_nonoverlapping(src.add(at), dst, n);
            }
            at += n;
            o += n;
            continue;
        }
        let n: usize;
        let offset: usize;
        if kind == 1 {
            if at >= end {
                return MALFORMED;
            }
            n = ((tag >> 2) & 7) + 4;
            offset = ((tag >> 5) << 8) | (*src.add(at) as usize);
            at += 1;
        } else if kind == 2 {
            if end - at < 2 {
                return MALFORMED;
            }
            n = (tag >> 2) + 1;
            offset = (*src.add(at) as usize) | ((*src.add(at + 1) as usize) << 8);
            at += 2;
        } else {
            if end - at < 4 {
                return MALFORMED;
            }
            n = (tag >> 2) + 1;
            offset = load32(src.add(at)) as usize;
            at += 4;
        }
        if offset == 0 || offset > o || n > length - o {
            return MALFORMED;
        }
        let dst = out.add(o);
        let from = out.add(o - offset) as *const u8;
        if offset >= 8 {
            // Each 8-byte step reads only bytes already written: the copy starts at least 8 bytes back.
            let mut i = 0;
            while i < n {
                copy8(dst.add(i), from.add(i));
                i += 8;
            }
        } else {
            // A copy closer than 8 bytes repeats a short pattern: byte by byte, forwards.
            let mut i = 0;
            while i < n {
                *dst.add(i) = *from.add(i);
                i += 1;
            }
        }
        o += n;
    }
    if o != length {
        return MALFORMED;
    }
    0
}

/// The compressor's hash table: fragment-relative positions of 4-byte sequences.
static mut TABLE: [u16; 1 << MAX_HASH_BITS] = [0; 1 << MAX_HASH_BITS];

#[inline(always)]
fn hash(value: u32, shift: u32) -> usize {
    (value.wrapping_mul(HASH_MULTIPLIER) >> shift) as usize
}

#[inline(always)]
unsafe fn emit_literal(out: *mut u8, mut o: usize, src: *const u8, from: usize, to: usize) -> usize {
    let n = to - from - 1;
    if n < 60 {
        *out.add(o) = (n << 2) as u8;
        o += 1;
    } else {
        let bytes = if n < 0x100 {
            1
        } else if n < 0x10000 {
            2
        } else if n < 0x100_0000 {
            3
        } else {
            4
        };
        *out.add(o) = ((59 + bytes) << 2) as u8;
        o += 1;
        let mut i = 0;
        while i < bytes {
            *out.add(o) = (n >> (8 * i)) as u8;
            o += 1;
            i += 1;
        }
    }
    core::ptr::copy_nonoverlapping(src.add(from), out.add(o), to - from);
    o + (to - from)
}

#[inline(always)]
unsafe fn emit_copy2(out: *mut u8, o: usize, offset: usize, length: usize) -> usize {
    *out.add(o) = (((length - 1) << 2) | 2) as u8;
    *out.add(o + 1) = offset as u8;
    *out.add(o + 2) = (offset >> 8) as u8;
    o + 3
}

/// A copy of `length` (>= 4) bytes from `offset` (< 65536) back, in as few elements as it takes.
#[inline(always)]
unsafe fn emit_copy(out: *mut u8, mut o: usize, offset: usize, mut length: usize) -> usize {
    // Whole 64-byte copies while more than 67 remain, so that what is left is never below 4.
    while length >= 68 {
        o = emit_copy2(out, o, offset, 64);
        length -= 64;
    }
    if length > 64 {
        o = emit_copy2(out, o, offset, 60);
        length -= 60;
    }
    if length < 12 && offset < 2048 {
        *out.add(o) = (((offset >> 8) << 5) | ((length - 4) << 2) | 1) as u8;
        *out.add(o + 1) = offset as u8;
        return o + 2;
    }
    emit_copy2(out, o, offset, length)
}

/// Compresses memory[src, src + length) (one fragment, at most 64 KiB) to memory[out, ...), which has
/// room for the worst case (32 + length + length / 6); returns the bytes written (the elements only).
#[no_mangle]
pub unsafe extern "C" fn snappy_compress_fragment(src: *const u8, length: usize, out: *mut u8) -> usize {
    let table = &mut *core::ptr::addr_of_mut!(TABLE);
    let end = length;
    let mut bits = MIN_HASH_BITS;
    while bits < MAX_HASH_BITS && (1usize << bits) < length {
        bits += 1;
    }
    let shift = 32 - bits;
    table[..1 << bits].fill(0);
    let mut o = 0usize;
    let mut next_emit = 0usize;
    if length >= INPUT_MARGIN_BYTES {
        let ip_limit = end - INPUT_MARGIN_BYTES;
        let mut ip = 1usize;
        let mut next_hash = hash(load32(src.add(ip)), shift);
        'scan: loop {
            // Look for a 4-byte match, stepping further the longer none turns up (1 byte per probe for
            // the first 32 probes, then 2, ...), so that incompressible input is crossed quickly.
            let mut skip: usize = 32;
            let mut next_ip = ip;
            let mut candidate: usize;
            loop {
                ip = next_ip;
                let h = next_hash;
                next_ip = ip + (skip >> 5);
                skip += 1;
                if next_ip > ip_limit {
                    break 'scan;
                }
                next_hash = hash(load32(src.add(next_ip)), shift);
                candidate = table[h] as usize;
                table[h] = ip as u16;
                if load32(src.add(ip)) == load32(src.add(candidate)) {
                    break;
                }
            }
            o = emit_literal(out, o, src, next_emit, ip);
            // Emit copies for as long as the position right after one copy starts another match.
            loop {
                let base = ip;
                // The match's length: 8 bytes at a time (the first differing byte is the lowest set byte
                // of the XOR, the words being little-endian), then byte by byte up to the end.
                let mut matched = 4usize;
                while ip + matched + 8 <= end {
                    let diff = (src.add(ip + matched) as *const u64).read_unaligned() ^ (src.add(candidate + matched) as *const u64).read_unaligned();
                    if diff != 0 {
                        matched += (diff.trailing_zeros() / 8) as usize;
                        break;
                    }
                    matched += 8;
                }
                if ip + matched + 8 > end {
                    while ip + matched < end && *src.add(candidate + matched) == *src.add(ip + matched) {
                        matched += 1;
                    }
                }
                ip += matched;
                o = emit_copy(out, o, base - candidate, matched);
                next_emit = ip;
                if ip >= ip_limit {
                    break 'scan;
                }
                table[hash(load32(src.add(ip - 1)), shift)] = (ip - 1) as u16;
                let current = load32(src.add(ip));
                let h = hash(current, shift);
                candidate = table[h] as usize;
                table[h] = ip as u16;
                if current != load32(src.add(candidate)) {
                    break;
                }
            }
            ip += 1;
            next_hash = hash(load32(src.add(ip)), shift);
        }
    }
    if next_emit < end {
        o = emit_literal(out, o, src, next_emit, end);
    }
    o
}

//! LZ4 blocks: the decoder and the compressor of src/protocol/records/lz4.ts, sequence for sequence
//! (the compressor writes exactly the bytes the TypeScript one writes). The frame format around the
//! blocks stays in TypeScript.

/// What the decoder returns when the block needs more output than `out_limit` allows.
const OUTPUT_LIMIT: isize = -1;
/// What the decoder returns for a malformed block (the caller asks the TypeScript decoder for the reason).
const MALFORMED: isize = -2;

const MIN_MATCH: usize = 4;
const LAST_LITERALS: usize = 5;
const MATCH_FIND_LIMIT: usize = 12;
const MAX_OFFSET: usize = 65535;
const HASH_BITS: u32 = 14;
const HASH_MULTIPLIER: u32 = 0x9e37_79b1;
const SKIP_TRIGGER: u32 = 6;

#[inline(always)]
unsafe fn copy8(dst: *mut u8, src: *const u8) {
    (dst as *mut u64).write_unaligned((src as *const u64).read_unaligned());
}

/// Decodes the block memory[src, src + src_len) to memory[out, ...), the output cursor starting at
/// `out` and bounded by `out_limit`; matches may reach back to `window` and no further. Returns the
/// output cursor after the block, OUTPUT_LIMIT or MALFORMED. Literals of up to 16 bytes and matches at
/// offsets of 8 or more are copied 8 bytes at a time, which may write up to 16 bytes past the cursor
/// (and read as far past the input): those bytes are overwritten by what follows, or land in the slack.
#[no_mangle]
pub unsafe extern "C" fn lz4_decode_block(src: *const u8, src_len: usize, out: *mut u8, out_limit: usize, window: usize) -> isize {
    let base = out as usize;
    let mut at = 0usize;
    let end = src_len;
    let mut o = base;
    loop {
        if at >= end {
            return MALFORMED;
        }
        let token = *src.add(at) as usize;
        // The common sequence, taken in one go (liblz4's "shortcut"): fewer than 15 literals and a match
        // shorter than 19 bytes, with input to spare (so this is not the block's last sequence, and the
        // offset is there) and output to spare (so neither limit check could fail, and the fixed-size
        // copies stay below out_limit). The result is the general path's, byte for byte.
        let short_literals = token >> 4;
        let short_match = token & 15;
        if short_literals < 15 && short_match < 15 && end - at > 19 && out_limit - o >= 40 {
            at += 1;
            let dst = o as *mut u8;
            copy8(dst, src.add(at));
            copy8(dst.add(8), src.add(at + 8));
            at += short_literals;
            o += short_literals;
            let offset = (*src.add(at) as usize) | ((*src.add(at + 1) as usize) << 8);
            at += 2;
            if offset == 0 || offset > o - window {
                return MALFORMED;
            }
            let length = short_match + MIN_MATCH;
            let dst = o as *mut u8;
            let from = (o - offset) as *const u8;
            if offset >= 8 {
                copy8(dst, from);
                copy8(dst.add(8), from.add(8));
                copy8(dst.add(16), from.add(16));
            } else {
                let mut i = 0;
                while i < length {
                    *dst.add(i) = *from.add(i);
                    i += 1;
                }
            }
            o += length;
            continue;
        }
        at += 1;
        let mut literals = token >> 4;
        if literals == 15 {
            loop {
                if at >= end {
                    return MALFORMED;
                }
                let b = *src.add(at) as usize;
                at += 1;
                literals += b;
                if b != 255 {
                    break;
                }
            }
        }
        if literals > end - at {
            return MALFORMED;
        }
        if literals > out_limit - o {
            return OUTPUT_LIMIT;
        }
        let dst = o as *mut u8;
        if literals <= 16 {
            copy8(dst, src.add(at));
            copy8(dst.add(8), src.add(at + 8));
        } else {
            core::ptr::copy_nonoverlapping(src.add(at), dst, literals);
        }
        at += literals;
        o += literals;
        // The last sequence of a block is literals only.
        if at == end {
            return o as isize;
        }
        if end - at < 2 {
            return MALFORMED;
        }
        let offset = (*src.add(at) as usize) | ((*src.add(at + 1) as usize) << 8);
        at += 2;
        if offset == 0 || offset > o - window {
            return MALFORMED;
        }
        let mut length = token & 15;
        if length == 15 {
            loop {
                if at >= end {
                    return MALFORMED;
                }
                let b = *src.add(at) as usize;
                at += 1;
                length += b;
                if b != 255 {
                    break;
                }
            }
        }
        length += MIN_MATCH;
        if length > out_limit - o {
            return OUTPUT_LIMIT;
        }
        let dst = o as *mut u8;
        let from = (o - offset) as *const u8;
        if offset >= 8 {
            // Each 8-byte step reads only bytes already written: the match starts at least 8 bytes back.
            if length <= 16 {
                copy8(dst, from);
                copy8(dst.add(8), from.add(8));
            } else if offset >= length {
                core::ptr::copy_nonoverlapping(from, dst, length);
            } else {
                let mut i = 0;
                while i < length {
                    copy8(dst.add(i), from.add(i));
                    i += 8;
                }
            }
        } else {
            // A match closer than 8 bytes repeats a short pattern: byte by byte, forwards.
            let mut i = 0;
            while i < length {
                *dst.add(i) = *from.add(i);
                i += 1;
            }
        }
        o += length;
    }
}

/// The compressor's hash table: block-relative positions of 4-byte sequences.
static mut TABLE: [u16; 1 << HASH_BITS] = [0; 1 << HASH_BITS];

#[inline(always)]
unsafe fn load32(p: *const u8) -> u32 {
    (p as *const u32).read_unaligned()
}

#[inline(always)]
fn hash(value: u32) -> usize {
    (value.wrapping_mul(HASH_MULTIPLIER) >> (32 - HASH_BITS)) as usize
}

#[inline(always)]
unsafe fn write_length_extension(out: *mut u8, mut o: usize, mut rest: usize) -> usize {
    while rest >= 255 {
        *out.add(o) = 255;
        o += 1;
        rest -= 255;
    }
    *out.add(o) = rest as u8;
    o + 1
}

/// One sequence: the literals src[from, to), then (when match_length > 0) the match.
#[inline(always)]
unsafe fn write_sequence(out: *mut u8, mut o: usize, src: *const u8, from: usize, to: usize, offset: usize, match_length: usize) -> usize {
    let literals = to - from;
    let token_at = o;
    o += 1;
    let mut token: u8 = if literals >= 15 { 0xf0 } else { (literals << 4) as u8 };
    if literals >= 15 {
        o = write_length_extension(out, o, literals - 15);
    }
    core::ptr::copy_nonoverlapping(src.add(from), out.add(o), literals);
    o += literals;
    if match_length > 0 {
        *out.add(o) = (offset & 0xff) as u8;
        *out.add(o + 1) = (offset >> 8) as u8;
        o += 2;
        let rest = match_length - MIN_MATCH;
        if rest >= 15 {
            token |= 15;
            o = write_length_extension(out, o, rest - 15);
        } else {
            token |= rest as u8;
        }
    }
    *out.add(token_at) = token;
    o
}

/// Compresses memory[src, src + length) (at most 64 KiB) as one independent block to memory[out, ...),
/// which has room for the worst case (length + length / 255 + 16); returns the block's size.
#[no_mangle]
pub unsafe extern "C" fn lz4_compress_block(src: *const u8, length: usize, out: *mut u8) -> usize {
    let table = &mut *core::ptr::addr_of_mut!(TABLE);
    let end = length;
    let mut o = 0usize;
    let mut anchor = 0usize;
    if end > MATCH_FIND_LIMIT {
        table.fill(0);
        let match_find_limit = end - MATCH_FIND_LIMIT;
        let match_limit = end - LAST_LITERALS;
        let mut ip = 1usize;
        'search: loop {
            let mut probes: u32 = 1 << SKIP_TRIGGER;
            let mut candidate: usize;
            loop {
                if ip > match_find_limit {
                    break 'search;
                }
                let ip_value = load32(src.add(ip));
                let h = hash(ip_value);
                candidate = table[h] as usize;
                table[h] = ip as u16;
                if candidate < ip && ip - candidate <= MAX_OFFSET && load32(src.add(candidate)) == ip_value {
                    break;
                }
                ip += (probes >> SKIP_TRIGGER) as usize;
                probes += 1;
            }
            // Extend the match backwards over literals that also match.
            while ip > anchor && candidate > 0 && *src.add(ip - 1) == *src.add(candidate - 1) {
                ip -= 1;
                candidate -= 1;
            }
            // Forwards 8 bytes at a time (the first differing byte is the lowest set byte of the XOR, the
            // words being little-endian), then byte by byte up to the limit: the same length as bytewise.
            let mut match_length = MIN_MATCH;
            while ip + match_length + 8 <= match_limit {
                let diff = (src.add(ip + match_length) as *const u64).read_unaligned() ^ (src.add(candidate + match_length) as *const u64).read_unaligned();
                if diff != 0 {
                    match_length += (diff.trailing_zeros() / 8) as usize;
                    break;
                }
                match_length += 8;
            }
            if ip + match_length + 8 > match_limit {
                while ip + match_length < match_limit && *src.add(ip + match_length) == *src.add(candidate + match_length) {
                    match_length += 1;
                }
            }
            o = write_sequence(out, o, src, anchor, ip, ip - candidate, match_length);
            ip += match_length;
            anchor = ip;
            if ip > match_find_limit {
                break;
            }
            // Positions inside the match are likely starts of later matches; remember one of them.
            table[hash(load32(src.add(ip - 2)))] = (ip - 2) as u16;
        }
    }
    write_sequence(out, o, src, anchor, end, 0, 0)
}

// Element widths of data movement (compiler/ops/elements.py), pasted where a template has the line
// "// @include elem.glsl".  ELEM is the moved dtype's width in bytes:
//   4 (default): one element per 32-bit word, bound with its own type (float / int; LD / ST).
//   1 (bool, int8, uint8) and 2 (int16, float16): EL_PACKED, elements packed little-endian in the
//     words of `uint` bindings (numpy's layout); a template computes output element e's bits in
//     el_value(e), and writes whole words (el_word), so no two invocations write one word (copy_nd
//     writes single lanes atomically where other invocations own a word's other lanes).
//   8 (int64): moved as (low, high) word pairs, by geometry the compiler extends with a last
//     dimension of 2; the template sees 4-byte words (pad.comp reads ELEM 8 to pick its value's word).
// Defines: ELEM, N (output elements, EL_PACKED)
#ifndef ELEM
#define ELEM 4
#endif
#define EL_PACKED (ELEM < 4)
#if EL_PACKED
#define EL_PER (4 / ELEM)
#define EL_BITS (8 * ELEM)
#define EL_MASK ((1u << EL_BITS) - 1u)
// element e (>= 0) of a packed binding
#define EL_GET(buf, e) ((uint(buf[(e) / EL_PER]) >> (EL_BITS * ((e) % EL_PER))) & EL_MASK)

uint el_value(int e);          // the template's: output element e's bits

// The word whose lane 0 is output element `first`: lanes outside [0, N) are 0.
uint el_word(int first) {
    uint w = 0u;
    for (int j = 0; j < EL_PER; ++j) {
        int e = first + j;
        if (e >= 0 && e < N) w |= el_value(e) << (EL_BITS * j);
    }
    return w;
}
#endif

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates (U+D800..U+DFFF),
   nothing above U+10FFFF, no truncated sequences.  Pure; no I/O.  */
#ifndef SP_BASE_UTF8_H
#define SP_BASE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decodes one scalar value at s[0..len).  Returns the number of bytes used
   (1..4), or 0 when the bytes there are not strict UTF-8.  */
size_t sp_utf8_decode (const uint8_t *s, size_t len, uint32_t *codepoint);

/* True when all of s[0..len) is strict UTF-8.  On false, *bad_offset (if not
   NULL) is the offset of the first invalid sequence.  */
bool sp_utf8_valid (const uint8_t *s, size_t len, size_t *bad_offset);

#endif

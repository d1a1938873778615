/* Lexical rules that yajl does not enforce on its own, checked on the raw bytes
   before yajl sees them.  yajl accepts \v and \f as whitespace, lets \u0000
   through, pairs a high surrogate with any following \u escape, and does not
   reject overlong or surrogate UTF-8.  Grammar is still yajl's job.  Pure.  */
#ifndef SP_TEXT_JSON_TEXT_H
#define SP_TEXT_JSON_TEXT_H

#include <stddef.h>

#include "base/error.h"

/* Returns 0 when buf[0..len) passes every rule below, else -1 with *err naming
   the byte offset and the rule:
   - not empty, and no byte order mark;
   - the whole text is strict UTF-8 (see utf8.h);
   - outside strings: only printable ASCII and the four JSON whitespace bytes
     (space, tab, LF, CR), and at most max_depth nested objects and arrays;
   - inside strings: no raw byte below 0x20; every escape is one of
     \" \\ \/ \b \f \n \r \t or \uXXXX; no \u0000; a \u high surrogate is
     followed at once by a \u low surrogate, and no low surrogate stands alone;
   - every string is terminated.  */
int sp_json_text_check (const char *buf, size_t len, unsigned max_depth, sp_error_t *err);

#endif

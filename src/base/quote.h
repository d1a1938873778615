/* The one rule for showing a name from a tree (a seed, a clone, a rootfs, a
   tarball member) in an operator message: such names are untrusted, and a
   raw newline or escape sequence would forge a line or drive the operator's
   terminal.  Pure; no I/O.  */
#ifndef SP_BASE_QUOTE_H
#define SP_BASE_QUOTE_H

#include <stdbool.h>

#include "base/bounds.h"

/* Enough for SP_QUOTE_MAX_CHARS input bytes, each escaped as \xNN, plus
   "..." and the NUL.  */
#define SP_QUOTE_BUF_SIZE (SP_QUOTE_MAX_CHARS * 4 + 4)

/* Copies name into buf as printable ASCII only: a byte outside 0x20..0x7e, a
   backquote or a backslash becomes \xNN, and a name longer than
   SP_QUOTE_MAX_CHARS bytes is cut there and ends in "...".  A NULL name
   shows as "(none)".  Returns buf.  */
const char *sp_quote_name (const char *name, char buf[SP_QUOTE_BUF_SIZE]);

/* True when s could be what sp_quote_name wrote: non-empty, printable ASCII
   with neither a backquote nor a backslash but in a \xNN escape (lowercase
   hex), and within what SP_QUOTE_MAX_CHARS bytes of a name quote to, its
   "..." included.  For a quoted name read back from a file.  */
bool sp_quote_name_ok (const char *s);

#endif

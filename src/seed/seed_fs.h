/* Quoting an untrusted path for an error message, which tree_copy.c and
   git_seed.c share.  Static inline, because the seed library's source list is
   fixed.  Listing a directory and opening below one without following a
   symlink are the core's: include/sealed-probe/dir_names.h and
   include/sealed-probe/open_beneath.h.  */
#ifndef SP_SEED_FS_H
#define SP_SEED_FS_H

#include <stddef.h>
#include <string.h>

#include <sealed-probe/bounds.h>

/* Enough for SP_COPY_QUOTE_MAX_CHARS input bytes, each escaped as \xNN, plus
   "..." and the NUL.  */
#define SP_QUOTE_BUF_SIZE (SP_COPY_QUOTE_MAX_CHARS * 4 + 4)

/* Copies path into buf as printable ASCII only: a byte outside 0x20..0x7e, a
   backquote or a backslash becomes \xNN, and a path longer than
   SP_COPY_QUOTE_MAX_CHARS bytes is cut and ends in "...".  Returns buf.  */
static inline const char *
sp_seed_quote (const char *path, char buf[SP_QUOTE_BUF_SIZE])
{
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  size_t i;

  for (i = 0; path[i] != '\0' && i < SP_COPY_QUOTE_MAX_CHARS; i++)
    {
      unsigned char c = (unsigned char)path[i];

      if (c >= 0x20 && c <= 0x7e && c != '`' && c != '\\')
        buf[o++] = (char)c;
      else
        {
          buf[o++] = '\\';
          buf[o++] = 'x';
          buf[o++] = hex[c >> 4];
          buf[o++] = hex[c & 0xf];
        }
    }
  if (path[i] != '\0')
    {
      memcpy (buf + o, "...", 3);
      o += 3;
    }
  buf[o] = '\0';
  return buf;
}

#endif

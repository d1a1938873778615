/* Quoting names for messages: see src/base/quote.h.  */
#include "base/quote.h"

#include <stddef.h>
#include <string.h>

const char *
sp_quote_name (const char *name, char buf[SP_QUOTE_BUF_SIZE])
{
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  size_t i;

  if (name == NULL)
    name = "(none)";
  for (i = 0; name[i] != '\0' && i < SP_QUOTE_MAX_CHARS; i++)
    {
      unsigned char c = (unsigned char)name[i];

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
  if (name[i] != '\0')
    {
      memcpy (buf + o, "...", 3);
      o += 3;
    }
  buf[o] = '\0';
  return buf;
}

/* The value of a lowercase hex digit, or -1.  */
static int
hex_value (char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/* Whether sp_quote_name writes byte c as itself.  */
static bool
shown_plain (unsigned char c)
{
  return c >= 0x20 && c <= 0x7e && c != '`' && c != '\\';
}

bool
sp_quote_name_ok (const char *s)
{
  size_t bytes = 0; /* of the name the text stands for */
  size_t i = 0;

  if (s == NULL || s[0] == '\0')
    return false;
  while (s[i] != '\0')
    {
      if (bytes == SP_QUOTE_MAX_CHARS)
        return strcmp (s + i, "...") == 0; /* a cut name ends there */
      if (s[i] == '\\')
        {
          int hi = s[i + 1] == 'x' ? hex_value (s[i + 2]) : -1;
          int lo = hi < 0 ? -1 : hex_value (s[i + 3]);

          /* Only a byte sp_quote_name escapes is escaped, and no name holds
             a NUL.  */
          if (lo < 0 || hi * 16 + lo == 0 || shown_plain ((unsigned char)(hi * 16 + lo)))
            return false;
          i += 4;
        }
      else if (shown_plain ((unsigned char)s[i]))
        i++;
      else
        return false;
      bytes++;
    }
  return true;
}

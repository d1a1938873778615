/* Quoting names for messages: see include/sealed-probe/quote.h.  */
#include <sealed-probe/quote.h>

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

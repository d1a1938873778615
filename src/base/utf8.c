/* Strict UTF-8 decoding, table-free so that every rule is visible.  */
#include "base/utf8.h"

static bool
is_continuation (uint8_t b)
{
  return (b & 0xC0) == 0x80;
}

size_t
sp_utf8_decode (const uint8_t *s, size_t len, uint32_t *codepoint)
{
  uint32_t cp;
  size_t need;
  uint32_t min;

  if (len == 0)
    return 0;
  if (s[0] < 0x80)
    {
      *codepoint = s[0];
      return 1;
    }
  if (s[0] >= 0xC2 && s[0] <= 0xDF) /* 0xC0 and 0xC1 only start overlongs */
    {
      need = 2;
      cp = s[0] & 0x1F;
      min = 0x80;
    }
  else if ((s[0] & 0xF0) == 0xE0)
    {
      need = 3;
      cp = s[0] & 0x0F;
      min = 0x800;
    }
  else if (s[0] >= 0xF0 && s[0] <= 0xF4)
    {
      need = 4;
      cp = s[0] & 0x07;
      min = 0x10000;
    }
  else
    return 0;

  if (len < need)
    return 0;
  for (size_t i = 1; i < need; i++)
    {
      if (!is_continuation (s[i]))
        return 0;
      cp = (cp << 6) | (s[i] & 0x3F);
    }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  *codepoint = cp;
  return need;
}

bool
sp_utf8_valid (const uint8_t *s, size_t len, size_t *bad_offset)
{
  size_t i = 0;

  while (i < len)
    {
      uint32_t cp;
      size_t n;

      if (s[i] < 0x80)
        {
          i++;
          continue;
        }
      n = sp_utf8_decode (s + i, len - i, &cp);
      if (n == 0)
        {
          if (bad_offset)
            *bad_offset = i;
          return false;
        }
      i += n;
    }
  return true;
}

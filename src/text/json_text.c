/* The strict lexical pre-pass: see src/text/json_text.h.  */
#include "text/json_text.h"

#include <stdbool.h>
#include <stdint.h>

#include "base/utf8.h"

static int
hex_value (uint8_t c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Reads the four hex digits after "\u" at s[i]; i points at the backslash.  */
static int
read_u_escape (const uint8_t *s, size_t len, size_t i, uint32_t *unit)
{
  uint32_t v = 0;

  if (i + 6 > len || s[i] != '\\' || s[i + 1] != 'u')
    return -1;
  for (size_t k = 2; k < 6; k++)
    {
      int h = hex_value (s[i + k]);
      if (h < 0)
        return -1;
      v = (v << 4) | (uint32_t)h;
    }
  *unit = v;
  return 0;
}

/* Checks one string starting after its opening quote at s[*pos]; leaves *pos
   after the closing quote.  */
static int
check_string (const uint8_t *s, size_t len, size_t *pos, sp_error_t *err)
{
  size_t i = *pos;

  while (i < len)
    {
      uint8_t c = s[i];
      uint32_t unit, low;

      if (c == '"')
        {
          *pos = i + 1;
          return 0;
        }
      if (c < 0x20)
        return sp_make_error (err, 0, "raw control byte 0x%02x in a string at byte %zu", c, i);
      if (c != '\\')
        {
          i++;
          continue;
        }
      if (i + 1 >= len)
        break;
      switch (s[i + 1])
        {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
          i += 2;
          continue;
        case 'u':
          break;
        default:
          return sp_make_error (err, 0, "invalid escape at byte %zu", i);
        }
      if (read_u_escape (s, len, i, &unit) < 0)
        return sp_make_error (err, 0, "malformed \\u escape at byte %zu", i);
      if (unit == 0)
        return sp_make_error (err, 0, "escape decodes to NUL at byte %zu", i);
      if (unit >= 0xDC00 && unit <= 0xDFFF)
        return sp_make_error (err, 0, "unpaired low surrogate escape at byte %zu", i);
      if (unit >= 0xD800 && unit <= 0xDBFF)
        {
          if (read_u_escape (s, len, i + 6, &low) < 0 || low < 0xDC00 || low > 0xDFFF)
            return sp_make_error (err, 0, "unpaired high surrogate escape at byte %zu", i);
          i += 12;
          continue;
        }
      i += 6;
    }
  return sp_make_error (err, 0, "unterminated string");
}

int
sp_json_text_check (const char *buf, size_t len, unsigned max_depth, sp_error_t *err)
{
  const uint8_t *s = (const uint8_t *)buf;
  unsigned depth = 0;
  size_t bad;
  size_t i = 0;

  if (len == 0)
    return sp_make_error (err, 0, "empty document");
  if (len >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF)
    return sp_make_error (err, 0, "byte order mark at byte 0");
  if (!sp_utf8_valid (s, len, &bad))
    return sp_make_error (err, 0, "invalid UTF-8 at byte %zu", bad);

  while (i < len)
    {
      uint8_t c = s[i];

      switch (c)
        {
        case '"':
          i++;
          if (check_string (s, len, &i, err) < 0)
            return -1;
          continue;
        case '{':
        case '[':
          if (++depth > max_depth)
            return sp_make_error (err, 0, "nesting deeper than %u at byte %zu", max_depth, i);
          break;
        case '}':
        case ']':
          if (depth > 0)
            depth--;
          break;
        case ' ':
        case '\t':
        case '\n':
        case '\r':
          break;
        default:
          if (c < 0x21 || c > 0x7E)
            return sp_make_error (err, 0, "unexpected byte 0x%02x outside a string at byte %zu", c, i);
        }
      i++;
    }
  return 0;
}

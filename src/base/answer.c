/* Canonical answer rendering: see src/base/answer.h.  */
#include "base/answer.h"

#include <string.h>

#include "base/outcome.h"
#include "base/utf8.h"

static int
append (char *buf, size_t cap, size_t *used, const char *s, size_t n)
{
  if (cap - *used < n)
    return -1;
  memcpy (buf + *used, s, n);
  *used += n;
  return 0;
}

ssize_t
sp_answer_render (const struct sp_bytes *outcome, char *buf, size_t cap)
{
  static const char prefix[] = "{\"result\":\"";
  static const char suffix[] = "\"}";
  size_t used = 0;

  if (outcome == NULL)
    {
      if (cap < sizeof (SP_ANSWER_ERROR) - 1)
        return -1;
      memcpy (buf, SP_ANSWER_ERROR, sizeof (SP_ANSWER_ERROR) - 1);
      return (ssize_t)(sizeof (SP_ANSWER_ERROR) - 1);
    }

  if (append (buf, cap, &used, prefix, sizeof (prefix) - 1) < 0)
    return -1;
  for (size_t i = 0; i < outcome->len; i++)
    {
      char c = (char)outcome->data[i];

      if (outcome->data[i] < 0x20)
        return -1;
      if ((c == '"' || c == '\\') && append (buf, cap, &used, "\\", 1) < 0)
        return -1;
      if (append (buf, cap, &used, &c, 1) < 0)
        return -1;
    }
  if (append (buf, cap, &used, suffix, sizeof (suffix) - 1) < 0)
    return -1;
  return (ssize_t)used;
}

bool
sp_answer_value_ok (struct sp_bytes value)
{
  size_t off = 0;

  if (value.len == 0 || value.len > SP_ANSWER_OUTPUT_MAX_BYTES || value.data == NULL)
    return false;
  while (off < value.len)
    {
      uint32_t cp;
      size_t n = sp_utf8_decode (value.data + off, value.len - off, &cp);

      if (n == 0 || sp_outcome_char_forbidden (cp))
        return false;
      off += n;
    }
  return true;
}

ssize_t
sp_answer_render_value (const struct sp_bytes *value, char *buf, size_t cap)
{
  static const char prefix[] = SP_ANSWER_VALUE_PREFIX;
  size_t used = 0;

  if (value == NULL)
    return sp_answer_render (NULL, buf, cap);
  if (!sp_answer_value_ok (*value))
    return -1;
  if (append (buf, cap, &used, prefix, sizeof (prefix) - 1) < 0
      || append (buf, cap, &used, (const char *)value->data, value->len) < 0
      || append (buf, cap, &used, "}", 1) < 0)
    return -1;
  return (ssize_t)used;
}

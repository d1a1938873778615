/* Canonical answer rendering: see src/base/answer.h.  */
#include "base/answer.h"

#include <string.h>

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

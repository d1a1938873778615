/* A borrowed, length-delimited byte string.  Request fields are views into the
   frame buffer and may contain any byte, including NUL.  */
#ifndef SP_BASE_BYTES_H
#define SP_BASE_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct sp_bytes
{
  const uint8_t *data;
  size_t len;
};

static inline bool
sp_bytes_equal (struct sp_bytes a, struct sp_bytes b)
{
  return a.len == b.len && (a.len == 0 || memcmp (a.data, b.data, a.len) == 0);
}

static inline bool
sp_bytes_equal_str (struct sp_bytes a, const char *s)
{
  size_t n = strlen (s);
  return a.len == n && (n == 0 || memcmp (a.data, s, n) == 0);
}

#endif

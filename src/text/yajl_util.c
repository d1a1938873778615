/* yajl set-up shared by every parser here: see src/text/yajl_util.h.  */
#define _GNU_SOURCE
#include "text/yajl_util.h"

#include <string.h>

#include "base/cleanup.h"

yajl_handle
sp_yajl_strict_alloc (const yajl_callbacks *callbacks, void *ctx)
{
  yajl_handle h = yajl_alloc (callbacks, NULL, ctx);

  if (h == NULL)
    return NULL;
  if (!yajl_config (h, yajl_allow_comments, 0) || !yajl_config (h, yajl_dont_validate_strings, 0)
      || !yajl_config (h, yajl_allow_trailing_garbage, 0) || !yajl_config (h, yajl_allow_multiple_values, 0)
      || !yajl_config (h, yajl_allow_partial_values, 0))
    {
      yajl_free (h);
      return NULL;
    }
  return h;
}

char *
sp_yajl_error_line (yajl_handle h)
{
  unsigned char *msg = yajl_get_error (h, 0, NULL, 0);
  const char *text = msg ? (const char *)msg : "parse error";
  size_t n = strlen (text);
  char *line;

  while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '.'))
    n--;
  line = strndup (text, n);
  if (msg)
    yajl_free_error (h, msg);
  return line;
}

int
sp_yajl_gen_command (yajl_gen g, const char *step, char *const argv[])
{
  int bad = 0;

  bad |= yajl_gen_map_open (g) != yajl_gen_status_ok;
  bad |= yajl_gen_string (g, (const unsigned char *)"step", 4) != yajl_gen_status_ok;
  bad |= yajl_gen_string (g, (const unsigned char *)step, strlen (step)) != yajl_gen_status_ok;
  bad |= yajl_gen_string (g, (const unsigned char *)"argv", 4) != yajl_gen_status_ok;
  bad |= yajl_gen_array_open (g) != yajl_gen_status_ok;
  for (size_t i = 0; argv[i] != NULL; i++)
    bad |= yajl_gen_string (g, (const unsigned char *)argv[i], strlen (argv[i])) != yajl_gen_status_ok;
  bad |= yajl_gen_array_close (g) != yajl_gen_status_ok;
  bad |= yajl_gen_map_close (g) != yajl_gen_status_ok;
  return bad ? -1 : 0;
}

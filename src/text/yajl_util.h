/* The one way this project sets up yajl: the callback API with every lenience
   off, cleanup attributes for its handles, and its error as one safe line.  */
#ifndef SP_TEXT_YAJL_UTIL_H
#define SP_TEXT_YAJL_UTIL_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>

/* A parser with comments, unvalidated strings, trailing garbage, multiple
   values and partial values all off.  Each is yajl's default; setting them
   says that no contract depends on a library default.  NULL when allocation
   or configuration fails.  */
yajl_handle sp_yajl_strict_alloc (const yajl_callbacks *callbacks, void *ctx);

/* yajl's terse error message for h, as one line with its trailing newline and
   full stop removed, or NULL when out of memory.  Never the verbose form,
   which quotes the input and could so echo a secret.  The caller frees it.  */
char *sp_yajl_error_line (yajl_handle h);

/* Appends {"step": STEP, "argv": [...]} (argv NULL-terminated) to g: one
   command line of a dry run's runtime-commands.json.  Returns 0, or -1
   when yajl fails.  */
int sp_yajl_gen_command (yajl_gen g, const char *step, char *const argv[]);

/* A NUL-terminated string (a key or a value), and a key with an unsigned
   number: each returns yajl's status, so that a run of calls can be OR-ed
   together and checked once (yajl_gen_status_ok is 0).  */
static inline unsigned
sp_yajl_gen_cstr (yajl_gen g, const char *s)
{
  return yajl_gen_string (g, (const unsigned char *)s, strlen (s));
}

static inline unsigned
sp_yajl_gen_key_u64 (yajl_gen g, const char *key, uint64_t v)
{
  char text[24];
  int n = snprintf (text, sizeof (text), "%" PRIu64, v);

  return sp_yajl_gen_cstr (g, key) | yajl_gen_number (g, text, (size_t)n);
}

static inline void
sp_yajl_freep (yajl_handle *h)
{
  if (*h)
    yajl_free (*h);
  *h = NULL;
}
#define cleanup_yajl __attribute__ ((cleanup (sp_yajl_freep)))

static inline void
sp_yajl_gen_freep (yajl_gen *g)
{
  if (*g)
    yajl_gen_free (*g);
  *g = NULL;
}
#define cleanup_yajl_gen __attribute__ ((cleanup (sp_yajl_gen_freep)))

#endif

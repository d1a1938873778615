/* The strict JSON tree: see src/text/json.h.  The tree is built
   from yajl's callback API through the builder (json_builder.h), which the
   YAML reader shares; every node is attached to its parent the moment it is
   created, so freeing the root frees everything on every error path.  */
#define _GNU_SOURCE
#include "text/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/utf8.h"
#include "text/json_builder.h"
#include "text/json_text.h"
#include "text/yajl_util.h"

/* ---- path rendering ------------------------------------------------------ */

struct strbuf
{
  char *data;
  size_t len;
  size_t cap;
  bool oom;
};

static void
sb_append (struct strbuf *sb, const char *s, size_t n)
{
  if (sb->oom)
    return;
  if (sb->cap - sb->len < n + 1)
    {
      size_t next = sb->cap ? sb->cap : 64;
      char *grown;

      while (next - sb->len < n + 1)
        {
          if (next > SIZE_MAX / 2)
            {
              sb->oom = true;
              return;
            }
          next *= 2;
        }
      grown = realloc (sb->data, next);
      if (grown == NULL)
        {
          sb->oom = true;
          return;
        }
      sb->data = grown;
      sb->cap = next;
    }
  memcpy (sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = '\0';
}

static void
sb_puts (struct strbuf *sb, const char *s)
{
  sb_append (sb, s, strlen (s));
}

static char *
sb_finish (struct strbuf *sb)
{
  if (sb->oom || sb->data == NULL)
    {
      free (sb->data);
      return NULL;
    }
  return sb->data;
}

/* Appends s quoted, JSON-style, as printable ASCII only: control characters
   and every non-ASCII scalar are written as \uXXXX (so a key can carry no
   terminal escape or bidi trick into a log), and at most
   SP_JSON_ECHO_MAX_CHARS characters are shown.  */
static void
sb_quote (struct strbuf *sb, const char *s, size_t len)
{
  const uint8_t *p = (const uint8_t *)s;
  size_t shown = 0;
  size_t i = 0;

  sb_append (sb, "\"", 1);
  while (i < len)
    {
      uint32_t cp;
      size_t n;
      char tmp[16];

      if (shown == SP_JSON_ECHO_MAX_CHARS)
        {
          sb_puts (sb, "...");
          break;
        }
      n = sp_utf8_decode (p + i, len - i, &cp);
      if (n == 0)
        {
          /* Not reachable for parsed text; keep going byte by byte.  */
          cp = 0xFFFD;
          n = 1;
        }
      if (cp == '"' || cp == '\\')
        {
          tmp[0] = '\\';
          tmp[1] = (char)cp;
          sb_append (sb, tmp, 2);
        }
      else if (cp >= 0x20 && cp < 0x7F)
        {
          tmp[0] = (char)cp;
          sb_append (sb, tmp, 1);
        }
      else if (cp < 0x10000)
        {
          snprintf (tmp, sizeof tmp, "\\u%04X", (unsigned)cp);
          sb_puts (sb, tmp);
        }
      else
        {
          uint32_t v = cp - 0x10000;
          snprintf (tmp, sizeof tmp, "\\u%04X\\u%04X", (unsigned)(0xD800 + (v >> 10)),
                    (unsigned)(0xDC00 + (v & 0x3FF)));
          sb_puts (sb, tmp);
        }
      shown++;
      i += n;
    }
  sb_append (sb, "\"", 1);
}

char *
sp_json_quote (const char *s, size_t len)
{
  struct strbuf sb = { 0 };

  sb_quote (&sb, s, len);
  return sb_finish (&sb);
}

/* A key that reads unambiguously after a dot; anything else is bracketed.  */
static bool
key_is_plain (const char *key)
{
  if (*key == '\0' || strlen (key) > SP_JSON_ECHO_MAX_CHARS)
    return false;
  for (const char *p = key; *p; p++)
    {
      char c = *p;
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'
            || c == '$'))
        return false;
    }
  return true;
}

static void
sb_path_key (struct strbuf *sb, const char *key)
{
  if (key_is_plain (key))
    {
      if (sb->len > 0)
        sb_append (sb, ".", 1);
      sb_puts (sb, key);
      return;
    }
  sb_append (sb, "[", 1);
  sb_quote (sb, key, strlen (key));
  sb_append (sb, "]", 1);
}

static void
sb_path_index (struct strbuf *sb, size_t index)
{
  char tmp[32];

  snprintf (tmp, sizeof tmp, "[%zu]", index);
  sb_puts (sb, tmp);
}

char *
sp_json_path_key (const char *parent, const char *key)
{
  struct strbuf sb = { 0 };

  if (parent && strcmp (parent, SP_JSON_ROOT_PATH) != 0)
    sb_puts (&sb, parent);
  sb_path_key (&sb, key);
  return sb_finish (&sb);
}

char *
sp_json_path_index (const char *parent, size_t index)
{
  struct strbuf sb = { 0 };

  /* An array at the root reads as "(document)[3]".  */
  sb_puts (&sb, parent ? parent : SP_JSON_ROOT_PATH);
  sb_path_index (&sb, index);
  return sb_finish (&sb);
}

/* ---- the JSON reader: yajl's callbacks feed the builder ------------------ */

struct reader
{
  struct sp_json_builder b;
  sp_error_t *err;
  bool failed; /* a callback set *err */
};

/* A builder's verdict as a yajl callback's: 1 goes on, 0 stops yajl.  */
static int
step (struct reader *r, int ret)
{
  if (ret < 0)
    {
      r->failed = true;
      return 0;
    }
  return 1;
}

static int
cb_null (void *ctx)
{
  struct reader *r = ctx;
  return step (r, sp_json_builder_null (&r->b, r->err));
}

static int
cb_boolean (void *ctx, int value)
{
  struct reader *r = ctx;
  return step (r, sp_json_builder_bool (&r->b, value != 0, r->err));
}

static int
cb_number (void *ctx, const char *text, size_t len)
{
  struct reader *r = ctx;
  return step (r, sp_json_builder_number (&r->b, text, len, r->err));
}

static int
cb_string (void *ctx, const unsigned char *s, size_t len)
{
  struct reader *r = ctx;
  return step (r, sp_json_builder_string (&r->b, (const char *)s, len, r->err));
}

static int
cb_start_map (void *ctx)
{
  struct reader *r = ctx;
  return step (r, sp_json_builder_open (&r->b, SP_JSON_OBJECT, r->err));
}

static int
cb_start_array (void *ctx)
{
  struct reader *r = ctx;
  return step (r, sp_json_builder_open (&r->b, SP_JSON_ARRAY, r->err));
}

static int
cb_map_key (void *ctx, const unsigned char *key, size_t len)
{
  struct reader *r = ctx;
  return step (r, sp_json_builder_key (&r->b, (const char *)key, len, r->err));
}

static int
cb_end (void *ctx)
{
  struct reader *r = ctx;
  return step (r, sp_json_builder_close (&r->b, r->err));
}

static const yajl_callbacks callbacks = {
  .yajl_null = cb_null,
  .yajl_boolean = cb_boolean,
  .yajl_number = cb_number, /* raw text: no lossy conversion to double */
  .yajl_string = cb_string,
  .yajl_start_map = cb_start_map,
  .yajl_map_key = cb_map_key,
  .yajl_end_map = cb_end,
  .yajl_start_array = cb_start_array,
  .yajl_end_array = cb_end,
};

static int
yajl_failure (struct reader *r, yajl_handle h, size_t offset)
{
  cleanup_free char *msg = sp_yajl_error_line (h);
  cleanup_free char *path = sp_json_builder_path (&r->b, true);

  return sp_make_error (r->err, 0, "%s: invalid JSON at byte %zu (%s)", path ? path : SP_JSON_ROOT_PATH,
                        offset, msg ? msg : "parse error");
}

int
sp_json_parse_checked (const char *buf, size_t len, unsigned max_depth, struct sp_json **out, bool *not_json,
                       sp_error_t *err)
{
  cleanup_yajl yajl_handle h = NULL;
  struct reader r = { .err = err };
  yajl_status st;
  size_t offset;
  int ret = -1;

  *out = NULL;
  *not_json = false;
  if (max_depth > SP_JSON_DEPTH_LIMIT)
    max_depth = SP_JSON_DEPTH_LIMIT;
  if (sp_json_text_check (buf, len, max_depth, err) < 0)
    {
      *not_json = true;
      return sp_error_wrap (err, SP_JSON_ROOT_PATH);
    }

  h = sp_yajl_strict_alloc (&callbacks, &r);
  if (h == NULL)
    return sp_make_error (err, ENOMEM, "allocate the JSON parser");

  st = yajl_parse (h, (const unsigned char *)buf, len);
  offset = yajl_get_bytes_consumed (h);
  if (st == yajl_status_ok)
    {
      /* Always, so that a truncated document is an error.  */
      st = yajl_complete_parse (h);
      offset = len;
    }
  if (r.failed)
    goto out; /* a callback stopped yajl and said why */
  if (st != yajl_status_ok)
    {
      *not_json = true;
      yajl_failure (&r, h, offset);
      goto out;
    }
  *out = sp_json_builder_take (&r.b);
  if (*out == NULL)
    {
      *not_json = true;
      sp_make_error (err, 0, "%s: incomplete JSON document", SP_JSON_ROOT_PATH);
      goto out;
    }
  ret = 0;

out:
  sp_json_builder_release (&r.b);
  return ret;
}

int
sp_json_parse (const char *buf, size_t len, unsigned max_depth, struct sp_json **out, sp_error_t *err)
{
  bool not_json;

  return sp_json_parse_checked (buf, len, max_depth, out, &not_json, err);
}

void
sp_json_free (struct sp_json *value)
{
  if (value == NULL)
    return;
  switch (value->type)
    {
    case SP_JSON_NUMBER:
      free (value->u.number);
      break;
    case SP_JSON_STRING:
      free (value->u.string.data);
      break;
    case SP_JSON_ARRAY:
      for (size_t i = 0; i < value->u.array.len; i++)
        sp_json_free (value->u.array.items[i]);
      free (value->u.array.items);
      break;
    case SP_JSON_OBJECT:
      for (size_t i = 0; i < value->u.object.len; i++)
        {
          free (value->u.object.members[i].key);
          sp_json_free (value->u.object.members[i].value);
        }
      free (value->u.object.members);
      break;
    case SP_JSON_NULL:
    case SP_JSON_BOOL:
    default:
      break;
    }
  free (value);
}

const struct sp_json *
sp_json_object_get (const struct sp_json *obj, const char *key)
{
  if (obj == NULL || obj->type != SP_JSON_OBJECT || key == NULL)
    return NULL;
  for (size_t i = 0; i < obj->u.object.len; i++)
    if (strcmp (obj->u.object.members[i].key, key) == 0)
      return obj->u.object.members[i].value;
  return NULL;
}

int
sp_json_integer (const struct sp_json *value, int64_t min, int64_t max, int64_t *out)
{
  const char *p;
  bool negative = false;
  uint64_t magnitude = 0;
  /* |INT64_MIN| fits in uint64_t; a positive value must stay <= INT64_MAX.  */
  uint64_t limit;
  int64_t v;

  if (value == NULL || value->type != SP_JSON_NUMBER || value->u.number == NULL)
    return -1;
  p = value->u.number;
  if (*p == '-')
    {
      negative = true;
      p++;
    }
  if (*p < '0' || *p > '9')
    return -1;
  if (*p == '0' && p[1] != '\0')
    return -1; /* a leading zero, a fraction or an exponent */
  limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (; *p; p++)
    {
      unsigned d;

      if (*p < '0' || *p > '9')
        return -1; /* '.', 'e', 'E' or junk: not a plain integer */
      d = (unsigned)(*p - '0');
      if (magnitude > (limit - d) / 10)
        return -1;
      magnitude = magnitude * 10 + d;
    }
  if (negative)
    v = magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)magnitude;
  else
    v = (int64_t)magnitude;
  if (v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

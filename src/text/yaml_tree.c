/* The strict YAML reader: see src/text/yaml_tree.h.  libyaml's
   parser hands over events; every node goes through the JSON tree's builder
   (json_builder.h) the moment it is read.  The event API never expands an
   alias (only libyaml's loader does), and the first alias is refused, so no
   document can grow while it is read.  */
#define _GNU_SOURCE
#include "text/yaml_tree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/utf8.h"
#include "text/json_builder.h"

/* ---- plain scalars ------------------------------------------------------- */

enum plain_kind
{
  PLAIN_STRING,
  PLAIN_NULL,
  PLAIN_TRUE,
  PLAIN_FALSE,
  PLAIN_NUMBER,
  /* Refused: YAML 1.1 and 1.2 disagree, or JSON cannot write it.  */
  PLAIN_BOOL11,
  PLAIN_OCTAL_LEADING_ZERO,
  PLAIN_OCTAL_0O,
  PLAIN_HEX,
  PLAIN_BINARY,
  PLAIN_UNDERSCORE,
  PLAIN_SEXAGESIMAL,
  PLAIN_TIMESTAMP,
  PLAIN_INF_NAN,
  PLAIN_NON_JSON_NUMBER,
  PLAIN_MERGE,
};

/* For each refused kind: what the scalar is (for a key) and the whole
   reason (for a value).  None quotes the value; the 1.1 boolean's reason,
   which shows one of six fixed words, is in on_value.  */
static const struct
{
  const char *noun;
  const char *reason;
} refused[] = {
  [PLAIN_BOOL11] = { "a boolean in YAML 1.1", NULL },
  [PLAIN_OCTAL_LEADING_ZERO]
  = { "an octal integer in YAML 1.1",
      "an integer with a leading zero is octal in YAML 1.1; write it without leading "
      "zeros, or quote it for a string" },
  [PLAIN_OCTAL_0O]
  = { "an octal integer in YAML 1.2",
      "a 0o integer is octal in YAML 1.2 but a string in YAML 1.1; write a decimal integer, or "
      "quote it for a string" },
  [PLAIN_HEX]
  = { "a hexadecimal integer",
      "a 0x integer is hexadecimal, which JSON cannot write; write a decimal integer, or quote it "
      "for a string" },
  [PLAIN_BINARY]
  = { "a binary integer in YAML 1.1",
      "a 0b integer is binary in YAML 1.1 but a string in YAML 1.2; write a decimal integer, or "
      "quote it for a string" },
  [PLAIN_UNDERSCORE]
  = { "a number in YAML 1.1",
      "digits with \"_\" are a number in YAML 1.1 but a string in YAML 1.2; write the number "
      "without \"_\", or quote it for a string" },
  [PLAIN_SEXAGESIMAL]
  = { "a base-60 number in YAML 1.1",
      "digits with \":\" (as in 1:30) are a base-60 number in YAML 1.1 but a string in YAML "
      "1.2; quote it for a string" },
  [PLAIN_TIMESTAMP] = { "a timestamp in YAML 1.1",
                        "a date is a timestamp in YAML 1.1 but a string in YAML 1.2; quote it for a string" },
  [PLAIN_INF_NAN]
  = { "a float that JSON cannot write",
      ".inf and .nan are YAML floats that JSON cannot write; write a number, or quote it for a "
      "string" },
  [PLAIN_NON_JSON_NUMBER]
  = { "a number in YAML 1.2",
      "a YAML 1.2 number not written as JSON writes one (as +1, .5 or 1. are); write it "
      "as JSON does, or quote it for a string" },
  [PLAIN_MERGE] = { "a YAML 1.1 merge key",
                    "\"<<\" is a YAML 1.1 merge key, and merging is not allowed; quote it for a string" },
};

static bool
is_digit (char c)
{
  return c >= '0' && c <= '9';
}

static bool
text_is (const char *s, size_t n, const char *word)
{
  return strlen (word) == n && memcmp (s, word, n) == 0;
}

static bool
text_is_any_case (const char *s, size_t n, const char *word)
{
  return strlen (word) == n && strncasecmp (s, word, n) == 0;
}

/* s[0..n) is not empty and every byte is in set.  */
static bool
all_in (const char *s, size_t n, const char *set)
{
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] == '\0' || strchr (set, s[i]) == NULL)
      return false;
  return true;
}

static size_t
count_digits (const char *s, size_t n, size_t i)
{
  size_t k = 0;

  while (i + k < n && is_digit (s[i + k]))
    k++;
  return k;
}

/* An optional [eE][-+]?[0-9]+ at s[*i]; false when one starts but is broken.  */
static bool
skip_exponent (const char *s, size_t n, size_t *i)
{
  size_t k;

  if (*i == n || (s[*i] != 'e' && s[*i] != 'E'))
    return true;
  (*i)++;
  if (*i < n && (s[*i] == '+' || s[*i] == '-'))
    (*i)++;
  k = count_digits (s, n, *i);
  *i += k;
  return k > 0;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?, RFC 8259's number.  */
static bool
is_json_number (const char *s, size_t n)
{
  size_t i = 0, k;

  if (i < n && s[i] == '-')
    i++;
  k = count_digits (s, n, i);
  if (k == 0 || (s[i] == '0' && k > 1))
    return false;
  i += k;
  if (i < n && s[i] == '.')
    {
      k = count_digits (s, n, ++i);
      if (k == 0)
        return false;
      i += k;
    }
  return skip_exponent (s, n, &i) && i == n;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, the YAML 1.2 core
   schema's float, which also covers its decimal integer.  */
static bool
is_yaml12_number (const char *s, size_t n)
{
  size_t i = 0, k;

  if (i < n && (s[i] == '+' || s[i] == '-'))
    i++;
  k = count_digits (s, n, i);
  i += k;
  if (i < n && s[i] == '.')
    {
      size_t f = count_digits (s, n, ++i);
      if (k == 0 && f == 0)
        return false;
      i += f;
    }
  else if (k == 0)
    return false;
  return skip_exponent (s, n, &i) && i == n;
}

/* [0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?, YAML 1.1's base-60 int and float.  */
static bool
is_sexagesimal (const char *s, size_t n)
{
  size_t i = 0;
  bool colon = false;

  if (n == 0 || !is_digit (s[0]))
    return false;
  while (i < n && (is_digit (s[i]) || s[i] == '_'))
    i++;
  while (i < n && s[i] == ':')
    {
      size_t k = count_digits (s, n, ++i);
      if (k == 0 || k > 2 || (k == 2 && s[i] > '5'))
        return false;
      i += k;
      colon = true;
    }
  if (!colon)
    return false;
  if (i < n && s[i] == '.')
    {
      i++;
      while (i < n && (is_digit (s[i]) || s[i] == '_'))
        i++;
    }
  return i == n;
}

/* YYYY-M-D, alone or followed by a time ([Tt] or blanks, then a digit):
   the start of YAML 1.1's timestamp.  */
static bool
is_timestamp (const char *s, size_t n)
{
  size_t i = 4, k;

  if (count_digits (s, n, 0) != 4 || i == n || s[i] != '-')
    return false;
  k = count_digits (s, n, ++i);
  if (k < 1 || k > 2 || (i += k) == n || s[i] != '-')
    return false;
  k = count_digits (s, n, ++i);
  if (k < 1 || k > 2)
    return false;
  i += k;
  if (i == n)
    return true;
  if (s[i] == 'T' || s[i] == 't')
    i++;
  else
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
      i++;
  return i < n && is_digit (s[i]);
}

static enum plain_kind
classify_plain (const char *s, size_t n)
{
  static const char *const bool11[] = { "y", "n", "yes", "no", "on", "off" };
  const char *t = s;
  size_t m = n;

  if (n == 0 || text_is (s, n, "~") || text_is (s, n, "null") || text_is (s, n, "Null")
      || text_is (s, n, "NULL"))
    return PLAIN_NULL;
  if (text_is (s, n, "true") || text_is (s, n, "True") || text_is (s, n, "TRUE"))
    return PLAIN_TRUE;
  if (text_is (s, n, "false") || text_is (s, n, "False") || text_is (s, n, "FALSE"))
    return PLAIN_FALSE;
  for (size_t i = 0; i < sizeof (bool11) / sizeof (bool11[0]); i++)
    if (text_is_any_case (s, n, bool11[i]))
      return PLAIN_BOOL11;
  if (text_is (s, n, "<<"))
    return PLAIN_MERGE;
  if (is_json_number (s, n))
    return PLAIN_NUMBER;

  /* From here on, a scalar is refused or is a string.  */
  if (s[0] == '+' || s[0] == '-')
    t++, m--;
  if (text_is_any_case (t, m, ".inf") || text_is_any_case (t, m, ".nan"))
    return PLAIN_INF_NAN;
  if (m > 2 && t[0] == '0' && t[1] == 'o' && all_in (t + 2, m - 2, "01234567_"))
    return PLAIN_OCTAL_0O;
  if (m > 2 && t[0] == '0' && t[1] == 'x' && all_in (t + 2, m - 2, "0123456789abcdefABCDEF_"))
    return PLAIN_HEX;
  if (m > 2 && t[0] == '0' && t[1] == 'b' && all_in (t + 2, m - 2, "01_"))
    return PLAIN_BINARY;
  if (is_sexagesimal (t, m))
    return PLAIN_SEXAGESIMAL;
  if (is_timestamp (s, n))
    return PLAIN_TIMESTAMP;
  if (m > 0 && (is_digit (t[0]) || t[0] == '.') && all_in (t, m, "0123456789_.eE+-") && memchr (t, '_', m))
    return PLAIN_UNDERSCORE;
  if (m > 1 && t[0] == '0' && all_in (t, m, "0123456789"))
    return PLAIN_OCTAL_LEADING_ZERO;
  if (is_yaml12_number (s, n))
    return PLAIN_NON_JSON_NUMBER;
  return PLAIN_STRING;
}

/* ---- the reader ---------------------------------------------------------- */

struct reader
{
  struct sp_json_builder b;
  unsigned max_depth;
  bool seen_document;
  sp_error_t *err;
};

/* The innermost open container is a mapping waiting for its next key.  */
static bool
at_key (const struct reader *r)
{
  const struct sp_json *c;

  if (r->b.depth == 0)
    return false;
  c = r->b.frames[r->b.depth - 1].node;
  return c->type == SP_JSON_OBJECT
         && (c->u.object.len == 0 || c->u.object.members[c->u.object.len - 1].value != NULL);
}

/* "<path>: <reason>", the path being the value's, or the mapping's for a key.  */
static int __attribute__ ((format (printf, 2, 3))) fail_at (struct reader *r, const char *fmt, ...)
{
  cleanup_free char *path = sp_json_builder_path (&r->b, !at_key (r));
  cleanup_free char *reason = NULL;
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vasprintf (&reason, fmt, ap);
  va_end (ap);
  if (n < 0 || path == NULL)
    return sp_make_error (r->err, ENOMEM, "parse YAML");
  return sp_make_error (r->err, 0, "%s: %s", path, reason);
}

static int
check_node_properties (struct reader *r, const yaml_char_t *anchor, const yaml_char_t *tag)
{
  /* Neither the anchor's name nor the tag is shown: both are document text.  */
  if (anchor != NULL)
    return fail_at (r, "anchors (&name) are not allowed");
  if (tag != NULL)
    return fail_at (r, "tags (!tag) are not allowed, !!str included; quote a string instead");
  return 0;
}

static int
check_string (struct reader *r, const char *s, size_t n, const yaml_mark_t *mark)
{
  if (memchr (s, '\0', n) != NULL)
    return fail_at (r, "escape decodes to NUL at line %zu, column %zu", mark->line + 1, mark->column + 1);
  if (!sp_utf8_valid ((const uint8_t *)s, n, NULL))
    return fail_at (r, "invalid UTF-8 in a string at line %zu, column %zu", mark->line + 1, mark->column + 1);
  return 0;
}

static int
on_key (struct reader *r, const char *s, size_t n, bool plain)
{
  const char *noun = NULL;

  if (plain)
    switch (classify_plain (s, n))
      {
      case PLAIN_STRING:
        break;
      case PLAIN_NULL:
        noun = "null";
        break;
      case PLAIN_TRUE:
      case PLAIN_FALSE:
        noun = "a boolean";
        break;
      case PLAIN_NUMBER:
        noun = "a number";
        break;
      case PLAIN_MERGE:
        return fail_at (r, "merge keys (<<) are not allowed");
      default:
        noun = refused[classify_plain (s, n)].noun;
        break;
      }
  if (noun != NULL)
    {
      cleanup_free char *quoted = sp_json_quote (s, n);
      if (quoted == NULL)
        return sp_make_error (r->err, ENOMEM, "parse YAML");
      return fail_at (r, "plain key %s is %s, not a string; quote it", quoted, noun);
    }
  return sp_json_builder_key (&r->b, s, n, r->err);
}

static int
on_value (struct reader *r, const char *s, size_t n, bool plain)
{
  enum plain_kind kind = plain ? classify_plain (s, n) : PLAIN_STRING;

  switch (kind)
    {
    case PLAIN_STRING:
      return sp_json_builder_string (&r->b, s, n, r->err);
    case PLAIN_NULL:
      return sp_json_builder_null (&r->b, r->err);
    case PLAIN_TRUE:
    case PLAIN_FALSE:
      return sp_json_builder_bool (&r->b, kind == PLAIN_TRUE, r->err);
    case PLAIN_NUMBER:
      return sp_json_builder_number (&r->b, s, n, r->err);
    case PLAIN_BOOL11:
      /* One of six words, at most three letters: safe to show.  */
      return fail_at (r, "\"%s\" is a YAML 1.1 boolean; write true or false, or quote it for a string", s);
    default:
      return fail_at (r, "%s", refused[kind].reason);
    }
}

static int
on_scalar (struct reader *r, const yaml_event_t *ev)
{
  const char *s = (const char *)ev->data.scalar.value;
  size_t n = ev->data.scalar.length;
  bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;

  if (check_node_properties (r, ev->data.scalar.anchor, ev->data.scalar.tag) < 0)
    return -1;
  if (check_string (r, s, n, &ev->start_mark) < 0)
    return -1;
  if (at_key (r))
    return on_key (r, s, n, plain);
  return on_value (r, s, n, plain);
}

static int
on_open (struct reader *r, const yaml_event_t *ev, enum sp_json_type type, const yaml_char_t *anchor,
         const yaml_char_t *tag)
{
  if (check_node_properties (r, anchor, tag) < 0)
    return -1;
  if (at_key (r))
    return fail_at (r, "a key must be a string, not a %s", type == SP_JSON_OBJECT ? "mapping" : "sequence");
  if (r->b.depth >= r->max_depth)
    return sp_make_error (r->err, 0, SP_JSON_ROOT_PATH ": nesting deeper than %u at line %zu, column %zu",
                          r->max_depth, ev->start_mark.line + 1, ev->start_mark.column + 1);
  return sp_json_builder_open (&r->b, type, r->err);
}

static int
on_event (struct reader *r, const yaml_event_t *ev)
{
  switch (ev->type)
    {
    case YAML_STREAM_START_EVENT:
    case YAML_DOCUMENT_END_EVENT:
      return 0;
    case YAML_DOCUMENT_START_EVENT:
      if (r->seen_document)
        return sp_make_error (r->err, 0,
                              SP_JSON_ROOT_PATH ": more than one document (a second one starts at line %zu)",
                              ev->start_mark.line + 1);
      r->seen_document = true;
      if (ev->data.document_start.version_directive != NULL
          || ev->data.document_start.tag_directives.start != ev->data.document_start.tag_directives.end)
        return sp_make_error (r->err, 0, SP_JSON_ROOT_PATH ": %%YAML and %%TAG directives are not allowed");
      return 0;
    case YAML_STREAM_END_EVENT:
      if (!r->seen_document)
        return sp_make_error (r->err, 0, SP_JSON_ROOT_PATH ": empty document");
      return 0;
    case YAML_ALIAS_EVENT:
      return fail_at (r, "aliases (*name) are not allowed");
    case YAML_SCALAR_EVENT:
      return on_scalar (r, ev);
    case YAML_SEQUENCE_START_EVENT:
      return on_open (r, ev, SP_JSON_ARRAY, ev->data.sequence_start.anchor, ev->data.sequence_start.tag);
    case YAML_MAPPING_START_EVENT:
      return on_open (r, ev, SP_JSON_OBJECT, ev->data.mapping_start.anchor, ev->data.mapping_start.tag);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
      return sp_json_builder_close (&r->b, r->err);
    case YAML_NO_EVENT:
    default:
      return sp_make_error (r->err, EINVAL, "parse YAML: unexpected event %d", (int)ev->type);
    }
}

/* libyaml's problem and context are fixed phrases, never document text.  */
static int
syntax_error (struct reader *r, const yaml_parser_t *p)
{
  cleanup_free char *path = sp_json_builder_path (&r->b, true);
  const char *where = path ? path : SP_JSON_ROOT_PATH;
  const char *problem = p->problem ? p->problem : "parse error";

  switch (p->error)
    {
    case YAML_MEMORY_ERROR:
      return sp_make_error (r->err, ENOMEM, "parse YAML");
    case YAML_READER_ERROR:
      return sp_make_error (r->err, 0, "%s: invalid YAML at byte %zu (%s)", where, p->problem_offset,
                            problem);
    case YAML_SCANNER_ERROR:
    case YAML_PARSER_ERROR:
      return sp_make_error (r->err, 0, "%s: invalid YAML at line %zu, column %zu (%s%s%s)", where,
                            p->problem_mark.line + 1, p->problem_mark.column + 1, problem,
                            p->context ? ", " : "", p->context ? p->context : "");
    case YAML_NO_ERROR:
    case YAML_COMPOSER_ERROR:
    case YAML_WRITER_ERROR:
    case YAML_EMITTER_ERROR:
    default:
      return sp_make_error (r->err, 0, "%s: invalid YAML (%s)", where, problem);
    }
}

/* The text-level rules, before libyaml sees a byte.  The first three read
   exactly as JSON's (json_text.h), so both syntaxes say the same.  */
static int
check_text (const char *buf, size_t len, sp_error_t *err)
{
  const uint8_t *s = (const uint8_t *)buf;
  size_t bad, i = 0;

  if (len == 0)
    return sp_make_error (err, 0, SP_JSON_ROOT_PATH ": empty document");
  if (len >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF)
    return sp_make_error (err, 0, SP_JSON_ROOT_PATH ": byte order mark at byte 0");
  if (!sp_utf8_valid (s, len, &bad))
    return sp_make_error (err, 0, SP_JSON_ROOT_PATH ": invalid UTF-8 at byte %zu", bad);
  while (i < len)
    {
      uint32_t cp;
      size_t n = sp_utf8_decode (s + i, len - i, &cp);

      if (n == 0)
        return sp_make_error (err, 0, SP_JSON_ROOT_PATH ": invalid UTF-8 at byte %zu", i);
      if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || (cp >= 0x7F && cp <= 0x9F && cp != 0x85))
        return sp_make_error (err, 0, SP_JSON_ROOT_PATH ": control character U+%04X at byte %zu",
                              (unsigned)cp, i);
      if (cp == 0x85 || cp == 0x2028 || cp == 0x2029)
        return sp_make_error (err, 0,
                              SP_JSON_ROOT_PATH ": U+%04X at byte %zu is a line break in YAML 1.1 but not in "
                                                "YAML 1.2; write it as an escape in a double-quoted string",
                              (unsigned)cp, i);
      if (cp == 0xFEFF)
        return sp_make_error (err, 0, SP_JSON_ROOT_PATH ": byte order mark at byte %zu", i);
      i += n;
    }
  return 0;
}

static void
parser_cleanup (yaml_parser_t **p)
{
  if (*p != NULL)
    yaml_parser_delete (*p);
}

int
sp_yaml_tree_parse (const char *buf, size_t len, unsigned max_depth, struct sp_json **out, bool *not_yaml,
                    sp_error_t *err)
{
  struct reader r = { .err = err };
  yaml_parser_t parser;
  __attribute__ ((cleanup (parser_cleanup))) yaml_parser_t *p = NULL;
  int ret = -1;

  *out = NULL;
  *not_yaml = false;
  if (max_depth > SP_JSON_DEPTH_LIMIT)
    max_depth = SP_JSON_DEPTH_LIMIT;
  r.max_depth = max_depth;
  if (check_text (buf, len, err) < 0)
    return -1;
  if (!yaml_parser_initialize (&parser))
    return sp_make_error (err, ENOMEM, "allocate the YAML parser");
  p = &parser;
  yaml_parser_set_input_string (p, (const unsigned char *)buf, len);
  yaml_parser_set_encoding (p, YAML_UTF8_ENCODING);

  for (;;)
    {
      yaml_event_t ev;
      bool end;
      int step;

      if (!yaml_parser_parse (p, &ev))
        {
          *not_yaml = p->error != YAML_MEMORY_ERROR;
          syntax_error (&r, p);
          goto out;
        }
      step = on_event (&r, &ev);
      end = ev.type == YAML_STREAM_END_EVENT;
      yaml_event_delete (&ev);
      if (step < 0)
        goto out;
      if (end)
        break;
    }
  *out = sp_json_builder_take (&r.b);
  if (*out == NULL)
    {
      sp_make_error (err, 0, SP_JSON_ROOT_PATH ": incomplete YAML document");
      goto out;
    }
  ret = 0;

out:
  sp_json_builder_release (&r.b);
  return ret;
}

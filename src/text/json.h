/* A small, strict JSON tree for trusted-side documents (the config, the budget
   ledger).  Built from yajl's callback API after sp_json_text_check, never with
   yajl_tree_parse (which allows comments and stops at NUL).  Duplicate keys in
   any object are an error.  Not for /probe/out: result.h streams that.  */
#ifndef SP_TEXT_JSON_H
#define SP_TEXT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bounds.h"
#include "base/error.h"

enum sp_json_type
{
  SP_JSON_NULL,
  SP_JSON_BOOL,
  SP_JSON_NUMBER,
  SP_JSON_STRING,
  SP_JSON_ARRAY,
  SP_JSON_OBJECT,
};

struct sp_json;

struct sp_json_member
{
  char *key; /* decoded; NUL-free because the pre-pass forbids \u0000 */
  struct sp_json *value;
};

struct sp_json
{
  enum sp_json_type type;
  union
  {
    bool boolean;
    char *number; /* the number's text exactly as written */
    struct
    {
      char *data; /* decoded, NUL-terminated, strict UTF-8 */
      size_t len;
    } string;
    struct
    {
      struct sp_json **items;
      size_t len;
    } array;
    struct
    {
      struct sp_json_member *members; /* in document order */
      size_t len;
    } object;
  } u;
};

/* Parses the whole of buf[0..len), after sp_json_text_check with max_depth
   (capped at 1024, because the tree is freed recursively).  On error, the
   message names the path of the offending value in the form
   `sealedProbes.privateRepos[2]` (the root is `(document)`) where it is known,
   and the reason.  */
int sp_json_parse (const char *buf, size_t len, unsigned max_depth, struct sp_json **out, sp_error_t *err);

/* sp_json_parse, also saying what kind of failure it was: *not_json is set
   when the text is not JSON at all (the lexical pre-pass or yajl's grammar
   refused it, or it ended early), and cleared when it is JSON that breaks a
   rule of the tree (a duplicate key) or memory ran out.  The config loader
   tries YAML only after the former (config.h).  */
int sp_json_parse_checked (const char *buf, size_t len, unsigned max_depth, struct sp_json **out,
                           bool *not_json, sp_error_t *err);

void sp_json_free (struct sp_json *value);

static inline void
sp_json_freep (struct sp_json **value)
{
  sp_json_free (*value);
  *value = NULL;
}
#define cleanup_json __attribute__ ((cleanup (sp_json_freep)))

/* The member's value, or NULL when obj is not an object or has no such key.  */
const struct sp_json *sp_json_object_get (const struct sp_json *obj, const char *key);

/* Reads a number written as a plain decimal integer (optional '-', no leading
   zeros, no fraction, no exponent) within [min, max].  Returns 0, or -1 when
   the value is not such a number or is out of range.  Pure; sets no error.  */
int sp_json_integer (const struct sp_json *value, int64_t min, int64_t max, int64_t *out);

/* Error paths.  The root is SP_JSON_ROOT_PATH; a member whose key is a plain
   word reads `parent.key` (just `key` at the root), any other key reads
   `parent["k.e y"]`; an array item reads `parent[2]`.  */
#define SP_JSON_ROOT_PATH "(document)"

/* The path of parent's member key, or of parent's item index; parent may be
   SP_JSON_ROOT_PATH or NULL for the root.  Allocated; NULL when out of memory.  */
char *sp_json_path_key (const char *parent, const char *key);
char *sp_json_path_index (const char *parent, size_t index);

/* s[0..len) (strict UTF-8) as a double-quoted, printable-ASCII string: quotes
   and backslashes escaped, control and non-ASCII characters as \uXXXX,
   truncated to SP_JSON_ECHO_MAX_CHARS characters with "...".  For KEYS only:
   never echo a string value, which may hold a credential.  Allocated; NULL
   when out of memory.  */
char *sp_json_quote (const char *s, size_t len);

#endif

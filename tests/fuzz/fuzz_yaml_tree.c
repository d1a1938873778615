/* libFuzzer harness for the strict YAML reader (sp_yaml_tree_parse) and the
   config loader's YAML and sniffing paths.  Beyond "no crash, no leak", it
   checks what a tree promises: the depth cap, strict UTF-8 strings and keys
   with no NUL, no key twice in a mapping, and numbers written as JSON
   writes them; and that every message is one printable line.  */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/utf8.h"
#include "text/config.h"
#include "text/json.h"
#include "text/yaml_tree.h"

#include "fuzz.h"

/* A small cap, so that the depth rule is reached often.  */
#define DEPTH 8

static bool
is_digit (char c)
{
  return c >= '0' && c <= '9';
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?, written out again.  */
static bool
json_number_ok (const char *s)
{
  if (*s == '-')
    s++;
  if (*s == '0')
    s++;
  else if (*s >= '1' && *s <= '9')
    while (is_digit (*s))
      s++;
  else
    return false;
  if (*s == '.')
    {
      if (!is_digit (*++s))
        return false;
      while (is_digit (*s))
        s++;
    }
  if (*s == 'e' || *s == 'E')
    {
      s++;
      if (*s == '+' || *s == '-')
        s++;
      if (!is_digit (*s))
        return false;
      while (is_digit (*s))
        s++;
    }
  return *s == '\0';
}

static bool
text_ok (const char *s, size_t len)
{
  return memchr (s, '\0', len) == NULL && sp_utf8_valid ((const uint8_t *)s, len, NULL);
}

static void
check_tree (const struct sp_json *v, unsigned depth)
{
  FUZZ_REQUIRE (v != NULL);
  switch (v->type)
    {
    case SP_JSON_NULL:
    case SP_JSON_BOOL:
      break;
    case SP_JSON_NUMBER:
      FUZZ_REQUIRE (json_number_ok (v->u.number));
      break;
    case SP_JSON_STRING:
      FUZZ_REQUIRE (v->u.string.data[v->u.string.len] == '\0');
      FUZZ_REQUIRE (text_ok (v->u.string.data, v->u.string.len));
      break;
    case SP_JSON_ARRAY:
      FUZZ_REQUIRE (depth < DEPTH);
      for (size_t i = 0; i < v->u.array.len; i++)
        check_tree (v->u.array.items[i], depth + 1);
      break;
    case SP_JSON_OBJECT:
      FUZZ_REQUIRE (depth < DEPTH);
      for (size_t i = 0; i < v->u.object.len; i++)
        {
          const char *key = v->u.object.members[i].key;

          FUZZ_REQUIRE (text_ok (key, strlen (key)));
          /* Quadratic, but the fuzzer's inputs are small.  */
          for (size_t j = 0; j < i; j++)
            FUZZ_REQUIRE (strcmp (key, v->u.object.members[j].key) != 0);
          check_tree (v->u.object.members[i].value, depth + 1);
        }
      break;
    default:
      FUZZ_REQUIRE (false);
    }
}

static void
run_config (const char *data, size_t size, enum sp_config_syntax syntax)
{
  struct sp_config *config = NULL;
  sp_error_t err = NULL;
  int ret = sp_config_parse_syntax (data, size, syntax, &config, &err);

  if (ret == 0)
    FUZZ_REQUIRE (config != NULL && err == NULL);
  else
    FUZZ_REQUIRE (ret == -1 && config == NULL && fuzz_message_ok (sp_error_message (err)));
  sp_config_free (config);
  sp_error_release (&err);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct sp_json *tree = NULL;
  sp_error_t err = NULL;
  bool not_yaml = true;
  int ret;

  /* The loader never sees more than this; the reader has no cap of its own.  */
  if (size > SP_CONFIG_MAX_BYTES)
    return 0;

  ret = sp_yaml_tree_parse ((const char *)data, size, DEPTH, &tree, &not_yaml, &err);
  if (ret == 0)
    {
      FUZZ_REQUIRE (tree != NULL && err == NULL && !not_yaml);
      check_tree (tree, 0);
    }
  else
    {
      FUZZ_REQUIRE (ret == -1 && tree == NULL && fuzz_message_ok (sp_error_message (err)));
      /* A refusal of the syntax is libyaml's, reported as such.  */
      FUZZ_REQUIRE (!not_yaml || strstr (sp_error_message (err), "invalid YAML") != NULL);
    }
  sp_json_free (tree);
  sp_error_release (&err);

  run_config ((const char *)data, size, SP_CONFIG_SYNTAX_YAML);
  run_config ((const char *)data, size, SP_CONFIG_SYNTAX_SNIFF);
  return 0;
}

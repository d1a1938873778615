/* libFuzzer harness for the ref parsers of git_seed.c: the ref name check,
   a HEAD or loose ref file, and the packed-refs lookup.  The input is a ref
   name, a NUL, then file content (with no NUL, the whole input is both);
   each part goes in as an exactly-sized heap copy.  Invariants:
   - the name check agrees with the rules written out again below;
   - a ref file gives a 40 or 64 hex commit or a valid ref name, and is
     exactly that followed by a newline (after "ref: " for a name);
   - a packed-refs lookup that finds the name gives a commit from a line
     `<commit> <name>`; one that does not find it saw no such line;
   - every failure sets a one-line printable message.  */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "seed/git_seed.h"

#include "fuzz.h"
#include "seed/git_parse.h"

/* A loose ref file is read up to SP_GIT_REF_FILE_MAX_BYTES; packed-refs may
   be far bigger, but a few KiB of it reach every branch.  */
#define INPUT_MAX_BYTES (64 * 1024)

static size_t
hex_prefix (const char *s, size_t len)
{
  size_t n = 0;

  while (n < len && ((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
    n++;
  return n;
}

static bool
has (const char *s, size_t len, const char *needle)
{
  return memmem (s, len, needle, strlen (needle)) != NULL;
}

/* git-check-ref-format's rules, plus "refs/" first and no ".lock" at the
   end of any component, checked component by component.  */
static bool
reference_ref_name_ok (const char *name, size_t len)
{
  size_t start = 5;

  if (len < 6 || len > SP_GIT_REF_NAME_MAX || memcmp (name, "refs/", 5) != 0)
    return false;
  if (name[len - 1] == '/' || name[len - 1] == '.' || has (name, len, "..") || has (name, len, "@{"))
    return false;
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f || memchr (" ~^:?*[\\", name[i], 8) != NULL)
      return false;
  while (start <= len)
    {
      const char *slash = memchr (name + start, '/', len - start);
      size_t end = slash ? (size_t)(slash - name) : len;
      size_t clen = end - start;

      if (clen == 0 || name[start] == '.')
        return false;
      if (clen >= 5 && memcmp (name + end - 5, ".lock", 5) == 0)
        return false;
      start = end + 1;
    }
  return true;
}

static void
fuzz_ref_file (const char *buf, size_t len)
{
  char commit[SP_COMMIT_HEX_MAX + 1];
  char target[SP_GIT_REF_NAME_MAX + 1];
  sp_error_t err = NULL;
  int ret = sp_git_parse_ref_file ("HEAD", buf, len, commit, target, &err);

  if (ret == 0)
    {
      size_t n = strlen (commit);

      FUZZ_REQUIRE (err == NULL && fuzz_commit_id_ok (commit));
      FUZZ_REQUIRE (len == n + 1 && memcmp (buf, commit, n) == 0 && buf[n] == '\n');
    }
  else if (ret == 1)
    {
      size_t n = strlen (target);
      cleanup_free char *copy = fuzz_exact_copy (target, n);

      FUZZ_REQUIRE (err == NULL && sp_git_ref_name_ok (copy, n));
      FUZZ_REQUIRE (len == n + 6 && memcmp (buf, "ref: ", 5) == 0);
      FUZZ_REQUIRE (memcmp (buf + 5, target, n) == 0 && buf[len - 1] == '\n');
    }
  else
    {
      FUZZ_REQUIRE (ret == -1 && fuzz_message_ok (sp_error_message (err)));
      FUZZ_REQUIRE (strncmp (sp_error_message (err), "`HEAD` ", 7) == 0);
      sp_error_release (&err);
    }
}

static void
fuzz_packed_refs (const char *buf, size_t len, const char *name)
{
  char commit[SP_COMMIT_HEX_MAX + 1];
  size_t name_len = strlen (name);
  sp_error_t err = NULL;
  int ret = sp_git_packed_refs_find (buf, len, name, commit, &err);

  if (ret < 0)
    {
      FUZZ_REQUIRE (ret == -1 && fuzz_message_ok (sp_error_message (err)));
      FUZZ_REQUIRE (strncmp (sp_error_message (err), "packed-refs line ", 17) == 0);
      sp_error_release (&err);
      return;
    }
  FUZZ_REQUIRE (err == NULL);
  if (ret == 1)
    FUZZ_REQUIRE (fuzz_commit_id_ok (commit) && reference_ref_name_ok (name, name_len));
  else
    FUZZ_REQUIRE (ret == 0 && (len == 0 || buf[len - 1] == '\n'));
  /* The first line `<id> <name>` is the match, and only a match.  */
  for (size_t pos = 0; pos < len;)
    {
      const char *line = buf + pos;
      const char *nl = memchr (line, '\n', len - pos);
      size_t ll = nl ? (size_t)(nl - line) : len - pos;
      size_t id = hex_prefix (line, ll);

      pos += ll + 1;
      if ((id == 40 || id == 64) && ll == id + 1 + name_len && line[id] == ' '
          && memcmp (line + id + 1, name, name_len) == 0)
        {
          FUZZ_REQUIRE (ret == 1 && strlen (commit) == id && memcmp (line, commit, id) == 0);
          return;
        }
    }
  FUZZ_REQUIRE (ret == 0);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const uint8_t *nul = memchr (data, '\0', size);
  size_t name_len = nul ? (size_t)(nul - data) : size;
  const uint8_t *content = nul ? nul + 1 : data;
  size_t content_len = nul ? size - name_len - 1 : size;
  cleanup_free char *name = NULL;
  cleanup_free char *name_str = NULL;
  cleanup_free char *buf = NULL;

  if (size > INPUT_MAX_BYTES)
    return 0;
  name = fuzz_exact_copy (data, name_len);
  FUZZ_REQUIRE (sp_git_ref_name_ok (name, name_len) == reference_ref_name_ok (name, name_len));

  buf = fuzz_exact_copy (content, content_len);
  if (content_len <= SP_GIT_REF_FILE_MAX_BYTES)
    fuzz_ref_file (buf, content_len);

  name_str = malloc (name_len + 1);
  FUZZ_REQUIRE (name_str != NULL);
  memcpy (name_str, data, name_len);
  name_str[name_len] = '\0';
  fuzz_packed_refs (buf, content_len, name_str);
  return 0;
}

/* Repository names: see src/base/repo_name.h.  Every message is a
   fixed text that never quotes the value: an operator who pastes a clone URL
   with a token in it must not find the token in a log.  The checks run from
   the most telling diagnosis (a URL, credentials) to the plainest.  */
#include "base/repo_name.h"

#include <stdbool.h>
#include <string.h>

#include "base/bounds.h"

static bool
is_lower_alnum (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool
contains (const char *s, size_t len, const char *needle)
{
  size_t n = strlen (needle);

  for (size_t i = 0; i + n <= len; i++)
    if (memcmp (s + i, needle, n) == 0)
      return true;
  return false;
}

static const char *
find_byte (const char *s, size_t len, char c)
{
  return memchr (s, c, len);
}

/* True when one of the "/"-separated parts of s is exactly part.  */
static bool
has_part (const char *s, size_t len, const char *part)
{
  size_t n = strlen (part);
  size_t start = 0;

  for (size_t i = 0; i <= len; i++)
    if (i == len || s[i] == '/')
      {
        if (i - start == n && memcmp (s + start, part, n) == 0)
          return true;
        start = i + 1;
      }
  return false;
}

/* Bytes that can never appear, reported before anything else.  */
static int
check_bytes (const char *s, size_t len, sp_error_t *err)
{
  for (size_t i = 0; i < len; i++)
    {
      unsigned char c = (unsigned char)s[i];

      if (c == 0)
        return sp_make_error (err, 0, "must be \"owner/repo\" (found a NUL byte)");
      if (c >= 0x80)
        return sp_make_error (err, 0, "must be \"owner/repo\" in ASCII (found a non-ASCII byte)");
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')
        return sp_make_error (err, 0, "must be \"owner/repo\" (found whitespace)");
      if (c < 0x20 || c == 0x7F)
        return sp_make_error (err, 0, "must be \"owner/repo\" (found a control character)");
    }
  return 0;
}

/* Clone URLs, SSH addresses, globs and web links pasted where a name belongs.  */
static int
check_url_forms (const char *s, size_t len, sp_error_t *err)
{
  const char *at = find_byte (s, len, '@');
  const char *scheme = NULL;

  for (size_t i = 0; i + 3 <= len; i++)
    if (memcmp (s + i, "://", 3) == 0)
      {
        scheme = s + i;
        break;
      }
  if (at)
    {
      /* user:token@ — a colon between the scheme (if any) and the "@".  */
      const char *from = scheme ? scheme + 3 : s;
      if (from < at && find_byte (from, (size_t)(at - from), ':'))
        return sp_make_error (err, 0,
                              "must be \"owner/repo\", not a URL with credentials (found \"user:token@\"); "
                              "the credential must not be in the config");
      if (scheme)
        return sp_make_error (err, 0, "must be \"owner/repo\", not a URL (found \"://\" and \"@\")");
      return sp_make_error (err, 0,
                            "must be \"owner/repo\", not an SSH address or credentials (found \"@\")");
    }
  if (scheme)
    return sp_make_error (err, 0, "must be \"owner/repo\", not a URL (found \"://\")");
  if (find_byte (s, len, ':'))
    return sp_make_error (err, 0, "must be \"owner/repo\", not a URL or SSH address (found \":\")");
  if (find_byte (s, len, '?'))
    return sp_make_error (err, 0, "must be \"owner/repo\" (found \"?\", a URL query or a wildcard)");
  if (find_byte (s, len, '#'))
    return sp_make_error (err, 0, "must be \"owner/repo\" (found \"#\", a URL fragment)");
  if (find_byte (s, len, '*') || find_byte (s, len, '[') || find_byte (s, len, ']'))
    return sp_make_error (err, 0,
                          "must be one exact \"owner/repo\" (found a wildcard: \"*\", \"[\" or \"]\")");
  return 0;
}

/* Filesystem-looking forms: these names become directory names on the host.  */
static int
check_path_forms (const char *s, size_t len, sp_error_t *err)
{
  const char *slash;

  if (s[0] == '/')
    return sp_make_error (err, 0, "must be \"owner/repo\" (found a leading \"/\")");
  if (has_part (s, len, ".."))
    return sp_make_error (err, 0, "must be \"owner/repo\" (found a \"..\" path part: traversal)");
  if (has_part (s, len, "."))
    return sp_make_error (err, 0, "must be \"owner/repo\" (found a \".\" path part)");
  slash = find_byte (s, len, '/');
  if (slash && find_byte (s, (size_t)(slash - s), '.'))
    return sp_make_error (err, 0,
                          "must be \"owner/repo\", not a URL (found a host name such as \"github.com/\")");
  return 0;
}

static int
check_owner (const char *s, size_t len, sp_error_t *err)
{
  if (len > SP_REPO_OWNER_MAX)
    return sp_make_error (err, 0, "owner must be at most %d characters", SP_REPO_OWNER_MAX);
  for (size_t i = 0; i < len; i++)
    if (!is_lower_alnum (s[i]) && s[i] != '-')
      return sp_make_error (err, 0, "owner may contain only a-z, 0-9 and \"-\"");
  if (s[0] == '-' || s[len - 1] == '-')
    return sp_make_error (err, 0, "owner must not start or end with \"-\"");
  if (contains (s, len, "--"))
    return sp_make_error (err, 0, "owner must not contain \"--\"");
  return 0;
}

static int
check_repo (const char *s, size_t len, sp_error_t *err)
{
  if (len > SP_REPO_NAME_MAX)
    return sp_make_error (err, 0, "repository name must be at most %d characters", SP_REPO_NAME_MAX);
  for (size_t i = 0; i < len; i++)
    if (!is_lower_alnum (s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
      return sp_make_error (err, 0, "repository name may contain only a-z, 0-9, \".\", \"_\" and \"-\"");
  if (len >= 4 && memcmp (s + len - 4, ".git", 4) == 0)
    return sp_make_error (err, 0, "must be \"owner/repo\" without a \".git\" suffix");
  return 0;
}

int
sp_repo_name_check (const char *s, size_t len, sp_error_t *err)
{
  const char *slash;
  size_t owner_len;

  if (s == NULL || len == 0)
    return sp_make_error (err, 0, "must be \"owner/repo\" (found an empty string)");
  if (check_bytes (s, len, err) < 0 || check_url_forms (s, len, err) < 0
      || check_path_forms (s, len, err) < 0)
    return -1;

  for (size_t i = 0; i < len; i++)
    if (s[i] >= 'A' && s[i] <= 'Z')
      return sp_make_error (err, 0, "must be lowercase \"owner/repo\" (found an uppercase letter)");

  slash = find_byte (s, len, '/');
  if (slash == NULL)
    return sp_make_error (err, 0, "must be \"owner/repo\" (found no \"/\")");
  if (contains (s, len, "//"))
    return sp_make_error (err, 0, "must be \"owner/repo\" (found an empty part: \"//\")");
  if (s[len - 1] == '/')
    return sp_make_error (err, 0, "must be \"owner/repo\" (found an empty part: a trailing \"/\")");
  if (find_byte (slash + 1, len - (size_t)(slash + 1 - s), '/'))
    return sp_make_error (err, 0, "must be \"owner/repo\" (found more than one \"/\")");

  /* A leading "/" was refused above, so the owner is not empty; nor is the
     repository, since the name does not end in "/".  */
  owner_len = (size_t)(slash - s);
  if (check_owner (s, owner_len, err) < 0)
    return -1;
  return check_repo (slash + 1, len - owner_len - 1, err);
}

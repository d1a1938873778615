/* rootfs.lock parsing: see lock.h.  */
#define _GNU_SOURCE
#include "rootfs/lock.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "os/fileio.h"

#define LOCK_FIELDS 4

#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_ (x)

static bool
is_lower_alnum (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool
is_digit (char c)
{
  return c >= '0' && c <= '9';
}

/* Debian policy 5.6.1: lowercase letters, digits, '+', '-', '.'; at least two
   characters, starting with a letter or digit.  */
static const char *
check_name (const char *s, size_t len)
{
  if (len < 2 || len > SP_LOCK_NAME_MAX)
    return "must be 2 to " STRINGIFY (SP_LOCK_NAME_MAX) " characters";
  if (!is_lower_alnum (s[0]))
    return "must start with a lowercase letter or a digit";
  for (size_t i = 1; i < len; i++)
    if (!is_lower_alnum (s[i]) && s[i] != '+' && s[i] != '-' && s[i] != '.')
      return "may hold only lowercase letters, digits, '+', '-' and '.'";
  return NULL;
}

/* Debian policy 5.6.12: [EPOCH:]UPSTREAM[-REVISION].  The epoch is digits;
   the rest starts with a digit and holds letters, digits, ". + ~ -".  */
static const char *
check_version (const char *s, size_t len)
{
  size_t i = 0;

  if (len == 0 || len > SP_LOCK_VERSION_MAX)
    return "must be 1 to " STRINGIFY (SP_LOCK_VERSION_MAX) " characters";
  while (i < len && is_digit (s[i]))
    i++;
  if (i < len && s[i] == ':')
    {
      if (i == 0)
        return "has an empty epoch before ':'";
      i++;
    }
  else
    i = 0;
  if (i == len || !is_digit (s[i]))
    return "must start (after any epoch) with a digit";
  for (; i < len; i++)
    {
      char c = s[i];
      if (!is_lower_alnum (c) && !(c >= 'A' && c <= 'Z') && c != '.' && c != '+' && c != '~' && c != '-')
        return "may hold only letters, digits, '.', '+', '~', '-' and one epoch ':'";
    }
  if (s[len - 1] == '-')
    return "has an empty revision after '-'";
  return NULL;
}

static const char *
check_arch (const char *s, size_t len)
{
  if (len == 0 || len > SP_LOCK_ARCH_MAX)
    return "must be 1 to " STRINGIFY (SP_LOCK_ARCH_MAX) " characters";
  for (size_t i = 0; i < len; i++)
    if (!is_lower_alnum (s[i]) && s[i] != '-')
      return "may hold only lowercase letters, digits and '-'";
  return NULL;
}

static int
hex_value (char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

static const char *
check_sha256 (const char *s, size_t len, uint8_t out[SP_SHA256_BYTES])
{
  if (len != SP_SHA256_HEX)
    return "must be exactly 64 lowercase hex digits";
  for (size_t i = 0; i < SP_SHA256_BYTES; i++)
    {
      int hi = hex_value (s[2 * i]);
      int lo = hex_value (s[2 * i + 1]);
      if (hi < 0 || lo < 0)
        return "must be exactly 64 lowercase hex digits";
      out[i] = (uint8_t)(hi << 4 | lo);
    }
  return NULL;
}

/* Splits line[0..len) at single spaces into exactly LOCK_FIELDS fields.  */
static bool
split_fields (const char *line, size_t len, const char *field[LOCK_FIELDS], size_t field_len[LOCK_FIELDS])
{
  size_t n = 0;
  size_t start = 0;

  for (size_t i = 0; i <= len; i++)
    {
      if (i < len && line[i] != ' ')
        continue;
      if (i == start || n == LOCK_FIELDS)
        return false; /* an empty field (two spaces, or a leading or trailing space), or too many */
      field[n] = line + start;
      field_len[n] = i - start;
      n++;
      start = i + 1;
    }
  return n == LOCK_FIELDS;
}

static int
parse_entry (const char *line, size_t len, unsigned lineno, struct sp_lock_entry *e, sp_error_t *err)
{
  static const char *const names[LOCK_FIELDS] = { "NAME", "VERSION", "ARCH", "SHA256" };
  const char *field[LOCK_FIELDS];
  size_t field_len[LOCK_FIELDS];
  const char *why;

  if (!split_fields (line, len, field, field_len))
    return sp_make_error (err, 0, "line %u: expected NAME VERSION ARCH SHA256, separated by single spaces",
                          lineno);
  for (int i = 0; i < LOCK_FIELDS; i++)
    {
      switch (i)
        {
        case 0:
          why = check_name (field[i], field_len[i]);
          break;
        case 1:
          why = check_version (field[i], field_len[i]);
          break;
        case 2:
          why = check_arch (field[i], field_len[i]);
          break;
        default:
          why = check_sha256 (field[i], field_len[i], e->sha256);
          break;
        }
      if (why)
        return sp_make_error (err, 0, "line %u: field %s: %s", lineno, names[i], why);
    }
  memcpy (e->name, field[0], field_len[0]);
  e->name[field_len[0]] = '\0';
  memcpy (e->version, field[1], field_len[1]);
  e->version[field_len[1]] = '\0';
  memcpy (e->arch, field[2], field_len[2]);
  e->arch[field_len[2]] = '\0';
  e->line = lineno;
  return 0;
}

int
sp_lock_parse (const char *text, size_t len, struct sp_lock *out, sp_error_t *err)
{
  cleanup_free struct sp_lock_entry *entries = NULL;
  size_t count = 0;
  size_t pos = 0;
  unsigned lineno = 0;

  if (len == 0)
    return sp_make_error (err, 0, "the lock is empty");
  if (memchr (text, '\0', len))
    return sp_make_error (err, 0, "the lock holds a NUL byte");
  if (text[len - 1] != '\n')
    return sp_make_error (err, 0, "the lock does not end with a newline");

  entries = calloc (SP_LOCK_MAX_PACKAGES, sizeof (*entries));
  if (entries == NULL)
    return sp_make_error (err, errno, "allocate the lock");

  while (pos < len)
    {
      const char *line = text + pos;
      const char *nl = memchr (line, '\n', len - pos);
      size_t line_len = (size_t)(nl - line);

      pos += line_len + 1;
      lineno++;
      if (memchr (line, '\r', line_len))
        return sp_make_error (err, 0, "line %u: carriage return (the lock uses \\n line ends)", lineno);
      if (lineno == 1)
        {
          if (line_len != strlen (SP_LOCK_HEADER) || memcmp (line, SP_LOCK_HEADER, line_len) != 0)
            return sp_make_error (err, 0, "line 1: must be `%s` (the lock format)", SP_LOCK_HEADER);
          continue;
        }
      if (line_len == 0 || line[0] == '#')
        continue;
      if (count == SP_LOCK_MAX_PACKAGES)
        return sp_make_error (err, 0, "line %u: more than %d packages", lineno, SP_LOCK_MAX_PACKAGES);
      if (parse_entry (line, line_len, lineno, &entries[count], err) < 0)
        return -1;
      for (size_t i = 0; i < count; i++)
        if (strcmp (entries[i].name, entries[count].name) == 0)
          return sp_make_error (err, 0, "line %u: field NAME: `%s` is already pinned on line %u", lineno,
                                entries[count].name, entries[i].line);
      count++;
    }
  if (count == 0)
    return sp_make_error (err, 0, "the lock pins no package");

  out->count = count;
  out->entries = get_and_reset (&entries);
  return 0;
}

int
sp_lock_load (const char *path, struct sp_lock *out, sp_error_t *err)
{
  cleanup_free char *text = NULL;
  size_t len;

  if (sp_read_path_capped (path, SP_LOCK_MAX_BYTES, &text, &len, err) < 0)
    return sp_error_wrap (err, "read the lock");
  if (sp_lock_parse (text, len, out, err) < 0)
    return sp_error_wrap (err, "`%s`", path);
  return 0;
}

void
sp_lock_release (struct sp_lock *lock)
{
  free (lock->entries);
  lock->entries = NULL;
  lock->count = 0;
}

void
sp_lock_deb_filename (const struct sp_lock_entry *entry, char out[SP_LOCK_DEB_NAME_SIZE])
{
  size_t n = 0;

  for (const char *s = entry->name; *s; s++)
    out[n++] = *s;
  out[n++] = '_';
  for (const char *s = entry->version; *s; s++)
    {
      if (*s == ':')
        {
          memcpy (out + n, "%3a", 3);
          n += 3;
        }
      else
        out[n++] = *s;
    }
  out[n++] = '_';
  for (const char *s = entry->arch; *s; s++)
    out[n++] = *s;
  memcpy (out + n, ".deb", 5);
}

/* Git metadata without git: see src/seed/git_seed.h and
   docs/staging.md ("Git metadata: what is kept, removed and refused").  Every
   path below the git directory is a constant or a ref name that passed
   sp_git_ref_name_ok, and is opened with sp_open_beneath: never through a
   symlink, never outside.  The pure parsers are declared in git_parse.h.  */
#define _GNU_SOURCE
#include "seed/git_seed.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "os/dir_names.h"
#include "os/fileio.h"
#include "os/open_beneath.h"
#include "tree/remove.h"

#include "seed/git_parse.h"

/* ---- Reading the commit ------------------------------------------------ */

static bool
is_lower_hex (char c)
{
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* The length of the commit id at s (40 or 64 lowercase hex digits followed by
   a byte that is not hex), or 0.  */
static size_t
hex_id_len (const char *s, size_t len)
{
  size_t n = 0;

  while (n < len && is_lower_hex (s[n]))
    n++;
  return n == 40 || n == 64 ? n : 0;
}

bool
sp_git_ref_name_ok (const char *name, size_t len)
{
  size_t comp_start = 5;

  if (len < 6 || len > SP_GIT_REF_NAME_MAX || strncmp (name, "refs/", 5) != 0)
    return false;
  if (name[len - 1] == '/' || name[len - 1] == '.')
    return false;
  /* From the first component after "refs/": starting at 0 made the '/' at 4
     end a component before comp_start, and read name[-1].  */
  for (size_t i = comp_start; i < len; i++)
    {
      unsigned char c = (unsigned char)name[i];

      if (c < 0x20 || c == 0x7f || strchr (" ~^:?*[\\", c) != NULL)
        return false;
      if (c == '.' && i + 1 < len && name[i + 1] == '.')
        return false;
      if (c == '@' && i + 1 < len && name[i + 1] == '{')
        return false;
      if (c == '/' || i + 1 == len)
        {
          size_t end = c == '/' ? i : len;
          size_t clen = end - comp_start;

          if (clen == 0 || name[comp_start] == '.')
            return false;
          if (clen >= 5 && memcmp (name + end - 5, ".lock", 5) == 0)
            return false;
          comp_start = i + 1;
        }
    }
  return true;
}

/* Reads a small regular file below gitdirfd, never through a symlink.
   Returns 1 with its bytes, 0 when it does not exist, -1 on error.  */
static int
read_git_file (int gitdirfd, const char *path, size_t cap, char **out, size_t *len, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;

  fd = sp_open_beneath (gitdirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    {
      if (errno == ENOENT)
        return 0;
      if (errno == ELOOP || errno == EXDEV || errno == ENOTDIR)
        return sp_make_error (err, 0, "`%s` is or passes through a symlink or a non-directory: refused",
                              path);
      return sp_make_error (err, errno, "open `%s`", path);
    }
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "stat `%s`", path);
  if (!S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "`%s` is not a regular file", path);
  if (sp_read_fd_capped (fd, cap, out, len, err) < 0)
    return sp_error_wrap (err, "read `%s`", path);
  return 1;
}

int
sp_git_packed_refs_find (const char *buf, size_t len, const char *name, char commit[SP_COMMIT_HEX_MAX + 1],
                         sp_error_t *err)
{
  size_t name_len = strlen (name);
  unsigned line_no = 0;
  bool after_ref = false;

  for (size_t pos = 0; pos < len;)
    {
      const char *line = buf + pos;
      const char *nl = memchr (line, '\n', len - pos);
      size_t ll, id;

      line_no++;
      if (nl == NULL)
        return sp_make_error (err, 0, "packed-refs line %u: no newline at the end", line_no);
      ll = (size_t)(nl - line);
      pos += ll + 1;
      if (line_no == 1 && ll >= 17 && memcmp (line, "# pack-refs with:", 17) == 0)
        continue;
      if (ll > 0 && line[0] == '^')
        {
          if (!after_ref || hex_id_len (line + 1, ll - 1) != ll - 1)
            return sp_make_error (err, 0, "packed-refs line %u: not a peeled id after a ref", line_no);
          after_ref = false;
          continue;
        }
      id = hex_id_len (line, ll);
      if (id == 0 || id + 1 >= ll || line[id] != ' ' || !sp_git_ref_name_ok (line + id + 1, ll - id - 1))
        return sp_make_error (err, 0, "packed-refs line %u: not `<id> <ref name>`", line_no);
      after_ref = true;
      if (ll - id - 1 == name_len && memcmp (line + id + 1, name, name_len) == 0)
        {
          memcpy (commit, line, id);
          commit[id] = '\0';
          return 1;
        }
    }
  return 0;
}

/* Looks name up in packed-refs.  Returns 1 and fills commit, 0 when it is not
   there, -1 on error.  */
static int
packed_ref (int gitdirfd, const char *name, char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err)
{
  cleanup_free char *buf = NULL;
  size_t len = 0;
  int ret;

  ret = read_git_file (gitdirfd, "packed-refs", SP_GIT_PACKED_REFS_MAX_BYTES, &buf, &len, err);
  if (ret <= 0)
    return ret;
  return sp_git_packed_refs_find (buf, len, name, commit, err);
}

int
sp_git_parse_ref_file (const char *what, const char *buf, size_t len, char commit[SP_COMMIT_HEX_MAX + 1],
                       char target[SP_GIT_REF_NAME_MAX + 1], sp_error_t *err)
{
  size_t id = hex_id_len (buf, len);

  if (id > 0 && len == id + 1 && buf[id] == '\n')
    {
      memcpy (commit, buf, id);
      commit[id] = '\0';
      return 0;
    }
  if (len > 6 && memcmp (buf, "ref: ", 5) == 0 && buf[len - 1] == '\n')
    {
      size_t name_len = len - 6;

      if (memchr (buf + 5, '\n', name_len) != NULL || !sp_git_ref_name_ok (buf + 5, name_len))
        return sp_make_error (err, 0, "`%s` names a symbolic ref that is not a valid ref name under refs/",
                              what);
      memcpy (target, buf + 5, name_len);
      target[name_len] = '\0';
      return 1;
    }
  return sp_make_error (err, 0, "`%s` holds neither a commit id nor `ref: refs/...`", what);
}

int
sp_git_read_commit (int gitdirfd, char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err)
{
  char name[SP_GIT_REF_NAME_MAX + 1];
  char head_target[SP_GIT_REF_NAME_MAX + 1];
  cleanup_free char *buf = NULL;
  size_t len = 0;
  int ret;

  ret = read_git_file (gitdirfd, "HEAD", SP_GIT_REF_FILE_MAX_BYTES, &buf, &len, err);
  if (ret < 0)
    return -1;
  if (ret == 0)
    return sp_make_error (err, 0, "there is no HEAD");
  ret = sp_git_parse_ref_file ("HEAD", buf, len, commit, name, err);
  if (ret <= 0)
    return ret;
  strcpy (head_target, name);

  for (int level = 1;; level++)
    {
      char target[SP_GIT_REF_NAME_MAX + 1];

      free (get_and_reset (&buf));
      ret = read_git_file (gitdirfd, name, SP_GIT_REF_FILE_MAX_BYTES, &buf, &len, err);
      if (ret < 0)
        return -1;
      if (ret == 0)
        {
          ret = packed_ref (gitdirfd, name, commit, err);
          if (ret < 0)
            return -1;
          if (ret == 1)
            return 0;
          if (level == 1)
            return sp_make_error (err, 0, "HEAD points at %s, which has no commit", name);
          return sp_make_error (
              err, 0, "HEAD points at %s, which through symbolic refs leads to %s, which has no commit",
              head_target, name);
        }
      ret = sp_git_parse_ref_file (name, buf, len, commit, target, err);
      if (ret <= 0)
        return ret;
      if (level >= SP_GIT_SYMREF_MAX_DEPTH)
        return sp_make_error (err, 0,
                              "HEAD points at %s, and its symbolic refs nest more than %d levels (a loop?)",
                              head_target, SP_GIT_SYMREF_MAX_DEPTH);
      strcpy (name, target);
    }
}

/* ---- The config: a small strict parser, only to read two values -------- */

struct config_parser
{
  const char *s;
  size_t len;
  size_t pos;
  unsigned line;
  char section[64];
  bool has_subsection;
  bool in_section;
};

static int
config_error (struct config_parser *p, sp_error_t *err, const char *what)
{
  return sp_make_error (err, 0, "`.git/config` line %u: %s", p->line, what);
}

static int
peek (const struct config_parser *p)
{
  return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static void
skip_blanks (struct config_parser *p)
{
  while (peek (p) == ' ' || peek (p) == '\t' || peek (p) == '\r')
    p->pos++;
}

/* After a header or a value: only blanks and a comment to the end of the
   line.  */
static int
end_of_line (struct config_parser *p, sp_error_t *err)
{
  skip_blanks (p);
  if (peek (p) == '#' || peek (p) == ';')
    while (peek (p) != -1 && peek (p) != '\n')
      p->pos++;
  if (peek (p) == '\n')
    {
      p->pos++;
      p->line++;
      return 0;
    }
  if (peek (p) == -1)
    return 0;
  return config_error (p, err, "unexpected text at the end of the line");
}

static int
parse_section (struct config_parser *p, sp_error_t *err)
{
  size_t n = 0;

  p->pos++; /* [ */
  p->has_subsection = false;
  while (isalnum (peek (p)) || peek (p) == '-' || peek (p) == '.')
    {
      if (n + 1 >= sizeof (p->section))
        return config_error (p, err, "section name too long");
      p->section[n++] = (char)tolower (peek (p));
      p->pos++;
    }
  p->section[n] = '\0';
  if (n == 0)
    return config_error (p, err, "bad section name");
  if (peek (p) == ' ' || peek (p) == '\t')
    {
      skip_blanks (p);
      if (peek (p) != '"')
        return config_error (p, err, "bad section header");
      for (p->pos++;; p->pos++)
        {
          int c = peek (p);
          if (c == -1 || c == '\n' || c == '\0')
            return config_error (p, err, "unterminated subsection name");
          if (c == '"')
            break;
          if (c == '\\')
            {
              p->pos++;
              if (peek (p) == -1 || peek (p) == '\n' || peek (p) == '\0')
                return config_error (p, err, "unterminated subsection name");
            }
        }
      p->pos++; /* " */
      p->has_subsection = true;
    }
  if (peek (p) != ']')
    return config_error (p, err, "bad section header");
  p->pos++;
  p->in_section = true;
  return end_of_line (p, err);
}

/* A value: quotes, the escapes \\ \" \n \t \b, comments outside quotes,
   backslash-newline continuations, trailing blanks dropped.  It stops before
   a comment or the newline: the caller checks the end of the line.  */
static int
parse_value (struct config_parser *p, char *out, size_t cap, sp_error_t *err)
{
  bool quoted = false;
  size_t n = 0;
  size_t keep = 0; /* n without trailing unquoted blanks */

  skip_blanks (p);
  for (;;)
    {
      int c = peek (p);

      if (c == -1 || (c == '\n' && !quoted))
        break;
      if (c == '\0')
        return config_error (p, err, "a NUL byte");
      if (c == '\n')
        return config_error (p, err, "unterminated quoted value");
      if (!quoted && (c == '#' || c == ';'))
        break;
      p->pos++;
      if (c == '"')
        {
          quoted = !quoted;
          continue;
        }
      if (c == '\\')
        {
          int e = peek (p);
          p->pos++;
          switch (e)
            {
            case '\n':
              p->line++;
              continue;
            case 'n':
              c = '\n';
              break;
            case 't':
              c = '\t';
              break;
            case 'b':
              c = '\b';
              break;
            case '\\':
            case '"':
              c = e;
              break;
            default:
              return config_error (p, err, "bad escape in a value");
            }
          if (n + 1 >= cap)
            return config_error (p, err, "value too long");
          out[n++] = (char)c;
          keep = n;
          continue;
        }
      if (n + 1 >= cap)
        return config_error (p, err, "value too long");
      out[n++] = (char)c;
      if (quoted || (c != ' ' && c != '\t' && c != '\r'))
        keep = n;
    }
  if (quoted)
    return config_error (p, err, "unterminated quoted value");
  out[keep] = '\0';
  return 0;
}

static int
apply_value (struct config_parser *p, const char *key, const char *value, bool has_value,
             struct sp_git_format *f, sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];

  if (p->has_subsection)
    return 0;
  if (strcmp (p->section, "core") == 0 && strcmp (key, "repositoryformatversion") == 0)
    {
      if (!has_value || (strcmp (value, "0") != 0 && strcmp (value, "1") != 0))
        return config_error (p, err, "core.repositoryformatversion is neither 0 nor 1");
      f->version = value[0] - '0';
      return 0;
    }
  if (strcmp (p->section, "extensions") != 0)
    return 0;
  if (strcmp (key, "objectformat") != 0)
    return sp_make_error (err, 0,
                          "`.git/config` sets the repository extension extensions.%s, which is not supported",
                          sp_quote_name (key, q));
  if (has_value && strcasecmp (value, "sha1") == 0)
    f->sha256 = false;
  else if (has_value && strcasecmp (value, "sha256") == 0)
    f->sha256 = true;
  else
    return config_error (p, err, "extensions.objectformat is neither sha1 nor sha256");
  f->objectformat = true;
  return 0;
}

int
sp_git_parse_config (const char *s, size_t len, struct sp_git_format *f, sp_error_t *err)
{
  struct config_parser p = { .s = s, .len = len, .line = 1 };
  cleanup_free char *value = malloc (SP_GIT_CONFIG_VALUE_MAX);

  if (value == NULL)
    return sp_make_error (err, errno, "allocate a config value");
  f->version = 0;
  f->sha256 = false;
  f->objectformat = false;
  while (p.pos < p.len)
    {
      char key[64];
      size_t n = 0;
      bool has_value = false;
      int c;

      skip_blanks (&p);
      c = peek (&p);
      if (c == -1)
        break;
      if (c == '\n' || c == '#' || c == ';')
        {
          if (end_of_line (&p, err) < 0)
            return -1;
          continue;
        }
      if (c == '[')
        {
          if (parse_section (&p, err) < 0)
            return -1;
          continue;
        }
      if (!isalpha (c))
        return config_error (&p, err, "expected a section header or a key");
      if (!p.in_section)
        return config_error (&p, err, "a key before any section");
      while (isalnum (peek (&p)) || peek (&p) == '-')
        {
          if (n + 1 >= sizeof (key))
            return config_error (&p, err, "key too long");
          key[n++] = (char)tolower (peek (&p));
          p.pos++;
        }
      key[n] = '\0';
      skip_blanks (&p);
      if (peek (&p) == '=')
        {
          p.pos++;
          has_value = true;
          if (parse_value (&p, value, SP_GIT_CONFIG_VALUE_MAX, err) < 0)
            return -1;
        }
      if (apply_value (&p, key, value, has_value, f, err) < 0)
        return -1;
      if (end_of_line (&p, err) < 0)
        return -1;
    }
  if (f->sha256 && f->version != 1)
    return sp_make_error (err, 0, "`.git/config` asks for sha256 objects with repositoryformatversion %d",
                          f->version);
  return 0;
}

/* ---- Sanitizing --------------------------------------------------------- */

/* Fails naming path when it exists below dirfd (or cannot be looked at
   without following a symlink).  */
static int
refuse_if_present (int dirfd, const char *shown_prefix, const char *path, const char *why, sp_error_t *err)
{
  int fd = sp_open_beneath (dirfd, path, O_PATH | O_NOFOLLOW);

  if (fd >= 0)
    {
      close (fd);
      return sp_make_error (err, 0, "`%s%s` is present: %s, which is refused", shown_prefix, path, why);
    }
  if (errno == ENOENT)
    return 0;
  if (errno == ELOOP || errno == EXDEV || errno == ENOTDIR)
    return sp_make_error (err, 0, "`%s%s` passes through a symlink or a non-directory: refused", shown_prefix,
                          path);
  return sp_make_error (err, errno, "look for `%s%s`", shown_prefix, path);
}

/* The whole seed, once: no nested `.git` below the top, and inside `.git`
   nothing but directories and regular files.  */
static int
scan_tree (int dirfd, char *path, size_t path_len, unsigned depth, bool in_git, sp_error_t *err)
{
  cleanup_dir_names struct sp_dir_names names = { 0 };
  char q[SP_QUOTE_BUF_SIZE];

  if (depth > SP_COPY_DEPTH_CEILING)
    return sp_make_error (err, 0, "`%s` is too deep", sp_quote_name (path, q));
  if (sp_dir_names_read (dirfd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s`", sp_quote_name (*path ? path : ".", q));
  for (size_t i = 0; i < names.len; i++)
    {
      const char *name = names.v[i];
      ssize_t child_len = sp_dir_child_path (path, SP_TREE_PATH_MAX, path_len, name);
      struct stat st;

      if (child_len < 0)
        return sp_make_error (err, 0, "a path below `%s` is too long", sp_quote_name (path, q));

      if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_make_error (err, errno, "stat `%s`", sp_quote_name (path, q));
      if (!in_git && depth > 0 && strcasecmp (name, ".git") == 0)
        return sp_make_error (err, 0, "`%s` is a nested git repository or link (a submodule?): refused",
                              sp_quote_name (path, q));
      if (!S_ISDIR (st.st_mode) && !S_ISREG (st.st_mode) && !(S_ISLNK (st.st_mode) && !in_git))
        return sp_make_error (err, 0, "`%s` is %s: refused", sp_quote_name (path, q),
                              S_ISLNK (st.st_mode) ? "a symlink inside `.git`"
                                                   : "not a directory, file or symlink");
      if (S_ISDIR (st.st_mode))
        {
          cleanup_close int child = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

          if (child < 0)
            return sp_make_error (err, errno, "open `%s`", sp_quote_name (path, q));
          if (scan_tree (child, path, (size_t)child_len, depth + 1,
                         in_git || (depth == 0 && strcmp (name, ".git") == 0), err)
              < 0)
            return -1;
        }
      path[path_len] = '\0';
    }
  return 0;
}

/* What stays in `.git`, and as what.  */
static const struct
{
  const char *name;
  bool dir;
  bool required;
} kept[] = {
  { "HEAD", false, true },         { "objects", true, true },       { "refs", true, true },
  { "packed-refs", false, false }, { "index", false, false },       { "shallow", false, false },
  { "info", true, false },         { "description", false, false },
};

/* sharedindex.<id>: the split index that `index` may point at.  */
static bool
is_shared_index (const char *name)
{
  size_t len = strlen (name);

  return strncmp (name, "sharedindex.", 12) == 0 && hex_id_len (name + 12, len - 12) == len - 12;
}

static int
prune_git_dir (int gitfd, sp_error_t *err)
{
  cleanup_dir_names struct sp_dir_names names = { 0 };
  char q[SP_QUOTE_BUF_SIZE];
  bool present[sizeof (kept) / sizeof (kept[0])] = { false };

  if (sp_dir_names_read (gitfd, &names, err) < 0)
    return sp_error_wrap (err, "list `.git`");
  for (size_t n = 0; n < names.len; n++)
    {
      const char *name = names.v[n];
      struct stat st;
      bool keep = false;

      if (fstatat (gitfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_make_error (err, errno, "stat `.git/%s`", sp_quote_name (name, q));
      for (size_t i = 0; i < sizeof (kept) / sizeof (kept[0]); i++)
        if (strcmp (name, kept[i].name) == 0)
          {
            if (kept[i].dir ? !S_ISDIR (st.st_mode) : !S_ISREG (st.st_mode))
              return sp_make_error (err, 0, "`.git/%s` is not a %s", kept[i].name,
                                    kept[i].dir ? "directory" : "regular file");
            present[i] = keep = true;
          }
      if (!keep && S_ISREG (st.st_mode) && is_shared_index (name))
        keep = true;
      if (!keep && sp_tree_remove_at (gitfd, name, err) < 0)
        return sp_error_wrap (err, "prune `.git`");
    }
  for (size_t i = 0; i < sizeof (kept) / sizeof (kept[0]); i++)
    if (kept[i].required && !present[i])
      return sp_make_error (err, 0, "`.git/%s` is missing", kept[i].name);
  return 0;
}

int
sp_git_config_render (const struct sp_git_format *f, char text[SP_GIT_FRESH_CONFIG_SIZE], sp_error_t *err)
{
  int n;

  n = snprintf (text, SP_GIT_FRESH_CONFIG_SIZE,
                "[core]\n\trepositoryformatversion = %d\n\tfilemode = true\n\tbare = false\n%s", f->version,
                f->sha256 ? "[extensions]\n\tobjectformat = sha256\n" : "");
  if (n < 0 || n >= SP_GIT_FRESH_CONFIG_SIZE)
    return sp_make_error (err, 0, "format the new `.git/config`");
  return n;
}

static int
write_fresh_config (int gitfd, const struct sp_git_format *f, const struct stat *owner, sp_error_t *err)
{
  char text[SP_GIT_FRESH_CONFIG_SIZE];
  int n;

  n = sp_git_config_render (f, text, err);
  if (n < 0)
    return -1;
  if (sp_write_file_atomic_at (gitfd, "config", text, (size_t)n, 0644, err) < 0)
    return sp_error_wrap (err, "write `.git/config`");
  if (fchownat (gitfd, "config", owner->st_uid, owner->st_gid, AT_SYMLINK_NOFOLLOW) < 0)
    return sp_make_error (err, errno, "chown `.git/config`");
  return 0;
}

static int
make_empty_hooks (int gitfd, const struct stat *owner, sp_error_t *err)
{
  if (mkdirat (gitfd, "hooks", 0755) < 0)
    return sp_make_error (err, errno, "create `.git/hooks`");
  if (fchownat (gitfd, "hooks", owner->st_uid, owner->st_gid, AT_SYMLINK_NOFOLLOW) < 0)
    return sp_make_error (err, errno, "chown `.git/hooks`");
  if (fchmodat (gitfd, "hooks", 0755, 0) < 0)
    return sp_make_error (err, errno, "chmod `.git/hooks`");
  return 0;
}

int
sp_git_refuse_gitmodules (int seed_dirfd, sp_error_t *err)
{
  struct stat st;

  if (fstatat (seed_dirfd, ".gitmodules", &st, AT_SYMLINK_NOFOLLOW) == 0)
    return sp_make_error (
        err, 0,
        "`.gitmodules` is present: the repository declares submodules (its tarball does not say "
        "which directories they are), refused, as sealedProbes.submodules.reject lists it");
  if (errno != ENOENT)
    return sp_make_error (err, errno, "look for `.gitmodules`");
  return 0;
}

int
sp_git_dir_open (int dirfd, sp_error_t *err)
{
  cleanup_close int gitfd = -1;
  struct stat st, opened;

  if (fstatat (dirfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? sp_make_error (err, 0, "there is no `.git`: not a git clone")
                           : sp_make_error (err, errno, "stat `.git`");
  if (S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "`.git` is a file (a worktree or gitdir link): refused");
  if (!S_ISDIR (st.st_mode))
    return sp_make_error (err, 0, "`.git` is not a directory: refused");
  gitfd = openat (dirfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (gitfd < 0)
    return sp_make_error (err, errno, "open `.git`");
  if (fstat (gitfd, &opened) < 0)
    return sp_make_error (err, errno, "stat `.git`");
  if (opened.st_dev != st.st_dev || opened.st_ino != st.st_ino)
    return sp_make_error (err, 0, "`.git` changed while it was opened");
  return get_and_reset_fd (&gitfd);
}

int
sp_git_sanitize (int dirfd, char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err)
{
  static const struct
  {
    const char *path;
    const char *why;
  } refused[] = {
    { "objects/info/alternates", "alternates borrow objects from another repository" },
    { "objects/info/http-alternates", "alternates borrow objects from another repository" },
    { "worktrees", "linked worktrees" },
    { "commondir", "a linked worktree's common directory" },
    /* The copy leaves it out (git_stage.h): here, something else put it.  */
    { "modules", "a submodule's repository, which staging never copies" },
  };
  cleanup_close int gitfd = -1;
  cleanup_free char *config = NULL;
  char path[SP_TREE_PATH_MAX];
  struct sp_git_format format = { 0 };
  struct stat st;
  size_t config_len = 0;
  int ret;

  gitfd = sp_git_dir_open (dirfd, err);
  if (gitfd < 0)
    return -1;
  if (fstat (gitfd, &st) < 0)
    return sp_make_error (err, errno, "stat `.git`");

  /* Refuse first, before anything changes.  */
  for (size_t i = 0; i < sizeof (refused) / sizeof (refused[0]); i++)
    if (refuse_if_present (gitfd, ".git/", refused[i].path, refused[i].why, err) < 0)
      return -1;
  path[0] = '\0';
  if (scan_tree (dirfd, path, 0, 0, false, err) < 0)
    return -1;
  ret = read_git_file (gitfd, "config", SP_GIT_CONFIG_MAX_BYTES, &config, &config_len, err);
  if (ret < 0)
    return -1;
  if (memchr (config ? config : "", '\0', config_len) != NULL)
    return sp_make_error (err, 0, "`.git/config` holds a NUL byte");
  if (sp_git_parse_config (config ? config : "", config_len, &format, err) < 0)
    return -1;

  /* Then keep only what is needed, and write the rest fresh.  */
  if (prune_git_dir (gitfd, err) < 0)
    return -1;
  if (make_empty_hooks (gitfd, &st, err) < 0)
    return -1;
  if (write_fresh_config (gitfd, &format, &st, err) < 0)
    return -1;

  if (sp_git_read_commit (gitfd, commit, err) < 0)
    return -1;
  if (strlen (commit) != (format.sha256 ? 64u : 40u))
    return sp_make_error (err, 0, "HEAD's commit id has %zu hex digits, but the repository uses %s",
                          strlen (commit), format.sha256 ? "sha256" : "sha1");
  return 0;
}

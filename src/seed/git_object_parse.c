/* Parsing a commit's, a tree's and a tag's links: see git_object_parse.h.  */
#include "seed/git_object_parse.h"

#include <string.h>

/* "WORD ID\n" at *at, with a 40-hex SHA-1 id.  1 when the line is there, 0
   when the next line is not WORD, -1 when it is but is malformed.  */
static int
id_line (const unsigned char *data, size_t len, size_t *at, const char *word, git_oid *id)
{
  size_t w = strlen (word);
  size_t line = w + 1 + GIT_OID_HEXSZ + 1;

  if (len - *at < w + 1 || memcmp (data + *at, word, w) != 0 || data[*at + w] != ' ')
    return 0;
  if (len - *at < line || data[*at + line - 1] != '\n')
    return -1;
  for (size_t i = 0; i < GIT_OID_HEXSZ; i++)
    {
      unsigned char c = data[*at + w + 1 + i];

      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
        return -1;
    }
  if (git_oid_fromstrn (id, (const char *)data + *at + w + 1, GIT_OID_HEXSZ) < 0)
    return -1;
  *at += line;
  return 1;
}

int
sp_git_commit_tree (const unsigned char *data, size_t len, size_t *at, git_oid *tree)
{
  *at = 0;
  return id_line (data, len, at, "tree", tree) == 1 ? 0 : -1;
}

int
sp_git_commit_next_parent (const unsigned char *data, size_t len, size_t *at, git_oid *parent)
{
  return id_line (data, len, at, "parent", parent);
}

int
sp_git_tag_target (const unsigned char *data, size_t len, git_oid *target)
{
  size_t at = 0;

  return id_line (data, len, &at, "object", target) == 1 ? 0 : -1;
}

int
sp_git_tree_next (const unsigned char *data, size_t len, size_t *at, struct sp_git_tree_entry *e)
{
  size_t i = *at;
  const unsigned char *nul;

  if (i == len)
    return 0;
  e->mode = 0;
  /* git writes modes without leading zeros, at most 6 octal digits.  */
  for (size_t digits = 0; i < len && data[i] != ' '; i++, digits++)
    {
      if (data[i] < '0' || data[i] > '7' || digits == 6)
        return -1;
      e->mode = e->mode * 8 + (uint32_t)(data[i] - '0');
    }
  if (i == *at || i == len)
    return -1;
  i++;
  nul = memchr (data + i, '\0', len - i);
  if (nul == NULL || nul == data + i || (size_t)(data + len - nul) < 1 + GIT_OID_RAWSZ)
    return -1;
  e->name = (const char *)data + i;
  e->name_len = (size_t)(nul - (data + i));
  git_oid_fromraw (&e->id, nul + 1);
  *at = (size_t)(nul + 1 + GIT_OID_RAWSZ - data);
  return 1;
}

git_object_t
sp_git_tree_entry_type (uint32_t mode)
{
  switch (mode & 0170000)
    {
    case 0040000:
      return GIT_OBJECT_TREE;
    case 0160000:
      return GIT_OBJECT_COMMIT;
    default:
      return GIT_OBJECT_BLOB;
    }
}
